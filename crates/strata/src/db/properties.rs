// SPDX-License-Identifier: MIT OR Apache-2.0
//! Properties (LevelDB's names) and approximate sizes. The figures of `leveldb.stats`,
//! `leveldb.num-files-at-levelN` and `leveldb.approximate-memory-usage` are those of
//! [`DbStats`](super::DbStats), printed.

use std::fmt::Write as _;

use super::{BlobFileInfo, DbInner, DbStats};
use crate::key::{append_internal_key, ParsedInternalKey, ValueKind, MAX_SEQNO};
use crate::version::version::Version;
use crate::version::NUM_LEVELS;

/// The blob files of the current version, then those not in it yet (their memtable is not
/// flushed): [`Db::blob_files`](super::Db::blob_files).
pub(crate) fn blob_file_list(inner: &DbInner) -> Vec<BlobFileInfo> {
    let version = inner.lock_state().versions.current();
    let mut out: Vec<BlobFileInfo> = version
        .blob_files
        .values()
        .map(|b| BlobFileInfo {
            number: b.meta.number,
            file_size: b.meta.file_size,
            value_bytes: b.meta.value_bytes,
            garbage_bytes: Some(b.garbage_bytes),
        })
        .collect();
    let blobs = inner.blob_writers.lock().unwrap_or_else(|e| e.into_inner());
    out.extend(
        blobs
            .sealed
            .iter()
            .chain(blobs.active.as_ref())
            .map(|w| BlobFileInfo {
                number: w.number(),
                file_size: w.len(),
                value_bytes: w.value_bytes(),
                garbage_bytes: None,
            }),
    );
    out
}

/// `strata.blob-files`: one line per blob file of the current version, `number size
/// value_bytes garbage_bytes`, then a line per blob file not yet in the version (its memtable is
/// not flushed), `number size value_bytes pending`.
fn blob_files(inner: &DbInner) -> String {
    let mut out = String::new();
    for b in blob_file_list(inner) {
        let garbage = b
            .garbage_bytes
            .map_or("pending".to_string(), |g| g.to_string());
        let _ = writeln!(
            out,
            "{} {} {} {garbage}",
            b.number, b.file_size, b.value_bytes
        );
    }
    out
}

/// LevelDB's escaping of keys in `leveldb.sstables`: printable ASCII as is, else `\xNN`.
fn escape(key: &[u8]) -> String {
    let mut out = String::new();
    for &b in key {
        if (b' '..=b'~').contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

fn describe(internal_key: &[u8]) -> String {
    match ParsedInternalKey::parse(internal_key) {
        Some(k) => format!("'{}' @ {} : {}", escape(k.user_key), k.seqno, k.kind as u8),
        None => format!("(bad) {}", escape(internal_key)),
    }
}

/// `strata.range-deletions`: one line per range deletion of the current version, `seqno
/// start end` (keys escaped as in `leveldb.sstables`), then one per range deletion still in a
/// memtable, `seqno start end pending`.
fn range_deletions(inner: &DbInner) -> String {
    let state = inner.lock_state();
    let mut out = String::new();
    for t in state.versions.current().range_tombstones.iter() {
        let _ = writeln!(out, "{} {} {}", t.seqno, escape(&t.start), escape(&t.end));
    }
    for mem in state.imm.iter().chain(std::iter::once(&state.mem)) {
        for t in mem.range_tombstones() {
            let (start, end) = (escape(&t.start), escape(&t.end));
            let _ = writeln!(out, "{} {start} {end} pending", t.seqno);
        }
    }
    out
}

pub(crate) fn property(inner: &DbInner, name: &str) -> Option<String> {
    if name == "strata.blob-files" {
        return Some(blob_files(inner));
    }
    if name == "strata.range-deletions" {
        return Some(range_deletions(inner));
    }
    let rest = name.strip_prefix("leveldb.")?;
    if let Some(level) = rest.strip_prefix("num-files-at-level") {
        let level: usize = level.parse().ok()?;
        return (level < NUM_LEVELS).then(|| {
            super::stats::collect(inner).levels[level]
                .file_count
                .to_string()
        });
    }
    match rest {
        "stats" => Some(level_stats_text(&super::stats::collect(inner))),
        "sstables" => Some(sstables(&inner.view.load().version)),
        "approximate-memory-usage" => Some(
            super::stats::collect(inner)
                .approximate_memory_usage_bytes()
                .to_string(),
        ),
        _ => None,
    }
}

/// `leveldb.stats`, in LevelDB's format: a line per level that has tables or has had
/// compactions, with its files, size, and the time, bytes read and bytes written of the
/// flushes and compactions into it.
pub(crate) fn level_stats_text(stats: &DbStats) -> String {
    let mut out = String::from(
        "                               Compactions\n\
         Level  Files Size(MB) Time(sec) Read(MB) Write(MB)\n\
         --------------------------------------------------\n",
    );
    for (level, l) in stats.levels.iter().enumerate() {
        let micros = l.compaction_time.as_micros();
        if l.file_count > 0 || micros > 0 {
            let _ = writeln!(
                out,
                "{level:>3} {:>8} {:>8.0} {:>9.0} {:>8.0} {:>9.0}",
                l.file_count,
                l.size_bytes as f64 / 1_048_576.0,
                micros as f64 / 1e6,
                l.read_bytes as f64 / 1_048_576.0,
                l.written_bytes as f64 / 1_048_576.0
            );
        }
    }
    out
}

/// `leveldb.sstables`: every table of `version`, level by level, with its key range.
fn sstables(version: &Version) -> String {
    let mut out = String::new();
    for (level, files) in version.files.iter().enumerate() {
        let _ = writeln!(out, "--- level {level} ---");
        for f in files.iter() {
            let _ = writeln!(
                out,
                " {}:{}[{} .. {}]",
                f.number,
                f.file_size,
                describe(&f.smallest),
                describe(&f.largest)
            );
        }
    }
    out
}

pub(crate) fn approximate_sizes(inner: &DbInner, ranges: &[(&[u8], &[u8])]) -> Vec<u64> {
    let version = inner.view.load_full().version.clone();
    ranges
        .iter()
        .map(|(start, end)| {
            let mut k1 = Vec::new();
            append_internal_key(&mut k1, start, MAX_SEQNO, ValueKind::FOR_SEEK);
            let mut k2 = Vec::new();
            append_internal_key(&mut k2, end, MAX_SEQNO, ValueKind::FOR_SEEK);
            let a = version.approximate_offset_of(&inner.table_cache, &k1);
            let b = version.approximate_offset_of(&inner.table_cache, &k2);
            b.saturating_sub(a)
        })
        .collect()
}
