// SPDX-License-Identifier: MIT OR Apache-2.0
//! Background work, on one thread per database: choosing the next job (a flush, logging the
//! blob collector's changes, a manual or automatic compaction), running it, and installing its
//! result. The jobs live beside it: `flush.rs`, `crate::compaction` (what to compact),
//! `obsolete.rs` (deleting what no version needs).
//!
//! The thread takes the state mutex to choose work and to install its result, and releases it
//! while it reads and writes tables. A flush always goes first: a long compaction stops between
//! two entries to flush a waiting memtable, so writers are not held up behind it.
//!
//! Fail-stop: if a flush or compaction fails (a write or sync error, a full disk, a damaged
//! input), the error becomes the database's background error: writes fail with it until the
//! database is reopened, nothing on disk changes meaning (the MANIFEST is only appended to
//! after its outputs are synced), and no file is deleted.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use super::flush::{flush_memtable, flush_now};
use super::obsolete::delete_obsolete_files;
use super::open::info;
use super::poison::PoisonOnUnwind;
use super::{DbInner, DbState, ManualCompaction};
use crate::compaction::job::{self, JobFiles, JobHost};
use crate::compaction::{picker, Compaction};
use crate::error::{Error, Result};
use crate::key::{append_internal_key, user_key, ValueKind, MAX_SEQNO};
use crate::version::{VersionEdit, NUM_LEVELS};

pub(crate) type Guard<'a> = MutexGuard<'a, DbState>;

/// Starts the background thread.
///
/// # Errors
/// [`Error::Io`] if the thread cannot be started.
pub(crate) fn start(inner: &Arc<DbInner>) -> Result<()> {
    let worker = inner.clone();
    let handle = super::spawn_thread(&inner.dir, "strata-background", move || run(&worker))?;
    *inner.bg_thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    maybe_schedule(inner, &inner.lock_state());
    Ok(())
}

/// Wakes the background thread to look for work. Requires: the state mutex is held (the guard
/// is passed), so that the wake-up cannot be lost.
pub(crate) fn maybe_schedule(inner: &DbInner, _state: &DbState) {
    inner.bg_work.notify_all();
}

enum Work {
    Flush,
    Manual,
    Compaction,
    BlobChanges,
    /// A writer waits to log its first range deletion: the MANIFEST is marked first.
    MarkRangeDeletions,
    /// Range deletions that delete nothing any more leave the version.
    DropRangeTombstones(Vec<u64>),
}

fn next_work(inner: &DbInner, state: &DbState) -> Option<Work> {
    if state.bg_error.is_some() {
        return None;
    }
    if state.imm.is_some() {
        return Some(Work::Flush);
    }
    if state.range_marker_wanted && !state.versions.range_marked {
        return Some(Work::MarkRangeDeletions);
    }
    if state.blob_gc.has_due(inner.snapshots.oldest()) {
        return Some(Work::BlobChanges);
    }
    if state.manual.as_ref().is_some_and(|m| !m.done) {
        return Some(Work::Manual);
    }
    let v = state.versions.current();
    let mut range_due = false;
    if !v.range_tombstones.is_empty() {
        let oldest = oldest_snapshot(inner, state);
        let droppable = v.droppable_range_tombstones(oldest);
        if !droppable.is_empty() {
            return Some(Work::DropRangeTombstones(droppable));
        }
        range_due = v.file_with_range_deleted_entries(oldest).is_some();
    }
    let seek_due = v
        .file_to_compact
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some();
    (v.compaction_score >= 1.0 || seek_due || range_due).then_some(Work::Compaction)
}

/// Waits until the background thread has no work: see [`Db::wait_for_compactions`].
///
/// [`Db::wait_for_compactions`]: crate::Db::wait_for_compactions
pub(crate) fn wait_until_idle(inner: &DbInner) -> Result<()> {
    let mut state = inner.lock_state();
    loop {
        if let Some(e) = &state.bg_error {
            return Err(e.clone());
        }
        // `compacting` covers a compaction's merge; its install leaves the compaction due
        // (`next_work`) until the new version is current.
        if !state.compacting && next_work(inner, &state).is_none() {
            // A reader that held an old version when a job finished (a point read's guard on
            // the view, taken just before the job published) let go of it later, from a
            // thread that deletes nothing: its files go now.
            delete_obsolete_files(inner, &mut state);
            return Ok(());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::closed(&inner.dir));
        }
        maybe_schedule(inner, &state);
        state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
    }
}

fn run(inner: &Arc<DbInner>) {
    // Flushes and compactions run the user's comparator and filter policy, which may panic.
    let _poison = PoisonOnUnwind::new(inner, "in the background thread (flush or compaction)");
    let mut state = inner.lock_state();
    while !inner.shutting_down.load(Ordering::Acquire) {
        let Some(work) = next_work(inner, &state) else {
            state = inner.bg_work.wait(state).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        state = match work {
            Work::Flush => flush_memtable(inner, state),
            Work::BlobChanges => apply_blob_changes(inner, state),
            Work::MarkRangeDeletions => {
                state.versions.request_range_deletion_marker();
                let note = "marked the MANIFEST for range deletions";
                apply_edit(inner, state, VersionEdit::default(), note)
            }
            Work::DropRangeTombstones(seqnos) => {
                let edit = VersionEdit {
                    dropped_range_tombstones: seqnos.into_iter().collect(),
                    ..VersionEdit::default()
                };
                apply_edit(inner, state, edit, "dropped range deletions no entry needs")
            }
            Work::Manual => manual_step(inner, state),
            Work::Compaction => {
                let c = pick(inner, &state);
                match c {
                    Some(c) => run_compaction(inner, state, c),
                    None => state,
                }
            }
        };
        inner.bg_done.notify_all();
    }
    inner.bg_done.notify_all();
}

fn pick(inner: &DbInner, state: &DbState) -> Option<Compaction> {
    picker::pick_compaction(
        &state.versions.current(),
        &state.versions.compact_pointers,
        &inner.icmp,
        inner.options.max_file_size as u64,
        oldest_snapshot(inner, state),
    )
}

/// The seqno every snapshot sees: the oldest live snapshot's, or the last written.
fn oldest_snapshot(inner: &DbInner, state: &DbState) -> u64 {
    inner
        .snapshots
        .oldest()
        .unwrap_or(state.versions.last_sequence)
}

/// Logs and applies `edit`, writing and syncing the MANIFEST with the state mutex released, so
/// that writers are not held up by the sync. Only the background thread applies edits while the
/// database is open, so no other apply runs meanwhile.
pub(crate) fn log_and_apply_unlocked<'a>(
    inner: &'a DbInner,
    mut state: Guard<'a>,
    edit: &mut VersionEdit,
) -> (Guard<'a>, Result<()>) {
    let mut pending = match state.versions.prepare_apply(edit) {
        Ok(p) => p,
        Err(e) => return (state, Err(e)),
    };
    drop(state);
    let written = pending.write(&*inner.env, &inner.dir);
    let mut state = inner.lock_state();
    let result = state.versions.finish_apply(pending, written);
    (state, result)
}

/// Logs and applies a bookkeeping `edit` (no table in it), then publishes the new view.
fn apply_edit<'a>(
    inner: &'a DbInner,
    state: Guard<'a>,
    mut edit: VersionEdit,
    note: &'static str,
) -> Guard<'a> {
    let (mut state, result) = log_and_apply_unlocked(inner, state, &mut edit);
    match result {
        Ok(()) => {
            info!(inner, "{note}");
            inner.publish_view(&state);
        }
        Err(e) => record_error(inner, &mut state, e),
    }
    inner.bg_done.notify_all();
    state
}

/// Keeps the first background error and wakes everyone who waits on background work.
pub(crate) fn record_error(inner: &DbInner, state: &mut DbState, e: Error) {
    info!(
        inner,
        "background error; the database accepts no more writes: {e}"
    );
    inner.set_error(state, &e);
}

/// Logs the blob changes the garbage collector queued and that are due: new blob files,
/// garbage counts, and rewritten files no snapshot can read any more.
fn apply_blob_changes<'a>(inner: &'a Arc<DbInner>, mut state: Guard<'a>) -> Guard<'a> {
    let log_number = state.log_number;
    let Some(mut edit) = state.blob_gc.take_due(inner.snapshots.oldest(), log_number) else {
        return state;
    };
    let (mut state, result) = log_and_apply_unlocked(inner, state, &mut edit);
    state.blob_gc.removing.clear();
    match result {
        Ok(()) => {
            for n in &edit.deleted_blob_files {
                info!(inner, "blob file {n} leaves the version");
            }
            inner.publish_view(&state);
            delete_obsolete_files(inner, &mut state);
        }
        Err(e) => record_error(inner, &mut state, e),
    }
    state
}

/// At close, once no other thread runs: logs the blob garbage the collector counted and the
/// removals that are due, which would otherwise be lost (garbage it counted is known nowhere
/// else). A file it had asked to add is left out: its rewrite was abandoned, nothing points
/// into it, and the next open deletes it.
///
/// # Errors
/// The MANIFEST's write or sync error (also kept as the background error).
pub(crate) fn log_blob_changes_at_close(inner: &DbInner) -> Result<()> {
    let mut state = inner.lock_state();
    if state.bg_error.is_some() || inner.read_only {
        return Ok(());
    }
    state.blob_gc.to_add.clear();
    let log_number = state.log_number;
    let Some(mut edit) = state.blob_gc.take_due(inner.snapshots.oldest(), log_number) else {
        return Ok(());
    };
    state.versions.log_and_apply(&mut edit).inspect_err(|e| {
        info!(inner, "could not log blob changes at close: {e}");
        inner.set_error(&mut state, e);
    })
}

/// Runs one step of the manual compaction in `state.manual`.
fn manual_step<'a>(inner: &'a Arc<DbInner>, state: Guard<'a>) -> Guard<'a> {
    let Some(m) = state.manual.as_ref() else {
        return state;
    };
    let c = picker::compact_range(
        &state.versions.current(),
        &inner.icmp,
        m.level,
        m.begin.as_deref(),
        m.end.as_deref(),
        inner.options.max_file_size as u64,
    );
    let mut state = state;
    let Some(c) = c else {
        if let Some(m) = state.manual.as_mut() {
            m.done = true;
        }
        return state;
    };
    // The next step starts after this one's last input. A level-0 step takes every
    // overlapping file at once, and a step whose last input reaches the end of the range
    // covers it: either finishes the manual compaction. Going on would take in the files that
    // flushes keep adding while writes continue, and never end (a level-0 file's largest key
    // can lie past the range's end, so the next step's range would be empty but still match).
    let last = c.inputs[0]
        .last()
        .expect("a plan has inputs")
        .largest
        .clone();
    let user = inner.icmp.user_comparator();
    let mut finished = false;
    if let Some(m) = state.manual.as_mut() {
        let past_end = m
            .end
            .as_deref()
            .is_some_and(|end| user.compare(user_key(&last), user_key(end)).is_ge());
        finished = m.level == 0 || past_end;
        m.begin = Some(last);
    }
    // Marked done only once the step is installed: the caller returns when it sees `done`.
    let mut state = run_compaction(inner, state, c);
    if finished {
        if let Some(m) = state.manual.as_mut() {
            m.done = true;
        }
    }
    state
}

/// The database's side of a compaction job.
struct DbJobHost<'a>(&'a Arc<DbInner>);

impl JobHost for DbJobHost<'_> {
    fn new_output_number(&self) -> u64 {
        let mut state = self.0.lock_state();
        let n = state.versions.new_file_number();
        state.pending_outputs.insert(n);
        n
    }

    fn stopping(&self) -> bool {
        self.0.shutting_down.load(Ordering::Acquire)
    }

    fn between_entries(&self) {
        let inner = self.0;
        if inner.has_imm.load(Ordering::Acquire) {
            let state = inner.lock_state();
            drop(flush_memtable(inner, state));
            inner.bg_done.notify_all();
        }
    }
}

/// Runs a compaction plan and installs its result.
fn run_compaction<'a>(
    inner: &'a Arc<DbInner>,
    mut state: Guard<'a>,
    mut c: Compaction,
) -> Guard<'a> {
    let start = Instant::now();
    if c.is_trivial_move() {
        let f = c.inputs[0][0].clone();
        c.edit.deleted_files.insert((c.level, f.number));
        c.edit.new_files.push((c.level + 1, f.meta.clone()));
        match state.versions.log_and_apply(&mut c.edit) {
            Ok(()) => {
                inner.counters.record_trivial_move();
                info!(inner, "moved table {} to level {}", f.number, c.level + 1);
                inner.publish_view(&state);
            }
            Err(e) => record_error(inner, &mut state, e),
        }
        return state;
    }
    let smallest_snapshot = inner
        .snapshots
        .oldest()
        .unwrap_or(state.versions.last_sequence);
    info!(
        inner,
        "compacting {}@{} + {}@{} files",
        c.num_input_files(0),
        c.level,
        c.num_input_files(1),
        c.level + 1
    );
    state.compacting = true;
    drop(state);
    let mut outputs = Vec::new();
    let files = JobFiles {
        env: &*inner.env,
        dir: &inner.dir,
        table_cache: &inner.table_cache,
        icmp: &inner.icmp,
        table_options: inner.options.table_options(),
    };
    let work = job::run(
        &DbJobHost(inner),
        &files,
        &mut c,
        smallest_snapshot,
        &mut outputs,
    );
    let mut state = inner.lock_state();
    state.compacting = false;
    // The outputs stay pending outputs until the edit that lists them is installed (see
    // `flush_memtable`).
    let output_numbers: Vec<u64> = outputs.iter().map(|o| o.number).collect();
    match work {
        Ok(true) => {
            let written: u64 = outputs.iter().map(|o| o.file_size).sum();
            let (output_level, read) = (c.level + 1, c.input_bytes());
            c.add_input_deletions();
            // The job applied every range deletion of its version that every snapshot saw.
            let horizon = c
                .input_version
                .newest_range_tombstone()
                .min(smallest_snapshot);
            for o in outputs {
                if horizon > 0 {
                    c.edit.range_deletion_horizons.push((o.number, horizon));
                }
                c.edit.new_files.push((c.level + 1, o));
            }
            let (s, applied) = log_and_apply_unlocked(inner, state, &mut c.edit);
            state = s;
            match applied {
                Ok(()) => {
                    let took = start.elapsed();
                    (inner.counters).record_compaction(output_level, read, written, took);
                    // The inputs leave the table cache (and are unmapped, unless a reader
                    // holds one, or the plan's version pins one in its file, until `c` is
                    // dropped below) before readers see the outputs: readers fault the
                    // outputs' pages in at once, and holding both sets mapped meanwhile would
                    // raise the process's peak resident memory by the compaction's output. A
                    // cursor of an older version reopens an input it still needs that no pin
                    // holds.
                    for (_, number) in &c.edit.deleted_files {
                        inner.table_cache.evict(*number);
                    }
                    inner.publish_view(&state);
                    // The plan's version kept the inputs live: let it go first, so that the
                    // inputs no reader holds are deleted now.
                    drop(c);
                    delete_obsolete_files(inner, &mut state);
                }
                Err(e) => record_error(inner, &mut state, e),
            }
        }
        // Shutting down: the outputs are left for the next open to delete.
        Ok(false) => {}
        Err(e) => record_error(inner, &mut state, e),
    }
    for n in &output_numbers {
        state.pending_outputs.remove(n);
    }
    state
}

/// Flushes the memtable and compacts the user-key range `[begin, end]` level by level down to
/// the deepest level that holds any of it.
pub(crate) fn compact_range(
    inner: &Arc<DbInner>,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<()> {
    if inner.read_only {
        return Err(Error::not_supported("the database was opened read-only"));
    }
    flush_now(inner)?;
    let max_level = {
        let state = inner.lock_state();
        let v = state.versions.current();
        (1..NUM_LEVELS)
            .filter(|&level| v.overlap_in_level(level, begin, end))
            .max()
            .unwrap_or(1)
    };
    let begin_key = begin.map(|b| {
        let mut k = Vec::new();
        append_internal_key(&mut k, b, MAX_SEQNO, ValueKind::FOR_SEEK);
        k
    });
    let end_key = end.map(|e| {
        let mut k = Vec::new();
        append_internal_key(&mut k, e, 0, ValueKind::Deletion);
        k
    });
    for level in 0..max_level {
        let mut state = inner.lock_state();
        // One manual compaction at a time.
        while state.manual.is_some() {
            state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.manual = Some(ManualCompaction {
            level,
            begin: begin_key.clone(),
            end: end_key.clone(),
            done: false,
        });
        inner.bg_work.notify_all();
        loop {
            if let Some(e) = &state.bg_error {
                let e = e.clone();
                state.manual = None;
                inner.bg_done.notify_all();
                return Err(e);
            }
            if state.manual.as_ref().is_some_and(|m| m.done) {
                break;
            }
            if inner.shutting_down.load(Ordering::Acquire) {
                state.manual = None;
                return Err(Error::closed(&inner.dir));
            }
            state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.manual = None;
        inner.bg_done.notify_all();
    }
    Ok(())
}
