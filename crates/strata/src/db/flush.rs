// SPDX-License-Identifier: MIT OR Apache-2.0
//! Flushing: a memtable written to a level-0 (or deeper) table and installed, in the
//! background thread, during recovery, and on request (`compact_range` flushes first).
//!
//! A table is synced before the MANIFEST names it, and stays a pending output (safe from
//! obsolete-file deletion) until its edit is installed. The memtable's blob files are synced
//! before the table that points into them is installed.

use std::sync::Arc;
use std::time::Instant;

use super::background::{log_and_apply_unlocked, record_error, Guard};
use super::blobs::{may_supersede_blob_values, newest_older_pointer, superseded_blob_values};
use super::obsolete::delete_obsolete_files;
use super::open::info;
use super::write::{
    leave_front, make_room_for_write, wait_for_background, wait_for_turn, PendingWrite,
};
use super::{DbInner, DbState};
use crate::error::Result;
use crate::filename;
use crate::iter::InternalIterator;
use crate::key::MAX_SEQNO;
use crate::memtable::MemTable;
use crate::table::TableBuilder;
use crate::version::set::new_table_meta;
use crate::version::{FileMetaData, VersionEdit};

/// Writes the entries of `iter` to table `number` and syncs it. Returns `None` (and writes no
/// file) if there are none. The table is opened once through the table cache to check it.
pub(crate) fn build_table(
    inner: &DbInner,
    number: u64,
    iter: &mut dyn InternalIterator,
) -> Result<Option<FileMetaData>> {
    iter.seek_to_first();
    if !iter.valid() {
        iter.status()?;
        return Ok(None);
    }
    let path = filename::table_file(&inner.dir, number);
    let result = (|| {
        let file = inner.env.new_writable_file(&path)?;
        let mut builder = TableBuilder::new(inner.options.table_options(), file);
        let smallest = iter.key().to_vec();
        let mut largest = Vec::new();
        while iter.valid() {
            largest.clear();
            largest.extend_from_slice(iter.key());
            builder.add(iter.key(), iter.value())?;
            iter.next();
        }
        iter.status()?;
        let size = builder.finish(true)?;
        inner.table_cache.get(number, size)?;
        Ok(new_table_meta(number, size, smallest, largest))
    })();
    if result.is_err() {
        inner.table_cache.evict(number);
        let _ = inner.env.remove_file(&path);
    }
    result.map(Some)
}

/// Writes `mem` to a new level-0 table while holding the state mutex (used during recovery,
/// when nothing else runs), and adds it and the blob garbage it makes to `edit`, which holds
/// the tables recovery wrote before (not in the version yet).
pub(crate) fn write_level0_table(
    inner: &DbInner,
    state: &mut DbState,
    mem: &Arc<MemTable>,
    edit: &mut VersionEdit,
) -> Result<()> {
    let number = state.versions.new_file_number();
    let start = Instant::now();
    let meta = build_table(inner, number, &mut mem.iter())?;
    let base = state.versions.current();
    if may_supersede_blob_values(mem, &base) {
        let earlier: Vec<FileMetaData> = edit.new_files.iter().map(|(_, m)| m.clone()).collect();
        let garbage = superseded_blob_values(&inner.icmp, mem, 0..=MAX_SEQNO, |key| {
            newest_older_pointer(inner, None, &base, &earlier, key)
        })?;
        edit.blob_garbage.extend(garbage);
    }
    // The memtable's range deletions enter the version with its table (or without one, when
    // it held nothing else).
    edit.new_range_tombstones.extend(mem.range_tombstones());
    if let Some(m) = meta {
        (inner.counters).record_flush(0, Some(m.file_size), start.elapsed());
        info!(inner, "level-0 table {number}: {} bytes", m.file_size);
        // Its entries are newer than every range deletion of the version (a horizon is only
        // recorded where there is one: any mention of range deletions marks the MANIFEST).
        if !base.range_tombstones.is_empty() {
            edit.range_deletion_horizons
                .push((m.number, base.newest_range_tombstone()));
        }
        edit.new_files.push((0, m));
    }
    Ok(())
}

/// Flushes the immutable memtable to a table and installs it.
pub(crate) fn flush_memtable<'a>(inner: &'a Arc<DbInner>, mut state: Guard<'a>) -> Guard<'a> {
    let Some(imm) = state.imm.clone() else {
        return state;
    };
    let base = state.versions.current();
    let number = state.versions.new_file_number();
    state.pending_outputs.insert(number);
    drop(state);

    let start = Instant::now();
    // The memtable's blob files are synced before the table that points into them is
    // installed: a pointer in a table always reaches a durable value.
    let built = build_table(inner, number, &mut imm.iter()).and_then(|meta| {
        let blob_files = inner.sync_sealed_blob_files()?;
        // Blob garbage is counted here, when the entries that supersede pointers reach a
        // table (see `superseded_blob_values`), not when compaction drops the old entries:
        // that may be late, or never, and a snapshot held meanwhile would hide it.
        let garbage = if may_supersede_blob_values(&imm, &base) {
            superseded_blob_values(&inner.icmp, &imm, 0..=MAX_SEQNO, |key| {
                newest_older_pointer(inner, None, &base, &[], key)
            })?
        } else {
            Vec::new()
        };
        Ok((meta, blob_files, garbage))
    });
    let state = inner.lock_state();
    let mut edit = VersionEdit::default();
    let mut blob_numbers = Vec::new();
    // The level and size of the table written, for the statistics once it is installed.
    let mut flushed = (0, None);
    let prepared = built.map(|(meta, blob_files, garbage)| {
        for b in &blob_files {
            blob_numbers.push(b.number);
        }
        edit.new_blob_files = blob_files;
        edit.blob_garbage = garbage;
        // The memtable's range deletions enter the version with its table (or alone, when it
        // held nothing else); the table's entries are newer than every one already there.
        edit.new_range_tombstones = imm.range_tombstones();
        let mut level = 0;
        if let Some(meta) = meta {
            // While a compaction runs, its outputs may span gaps between its inputs, so a
            // table placed below level 0 could overlap them: flush to level 0 then.
            if !state.compacting {
                level = base.pick_level_for_memtable_output(
                    crate::key::user_key(&meta.smallest),
                    crate::key::user_key(&meta.largest),
                    inner.options.max_file_size as u64,
                );
            }
            flushed = (level, Some(meta.file_size));
            info!(
                inner,
                "flushed memtable to table {number} at level {level}: {} bytes", meta.file_size
            );
            if !base.range_tombstones.is_empty() {
                edit.range_deletion_horizons
                    .push((meta.number, base.newest_range_tombstone()));
            }
            edit.new_files.push((level, meta));
        }
        edit.log_number = Some(state.log_number);
        edit.prev_log_number = Some(0);
    });
    let (mut state, result) = match prepared {
        Ok(()) => log_and_apply_unlocked(inner, state, &mut edit),
        Err(e) => (state, Err(e)),
    };
    // The table stays a pending output until its edit is installed: while the MANIFEST is
    // written, a reader dropping an old version may delete obsolete files, and the table is
    // in no version yet.
    state.pending_outputs.remove(&number);
    match result {
        Ok(()) => {
            inner
                .counters
                .record_flush(flushed.0, flushed.1, start.elapsed());
            // Only a level-0 table keeps the filter: every get may look into each of them,
            // while a table placed deeper is one of many a get picks by range, and the
            // filters of all of them would be memory without bound (1/64 of the write
            // buffer per table).
            if let (0, Some(filter)) = (flushed.0, imm.key_filter()) {
                let table = state.versions.current_ref().files[0]
                    .iter()
                    .find(|f| f.number == number);
                if let Some(table) = table {
                    let _ = table.key_filter.set(filter.clone());
                }
            }
            // A cursor made before the flush may still read the memtable's pointers.
            if let Some(imm) = state.imm.take().filter(|m| m.holds_blob_pointers()) {
                let named = imm.blob_files();
                state.flushed_memtables.push((Arc::downgrade(&imm), named));
            }
            // The flushed part of the collector's estimate is counted for good now; the
            // collector estimates the rest again.
            state.blob_gc.flushes += 1;
            state.blob_gc.unflushed_garbage.clear();
            inner.blob_gc_work.notify_all();
            for n in &blob_numbers {
                state.pending_outputs.remove(n);
            }
            inner.release_sealed_blob_files(&blob_numbers);
            // The flushed memtable's log is obsolete: its writes are in a synced table.
            inner
                .log_sync_debt
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retired_log = None;
            inner.publish_view(&state);
            drop(base);
            delete_obsolete_files(inner, &mut state);
        }
        Err(e) => record_error(inner, &mut state, e),
    }
    state
}

/// Switches to a new memtable through the writer queue (so that no write is in flight into
/// the old one), then waits until it is flushed.
pub(crate) fn flush_now(inner: &Arc<DbInner>) -> Result<()> {
    let me = Arc::new(PendingWrite::marker());
    let Ok(state) = wait_for_turn(inner, &me) else {
        unreachable!("a marker is never taken into a group")
    };
    let empty = state.mem.is_empty();
    let (mut state, result) = if empty {
        (state, Ok(()))
    } else {
        make_room_for_write(inner, state, true)
    };
    leave_front(&mut state, 1, None);
    result?;
    while state.imm.is_some() {
        if let Some(e) = &state.bg_error {
            return Err(e.clone());
        }
        state = wait_for_background(inner, state);
    }
    Ok(())
}
