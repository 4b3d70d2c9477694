// SPDX-License-Identifier: MIT OR Apache-2.0
//! The log reader on arbitrary bytes, in both modes: it must never panic, and every record it
//! returns must be one the bytes really hold (a record's fragments all passed their checksums,
//! so re-reading the same bytes gives the same records).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use strata::env::write_file;
use strata::log::{LogReader, ReadMode};
use strata::{Env, MemEnv, WriteBatch};

fn read_all(env: &MemEnv, mode: ReadMode) -> Vec<Vec<u8>> {
    let path = Path::new("/f.log");
    let file = env.new_sequential_file(path).unwrap();
    let mut reader = LogReader::new(file, path, mode);
    let mut out = Vec::new();
    while let Ok(Some(record)) = reader.next_record() {
        // Every record also goes through the write-batch decoder, as recovery does.
        let _ = WriteBatch::decode(record);
        out.push(record.to_vec());
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let env = MemEnv::new();
    write_file(&env, Path::new("/f.log"), data, false).unwrap();
    let strict = read_all(&env, ReadMode::Strict);
    let tolerant = read_all(&env, ReadMode::Tolerant);
    // Strict mode stops at the first damage; up to there it agrees with tolerant mode.
    assert!(tolerant.len() >= strict.len());
    assert_eq!(&tolerant[..strict.len()], &strict[..]);
});
