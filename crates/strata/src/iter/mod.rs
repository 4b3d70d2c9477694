// SPDX-License-Identifier: MIT OR Apache-2.0
//! The cursor contract every internal iterator follows (blocks, tables, and later memtables,
//! levels and merges).

mod merging;
mod read_ahead;
mod two_level;
#[cfg(test)]
mod vec_iter;

pub(crate) use merging::{BackLane, MergingIter};
pub(crate) use read_ahead::prefetch_line;
pub(crate) use two_level::{SecondLevel, TwoLevelIter};
#[cfg(test)]
pub(crate) use vec_iter::VecIter;

use crate::error::Result;
use crate::table::BlockIter;

/// A boxed cursor that can move between threads, as database iterators do.
pub(crate) type BoxedIter = Box<dyn InternalIterator + Send>;

/// How many children a merge keeps without allocating a list: a cursor's memtables and a
/// level or two (a database cursor's usual count); more spill to the heap.
pub(crate) const INLINE_CHILDREN: usize = 4;

/// A merge's children, kept inline up to [`INLINE_CHILDREN`].
pub(crate) type Children = smallvec::SmallVec<[BoxedIter; INLINE_CHILDREN]>;

/// A cursor over sorted key-value entries.
///
/// Contract:
/// 1. A new cursor is not positioned: `valid()` is false until a seek.
/// 2. `seek(target)` positions at the first entry whose key is `>= target`, or makes the
///    cursor invalid if there is none.
/// 3. `next` and `prev` require `valid()`. Moving past either end makes the cursor invalid.
/// 4. `key` and `value` require `valid()`; the slices they return stay valid until the cursor
///    moves.
/// 5. When the cursor meets an error (corruption, I/O), it becomes invalid and `status`
///    returns the error from then on. An invalid cursor with an `Ok` status has simply run out
///    of entries.
pub trait InternalIterator {
    /// True if the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self);
    /// Moves to the last entry.
    fn seek_to_last(&mut self);
    /// Moves to the first entry with key `>= target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry.
    fn next(&mut self);
    /// Moves to the previous entry.
    fn prev(&mut self);
    /// The current key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;

    /// `next`, then the entry the cursor landed on, or `None` if it ran out or failed (see
    /// `status`). One call where a merge would make four: a scan's per-entry path.
    #[inline]
    fn next_entry(&mut self) -> Option<(&[u8], &[u8])> {
        self.next();
        self.entry()
    }

    /// `prev`, then the entry the cursor landed on, as [`next_entry`](Self::next_entry).
    #[inline]
    fn prev_entry(&mut self) -> Option<(&[u8], &[u8])> {
        self.prev();
        self.entry()
    }

    /// The current key and value, or `None` if the cursor is not on an entry.
    #[inline]
    fn entry(&self) -> Option<(&[u8], &[u8])> {
        if self.valid() {
            Some((self.key(), self.value()))
        } else {
            None
        }
    }

    /// True if [`seek_passes`](Self::seek_passes) can ever answer true, so that a merge may
    /// put off seeking this cursor until it knows where the other cursors landed. Default:
    /// false.
    fn may_pass_seeks(&self) -> bool {
        false
    }

    /// True if `seek(target)` would certainly land on an entry after `key` (a key at or after
    /// `target` that another cursor holds), or on none: the cursor has no entry in
    /// `[target, key]`. Then a seek to `key` lands where one to `target` would. A merge whose
    /// smallest entry after a seek is `key` leaves such a cursor unpositioned until it moves.
    /// Must not move the cursor; it may be called on one that is not positioned. Default:
    /// false (the cursor cannot tell without seeking).
    ///
    /// A memtable answers from its key filter, which may miss entries written after the
    /// reader loaded its sequence number: its answer holds for targets carrying that sequence
    /// number (or an older one), as a database cursor's seeks do, since the missed entries
    /// then sort before the target. A seek with a newer sequence number must not rely on it.
    fn seek_passes(&self, target: &[u8], key: &[u8]) -> bool {
        let _ = (target, key);
        false
    }

    /// For a cursor on an entry of a table's data block: that block's cursor, for a caller
    /// about to step within the block directly ([`BlockLane`]). The cursor counts the call as
    /// `steps` of its own steps (its read-ahead moves on that far). Default: `None`, as for every cursor
    /// that does not read data blocks, or is not on an entry.
    fn block_lane(&mut self, steps: usize) -> Option<BlockLane<'_>> {
        let _ = steps;
        None
    }
}

/// The data block cursor a cursor is on ([`InternalIterator::block_lane`]), and a key at or
/// after each entry of its block (the block's index separator). While only the block cursor
/// moves, and only within its block, the outer cursor stays consistent: it is on the entry the
/// block cursor is on.
pub struct BlockLane<'a> {
    pub(crate) cursor: &'a mut BlockIter,
    pub(crate) bound: &'a [u8],
}

#[cfg(test)]
pub(crate) mod contract;
