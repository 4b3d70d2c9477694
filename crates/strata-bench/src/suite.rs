// SPDX-License-Identifier: MIT OR Apache-2.0
//! The benchmarks, run on any [`Engine`] with the same generator and timing loop.
//!
//! Semantics follow LevelDB's db_bench: every `fill*` benchmark starts from an empty database
//! (and is skipped with `--use_existing_db`); `overwrite`, the reads and the deletes use the
//! database as the previous benchmark left it (or fill it first, sequentially, if there is
//! none). With `--threads=N`, each of N threads runs the whole benchmark on the shared engine
//! and the reported rate is all threads' operations over the wall time.
//!
//! Random benchmarks draw keys per `--key_order`: `shuffle` (the 2012 report's fix) visits a
//! permutation of all `--num` keys, each once; `uniform` (the 2011 report's db_bench) draws each
//! key independently, so some repeat and about a third are never visited.
//!
//! At about 770 lines this file is over the project's ~700: the plan of each benchmark
//! ([`Runner`]) and the loop that runs it on every thread (`Worker`) read as one idea, and
//! its tests are the last hundred lines. What a run measures beside time is in `measure.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::engine::{self, Engine, EngineConfig, EngineResult};
use crate::generator::{make_key, ValueGenerator};
use crate::histogram::Histogram;
use crate::measure::{disk_usage, ProcIo};
use crate::report::{Outcome, Progress};
use crate::{Flags, KeyOrder};

/// Every benchmark name the suite knows, with what it does.
pub const BENCHMARKS: &[(&str, &str)] = &[
    (
        "fillseq",
        "write --num values in sequential key order into a new database",
    ),
    (
        "fillrandom",
        "write --num values in random key order into a new database",
    ),
    (
        "fillsync",
        "write --num/1000 values in random order, each synced (durable)",
    ),
    (
        "fillseqsync",
        "write --num/1000 values in sequential order, each synced",
    ),
    ("overwrite", "overwrite --num values in random key order"),
    (
        "fillbatch",
        "write --num values in sequential order, in batches of 1000",
    ),
    ("fillseqbatch", "the same as fillbatch"),
    (
        "fillrandbatch",
        "write --num values in random order, in batches of 1000",
    ),
    (
        "fill100K",
        "write --num/1000 values of 100,000 bytes in random order",
    ),
    (
        "fillseq100K",
        "write --num/1000 values of 100,000 bytes in sequential order",
    ),
    ("readseq", "read --reads entries in key order"),
    ("readreverse", "read --reads entries in reverse key order"),
    (
        "readrandom",
        "read --reads random keys (all present after a fill)",
    ),
    ("readmissing", "read --reads random keys that are absent"),
    (
        "readhot",
        "read --reads random keys from the first 1% of the key space",
    ),
    (
        "seekrandom",
        "seek a new cursor to --reads random keys (then --seek_nexts steps)",
    ),
    ("deleteseq", "delete --num keys in sequential order"),
    ("deleterandom", "delete --num keys in random order"),
    (
        "readwhilewriting",
        "--threads readers read random keys while one more thread writes",
    ),
    ("compact", "compact the whole database"),
    ("stats", "print the engine's own statistics"),
];

/// What one benchmark does to the database.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Write {
        random: bool,
        per_batch: u64,
        sync: bool,
    },
    Delete {
        random: bool,
    },
    Get {
        missing: bool,
        hot: bool,
    },
    Seek,
    Scan {
        reverse: bool,
    },
}

/// One benchmark's plan: what to do, how many times per thread, and whether it starts from a
/// new database.
#[derive(Debug, Clone, Copy)]
struct Plan {
    op: Op,
    count: u64,
    value_size: usize,
    fresh: bool,
}

pub struct Runner<'a> {
    flags: &'a Flags,
    engine_name: String,
    dir: PathBuf,
    config: EngineConfig,
    db: Option<Arc<dyn Engine>>,
    /// Seeds each benchmark's random draws differently (and repeatably).
    benchmark_index: u64,
}

impl<'a> Runner<'a> {
    pub fn new(flags: &'a Flags, engine_name: &str, dir: &Path) -> Self {
        Runner {
            flags,
            engine_name: engine_name.to_owned(),
            dir: dir.join(engine_name),
            config: flags.engine_config(),
            db: None,
            benchmark_index: 0,
        }
    }

    /// Runs `--benchmarks` in order, returning each outcome (printing is the caller's).
    pub fn run_all(&mut self, mut each: impl FnMut(&Outcome)) -> EngineResult<Vec<Outcome>> {
        let mut outcomes = Vec::new();
        let names: Vec<String> = self
            .flags
            .benchmarks
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        for name in names {
            self.benchmark_index += 1;
            let outcome = self.run_one(&name)?;
            each(&outcome);
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    /// Runs one benchmark by name.
    pub fn run_one(&mut self, name: &str) -> EngineResult<Outcome> {
        let num = self.flags.num;
        let reads = self.flags.reads();
        let value_size = self.flags.value_size;
        let write = |random, per_batch, sync| Op::Write {
            random,
            per_batch,
            sync,
        };
        let plan = |op, count, fresh| Plan {
            op,
            count,
            value_size,
            fresh,
        };
        let plan = match name {
            "fillseq" => plan(write(false, 1, false), num, true),
            "fillrandom" => plan(write(true, 1, false), num, true),
            "fillsync" => plan(write(true, 1, true), (num / 1000).max(1), true),
            "fillseqsync" => plan(write(false, 1, true), (num / 1000).max(1), true),
            "overwrite" => plan(write(true, 1, false), num, false),
            "fillbatch" | "fillseqbatch" => plan(write(false, 1000, false), num, true),
            "fillrandbatch" => plan(write(true, 1000, false), num, true),
            "fill100K" | "fillseq100K" => Plan {
                op: write(name == "fill100K", 1, false),
                count: (num / 1000).max(1),
                value_size: 100_000,
                fresh: true,
            },
            "readseq" => plan(Op::Scan { reverse: false }, reads, false),
            "readreverse" => plan(Op::Scan { reverse: true }, reads, false),
            "readrandom" => plan(
                Op::Get {
                    missing: false,
                    hot: false,
                },
                reads,
                false,
            ),
            "readmissing" => plan(
                Op::Get {
                    missing: true,
                    hot: false,
                },
                reads,
                false,
            ),
            "readhot" => plan(
                Op::Get {
                    missing: false,
                    hot: true,
                },
                reads,
                false,
            ),
            "seekrandom" => plan(Op::Seek, reads, false),
            "deleteseq" => plan(Op::Delete { random: false }, num, false),
            "deleterandom" => plan(Op::Delete { random: true }, num, false),
            "readwhilewriting" => return self.read_while_writing(),
            "compact" => return self.compact(),
            "stats" => return self.stats(),
            other => {
                let known: Vec<&str> = BENCHMARKS.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown benchmark '{other}' (known: {})",
                    known.join(", ")
                ));
            }
        };
        if plan.fresh && self.flags.use_existing_db {
            return Ok(Outcome::skipped(name, "(skipped: --use_existing_db)"));
        }
        if plan.fresh {
            self.config.value_size = plan.value_size;
            self.fresh()?;
        } else {
            self.ensure_open()?;
        }
        // The counters bracket the benchmark's threads, so an engine's background work counts
        // only while they run: what it defers past the end is missed, and what the previous
        // benchmark left behind is charged here. Nothing is synced to narrow that gap, so that
        // each engine runs as it would without the measurement.
        let io_before = matches!(plan.op, Op::Write { .. }).then(ProcIo::now);
        let mut outcome = self.run_threads(name, plan, self.flags.threads.max(1), None)?;
        outcome.io = io_before.map(|before| ProcIo::now().since(&before));
        if matches!(plan.op, Op::Write { .. } | Op::Delete { .. }) {
            outcome.db_bytes = Some(disk_usage(&self.dir));
        }
        Ok(outcome)
    }

    fn open_engine(&self) -> EngineResult<Arc<dyn Engine>> {
        engine::open(&self.engine_name, &self.dir, &self.config).map(Arc::from)
    }

    /// Closes the engine, removes its files and opens a new, empty database.
    fn fresh(&mut self) -> EngineResult<()> {
        self.db = None;
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)
                .map_err(|e| format!("removing {}: {e}", self.dir.display()))?;
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("creating {}: {e}", self.dir.display()))?;
        self.db = Some(self.open_engine()?);
        Ok(())
    }

    /// Opens the database if it is not open: the existing one, or a new one filled in key
    /// order (so that the reads have something to read).
    fn ensure_open(&mut self) -> EngineResult<Arc<dyn Engine>> {
        if self.db.is_none() {
            if self.dir.exists() {
                self.db = Some(self.open_engine()?);
            } else if self.flags.use_existing_db {
                return Err(format!(
                    "--use_existing_db, but {} does not exist",
                    self.dir.display()
                ));
            } else {
                self.run_one("fillseq")?;
            }
        }
        Ok(self.db.clone().expect("opened above"))
    }

    /// Runs `plan` on `threads` threads at once; `stop`, if given, is set when they are done
    /// (for a background writer).
    fn run_threads(
        &mut self,
        name: &str,
        plan: Plan,
        threads: usize,
        background: Option<&(dyn Fn(&AtomicBool) + Sync)>,
    ) -> EngineResult<Outcome> {
        let db = self.db.clone().expect("the database is open");
        let flags = self.flags;
        let progress = Progress::new(name, plan.count * threads as u64);
        let barrier = Barrier::new(threads + 1 + usize::from(background.is_some()));
        let done = AtomicBool::new(false);
        let seed = self.benchmark_index;
        // Each thread times itself from the moment the barrier releases it; the benchmark's
        // time runs from the first thread's start to the last thread's end. (Timing from the
        // spawning thread would miss work done before that thread is scheduled again.)
        let results = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let (db, barrier, progress) = (&db, &barrier, &progress);
                    scope.spawn(move || {
                        let mut worker = Worker::new(flags, plan, seed, t, threads);
                        barrier.wait();
                        let start = Instant::now();
                        let result = worker.run(&**db, progress);
                        (result, start, Instant::now())
                    })
                })
                .collect();
            let bg = background.map(|f| {
                let (barrier, done) = (&barrier, &done);
                scope.spawn(move || {
                    barrier.wait();
                    f(done);
                })
            });
            barrier.wait();
            let results: Vec<_> = workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        let now = Instant::now();
                        (Err("a thread panicked".into()), now, now)
                    })
                })
                .collect();
            done.store(true, Ordering::Release);
            if let Some(bg) = bg {
                let _ = bg.join();
            }
            results
        });
        let start = results
            .iter()
            .map(|r| r.1)
            .min()
            .expect("one thread at least");
        let end = results
            .iter()
            .map(|r| r.2)
            .max()
            .expect("one thread at least");
        let mut elapsed = end.duration_since(start);
        let results: Vec<EngineResult<WorkerResult>> = results.into_iter().map(|r| r.0).collect();
        progress.finish();
        let mut total = WorkerResult::default();
        for r in results {
            total.merge(r?);
        }
        let mut note = String::new();
        if matches!(plan.op, Op::Get { .. } | Op::Seek) {
            note = format!("({} of {} found)", total.found, total.ops);
        }
        if matches!(plan.op, Op::Scan { .. }) && flags.scan_reads_values {
            note = format!("(values read, digest {:016x})", total.value_digest);
        }
        if let Some(median) = median_pass(&total.passes) {
            // With threads, their passes overlap: the middle one stands for a pass of all.
            elapsed = median;
            let passes = flags.scan_passes();
            note = format!("{note} (median of {passes} passes)")
                .trim()
                .to_owned();
        }
        Ok(Outcome {
            name: name.to_owned(),
            ops: total.ops,
            elapsed,
            bytes: total.bytes,
            note,
            found: matches!(plan.op, Op::Get { .. } | Op::Seek).then_some(total.found),
            db_bytes: None,
            histogram: flags.histogram.then_some(total.histogram),
            skipped: false,
            threads,
            io: None,
        })
    }

    fn read_while_writing(&mut self) -> EngineResult<Outcome> {
        let db = self.ensure_open()?;
        let flags = self.flags;
        let seed = self.benchmark_index;
        let writer = move |done: &AtomicBool| {
            let mut rng = StdRng::seed_from_u64(seed ^ 0xfeed);
            let mut values = ValueGenerator::new(flags.compression_ratio, seed);
            let mut key = Vec::new();
            while !done.load(Ordering::Acquire) {
                make_key(&mut key, rng.gen_range(0..flags.num.max(1)), flags.key_size);
                let value = values.next(flags.value_size);
                if let Err(e) = db.write(&[(&key, value)], false) {
                    eprintln!("db_bench: readwhilewriting's writer: {e}");
                    return;
                }
            }
        };
        let plan = Plan {
            op: Op::Get {
                missing: false,
                hot: false,
            },
            count: flags.reads(),
            value_size: flags.value_size,
            fresh: false,
        };
        self.run_threads(
            "readwhilewriting",
            plan,
            flags.threads.max(1),
            Some(&writer),
        )
    }

    fn compact(&mut self) -> EngineResult<Outcome> {
        let db = self.ensure_open()?;
        let start = Instant::now();
        db.compact()?;
        Ok(Outcome {
            db_bytes: Some(disk_usage(&self.dir)),
            ..Outcome::single("compact", start.elapsed())
        })
    }

    fn stats(&mut self) -> EngineResult<Outcome> {
        let db = self.ensure_open()?;
        let text = db
            .stats()
            .unwrap_or_else(|| format!("({} reports no statistics)", self.engine_name));
        Ok(Outcome::skipped("stats", &format!("\n{}", text.trim_end())))
    }
}

/// What one thread did.
#[derive(Default)]
struct WorkerResult {
    ops: u64,
    bytes: u64,
    found: u64,
    /// `--scan_reads_values`: the sum of the [`value_digest`]s of the values a scan visited.
    value_digest: u64,
    histogram: Histogram,
    /// A scan of `--scan_passes` over one: each pass's time (the others count one pass's
    /// entries, bytes and digest).
    passes: Vec<Duration>,
}

impl WorkerResult {
    fn merge(&mut self, other: WorkerResult) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.found += other.found;
        self.value_digest = self.value_digest.wrapping_add(other.value_digest);
        self.histogram.merge(&other.histogram);
        self.passes.extend(other.passes);
    }
}

/// The middle of `passes` (the upper one of the two middle ones of an even count); `None` if
/// there are none.
fn median_pass(passes: &[Duration]) -> Option<Duration> {
    let mut sorted = passes.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied()
}

/// One thread's share of a benchmark: its key source, values and scratch buffers.
struct Worker<'a> {
    flags: &'a Flags,
    plan: Plan,
    keys: KeySource,
    values: ValueGenerator,
    histogram: Option<Histogram>,
}

/// Where a thread's keys come from.
enum KeySource {
    Sequential { next: u64 },
    Uniform { rng: Box<StdRng>, range: u64 },
    Shuffled { order: Arc<Vec<u64>>, pos: usize },
}

impl KeySource {
    fn next(&mut self) -> u64 {
        match self {
            KeySource::Sequential { next } => {
                *next += 1;
                *next - 1
            }
            KeySource::Uniform { rng, range } => rng.gen_range(0..*range),
            KeySource::Shuffled { order, pos } => {
                let k = order[*pos % order.len()];
                *pos += 1;
                k
            }
        }
    }
}

/// A permutation of `0..n`, the same for every thread of a benchmark.
///
/// One buffer serves the whole process: each random benchmark shuffles it again in place
/// (when no worker still holds it), and threads asking for the same permutation share it. A
/// new 8 MB buffer per benchmark (at 1M keys) made the harness's own memory depend on the
/// engine measured: once the first was freed, glibc's threshold for mapping large blocks
/// rose, and the next one landed on free heap memory an engine had left resident in one
/// process and on fresh pages in another, about 1 MB of peak between strata and LevelDB
/// (docs/benchmarks.md, section (27)). Kept, it counts the same for every engine in every
/// phase after the first random benchmark.
fn shuffled(n: u64, seed: u64) -> Arc<Vec<u64>> {
    static KEPT: Mutex<KeptPermutation> = Mutex::new(KeptPermutation(None));
    KEPT.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(n, seed)
}

/// The permutation [`shuffled`] keeps: its `n`, its seed and its buffer.
struct KeptPermutation(Option<(u64, u64, Arc<Vec<u64>>)>);

impl KeptPermutation {
    /// The permutation of `0..n` for `seed`: the kept one if it is that, else the kept buffer
    /// shuffled again if no one else holds it, else a new buffer. Kept afterwards.
    fn get(&mut self, n: u64, seed: u64) -> Arc<Vec<u64>> {
        if let Some((kept_n, kept_seed, order)) = self.0.as_ref() {
            if (*kept_n, *kept_seed) == (n, seed) {
                return order.clone();
            }
        }
        let mut order = self.0.take().map(|(_, _, order)| order).unwrap_or_default();
        if Arc::get_mut(&mut order).is_none() {
            order = Arc::default();
        }
        let buffer = Arc::get_mut(&mut order).expect("a buffer no one else holds");
        buffer.clear();
        buffer.extend(0..n.max(1));
        buffer.shuffle(&mut StdRng::seed_from_u64(seed));
        self.0 = Some((n, seed, order.clone()));
        order
    }
}

impl<'a> Worker<'a> {
    fn new(flags: &'a Flags, plan: Plan, seed: u64, thread: usize, threads: usize) -> Self {
        let num = flags.num.max(1);
        let random = match plan.op {
            Op::Write { random, .. } | Op::Delete { random } => random,
            Op::Get { .. } | Op::Seek => true,
            Op::Scan { .. } => false,
        };
        let hot = matches!(plan.op, Op::Get { hot: true, .. });
        let range = if hot { num.div_ceil(100) } else { num };
        let thread_seed = seed.wrapping_mul(1_000_003).wrapping_add(thread as u64);
        let keys = if !random {
            KeySource::Sequential { next: 0 }
        } else {
            match flags.key_order {
                KeyOrder::Uniform => KeySource::Uniform {
                    rng: Box::new(StdRng::seed_from_u64(thread_seed)),
                    range,
                },
                KeyOrder::Shuffle => {
                    // One permutation per benchmark; threads start at evenly spaced offsets,
                    // so that together they visit each key once per pass.
                    let order = shuffled(range, seed);
                    let pos = (order.len() / threads.max(1)) * thread;
                    KeySource::Shuffled { order, pos }
                }
            }
        };
        Worker {
            flags,
            plan,
            keys,
            values: ValueGenerator::new(flags.compression_ratio, 301 + thread as u64),
            histogram: flags.histogram.then(Histogram::new),
        }
    }

    fn run(&mut self, db: &dyn Engine, progress: &Progress) -> EngineResult<WorkerResult> {
        let mut result = match self.plan.op {
            Op::Write {
                per_batch, sync, ..
            } => self.write(db, per_batch, sync, progress)?,
            Op::Delete { .. } => self.delete(db, progress)?,
            Op::Get { missing, .. } => self.get(db, missing, progress)?,
            Op::Seek => self.seek(db, progress)?,
            Op::Scan { reverse } => self.scan(db, reverse)?,
        };
        if let Some(h) = self.histogram.take() {
            result.histogram = h;
        }
        Ok(result)
    }

    /// Times one operation into the histogram, if there is one.
    fn timed<T>(&mut self, op: impl FnOnce() -> T) -> T {
        match &mut self.histogram {
            None => op(),
            Some(h) => {
                let start = Instant::now();
                let out = op();
                h.add(start.elapsed().as_secs_f64() * 1e6);
                out
            }
        }
    }

    fn write(
        &mut self,
        db: &dyn Engine,
        per_batch: u64,
        sync: bool,
        progress: &Progress,
    ) -> EngineResult<WorkerResult> {
        let mut tally = progress.tally();
        let (key_size, value_size) = (self.flags.key_size, self.plan.value_size);
        let per_batch = per_batch.max(1) as usize;
        let mut keys: Vec<Vec<u8>> = vec![Vec::with_capacity(key_size); per_batch];
        let mut values: Vec<Vec<u8>> = vec![Vec::with_capacity(value_size); per_batch];
        let count = self.plan.count;
        let mut i = 0;
        while i < count {
            let n = (per_batch as u64).min(count - i) as usize;
            for j in 0..n {
                make_key(&mut keys[j], self.keys.next(), key_size);
                values[j].clear();
                values[j].extend_from_slice(self.values.next(value_size));
            }
            let entries: Vec<(&[u8], &[u8])> = keys[..n]
                .iter()
                .zip(&values)
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            self.timed(|| db.write(&entries, sync))?;
            i += n as u64;
            tally.add(n as u64);
        }
        Ok(WorkerResult {
            ops: count,
            bytes: count * (key_size + value_size) as u64,
            ..WorkerResult::default()
        })
    }

    fn delete(&mut self, db: &dyn Engine, progress: &Progress) -> EngineResult<WorkerResult> {
        let mut tally = progress.tally();
        let mut key = Vec::with_capacity(self.flags.key_size);
        for _ in 0..self.plan.count {
            make_key(&mut key, self.keys.next(), self.flags.key_size);
            self.timed(|| db.delete(&[&key], false))?;
            tally.add(1);
        }
        Ok(WorkerResult {
            ops: self.plan.count,
            ..WorkerResult::default()
        })
    }

    fn get(
        &mut self,
        db: &dyn Engine,
        missing: bool,
        progress: &Progress,
    ) -> EngineResult<WorkerResult> {
        let mut tally = progress.tally();
        let mut key = Vec::with_capacity(self.flags.key_size + 1);
        let mut value = Vec::new();
        let mut found = 0;
        let mut bytes = 0;
        for _ in 0..self.plan.count {
            make_key(&mut key, self.keys.next(), self.flags.key_size);
            if missing {
                // Sorts right after a present key, so a lookup lands among real keys.
                key.push(b'.');
            }
            if self.timed(|| db.get(&key, &mut value))? {
                found += 1;
                bytes += (key.len() + value.len()) as u64;
            }
            tally.add(1);
        }
        Ok(WorkerResult {
            ops: self.plan.count,
            bytes,
            found,
            ..WorkerResult::default()
        })
    }

    fn seek(&mut self, db: &dyn Engine, progress: &Progress) -> EngineResult<WorkerResult> {
        let mut tally = progress.tally();
        let mut key = Vec::with_capacity(self.flags.key_size);
        let mut at = Vec::new();
        let mut found = 0;
        let nexts = self.flags.seek_nexts;
        for _ in 0..self.plan.count {
            make_key(&mut key, self.keys.next(), self.flags.key_size);
            let hit = if nexts == 0 {
                self.timed(|| db.seek(&key, &mut at))? && at == key
            } else {
                // Found when the first entry the seek lands on is the key sought.
                let mut first: Option<bool> = None;
                let sought = key.as_slice();
                self.timed(|| {
                    db.seek_scan(sought, nexts, &mut |k, _| {
                        first.get_or_insert(k == sought);
                    })
                })?;
                first == Some(true)
            };
            if hit {
                found += 1;
            }
            tally.add(1);
        }
        Ok(WorkerResult {
            ops: self.plan.count,
            found,
            ..WorkerResult::default()
        })
    }

    /// One scan, or `--scan_passes` of them in a row (each timed; the result counts the first
    /// pass's entries, bytes and digest, and every pass must agree with it).
    fn scan(&mut self, db: &dyn Engine, reverse: bool) -> EngineResult<WorkerResult> {
        let reads_values = self.flags.scan_reads_values;
        let passes = self.flags.scan_passes();
        let mut first: Option<(u64, u64, u64)> = None;
        let mut times = Vec::new();
        for pass in 0..passes {
            let mut bytes = 0u64;
            let mut digest = 0u64;
            let start = Instant::now();
            let n = db.scan(reverse, self.plan.count, &mut |k, v| {
                bytes += (k.len() + v.len()) as u64;
                if reads_values {
                    digest = digest.wrapping_add(value_digest(v));
                }
            })?;
            let took = start.elapsed();
            if let Some(h) = &mut self.histogram {
                // A scan is one call; its mean time per entry stands for each entry.
                let per_entry = took.as_secs_f64() * 1e6 / n.max(1) as f64;
                for _ in 0..n {
                    h.add(per_entry);
                }
            }
            match first {
                None => first = Some((n, bytes, digest)),
                Some(seen) if seen != (n, bytes, digest) => {
                    return Err(format!(
                        "scan pass {} of {passes} read {n} entries ({bytes} bytes, digest \
                         {digest:016x}), the first {} ({} bytes, digest {:016x})",
                        pass + 1,
                        seen.0,
                        seen.1,
                        seen.2
                    ));
                }
                Some(_) => {}
            }
            times.push(took);
        }
        let (ops, bytes, value_digest) = first.unwrap_or_default();
        Ok(WorkerResult {
            ops,
            bytes,
            value_digest,
            passes: if passes > 1 { times } else { Vec::new() },
            ..WorkerResult::default()
        })
    }
}

/// A sum over every byte of `value` (eight at a time, so that it costs little beside loading
/// them), which `--scan_reads_values` makes a scan compute: each byte is loaded, and any byte
/// changed changes the result.
fn value_digest(value: &[u8]) -> u64 {
    let mut words = value.chunks_exact(8);
    let mut sum = 0u64;
    for w in &mut words {
        sum = sum.wrapping_add(u64::from_le_bytes(w.try_into().expect("eight bytes")));
    }
    for (i, b) in words.remainder().iter().enumerate() {
        sum = sum.wrapping_add(u64::from(*b) << (8 * i));
    }
    sum
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn flags(extra: &[&str]) -> Flags {
        let mut args = vec!["db_bench", "--num=3000"];
        args.extend_from_slice(extra);
        Flags::parse_from(args)
    }

    #[test]
    fn one_permutation_buffer_serves_each_benchmark_in_turn() {
        let mut kept = KeptPermutation(None);
        let first = kept.get(1000, 7);
        let mut sorted = first.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<u64>>());
        // The threads of one benchmark share it.
        assert!(Arc::ptr_eq(&first, &kept.get(1000, 7)));
        let held = first.as_ptr();
        let first_order = first.to_vec();
        // Still held (by a worker of a benchmark still running): the next gets a buffer of
        // its own.
        let second = kept.get(1000, 8);
        assert_ne!(second.as_ptr(), held);
        assert_ne!(*second, first_order);
        drop(first);
        // Released: the next benchmark's permutation is made in the kept buffer.
        let second_buffer = second.as_ptr();
        drop(second);
        let third = kept.get(10, 9);
        assert_eq!(third.as_ptr(), second_buffer);
        let mut sorted = third.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<u64>>());
    }

    #[test]
    fn readseq_after_fillseq_visits_every_entry_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags(&[]);
        let mut runner = Runner::new(&flags, "strata", dir.path());
        let fill = runner.run_one("fillseq").unwrap();
        assert_eq!(fill.ops, 3000);
        assert!(fill.db_bytes.unwrap() > 0);
        if std::path::Path::new("/proc/self/io").exists() {
            // Other tests' threads write too, so only its presence is certain.
            assert!(fill.write_amp().unwrap().factor > 0.0);
        }
        let scan = runner.run_one("readseq").unwrap();
        assert_eq!(scan.ops, 3000);
        assert_eq!(scan.bytes, 3000 * 116);
        let reverse = runner.run_one("readreverse").unwrap();
        assert_eq!(reverse.ops, 3000);

        // The entries are exactly the generator's keys, in order.
        let db = runner.ensure_open().unwrap();
        let mut keys = Vec::new();
        db.scan(false, u64::MAX, &mut |k, v| {
            assert_eq!(v.len(), 100);
            keys.push(k.to_vec());
        })
        .unwrap();
        let mut expected = Vec::new();
        for i in 0..3000 {
            let mut k = Vec::new();
            make_key(&mut k, i, 16);
            expected.push(k);
        }
        assert_eq!(keys, expected);
    }

    #[test]
    fn readrandom_after_a_shuffled_fill_finds_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags(&["--key_order=shuffle"]);
        let mut runner = Runner::new(&flags, "strata", dir.path());
        runner.run_one("fillrandom").unwrap();
        let read = runner.run_one("readrandom").unwrap();
        assert_eq!(read.found, Some(3000));
        assert_eq!(runner.run_one("readmissing").unwrap().found, Some(0));
        assert_eq!(runner.run_one("seekrandom").unwrap().found, Some(3000));
        runner.run_one("deleterandom").unwrap();
        assert_eq!(runner.run_one("readrandom").unwrap().found, Some(0));
    }

    #[test]
    fn the_value_digest_changes_with_every_byte() {
        // 100 bytes: twelve whole words and a remainder of four.
        let value: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37)).collect();
        let base = value_digest(&value);
        for i in 0..value.len() {
            let mut changed = value.clone();
            changed[i] ^= 1;
            assert_ne!(value_digest(&changed), base, "byte {i}");
        }
        assert_eq!(value_digest(&[]), 0);
    }

    #[test]
    fn scans_that_read_values_report_one_digest_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let reading = flags(&["--scan_reads_values"]);
        let mut runner = Runner::new(&reading, "strata", dir.path());
        runner.run_one("fillseq").unwrap();
        let forward = runner.run_one("readseq").unwrap();
        let backward = runner.run_one("readreverse").unwrap();
        assert_eq!(forward.ops, 3000);
        assert!(
            forward.note.starts_with("(values read, digest "),
            "{}",
            forward.note
        );
        assert_ne!(forward.note, "(values read, digest 0000000000000000)");
        // The same values, summed in the other order.
        assert_eq!(forward.note, backward.note);
        let dir = tempfile::tempdir().unwrap();
        let plain = flags(&[]);
        let mut runner = Runner::new(&plain, "strata", dir.path());
        runner.run_one("fillseq").unwrap();
        assert_eq!(runner.run_one("readseq").unwrap().note, "");
    }

    #[test]
    fn zero_scan_passes_are_refused_with_the_flag_named() {
        let err = Flags::try_parse_from(["db_bench", "--scan_passes=0"]).unwrap_err();
        assert!(err.to_string().contains("--scan_passes"), "{err}");
        assert_eq!(flags(&[]).scan_passes(), 1);
        assert_eq!(flags(&["--scan_passes=4"]).scan_passes(), 4);
    }

    #[test]
    fn the_median_pass_is_the_middle_one() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        assert_eq!(median_pass(&[]), None);
        assert_eq!(median_pass(&ms(&[7])), Some(Duration::from_millis(7)));
        assert_eq!(
            median_pass(&ms(&[90, 10, 30, 50, 20])),
            Some(Duration::from_millis(30))
        );
        assert_eq!(
            median_pass(&ms(&[40, 10, 30, 20])),
            Some(Duration::from_millis(30))
        );
    }

    #[test]
    fn a_scan_of_several_passes_counts_one_pass_and_times_its_median() {
        let dir = tempfile::tempdir().unwrap();
        let passes = flags(&["--scan_passes=3", "--scan_reads_values"]);
        let mut runner = Runner::new(&passes, "strata", dir.path());
        runner.run_one("fillseq").unwrap();
        for name in ["readseq", "readreverse"] {
            let wall = Instant::now();
            let scan = runner.run_one(name).unwrap();
            let wall = wall.elapsed();
            assert_eq!(scan.ops, 3000, "{name}");
            assert_eq!(scan.bytes, 3000 * (16 + 100), "{name}");
            assert!(
                scan.note.ends_with(" (median of 3 passes)"),
                "{}",
                scan.note
            );
            // The middle of three passes is at most half of all three.
            assert!(
                scan.elapsed * 2 <= wall,
                "{name}: {:?} of {wall:?}",
                scan.elapsed
            );
        }
        // One pass reads the same values: the digest is that of a single pass.
        let dir = tempfile::tempdir().unwrap();
        let one = flags(&["--scan_reads_values"]);
        let mut single = Runner::new(&one, "strata", dir.path());
        single.run_one("fillseq").unwrap();
        let once = single.run_one("readseq").unwrap();
        assert!(!once.note.contains("passes"), "{}", once.note);
        let thrice = runner.run_one("readseq").unwrap();
        assert_eq!(
            thrice.note,
            format!("{} (median of 3 passes)", once.note),
            "the same digest"
        );
    }

    #[test]
    fn seekrandom_with_steps_reads_the_entries_after_each_key() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags(&["--seek_nexts=5"]);
        let mut runner = Runner::new(&flags, "strata", dir.path());
        runner.run_one("fillseq").unwrap();
        assert_eq!(runner.run_one("seekrandom").unwrap().found, Some(3000));
        // Five steps after the seek: six entries in key order, fewer near the end.
        let db = runner.ensure_open().unwrap();
        for (start, visited) in [(100u64, 6u64), (2997, 3)] {
            let mut key = Vec::new();
            make_key(&mut key, start, 16);
            let mut seen = Vec::new();
            let n = db
                .seek_scan(&key, 5, &mut |k, v| {
                    assert!(!v.is_empty());
                    seen.push(k.to_vec());
                })
                .unwrap();
            assert_eq!(n, visited);
            let expected: Vec<Vec<u8>> = (start..start + visited)
                .map(|i| {
                    let mut k = Vec::new();
                    make_key(&mut k, i, 16);
                    k
                })
                .collect();
            assert_eq!(seen, expected);
        }
    }

    #[test]
    fn a_uniform_fill_repeats_keys_and_misses_about_a_third() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags(&["--key_order=uniform"]);
        let mut runner = Runner::new(&flags, "strata", dir.path());
        runner.run_one("fillrandom").unwrap();
        let db = runner.ensure_open().unwrap();
        let stored = db.scan(false, u64::MAX, &mut |_, _| {}).unwrap();
        // 1 - 1/e of the keys, give or take.
        assert!((1700..2100).contains(&stored), "{stored} distinct keys");
    }

    #[test]
    fn threads_share_the_work_and_batches_count_entries() {
        let dir = tempfile::tempdir().unwrap();
        let flags = flags(&["--threads=3"]);
        let mut runner = Runner::new(&flags, "strata", dir.path());
        let fill = runner.run_one("fillrandbatch").unwrap();
        assert_eq!(fill.ops, 9000);
        let read = runner.run_one("readrandom").unwrap();
        assert_eq!((read.ops, read.found), (9000, Some(9000)));
        let rww = runner.run_one("readwhilewriting").unwrap();
        assert_eq!(rww.found, Some(9000));
    }

    #[test]
    fn fills_are_skipped_on_an_existing_database() {
        let dir = tempfile::tempdir().unwrap();
        let first = flags(&[]);
        Runner::new(&first, "strata", dir.path())
            .run_one("fillseq")
            .unwrap();
        let again = flags(&["--use_existing_db"]);
        let mut runner = Runner::new(&again, "strata", dir.path());
        assert!(runner.run_one("fillrandom").unwrap().skipped);
        assert_eq!(runner.run_one("readrandom").unwrap().found, Some(3000));
        assert!(runner.run_one("nonsense").is_err());
    }
}
