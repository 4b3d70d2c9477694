// SPDX-License-Identifier: MIT OR Apache-2.0
//! Arbitrary bytes as a database's MANIFEST, opened and read: see `checks::manifest`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::manifest(data));
