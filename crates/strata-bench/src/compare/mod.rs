// SPDX-License-Identifier: MIT OR Apache-2.0
//! `db_bench --compare`: the benchmark reports' configurations, run on every engine, written
//! out as an HTML page of tables and horizontal bar charts (the 2011 report's layout: a bar per
//! engine, its rate, and its ratio to LevelDB and to the baseline), SVG charts beside it, a
//! Markdown report for docs/benchmarks.md and the README, and the raw results as JSON.
//!
//! Each (configuration, engine, run) is a separate db_bench process (this executable with
//! `--json`), so that peak memory is the engine's own and no engine inherits another's page
//! cache state or threads.
//!
//! This module holds the configurations and runs them; [`render`] writes the report;
//! [`footprint`] measures each engine's code size.

mod footprint;
mod render;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::engine;
use crate::report::JsonRun;
use crate::Flags;
use render::write_report;

/// One configuration of the reports.
struct Config {
    id: &'static str,
    title: &'static str,
    /// What the reports say about it, and how it is set here.
    about: &'static str,
    benchmarks: &'static str,
    /// Flags on top of the user's.
    extra: &'static [&'static str],
    /// Compare each benchmark with this baseline benchmark (same engine), if any.
    baseline: &'static [(&'static str, &'static str)],
    /// `--num` is divided by this (for configurations of large values with ordinary
    /// benchmarks).
    num_divisor: u64,
}

/// The configurations whose databases are measured on disk after their process exits (so
/// that every engine has closed and written out what it caches).
const DISK: &[&str] = &["disk-seq", "disk-random", "large"];

const CONFIGS: &[Config] = &[
    Config {
        id: "baseline",
        title: "Baseline",
        about: "4 MB of cache, compression on, asynchronous writes, 16-byte keys and 100-byte \
                values; random benchmarks visit a shuffled permutation of the keys.",
        benchmarks: "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,readhot,\
                     seekrandom,readmissing",
        extra: &[],
        baseline: &[],
        num_divisor: 1,
    },
    Config {
        id: "batch",
        title: "Batch writes",
        about: "1000 batches of 1000 entries each, in key order and in random order.",
        benchmarks: "fillbatch,fillrandbatch",
        extra: &[],
        baseline: &[("fillbatch", "fillseq"), ("fillrandbatch", "fillrandom")],
        num_divisor: 1,
    },
    Config {
        id: "sync",
        title: "Synchronous writes",
        about: "Every write durable before it returns (fsync or the engine's equivalent); \
                --num/1000 writes.",
        benchmarks: "fillseqsync,fillsync",
        extra: &[],
        baseline: &[("fillseqsync", "fillseq"), ("fillsync", "fillrandom")],
        num_divisor: 1,
    },
    Config {
        id: "nocompression",
        title: "Compression off",
        about: "The baseline with compression off in every engine that compresses.",
        benchmarks: "fillseq,fillrandom,readrandom,readseq",
        extra: &["--no_compression"],
        baseline: &[
            ("fillseq", "fillseq"),
            ("fillrandom", "fillrandom"),
            ("readrandom", "readrandom"),
            ("readseq", "readseq"),
        ],
        num_divisor: 1,
    },
    Config {
        id: "memory-writes",
        title: "More memory: writes",
        about: "128 MB: log-structured engines get a 120 MB write buffer and 8 MB of cache; \
                the others a 128 MB cache.",
        benchmarks: "fillseq,fillrandom",
        extra: &["--write_buffer_size=125829120", "--cache_size=8388608"],
        baseline: &[("fillseq", "fillseq"), ("fillrandom", "fillrandom")],
        num_divisor: 1,
    },
    Config {
        id: "memory-reads",
        title: "Larger caches: reads",
        about: "128 MB: log-structured engines get 120 MB of cache and an 8 MB write buffer; \
                the others a 128 MB cache.",
        benchmarks: "fillrandom,readrandom,readseq",
        extra: &["--cache_size=125829120", "--write_buffer_size=8388608"],
        baseline: &[("readrandom", "readrandom"), ("readseq", "readseq")],
        num_divisor: 1,
    },
    Config {
        id: "disk-seq",
        title: "Disk usage: sequential fill",
        about: "fillseq alone; the database's size is measured after the engine is closed.",
        benchmarks: "fillseq",
        extra: &[],
        baseline: &[],
        num_divisor: 1,
    },
    Config {
        id: "disk-random",
        title: "Disk usage: random fill",
        about: "fillrandom alone; the database's size is measured after the engine is closed.",
        benchmarks: "fillrandom",
        extra: &[],
        baseline: &[],
        num_divisor: 1,
    },
    Config {
        id: "large",
        title: "Large values",
        about: "100,000-byte values, 1000 of them (--num/1000), in key order and random order.",
        benchmarks: "fillseq100K,fill100K",
        extra: &[],
        baseline: &[],
        num_divisor: 1,
    },
    Config {
        id: "large-nocompression",
        title: "Large values, compression off",
        about: "As above with compression off everywhere (LMDB never compresses). strata-blobs \
                keeps values of 4 KiB and more in blob files (key-value separation): each 100 \
                KB value is written once instead of to the log, a table and every compaction.",
        benchmarks: "fillseq100K,fill100K",
        extra: &["--no_compression"],
        baseline: &[],
        num_divisor: 1,
    },
    Config {
        id: "large-reads",
        title: "Large values: reads and overwrites",
        about: "1000 values of 100,000 bytes (--num/1000), compression off: a random fill, \
                random reads (about one per value), then as many random overwrites. The \
                database's size after each write benchmark is in the run's JSON.",
        benchmarks: "fillrandom,readrandom,overwrite",
        extra: &["--no_compression", "--value_size=100000"],
        baseline: &[],
        num_divisor: 1000,
    },
];

/// The ids of the configurations, for `--configs`.
pub fn config_ids() -> Vec<&'static str> {
    CONFIGS.iter().map(|c| c.id).collect()
}

/// The benchmarks whose rates are entries per second, not operations.
fn unit(benchmark: &str) -> &'static str {
    if benchmark.contains("batch") {
        "entries/sec"
    } else {
        "ops/sec"
    }
}

/// Results: configuration → engine → the runs.
type Results = BTreeMap<String, BTreeMap<String, Vec<JsonRun>>>;

pub fn run(flags: &Flags) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding db_bench itself: {e}"))?;
    if let Some(path) = &flags.render {
        // Write the report again from a previous run's results.json.
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let results: Results = serde_json::from_str(&text)
            .map_err(|e| format!("{}: unreadable results: {e}", path.display()))?;
        let engines: Vec<String> = engine::ALL
            .iter()
            .filter(|e| {
                results
                    .values()
                    .any(|by_engine| by_engine.contains_key(**e))
            })
            .map(|e| e.to_string())
            .collect();
        return write_report(flags, &engines, &results, &exe);
    }
    let engines: Vec<String> = if flags.engines.is_empty() {
        engine::available().iter().map(|s| s.to_string()).collect()
    } else {
        flags.engines.clone()
    };
    for e in &engines {
        if !engine::available().contains(&e.as_str()) {
            return Err(format!(
                "engine '{e}' is not in this build (it has: {})",
                engine::available().join(", ")
            ));
        }
    }
    for c in &flags.configs {
        if !config_ids().contains(&c.as_str()) {
            return Err(format!(
                "unknown configuration '{c}' (known: {})",
                config_ids().join(", ")
            ));
        }
    }
    let chosen = |c: &Config| flags.configs.is_empty() || flags.configs.iter().any(|x| x == c.id);
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let mut results: Results = BTreeMap::new();
    for config in CONFIGS.iter().filter(|c| chosen(c)) {
        for run in 0..flags.runs.max(1) {
            for engine in &engines {
                eprintln!(
                    "db_bench --compare: {} on {engine} (run {} of {})",
                    config.id,
                    run + 1,
                    flags.runs.max(1)
                );
                let dir = scratch.path().join(config.id);
                let mut outcome = run_one(&exe, flags, config, engine, &dir)?;
                if DISK.contains(&config.id) {
                    outcome.disk_bytes_after_close =
                        Some(crate::measure::disk_usage(&dir.join(engine)));
                }
                let _ = std::fs::remove_dir_all(&dir);
                results
                    .entry(config.id.to_owned())
                    .or_default()
                    .entry(engine.clone())
                    .or_default()
                    .push(outcome);
            }
        }
    }
    write_report(flags, &engines, &results, &exe)
}

/// Runs one configuration on one engine in a child db_bench and parses its JSON.
fn run_one(
    exe: &Path,
    flags: &Flags,
    config: &Config,
    engine: &str,
    dir: &Path,
) -> Result<JsonRun, String> {
    let mut cmd = Command::new(exe);
    cmd.arg(format!("--engine={engine}"))
        .arg(format!(
            "--benchmarks={}",
            config.benchmarks.replace(char::is_whitespace, "")
        ))
        .arg(format!("--num={}", (flags.num / config.num_divisor).max(1)))
        .arg(format!("--key_order={:?}", flags.key_order).to_lowercase())
        .arg(format!("--db={}", dir.display()))
        .arg("--json");
    if flags.no_verify_checksums {
        cmd.arg("--no_verify_checksums");
    }
    // Configurations that set memory override the user's sizes; the others keep them.
    if !config.extra.iter().any(|f| f.starts_with("--cache_size")) {
        cmd.arg(format!("--cache_size={}", flags.cache_size));
        cmd.arg(format!("--write_buffer_size={}", flags.write_buffer_size));
    }
    cmd.args(config.extra);
    let out = cmd
        .output()
        .map_err(|e| format!("running {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} on {engine} failed: {}",
            config.id,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{} on {engine}: unreadable results: {e}", config.id))
}
