// SPDX-License-Identifier: MIT OR Apache-2.0
//! What a run measures beside time: the disk its database occupies, and the process's peak
//! memory, resident (VmHWM) and anonymous (RssAnon, sampled).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of disk the files under `dir` occupy (allocated blocks, so that sparse files count
/// for what they use, not for their length).
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// The process's peak resident memory in KiB (Linux), if known. It counts the pages of mapped
/// files the process touched (the tables of strata, LevelDB and LMDB), which the kernel may
/// drop at any time: see [`AnonPeak`] for the memory the engine itself holds.
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM:")
}

/// A field of /proc/self/status, in KiB.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The peak of the process's anonymous resident memory (`RssAnon`: heap, stacks, private
/// copies; not the page cache behind mapped files), sampled every 10 ms by a thread of its own
/// until dropped. The kernel keeps no high-water mark of it, so a peak shorter than a sample
/// may be missed.
pub struct AnonPeak {
    peak_kib: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AnonPeak {
    pub fn start() -> AnonPeak {
        let peak_kib = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (peak, done) = (peak_kib.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("anon-peak".into())
            .spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if let Some(kib) = status_kib("RssAnon:") {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            })
            .ok();
        AnonPeak {
            peak_kib,
            stop,
            thread,
        }
    }

    /// The peak so far in KiB, with a last sample taken now; `None` if nothing was sampled.
    pub fn peak_kib(&self) -> Option<u64> {
        if let Some(kib) = status_kib("RssAnon:") {
            self.peak_kib.fetch_max(kib, Ordering::Relaxed);
        }
        Some(self.peak_kib.load(Ordering::Relaxed)).filter(|&k| k > 0)
    }
}

impl Drop for AnonPeak {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The process's I/O counters from /proc/self/io (Linux), each `None` if the file or the
/// field is missing. The kernel sums them over every thread of the process, living or ended,
/// so an engine's background threads (flushes, compactions) count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcIo {
    /// `write_bytes`: bytes the process caused to be sent to storage. The kernel charges them
    /// when a page of the page cache turns dirty (by write() or through a writable mapping),
    /// not when it reaches the disk: a page dirtied again before writeback is charged once,
    /// and a file on a filesystem without a block device (tmpfs) charges nothing.
    pub write_bytes: Option<u64>,
    /// `cancelled_write_bytes`: dirty bytes that were truncated or deleted before writeback,
    /// so charged in `write_bytes` but never written.
    pub cancelled_write_bytes: Option<u64>,
    /// `wchar`: bytes passed to write()-like system calls, whether or not they reach storage;
    /// writes through a memory map (LMDB's `MDB_WRITEMAP`) are not in it.
    pub wchar: Option<u64>,
}

impl ProcIo {
    /// The counters now; all `None` where /proc/self/io cannot be read.
    pub fn now() -> ProcIo {
        std::fs::read_to_string("/proc/self/io")
            .map(|text| ProcIo::parse(&text))
            .unwrap_or_default()
    }

    /// Parses the text of /proc/PID/io (`name: value` lines); unknown fields are ignored.
    pub fn parse(text: &str) -> ProcIo {
        let field = |name: &str| {
            text.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name)
                    .then(|| value.trim().parse().ok())
                    .flatten()
            })
        };
        ProcIo {
            write_bytes: field("write_bytes"),
            cancelled_write_bytes: field("cancelled_write_bytes"),
            wchar: field("wchar"),
        }
    }

    /// What was counted between `earlier` and `self`. The counters only grow; a field missing
    /// from either reading is missing from the difference.
    pub fn since(&self, earlier: &ProcIo) -> ProcIo {
        let delta = |now: Option<u64>, then: Option<u64>| Some(now?.saturating_sub(then?));
        ProcIo {
            write_bytes: delta(self.write_bytes, earlier.write_bytes),
            cancelled_write_bytes: delta(self.cancelled_write_bytes, earlier.cancelled_write_bytes),
            wchar: delta(self.wchar, earlier.wchar),
        }
    }

    /// Write amplification of a benchmark that wrote `user_bytes` of keys and values while
    /// these counters (a difference, see [`ProcIo::since`]) were counted: bytes written to
    /// storage ÷ `user_bytes`, and the counter it came from. `write_bytes` when it counted
    /// anything; `wchar` when it stayed at 0 though the process did write (a database on tmpfs,
    /// or a kernel without block I/O accounting): it counts every byte handed to write(), so
    /// a page rewritten before writeback counts each time, and misses writes through memory
    /// maps. `None` without user bytes or counters.
    pub fn write_amplification(&self, user_bytes: u64) -> Option<WriteAmp> {
        if user_bytes == 0 {
            return None;
        }
        let (bytes, source) = match (self.write_bytes, self.wchar) {
            (Some(w), _) if w > 0 => (w, IoSource::WriteBytes),
            (_, Some(c)) if c > 0 => (c, IoSource::Wchar),
            (Some(w), _) => (w, IoSource::WriteBytes),
            (None, Some(c)) => (c, IoSource::Wchar),
            (None, None) => return None,
        };
        Some(WriteAmp {
            factor: bytes as f64 / user_bytes as f64,
            source,
        })
    }
}

/// Which counter of /proc/self/io a write amplification was computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoSource {
    WriteBytes,
    Wchar,
}

impl IoSource {
    /// The field's name in /proc/self/io, as the JSON records it.
    pub fn name(self) -> &'static str {
        match self {
            IoSource::WriteBytes => "write_bytes",
            IoSource::Wchar => "wchar",
        }
    }
}

/// Bytes written to storage per byte of keys and values a benchmark wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteAmp {
    pub factor: f64,
    pub source: IoSource,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "rchar: 6976\nwchar: 4096000\nsyscr: 10\nsyscw: 1000\n\
                          read_bytes: 0\nwrite_bytes: 50012160\ncancelled_write_bytes: 4096\n";

    #[test]
    fn parses_the_fields_of_proc_io() {
        let io = ProcIo::parse(SAMPLE);
        assert_eq!(io.write_bytes, Some(50_012_160));
        assert_eq!(io.cancelled_write_bytes, Some(4096));
        assert_eq!(io.wchar, Some(4_096_000));
        assert_eq!(ProcIo::parse(""), ProcIo::default());
        // A field that is not a number is missing, not zero; the others still parse.
        let odd = ProcIo::parse("wchar: lots\nwrite_bytes:12\nrchar_write_bytes: 7\n");
        assert_eq!(odd.wchar, None);
        assert_eq!(odd.write_bytes, Some(12));
    }

    #[test]
    fn differences_need_both_readings() {
        let before = ProcIo::parse("wchar: 100\nwrite_bytes: 4096\n");
        let after = ProcIo::parse("wchar: 1100\nwrite_bytes: 12288\ncancelled_write_bytes: 9\n");
        let d = after.since(&before);
        assert_eq!(d.wchar, Some(1000));
        assert_eq!(d.write_bytes, Some(8192));
        assert_eq!(d.cancelled_write_bytes, None);
    }

    #[test]
    fn write_amplification_is_storage_bytes_over_user_bytes() {
        // 1000 entries of 16 + 100 bytes, 464,000 bytes to storage: 4.
        let io = ProcIo {
            write_bytes: Some(464_000),
            cancelled_write_bytes: Some(0),
            wchar: Some(1_000_000),
        };
        let wa = io.write_amplification(1000 * 116).unwrap();
        assert_eq!(wa.source, IoSource::WriteBytes);
        assert!((wa.factor - 4.0).abs() < 1e-12);
        // write_bytes stuck at 0 (tmpfs): wchar stands in, and says so.
        let tmpfs = ProcIo {
            write_bytes: Some(0),
            ..io
        };
        let wa = tmpfs.write_amplification(500_000).unwrap();
        assert_eq!((wa.factor, wa.source), (2.0, IoSource::Wchar));
        // Nothing written at all: 0 from write_bytes, not a missing figure.
        let idle = ProcIo {
            write_bytes: Some(0),
            cancelled_write_bytes: Some(0),
            wchar: Some(0),
        };
        assert_eq!(idle.write_amplification(10).unwrap().factor, 0.0);
        assert_eq!(io.write_amplification(0), None);
        assert_eq!(ProcIo::default().write_amplification(10), None);
    }
}
