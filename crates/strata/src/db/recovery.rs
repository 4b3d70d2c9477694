// SPDX-License-Identifier: MIT OR Apache-2.0
//! Replaying the write-ahead logs at open: every live log, oldest first, into memtables that
//! are written to level-0 tables as they fill; sequence numbers must follow from log to log
//! (a gap means the previous log lost its last writes, and the logs after it are set aside);
//! damage inside a log is an error, a torn tail is where the log ends.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::blobs::ReplayedBlobs;
use super::flush::write_level0_table;
use super::open::info;
use super::{DbInner, DbState};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::key::SeqNo;
use crate::log::{LogReader, LogWriter, ReadMode};
use crate::memtable::MemTable;
use crate::version::VersionEdit;

/// What replaying the logs accumulates, from the first log to the last.
///
/// `recover_logs` owns it for the whole replay and holds the state lock throughout: `state` is
/// borrowed from that guard, so nothing else sees the memtable or the version set until the
/// replay is recorded in the MANIFEST (or, read-only, published).
struct Recovery<'s> {
    /// The locked state; replayed writes go into `state.mem`.
    state: &'s mut DbState,
    /// The level-0 tables the replay wrote, and the blob garbage they make; recorded in the
    /// MANIFEST with the new log number once every log is replayed.
    edit: VersionEdit,
    /// The highest seqno replayed so far (at least the MANIFEST's last seqno).
    max_sequence: SeqNo,
    /// The seqno the next replayed write must start at, once one log record has been
    /// replayed: a later write starting after it follows a gap.
    next_sequence: Option<SeqNo>,
    /// The blob files replayed pointers reach.
    blobs: ReplayedBlobs,
}

impl<'s> Recovery<'s> {
    fn new(state: &'s mut DbState) -> Self {
        let max_sequence = state.versions.last_sequence;
        Recovery {
            state,
            edit: VersionEdit::default(),
            max_sequence,
            next_sequence: None,
            blobs: ReplayedBlobs::default(),
        }
    }

    /// How many level-0 tables the replay has written so far.
    fn tables_written(&self) -> usize {
        self.edit.new_files.len()
    }

    /// Writes the memtable to a level-0 table (added to the edit) and starts an empty one.
    fn flush_memtable(&mut self, inner: &DbInner) -> Result<()> {
        let mem = std::mem::replace(
            &mut self.state.mem,
            Arc::new(MemTable::for_database(
                inner.icmp.clone(),
                inner.options.write_buffer_size,
            )),
        );
        write_level0_table(inner, self.state, &mem, &mut self.edit)
    }

    /// Whether `batch`, the first write of a log, starts after a gap: the writes before it
    /// that the previous log should end with were lost.
    fn starts_after_gap(&self, batch: &WriteBatch) -> bool {
        self.next_sequence.is_some_and(|next| batch.seqno() > next)
    }

    /// Inserts `batch` into the memtable and advances the seqnos; a memtable over the write
    /// buffer size becomes a level-0 table (not in a read-only open, which writes nothing).
    fn apply(&mut self, inner: &DbInner, batch: &WriteBatch) -> Result<()> {
        self.next_sequence = Some(batch.seqno() + u64::from(batch.count()));
        insert_batch(&self.state.mem, batch)?;
        let last = batch.seqno() + u64::from(batch.count()).saturating_sub(1);
        self.max_sequence = self.max_sequence.max(last);
        if !inner.read_only
            && self.state.mem.approximate_memory_usage() > inner.options.write_buffer_size
        {
            self.flush_memtable(inner)?;
        }
        Ok(())
    }
}

/// Replays the logs the MANIFEST does not cover, starts a new log, and records the new state.
/// Read-only, it only replays them into `state`'s memtable and raises its last seqno (the
/// caller publishes the view), and returns the blob files the replayed writes point into
/// (empty for a writable handle, which records them in the MANIFEST). Requires: the caller
/// holds the state mutex (`state` is its guard's contents).
pub(crate) fn recover_logs(inner: &DbInner, state: &mut DbState) -> Result<BTreeSet<u64>> {
    let names = inner.env.children(&inner.dir)?;
    let mut logs: Vec<u64> = names
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some((FileKind::Log, n)) if state.versions.log_is_live(n) => Some(n),
            _ => None,
        })
        .collect();
    logs.sort();
    let live_log = state.versions.log_number;
    if inner.read_only && live_log != 0 && !logs.contains(&live_log) {
        // Beside a writer: it flushed the log and deleted it after the MANIFEST was read (the
        // load starts again). Without a writer, `live_log_must_exist` has refused this.
        return Err(Error::corruption(
            filename::log_file(&inner.dir, live_log),
            0,
            "the log the MANIFEST names as live is gone",
        ));
    }
    // A blob file the MANIFEST does not list yet (its memtable was not flushed) keeps its
    // number: a new file must never take it.
    for name in &names {
        if let Some((FileKind::Blob, n)) = filename::parse_file_name(name) {
            state.versions.mark_file_number_used(n);
        }
    }
    let mut recovery = Recovery::new(state);
    let mut reusable = None;
    for (i, &number) in logs.iter().enumerate() {
        let last = i + 1 == logs.len();
        let reuse = last && inner.options.reuse_logs && !inner.read_only;
        if reuse && !recovery.state.mem.is_empty() {
            // The reused log's memtable must hold that log's entries only: the earlier logs
            // become obsolete below, so their entries go to a table first.
            recovery.flush_memtable(inner)?;
        }
        let tables_before = recovery.tables_written();
        let replayed = replay_log(inner, &mut recovery, number)?;
        recovery.state.versions.mark_file_number_used(number);
        // Writes after a torn write, or after writes a crash lost, were never synced (a sync
        // write first syncs every older log), and replaying them would leave a hole: the
        // database ends where the loss starts. The logs not replayed are kept in lost/.
        if replayed.gap {
            set_aside_logs(inner, &logs[i..])?;
            break;
        }
        if replayed.torn && !last {
            set_aside_logs(inner, &logs[i + 1..])?;
            break;
        }
        // LevelDB's reuse_logs: keep appending to the last log, with its memtable, if its
        // replay flushed nothing and it ends cleanly after its last record (appending after a
        // torn or damaged tail would put damage in the middle of the log).
        if reuse && recovery.tables_written() == tables_before {
            match replayed.clean_end {
                Some(end)
                    if end
                        == inner
                            .env
                            .file_size(&filename::log_file(&inner.dir, number))? =>
                {
                    reusable = Some((number, end));
                }
                _ => info!(inner, "log {number} does not end cleanly; not reusing it"),
            }
        }
    }
    let versions = &mut recovery.state.versions;
    versions.last_sequence = versions.last_sequence.max(recovery.max_sequence);
    if inner.read_only {
        // Replayed data stays in the memtable; nothing is written.
        return Ok(std::mem::take(&mut recovery.blobs.referenced));
    }
    inner
        .visible_seqno
        .store(versions.last_sequence, std::sync::atomic::Ordering::Release);
    let (log_number, log_writer) = match reusable {
        Some((number, len)) => {
            let path = filename::log_file(&inner.dir, number);
            let file = inner.env.new_appendable_file(&path)?;
            info!(inner, "reusing log {number} ({len} bytes) and its memtable");
            (number, LogWriter::with_existing_len(file, len))
        }
        None => {
            // Flush what the last log left in the memtable, so the MANIFEST covers every log.
            if !recovery.state.mem.is_empty() {
                recovery.flush_memtable(inner)?;
            }
            let new_log = recovery.state.versions.new_file_number();
            let file = inner
                .env
                .new_log_file(&filename::log_file(&inner.dir, new_log))?;
            // The MANIFEST switch below syncs the directory, making the new log's name durable.
            (new_log, LogWriter::new(file))
        }
    };
    let Recovery {
        mut edit, blobs, ..
    } = recovery;
    *inner.log.lock().unwrap_or_else(|e| e.into_inner()) = Some(log_writer);
    state.log_number = log_number;
    let current = state.versions.current();
    edit.new_blob_files = blobs.files_to_add(inner, &|n| current.blob_files.contains_key(&n))?;
    edit.log_number = Some(log_number);
    edit.prev_log_number = Some(0);
    state.versions.log_and_apply(&mut edit)?;
    inner.publish_view(state);
    info!(inner, "recovered {} log(s); log {log_number}", logs.len());
    super::obsolete::delete_obsolete_files(inner, state);
    Ok(BTreeSet::new())
}

/// How replaying one log ended.
struct Replayed {
    /// Where a writer continuing the log would append, if the log ends exactly after its last
    /// record.
    clean_end: Option<u64>,
    /// The log ends in a torn tail: a crash cut its last write short.
    torn: bool,
    /// The log's first write does not follow the previous log's last one: that log lost its
    /// last writes in a crash, and this one was not replayed.
    gap: bool,
}

/// Replays log `number` into the memtable, flushing it to level-0 tables as it fills.
///
/// Damage inside the log is an error: it would leave a hole. Damage that runs to the end of the
/// log is a torn tail, the normal result of a crash while appending, and the log ends before it.
fn replay_log(inner: &DbInner, recovery: &mut Recovery<'_>, number: u64) -> Result<Replayed> {
    let path = filename::log_file(&inner.dir, number);
    let file = inner.env.new_sequential_file(&path)?;
    let mut reader = LogReader::new(file, &path, ReadMode::Recovery);
    let mut first = true;
    while let Some(record) = reader.next_record()? {
        let batch = WriteBatch::decode(record).map_err(|e| reader.record_error(e))?;
        if first {
            first = false;
            if recovery.starts_after_gap(&batch) {
                info!(
                    inner,
                    "{}: starts at sequence {}, after a gap from {}: the previous log lost its \
                     last writes",
                    path.display(),
                    batch.seqno(),
                    recovery.next_sequence.unwrap_or_default()
                );
                return Ok(Replayed {
                    clean_end: None,
                    torn: false,
                    gap: true,
                });
            }
        }
        if batch.has_blob_pointers()
            && !recovery.blobs.check_batch(
                inner,
                &batch,
                &recovery.state.versions.current_ref().blob_tombstones,
            )?
        {
            // A value this write points to never reached the disk whole (a power loss before
            // anything was synced): the log's good prefix ends before the write.
            info!(
                inner,
                "{}: the write at offset {} points to a blob value that is missing or damaged; \
                 the log ends before it",
                path.display(),
                reader.last_record_offset()
            );
            return Ok(Replayed {
                clean_end: None,
                torn: true,
                gap: false,
            });
        }
        if let Some(next) = recovery.next_sequence.filter(|&next| batch.seqno() < next) {
            // Writes are logged in seqno order, each once: a write that starts below the
            // next seqno repeats (or overlaps) one already replayed. Crafted or damaged.
            return Err(Error::corruption(
                &path,
                reader.last_record_offset(),
                format!(
                    "write batch at sequence {} repeats sequences already replayed (the next \
                     write must start at {next})",
                    batch.seqno()
                ),
            ));
        }
        recovery.apply(inner, &batch)?;
    }
    // Zeros after the last record are space a mapped log allocated ahead, not a write cut
    // short: the logs after this one are replayed (a crash that lost this log's last pages
    // shows as a gap before the next log's first write). A log ending in them is not
    // appended to, though: its end is not where its last record ends.
    let torn = reader.torn_tail() && !reader.zero_tail();
    if torn {
        info!(
            inner,
            "{}: torn tail after offset {}, dropped",
            path.display(),
            reader.end_of_last_record()
        );
    }
    Ok(Replayed {
        clean_end: (!reader.torn_tail()).then(|| reader.end_of_last_record()),
        torn,
        gap: false,
    })
}

/// Moves logs that follow a torn log into `lost/` (a read-only open only skips them), and
/// records the ones moved in the info log.
fn set_aside_logs(inner: &DbInner, numbers: &[u64]) -> Result<()> {
    for &number in numbers {
        let path = filename::log_file(&inner.dir, number);
        if inner.read_only {
            info!(inner, "{}: after a torn log; not replayed", path.display());
            continue;
        }
        let lost = inner.dir.join("lost");
        inner.env.create_dir_all(&lost)?;
        let name = path.file_name().expect("a log has a file name");
        inner.env.rename(&path, &lost.join(name))?;
        info!(
            inner,
            "{}: after a torn log; not replayed, moved to lost/",
            path.display()
        );
    }
    Ok(())
}

/// Inserts every operation of `batch` into `mem` at its seqnos.
pub(crate) fn insert_batch(mem: &MemTable, batch: &WriteBatch) -> Result<()> {
    mem.add_batch(batch);
    Ok(())
}
