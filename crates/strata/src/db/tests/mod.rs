// SPDX-License-Identifier: MIT OR Apache-2.0
//! Database tests on the in-memory env: the API, recovery, flushes and compactions, a module
//! each, with the options and helpers they share here.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::env::MemEnv;
use crate::version::NUM_LEVELS;
use crate::Comparator;

mod api;
mod background;
mod misuse;
mod open;
mod read_only;
mod spare_cursor;
mod stats;

fn options(env: &MemEnv) -> Options {
    Options {
        create_if_missing: true,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()))
}

fn small_options(env: &MemEnv) -> Options {
    Options {
        write_buffer_size: 64 << 10,
        max_file_size: 1 << 20,
        block_size: 1024,
        ..options(env)
    }
}

const DIR: &str = "/db";

/// Descending bytewise order, for tests of custom comparators.
struct Reverse;

impl Comparator for Reverse {
    fn name(&self) -> &str {
        "test.Reverse"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        b.cmp(a)
    }
    fn find_shortest_separator(&self, _: &mut Vec<u8>, _: &[u8]) {}
    fn find_short_successor(&self, _: &mut Vec<u8>) {}
}

fn w() -> WriteOptions {
    WriteOptions::default()
}

fn r() -> ReadOptions<'static> {
    ReadOptions::default()
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan_opt(&r()).unwrap().map(Result::unwrap).collect()
}
