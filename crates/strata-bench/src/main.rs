// SPDX-License-Identifier: MIT OR Apache-2.0
//! db_bench: LevelDB's benchmark suite for strata.
//!
//! Until the database layer lands (issue #3), the suite runs LevelDB's benchmark names against
//! strata's table layer: `fillseq` builds one sorted table of `--num` entries through
//! `TableBuilder`, and the read benchmarks read it back through `Table` with a block cache of
//! `--cache_size` bytes. The key and value generator and the report format are the ones the full
//! suite will use.

mod generator;
mod report;
mod table_suite;

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
        default_value = "fillseq,readseq,readreverse,readrandom,readmissing"
    )]
    pub benchmarks: String,
    /// Number of entries.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Number of reads for random-read benchmarks; negative means --num.
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
    /// Bloom filter bits per key; negative means no filter.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub bloom_bits: i64,
    /// Store blocks uncompressed.
    #[arg(long)]
    pub no_compression: bool,
    /// Directory for the benchmark's files (default: a new temporary directory).
    #[arg(long)]
    pub db: Option<std::path::PathBuf>,
}

impl Flags {
    /// Reads for random-read benchmarks.
    pub fn reads(&self) -> u64 {
        u64::try_from(self.reads).unwrap_or(self.num)
    }
}

fn main() {
    let flags = Flags::parse();
    if let Err(e) = table_suite::run(&flags) {
        eprintln!("db_bench: {e}");
        std::process::exit(1);
    }
}
