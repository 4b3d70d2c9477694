// SPDX-License-Identifier: MIT OR Apache-2.0
//! The log reader on arbitrary bytes, in every mode: see `checks::log_reader`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::log_reader(data));
