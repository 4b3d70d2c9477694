// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`TableIndex`]: a table's index as an open table holds it, and [`IndexCursor`], a cursor
//! over it.
//!
//! A table whose comparator is bytewise and whose data blocks lie back to back keeps its
//! index as [`IndexKeys`]: the index entries' keys, their common prefix stored once, and the
//! fences over them. The entries' values (block handles and chunk maps) are not kept here:
//! the table keeps them decoded, in its block offsets and chunk starts, by position. That
//! is about 17 bytes an entry for db_bench's keys where the decompressed index block took
//! 41 (its keys whole, a restart offset each, the encoded handles), on top of the 16 of the
//! fences and decoded arrays (docs/benchmarks.md, section (40)). Any other table keeps its
//! index block ([`TableIndex::Block`]), searched and walked as any block.

use std::cmp::Ordering;
use std::sync::Arc;

use super::block::{Block, BlockIter, RestartFences};
use crate::comparator::{common_prefix_len, Comparator};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::TAG_LEN;

/// The bit of an [`IndexKeys`] end that marks a key stored whole, without the prefix.
const WHOLE: u32 = 1 << 31;

/// The keys of a table's index entries, in index order, with the fences over them.
///
/// Invariants: `ends.len()` is the number of entries, `fences` was built over the same keys
/// (each a restart of the index block, `fences.every_entry()`); entry `i`'s stored bytes are
/// `bytes[start(i)..ends[i] & !WHOLE]`, where `start(i)` is the previous entry's end (0 for
/// the first); its key is `prefix` followed by them, or them alone when `ends[i]` has
/// [`WHOLE`]. Every key is an internal key (at least [`TAG_LEN`] bytes), and `prefix` is no
/// longer than any user key stored after it, so each stored part holds its key's whole tag.
pub(crate) struct IndexKeys {
    fences: RestartFences,
    prefix: Box<[u8]>,
    bytes: Box<[u8]>,
    ends: Box<[u32]>,
}

impl std::fmt::Debug for IndexKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexKeys")
            .field("entries", &self.ends.len())
            .field("prefix_len", &self.prefix.len())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl IndexKeys {
    /// The keys of `block`, a bytewise table's index block with fences over every entry,
    /// taking those fences out of it (they are not built twice); `None`, the block left as it
    /// was, if it has no such fences, a key is shorter than a tag, or the keys would not fit
    /// the 31-bit ends.
    pub(crate) fn from_block(block: &mut Block) -> Option<IndexKeys> {
        let (prefix, bytes, ends) = Self::store(&block.every_entry_keys()?)?;
        let fences = block.take_fences()?;
        Some(IndexKeys {
            fences,
            prefix,
            bytes,
            ends,
        })
    }

    /// The prefix, stored bytes and ends of `keys` (an index block's, in order, each an
    /// internal key), as the fields of that name hold them.
    #[allow(clippy::type_complexity)]
    fn store(keys: &[&[u8]]) -> Option<(Box<[u8]>, Box<[u8]>, Box<[u32]>)> {
        if keys.iter().any(|k| k.len() < TAG_LEN) {
            return None;
        }
        let user = |k: &[u8]| -> usize { k.len() - TAG_LEN };
        // The prefix every key but the last shares (the last is often a short successor
        // that shares nothing), within every one of those keys' user keys.
        let body = &keys[..keys.len().saturating_sub(1)];
        let prefix_len = match body.first() {
            None => 0,
            Some(first) => body.iter().fold(user(first), |len, k| {
                len.min(common_prefix_len(&first[..len], &k[..user(k)]))
            }),
        };
        let prefix: Box<[u8]> = body.first().map_or(&[][..], |k| &k[..prefix_len]).into();
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(keys.len());
        for key in keys {
            let shares = user(key) >= prefix.len() && key.starts_with(&prefix);
            let stored = if shares { &key[prefix.len()..] } else { key };
            bytes.extend_from_slice(stored);
            let end = u32::try_from(bytes.len()).ok().filter(|&e| e < WHOLE)?;
            ends.push(if shares { end } else { end | WHOLE });
        }
        Some((prefix, bytes.into_boxed_slice(), ends.into_boxed_slice()))
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Entry `i`'s key in two parts, the prefix (or nothing) and the bytes stored for it.
    /// Requires: `i < self.len()`.
    #[inline]
    fn parts(&self, i: usize) -> (&[u8], &[u8]) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] & !WHOLE } as usize;
        let end = self.ends[i];
        let stored = &self.bytes[start..(end & !WHOLE) as usize];
        if end & WHOLE != 0 {
            (&[], stored)
        } else {
            (&self.prefix, stored)
        }
    }

    /// Writes entry `i`'s key into `out`. Requires: `i < self.len()`.
    #[inline]
    fn key_into(&self, i: usize, out: &mut Vec<u8>) {
        let (prefix, stored) = self.parts(i);
        out.clear();
        out.extend_from_slice(prefix);
        out.extend_from_slice(stored);
    }

    /// How entry `i`'s key compares with the internal key `target`, in the internal-key order
    /// over bytewise user keys: user keys as bytes, then tags descending.
    fn compare(&self, i: usize, target: &[u8]) -> Ordering {
        let (prefix, stored) = self.parts(i);
        let (stored_user, tag) = stored.split_at(stored.len() - TAG_LEN);
        let split = target.len().saturating_sub(TAG_LEN);
        let (target_user, target_tag) = target.split_at(split);
        let users = match target_user.split_at_checked(prefix.len()) {
            Some((head, rest)) => prefix.cmp(head).then_with(|| stored_user.cmp(rest)),
            // The target's user key is shorter than the prefix: compare over its bytes.
            None => prefix[..target_user.len()]
                .cmp(target_user)
                .then(Ordering::Greater),
        };
        users.then_with(|| {
            let tag_of = |t: &[u8]| t.try_into().map_or(0, u64::from_le_bytes);
            tag_of(target_tag).cmp(&tag_of(tag))
        })
    }

    /// The position of the first entry at or after `target` (`len()` if none is): the
    /// fences narrow it, and only the entries whose windows tie with the target's are
    /// compared.
    #[inline]
    pub(crate) fn position(&self, target: &[u8]) -> usize {
        let (left, right) = self.fences.narrow(target);
        // Entry `left` is before `target` unless it is 0; entry `right + 1`, if there is one,
        // is not before it: the answer is in `lo..=hi`.
        let mut lo = if left > 0 { left + 1 } else { 0 };
        let mut hi = (right + 1).min(self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.compare(mid, target) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Asks the CPU to fetch the first line of entry `position`'s stored bytes.
    #[inline]
    pub(crate) fn prefetch_entry(&self, position: usize) {
        if position < self.len() {
            let (_, stored) = self.parts(position);
            crate::iter::prefetch_line(stored.as_ptr() as usize);
        }
    }

    /// The heap bytes held: the fences, the prefix, the keys' bytes and their ends.
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        self.fences.heap_bytes() + self.prefix.len() + self.bytes.len() + 4 * self.ends.len()
    }
}

/// A table's index as the open table holds it.
#[derive(Debug, Clone)]
pub(crate) enum TableIndex {
    /// The index block, decompressed: for a table whose lookups need its entries' values
    /// (its data blocks' handles are not kept apart), or whose comparator is not bytewise.
    Block(Arc<Block>),
    /// The index entries' keys; their handles and chunk starts are the table's kept arrays.
    Keys(Arc<IndexKeys>),
}

impl TableIndex {
    /// A cursor over the index, unpositioned.
    pub(crate) fn cursor(&self, comparator: &Arc<dyn Comparator>) -> IndexCursor {
        match self {
            TableIndex::Block(block) => IndexCursor::Block(block.iter(comparator.clone())),
            TableIndex::Keys(keys) => IndexCursor::Keys(KeysCursor::new(keys.clone())),
        }
    }

    /// The position of the first index entry at or after `target`, found without a cursor,
    /// as [`Block::entry_at_or_after`]; `None` when the index cannot say (a block without
    /// fences over every entry).
    #[inline]
    pub(crate) fn entry_at_or_after<C>(&self, comparator: &C, target: &[u8]) -> Option<Result<usize>>
    where
        C: Comparator + ?Sized,
    {
        match self {
            TableIndex::Block(block) => block.entry_at_or_after(comparator, target),
            TableIndex::Keys(keys) => Some(Ok(keys.position(target))),
        }
    }

    /// Asks the CPU to fetch entry `position`, for a cursor that will read it after other
    /// work.
    #[inline]
    pub(crate) fn prefetch_entry(&self, position: usize) {
        match self {
            TableIndex::Block(block) => block.prefetch_entry(position),
            TableIndex::Keys(keys) => keys.prefetch_entry(position),
        }
    }
}

/// A cursor over an [`IndexKeys`]: its key is the entry's, rebuilt in the cursor's buffer at
/// each move; its value is empty (the table finds the handle by [`position`](Self::position)).
pub(crate) struct KeysCursor {
    keys: Arc<IndexKeys>,
    /// The entry the cursor is on; `keys.len()` when it is on none.
    position: usize,
    key: Vec<u8>,
}

impl KeysCursor {
    fn new(keys: Arc<IndexKeys>) -> Self {
        let position = keys.len();
        KeysCursor {
            keys,
            position,
            key: Vec::new(),
        }
    }

    /// Puts the cursor on entry `position`, or on none past the last.
    #[inline]
    fn go_to(&mut self, position: usize) {
        self.position = position.min(self.keys.len());
        if self.position < self.keys.len() {
            self.keys.key_into(self.position, &mut self.key);
        }
    }
}

impl InternalIterator for KeysCursor {
    #[inline]
    fn valid(&self) -> bool {
        self.position < self.keys.len()
    }
    fn seek_to_first(&mut self) {
        self.go_to(0);
    }
    fn seek_to_last(&mut self) {
        self.go_to(self.keys.len().checked_sub(1).unwrap_or(self.keys.len()));
    }
    fn seek(&mut self, target: &[u8]) {
        let position = self.keys.position(target);
        self.go_to(position);
    }
    #[inline]
    fn next(&mut self) {
        self.go_to(self.position + 1);
    }
    #[inline]
    fn prev(&mut self) {
        self.go_to(self.position.checked_sub(1).unwrap_or(self.keys.len()));
    }
    #[inline]
    fn key(&self) -> &[u8] {
        &self.key
    }
    #[inline]
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// A cursor over a [`TableIndex`], of the index's kind.
///
/// As large as a block's cursor, which a table cursor held inline before the keys' form
/// existed: boxed, a cursor over a table that keeps its index block (a custom comparator, a
/// table past 4 GiB) would allocate once more when it is made.
#[allow(clippy::large_enum_variant)]
pub(crate) enum IndexCursor {
    Block(BlockIter),
    Keys(KeysCursor),
}

impl IndexCursor {
    /// The entry the cursor is on, for a cursor over [`IndexKeys`]; `None` for a block's
    /// cursor (whose value holds the handle) or when it is on no entry.
    #[inline]
    pub(crate) fn position(&self) -> Option<usize> {
        match self {
            IndexCursor::Keys(cursor) => cursor.valid().then_some(cursor.position),
            IndexCursor::Block(_) => None,
        }
    }

    /// Puts the cursor on entry `position` (as [`TableIndex::entry_at_or_after`] numbers
    /// them), or on none past the last.
    #[inline]
    pub(crate) fn seek_to_entry(&mut self, position: usize) {
        match self {
            IndexCursor::Block(cursor) => cursor.seek_to_entry(position),
            IndexCursor::Keys(cursor) => cursor.go_to(position),
        }
    }

    /// Points the cursor at `index`, unpositioned, keeping its buffers where the kinds agree.
    pub(crate) fn retarget(&mut self, index: &TableIndex, comparator: &Arc<dyn Comparator>) {
        match (&mut *self, index) {
            (IndexCursor::Block(cursor), TableIndex::Block(block)) => cursor.retarget(block.clone()),
            (IndexCursor::Keys(cursor), TableIndex::Keys(keys)) => {
                cursor.keys = keys.clone();
                cursor.position = keys.len();
            }
            _ => *self = index.cursor(comparator),
        }
    }
}

impl InternalIterator for IndexCursor {
    #[inline]
    fn valid(&self) -> bool {
        match self {
            IndexCursor::Block(c) => c.valid(),
            IndexCursor::Keys(c) => c.valid(),
        }
    }
    fn seek_to_first(&mut self) {
        match self {
            IndexCursor::Block(c) => c.seek_to_first(),
            IndexCursor::Keys(c) => c.seek_to_first(),
        }
    }
    fn seek_to_last(&mut self) {
        match self {
            IndexCursor::Block(c) => c.seek_to_last(),
            IndexCursor::Keys(c) => c.seek_to_last(),
        }
    }
    fn seek(&mut self, target: &[u8]) {
        match self {
            IndexCursor::Block(c) => c.seek(target),
            IndexCursor::Keys(c) => c.seek(target),
        }
    }
    #[inline]
    fn next(&mut self) {
        match self {
            IndexCursor::Block(c) => c.next(),
            IndexCursor::Keys(c) => c.next(),
        }
    }
    #[inline]
    fn prev(&mut self) {
        match self {
            IndexCursor::Block(c) => c.prev(),
            IndexCursor::Keys(c) => c.prev(),
        }
    }
    #[inline]
    fn key(&self) -> &[u8] {
        match self {
            IndexCursor::Block(c) => c.key(),
            IndexCursor::Keys(c) => c.key(),
        }
    }
    #[inline]
    fn value(&self) -> &[u8] {
        match self {
            IndexCursor::Block(c) => c.value(),
            IndexCursor::Keys(c) => c.value(),
        }
    }
    fn status(&self) -> Result<()> {
        match self {
            IndexCursor::Block(c) => c.status(),
            IndexCursor::Keys(c) => c.status(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;
    use crate::comparator::bytewise;
    use crate::iter::contract::check_against_model;
    use crate::key::{append_internal_key, InternalKeyComparator, ValueKind};
    use crate::table::block_builder::BlockBuilder;

    /// An index block over `keys` (internal keys, in order), its values the position in eight
    /// digits (a block handle and chunk map take about as much), with fences, as a bytewise
    /// table holds it at open.
    fn index_block(keys: &[Vec<u8>]) -> Block {
        let mut b = BlockBuilder::new(1);
        for (i, k) in keys.iter().enumerate() {
            b.add(k, format!("{i:08}").as_bytes());
        }
        Block::new(b.finish().to_vec(), Arc::from(Path::new("/db/000007.ldb")), 0)
            .unwrap()
            .with_fences()
    }

    /// The keys form of `keys`' index block.
    fn index_keys(keys: &[Vec<u8>]) -> IndexKeys {
        IndexKeys::from_block(&mut index_block(keys)).unwrap()
    }

    fn ikey(user: &[u8], seq: u64) -> Vec<u8> {
        let mut k = Vec::new();
        append_internal_key(&mut k, user, seq, ValueKind::Value);
        k
    }

    /// Index keys like a table's: sorted user keys with a long shared prefix, some user keys
    /// repeated under falling sequence numbers (ties on the windows and on the user keys),
    /// some a prefix of the next, and a short last key that shares nothing.
    fn table_like_keys(users: &[Vec<u8>], last_short: bool) -> Vec<Vec<u8>> {
        let mut users: Vec<Vec<u8>> = users.to_vec();
        users.sort();
        let mut keys = Vec::new();
        let mut seq = 1_000_000;
        for (i, u) in users.iter().enumerate() {
            seq -= 1 + (i as u64 % 3);
            keys.push(ikey(u, seq));
        }
        if last_short {
            if let Some(max) = users.last() {
                keys.push(ikey(&[max.first().map_or(1, |b| b.saturating_add(1))], 5));
            }
        }
        let icmp = InternalKeyComparator::new(bytewise());
        keys.sort_by(|a, b| icmp.compare(a, b));
        keys.dedup();
        keys
    }

    fn probes(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut probes = vec![ikey(b"", u64::MAX >> 8), ikey(&[0xff; 40], 0)];
        for k in keys {
            let user = &k[..k.len() - TAG_LEN];
            let tag = u64::from_le_bytes(k[k.len() - TAG_LEN..].try_into().unwrap()) >> 8;
            probes.push(k.clone());
            probes.push(ikey(user, tag + 1));
            probes.push(ikey(user, tag.saturating_sub(1)));
            probes.push(ikey(&user[..user.len() / 2], 7));
            let mut longer = user.to_vec();
            longer.push(0);
            probes.push(ikey(&longer, 7));
        }
        probes
    }

    /// The keys' positions agree with the index block's own search, and the cursor walks,
    /// seeks and turns as a cursor over the same keys must.
    fn check(keys: &[Vec<u8>]) {
        let block = index_block(keys);
        let kept = Arc::new(index_keys(keys));
        let icmp = InternalKeyComparator::new(bytewise());
        for probe in probes(keys) {
            let expected = block.entry_at_or_after(&icmp, &probe).unwrap().unwrap();
            assert_eq!(kept.position(&probe), expected, "probe {probe:?}");
            let plain = keys.partition_point(|k| icmp.compare(k, &probe) == Ordering::Less);
            assert_eq!(expected, plain);
        }
        let model: Vec<(Vec<u8>, Vec<u8>)> = keys.iter().map(|k| (k.clone(), Vec::new())).collect();
        let mut cursor = TableIndex::Keys(kept.clone()).cursor(&(Arc::new(icmp.clone()) as _));
        check_against_model(&mut cursor, &model, &icmp, &probes(keys));
        for (i, k) in keys.iter().enumerate() {
            cursor.seek_to_entry(i);
            assert_eq!((cursor.key(), cursor.position()), (&k[..], Some(i)));
        }
        cursor.seek_to_entry(keys.len());
        assert!(!cursor.valid() && cursor.position().is_none());
    }

    #[test]
    fn db_bench_like_keys_keep_their_prefix_once() {
        let users: Vec<Vec<u8>> = (0..700)
            .map(|i| format!("{:016}", i * 35 + 34).into_bytes())
            .collect();
        let keys = table_like_keys(&users, true);
        check(&keys);
        let block = index_block(&keys);
        let kept = index_keys(&keys);
        // The largest key, 24,534, has five digits.
        assert_eq!(&kept.prefix[..], b"00000000000");
        // 5 bytes after the prefix and the tag; the short last key whole.
        assert_eq!(kept.bytes.len(), 700 * (5 + TAG_LEN) + 1 + TAG_LEN);
        // With the fences in both: 25 bytes an entry against 47.
        assert!(kept.heap_bytes() * 10 < block.charge() * 6);
    }

    #[test]
    fn one_and_two_entries() {
        check(&[ikey(b"only", 9)]);
        check(&[ikey(b"a", 9), ikey(b"b", 3)]);
        check(&[ikey(b"same", 9), ikey(b"same", 3)]);
        check(&[ikey(b"", 9), ikey(b"x", 3)]);
    }

    #[test]
    fn a_cursor_retargeted_reads_its_new_index() {
        let a = table_like_keys(&[b"apple".to_vec(), b"apricot".to_vec()], false);
        let b = table_like_keys(&[b"banana".to_vec(), b"blueberry".to_vec(), b"cherry".to_vec()], true);
        let (ka, kb) = (index_keys(&a), index_keys(&b));
        let cmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(bytewise()));
        let mut cursor = TableIndex::Keys(Arc::new(ka)).cursor(&cmp);
        cursor.seek_to_last();
        assert_eq!(cursor.key(), &a[1][..]);
        cursor.retarget(&TableIndex::Keys(Arc::new(kb)), &cmp);
        assert!(!cursor.valid());
        cursor.seek_to_first();
        let mut seen = Vec::new();
        while cursor.valid() {
            seen.push(cursor.key().to_vec());
            cursor.next();
        }
        assert_eq!(seen, b);
        // Retargeted to a block, it becomes the block's cursor.
        cursor.retarget(&TableIndex::Block(Arc::new(index_block(&a))), &cmp);
        cursor.seek_to_first();
        assert_eq!((cursor.key(), cursor.value(), cursor.position()), (&a[0][..], &b"00000000"[..], None));
    }

    proptest! {
        #[test]
        fn positions_and_walks_agree_with_the_index_block(
            users in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(b'k'), Just(0u8), Just(0xffu8), any::<u8>()], 0..14),
                1..60,
            ),
            shared in proptest::collection::vec(any::<u8>(), 0..12),
            last_short in any::<bool>(),
        ) {
            let users: Vec<Vec<u8>> = users
                .into_iter()
                .map(|tail| [shared.clone(), tail].concat())
                .collect();
            check(&table_like_keys(&users, last_short));
        }
    }
}
