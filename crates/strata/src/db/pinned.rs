// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`PinnedValue`]: a value [`Db::get_pinned`](super::Db::get_pinned) hands out without
//! copying it when it can.

use std::ops::Deref;
use std::sync::Arc;

use crate::table::BlockSlice;

/// A value read by [`Db::get_pinned`](super::Db::get_pinned). It dereferences to the value's
/// bytes.
///
/// A value found in a table is not copied: it borrows the data block that holds it, which
/// stays in memory while the `PinnedValue` lives, even once the block cache has dropped it
/// (holding many pinned values holds their blocks, about 4 KiB each). A value found in a
/// memtable or a blob file is a copy the `PinnedValue` owns.
#[derive(Clone, PartialEq, Eq)]
pub struct PinnedValue(Pinned);

#[derive(Clone, PartialEq, Eq)]
enum Pinned {
    Block(BlockSlice),
    Owned(Vec<u8>),
    /// Shared with the row cache.
    Shared(Arc<[u8]>),
}

impl PinnedValue {
    pub(crate) fn in_block(slice: BlockSlice) -> Self {
        PinnedValue(Pinned::Block(slice))
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
