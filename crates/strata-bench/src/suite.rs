// SPDX-License-Identifier: MIT OR Apache-2.0
//! The benchmarks, run on any [`Engine`] with the same generator and timing loop.
//!
//! Semantics follow LevelDB's db_bench: every `fill*` benchmark starts from an empty database;
//! `overwrite` and the reads use the database as the previous benchmark left it (or fill it
//! first, sequentially, if there is none yet).

use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::engine::{self, Engine, EngineConfig, EngineResult};
use crate::generator::{make_key, ValueGenerator};
use crate::report::{print_outcome, Outcome};
use crate::Flags;

/// The benchmark names this suite runs.
pub const BENCHMARKS: &[&str] = &[
    "fillseq",
    "fillsync",
    "fillrandom",
    "overwrite",
    "fillbatch",
    "readrandom",
    "readmissing",
    "readseq",
    "readreverse",
    "compact",
];

struct Runner<'a> {
    flags: &'a Flags,
    engine_name: &'a str,
    dir: PathBuf,
    config: EngineConfig,
    db: Option<Box<dyn Engine>>,
    values: ValueGenerator,
    rng: StdRng,
}

/// Runs `--benchmarks` on `--engine` in `dir` and prints a line per benchmark.
pub fn run(flags: &Flags, dir: &Path) -> EngineResult<Vec<Outcome>> {
    let config = EngineConfig {
        cache_size: flags.cache_size,
        write_buffer_size: flags.write_buffer_size,
        bloom_bits: usize::try_from(flags.bloom_bits).ok(),
        compression: !flags.no_compression,
        verify_checksums: !flags.no_verify_checksums,
    };
    let mut runner = Runner {
        flags,
        engine_name: &flags.engine,
        dir: dir.join(&flags.engine),
        config,
        db: None,
        values: ValueGenerator::new(flags.compression_ratio, 301),
        rng: StdRng::seed_from_u64(301),
    };
    let mut outcomes = Vec::new();
    for name in flags.benchmarks.split(',').filter(|n| !n.is_empty()) {
        let outcome = match name {
            "fillseq" => runner.fill("fillseq", false, 1, flags.num, false)?,
            "fillsync" => runner.fill("fillsync", true, 1, (flags.num / 1000).max(1), true)?,
            "fillrandom" => runner.fill("fillrandom", true, 1, flags.num, false)?,
            "fillbatch" => runner.fill("fillbatch", false, 1000, flags.num, false)?,
            "overwrite" => runner.overwrite()?,
            "readrandom" => runner.read_random(false)?,
            "readmissing" => runner.read_random(true)?,
            "readseq" => runner.read_scan(false)?,
            "readreverse" => runner.read_scan(true)?,
            "compact" => runner.compact()?,
            other => {
                eprintln!(
                    "db_bench: unknown benchmark '{other}' (known: {})",
                    BENCHMARKS.join(", ")
                );
                continue;
            }
        };
        print_outcome(&outcome);
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

impl Runner<'_> {
    fn fresh(&mut self) -> EngineResult<()> {
        self.db = None;
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        self.db = Some(engine::open(self.engine_name, &self.dir, &self.config)?);
        Ok(())
    }

    fn db(&mut self) -> EngineResult<&dyn Engine> {
        if self.db.is_none() {
            if self.dir.exists() {
                self.db = Some(engine::open(self.engine_name, &self.dir, &self.config)?);
            } else {
                self.fill("fillseq", false, 1, self.flags.num, false)?;
            }
        }
        Ok(self.db.as_deref().expect("opened above"))
    }

    fn next_key(&mut self, random: bool, i: u64) -> u64 {
        if random {
            self.rng.gen_range(0..self.flags.num.max(1))
        } else {
            i
        }
    }

    /// Writes `count` entries in batches of `per_batch` into a fresh database.
    fn fill(
        &mut self,
        name: &'static str,
        random: bool,
        per_batch: u64,
        count: u64,
        sync: bool,
    ) -> EngineResult<Outcome> {
        self.fresh()?;
        self.write_entries(name, random, per_batch, count, sync)
    }

    fn overwrite(&mut self) -> EngineResult<Outcome> {
        self.db()?;
        self.write_entries("overwrite", true, 1, self.flags.num, false)
    }

    fn write_entries(
        &mut self,
        name: &'static str,
        random: bool,
        per_batch: u64,
        count: u64,
        sync: bool,
    ) -> EngineResult<Outcome> {
        let (key_size, value_size) = (self.flags.key_size, self.flags.value_size);
        let mut keys: Vec<Vec<u8>> = (0..per_batch)
            .map(|_| Vec::with_capacity(key_size))
            .collect();
        let mut values: Vec<Vec<u8>> = vec![Vec::with_capacity(value_size); per_batch as usize];
        let start = Instant::now();
        let mut i = 0;
        while i < count {
            let n = per_batch.min(count - i);
            for j in 0..n as usize {
                let k = self.next_key(random, i + j as u64);
                make_key(&mut keys[j], k, key_size);
                values[j].clear();
                values[j].extend_from_slice(self.values.next(value_size));
            }
            let entries: Vec<(&[u8], &[u8])> = keys[..n as usize]
                .iter()
                .zip(&values)
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            self.db.as_ref().expect("open").write(&entries, sync)?;
            i += n;
        }
        let elapsed = start.elapsed();
        Ok(Outcome {
            name,
            ops: count,
            elapsed,
            bytes: count * (key_size + value_size) as u64,
            note: format!("(db {:.1} MB)", dir_size(&self.dir) as f64 / 1_048_576.0),
        })
    }

    fn read_random(&mut self, missing: bool) -> EngineResult<Outcome> {
        let reads = self.flags.reads();
        let key_size = self.flags.key_size;
        self.db()?;
        let mut key = Vec::with_capacity(key_size + 1);
        let mut found = 0u64;
        let start = Instant::now();
        for _ in 0..reads {
            let k = self.rng.gen_range(0..self.flags.num.max(1));
            make_key(&mut key, k, key_size);
            if missing {
                key.push(b'.');
            }
            if self.db.as_ref().expect("open").get(&key)?.is_some() {
                found += 1;
            }
        }
        Ok(Outcome {
            name: if missing { "readmissing" } else { "readrandom" },
            ops: reads,
            elapsed: start.elapsed(),
            bytes: 0,
            note: format!("({found} of {reads} found)"),
        })
    }

    fn read_scan(&mut self, reverse: bool) -> EngineResult<Outcome> {
        let reads = self.flags.reads();
        let db = self.db()?;
        let start = Instant::now();
        let (n, bytes) = db.scan(reverse, reads)?;
        Ok(Outcome {
            name: if reverse { "readreverse" } else { "readseq" },
            ops: n,
            elapsed: start.elapsed(),
            bytes,
            note: String::new(),
        })
    }

    fn compact(&mut self) -> EngineResult<Outcome> {
        let db = self.db()?;
        let start = Instant::now();
        db.compact()?;
        Ok(Outcome {
            name: "compact",
            ops: 1,
            elapsed: start.elapsed(),
            bytes: 0,
            note: format!("(db {:.1} MB)", dir_size(&self.dir) as f64 / 1_048_576.0),
        })
    }
}

/// The process's peak resident memory in KiB (Linux), if known.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
