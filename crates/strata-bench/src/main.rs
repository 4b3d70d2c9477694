// SPDX-License-Identifier: MIT OR Apache-2.0
//! db_bench: LevelDB's benchmark suite, run on strata and, with cargo features, on its peers.
//!
//! `cargo run --release --bin db_bench` runs the baseline suite on strata in a temporary
//! directory. `--engine=NAME` runs the same suite, with the same key and value generator and
//! timing loop, on another engine built in with its cargo feature (`--features peers` builds
//! them all). `--compare` runs the benchmark reports' configurations on every engine and writes
//! an HTML report with charts and a Markdown table (see `compare/`).

mod compare;
mod engine;
mod generator;
mod histogram;
mod measure;
mod report;
mod suite;

use clap::{Parser, ValueEnum};

/// LevelDB's default suite, as its db_bench runs it, plus the benchmarks the reports added.
const DEFAULT_BENCHMARKS: &str = "fillseq,fillsync,fillrandom,overwrite,fillbatch,readrandom,\
readseq,readreverse,compact,readrandom,readseq,readreverse,readmissing,readhot,seekrandom,\
fill100K";

/// The order in which random benchmarks visit keys.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// A permutation of all keys, each visited once (Symas's 2012 report).
    Shuffle,
    /// Independent uniform draws, with repeats (LevelDB's db_bench, the 2011 report).
    Uniform,
}

/// Command-line flags, spelled as LevelDB's db_bench spells them.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "db_bench",
    about = "LevelDB's benchmark suite, run on strata and its peers",
    rename_all = "snake_case"
)]
pub struct Flags {
    /// Comma-separated benchmarks to run, in order (`--list` names them all).
    #[arg(long, default_value = DEFAULT_BENCHMARKS)]
    pub benchmarks: String,
    /// The engine to run: strata, or a peer built in with its cargo feature.
    #[arg(long, default_value = "strata")]
    pub engine: String,
    /// Number of entries.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Number of reads per thread for read benchmarks; negative means --num.
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
    /// Block (or page) cache size in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub cache_size: usize,
    /// Memtable size in bytes (log-structured engines).
    #[arg(long, default_value_t = 4 << 20)]
    pub write_buffer_size: usize,
    /// Row cache size in bytes (strata's `Options::row_cache_capacity`, RocksDB's
    /// `row_cache`); 0, the default, is off. Engines without a row cache ignore it.
    #[arg(long, default_value_t = 0)]
    pub row_cache_size: usize,
    /// Level-0 tables at which each write is delayed (strata's
    /// `Options::l0_slowdown_writes_trigger`, RocksDB's `level0_slowdown_writes_trigger`);
    /// unset, each engine's default (20 in strata and RocksDB). LevelDB's is fixed at 8: it
    /// ignores the flag.
    #[arg(long)]
    pub l0_slowdown_writes_trigger: Option<usize>,
    /// Level-0 tables at which writes stop for a compaction (strata's
    /// `Options::l0_stop_writes_trigger`, RocksDB's `level0_stop_writes_trigger`); unset, each
    /// engine's default (36 in strata and RocksDB). LevelDB's is fixed at 12: it ignores it.
    #[arg(long)]
    pub l0_stop_writes_trigger: Option<usize>,
    /// Bloom filter bits per key; negative means no filter.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub bloom_bits: i64,
    /// Store data uncompressed.
    #[arg(long)]
    pub no_compression: bool,
    /// Do not verify block checksums on reads (LevelDB's default; strata verifies).
    #[arg(long)]
    pub no_verify_checksums: bool,
    /// strata reads through its copying calls (`get` returning a `Vec`, `range` items owning
    /// their key and value) instead of the zero-copy ones (`get_pinned`, cursor borrows), to
    /// measure what the zero-copy calls save.
    #[arg(long)]
    pub copying_reads: bool,
    /// strata's scans step a cursor (`key`, `value`, then `next` or `prev`) instead of
    /// walking it (`DbIterator::walk_forward`, `walk_back`), to measure what a walk saves.
    #[arg(long)]
    pub cursor_scans: bool,
    /// readseq and readreverse: read every byte of every value the scan visits (a digest of
    /// them), as a program that uses the values would. Off by default, as in LevelDB's
    /// db_bench, whose scans take only the lengths: an engine that hands out pointers into
    /// its pages (LMDB) then never loads a value, while one that checks or decompresses its
    /// blocks (strata, LevelDB, RocksDB) has read every byte already.
    #[arg(long)]
    pub scan_reads_values: bool,
    /// readseq and readreverse: walk the `--reads` entries this many times in a row and time
    /// the benchmark by its median pass (its ops are one pass's entries). A pass over a
    /// million entries takes 20-60 ms here, short enough for one burst of a shared host's
    /// noise to double it; the middle of several passes is what the scan costs. Unset: one
    /// pass (LevelDB's db_bench), or five in each `--compare` child. At least 1.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub scan_passes: Option<u64>,
    /// seekrandom: after each seek, step forward this many times, reading every entry (a short
    /// range query, RocksDB's `--seek_nexts`). 0, the default, is LevelDB's seekrandom. strata,
    /// leveldb, rocksdb and lmdb support it.
    #[arg(long, default_value_t = 0)]
    pub seek_nexts: u64,
    /// Use the database already in --db instead of starting fresh; fill benchmarks are
    /// skipped.
    #[arg(long)]
    pub use_existing_db: bool,
    /// Print a latency histogram under each benchmark.
    #[arg(long)]
    pub histogram: bool,
    /// Threads that run each benchmark at once (readwhilewriting: the readers).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Key order of the random benchmarks.
    #[arg(long, value_enum, default_value_t = KeyOrder::Shuffle)]
    pub key_order: KeyOrder,
    /// Print the results as one JSON document instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Directory for the databases (default: a new temporary directory, removed at the end).
    /// Each engine uses a subdirectory named after it.
    #[arg(long)]
    pub db: Option<std::path::PathBuf>,
    /// List the benchmarks and the engines of this build, and exit.
    #[arg(long)]
    pub list: bool,
    /// Run the reports' configurations on every engine of this build (or --engines) and write
    /// the report to --report_dir.
    #[arg(long)]
    pub compare: bool,
    /// With --compare: the engines to compare (default: every engine of this build).
    #[arg(long, value_delimiter = ',')]
    pub engines: Vec<String>,
    /// With --compare: the configurations to run (default: all but scale, which runs only
    /// when named); `--list` names them.
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// With --compare --configs=scale: the numbers of entries to run the baseline at, each
    /// its own database (100M is possible: --scale_nums=1000000,10000000,100000000).
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    pub scale_nums: Vec<u64>,
    /// With --compare: runs per configuration and engine; the report holds medians.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// With --compare: write the report from this results.json of an earlier run instead of
    /// running anything (the number of entries and runs in the text come from the flags).
    #[arg(long)]
    pub render: Option<std::path::PathBuf>,
    /// With --compare: where to write index.html, the charts, report.md and results.json.
    #[arg(long, default_value = "target/report")]
    pub report_dir: std::path::PathBuf,
}

impl Flags {
    /// The flags as given no arguments: every knob at its default, to tell which ones a user
    /// set (`--compare` passes those on to its children).
    pub fn default_knobs() -> Flags {
        Flags::parse_from(["db_bench"])
    }

    /// How many passes a scan benchmark makes (`--scan_passes`; one if unset).
    pub fn scan_passes(&self) -> u64 {
        self.scan_passes.unwrap_or(1)
    }

    /// Reads per thread for read benchmarks.
    pub fn reads(&self) -> u64 {
        u64::try_from(self.reads).unwrap_or(self.num)
    }

    pub fn engine_config(&self) -> engine::EngineConfig {
        engine::EngineConfig {
            cache_size: self.cache_size,
            write_buffer_size: self.write_buffer_size,
            bloom_bits: usize::try_from(self.bloom_bits).ok(),
            compression: !self.no_compression,
            verify_checksums: !self.no_verify_checksums,
            value_size: self.value_size,
            copying_reads: self.copying_reads,
            cursor_scans: self.cursor_scans,
            row_cache_size: self.row_cache_size,
            l0_slowdown_writes_trigger: self.l0_slowdown_writes_trigger,
            l0_stop_writes_trigger: self.l0_stop_writes_trigger,
        }
    }
}

fn main() {
    let flags = Flags::parse();
    if flags.list {
        println!("benchmarks:");
        for (name, what) in suite::BENCHMARKS {
            println!("  {name:<16} {what}");
        }
        println!("engines in this build: {}", engine::available().join(", "));
        println!(
            "--compare configurations: {} (scale only when named)",
            compare::config_ids().join(", ")
        );
        return;
    }
    if flags.compare {
        if let Err(e) = compare::run(&flags) {
            eprintln!("db_bench: {e}");
            std::process::exit(1);
        }
        return;
    }
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
    if !flags.json {
        report::print_header(&flags, &flags.engine);
    }
    let anon = measure::AnonPeak::start();
    let mut runner = suite::Runner::new(&flags, &flags.engine, &dir);
    let result = runner.run_all(|o| {
        if !flags.json {
            report::print_outcome(o)
        }
    });
    drop(runner);
    let outcomes = match result {
        Ok(o) => o,
        Err(e) => {
            eprintln!("db_bench: {e}");
            std::process::exit(1);
        }
    };
    let peak = measure::peak_rss_kib();
    let peak_anon = anon.peak_kib();
    drop(anon);
    if flags.json {
        let run = report::JsonRun {
            engine: flags.engine.clone(),
            num: flags.num,
            key_size: flags.key_size,
            value_size: flags.value_size,
            threads: flags.threads,
            key_order: format!("{:?}", flags.key_order).to_lowercase(),
            cache_size: flags.cache_size,
            write_buffer_size: flags.write_buffer_size,
            compression: !flags.no_compression,
            results: outcomes.iter().map(report::JsonOutcome::from).collect(),
            peak_memory_bytes: peak.map(|kib| kib * 1024),
            peak_anon_memory_bytes: peak_anon.map(|kib| kib * 1024),
            disk_bytes_after_close: None,
        };
        match serde_json::to_string_pretty(&run) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("db_bench: {e}");
                std::process::exit(1);
            }
        }
    } else if let Some(kib) = peak {
        print!("peak memory: {:.1} MB", kib as f64 / 1024.0);
        if let Some(anon) = peak_anon {
            print!(" (anonymous: {:.1} MB)", anon as f64 / 1024.0);
        }
        println!();
    }
}
