// SPDX-License-Identifier: MIT OR Apache-2.0
//! Blob garbage collection: rewriting a blob file whose live fraction fell below
//! `Options::blob_gc_live_ratio`, and removing blob files nothing can read any more.
//!
//! One thread per database (started when the database has or may get blob files) does the
//! rewrites:
//!
//! 1. Pick the blob file of the current version with the most garbage, as compaction counted
//!    it, if its live fraction is below the threshold.
//! 2. Read it from the front; for each record, ask the tree whether the record is still its
//!    key's newest value (the newest entry for the key is a pointer to exactly this record).
//!    Copy the live ones to a new blob file and sync it.
//! 3. Have the background thread add the new file to the version (before any pointer to it
//!    exists, so that a table can never point into a file the version does not list).
//! 4. Write the new pointers through the writer queue, alone, each only if its key still points
//!    at the old record, as one synced batch. Copies whose key changed meanwhile are counted
//!    as garbage of the new file.
//! 5. Hand the old file to the background thread for removal once no snapshot older than the
//!    batch remains (older snapshots may still read the old pointers). Cursors and reads keep
//!    the version they started with, and with it the old file, until they end.
//!
//! The MANIFEST stays the background thread's alone: this thread only queues changes in
//! [`BlobGcState`] and waits for them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::open::info;
use super::write::{append_to_log, PendingWrite};
use super::DbInner;
use crate::batch::WriteBatch;
use crate::blob::{BlobFileWriter, BlobPointer, BlobScanner};
use crate::error::Result;
use crate::filename;
use crate::key::{SeqNo, ValueKind};
use crate::memtable::MemLookup;
use crate::table::BlockReadOptions;
use crate::version::version::TableLookup;
use crate::version::{BlobFileMeta, VersionEdit};

/// Blob changes the garbage collector asks the background thread to log.
#[derive(Debug, Default)]
pub(crate) struct BlobGcState {
    /// New blob files to add to the version.
    pub(crate) to_add: Vec<BlobFileMeta>,
    /// Garbage to count: (file, value bytes).
    pub(crate) garbage: Vec<(u64, u64)>,
    /// Rewritten blob files, to remove once the oldest snapshot is at or after the seqno.
    pub(crate) to_remove: Vec<(u64, SeqNo)>,
    /// Files whose removal the background thread is logging: still in the current version
    /// until it is installed, and not to be picked again.
    pub(crate) removing: std::collections::BTreeSet<u64>,
    /// The file being rewritten.
    pub(crate) rewriting: Option<u64>,
}

impl BlobGcState {
    /// The edit of the changes due now, given the oldest snapshot; `None` if there are none.
    pub(crate) fn take_due(&mut self, oldest_snapshot: Option<SeqNo>) -> Option<VersionEdit> {
        let mut edit = VersionEdit {
            new_blob_files: std::mem::take(&mut self.to_add),
            blob_garbage: std::mem::take(&mut self.garbage),
            ..VersionEdit::default()
        };
        self.to_remove.retain(|&(number, after)| {
            let due = oldest_snapshot.is_none_or(|s| s >= after);
            if due {
                edit.deleted_blob_files.insert(number);
            }
            !due
        });
        self.removing.extend(&edit.deleted_blob_files);
        edit.has_blob_changes().then_some(edit)
    }

    /// True if some change is due now.
    pub(crate) fn has_due(&self, oldest_snapshot: Option<SeqNo>) -> bool {
        !self.to_add.is_empty()
            || !self.garbage.is_empty()
            || self
                .to_remove
                .iter()
                .any(|&(_, after)| oldest_snapshot.is_none_or(|s| s >= after))
    }
}

/// Starts the garbage collection thread.
pub(crate) fn start(inner: &Arc<DbInner>) -> JoinHandle<()> {
    let worker = inner.clone();
    std::thread::Builder::new()
        .name("strata-blob-gc".into())
        .spawn(move || run(&worker))
        .expect("spawning the blob garbage collection thread")
}

/// How often the thread looks for a file to rewrite when nothing wakes it.
const POLL: Duration = Duration::from_millis(200);

fn run(inner: &Arc<DbInner>) {
    while !inner.shutting_down.load(Ordering::Acquire) {
        let picked = {
            let state = inner.lock_state();
            // A removal waits for snapshots, and releasing one wakes nobody: look here.
            if state.blob_gc.has_due(inner.snapshots.oldest()) {
                super::background::maybe_schedule(inner, &state);
            }
            drop(state);
            claim(inner)
        };
        let Some(number) = picked else {
            let state = inner.lock_state();
            if !inner.shutting_down.load(Ordering::Acquire) {
                let _ = inner.blob_gc_work.wait_timeout(state, POLL);
            }
            continue;
        };
        if let Err(e) = rewrite(inner, number) {
            if !inner.shutting_down.load(Ordering::Acquire) {
                inner.set_error(&mut inner.lock_state(), &e);
            }
        }
    }
}

/// Picks a blob file to rewrite and claims it, unless a rewrite is under way (one at a time).
fn claim(inner: &DbInner) -> Option<u64> {
    let mut state = inner.lock_state();
    if state.bg_error.is_some() || state.blob_gc.rewriting.is_some() {
        return None;
    }
    let number = pick(inner, &state)?;
    state.blob_gc.rewriting = Some(number);
    Some(number)
}

/// Rewrites, in the caller's thread, every blob file whose live fraction is below the
/// threshold now (waiting for a rewrite under way in the collector's thread first). Returns how
/// many it rewrote.
pub(crate) fn collect_now(inner: &Arc<DbInner>) -> Result<usize> {
    let mut rewritten = 0;
    loop {
        {
            let mut state = inner.lock_state();
            while state.blob_gc.rewriting.is_some() && state.bg_error.is_none() {
                state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            if let Some(e) = &state.bg_error {
                return Err(e.clone());
            }
        }
        let Some(number) = claim(inner) else {
            return Ok(rewritten);
        };
        rewrite(inner, number)?;
        rewritten += 1;
    }
}

/// The blob file most worth rewriting, if one's live fraction is below the threshold.
fn pick(inner: &DbInner, state: &super::DbState) -> Option<u64> {
    let version = state.versions.current();
    let queued = |n: u64| {
        state.blob_gc.removing.contains(&n) || state.blob_gc.to_remove.iter().any(|&(r, _)| r == n)
    };
    version
        .blob_files
        .values()
        .filter(|b| b.meta.value_bytes > 0 && !queued(b.meta.number))
        .map(|b| {
            let live = 1.0 - b.garbage_bytes as f64 / b.meta.value_bytes as f64;
            (live, b.meta.number)
        })
        .filter(|&(live, _)| live < inner.options.blob_gc_live_ratio)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

impl DbInner {
    /// The newest entry for `key` as the tree holds it: its kind and stored value.
    fn newest_entry(&self, key: &[u8]) -> Result<Option<(ValueKind, Vec<u8>)>> {
        let seqno = self.visible_seqno.load(Ordering::Acquire);
        let view = self.view.load();
        for mem in std::iter::once(&view.mem).chain(&view.imm) {
            match mem.get(key, seqno) {
                Some(MemLookup::Value(v)) => return Ok(Some((ValueKind::Value, v.to_vec()))),
                Some(MemLookup::BlobPointer(p)) => {
                    return Ok(Some((ValueKind::BlobPointer, p.to_vec())))
                }
                Some(MemLookup::Deleted) => return Ok(None),
                None => {}
            }
        }
        let read = BlockReadOptions {
            verify_checksums: true,
            fill_cache: false,
        };
        let (found, _) = view.version.get(&read, &self.table_cache, key, seqno)?;
        Ok(match found {
            TableLookup::Value(v) => Some((ValueKind::Value, v)),
            TableLookup::BlobPointer(p) => Some((ValueKind::BlobPointer, p)),
            TableLookup::Deleted | TableLookup::Absent => None,
        })
    }

    /// True if the newest entry for `key` points to exactly `pointer`.
    fn points_to(&self, key: &[u8], pointer: &BlobPointer) -> Result<bool> {
        Ok(matches!(
            self.newest_entry(key)?,
            Some((ValueKind::BlobPointer, p)) if BlobPointer::decode(&p) == Some(*pointer)
        ))
    }
}

/// A live record copied to the new file: its key, and where its value was and is now.
struct Move {
    key: Vec<u8>,
    from: BlobPointer,
    to: BlobPointer,
}

/// Rewrites blob file `number`, which the caller claimed (steps 2 to 5 of the module's
/// description). The claim ends with it, whatever the outcome.
fn rewrite(inner: &Arc<DbInner>, number: u64) -> Result<()> {
    let result = rewrite_claimed(inner, number);
    let mut state = inner.lock_state();
    state.blob_gc.rewriting = None;
    if let Err(e) = &result {
        info!(inner, "rewriting blob file {number} failed: {e}");
    }
    inner.bg_done.notify_all();
    result
}

fn rewrite_claimed(inner: &Arc<DbInner>, number: u64) -> Result<()> {
    let path = filename::blob_file(&inner.dir, number);
    let mut scanner = BlobScanner::open(&*inner.env, &path)?;
    let mut moves = Vec::new();
    let mut output: Option<BlobFileWriter> = None;
    let mut dead_bytes = 0u64;
    while let Some(record) = scanner.next() {
        if inner.shutting_down.load(Ordering::Acquire) {
            return Ok(());
        }
        let record = record?;
        if !inner.points_to(&record.key, &record.pointer)? {
            dead_bytes += record.pointer.len;
            continue;
        }
        let out = match &mut output {
            Some(out) => out,
            None => {
                let n = {
                    let mut state = inner.lock_state();
                    let n = state.versions.new_file_number();
                    state.pending_outputs.insert(n);
                    n
                };
                output.insert(BlobFileWriter::create(&*inner.env, &inner.dir, n)?)
            }
        };
        // The value is copied as stored: no decompression, no recompression.
        let to = out.add_stored(&record.key, &record.stored, record.pointer.compression)?;
        moves.push(Move {
            key: record.key,
            from: record.pointer,
            to,
        });
    }
    let mut relocated_seqno = inner.visible_seqno.load(Ordering::Acquire);
    if let Some(mut out) = output {
        out.sync()?;
        inner.env.sync_dir(&inner.dir)?;
        let meta = BlobFileMeta {
            number: out.number(),
            file_size: out.len(),
            value_bytes: out.value_bytes(),
        };
        drop(out);
        add_and_wait(inner, meta)?;
        let (seqno, skipped) = relocate(inner, &moves)?;
        relocated_seqno = seqno;
        let mut state = inner.lock_state();
        if skipped > 0 {
            state.blob_gc.garbage.push((meta.number, skipped));
        }
        state.pending_outputs.remove(&meta.number);
    }
    let state = &mut *inner.lock_state();
    state.blob_gc.to_remove.push((number, relocated_seqno + 1));
    info!(
        inner,
        "rewrote blob file {number}: {} live values moved, {dead_bytes} bytes of garbage dropped",
        moves.len()
    );
    super::background::maybe_schedule(inner, state);
    Ok(())
}

/// Has the background thread add `meta` to the version, and waits until it has.
fn add_and_wait(inner: &DbInner, meta: BlobFileMeta) -> Result<()> {
    let mut state = inner.lock_state();
    state.blob_gc.to_add.push(meta);
    super::background::maybe_schedule(inner, &state);
    loop {
        if let Some(e) = &state.bg_error {
            return Err(e.clone());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            // The background thread has stopped, or is stopping: the file stays out of the
            // version, and an open deletes it (nothing points into it).
            return Err(crate::error::Error::not_supported(
                "the database is closing; blob rewrite abandoned",
            ));
        }
        if state
            .versions
            .current_ref()
            .blob_files
            .contains_key(&meta.number)
        {
            return Ok(());
        }
        state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
    }
}

/// Writes the new pointers of `moves` whose keys still point at the old records, as one synced
/// batch, alone at the front of the writer queue (so no write comes between the check and the
/// batch). Returns the batch's last seqno and the value bytes of the moves skipped.
fn relocate(inner: &Arc<DbInner>, moves: &[Move]) -> Result<(SeqNo, u64)> {
    let me = Arc::new(PendingWrite::marker());
    let mut state = inner.lock_state();
    state.writers.push_back(me.clone());
    while !Arc::ptr_eq(state.writers.front().expect("queued"), &me) {
        state = me.wait(state);
    }
    let started = match &state.bg_error {
        Some(e) => Err(e.clone()),
        None => Ok((state.versions.last_sequence + 1, state.mem.clone())),
    };
    drop(state);
    // At the front of the queue, no other write (and no memtable switch) comes in until this
    // one leaves it; the checks read tables, so they run without the state mutex.
    let result = started.and_then(|(first_seqno, mem)| {
        let mut batch = WriteBatch::new();
        let mut skipped = 0;
        for m in moves {
            if inner.points_to(&m.key, &m.from)? {
                batch.put_blob_pointer(&m.key, &m.to);
            } else {
                skipped += m.to.len;
            }
        }
        if batch.count() == 0 {
            return Ok((first_seqno - 1, skipped));
        }
        batch.set_seqno(first_seqno);
        append_to_log(inner, &batch, true)?;
        mem.add_batch(&batch);
        Ok((first_seqno + u64::from(batch.count()) - 1, skipped))
    });
    let mut state = inner.lock_state();
    match &result {
        Ok((last_seqno, _)) => {
            if *last_seqno > state.versions.last_sequence {
                state.versions.last_sequence = *last_seqno;
                inner.visible_seqno.store(*last_seqno, Ordering::Release);
            }
        }
        Err(e) => {
            inner.set_error(&mut state, e);
        }
    }
    state.writers.pop_front();
    if let Some(next) = state.writers.front() {
        next.notify();
    }
    result
}
