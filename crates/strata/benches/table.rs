// SPDX-License-Identifier: MIT OR Apache-2.0
//! Table benchmarks: build a table of 1,000,000 entries (16-byte keys, 100-byte values), iterate
//! it forward and backward, and look up points with and without the block cache and the bloom
//! filter. Figures go into docs/benchmarks.md.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::cache::BlockCache;
use strata::filter::BloomFilterPolicy;
use strata::iter::InternalIterator;
use strata::key::{append_internal_key, user_key, ValueKind, MAX_SEQNO};
use strata::table::{BlockReadOptions, Table, TableBuilder, TableOptions};
use strata::{Env, PosixEnv};

const ENTRIES: u64 = 1_000_000;
const LOOKUPS: u64 = 10_000;

fn user(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

/// 100-byte values that compress to about half, as db_bench's do.
fn values() -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(301);
    let mut pool = Vec::with_capacity(1 << 20);
    while pool.len() < 1 << 20 {
        let half: Vec<u8> = (0..50).map(|_| rng.gen_range(b' '..=b'~')).collect();
        pool.extend_from_slice(&half);
        pool.extend_from_slice(&half);
    }
    pool
}

/// The entries of the benchmark table, made once so that building measures only the builder.
fn entries() -> &'static (Vec<Vec<u8>>, Vec<u8>) {
    static ENTRIES_CELL: OnceLock<(Vec<Vec<u8>>, Vec<u8>)> = OnceLock::new();
    ENTRIES_CELL.get_or_init(|| {
        let keys = (0..ENTRIES)
            .map(|i| {
                let mut ikey = Vec::with_capacity(24);
                append_internal_key(&mut ikey, &user(i), i + 1, ValueKind::Value);
                ikey
            })
            .collect();
        (keys, values())
    })
}

fn build(path: &Path, options: &TableOptions) -> u64 {
    let (keys, pool) = entries();
    let env = PosixEnv::new();
    let mut b = TableBuilder::new(options.clone(), env.new_writable_file(path).unwrap());
    for (i, ikey) in keys.iter().enumerate() {
        let at = (i * 100) % (pool.len() - 100);
        b.add(ikey, &pool[at..at + 100]).unwrap();
    }
    b.finish(false).unwrap()
}

fn open(
    path: &Path,
    options: &TableOptions,
    size: u64,
    cache: Option<Arc<BlockCache>>,
) -> Arc<Table> {
    let file = PosixEnv::new().new_random_access_file(path).unwrap();
    Arc::new(Table::open(options.clone(), file, path, size, cache).unwrap())
}

fn bloom_options() -> TableOptions {
    TableOptions {
        filter_policy: Some(Arc::new(BloomFilterPolicy::new(10))),
        ..TableOptions::default()
    }
}

fn bench_build(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.ldb");
    let mut g = c.benchmark_group("table_build");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(ENTRIES));
    for (name, options) in [
        ("plain", TableOptions::default()),
        ("bloom", bloom_options()),
    ] {
        g.bench_function(BenchmarkId::new("1m_entries", name), |b| {
            b.iter(|| build(&path, &options))
        });
    }
    g.finish();
}

fn bench_iterate(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.ldb");
    let options = TableOptions::default();
    let size = build(&path, &options);
    let table = open(
        &path,
        &options,
        size,
        Some(Arc::new(BlockCache::new(8 << 20))),
    );
    let mut g = c.benchmark_group("table_iterate");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(ENTRIES));
    for reverse in [false, true] {
        let name = if reverse { "backward" } else { "forward" };
        g.bench_function(BenchmarkId::new("1m_entries", name), |b| {
            b.iter(|| {
                let mut it = table.iter(BlockReadOptions::default());
                let mut n = 0u64;
                if reverse {
                    it.seek_to_last();
                } else {
                    it.seek_to_first();
                }
                while it.valid() {
                    n += it.value().len() as u64;
                    if reverse {
                        it.prev();
                    } else {
                        it.next();
                    }
                }
                assert_eq!(n, ENTRIES * 100);
                n
            })
        });
    }
    g.finish();
}

fn bench_get(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("table_get");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Elements(LOOKUPS));
    for (filter_name, options) in [
        ("no_bloom", TableOptions::default()),
        ("bloom10", bloom_options()),
    ] {
        let path = dir.path().join(format!("{filter_name}.ldb"));
        let size = build(&path, &options);
        // A cache larger than the table (every block cached after warm-up), and none at all.
        for (cache_name, cache) in [
            ("cache", Some(Arc::new(BlockCache::new(256 << 20)))),
            ("no_cache", None),
        ] {
            let table = open(&path, &options, size, cache);
            for present in [true, false] {
                let id = format!(
                    "{filter_name}/{cache_name}/{}",
                    if present { "present" } else { "absent" }
                );
                let mut rng = StdRng::seed_from_u64(7);
                g.bench_function(BenchmarkId::new("10k_random", id), |b| {
                    b.iter_batched(
                        || {
                            (0..LOOKUPS)
                                .map(|_| {
                                    let mut k = user(rng.gen_range(0..ENTRIES));
                                    if !present {
                                        k.push(b'.');
                                    }
                                    let mut ikey = Vec::with_capacity(32);
                                    append_internal_key(&mut ikey, &k, MAX_SEQNO, ValueKind::Value);
                                    ikey
                                })
                                .collect::<Vec<_>>()
                        },
                        |keys| {
                            let read = BlockReadOptions::default();
                            let mut found = 0u64;
                            for ikey in &keys {
                                let uk = user_key(ikey);
                                let hit = table.get(&read, ikey, |k, _| user_key(k) == uk).unwrap();
                                found += u64::from(hit == Some(true));
                            }
                            assert_eq!(found, if present { LOOKUPS } else { 0 });
                            found
                        },
                        BatchSize::LargeInput,
                    )
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench_build, bench_iterate, bench_get);
criterion_main!(benches);
