// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`MemTable`]: the in-memory sorted buffer of recent writes, before they are flushed to a
//! level-0 table.
//!
//! Entries are internal keys (user key, seqno, kind) with their values, kept in a [`SkipList`]
//! in an arena. Writes are serialized by the database's write path (and, defensively, by the
//! skiplist's writer mutex); reads and iterators take no lock.

mod arena;
pub(crate) mod key_filter;
mod skiplist;
mod sync;

#[cfg(all(test, loom))]
pub(crate) use skiplist::loom_model;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;

use crate::blob::BlobPointer;
use crate::range_del::{Fragments, RangeTombstone};

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{
    pack_tag, user_key, with_seek_key, InternalKeyComparator, ParsedInternalKey, SeqNo, ValueKind,
};
use key_filter::KeyFilter;
use skiplist::{Cursor, ListOwner, SkipList};

/// What a memtable knows about a user key at a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemLookup<'a> {
    /// The newest visible entry sets the key to this value.
    Value(&'a [u8]),
    /// The newest visible entry sets the key to a value kept in a blob file; this is the
    /// encoded [`BlobPointer`](crate::blob::BlobPointer).
    BlobPointer(&'a [u8]),
    /// The newest visible entry deletes the key.
    Deleted,
}

/// A memtable.
pub(crate) struct MemTable {
    list: SkipList,
    comparator: InternalKeyComparator,
    /// Set once a batch holding a blob pointer was added. Read after the memtable became
    /// immutable (its writes happened before, through the state mutex), so `Relaxed` suffices.
    holds_blob_pointers: AtomicBool,
    /// The blob files the pointers added name, each once. Only batches holding pointers (of
    /// large values) take this lock, never a read.
    blob_files: Mutex<Vec<u64>>,
    /// The user keys added, for point lookups to skip the skiplist when a key is not here.
    /// `None` for a non-bytewise comparator, and where no lookups are made (repair). Shared
    /// with the level-0 table the memtable is flushed to ([`MemTable::key_filter`]).
    key_filter: Option<Arc<KeyFilter>>,
    /// The range deletions added, in seqno order. Only `add_batch` (the writer's turn) and a
    /// flush take the lock, never a read.
    range_tombstones: Mutex<Vec<RangeTombstone>>,
    /// `range_tombstones` cut into fragments for lookups: replaced whole by each batch that
    /// adds one, before the batch's seqnos are published; `None` until then.
    range_fragments: ArcSwapOption<Fragments>,
    /// Set with the first range deletion, so that a lookup in a memtable with none (nearly
    /// all) costs one load. Ordered for readers as the entries are, by the publication of
    /// the visible seqno.
    holds_range_tombstones: AtomicBool,
}

impl MemTable {
    /// A memtable without a key filter: every lookup searches the skiplist.
    pub(crate) fn new(comparator: InternalKeyComparator) -> Self {
        MemTable {
            list: SkipList::new(comparator.clone()),
            comparator,
            holds_blob_pointers: AtomicBool::new(false),
            blob_files: Mutex::new(Vec::new()),
            key_filter: None,
            range_tombstones: Mutex::new(Vec::new()),
            range_fragments: ArcSwapOption::empty(),
            holds_range_tombstones: AtomicBool::new(false),
        }
    }

    /// A memtable of about `write_buffer_size` bytes for a database's reads and writes: with a
    /// key filter when the comparator is bytewise (see [`KeyFilter`]).
    pub(crate) fn for_database(
        comparator: InternalKeyComparator,
        write_buffer_size: usize,
    ) -> Self {
        let key_filter = comparator
            .user_comparator()
            .is_bytewise()
            .then(|| Arc::new(KeyFilter::for_write_buffer(write_buffer_size)));
        MemTable {
            key_filter,
            ..MemTable::new(comparator)
        }
    }

    /// The filter of the user keys added, if the memtable keeps one. Once the memtable is
    /// immutable it names every user key the memtable holds, and so every user key of the
    /// table it is flushed to.
    pub(crate) fn key_filter(&self) -> Option<&Arc<KeyFilter>> {
        self.key_filter.as_ref()
    }

    #[cfg(test)]
    /// Adds an entry. `seqno` must not have been used in this memtable before.
    pub(crate) fn add(&self, seqno: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        if kind == ValueKind::BlobPointer {
            self.holds_blob_pointers.store(true, Ordering::Relaxed);
            self.note_blob_file(value);
        }
        if let Some(filter) = &self.key_filter {
            filter.insert(user_key);
        }
        self.list.insert(user_key, pack_tag(seqno, kind), value);
    }

    /// Adds every operation of `batch` at its seqnos, under one acquisition of the writer lock.
    pub(crate) fn add_batch(&self, batch: &crate::batch::WriteBatch) {
        if batch.has_blob_pointers() {
            self.holds_blob_pointers.store(true, Ordering::Relaxed);
            for op in batch.iter().filter(|op| op.kind == ValueKind::BlobPointer) {
                self.note_blob_file(op.value);
            }
        }
        if batch.has_range_deletions() {
            self.add_range_tombstones(batch);
        }
        // Each key goes into the filter as the skiplist takes its entry, before the entry is
        // inserted (see `KeyFilter` for why that order is enough).
        let filter = self.key_filter.as_ref();
        let entries = (batch.seqno()..)
            .zip(batch.iter())
            .filter(|(_, op)| op.kind != ValueKind::RangeDeletion)
            .map(|(seqno, op)| {
                if let Some(filter) = filter {
                    filter.insert(op.key);
                }
                (op.key, pack_tag(seqno, op.kind), op.value)
            });
        self.list.insert_all(entries);
    }

    /// Keeps the batch's range deletions beside the entries and publishes their fragments.
    fn add_range_tombstones(&self, batch: &crate::batch::WriteBatch) {
        let mut list = self
            .range_tombstones
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (seqno, op) in (batch.seqno()..).zip(batch.iter()) {
            if op.kind == ValueKind::RangeDeletion {
                list.push(RangeTombstone {
                    start: op.key.to_vec(),
                    end: op.value.to_vec(),
                    seqno,
                });
            }
        }
        let ucmp = self.comparator.user_comparator().clone();
        self.range_fragments
            .store(Some(Arc::new(Fragments::new(list.iter(), ucmp))));
        self.holds_range_tombstones.store(true, Ordering::Release);
    }

    /// The range deletions added, in seqno order.
    pub(crate) fn range_tombstones(&self) -> Vec<RangeTombstone> {
        self.range_tombstones
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The range deletions as fragments, if there is one.
    pub(crate) fn range_fragments(&self) -> Option<Arc<Fragments>> {
        if !self.holds_range_tombstones.load(Ordering::Acquire) {
            return None;
        }
        self.range_fragments.load_full()
    }

    /// The newest seqno at or below `snapshot` of a range deletion here covering `key`. A
    /// point lookup's: it borrows the fragments (no reference count taken).
    pub(crate) fn range_deletion_over(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        if !self.holds_range_tombstones.load(Ordering::Acquire) {
            return None;
        }
        self.range_fragments
            .load()
            .as_ref()
            .and_then(|f| f.covering(key, snapshot))
    }

    /// True if some entry added is a blob pointer.
    pub(crate) fn holds_blob_pointers(&self) -> bool {
        self.holds_blob_pointers.load(Ordering::Relaxed)
    }

    /// Records the blob file the encoded pointer `value` names (batches are checked before
    /// they reach a memtable, so it decodes).
    fn note_blob_file(&self, value: &[u8]) {
        if let Some(pointer) = BlobPointer::decode(value) {
            let mut files = self.blob_files.lock().unwrap_or_else(|e| e.into_inner());
            if !files.contains(&pointer.file) {
                files.push(pointer.file);
            }
        }
    }

    /// The blob files the memtable's pointers name.
    pub(crate) fn blob_files(&self) -> Vec<u64> {
        self.blob_files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The newest entry for `user_key` with seqno `<= snapshot`, if the memtable has one,
    /// range deletions aside.
    pub(crate) fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<MemLookup<'_>> {
        self.get_above(user_key, snapshot, 0)
    }

    /// The newest entry for `user_key` with seqno `<= snapshot`, if the memtable has one; an
    /// entry below `floor` (the seqno of a range deletion covering the key) is
    /// [`MemLookup::Deleted`].
    pub(crate) fn get_above(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        floor: SeqNo,
    ) -> Option<MemLookup<'_>> {
        if self
            .key_filter
            .as_ref()
            .is_some_and(|f| !f.may_contain(user_key))
        {
            return None;
        }
        let mut cursor = Cursor::new(&self.list);
        with_seek_key(user_key, snapshot, |seek| cursor.seek(seek));
        if !cursor.valid() {
            return None;
        }
        let (key, value) = cursor.entry();
        let found = ParsedInternalKey::parse(key).expect("memtable keys are built valid");
        if self
            .comparator
            .user_comparator()
            .compare(found.user_key, user_key)
            .is_ne()
        {
            return None;
        }
        if found.seqno < floor {
            return Some(MemLookup::Deleted);
        }
        Some(match found.kind {
            ValueKind::Value => MemLookup::Value(value),
            ValueKind::BlobPointer => MemLookup::BlobPointer(value),
            // `parse` refuses `RangeDeletion`: range deletions are not in the skiplist.
            ValueKind::Deletion | ValueKind::RangeDeletion => MemLookup::Deleted,
        })
    }

    /// The bytes of memory the memtable holds.
    pub(crate) fn approximate_memory_usage(&self) -> usize {
        self.list.memory_usage()
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// True if nothing was added: no entry and no range deletion.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0 && !self.holds_range_tombstones.load(Ordering::Acquire)
    }

    /// A cursor over the memtable; it keeps the memtable alive.
    pub(crate) fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            cursor: Cursor::new(self.clone()),
        }
    }
}

impl ListOwner for Arc<MemTable> {
    fn list(&self) -> &SkipList {
        &self.list
    }
}

/// A cursor over a memtable's entries in internal-key order.
pub(crate) struct MemTableIter {
    cursor: Cursor<Arc<MemTable>>,
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }
    fn seek_to_first(&mut self) {
        self.cursor.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.cursor.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.cursor.seek(target);
    }
    fn next(&mut self) {
        self.cursor.next();
    }
    fn prev(&mut self) {
        self.cursor.prev();
    }
    fn key(&self) -> &[u8] {
        self.cursor.key()
    }
    fn value(&self) -> &[u8] {
        self.cursor.value()
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
    fn may_pass_seeks(&self) -> bool {
        self.cursor.owner().key_filter.is_some()
    }
    /// With a key filter (bytewise comparators only, so equal user keys are equal bytes): when
    /// `key` has `target`'s user key and the filter rules that user key out, the memtable has
    /// no entry from `target` to `key`. Entries added after the reader's seqno may be missing
    /// from the filter; they are invisible to the reader, and a seek to `key` skips them just
    /// as one to `target` (with the reader's seqno) does.
    fn seek_passes(&self, target: &[u8], key: &[u8]) -> bool {
        let Some(filter) = &self.cursor.owner().key_filter else {
            return false;
        };
        if target.len() < 8 || key.len() < 8 {
            return false;
        }
        let wanted = user_key(target);
        user_key(key) == wanted && !filter.may_contain(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::bytewise;
    use crate::iter::contract::check_against_model;
    use crate::key::append_internal_key;

    fn memtable() -> Arc<MemTable> {
        Arc::new(MemTable::new(InternalKeyComparator::new(bytewise())))
    }

    #[test]
    fn get_sees_the_newest_entry_at_the_snapshot() {
        let m = memtable();
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(2, ValueKind::Value, b"k", b"v2");
        m.add(3, ValueKind::Deletion, b"k", b"");
        m.add(4, ValueKind::Value, b"k2", b"other");
        assert_eq!(m.get(b"k", 0), None);
        assert_eq!(m.get(b"k", 1), Some(MemLookup::Value(b"v1")));
        assert_eq!(m.get(b"k", 2), Some(MemLookup::Value(b"v2")));
        assert_eq!(m.get(b"k", 3), Some(MemLookup::Deleted));
        assert_eq!(m.get(b"k", 100), Some(MemLookup::Deleted));
        assert_eq!(m.get(b"j", 100), None);
        assert_eq!(m.get(b"k1", 100), None);
        assert_eq!(m.get(b"k2", 100), Some(MemLookup::Value(b"other")));
        assert_eq!(m.len(), 4);
    }

    /// With a key filter a memtable answers every lookup as one without: present, deleted,
    /// absent and between keys, through single adds and batches, and a small filter (a 1 KiB
    /// write buffer: 64 words for 3,000 keys) that answers "maybe" for most keys. A custom
    /// comparator gets no filter: it may call different bytes equal.
    #[test]
    fn key_filter_changes_no_answer() {
        let icmp = InternalKeyComparator::new(bytewise());
        for buffer in [4 << 20, 1 << 10] {
            let with = MemTable::for_database(icmp.clone(), buffer);
            assert!(with.key_filter.is_some());
            let without = MemTable::new(icmp.clone());
            let mut batch = crate::batch::WriteBatch::new();
            for i in 0..3000u64 {
                let k = format!("key{:06}", i * 7 % 3001);
                match i % 5 {
                    0 => batch.delete(k.as_bytes()),
                    _ => batch.put(k.as_bytes(), format!("v{i}").as_bytes()),
                }
                if i % 3 == 0 {
                    with.add(10_000 + i, ValueKind::Value, k.as_bytes(), b"single");
                    without.add(10_000 + i, ValueKind::Value, k.as_bytes(), b"single");
                }
            }
            batch.set_seqno(1);
            with.add_batch(&batch);
            without.add_batch(&batch);
            for i in 0..7000u64 {
                for probe in [format!("key{i:06}"), format!("key{i:06}x"), format!("k{i}")] {
                    for snapshot in [0, 1500, 3000, 20_000] {
                        assert_eq!(
                            with.get(probe.as_bytes(), snapshot),
                            without.get(probe.as_bytes(), snapshot),
                            "{probe} at {snapshot}"
                        );
                    }
                }
            }
        }
        #[derive(Debug)]
        struct CaseFolding;
        impl crate::Comparator for CaseFolding {
            fn name(&self) -> &str {
                "test.CaseFolding"
            }
            fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
                a.to_ascii_lowercase().cmp(&b.to_ascii_lowercase())
            }
            fn find_shortest_separator(&self, _: &mut Vec<u8>, _: &[u8]) {}
            fn find_short_successor(&self, _: &mut Vec<u8>) {}
        }
        let folding =
            MemTable::for_database(InternalKeyComparator::new(Arc::new(CaseFolding)), 4 << 20);
        assert!(folding.key_filter.is_none());
        folding.add(1, ValueKind::Value, b"Key", b"v");
        assert_eq!(folding.get(b"KEY", 1), Some(MemLookup::Value(b"v")));
    }

    #[test]
    fn iterator_contract_holds() {
        let m = memtable();
        let mut model = Vec::new();
        for i in 0..300u64 {
            let user = format!("key{:04}", i * 3).into_bytes();
            let value = format!("value{i}").into_bytes();
            m.add(i + 1, ValueKind::Value, &user, &value);
            let mut k = Vec::new();
            append_internal_key(&mut k, &user, i + 1, ValueKind::Value);
            model.push((k, value));
        }
        let probes: Vec<Vec<u8>> = (0..910)
            .step_by(5)
            .map(|i| {
                let mut k = Vec::new();
                append_internal_key(
                    &mut k,
                    format!("key{i:04}").as_bytes(),
                    500,
                    ValueKind::Value,
                );
                k
            })
            .collect();
        let icmp = InternalKeyComparator::new(bytewise());
        check_against_model(&mut m.iter(), &model, &icmp, &probes);
    }

    #[test]
    fn iterator_outlives_the_callers_handle() {
        let m = memtable();
        m.add(1, ValueKind::Value, b"a", b"1");
        let mut it = m.iter();
        drop(m);
        it.seek_to_first();
        assert_eq!(it.value(), b"1");
    }

    #[test]
    fn memory_usage_grows_with_entries() {
        let m = memtable();
        let before = m.approximate_memory_usage();
        for i in 0..10_000u64 {
            m.add(i + 1, ValueKind::Value, &i.to_be_bytes(), &[0u8; 100]);
        }
        assert!(m.approximate_memory_usage() >= before + 10_000 * 116);
        assert!(!m.is_empty());
    }
}
