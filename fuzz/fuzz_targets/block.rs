// SPDX-License-Identifier: MIT OR Apache-2.0
//! A block parsed from arbitrary bytes: parsing and every cursor movement must never panic, and
//! forward and backward scans must agree whenever neither reports an error.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata::bytewise;
use strata::iter::InternalIterator;
use strata::table::Block;

fuzz_target!(|data: &[u8]| {
    let Ok(block) = Block::new(data.to_vec(), Arc::from(Path::new("/f.ldb")), 0) else {
        return;
    };
    let block = Arc::new(block);
    let mut it = block.iter(bytewise());
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
    let backward_ok = it.status().is_ok();
    if forward_ok && backward_ok {
        backward.reverse();
        assert_eq!(forward, backward);
    }
    for probe in [&b""[..], b"a", b"key", &data[..data.len().min(8)]] {
        it.seek(probe);
        if it.valid() {
            let _ = (it.key(), it.value());
            it.prev();
        }
    }
});
