// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`PinnedValue`]: a value [`Db::get_pinned`](super::Db::get_pinned) hands out without
//! copying it when it can.
//!
//! The one unsafe part: a value found in a memtable is a pointer into the memtable's arena,
//! kept valid by the `Arc<MemTable>` beside it (the arena frees its blocks only when the
//! memtable drops, and never moves or rewrites bytes once a write published them).

#![allow(unsafe_code)]

use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::memtable::MemTable;
use crate::table::BlockSlice;

/// A value read by [`Db::get_pinned`](super::Db::get_pinned). It dereferences to the value's
/// bytes.
///
/// A value found in a table is not copied: it borrows the data block that holds it, which
/// stays in memory while the `PinnedValue` lives, even once the block cache has dropped it
/// (holding many pinned values holds their blocks, about 4 KiB each). The exception is a
/// block stored uncompressed in a mapped table, which is read in place from the file: its
/// value is copied, so that a `PinnedValue` never holds a table file open. A value found in a
/// memtable is not copied either: it holds the memtable (up to `Options::write_buffer_size`)
/// in memory while it lives. A value found in a blob file is a copy the `PinnedValue` owns.
/// Two pinned values are equal when their bytes are.
#[derive(Clone)]
pub struct PinnedValue(Pinned);

#[derive(Clone)]
enum Pinned {
    Block(BlockSlice),
    Memtable(MemtableSlice),
    Owned(Vec<u8>),
    /// Shared with the row cache.
    Shared(Arc<[u8]>),
}

/// A value in a memtable's arena. Invariant: `start..start + len` lies in the arena of
/// `_table`, whose bytes there never change while `_table` lives.
#[derive(Clone)]
struct MemtableSlice {
    _table: Arc<MemTable>,
    start: NonNull<u8>,
    len: usize,
}

// SAFETY: the slice is immutable bytes owned by the memtable it holds (`MemTable` is Send and
// Sync); the pointer ties it to no thread.
unsafe impl Send for MemtableSlice {}
// SAFETY: as above: shared references only read immutable bytes.
unsafe impl Sync for MemtableSlice {}

impl MemtableSlice {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the type's invariant: the range lies in `_table`'s arena, which stays
        // allocated and unchanged while `self` holds `_table`.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
}

impl PinnedValue {
    /// Requires: `slice` does not hold a table file (not [`BlockSlice::holds_file`]): a value
    /// the caller may keep for long must not keep a table compaction deleted open.
    pub(crate) fn in_block(slice: BlockSlice) -> Self {
        debug_assert!(!slice.holds_file());
        PinnedValue(Pinned::Block(slice))
    }

    /// A value found in `table`.
    ///
    /// # Safety
    ///
    /// `value` borrows from `table`'s arena (it was returned by a lookup in `table`).
    pub(crate) unsafe fn in_memtable(table: &Arc<MemTable>, value: &[u8]) -> Self {
        PinnedValue(Pinned::Memtable(MemtableSlice {
            _table: table.clone(),
            start: NonNull::from(value).cast(),
            len: value.len(),
        }))
    }

    pub(crate) fn owned(value: Vec<u8>) -> Self {
        PinnedValue(Pinned::Owned(value))
    }

    pub(crate) fn shared(value: Arc<[u8]>) -> Self {
        PinnedValue(Pinned::Shared(value))
    }

    /// True if the value borrows a table's block (it was not copied).
    pub fn is_pinned_in_block(&self) -> bool {
        matches!(self.0, Pinned::Block(_))
    }

    /// The value as a `Vec`: a copy if it borrows a block, the value itself if it owns it.
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Pinned::Block(slice) => slice.to_vec(),
            Pinned::Memtable(slice) => slice.bytes().to_vec(),
            Pinned::Owned(value) => value,
            Pinned::Shared(value) => value.to_vec(),
        }
    }
}

impl Deref for PinnedValue {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Pinned::Block(slice) => slice,
            Pinned::Memtable(slice) => slice.bytes(),
            Pinned::Owned(value) => value,
            Pinned::Shared(value) => value,
        }
    }
}

impl AsRef<[u8]> for PinnedValue {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for PinnedValue {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for PinnedValue {}

impl PartialEq<[u8]> for PinnedValue {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl std::fmt::Debug for PinnedValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedValue")
            .field("len", &self.len())
            .field("pinned_in_block", &self.is_pinned_in_block())
            .finish()
    }
}
