// SPDX-License-Identifier: MIT OR Apache-2.0
//! The database's tests, one test binary (one link step): its model test, concurrency,
//! recovery, repair, key-value separation, checkpoints and close, compatibility with the
//! LevelDB fixtures, the panic sweep and the concurrency stress test.
//!
//! The panic sweep (`panics`) is here rather than with the fault tests: it panics on purpose,
//! and the fault sweeps assert that no thread of their binary panicked.

mod blobs;
mod checkpoint;
mod compat;
mod concurrency;
mod model;
mod panics;
mod range_deletes;
mod recovery;
mod repair;
mod stress;
