// SPDX-License-Identifier: MIT OR Apache-2.0
//! Random operations against a model, with I/O faults and crashes: see `checks::ops_model`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::ops_model(data));
