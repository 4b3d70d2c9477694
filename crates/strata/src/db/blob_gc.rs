// SPDX-License-Identifier: MIT OR Apache-2.0
//! Blob garbage collection: rewriting a blob file whose live fraction fell below
//! `Options::blob_gc_live_ratio`, and removing blob files nothing can read any more.
//!
//! One thread per database (started when the database has or may get blob files) does the
//! rewrites:
//!
//! 1. Pick the blob files of the current version whose live fraction is below the threshold,
//!    lowest first, as many as fit one new file. Their garbage is what flushes counted (see
//!    `blobs::superseded_blob_values`) plus this thread's estimate of what the unflushed
//!    memtables make (`estimate_unflushed_garbage`).
//! 2. Read them from the front; for each record, ask the tree whether the record is still its
//!    key's newest value (the newest entry for the key is a pointer to exactly this record).
//!    Copy the live ones to one new blob file and sync it.
//! 3. Have the background thread add the new file to the version (before any pointer to it
//!    exists, so that a table can never point into a file the version does not list).
//! 4. Write the new pointers through the writer queue, alone, each only if its key still points
//!    at the old record, as one synced batch. Copies whose key changed meanwhile are counted
//!    as garbage of the new file.
//!    With nothing to move, sync the logs all the same: the writes that made the dropped values
//!    dead must be durable before the values go.
//! 5. Hand the old files to the background thread for removal once no snapshot older than the
//!    batch remains (older snapshots may still read the old pointers), with a tombstone for
//!    recovery (see `VersionEdit::blob_tombstones`). Cursors and reads keep the version they
//!    started with, and with it the old files, until they end.
//!
//! Writers of large values wait while the garbage left to reclaim exceeds one blob file
//! (`DbInner::wait_for_blob_gc`), so that the collector keeps up.
//!
//! The MANIFEST stays the background thread's alone: this thread only queues changes in
//! [`BlobGcState`] and waits for them.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::blobs::{newest_older_pointer, superseded_blob_values};
use super::open::info;
use super::poison::PoisonOnUnwind;
use super::write::{append_to_log, leave_front, sync_log, wait_for_turn, PendingWrite};
use super::DbInner;
use crate::batch::WriteBatch;
use crate::blob::{BlobFileWriter, BlobPointer, BlobScanner};
use crate::error::Result;
use crate::filename;
use crate::key::{SeqNo, ValueKind};
use crate::memtable::{MemLookup, MemTable};
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
    /// The files being rewritten (together, into one new file); empty when none is.
    pub(crate) rewriting: Vec<u64>,
    /// Garbage that entries not yet flushed make, by blob file, as the collector last
    /// estimated it (see `estimate_unflushed_garbage`). Not durable; a flush clears it, as it
    /// counts its own part for good.
    pub(crate) unflushed_garbage: BTreeMap<u64, u64>,
    /// Flushes installed since the database opened: an estimate made across a flush is
    /// dropped.
    pub(crate) flushes: u64,
}

impl BlobGcState {
    /// The edit of the changes due now, given the oldest snapshot; `None` if there are none.
    /// Each removed file gets a tombstone naming `log_number`, the log being written: the logs
    /// not flushed yet may point into it, and recovery must know it was removed on purpose.
    pub(crate) fn take_due(
        &mut self,
        oldest_snapshot: Option<SeqNo>,
        log_number: u64,
    ) -> Option<VersionEdit> {
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
        edit.blob_tombstones = edit
            .deleted_blob_files
            .iter()
            .map(|&n| (n, log_number))
            .collect();
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
///
/// # Errors
/// [`Error::Io`](crate::Error::Io) if the thread cannot be started.
pub(crate) fn start(inner: &Arc<DbInner>) -> Result<JoinHandle<()>> {
    let worker = inner.clone();
    #[cfg(test)]
    let gate = idle_gate::IDLE_GATE.with(|g| g.borrow().clone());
    super::spawn_thread(&inner.dir, "strata-blob-gc", move || {
        #[cfg(test)]
        idle_gate::IDLE_GATE.with(|g| g.replace(gate));
        run(&worker);
    })
}

/// How often the thread looks for a file to rewrite when nothing wakes it.
const POLL: Duration = Duration::from_millis(200);

fn run(inner: &Arc<DbInner>) {
    // Estimates and rewrites run the user's comparator, which may panic.
    let _poison = PoisonOnUnwind::new(inner, "in the blob garbage collector");
    let mut pace = EstimatePace::default();
    while !inner.shutting_down.load(Ordering::Acquire) {
        if let Err(e) = estimate_unflushed_garbage(inner, &mut pace) {
            // Only a guide is lost; the next estimate tries again. Writers waiting for it
            // go on meanwhile.
            info!(inner, "estimating unflushed blob garbage failed: {e}");
            let appended = inner.blob_appended_bytes.load(Ordering::Relaxed);
            estimated_up_to(inner, &inner.lock_state(), appended);
        }
        let picked = {
            let state = inner.lock_state();
            // A removal waits for snapshots, and releasing one wakes nobody: look here.
            if state.blob_gc.has_due(inner.snapshots.oldest()) {
                super::background::maybe_schedule(inner, &state);
            }
            drop(state);
            claim(inner)
        };
        let Some(numbers) = picked else {
            #[cfg(test)]
            idle_gate::pass();
            let state = inner.lock_state();
            // Looked at under the mutex, as writers decide to wait under it: a writer that
            // found the estimate lagging woke this thread while it was estimating or picking
            // (not waiting), and would otherwise wait out the whole poll. That cost one put of
            // 100 KB values 200 ms in 17 of 135 runs of db_bench's fillseq100K.
            if !inner.shutting_down.load(Ordering::Acquire) && !inner.estimate_lags() {
                let _ = inner.blob_gc_work.wait_timeout(state, POLL);
            }
            continue;
        };
        if let Err(e) = rewrite(inner, &numbers) {
            if !inner.shutting_down.load(Ordering::Acquire) {
                inner.set_error(&mut inner.lock_state(), &e);
            }
        }
    }
}

/// When the collector last estimated unflushed garbage, how long that took, and what it
/// counted of each memtable so far.
#[derive(Default)]
struct EstimatePace {
    appended_bytes: u64,
    flushes: u64,
    not_before: Option<Instant>,
    last: Option<Instant>,
    memtables: Vec<MemEstimate>,
}

/// What the estimates so far counted of one memtable: the garbage its entries with seqnos at
/// or below `through` supersede. The next estimate counts only the entries above it (a
/// memtable's entries at or below the visible seqno read before its view are all in it, and
/// it takes only newer ones), so that estimating a memtable of n entries asks the tables of
/// each key once, not once per estimate.
struct MemEstimate {
    /// Weak, so that a flushed memtable is freed; compared by address, which stays the
    /// memtable's own as long as this lives.
    mem: Weak<MemTable>,
    /// None before the first estimate of the memtable.
    through: Option<SeqNo>,
    garbage: BTreeMap<u64, u64>,
}

/// Values appended since the last estimate are estimated at the latest this long after it,
/// however few they are (once writes stop, the last ones are not left out).
const ESTIMATE_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// Estimates the garbage that writes not yet flushed make (the values their entries supersede,
/// as a flush would count them), so that the collector can reclaim it before the memtables
/// holding those writes are flushed, and so that writers wait for it when it is far behind.
/// Runs after each quarter file of blob bytes, after a flush, and a second after the last run
/// if anything was appended since, taking at most a tenth of the collector's time unless
/// writers wait for it. Each run reads every entry of the memtables, and asks the tables only
/// of the keys first written since the run before ([`MemEstimate`]).
fn estimate_unflushed_garbage(inner: &DbInner, pace: &mut EstimatePace) -> Result<()> {
    let appended = inner.blob_appended_bytes.load(Ordering::Relaxed);
    let flushes = inner.lock_state().blob_gc.flushes;
    let quarter = inner.estimate_interval();
    let stale = appended > pace.appended_bytes
        && pace
            .last
            .is_none_or(|t| t.elapsed() >= ESTIMATE_AT_LEAST_EVERY);
    let due = flushes != pace.flushes || appended >= pace.appended_bytes + quarter || stale;
    let writers_wait = inner.estimate_lags();
    if !due || (!writers_wait && pace.not_before.is_some_and(|t| Instant::now() < t)) {
        return Ok(());
    }
    // The flush count was read first: the view is at least as new. The visible seqno is read
    // before the view, as a reader reads them: every entry at or below it is in the view.
    let through = inner.visible_seqno.load(Ordering::Acquire);
    let view = inner.view.load_full();
    let start = Instant::now();
    let mut counted = Vec::with_capacity(2);
    // Each memtable's entries supersede what is older: the immutable memtable's, the tables';
    // the current memtable's, the immutable memtable's first.
    let memtables = view
        .imm
        .iter()
        .map(|imm| (imm, None))
        .chain([(&view.mem, view.imm.as_deref())]);
    for (mem, older_mem) in memtables.filter(|(m, _)| m.holds_blob_pointers()) {
        let known = pace
            .memtables
            .iter()
            .position(|e| std::ptr::eq(e.mem.as_ptr(), Arc::as_ptr(mem)));
        let mut this = match known {
            Some(i) => pace.memtables.swap_remove(i),
            None => MemEstimate {
                mem: Arc::downgrade(mem),
                through: None,
                garbage: BTreeMap::new(),
            },
        };
        if this.through.is_none_or(|t| t < through) {
            let window = this.through.map_or(0, |t| t + 1)..=through;
            let garbage = superseded_blob_values(&inner.icmp, mem, window, |key| {
                newest_older_pointer(inner, older_mem, &view.version, &[], key)
            });
            // On an error every memtable is counted again from the start next time: the
            // counts taken out of `pace` so far are dropped with `counted`.
            for (file, bytes) in garbage? {
                let total = this.garbage.entry(file).or_default();
                *total = total.saturating_add(bytes);
            }
            this.through = Some(through);
        }
        counted.push(this);
    }
    // Memtables that left the view are flushed: a flush counted them, durably.
    pace.memtables = counted;
    let mut estimate: BTreeMap<u64, u64> = BTreeMap::new();
    for (&file, &bytes) in pace.memtables.iter().flat_map(|m| &m.garbage) {
        let total = estimate.entry(file).or_default();
        *total = total.saturating_add(bytes);
    }
    pace.appended_bytes = appended;
    pace.flushes = flushes;
    pace.not_before = Some(Instant::now() + start.elapsed() * 9);
    pace.last = Some(Instant::now());
    let mut state = inner.lock_state();
    if state.blob_gc.flushes == flushes {
        state.blob_gc.unflushed_garbage = estimate;
        inner.refresh_blob_gc_behind(&state);
    }
    estimated_up_to(inner, &state, appended);
    Ok(())
}

/// Records that the values appended up to `appended` were estimated (or given up on), and
/// wakes writers waiting for that. Requires the state mutex (the guard's state is passed), so
/// that no waiter misses the wake-up.
fn estimated_up_to(inner: &DbInner, _state: &super::DbState, appended: u64) {
    inner
        .blob_estimated_bytes
        .fetch_max(appended, Ordering::Relaxed);
    inner.bg_done.notify_all();
}

/// Picks blob files to rewrite and claims them, unless a rewrite is under way (one at a time).
fn claim(inner: &DbInner) -> Option<Vec<u64>> {
    let mut state = inner.lock_state();
    if state.bg_error.is_some() || !state.blob_gc.rewriting.is_empty() {
        return None;
    }
    let numbers = pick(inner, &state, |_| true);
    if numbers.is_empty() {
        return None;
    }
    state.blob_gc.rewriting.clone_from(&numbers);
    Some(numbers)
}

/// Rewrites, in the caller's thread, every blob file whose live fraction is below the
/// threshold now (waiting for a rewrite under way in the collector's thread first), and waits
/// until the rewritten files have left the version (unless a snapshot still reads them).
/// Returns how many it rewrote.
pub(crate) fn collect_now(inner: &Arc<DbInner>) -> Result<usize> {
    let mut rewritten = 0;
    // The files below the threshold now; files that fall below it while this runs are left to
    // the collector, so that a stream of overwrites cannot keep this call going forever.
    let mut targets: Option<std::collections::BTreeSet<u64>> = None;
    loop {
        let numbers = {
            let mut state = inner.lock_state();
            loop {
                if let Some(e) = &state.bg_error {
                    return Err(e.clone());
                }
                if state.blob_gc.rewriting.is_empty() {
                    break;
                }
                state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            let targets = targets.get_or_insert_with(|| {
                candidates(inner, &state)
                    .map(|(_, _, b)| b.meta.number)
                    .collect()
            });
            let numbers = pick(inner, &state, |n| targets.contains(&n));
            if numbers.is_empty() {
                // Wait for the removals that are due to be installed.
                while state.bg_error.is_none()
                    && !inner.shutting_down.load(Ordering::Acquire)
                    && (state.blob_gc.has_due(inner.snapshots.oldest())
                        || !state.blob_gc.removing.is_empty())
                {
                    super::background::maybe_schedule(inner, &state);
                    state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                return match &state.bg_error {
                    Some(e) => Err(e.clone()),
                    None => Ok(rewritten),
                };
            }
            state.blob_gc.rewriting.clone_from(&numbers);
            numbers
        };
        rewrite(inner, &numbers)?;
        rewritten += numbers.len();
    }
}

/// The blob files of the current version the collector may rewrite: live fraction below the
/// threshold, and not rewritten already (waiting to leave the version), with their live
/// fractions and garbage (counted, and estimated for unflushed writes).
fn candidates<'s>(
    inner: &'s DbInner,
    state: &'s super::DbState,
) -> impl Iterator<Item = (f64, u64, &'s crate::version::version::BlobFileState)> + 's {
    let gc = &state.blob_gc;
    // A file some unfinished write appended to may hold values whose pointers are not in a
    // memtable yet: they would look dead.
    let being_written = inner.blob_files_being_written();
    let queued = move |n: u64| {
        gc.removing.contains(&n)
            || gc.to_remove.iter().any(|&(r, _)| r == n)
            || being_written.contains(&n)
    };
    state
        .versions
        .current_ref()
        .blob_files
        .values()
        .filter(move |b| b.meta.value_bytes > 0 && !queued(b.meta.number))
        .map(move |b| {
            let unflushed = gc.unflushed_garbage.get(&b.meta.number).copied();
            // Counts come from the MANIFEST and from pointer lengths: saturate, never panic.
            let garbage = b.garbage_bytes.saturating_add(unflushed.unwrap_or(0));
            (1.0 - garbage as f64 / b.meta.value_bytes as f64, garbage, b)
        })
        .filter(|&(live, _, _)| live < inner.options.blob_gc_live_ratio)
}

/// At most this many files are rewritten together.
const MAX_FILES_PER_REWRITE: usize = 16;

/// The blob files most worth rewriting (lowest live fraction first, among those below the
/// threshold and `wanted`), as many as fit one new file of `blob_file_size` (at least one):
/// rewriting them together shares the syncs and MANIFEST writes a rewrite costs.
fn pick(inner: &DbInner, state: &super::DbState, wanted: impl Fn(u64) -> bool) -> Vec<u64> {
    let mut found: Vec<(f64, u64, u64)> = candidates(inner, state)
        .filter(|(_, _, b)| wanted(b.meta.number))
        .map(|(live, garbage, b)| {
            let live_bytes = b.meta.value_bytes.saturating_sub(garbage);
            (live, live_bytes, b.meta.number)
        })
        .collect();
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut picked = Vec::new();
    let mut live_total: u64 = 0;
    for (_, live_bytes, number) in found.into_iter().take(MAX_FILES_PER_REWRITE) {
        let with = live_total.saturating_add(live_bytes);
        if !picked.is_empty() && with > inner.options.blob_file_size as u64 {
            break;
        }
        live_total = with;
        picked.push(number);
    }
    picked
}

/// The garbage the collector has yet to reclaim: what the files it may rewrite hold. Each
/// rewrite takes its file's share out, so writers waiting for it to fall always see progress.
/// (Garbage in files above the threshold is not counted: nothing would reclaim it.)
fn reclaimable_garbage(inner: &DbInner, state: &super::DbState) -> u64 {
    candidates(inner, state)
        .map(|(_, garbage, _)| garbage)
        .sum()
}

impl DbInner {
    /// Recomputes `blob_gc_behind`: whether the garbage left to reclaim is over one blob
    /// file's size. Requires the state mutex (the caller passes the state it guards).
    pub(crate) fn refresh_blob_gc_behind(&self, state: &super::DbState) {
        let behind = self.options.blob_threshold.is_some()
            && reclaimable_garbage(self, state) > self.options.blob_file_size as u64;
        self.blob_gc_behind.store(behind, Ordering::Relaxed);
    }

    /// True if a blob file's worth of values was appended since the collector last estimated
    /// the garbage of unflushed writes: what those values overwrote is not known to it yet.
    pub(crate) fn estimate_lags(&self) -> bool {
        let appended = self.blob_appended_bytes.load(Ordering::Relaxed);
        let estimated = self.blob_estimated_bytes.load(Ordering::Relaxed);
        appended.saturating_sub(estimated) >= self.options.blob_file_size as u64
    }

    /// Waits while the collector is behind (on reclaiming, or on estimating), so that writers of
    /// large values cannot outrun it and let garbage grow without bound (as writers wait for
    /// compaction when level 0 is full). Called by a writer before it joins the writer queue:
    /// the collector needs the queue to move values.
    ///
    /// # Errors
    /// The database's background error, if it stops the collector.
    pub(crate) fn wait_for_blob_gc(&self) -> Result<()> {
        let behind = || self.blob_gc_behind.load(Ordering::Relaxed) || self.estimate_lags();
        if !behind() {
            return Ok(());
        }
        let mut state = self.lock_state();
        while behind() && !self.shutting_down.load(Ordering::Acquire) {
            if let Some(e) = &state.bg_error {
                return Err(e.clone());
            }
            self.blob_gc_work.notify_all();
            state = self.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        Ok(())
    }
}

impl DbInner {
    /// The newest entry for `key` as the tree holds it: its kind and stored value.
    fn newest_entry(&self, key: &[u8]) -> Result<Option<(ValueKind, Vec<u8>)>> {
        let seqno = self.visible_seqno.load(Ordering::Acquire);
        let view = self.view.load();
        // A value a range deletion covers is not live: relocating it would bring it back.
        let floor = view.range_deletion_floor(key, seqno);
        for mem in std::iter::once(&view.mem).chain(&view.imm) {
            match mem.get_above(key, seqno, floor) {
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
            trust_verified: true,
            fill_cache: false,
            release_behind: false,
        };
        let mut found = TableLookup::Absent;
        view.version
            .get_into(&read, &self.table_cache, key, seqno, floor, &mut found)?;
        Ok(match found {
            TableLookup::Value(v) => Some((ValueKind::Value, v.to_vec())),
            TableLookup::CopiedValue(v) => Some((ValueKind::Value, v)),
            TableLookup::BlobPointer(p) => Some((ValueKind::BlobPointer, p.to_vec())),
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

/// Rewrites blob files `numbers` into one new file; the caller claimed them (steps 2 to 5 of
/// the module's description). The claim ends with it, whatever the outcome.
fn rewrite(inner: &Arc<DbInner>, numbers: &[u64]) -> Result<()> {
    let result = rewrite_claimed(inner, numbers);
    let mut state = inner.lock_state();
    state.blob_gc.rewriting.clear();
    if let Err(e) = &result {
        info!(inner, "rewriting blob files {numbers:?} failed: {e}");
    }
    inner.refresh_blob_gc_behind(&state);
    inner.bg_done.notify_all();
    result
}

fn rewrite_claimed(inner: &Arc<DbInner>, numbers: &[u64]) -> Result<()> {
    let mut moves = Vec::new();
    let mut output: Option<BlobFileWriter> = None;
    let mut dead_bytes = 0u64;
    for &number in numbers {
        let path = filename::blob_file(&inner.dir, number);
        let mut scanner = BlobScanner::open(&*inner.env, &path)?;
        // Only the records the version counts (recovery lists a file up to its last good
        // record).
        let listed_len = inner
            .lock_state()
            .versions
            .current_ref()
            .blob_files
            .get(&number)
            .map(|b| b.meta.file_size);
        if let Some(len) = listed_len {
            scanner.limit(len);
        }
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
                    output.insert(
                        BlobFileWriter::create(&*inner.env, &inner.dir, n)?
                            .reserving_up_to(inner.options.blob_file_size as u64),
                    )
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
    }
    let relocated_seqno = match output {
        // Nothing moves, but the relocation still makes the writes that superseded the
        // dropped values durable (a synced batch does the same when values move).
        None => relocate(inner, &[])?.0,
        Some(mut out) => {
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
            let mut state = inner.lock_state();
            if skipped > 0 {
                state.blob_gc.garbage.push((meta.number, skipped));
            }
            state.pending_outputs.remove(&meta.number);
            seqno
        }
    };
    let state = &mut *inner.lock_state();
    for &number in numbers {
        state.blob_gc.to_remove.push((number, relocated_seqno + 1));
    }
    info!(
        inner,
        "rewrote blob files {numbers:?}: {} live values moved, {dead_bytes} bytes of garbage \
         dropped",
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
        // Listed first: once it is, the pointers must move to it, closing or not (a listed
        // file nothing points into would never be counted as garbage).
        if state
            .versions
            .current_ref()
            .blob_files
            .contains_key(&meta.number)
        {
            return Ok(());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            // The background thread has stopped, or is stopping: the file stays out of the
            // version, and an open deletes it (nothing points into it).
            return Err(crate::error::Error::closed(&inner.dir));
        }
        state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
    }
}

/// Writes the new pointers of `moves` whose keys still point at the old records, as one synced
/// batch, alone at the front of the writer queue (so no write comes between the check and the
/// batch). Returns the batch's last seqno and the value bytes of the moves skipped.
fn relocate(inner: &Arc<DbInner>, moves: &[Move]) -> Result<(SeqNo, u64)> {
    let me = Arc::new(PendingWrite::marker());
    let Ok(state) = wait_for_turn(inner, &me) else {
        unreachable!("a marker is never taken into a group")
    };
    let started = match &state.bg_error {
        Some(e) => Err(e.clone()),
        None => Ok((state.versions.last_sequence + 1, state.mem.clone())),
    };
    drop(state);
    // At the front of the queue, no other write (and no memtable switch) comes in until this
    // one leaves it; the checks read tables, so they run without the state mutex.
    let poison = PoisonOnUnwind::leading(inner, "relocating blob values", 1);
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
            // Values the scan found dead may have been superseded by writes not synced yet;
            // they must outlive the values, which are about to go.
            sync_log(inner)?;
            return Ok((first_seqno - 1, skipped));
        }
        batch.set_seqno(first_seqno);
        append_to_log(inner, &batch, true)?;
        mem.add_batch(&batch);
        Ok((first_seqno + u64::from(batch.count()) - 1, skipped))
    });
    drop(poison);
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
    leave_front(&mut state, 1, None);
    result
}

/// In tests, a gate the collector passes each time it is about to idle, which a test can
/// hold it at: the collector of a database opened by a thread whose [`IDLE_GATE`] holds a
/// gate takes that gate.
///
/// [`IDLE_GATE`]: idle_gate::IDLE_GATE
#[cfg(test)]
pub(crate) mod idle_gate {
    use std::cell::RefCell;
    use std::sync::{Arc, Condvar, Mutex};

    thread_local! {
        /// The gate of the collector of the next database this thread opens (and, in a
        /// collector's thread, its own).
        pub(crate) static IDLE_GATE: RefCell<Option<Arc<IdleGate>>> = const { RefCell::new(None) };
    }

    /// (held: the collector stops here; parked: it has stopped here).
    #[derive(Default)]
    pub(crate) struct IdleGate {
        state: Mutex<(bool, bool)>,
        changed: Condvar,
    }

    impl IdleGate {
        /// A gate that holds the collector the next time it is about to idle.
        pub(crate) fn held() -> Arc<IdleGate> {
            let gate = IdleGate::default();
            gate.state.lock().unwrap().0 = true;
            Arc::new(gate)
        }

        /// Waits until the collector is held at the gate.
        pub(crate) fn wait_parked(&self) {
            let mut state = self.state.lock().unwrap();
            while !state.1 {
                state = self.changed.wait(state).unwrap();
            }
        }

        /// Lets the collector go on, now and from then on.
        pub(crate) fn open(&self) {
            self.state.lock().unwrap().0 = false;
            self.changed.notify_all();
        }
    }

    /// Called by the collector before it idles: stops while its gate, if any, is held.
    pub(super) fn pass() {
        let Some(gate) = IDLE_GATE.with(|g| g.borrow().clone()) else {
            return;
        };
        let mut state = gate.state.lock().unwrap();
        if state.0 {
            state.1 = true;
            gate.changed.notify_all();
            while state.0 {
                state = gate.changed.wait(state).unwrap();
            }
            state.1 = false;
        }
    }
}
