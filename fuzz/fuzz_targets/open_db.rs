// SPDX-License-Identifier: MIT OR Apache-2.0
//! A small database with one file mutated, opened and read: see `checks::open_db`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::open_db(data));
