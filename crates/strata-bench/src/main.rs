// SPDX-License-Identifier: MIT OR Apache-2.0
//! db_bench: LevelDB's benchmark suite, run on strata and, with cargo features, on its peers.
//!
//! `cargo run --release --bin db_bench` runs the baseline suite on strata in a temporary
//! directory. `--engine=leveldb` (feature `leveldb`) runs the same suite, with the same key and
//! value generator and timing loop, on LevelDB 1.23.

mod engine;
mod generator;
mod report;
mod suite;

use clap::Parser;

/// Command-line flags, spelled as LevelDB's db_bench spells them.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "db_bench",
    about = "LevelDB's benchmark suite, run on strata",
    rename_all = "snake_case"
)]
pub struct Flags {
    /// Comma-separated benchmarks to run, in order.
    #[arg(
        long,
        default_value = "fillseq,fillrandom,overwrite,fillbatch,readrandom,readseq,readreverse"
    )]
    pub benchmarks: String,
    /// The engine to run: strata, or (with the matching cargo feature) leveldb.
    #[arg(long, default_value = "strata")]
    pub engine: String,
    /// Number of entries.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Number of reads for read benchmarks; negative means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub reads: i64,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// How well values compress (compressed size / raw size).
    #[arg(long, default_value_t = 0.5)]
    pub compression_ratio: f64,
    /// Block cache size in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub cache_size: usize,
    /// Memtable size in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub write_buffer_size: usize,
    /// Bloom filter bits per key; negative means no filter.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub bloom_bits: i64,
    /// Store blocks uncompressed.
    #[arg(long)]
    pub no_compression: bool,
    /// Do not verify block checksums on reads (LevelDB's default; strata verifies).
    #[arg(long)]
    pub no_verify_checksums: bool,
    /// Directory for the databases (default: a new temporary directory, removed at the end).
    #[arg(long)]
    pub db: Option<std::path::PathBuf>,
}

impl Flags {
    /// Reads for read benchmarks.
    pub fn reads(&self) -> u64 {
        u64::try_from(self.reads).unwrap_or(self.num)
    }
}

fn main() {
    let flags = Flags::parse();
    let tmp;
    let dir = match &flags.db {
        Some(d) => d.clone(),
        None => match tempfile::tempdir() {
            Ok(t) => {
                tmp = t;
                tmp.path().to_path_buf()
            }
            Err(e) => {
                eprintln!("db_bench: cannot create a temporary directory: {e}");
                std::process::exit(1);
            }
        },
    };
    report::print_header(&flags, &flags.engine);
    if let Err(e) = suite::run(&flags, &dir) {
        eprintln!("db_bench: {e}");
        std::process::exit(1);
    }
    if let Some(kib) = suite::peak_rss_kib() {
        println!("peak memory: {:.1} MB", kib as f64 / 1024.0);
    }
}
