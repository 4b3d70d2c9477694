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
