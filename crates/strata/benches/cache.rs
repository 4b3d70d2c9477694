// SPDX-License-Identifier: MIT OR Apache-2.0
//! The block-cache choice: strata's hand-written sharded LRU against `quick_cache`, on the access
//! pattern of db_bench's readrandom: two threads (this machine's cores) look up blocks of a table
//! 8 times larger than the cache, uniformly at random, and insert on a miss; and of readhot, where
//! every block fits. Each lookup clones an `Arc` to a 4 KiB block, as the table reader does.
//! It prints each cache's hit ratio, measured once outside the timing.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "baseline/lru.rs"]
#[allow(dead_code)]
mod lru;

use lru::LruCache;

const BLOCK: usize = 4096;
const CAPACITY: usize = 8 << 20;
const OPS_PER_THREAD: usize = 200_000;
const THREADS: usize = 2;

type Value = Arc<Vec<u8>>;
type MakeCache = fn() -> Arc<dyn Cache>;

trait Cache: Send + Sync {
    fn get(&self, key: (u64, u64)) -> Option<Value>;
    fn insert(&self, key: (u64, u64), value: Value);
}

impl Cache for LruCache<(u64, u64), Value> {
    fn get(&self, key: (u64, u64)) -> Option<Value> {
        LruCache::get(self, &key)
    }
    fn insert(&self, key: (u64, u64), value: Value) {
        let charge = value.len();
        LruCache::insert(self, key, value, charge)
    }
}

#[derive(Clone)]
struct ByLen;
impl quick_cache::Weighter<(u64, u64), Value> for ByLen {
    fn weight(&self, _key: &(u64, u64), value: &Value) -> u64 {
        value.len() as u64
    }
}

type Quick = quick_cache::sync::Cache<(u64, u64), Value, ByLen>;

impl Cache for Quick {
    fn get(&self, key: (u64, u64)) -> Option<Value> {
        Quick::get(self, &key)
    }
    fn insert(&self, key: (u64, u64), value: Value) {
        Quick::insert(self, key, value)
    }
}

/// Runs the workload; returns the hit count so the work cannot be optimised away.
fn workload(cache: &Arc<dyn Cache>, distinct_blocks: u64, block: &Value) -> usize {
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let cache = cache.clone();
            let block = block.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t as u64);
                let mut hits = 0;
                for _ in 0..OPS_PER_THREAD {
                    let key = (1, rng.gen_range(0..distinct_blocks) * BLOCK as u64);
                    match cache.get(key) {
                        Some(v) => hits += v.len() / BLOCK,
                        None => cache.insert(key, block.clone()),
                    }
                }
                hits
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

fn bench(c: &mut Criterion) {
    let block: Value = Arc::new(vec![0u8; BLOCK]);
    let mut g = c.benchmark_group("block_cache");
    g.sample_size(20).measurement_time(Duration::from_secs(6));
    g.throughput(Throughput::Elements((OPS_PER_THREAD * THREADS) as u64));
    // readrandom: 64 MB of blocks through an 8 MB cache; readhot: 4 MB, all of it fits.
    for (pattern, distinct) in [
        ("readrandom", (8 * CAPACITY / BLOCK) as u64),
        ("readhot", (CAPACITY / 2 / BLOCK) as u64),
    ] {
        let makers: [(&str, MakeCache); 2] = [
            ("strata_lru", || {
                Arc::new(LruCache::<(u64, u64), Value>::new(CAPACITY, 16))
            }),
            ("quick_cache", || {
                Arc::new(Quick::with_weighter(
                    CAPACITY / BLOCK,
                    CAPACITY as u64,
                    ByLen,
                ))
            }),
        ];
        for (name, make) in makers {
            // The hit ratio, measured once outside the timing.
            let hits = workload(&make(), distinct, &block);
            eprintln!(
                "block_cache/{pattern}/{name}: hit ratio {:.3}",
                hits as f64 / (OPS_PER_THREAD * THREADS) as f64
            );
            g.bench_function(BenchmarkId::new(pattern, name), |b| {
                b.iter_batched(
                    make,
                    |cache| workload(&cache, distinct, &block),
                    criterion::BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
