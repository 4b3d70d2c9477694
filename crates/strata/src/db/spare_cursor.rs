// SPDX-License-Identifier: MIT OR Apache-2.0
//! The spare cursor: the parts of the last cursor dropped on the current view, kept for the
//! next cursor to take instead of building its own.
//!
//! Building a cursor and dropping it costs about a sixth of a short range query (db_bench's
//! seekrandom makes one per seek, as LevelDB's does): a child per memtable and level, their
//! lists, the level's table cursor and its block buffers, and a dozen reference counts taken
//! and given back. A cursor dropped on the view that is still current leaves those parts
//! here; the next cursor made without a snapshot on a writable database takes them if the
//! view is still the same one (the children then read exactly what new ones would: the same
//! memtables and version; only the seqno is read anew).
//!
//! Ownership and locking: the slot holds at most one cursor's parts behind its own mutex,
//! taken with `try_lock` only (a cursor never waits for it: a busy slot means a fresh
//! cursor, or a dropped one freed as before). Parts kept here hold their view, so its
//! version's files stay live: [`DbInner::publish_view`](super::DbInner::publish_view) empties
//! the slot after it stores a new view (before the flush or compaction that published it
//! deletes obsolete files), and a cursor offers its parts only while holding the slot and
//! seeing its view current, so parts of an old view never stay in the slot past the next
//! publish.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::iter::ReadSampler;
use super::key_buf::KeyBuf;
use super::ReadView;
use crate::blob::BlobCache;
use crate::iter::MergingIter;
use crate::key::InternalKeyComparator;
use crate::table::BlockReadOptions;

/// What a dropped cursor leaves for the next one: everything but its position.
pub(crate) struct SpareCursor {
    /// The merge and its children, as the last cursor left them (the next cursor resets the
    /// merge and seeks before it reads, as every new cursor does).
    pub(crate) merged: MergingIter<InternalKeyComparator>,
    pub(crate) view: Arc<ReadView>,
    /// The options the children read with (a cursor asking for others builds its own).
    pub(crate) read: BlockReadOptions,
    pub(crate) blob_cache: Arc<BlobCache>,
    pub(crate) sampler: ReadSampler,
    /// Kept for their capacity (the next cursor clears them).
    pub(crate) saved_key: KeyBuf,
    pub(crate) saved_value: Vec<u8>,
}

/// The slot of a database's spare cursor (see the module's notes).
#[derive(Default)]
pub(crate) struct SpareCursorSlot {
    slot: Mutex<Option<SpareCursor>>,
}

impl SpareCursorSlot {
    /// The spare parts, if the slot is free, holds some, they were built on the current view
    /// (`current` is the database's `view_generation`) and read with `read`.
    pub(crate) fn take(&self, current: &AtomicU64, read: BlockReadOptions) -> Option<SpareCursor> {
        let mut slot = self.slot.try_lock().ok()?;
        let fits = slot.as_ref().is_some_and(|s| {
            s.read == read && s.view.generation == current.load(Ordering::Acquire)
        });
        if fits {
            slot.take()
        } else {
            None
        }
    }

    /// Keeps `spare` if the slot is free and `spare`'s view is the current one (`current` is
    /// the database's `view_generation`); gives it back otherwise (`Some`), for the caller to
    /// drop as a cursor's parts are dropped. Parts the slot held before are dropped after the
    /// slot is unlocked.
    pub(crate) fn offer(&self, spare: SpareCursor, current: &AtomicU64) -> Option<SpareCursor> {
        let Ok(mut slot) = self.slot.try_lock() else {
            return Some(spare);
        };
        // Checked under the slot's lock: `publish_view` stores its generation before it empties
        // the slot, so parts that pass here are either current or emptied by that publish.
        if spare.view.generation != current.load(Ordering::Acquire) {
            return Some(spare);
        }
        let before = slot.replace(spare);
        drop(slot);
        drop(before);
        None
    }

    /// Drops the spare parts, if any (a new view was published: they hold the old one).
    pub(crate) fn clear(&self) {
        let before = match self.slot.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(before);
    }

    /// True if the slot holds parts (for tests).
    #[cfg(test)]
    pub(crate) fn is_full(&self) -> bool {
        self.slot.lock().map(|s| s.is_some()).unwrap_or(false)
    }
}
