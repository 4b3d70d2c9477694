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
//! [`scale`] its section on cost against the number of entries; [`footprint`] measures each
//! engine's code size.

mod footprint;
mod render;
mod scale;

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
    /// The only engines that can run it, if not every engine (the others are left out of it
    /// and shown without a result).
    only_engines: Option<&'static [&'static str]>,
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
        only_engines: None,
    },
    Config {
        id: "seq-reads",
        title: "Reads after a sequential fill",
        about: "The baseline's reads on a database that fillseq alone made (tables that do not \
                overlap, as a bulk load leaves them), rather than on what fillrandom and \
                overwrite leave.",
        benchmarks: "fillseq,readrandom,readseq,readreverse,readhot,seekrandom,readmissing",
        extra: &[],
        baseline: &[
            ("readrandom", "readrandom"),
            ("readseq", "readseq"),
            ("readreverse", "readreverse"),
            ("readhot", "readhot"),
            ("seekrandom", "seekrandom"),
            ("readmissing", "readmissing"),
        ],
        num_divisor: 1,
        only_engines: None,
    },
    Config {
        id: "batch",
        title: "Batch writes",
        about: "1000 batches of 1000 entries each, in key order and in random order.",
        benchmarks: "fillbatch,fillrandbatch",
        extra: &[],
        baseline: &[("fillbatch", "fillseq"), ("fillrandbatch", "fillrandom")],
        num_divisor: 1,
        only_engines: None,
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
        only_engines: None,
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
        only_engines: None,
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
        only_engines: None,
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
        only_engines: None,
    },
    Config {
        id: "row-cache",
        title: "Row cache",
        about: "The baseline's random writes, then reads, with a 4 MB row cache in the engines \
                that have one (strata's Options::row_cache_capacity, RocksDB's row_cache; both \
                off by default) beside the 4 MB block cache; the others as in the baseline.",
        benchmarks: "fillrandom,overwrite,readrandom,readhot",
        extra: &["--row_cache_size=4194304"],
        baseline: &[
            ("fillrandom", "fillrandom"),
            ("overwrite", "overwrite"),
            ("readrandom", "readrandom"),
            ("readhot", "readhot"),
        ],
        num_divisor: 1,
        only_engines: None,
    },
    Config {
        id: "disk-seq",
        title: "Disk usage: sequential fill",
        about: "fillseq alone; the database's size is measured after the engine is closed.",
        benchmarks: "fillseq",
        extra: &[],
        baseline: &[],
        num_divisor: 1,
        only_engines: None,
    },
    Config {
        id: "disk-random",
        title: "Disk usage: random fill",
        about: "fillrandom alone; the database's size is measured after the engine is closed.",
        benchmarks: "fillrandom",
        extra: &[],
        baseline: &[],
        num_divisor: 1,
        only_engines: None,
    },
    Config {
        id: "large",
        title: "Large values",
        about: "100,000-byte values, 1000 of them (--num/1000), in key order and random order.",
        benchmarks: "fillseq100K,fill100K",
        extra: &[],
        baseline: &[],
        num_divisor: 1,
        only_engines: None,
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
        only_engines: None,
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
        only_engines: None,
    },
    Config {
        id: "seek-scan",
        title: "Range queries: a seek and ten steps",
        about: "The baseline's random writes (fillrandom, overwrite), then seekrandom with \
                --seek_nexts=10: each seek is followed by ten steps forward, every entry read \
                (RocksDB's seekrandom --seek_nexts). Only the engines that have a cursor \
                db_bench can step (strata, strata-blobs, LevelDB, RocksDB, LMDB) run it. The seeks run \
                right after the overwrite, on the state it leaves (the baseline's seekrandom \
                runs after its reads), so the two seekrandom rows are not to be divided.",
        benchmarks: "fillrandom,overwrite,seekrandom",
        extra: &["--seek_nexts=10"],
        baseline: &[],
        num_divisor: 1,
        only_engines: Some(engine::SEEK_SCAN),
    },
];

/// The baseline's benchmarks at each of `--scale_nums` entries (readmissing left out: it
/// costs what readrandom does). Run only when `--configs` names it, since its default sizes
/// take hours on every engine. Its results are keyed `scale-N`, N the number of entries, so
/// that sizes neither overwrite each other nor look like the ordinary configurations.
const SCALE: Config = Config {
    id: "scale",
    title: "Cost against the number of entries",
    about: "The baseline's benchmarks, each size a database of its own.",
    benchmarks: "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,readhot,seekrandom",
    extra: &[],
    baseline: &[],
    num_divisor: 1,
    only_engines: None,
};

/// The results key of the scale configuration at `num` entries.
fn scale_key(num: u64) -> String {
    format!("{}-{num}", SCALE.id)
}

/// The ids of the configurations, for `--configs`.
pub fn config_ids() -> Vec<&'static str> {
    CONFIGS.iter().chain([&SCALE]).map(|c| c.id).collect()
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
    if flags.use_existing_db {
        return Err(
            "--compare makes a fresh database for each run: --use_existing_db does not \
                    apply"
                .into(),
        );
    }
    let plan = plan(flags)?;
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let mut results: Results = BTreeMap::new();
    for (config, key, num) in plan {
        let skipped: Vec<&str> = engines
            .iter()
            .map(String::as_str)
            .filter(|e| !runs_on(config, e))
            .collect();
        if !skipped.is_empty() {
            eprintln!(
                "db_bench --compare: {key} leaves out {} (it runs only on {})",
                skipped.join(", "),
                config.only_engines.unwrap_or_default().join(", ")
            );
        }
        for run in 0..flags.runs.max(1) {
            for engine in engines.iter().filter(|e| runs_on(config, e)) {
                eprintln!(
                    "db_bench --compare: {key} on {engine} (run {} of {})",
                    run + 1,
                    flags.runs.max(1)
                );
                let dir = scratch.path().join(&key);
                let mut outcome = run_one(&exe, flags, config, num, engine, &dir)?;
                if DISK.contains(&config.id) {
                    outcome.disk_bytes_after_close =
                        Some(crate::measure::disk_usage(&dir.join(engine)));
                }
                let _ = std::fs::remove_dir_all(&dir);
                results
                    .entry(key.clone())
                    .or_default()
                    .entry(engine.clone())
                    .or_default()
                    .push(outcome);
            }
        }
    }
    write_report(flags, &engines, &results, &exe)
}

/// Every run of `flags.configs`, in order: (configuration, results key, entries). The scale
/// configuration runs only when named, once per size of `--scale_nums`, smallest first.
fn plan(flags: &Flags) -> Result<Vec<(&'static Config, String, u64)>, String> {
    let named = |c: &Config| flags.configs.iter().any(|x| x == c.id);
    let chosen = |c: &Config| flags.configs.is_empty() || named(c);
    let mut plan: Vec<(&'static Config, String, u64)> = CONFIGS
        .iter()
        .filter(|c| chosen(c))
        .map(|c| (c, c.id.to_owned(), (flags.num / c.num_divisor).max(1)))
        .collect();
    if named(&SCALE) {
        if flags.scale_nums.is_empty() || flags.scale_nums.contains(&0) {
            return Err("--scale_nums: give one or more numbers of entries above 0".into());
        }
        let mut nums = flags.scale_nums.clone();
        nums.sort_unstable();
        nums.dedup();
        plan.extend(nums.into_iter().map(|n| (&SCALE, scale_key(n), n)));
    }
    Ok(plan)
}

/// True if `config` runs on `engine` (every configuration but those limited to some engines).
fn runs_on(config: &Config, engine: &str) -> bool {
    config
        .only_engines
        .is_none_or(|only| only.contains(&engine))
}

/// The scan passes each child makes unless `--scan_passes` says otherwise: a readseq of a
/// million entries is one 20-60 ms pass, which one burst of a shared host's noise can slow
/// by half (seen in streaks of a few passes, on LMDB and strata alike); the median of five
/// passes is not moved by a burst of one or two.
pub const COMPARE_SCAN_PASSES: u64 = 5;
// A median needs passes on both sides of it.
const _: () = assert!(COMPARE_SCAN_PASSES > 2);

/// Runs one configuration at `num` entries on one engine in a child db_bench and parses its
/// JSON.
fn run_one(
    exe: &Path,
    flags: &Flags,
    config: &Config,
    num: u64,
    engine: &str,
    dir: &Path,
) -> Result<JsonRun, String> {
    let mut cmd = Command::new(exe);
    cmd.args(child_args(flags, config, num, engine, dir));
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

/// The child db_bench's arguments for one configuration at `num` entries on one engine: what
/// the configuration sets (its benchmarks, `num`, its `extra` flags), then every workload and
/// engine knob the user gave `--compare` that the configuration does not set itself, so that a
/// comparison with `--no_compression` (say) runs every child with it. A flag the configuration
/// sets wins over the user's (the memory configurations set both sizes; `large-reads` sets
/// the value size).
fn child_args(flags: &Flags, config: &Config, num: u64, engine: &str, dir: &Path) -> Vec<String> {
    let mut args = vec![
        format!("--engine={engine}"),
        format!(
            "--benchmarks={}",
            config.benchmarks.replace(char::is_whitespace, "")
        ),
        format!("--num={num}"),
        format!("--key_order={:?}", flags.key_order).to_lowercase(),
        format!("--db={}", dir.display()),
        "--json".to_owned(),
    ];
    let sets = |name: &str| {
        config
            .extra
            .iter()
            .any(|f| f.split('=').next() == Some(name))
    };
    // The memory configurations set both sizes; they are a pair, and so are the user's.
    let sets_memory = sets("--cache_size") || sets("--write_buffer_size");
    let defaults = Flags::default_knobs();
    let option = |n: Option<usize>| n.map_or_else(String::new, |n| n.to_string());
    // Knobs with a value: (flag, the user's value, the default), compared as text.
    let valued = [
        (
            "--reads",
            flags.reads.to_string(),
            defaults.reads.to_string(),
        ),
        (
            "--key_size",
            flags.key_size.to_string(),
            defaults.key_size.to_string(),
        ),
        (
            "--value_size",
            flags.value_size.to_string(),
            defaults.value_size.to_string(),
        ),
        (
            "--compression_ratio",
            flags.compression_ratio.to_string(),
            defaults.compression_ratio.to_string(),
        ),
        (
            "--row_cache_size",
            flags.row_cache_size.to_string(),
            defaults.row_cache_size.to_string(),
        ),
        (
            "--l0_slowdown_writes_trigger",
            option(flags.l0_slowdown_writes_trigger),
            String::new(),
        ),
        (
            "--l0_stop_writes_trigger",
            option(flags.l0_stop_writes_trigger),
            String::new(),
        ),
        (
            "--bloom_bits",
            flags.bloom_bits.to_string(),
            defaults.bloom_bits.to_string(),
        ),
        (
            "--seek_nexts",
            flags.seek_nexts.to_string(),
            defaults.seek_nexts.to_string(),
        ),
        (
            "--threads",
            flags.threads.to_string(),
            defaults.threads.to_string(),
        ),
    ];
    for (name, value, default) in valued {
        if value != default && !sets(name) {
            args.push(format!("{name}={value}"));
        }
    }
    if !sets("--scan_passes") {
        let passes = flags.scan_passes.unwrap_or(COMPARE_SCAN_PASSES);
        args.push(format!("--scan_passes={passes}"));
    }
    let switches = [
        ("--no_compression", flags.no_compression),
        ("--no_verify_checksums", flags.no_verify_checksums),
        ("--copying_reads", flags.copying_reads),
        ("--cursor_scans", flags.cursor_scans),
        ("--scan_reads_values", flags.scan_reads_values),
        ("--histogram", flags.histogram),
    ];
    for (name, on) in switches {
        if on && !sets(name) {
            args.push(name.to_owned());
        }
    }
    if !sets_memory {
        args.push(format!("--cache_size={}", flags.cache_size));
        args.push(format!("--write_buffer_size={}", flags.write_buffer_size));
    }
    args.extend(config.extra.iter().map(|f| f.to_string()));
    args
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn keys(args: &[&str]) -> Result<Vec<(String, u64)>, String> {
        let flags = Flags::parse_from([&["db_bench", "--compare", "--num=5000"], args].concat());
        Ok(plan(&flags)?
            .into_iter()
            .map(|(_, key, num)| (key, num))
            .collect())
    }

    #[test]
    fn scale_runs_only_when_named_and_keys_each_size() {
        let all = keys(&[]).unwrap();
        assert_eq!(all.len(), CONFIGS.len());
        assert!(all.iter().all(|(k, _)| !k.starts_with("scale")));
        assert!(all.contains(&("large-reads".to_owned(), 5)));

        let scale = keys(&["--configs=baseline,scale", "--scale_nums=20000,2000,2000"]).unwrap();
        let expected = [
            ("baseline", 5000),
            ("scale-2000", 2000),
            ("scale-20000", 20000),
        ];
        let expected: Vec<(String, u64)> =
            expected.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        assert_eq!(scale, expected);
        // The default sizes.
        let scale = keys(&["--configs=scale"]).unwrap();
        assert_eq!(scale[0], ("scale-1000000".to_owned(), 1_000_000));
        assert_eq!(scale[1], ("scale-10000000".to_owned(), 10_000_000));
        assert!(keys(&["--configs=scale", "--scale_nums=0"]).is_err());
    }

    fn child(args: &[&str], config: &str) -> Vec<String> {
        let flags = Flags::parse_from([&["db_bench", "--compare"], args].concat());
        let config = CONFIGS.iter().find(|c| c.id == config).unwrap();
        child_args(&flags, config, 1000, "strata", Path::new("/d"))
    }

    fn count(args: &[String], name: &str) -> usize {
        args.iter()
            .filter(|a| a.split('=').next() == Some(name))
            .count()
    }

    #[test]
    fn children_scan_five_passes_unless_told_otherwise() {
        let plain = child(&[], "seq-reads");
        assert_eq!(count(&plain, "--scan_passes"), 1, "{plain:?}");
        assert!(plain.contains(&format!("--scan_passes={COMPARE_SCAN_PASSES}")));
        let one = child(&["--scan_passes=1"], "baseline");
        assert!(one.contains(&"--scan_passes=1".to_owned()), "{one:?}");
        assert_eq!(count(&one, "--scan_passes"), 1);
    }

    #[test]
    fn children_get_every_knob_the_user_set() {
        let plain = child(&[], "seq-reads");
        for knob in [
            "--no_compression",
            "--scan_reads_values",
            "--value_size",
            "--seek_nexts",
            "--threads",
            "--bloom_bits",
        ] {
            assert_eq!(
                count(&plain, knob),
                0,
                "{knob} is at its default: {plain:?}"
            );
        }
        let set = child(
            &[
                "--no_compression",
                "--scan_reads_values",
                "--copying_reads",
                "--value_size=200",
                "--seek_nexts=3",
                "--threads=2",
                "--bloom_bits=10",
                "--reads=500",
                "--l0_stop_writes_trigger=40",
            ],
            "seq-reads",
        );
        for knob in [
            "--no_compression",
            "--scan_reads_values",
            "--copying_reads",
            "--value_size=200",
            "--seek_nexts=3",
            "--threads=2",
            "--bloom_bits=10",
            "--reads=500",
            "--l0_stop_writes_trigger=40",
        ] {
            assert!(set.iter().any(|a| a == knob), "{knob} missing: {set:?}");
        }
        // The child must parse what it is given.
        Flags::try_parse_from(std::iter::once("db_bench".to_owned()).chain(set)).unwrap();
    }

    #[test]
    fn a_configuration_s_own_flags_win_and_are_given_once() {
        // nocompression sets --no_compression itself; large-reads sets the value size; the
        // memory configurations set both sizes.
        let args = child(&["--no_compression"], "nocompression");
        assert_eq!(count(&args, "--no_compression"), 1, "{args:?}");
        let args = child(&["--value_size=200"], "large-reads");
        assert_eq!(count(&args, "--value_size"), 1, "{args:?}");
        assert!(args.iter().any(|a| a == "--value_size=100000"), "{args:?}");
        let args = child(&["--cache_size=1000"], "memory-reads");
        assert_eq!(count(&args, "--cache_size"), 1, "{args:?}");
        assert_eq!(count(&args, "--write_buffer_size"), 1, "{args:?}");
        assert!(
            args.iter().any(|a| a == "--cache_size=125829120"),
            "{args:?}"
        );
        let args = child(&["--cache_size=1000"], "baseline");
        assert!(args.iter().any(|a| a == "--cache_size=1000"), "{args:?}");
        for config in CONFIGS {
            let args = child(&["--no_compression", "--value_size=200"], config.id);
            Flags::try_parse_from(std::iter::once("db_bench".to_owned()).chain(args.clone()))
                .unwrap_or_else(|e| panic!("{}: {e}: {args:?}", config.id));
        }
    }

    #[test]
    fn a_comparison_refuses_an_existing_database() {
        let flags = Flags::parse_from(["db_bench", "--compare", "--use_existing_db"]);
        let e = run(&flags).unwrap_err();
        assert!(e.contains("--use_existing_db"), "{e}");
    }

    #[test]
    fn seek_scan_runs_only_on_engines_that_can_step_a_cursor() {
        let config = |id: &str| CONFIGS.iter().find(|c| c.id == id).unwrap();
        let seek_scan = config("seek-scan");
        assert!(seek_scan.extra.contains(&"--seek_nexts=10"));
        for e in ["strata", "leveldb", "rocksdb", "lmdb"] {
            assert!(runs_on(seek_scan, e), "{e}");
            assert!(runs_on(config("baseline"), e), "{e}");
        }
        for e in ["sqlite", "kyotocabinet", "wiredtiger-btree"] {
            assert!(!runs_on(seek_scan, e), "{e}");
            assert!(runs_on(config("baseline"), e), "{e}");
        }
    }
}
