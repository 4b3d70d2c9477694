// SPDX-License-Identifier: MIT OR Apache-2.0
//! A table opened from arbitrary bytes (with and without a bloom filter policy): opening, full
//! scans both ways, seeks and point lookups must never panic, and with checksums verified a
//! scan that reports no error must agree in both directions.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata::env::write_file;
use strata::filter::BloomFilterPolicy;
use strata::iter::InternalIterator;
use strata::table::{BlockReadOptions, Table, TableOptions};
use strata::{Env, MemEnv};

fuzz_target!(|data: &[u8]| {
    let env = MemEnv::new();
    let path = Path::new("/000001.ldb");
    write_file(&env, path, data, false).unwrap();
    for filter in [false, true] {
        let options = TableOptions {
            filter_policy: filter.then(|| Arc::new(BloomFilterPolicy::new(10)) as _),
            ..TableOptions::default()
        };
        let file = env.new_random_access_file(path).unwrap();
        let Ok(table) = Table::open(options, file, path, data.len() as u64, None) else {
            continue;
        };
        let table = Arc::new(table);
        for verify_checksums in [true, false] {
            let read = BlockReadOptions {
                verify_checksums,
                fill_cache: false,
            };
            let mut it = table.iter(read);
            let mut forward = Vec::new();
            it.seek_to_first();
            while it.valid() && forward.len() < 100_000 {
                forward.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            let forward_ok = it.status().is_ok();
            let mut backward = Vec::new();
            it.seek_to_last();
            while it.valid() && backward.len() < 100_000 {
                backward.push((it.key().to_vec(), it.value().to_vec()));
                it.prev();
            }
            if verify_checksums && forward_ok && it.status().is_ok() {
                backward.reverse();
                assert_eq!(forward, backward);
            }
            for (k, _) in forward.iter().take(16) {
                let _ = table.get(&read, k, |k, v| (k.len(), v.len()));
                it.seek(k);
            }
            let _ = table.approximate_offset_of(b"key\x01\x00\x00\x00\x00\x00\x00\x00");
        }
    }
});
