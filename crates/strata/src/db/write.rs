// SPDX-License-Identifier: MIT OR Apache-2.0
//! The write path: a queue of writers, committed in groups.
//!
//! Each caller queues its batch. The writer at the front (the *leader*) makes room (switching
//! to a new memtable and log when the current one is full, slowing down or waiting when level 0
//! has too many files), then merges the batches of the writers behind it into one group,
//! appends the group to the log as one record (syncing it once if any writer asked for sync),
//! inserts it into the memtable, publishes its seqnos to readers, and completes every writer of
//! the group. Log I/O and memtable inserts happen with the state mutex released.
//!
//! Fail-stop: if the log write or sync fails, the error is kept as the database's background
//! error. The failed group is not made visible, and every later write fails with that error
//! until the database is reopened; the log is never appended to again.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::background;
use super::open::info;
use super::poison::PoisonOnUnwind;
use super::recovery::insert_batch;
use super::stats::Stall;
use super::{DbInner, DbState, MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::batch::{BatchOp, WriteBatch, BATCH_HEADER_LEN};
use crate::cache::row_cache::RowCache;
use crate::error::{Error, Result};
use crate::filename;
use crate::key::ValueKind;
use crate::log::LogWriter;
use crate::memtable::MemTable;
use crate::options::WriteOptions;

/// A queued write.
pub(crate) struct PendingWrite {
    /// The batch. Only the leader of the group touches it (to set its seqno when it commits
    /// alone), so the lock is never contended.
    batch: Mutex<WriteBatch>,
    /// The batch's encoded size, read when planning a group without locking the batch.
    size: usize,
    sync: bool,
    /// A queue entry that holds the queue for a memtable switch; it leads alone and is never
    /// merged into another writer's group.
    marker: bool,
    /// Set once by the leader that committed this write.
    outcome: std::sync::OnceLock<Result<()>>,
    wake: Condvar,
}

impl PendingWrite {
    /// A queue entry for `batch`.
    fn for_batch(batch: WriteBatch, sync: bool) -> Self {
        PendingWrite {
            size: batch.approximate_size(),
            batch: Mutex::new(batch),
            sync,
            marker: false,
            outcome: std::sync::OnceLock::new(),
            wake: Condvar::new(),
        }
    }

    /// A queue entry that writes nothing: it holds the front of the queue for a memtable
    /// switch on request or a blob relocation, and is never taken into a group.
    pub(crate) fn marker() -> Self {
        PendingWrite {
            batch: Mutex::new(WriteBatch::new()),
            size: BATCH_HEADER_LEN,
            sync: false,
            marker: true,
            outcome: std::sync::OnceLock::new(),
            wake: Condvar::new(),
        }
    }
}

fn validate(batch: &WriteBatch) -> Result<()> {
    // No key or value can be larger than the batch that holds it.
    if batch.approximate_size() <= MAX_KEY_SIZE.min(MAX_VALUE_SIZE) {
        if batch.has_blob_pointers() {
            return Err(blob_pointer_refused());
        }
        return Ok(());
    }
    for op in batch.iter() {
        if op.kind == ValueKind::BlobPointer {
            return Err(blob_pointer_refused());
        }
        let range_deletion = op.kind == ValueKind::RangeDeletion;
        validate_entry(op.key, if range_deletion { &[] } else { op.value })?;
        if range_deletion && op.value.len() > MAX_KEY_SIZE {
            return Err(Error::invalid_argument(format!(
                "range deletion end key of {} bytes is over the limit of {MAX_KEY_SIZE}",
                op.value.len()
            )));
        }
    }
    if batch.approximate_size() > u32::MAX as usize - 1024 {
        return Err(Error::invalid_argument("write batch is over 4 GiB"));
    }
    Ok(())
}

/// Refuses a key or a value over the limits.
fn validate_entry(key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_SIZE {
        return Err(Error::invalid_argument(format!(
            "key of {} bytes is over the limit of {MAX_KEY_SIZE}",
            key.len()
        )));
    }
    if value.len() > MAX_VALUE_SIZE {
        return Err(Error::invalid_argument(format!(
            "value of {} bytes is over the limit of {MAX_VALUE_SIZE}",
            value.len()
        )));
    }
    Ok(())
}

/// Refuses a range deletion whose end is before its start (in the database's order): that is
/// a caller's mistake, not an empty range. An end equal to the start deletes nothing. Refuses
/// every range deletion in a database with key-value separation (`Options::blob_threshold`,
/// or blob files from before): blob garbage accounting does not know range deletions yet (the
/// fuzzer found it over-counting; `docs/range-deletes.md`).
fn check_ranges(inner: &DbInner, batch: &WriteBatch) -> Result<()> {
    if inner.options.blob_threshold.is_some() || !inner.view.load().version.blob_files.is_empty() {
        return Err(Error::not_supported(
            "range deletions in a database with blob files (key-value separation) are not \
             supported yet",
        ));
    }
    let ucmp = inner.icmp.user_comparator();
    for op in batch.iter() {
        if op.kind == crate::key::ValueKind::RangeDeletion && ucmp.compare(op.value, op.key).is_lt()
        {
            return Err(Error::invalid_argument(format!(
                "range deletion end '{}' is before its start '{}'",
                op.value.escape_ascii(),
                op.key.escape_ascii()
            )));
        }
    }
    Ok(())
}

/// Waits until the MANIFEST carries the range-deletion marker, asking the background thread
/// to write it the first time: LevelDB must refuse the database before any log record it
/// cannot read is written.
fn mark_for_range_deletions(inner: &DbInner) -> Result<()> {
    let mut state = inner.lock_state();
    loop {
        if state.versions.range_marked {
            return Ok(());
        }
        if let Some(e) = &state.bg_error {
            return Err(e.clone());
        }
        if inner
            .shutting_down
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Err(Error::closed(&inner.dir));
        }
        state.range_marker_wanted = true;
        super::background::maybe_schedule(inner, &state);
        state = inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner());
    }
}

fn blob_pointer_refused() -> Error {
    Error::invalid_argument(
        "a write batch may not hold blob pointers (only the database makes them)",
    )
}

pub(crate) fn write(inner: &Arc<DbInner>, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
    if inner.read_only {
        return Err(Error::not_supported("the database was opened read-only"));
    }
    validate(&batch)?;
    if batch.has_range_deletions() {
        check_ranges(inner, &batch)?;
        mark_for_range_deletions(inner)?;
    }
    let user_bytes = batch.approximate_size().saturating_sub(BATCH_HEADER_LEN);
    // Large values go to a blob file now, in the writer's own thread, so that the group
    // commit below merges small pointer batches.
    // `_appending` keeps the blob file from being rewritten until this write returns.
    let (batch, _appending) = inner.separate_values(batch)?;
    commit(inner, options, batch, user_bytes)
}

/// `put_opt(key, value)`: a value that key-value separation keeps in a blob file goes there
/// straight from the caller's slice; anything else is written as a batch of one.
pub(crate) fn put(
    inner: &Arc<DbInner>,
    options: &WriteOptions,
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    if inner.read_only {
        return Err(Error::not_supported("the database was opened read-only"));
    }
    validate_entry(key, value)?;
    let Some(threshold) = inner.options.blob_threshold.filter(|&t| value.len() >= t) else {
        return put_small(inner, options, key, value);
    };
    let op = BatchOp {
        kind: ValueKind::Value,
        key,
        value,
    };
    let user_bytes = op.encoded_len();
    // As `write`: `_appending` keeps the blob file from being rewritten until this returns.
    let (batch, _appending) = inner.separate_ops(std::iter::once(op), 1, threshold)?;
    commit(inner, options, batch, user_bytes)
}

std::thread_local! {
    /// The queue entry of this thread's last single put, when it came back unshared: the next
    /// put fills its batch in place, so that a put allocates neither a batch nor an entry.
    static SPARE_PUT: std::cell::Cell<Option<Arc<PendingWrite>>> =
        const { std::cell::Cell::new(None) };
}

/// Takes this thread's spare queue entry, if it has one (tests look at what a put left).
#[cfg(test)]
pub(crate) fn take_spare_put() -> Option<Arc<PendingWrite>> {
    SPARE_PUT.take()
}

/// A spare entry's batch is kept only up to this capacity, so that one large put does not
/// hold its buffer for the thread's lifetime.
const SPARE_PUT_BYTES: usize = 64 << 10;

/// A put of a validated `key → value` that stays in the tree, as a batch of one, in the
/// thread's spare queue entry when it has one.
fn put_small(inner: &Arc<DbInner>, options: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
    let mut me = SPARE_PUT
        .take()
        .unwrap_or_else(|| Arc::new(PendingWrite::for_batch(WriteBatch::new(), false)));
    let user_bytes = {
        // Only an entry nothing else holds is kept as a spare (below).
        let entry = Arc::get_mut(&mut me).expect("a spare entry is not shared");
        let batch = entry.batch.get_mut().unwrap_or_else(|e| e.into_inner());
        batch.clear();
        batch.put(key, value);
        entry.size = batch.approximate_size();
        entry.sync = options.sync;
        entry.outcome = std::sync::OnceLock::new();
        entry.size - BATCH_HEADER_LEN
    };
    let outcome = commit_entry(inner, &me, user_bytes);
    // The leader of the group that took this entry in may still hold it for a moment after
    // completing it: then it is not kept.
    if let Some(entry) = Arc::get_mut(&mut me) {
        let batch = entry.batch.get_mut().unwrap_or_else(|e| e.into_inner());
        if batch.capacity() <= SPARE_PUT_BYTES {
            SPARE_PUT.set(Some(me));
        }
    }
    outcome
}

/// Queues `batch` (whose large values are already in blob files) and waits until it is
/// committed, leading the group that commits it if it reaches the front first.
fn commit(
    inner: &Arc<DbInner>,
    options: &WriteOptions,
    batch: WriteBatch,
    user_bytes: usize,
) -> Result<()> {
    let me = Arc::new(PendingWrite::for_batch(batch, options.sync));
    commit_entry(inner, &me, user_bytes)
}

/// [`commit`] of a queue entry already made.
fn commit_entry(inner: &Arc<DbInner>, me: &Arc<PendingWrite>, user_bytes: usize) -> Result<()> {
    let outcome = match wait_for_turn(inner, me) {
        Ok(state) => lead_group(inner, state, me),
        Err(outcome) => outcome,
    };
    if outcome.is_ok() {
        inner.counters.record_write(user_bytes);
    }
    outcome
}

/// Queues `me` at the back of the writer queue and waits until it is at the front (returning
/// the state guard: the caller now leads, and must [`leave_front`]), or until the leader of a
/// group that took it in has completed it (returning its outcome). A marker is never taken
/// into a group: it always reaches the front.
///
/// The writer queue is the one order of writes: only its front entry appends to the log,
/// switches the memtable or relocates blob values, so nothing else does meanwhile.
pub(crate) fn wait_for_turn<'a>(
    inner: &'a DbInner,
    me: &Arc<PendingWrite>,
) -> std::result::Result<MutexGuard<'a, DbState>, Result<()>> {
    let mut state = inner.lock_state();
    state.writers.push_back(me.clone());
    loop {
        if let Some(outcome) = me.outcome.get() {
            return Err(outcome.clone());
        }
        if Arc::ptr_eq(state.writers.front().expect("queued above"), me) {
            return Ok(state);
        }
        state = me.wake.wait(state).unwrap_or_else(|e| e.into_inner());
    }
}

/// Takes the first `count` entries off the writer queue (the caller's, led by it, its own
/// first), completes each but the caller's own with `outcome` if one is given, and wakes the
/// entry now at the front.
///
/// The caller's entry is not woken: it is the caller, and `Condvar::notify_one` is a system
/// call even with no waiter (waking it cost every write about 150 ns: fillseq 0.72 -> 0.88
/// µs/op).
pub(crate) fn leave_front(state: &mut DbState, count: usize, outcome: Option<&Result<()>>) {
    for i in 0..count {
        let Some(w) = state.writers.pop_front() else {
            break;
        };
        if i == 0 {
            continue;
        }
        if let Some(outcome) = outcome {
            let _ = w.outcome.set(outcome.clone());
        }
        w.wake.notify_one();
    }
    if let Some(next) = state.writers.front() {
        next.wake.notify_one();
    }
}

/// Commits the group led by `leader` (the front writer) and returns the leader's outcome.
fn lead_group(
    inner: &Arc<DbInner>,
    state: MutexGuard<'_, DbState>,
    leader: &Arc<PendingWrite>,
) -> Result<()> {
    let (mut state, room) = make_room_for_write(inner, state, false);
    let (group, members, sync) = match room {
        Ok(()) => plan_group(&state),
        Err(e) => {
            // Nothing was written: fail the leader alone and let the next writer try.
            leave_front(&mut state, 1, None);
            return Err(e);
        }
    };
    let first_seqno = state.versions.last_sequence + 1;
    let mem = state.mem.clone();
    drop(state);

    // A writer alone commits its own batch in place; a group is merged into a new one.
    let mut own = leader.batch.lock().unwrap_or_else(|e| e.into_inner());
    let mut merged;
    let group: &mut WriteBatch = match group {
        Some(g) => {
            merged = g;
            &mut merged
        }
        None => &mut own,
    };
    group.set_seqno(first_seqno);
    let last_seqno = first_seqno + u64::from(group.count()) - 1;
    let result = {
        // The memtable insert runs the user's comparator, which may panic.
        let _poison = PoisonOnUnwind::leading(inner, "in a write", members);
        append_to_log(inner, group, sync).and_then(|()| insert_batch(&mem, group))
    };

    let mut state = inner.lock_state();
    match &result {
        Ok(()) => {
            state.versions.last_sequence = last_seqno;
            inner.visible_seqno.store(last_seqno, Ordering::Release);
            if let Some(rows) = &inner.row_cache {
                // Visible now, acknowledged only below (an atomic add per key).
                invalidate_rows(rows, group);
            }
        }
        Err(e) => {
            info!(
                inner,
                "write failed; the database accepts no more writes: {e}"
            );
            inner.set_error(&mut state, e);
        }
    }
    debug_assert!(Arc::ptr_eq(&state.writers[0], leader));
    leave_front(&mut state, members, Some(&result));
    drop(state);
    drop(own);
    result
}

/// Forgets from the row cache every key `group` wrote; a range deletion forgets everything.
fn invalidate_rows(rows: &RowCache, group: &WriteBatch) {
    for op in group.iter() {
        match op.kind {
            ValueKind::RangeDeletion => return rows.invalidate_all(),
            _ => rows.invalidate(op.key),
        }
    }
}

/// Appends the group to the log, syncing it if asked.
pub(crate) fn append_to_log(inner: &DbInner, group: &WriteBatch, sync: bool) -> Result<()> {
    let mut log = inner.log.lock().unwrap_or_else(|e| e.into_inner());
    let writer = log
        .as_mut()
        .ok_or_else(|| Error::not_supported("the database has no open log"))?;
    let before = writer.file_len();
    let appended = writer.add_record(group.encoded());
    inner
        .counters
        .record_wal_append(writer.file_len().saturating_sub(before));
    appended?;
    if sync {
        sync_log_locked(inner, writer)?;
    }
    Ok(())
}

/// Makes every write in the logs durable, as a synced write does. Used by blob garbage
/// collection before it drops values that unsynced writes superseded: those writes must not
/// be lost once the values are gone.
pub(crate) fn sync_log(inner: &DbInner) -> Result<()> {
    let mut log = inner.log.lock().unwrap_or_else(|e| e.into_inner());
    let writer = log
        .as_mut()
        .ok_or_else(|| Error::not_supported("the database has no open log"))?;
    sync_log_locked(inner, writer)
}

fn sync_log_locked(inner: &DbInner, writer: &mut LogWriter) -> Result<()> {
    // Values before the pointers to them (lock order: log, then blob writers).
    inner
        .blob_writers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .sync_all(inner)?;
    let mut debt = inner
        .log_sync_debt
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(old) = debt.retired_log.as_mut() {
        old.sync()?;
        debt.retired_log = None;
    }
    if debt.dir_entry {
        inner.env.sync_dir(&inner.dir)?;
        debt.dir_entry = false;
    }
    drop(debt);
    writer.sync()?;
    inner.counters.record_wal_sync();
    Ok(())
}

/// Chooses the group led by the front writer: the writers behind it whose batches fit a size
/// limit. A sync write never joins a group led by a non-sync write; a marker never joins one.
/// Returns the merged batch (`None` when the leader is alone and commits its own batch), the
/// number of writers in the group, and whether to sync.
fn plan_group(state: &DbState) -> (Option<WriteBatch>, usize, bool) {
    let leader = state.writers.front().expect("the leader is queued");
    if state.writers.len() == 1 {
        return (None, 1, leader.sync);
    }
    let first_size = leader.size;
    // Limit the group so that small writes are not slowed down too much.
    let max_size = if first_size <= 128 << 10 {
        first_size + (128 << 10)
    } else {
        1 << 20
    };
    let mut size = first_size;
    let mut members = 1;
    let mut group: Option<WriteBatch> = None;
    for w in state.writers.iter().skip(1) {
        if w.marker || (w.sync && !leader.sync) {
            break;
        }
        size += w.size - BATCH_HEADER_LEN;
        if size > max_size {
            break;
        }
        let batch = w.batch.lock().unwrap_or_else(|e| e.into_inner());
        group
            .get_or_insert_with(|| {
                leader
                    .batch
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
            })
            .append(&batch);
        members += 1;
    }
    (group, members, leader.sync)
}

/// Makes sure the memtable has room for a write, switching to a new memtable and log if it is
/// full (or if `force`). May wait, with the state mutex released, for the background thread;
/// hands the (re-acquired) guard back.
pub(crate) fn make_room_for_write<'a>(
    inner: &'a Arc<DbInner>,
    mut state: MutexGuard<'a, DbState>,
    mut force: bool,
) -> (MutexGuard<'a, DbState>, Result<()>) {
    let mut allow_delay = !force;
    // Whether this write has been counted as stopped, for a full memtable and for level 0.
    let (mut memtable_stopped, mut l0_stopped) = (false, false);
    loop {
        if let Some(e) = &state.bg_error {
            let e = e.clone();
            return (state, Err(e));
        }
        let l0_files = state.versions.current_ref().num_files(0);
        if allow_delay && l0_files >= inner.options.l0_slowdown_writes_trigger {
            // Near the stop trigger: give each write a little delay, once, rather than stop
            // one write for seconds later.
            allow_delay = false;
            drop(state);
            let start = Instant::now();
            std::thread::sleep(Duration::from_millis(1));
            inner
                .counters
                .record_stall(Stall::L0Slowdown, start.elapsed(), true);
            state = inner.lock_state();
            continue;
        }
        // An empty memtable always has room: switching away from it would gain nothing (and
        // its arena alone may exceed a tiny write buffer).
        let mem_full = state.mem.approximate_memory_usage() > inner.options.write_buffer_size
            || inner
                .blob_mem_bytes
                .load(std::sync::atomic::Ordering::Relaxed)
                >= inner.blob_bytes_per_memtable();
        if !force && (!mem_full || state.mem.is_empty()) {
            return (state, Ok(()));
        }
        if state.imm.is_some() {
            info!(
                inner,
                "current memtable full; waiting for the previous one to be flushed"
            );
            let start = Instant::now();
            state = wait_for_background(inner, state);
            let first = !std::mem::replace(&mut memtable_stopped, true);
            inner
                .counters
                .record_stall(Stall::MemtableStop, start.elapsed(), first);
            continue;
        }
        if l0_files >= inner.options.l0_stop_writes_trigger {
            info!(
                inner,
                "too many level-0 files ({l0_files}); waiting for compaction"
            );
            let start = Instant::now();
            state = wait_for_background(inner, state);
            let first = !std::mem::replace(&mut l0_stopped, true);
            inner
                .counters
                .record_stall(Stall::L0Stop, start.elapsed(), first);
            continue;
        }
        if let Err(e) = switch_memtable(inner, &mut state) {
            return (state, Err(e));
        }
        force = false;
    }
}

/// Makes the memtable immutable and starts a new memtable and log.
fn switch_memtable(inner: &Arc<DbInner>, state: &mut DbState) -> Result<()> {
    let number = state.versions.new_file_number();
    let file = inner
        .env
        .new_log_file(&filename::log_file(&inner.dir, number))?;
    let mut log = inner.log.lock().unwrap_or_else(|e| e.into_inner());
    // The new log's directory entry and the old log's tail are synced by the first sync write
    // to the new log, if one comes before the old memtable is flushed (see `LogSyncDebt`). The
    // log retired at the previous switch is dropped here if the flush has not: a switch waits
    // for the previous memtable's flush, so that log's writes are in a synced table.
    let old = log.replace(LogWriter::new(file));
    let mut debt = inner
        .log_sync_debt
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    debt.retired_log = old;
    debt.dir_entry = true;
    drop(debt);
    // The blob file of the memtable becoming immutable is closed with it.
    inner.seal_active_blob_file();
    drop(log);
    state.log_number = number;
    let full = std::mem::replace(
        &mut state.mem,
        Arc::new(MemTable::for_database(
            inner.icmp.clone(),
            inner.options.write_buffer_size,
        )),
    );
    state.imm = Some(full);
    inner.publish_view(state);
    background::maybe_schedule(inner, state);
    Ok(())
}

/// Waits, with the state mutex released, until the background thread finishes some work.
pub(crate) fn wait_for_background<'a>(
    inner: &'a DbInner,
    state: MutexGuard<'a, DbState>,
) -> MutexGuard<'a, DbState> {
    background::maybe_schedule(inner, &state);
    inner.bg_done.wait(state).unwrap_or_else(|e| e.into_inner())
}
