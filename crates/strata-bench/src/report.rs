// SPDX-License-Identifier: MIT OR Apache-2.0
//! The report, printed as LevelDB's db_bench prints it, or as JSON with `--json`; and progress
//! on stderr for long runs.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::histogram::Histogram;
use crate::measure::{IoSource, ProcIo, WriteAmp};
use crate::Flags;

/// Prints the header: the engine, sizes of keys, values and entries, and the raw and estimated
/// file sizes.
pub fn print_header(flags: &Flags, engine: &str) {
    println!("Engine:     {engine}");
    println!("Keys:       {} bytes each", flags.key_size);
    println!(
        "Values:     {} bytes each ({} bytes after compression)",
        flags.value_size,
        (flags.value_size as f64 * flags.compression_ratio) as u64
    );
    println!("Entries:    {}", flags.num);
    println!("RawSize:    {:.1} MB (estimated)", raw_mb(flags));
    println!("FileSize:   {:.1} MB (estimated)", file_mb(flags));
    if flags.threads > 1 {
        println!("Threads:    {}", flags.threads);
    }
    if cfg!(debug_assertions) {
        println!("WARNING: Optimization is disabled: benchmarks unnecessarily slow");
    }
    println!("------------------------------------------------");
}

fn raw_mb(flags: &Flags) -> f64 {
    (flags.key_size + flags.value_size) as f64 * flags.num as f64 / 1_048_576.0
}

fn file_mb(flags: &Flags) -> f64 {
    (flags.key_size as f64 + flags.value_size as f64 * flags.compression_ratio) * flags.num as f64
        / 1_048_576.0
}

/// One benchmark's result.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: String,
    pub ops: u64,
    pub elapsed: Duration,
    /// Bytes of keys and values moved, for MB/s; 0 to leave it out.
    pub bytes: u64,
    /// Free text after the figures, as db_bench prints it (for example "(1000 of 1000 found)").
    pub note: String,
    /// Keys found, for reads and seeks.
    pub found: Option<u64>,
    /// Disk space of the database afterwards, for writes and compaction.
    pub db_bytes: Option<u64>,
    pub histogram: Option<Histogram>,
    /// Not run (or not timed): only the note is printed.
    pub skipped: bool,
    /// Threads that shared the work: micros/op is per thread, as LevelDB reports it.
    pub threads: usize,
    /// For write benchmarks: what the process's I/O counters grew by while it ran (see
    /// [`ProcIo`] for what they count and miss).
    pub io: Option<ProcIo>,
}

impl Outcome {
    /// A benchmark that ran once, as one operation.
    pub fn single(name: &str, elapsed: Duration) -> Self {
        Outcome {
            name: name.to_owned(),
            ops: 1,
            elapsed,
            bytes: 0,
            note: String::new(),
            found: None,
            db_bytes: None,
            histogram: None,
            skipped: false,
            threads: 1,
            io: None,
        }
    }

    /// A line that carries only a note (a skipped benchmark, or `stats`).
    pub fn skipped(name: &str, note: &str) -> Self {
        Outcome {
            ops: 0,
            note: note.to_owned(),
            skipped: true,
            ..Outcome::single(name, Duration::ZERO)
        }
    }

    /// Wall time per operation of one thread (LevelDB's micros/op).
    pub fn micros_per_op(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 * self.threads.max(1) as f64 / self.ops.max(1) as f64
    }

    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mb_per_sec(&self) -> Option<f64> {
        let secs = self.elapsed.as_secs_f64();
        (self.bytes > 0 && secs > 0.0).then(|| self.bytes as f64 / 1_048_576.0 / secs)
    }

    /// Bytes written to storage while the benchmark ran ÷ the bytes of keys and values it
    /// wrote (`bytes`, which for a write benchmark is ops × (key size + value size)).
    pub fn write_amp(&self) -> Option<WriteAmp> {
        self.io?.write_amplification(self.bytes)
    }
}

/// Prints one result line, `name : micros/op; MB/s; ops/sec; note`, then the histogram if any.
pub fn print_outcome(o: &Outcome) {
    if o.skipped {
        println!("{:<12} : {}", o.name, o.note);
        return;
    }
    let mut line = format!("{:<12} : {:>11.3} micros/op;", o.name, o.micros_per_op());
    if let Some(mb) = o.mb_per_sec() {
        line.push_str(&format!(" {mb:>6.1} MB/s"));
    }
    line.push_str(&format!(" {:>10.0} ops/sec", o.ops_per_sec()));
    if !o.note.is_empty() {
        line.push(' ');
        line.push_str(&o.note);
    }
    if let Some(bytes) = o.db_bytes {
        line.push_str(&format!(" (db {:.1} MB)", bytes as f64 / 1_048_576.0));
    }
    if let Some(wa) = o.write_amp() {
        line.push_str(&format!(" write-amp {:.2}", wa.factor));
        if wa.source == IoSource::Wchar {
            line.push_str(" (from wchar: write_bytes stayed 0)");
        }
    }
    println!("{line}");
    if let Some(h) = &o.histogram {
        println!("{}", h.report());
    }
}

/// Latency percentiles, in microseconds, for JSON.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Latency {
    pub average: f64,
    pub p50: f64,
    pub p75: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
}

/// One benchmark's result, as `--json` writes it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct JsonOutcome {
    pub name: String,
    pub ops: u64,
    pub seconds: f64,
    pub micros_per_op: f64,
    pub ops_per_sec: f64,
    pub mb_per_sec: Option<f64>,
    pub found: Option<u64>,
    pub db_bytes: Option<u64>,
    pub latency: Option<Latency>,
    pub note: String,
    pub skipped: bool,
    /// Write benchmarks: the growth of /proc/self/io's `write_bytes` while the benchmark ran
    /// (bytes the process, background threads included, dirtied in the page cache for
    /// storage). Writes an engine defers past the benchmark's end are not in it, and what the
    /// previous benchmark left to background threads may be.
    #[serde(default)]
    pub io_write_bytes: Option<u64>,
    /// Of those, bytes of files truncated or deleted before they reached storage.
    #[serde(default)]
    pub io_cancelled_write_bytes: Option<u64>,
    /// The growth of `wchar`: bytes handed to write() calls.
    #[serde(default)]
    pub io_wchar: Option<u64>,
    /// Bytes of keys and values the benchmark wrote: ops × (key size + value size).
    #[serde(default)]
    pub user_bytes_written: Option<u64>,
    /// Bytes written to storage ÷ `user_bytes_written`.
    #[serde(default)]
    pub write_amp: Option<f64>,
    /// The counter `write_amp` comes from: "write_bytes", or "wchar" where write_bytes
    /// stayed 0.
    #[serde(default)]
    pub write_amp_source: Option<String>,
}

/// A whole run, as `--json` writes it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct JsonRun {
    pub engine: String,
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub threads: usize,
    pub key_order: String,
    pub cache_size: usize,
    pub write_buffer_size: usize,
    pub compression: bool,
    pub results: Vec<JsonOutcome>,
    pub peak_memory_bytes: Option<u64>,
    /// The peak of anonymous resident memory (see `measure::AnonPeak`).
    #[serde(default)]
    pub peak_anon_memory_bytes: Option<u64>,
    /// Set by `--compare`: the database's disk usage after the process exited.
    #[serde(default)]
    pub disk_bytes_after_close: Option<u64>,
}

impl From<&Outcome> for JsonOutcome {
    fn from(o: &Outcome) -> Self {
        JsonOutcome {
            name: o.name.clone(),
            ops: o.ops,
            seconds: o.elapsed.as_secs_f64(),
            micros_per_op: o.micros_per_op(),
            ops_per_sec: o.ops_per_sec(),
            mb_per_sec: o.mb_per_sec(),
            found: o.found,
            db_bytes: o.db_bytes,
            latency: o.histogram.as_ref().map(|h| Latency {
                average: h.average(),
                p50: h.percentile(50.0),
                p75: h.percentile(75.0),
                p99: h.percentile(99.0),
                p99_9: h.percentile(99.9),
                p99_99: h.percentile(99.99),
            }),
            note: o.note.clone(),
            skipped: o.skipped,
            io_write_bytes: o.io.and_then(|io| io.write_bytes),
            io_cancelled_write_bytes: o.io.and_then(|io| io.cancelled_write_bytes),
            io_wchar: o.io.and_then(|io| io.wchar),
            user_bytes_written: o.io.map(|_| o.bytes),
            write_amp: o.write_amp().map(|wa| wa.factor),
            write_amp_source: o.write_amp().map(|wa| wa.source.name().to_owned()),
        }
    }
}

/// Progress of one benchmark on stderr: a bar redrawn in place when stderr is a terminal;
/// otherwise a line at each tenth, and only for runs of a million operations or more.
pub struct Progress {
    name: String,
    total: u64,
    done: AtomicU64,
    /// The next count at which to report.
    next_report: AtomicU64,
    step: u64,
    terminal: bool,
    start: Instant,
}

impl Progress {
    pub fn new(name: &str, total: u64) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let step = if terminal {
            (total / 100).max(1)
        } else if total >= 1_000_000 {
            total / 10
        } else {
            u64::MAX
        };
        Progress {
            name: name.to_owned(),
            total,
            done: AtomicU64::new(0),
            next_report: AtomicU64::new(step),
            step,
            terminal,
            start: Instant::now(),
        }
    }

    /// A per-thread counter that reports to this progress in steps of 1024 operations, so that
    /// threads do not contend on the shared count at every operation.
    pub fn tally(&self) -> Tally<'_> {
        Tally {
            progress: self,
            pending: 0,
        }
    }

    /// Counts `n` more operations done.
    #[inline]
    fn add(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if done >= self.next_report.load(Ordering::Relaxed) {
            self.report(done);
        }
    }

    #[cold]
    fn report(&self, done: u64) {
        let next = self.next_report.load(Ordering::Relaxed);
        if done < next
            || self
                .next_report
                .compare_exchange(
                    next,
                    next.saturating_add(self.step),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        let fraction = done as f64 / self.total.max(1) as f64;
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let filled = (fraction * 40.0).round() as usize;
            let _ = write!(
                err,
                "\r{:<12} [{}{}] {:>3.0}% {:>8.1}s",
                self.name,
                "#".repeat(filled.min(40)),
                " ".repeat(40 - filled.min(40)),
                fraction * 100.0,
                self.start.elapsed().as_secs_f64()
            );
        } else {
            let _ = writeln!(
                err,
                "... {}: finished {done} of {} ops ({:.0}%, {:.1}s)",
                self.name,
                self.total,
                fraction * 100.0,
                self.start.elapsed().as_secs_f64()
            );
        }
        let _ = err.flush();
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if self.terminal && self.done.load(Ordering::Relaxed) >= self.step {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:78}\r", "");
            let _ = err.flush();
        }
    }
}

/// One thread's uncounted operations; see [`Progress::tally`]. Reports the rest when dropped.
pub struct Tally<'a> {
    progress: &'a Progress,
    pending: u64,
}

impl Tally<'_> {
    #[inline]
    pub fn add(&mut self, n: u64) {
        self.pending += n;
        if self.pending >= 1024 {
            self.progress.add(std::mem::take(&mut self.pending));
        }
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        if self.pending > 0 {
            self.progress.add(self.pending);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_benchmarks_report_their_write_amplification() {
        let mut o = Outcome::single("fillseq", Duration::from_secs(1));
        o.ops = 1000;
        o.bytes = 116_000;
        o.io = Some(ProcIo {
            write_bytes: Some(290_000),
            cancelled_write_bytes: Some(0),
            wchar: Some(300_000),
        });
        let j = JsonOutcome::from(&o);
        assert_eq!(j.user_bytes_written, Some(116_000));
        assert_eq!(j.io_write_bytes, Some(290_000));
        assert_eq!(j.write_amp, Some(2.5));
        assert_eq!(j.write_amp_source.as_deref(), Some("write_bytes"));
        // A read has no counters, so no figures.
        let read = JsonOutcome::from(&Outcome::single("readrandom", Duration::from_secs(1)));
        assert_eq!((read.write_amp, read.user_bytes_written), (None, None));
    }

    #[test]
    fn results_written_before_write_amplification_still_parse() {
        let old = r#"{"name":"fillseq","ops":10,"seconds":1.0,"micros_per_op":1.0,
            "ops_per_sec":10.0,"mb_per_sec":null,"found":null,"db_bytes":null,"latency":null,
            "note":"","skipped":false}"#;
        let o: JsonOutcome = serde_json::from_str(old).unwrap();
        assert_eq!((o.write_amp, o.io_write_bytes), (None, None));
    }
}
