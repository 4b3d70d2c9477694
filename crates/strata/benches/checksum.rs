// SPDX-License-Identifier: MIT OR Apache-2.0
//! CRC32C, as strata computes it (`strata::coding::crc32c`, from `crc-fast`), against the
//! `crc32c` crate it replaced, at a log record's, a block's and a large value's size. Figures
//! go into docs/benchmarks.md ("Checksums").

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strata::coding::{crc32c, crc32c_extend};

fn checksums(c: &mut Criterion) {
    let mut group = c.benchmark_group("crc32c");
    for len in [100usize, 4096, 100_000] {
        let data: Vec<u8> = (0..len).map(|i| ((i * 131) >> 3) as u8).collect();
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("strata", len), &data, |b, d| {
            b.iter(|| crc32c(std::hint::black_box(d)))
        });
        group.bench_with_input(BenchmarkId::new("crc32c crate", len), &data, |b, d| {
            b.iter(|| crc32c::crc32c(std::hint::black_box(d)))
        });
        // A block's trailer extends the block's CRC with its one type byte.
        group.bench_with_input(BenchmarkId::new("strata extend", len), &data, |b, d| {
            b.iter(|| crc32c_extend(0x1234_5678, std::hint::black_box(d)))
        });
        group.bench_with_input(
            BenchmarkId::new("crc32c crate append", len),
            &data,
            |b, d| b.iter(|| crc32c::crc32c_append(0x1234_5678, std::hint::black_box(d))),
        );
    }
    group.finish();
}

criterion_group!(benches, checksums);
criterion_main!(benches);
