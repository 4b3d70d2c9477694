// SPDX-License-Identifier: MIT OR Apache-2.0
//! Faults, crashes and damage, one test binary (one link step): injected I/O errors, the fault
//! sweeps on the in-memory and on real file systems, the crash-state enumeration and the
//! corruption sweep.
//!
//! No test here panics on purpose: the sweeps count the panics of every thread in this binary
//! (`strata_testkit::count_panics`) and assert that there were none.

mod corruption_sweep;
mod crash_states;
mod db_faults;
mod fault_sweep;
mod posix_faults;
