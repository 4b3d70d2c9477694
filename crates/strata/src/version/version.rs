// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Version`]: an immutable set of live tables per level, and reads through it.
//!
//! Invariants:
//! 1. Level-0 files may overlap; they are kept in ascending file-number order, and the newest
//!    (highest number) holds the newest data.
//! 2. Files of each level >= 1 do not overlap and are sorted by smallest key, so a binary search
//!    on largest keys finds the one file that may hold a key.
//!
//! A `Version` is shared by `Arc`; readers and iterators hold it, so its files are not deleted
//! while they are in use (the version set tracks live versions by `Weak`).

use std::cmp::Ordering as CmpOrdering;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::edit::{FileMetaData, NUM_LEVELS};
use super::file_fences::FileFences;
use super::level_iter::level_iter;
use crate::cache::{TableCache, TablePin};
use crate::comparator::Comparator;
use crate::error::Result;
use crate::iter::Children;
use crate::key::{
    append_internal_key, user_key, with_seek_key, InternalKeyComparator, ParsedInternalKey, SeqNo,
    ValueKind,
};
use crate::memtable::key_filter::{KeyFilter, KeyHash};
use crate::range_del::{Fragments, RangeTombstone};
use crate::table::{BlockReadOptions, BlockSlice, Table};

/// A table in a version, with its seek allowance.
#[derive(Debug)]
pub(crate) struct LiveFile {
    pub(crate) meta: FileMetaData,
    /// Seeks left before the file is worth compacting (see `LevelDB` §14: seek compaction).
    pub(crate) allowed_seeks: AtomicI64,
    /// Every range deletion of the version with a seqno at or below this was applied when
    /// the table was written: it holds no entry they delete (`VersionEdit::
    /// range_deletion_horizons`). 0 for a table written before any.
    pub(crate) range_deletion_horizon: SeqNo,
    /// For a level-0 table flushed since the database opened, the key filter of the memtable
    /// it was flushed from (bytewise comparators only): every user key of the table may be in
    /// it, so a point lookup of a key it rules out skips the table (no table cache lookup, no
    /// index search, no data block). Kept in memory only, and only at level 0, where every
    /// get may look into every table: a table found at open, flushed during recovery, placed
    /// or moved below level 0, or rewritten by compaction has none. Set once, just after the
    /// flush installs the table; a lookup before then reads the table as if there were none.
    pub(crate) key_filter: OnceLock<Arc<KeyFilter>>,
    /// The open table, held from the first point lookup that reads the file for as long as
    /// the file is live, if the table cache's budget allowed ([`TableCache::pin_for_file`]):
    /// later lookups read it without a table cache lookup.
    table: OnceLock<TablePin>,
}

impl LiveFile {
    #[cfg(test)]
    pub(crate) fn new(meta: FileMetaData) -> Arc<Self> {
        Self::with_horizon(meta, 0)
    }

    pub(crate) fn with_horizon(meta: FileMetaData, range_deletion_horizon: SeqNo) -> Arc<Self> {
        // One seek costs about as much as compacting 16 KiB; at least 100.
        let allowed = (meta.file_size / 16_384).max(100) as i64;
        Arc::new(LiveFile {
            meta,
            allowed_seeks: AtomicI64::new(allowed),
            range_deletion_horizon,
            key_filter: OnceLock::new(),
            table: OnceLock::new(),
        })
    }

    /// False if the table holds no entry of `user_key`, by its key filter; true if it may.
    /// The key's hash goes into `hash` the first time a filter needs it, so that one lookup
    /// hashes its key once for all of level 0.
    #[inline]
    pub(crate) fn may_hold_hashed(&self, user_key: &[u8], hash: &mut Option<KeyHash>) -> bool {
        self.key_filter.get().is_none_or(|filter| {
            filter.may_contain_hash(*hash.get_or_insert_with(|| KeyHash::of(user_key)))
        })
    }
}

impl std::ops::Deref for LiveFile {
    type Target = FileMetaData;
    fn deref(&self) -> &FileMetaData {
        &self.meta
    }
}

/// What a version's files say about a user key. A value or pointer found is a slice of its
/// data block, not a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TableLookup {
    /// Found, with this value, borrowed from a block in memory.
    Value(BlockSlice),
    /// Found, with this value, copied out of a block read in place from its table's mapping
    /// (a borrow would hold the table file open for as long as the caller keeps the value).
    CopiedValue(Vec<u8>),
    /// Found, kept in a blob file: this is the encoded pointer.
    BlobPointer(Vec<u8>),
    /// The newest visible entry is a deletion.
    Deleted,
    /// No file holds the key.
    Absent,
}

/// The file a lookup should charge a seek to: the first file it read, when it had to read more
/// than one.
#[derive(Debug, Clone)]
pub(crate) struct SeekCharge {
    pub(crate) file: Arc<LiveFile>,
    pub(crate) level: usize,
}

fn to_charge(charge: Option<(&Arc<LiveFile>, usize)>) -> Option<SeekCharge> {
    charge.map(|(file, level)| SeekCharge {
        file: file.clone(),
        level,
    })
}

/// An immutable set of live tables per level.
#[derive(Debug)]
pub(crate) struct Version {
    /// Each level's files, shared: a cursor over a level holds them with one `Arc` clone.
    pub(crate) files: [Arc<[Arc<LiveFile>]>; NUM_LEVELS],
    /// The blob files entries of this version may point into, by number. A blob file is
    /// deleted only once no live version lists it.
    pub(crate) blob_files: Arc<BTreeMap<u64, BlobFileState>>,
    /// Blob files removed while a log to replay may still point into them: file number → the
    /// log being written at the removal (see `VersionEdit::blob_tombstones`).
    pub(crate) blob_tombstones: BTreeMap<u64, u64>,
    /// The range deletions flushed and not yet dropped, in seqno order (`range_del`).
    pub(crate) range_tombstones: Arc<[RangeTombstone]>,
    /// `range_tombstones` as fragments; `None` when there is none.
    pub(crate) range_fragments: Option<Arc<Fragments>>,
    icmp: InternalKeyComparator,
    /// Each sorted level's files' largest keys as integers, for point lookups and level
    /// cursors (`None` for level 0, an empty level, or user keys not in bytewise order).
    fences: [Option<Arc<FileFences>>; NUM_LEVELS],
    /// The level most in need of compaction and its score (>= 1 means compact it).
    pub(crate) compaction_level: usize,
    pub(crate) compaction_score: f64,
    /// A file whose seek allowance ran out, and its level.
    pub(crate) file_to_compact: Mutex<Option<(Arc<LiveFile>, usize)>>,
}

/// A blob file as a version knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlobFileState {
    pub(crate) meta: crate::version::BlobFileMeta,
    /// Value bytes no entry reaches any more, counted as the entries superseding them are
    /// flushed.
    pub(crate) garbage_bytes: u64,
}

/// Level-0 tables at which level 0 is due for compaction (its score reaches 1). The level-0
/// stop trigger must exceed it, or writers would wait for a compaction never scheduled.
pub(crate) const L0_COMPACTION_TRIGGER: usize = 4;

/// The byte budget of level `level` (>= 1): 10 MiB at L1, ten times more per level.
pub(crate) fn max_bytes_for_level(level: usize) -> f64 {
    let mut result = 10.0 * 1_048_576.0;
    for _ in 1..level {
        result *= 10.0;
    }
    result
}

/// The total size of `files`.
pub(crate) fn total_file_size(files: &[Arc<LiveFile>]) -> u64 {
    files.iter().map(|f| f.file_size).sum()
}

impl Version {
    pub(crate) fn new(
        icmp: InternalKeyComparator,
        files: [Vec<Arc<LiveFile>>; NUM_LEVELS],
    ) -> Self {
        let bytewise = icmp.user_comparator().is_bytewise();
        let fences = std::array::from_fn(|level| {
            let sorted = &files[level];
            (bytewise && level > 0)
                .then(|| FileFences::build(sorted.iter().map(|f| f.largest.as_slice())))
                .flatten()
                .map(Arc::new)
        });
        let mut v = Version {
            fences,
            files: files.map(Arc::from),
            blob_files: Arc::default(),
            blob_tombstones: BTreeMap::new(),
            range_tombstones: Arc::from(Vec::new()),
            range_fragments: None,
            icmp,
            compaction_level: 0,
            compaction_score: -1.0,
            file_to_compact: Mutex::new(None),
        };
        v.compute_compaction_score();
        v
    }

    /// Sets the range deletions (in seqno order) and their fragments.
    pub(crate) fn set_range_tombstones(&mut self, tombstones: Vec<RangeTombstone>) {
        self.range_fragments = (!tombstones.is_empty()).then(|| {
            Arc::new(Fragments::new(
                tombstones.iter(),
                self.icmp.user_comparator().clone(),
            ))
        });
        self.range_tombstones = Arc::from(tombstones);
    }

    /// The largest seqno of the version's range deletions, or 0: a table written now from
    /// entries newer than every one of them, or with those they delete dropped, has this
    /// horizon.
    pub(crate) fn newest_range_tombstone(&self) -> SeqNo {
        self.range_tombstones.last().map_or(0, |t| t.seqno)
    }

    /// The range deletions no entry needs any more, by seqno: each is visible to every
    /// snapshot (at or below `oldest_snapshot`) and every table its range overlaps was
    /// written with it applied. Memtables hold only newer entries.
    pub(crate) fn droppable_range_tombstones(&self, oldest_snapshot: SeqNo) -> Vec<SeqNo> {
        let ucmp = self.user_cmp();
        self.range_tombstones
            .iter()
            .filter(|t| {
                t.seqno <= oldest_snapshot
                    && self.files.iter().flat_map(|level| level.iter()).all(|f| {
                        f.range_deletion_horizon >= t.seqno
                            || !t.overlaps(ucmp, user_key_of(&f.smallest), user_key_of(&f.largest))
                    })
            })
            .map(|t| t.seqno)
            .collect()
    }

    /// A table above the last level that may hold entries a range deletion visible to every
    /// snapshot (at or below `oldest_snapshot`) deletes: it overlaps the deletion's range and
    /// was written before the deletion was applied. With its level. Tables in the last level
    /// are left (there is no level below to rewrite them into), and so is any deletion over
    /// them.
    pub(crate) fn file_with_range_deleted_entries(
        &self,
        oldest_snapshot: SeqNo,
    ) -> Option<(Arc<LiveFile>, usize)> {
        let ucmp = self.user_cmp();
        let visible = self
            .range_tombstones
            .iter()
            .filter(|t| t.seqno <= oldest_snapshot);
        for t in visible {
            for level in 0..NUM_LEVELS - 1 {
                let hit = self.files[level].iter().find(|f| {
                    f.range_deletion_horizon < t.seqno
                        && t.overlaps(ucmp, user_key_of(&f.smallest), user_key_of(&f.largest))
                });
                if let Some(f) = hit {
                    return Some((f.clone(), level));
                }
            }
        }
        None
    }

    /// An empty version.
    pub(crate) fn empty(icmp: InternalKeyComparator) -> Self {
        Self::new(icmp, Default::default())
    }

    fn user_cmp(&self) -> &dyn Comparator {
        &**self.icmp.user_comparator()
    }

    /// Scores each level's need for compaction (LevelDB's policy): level 0 by file count over
    /// [`L0_COMPACTION_TRIGGER`], deeper levels by bytes over their budget. The highest score
    /// wins; ties go to the lower level.
    fn compute_compaction_score(&mut self) {
        let mut best_level = 0;
        let mut best_score = -1.0;
        for level in 0..NUM_LEVELS - 1 {
            let score = if level == 0 {
                self.files[0].len() as f64 / L0_COMPACTION_TRIGGER as f64
            } else {
                total_file_size(&self.files[level]) as f64 / max_bytes_for_level(level)
            };
            if score > best_score {
                best_level = level;
                best_score = score;
            }
        }
        self.compaction_level = best_level;
        self.compaction_score = best_score;
    }

    /// Number of files at `level`.
    pub(crate) fn num_files(&self, level: usize) -> usize {
        self.files[level].len()
    }

    /// Looks `user_key` up as of `snapshot`: level-0 files newest first, then one file per
    /// deeper level. Writes the answer into `answer` (left as it is when no file holds the
    /// key) and returns the seek to charge, if any. The answer is built in place where the
    /// table finds the entry, so that a hot read does not move it up through every layer of
    /// the lookup.
    pub(crate) fn get_into(
        &self,
        options: &BlockReadOptions,
        table_cache: &TableCache,
        user_key: &[u8],
        snapshot: SeqNo,
        floor: SeqNo,
        answer: &mut TableLookup,
    ) -> Result<Option<SeekCharge>> {
        with_seek_key(user_key, snapshot, |seek_key| {
            self.get_at(options, table_cache, user_key, seek_key, floor, answer)
        })
    }

    /// [`get_into`](Self::get_into) with its internal seek key built.
    fn get_at<'v>(
        &'v self,
        options: &BlockReadOptions,
        table_cache: &TableCache,
        user_key: &[u8],
        seek_key: &[u8],
        floor: SeqNo,
        answer: &mut TableLookup,
    ) -> Result<Option<SeekCharge>> {
        let icmp = &self.icmp;
        // The first file read, and the one to charge once a second file is read; borrowed
        // from the version so that a lookup clones no `Arc` unless it charges a seek.
        let mut first_read: Option<(&'v Arc<LiveFile>, usize)> = None;
        let mut charge: Option<(&'v Arc<LiveFile>, usize)> = None;
        let mut search = |file: &'v Arc<LiveFile>, level: usize| -> Result<bool> {
            match first_read {
                None => first_read = Some((file, level)),
                Some(first) if charge.is_none() => charge = Some(first),
                Some(_) => {}
            }
            file.lookup(table_cache, options, seek_key, icmp, floor, answer)
        };

        // Level 0, newest file first (invariant 1). A table its key filter rules out is not
        // read and not charged a seek: LevelDB charges a table its bloom filter skips, but
        // this skip costs one load, so compacting the table would not make reads cheaper.
        let mut hash = None;
        for file in self.files[0].iter().rev() {
            if icmp.compare_user(user_key, user_key_of(&file.smallest)) != CmpOrdering::Less
                && icmp.compare_user(user_key, user_key_of(&file.largest)) != CmpOrdering::Greater
                && file.may_hold_hashed(user_key, &mut hash)
                && search(file, 0)?
            {
                return Ok(to_charge(charge));
            }
        }
        for level in 1..NUM_LEVELS {
            let files = &self.files[level];
            let index = self.find_file_at(level, seek_key);
            let Some(file) = files.get(index) else {
                continue;
            };
            if icmp.compare_user(user_key, user_key_of(&file.smallest)) == CmpOrdering::Less {
                continue;
            }
            if search(file, level)? {
                return Ok(to_charge(charge));
            }
        }
        Ok(to_charge(charge))
    }

    /// The seek an iterator's read sample at `user_key` charges (LevelDB's read sampling): the
    /// first file a lookup of the key would read, if at least two files overlap the key.
    pub(crate) fn read_sample(&self, user_key: &[u8]) -> Option<SeekCharge> {
        let ucmp = self.user_cmp();
        let mut first: Option<(&Arc<LiveFile>, usize)> = None;
        let mut matches = 0;
        let overlapping = self.files[0]
            .iter()
            .rev()
            .filter(|f| {
                ucmp.compare(user_key, user_key_of(&f.smallest)) != CmpOrdering::Less
                    && ucmp.compare(user_key, user_key_of(&f.largest)) != CmpOrdering::Greater
            })
            .map(|f| (f, 0));
        with_seek_key(user_key, crate::key::MAX_SEQNO, |seek_key| {
            let deeper = (1..NUM_LEVELS).filter_map(|level| {
                let files = &self.files[level];
                let file = files.get(self.find_file_at(level, seek_key))?;
                (ucmp.compare(user_key, user_key_of(&file.smallest)) != CmpOrdering::Less)
                    .then_some((file, level))
            });
            for hit in overlapping.chain(deeper) {
                matches += 1;
                if first.is_none() {
                    first = Some(hit);
                }
                if matches >= 2 {
                    return to_charge(first);
                }
            }
            None
        })
    }

    /// Charges a seek to a file; returns true if the file is now due for compaction.
    pub(crate) fn charge_seek(&self, charge: &SeekCharge) -> bool {
        let left = charge.file.allowed_seeks.fetch_sub(1, Ordering::Relaxed) - 1;
        if left <= 0 {
            let mut slot = self
                .file_to_compact
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some((charge.file.clone(), charge.level));
                return true;
            }
        }
        false
    }

    /// True if some file at `level` overlaps the user-key range `[smallest, largest]` (either
    /// bound may be open).
    pub(crate) fn overlap_in_level(
        &self,
        level: usize,
        smallest: Option<&[u8]>,
        largest: Option<&[u8]>,
    ) -> bool {
        let ucmp = self.user_cmp();
        let files = &self.files[level];
        if level == 0 {
            return files
                .iter()
                .any(|f| !after_file(ucmp, smallest, f) && !before_file(ucmp, largest, f));
        }
        let index = match smallest {
            Some(s) => {
                let mut k = Vec::with_capacity(s.len() + 8);
                append_internal_key(&mut k, s, crate::key::MAX_SEQNO, ValueKind::FOR_SEEK);
                self.find_file_at(level, &k)
            }
            None => 0,
        };
        files
            .get(index)
            .is_some_and(|f| !before_file(ucmp, largest, f))
    }

    /// The level a flushed memtable covering `[smallest, largest]` (user keys) goes to: level 0
    /// if it overlaps level 0, else as deep as level 2 while it overlaps nothing in the next
    /// level and not too much (20 × max_file_size) in the one after.
    pub(crate) fn pick_level_for_memtable_output(
        &self,
        smallest: &[u8],
        largest: &[u8],
        max_file_size: u64,
    ) -> usize {
        const MAX_MEM_COMPACT_LEVEL: usize = 2;
        let mut level = 0;
        if self.overlap_in_level(0, Some(smallest), Some(largest)) {
            return 0;
        }
        let mut start = Vec::new();
        append_internal_key(
            &mut start,
            smallest,
            crate::key::MAX_SEQNO,
            ValueKind::FOR_SEEK,
        );
        let mut limit = Vec::new();
        append_internal_key(&mut limit, largest, 0, ValueKind::Deletion);
        while level < MAX_MEM_COMPACT_LEVEL {
            if self.overlap_in_level(level + 1, Some(smallest), Some(largest)) {
                break;
            }
            if level + 2 < NUM_LEVELS {
                let overlaps = self.overlapping_inputs(level + 2, Some(&start), Some(&limit));
                if total_file_size(&overlaps) > 10 * max_file_size {
                    break;
                }
            }
            level += 1;
        }
        level
    }

    /// The files at `level` that overlap the internal-key range `[begin, end]` by user key
    /// (either bound may be open). At level 0 the range grows to take in every file that
    /// overlaps a file already taken, since level-0 files overlap each other.
    pub(crate) fn overlapping_inputs(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<LiveFile>> {
        let ucmp = self.user_cmp();
        let mut user_begin = begin.map(|b| user_key(b).to_vec());
        let mut user_end = end.map(|e| user_key(e).to_vec());
        let mut inputs = Vec::new();
        let mut i = 0;
        while i < self.files[level].len() {
            let f = &self.files[level][i];
            i += 1;
            let file_start = user_key_of(&f.smallest);
            let file_limit = user_key_of(&f.largest);
            let before = user_begin
                .as_deref()
                .is_some_and(|b| ucmp.compare(file_limit, b) == CmpOrdering::Less);
            let after = user_end
                .as_deref()
                .is_some_and(|e| ucmp.compare(file_start, e) == CmpOrdering::Greater);
            if before || after {
                continue;
            }
            inputs.push(f.clone());
            if level == 0 {
                // Widen the range and start over if this file sticks out of it.
                if user_begin
                    .as_deref()
                    .is_some_and(|b| ucmp.compare(file_start, b) == CmpOrdering::Less)
                {
                    user_begin = Some(file_start.to_vec());
                    inputs.clear();
                    i = 0;
                } else if user_end
                    .as_deref()
                    .is_some_and(|e| ucmp.compare(file_limit, e) == CmpOrdering::Greater)
                {
                    user_end = Some(file_limit.to_vec());
                    inputs.clear();
                    i = 0;
                }
            }
        }
        inputs
    }

    /// How many cursors [`add_iterators`](Self::add_iterators) adds: one per level-0 file and
    /// one per deeper level that has files.
    pub(crate) fn iterator_count(&self) -> usize {
        self.files[0].len() + self.files[1..].iter().filter(|f| !f.is_empty()).count()
    }

    /// Adds a cursor per level-0 file and one per non-empty deeper level to `out`.
    pub(crate) fn add_iterators(
        &self,
        options: BlockReadOptions,
        table_cache: &Arc<TableCache>,
        out: &mut Children,
    ) -> Result<()> {
        // Every level-0 file, and every level but the deepest, may have its seeks put off:
        // the deepest holds most keys, so it seeks first and the others are asked whether
        // they hold anything before the key it found. A level-0 file's cursor is a level
        // cursor over that one file (one file is sorted and overlaps nothing, invariant 2), so
        // it answers from the file's key range and filter and opens the table only when it
        // must: after a sequential fill, most seeks land before the one level-0 file's range,
        // and each used to seek that table to its first block.
        let deepest = (1..NUM_LEVELS).rev().find(|&l| !self.files[l].is_empty());
        for f in self.files[0].iter() {
            out.push(Box::new(level_iter(
                self.icmp.clone(),
                Arc::from([Arc::clone(f)]),
                None,
                table_cache.clone(),
                options,
                deepest.is_some(),
            )));
        }
        for level in 1..NUM_LEVELS {
            if !self.files[level].is_empty() {
                out.push(Box::new(level_iter(
                    self.icmp.clone(),
                    Arc::clone(&self.files[level]),
                    self.fences[level].clone(),
                    table_cache.clone(),
                    options,
                    Some(level) != deepest,
                )));
            }
        }
        Ok(())
    }

    /// The approximate offset of `internal_key` within the whole version's data: the sizes of
    /// the files entirely before it plus its offset inside the files that span it.
    pub(crate) fn approximate_offset_of(
        &self,
        table_cache: &TableCache,
        internal_key: &[u8],
    ) -> u64 {
        let mut result = 0;
        for (level, files) in self.files.iter().enumerate() {
            for f in files.iter() {
                if self.icmp.compare(&f.largest, internal_key) != CmpOrdering::Greater {
                    result += f.file_size;
                } else if self.icmp.compare(&f.smallest, internal_key) == CmpOrdering::Greater {
                    // Sorted levels: later files are past the key too.
                    if level > 0 {
                        break;
                    }
                } else if let Ok(table) = table_cache.get(f.number, f.file_size) {
                    result += table.approximate_offset_of(internal_key);
                }
            }
        }
        result
    }
}

impl LiveFile {
    /// [`Table::rules_out`](crate::table::Table::rules_out) for this file's table, read through
    /// its pin when it has one (else through the table cache; false if it cannot be opened).
    pub(crate) fn rules_out(&self, table_cache: &TableCache, internal_key: &[u8]) -> bool {
        if let Some(pin) = self.table.get() {
            return pin.table().rules_out(internal_key);
        }
        table_cache
            .get(self.number, self.file_size)
            .is_ok_and(|table| table.rules_out(internal_key))
    }

    /// `read` of this file's table: its pin's when it has one, else the table cache's,
    /// pinned for the file when the cache's budget allows (so that later reads, lookups and
    /// cursors alike, skip the cache lookup).
    ///
    /// # Errors
    /// As [`TableCache::get`].
    pub(crate) fn with_table<R>(
        &self,
        table_cache: &TableCache,
        read: impl FnOnce(&Arc<Table>) -> R,
    ) -> Result<R> {
        if let Some(pin) = self.table.get() {
            return Ok(read(pin.table()));
        }
        match table_cache.pin_for_file(self.number, self.file_size)? {
            // A racing read may have pinned it first: this pin is then dropped, unused.
            Ok(pin) => Ok(read(self.table.get_or_init(|| pin).table())),
            Err(table) => Ok(read(&table)),
        }
    }

    /// [`lookup_in`] in this file's table ([`with_table`](Self::with_table)).
    fn lookup(
        &self,
        table_cache: &TableCache,
        options: &BlockReadOptions,
        seek_key: &[u8],
        icmp: &InternalKeyComparator,
        floor: SeqNo,
        answer: &mut TableLookup,
    ) -> Result<bool> {
        self.with_table(table_cache, |table| {
            lookup_in(table, options, seek_key, icmp, floor, answer)
        })?
    }
}

/// The newest entry of table `file` for the user key of `seek_key` (an internal key whose
/// seqno bounds the entries seen), if the table holds one; an entry below `floor` (the seqno
/// of a range deletion covering the key, or 0) is [`TableLookup::Deleted`].
pub(crate) fn lookup_in_table(
    table_cache: &TableCache,
    file: &FileMetaData,
    options: &BlockReadOptions,
    seek_key: &[u8],
    icmp: &InternalKeyComparator,
    floor: SeqNo,
) -> Result<Option<TableLookup>> {
    let table = table_cache.get(file.number, file.file_size)?;
    let mut answer = TableLookup::Absent;
    let found = lookup_in(&table, options, seek_key, icmp, floor, &mut answer)?;
    Ok(found.then_some(answer))
}

/// [`lookup_in_table`] in an open table, the answer written into `answer`; true if the table
/// holds an entry for the key (`answer` is then set), false if not (`answer` untouched).
fn lookup_in(
    table: &Table,
    options: &BlockReadOptions,
    seek_key: &[u8],
    icmp: &InternalKeyComparator,
    floor: SeqNo,
    answer: &mut TableLookup,
) -> Result<bool> {
    let user_key = user_key_of(seek_key);
    let found = table.get_in_block(options, seek_key, |block, k, v| {
        let Some(parsed) = ParsedInternalKey::parse(k) else {
            return false;
        };
        if icmp.compare_user(parsed.user_key, user_key) != CmpOrdering::Equal {
            return false;
        }
        if parsed.seqno < floor {
            *answer = TableLookup::Deleted;
            return true;
        }
        // A value in a block read in place from the mapping, or decoded part way into a
        // thread's buffer, is copied; one in a block in memory is borrowed.
        let in_memory = block.filter(|b| !b.is_mapped());
        *answer = match (parsed.kind, in_memory) {
            (ValueKind::Value, Some(block)) => {
                TableLookup::Value(block.slice(v).expect("find hands out slices of its block"))
            }
            (ValueKind::Value, None) => copied_value(v),
            // A pointer is a few bytes, read once to find the blob.
            (ValueKind::BlobPointer, _) => TableLookup::BlobPointer(v.to_vec()),
            // `parse` refuses `RangeDeletion`: tables hold no range deletions.
            (ValueKind::Deletion | ValueKind::RangeDeletion, _) => TableLookup::Deleted,
        };
        true
    })?;
    Ok(found == Some(true))
}

/// Out of line: the copy inlined into `lookup_in_table` cost readhot 2-3% (whose values are
/// borrowed from cached blocks).
#[inline(never)]
fn copied_value(v: &[u8]) -> TableLookup {
    TableLookup::CopiedValue(v.to_vec())
}

fn user_key_of(internal_key: &[u8]) -> &[u8] {
    user_key(internal_key)
}

/// True if user key `k` is after every key of `f` (an open bound is never after).
fn after_file(ucmp: &dyn Comparator, k: Option<&[u8]>, f: &LiveFile) -> bool {
    k.is_some_and(|k| ucmp.compare(k, user_key_of(&f.largest)) == CmpOrdering::Greater)
}

/// True if user key `k` is before every key of `f` (an open bound is never before).
fn before_file(ucmp: &dyn Comparator, k: Option<&[u8]>, f: &LiveFile) -> bool {
    k.is_some_and(|k| ucmp.compare(k, user_key_of(&f.smallest)) == CmpOrdering::Less)
}

impl Version {
    /// [`find_file`] over sorted level `level` (>= 1), through its fences when it has them.
    #[inline]
    fn find_file_at(&self, level: usize, internal_key: &[u8]) -> usize {
        find_file_fenced(
            &self.icmp,
            &self.files[level],
            self.fences[level].as_deref(),
            internal_key,
        )
    }
}

/// [`find_file`] through `fences`, the fences of `files`, if there are: whole keys are compared
/// only for the files whose windows tie with `internal_key`'s.
#[inline]
pub(crate) fn find_file_fenced(
    icmp: &InternalKeyComparator,
    files: &[Arc<LiveFile>],
    fences: Option<&FileFences>,
    internal_key: &[u8],
) -> usize {
    match fences {
        Some(fences) => {
            let (lo, hi) = fences.ties(internal_key);
            lo + find_file(icmp, &files[lo..hi], internal_key)
        }
        None => find_file(icmp, files, internal_key),
    }
}

/// The index of the first file whose largest key is >= `internal_key` (`files.len()` if none).
/// Requires: `files` sorted and non-overlapping (invariant 2).
pub(crate) fn find_file(
    icmp: &InternalKeyComparator,
    files: &[Arc<LiveFile>],
    internal_key: &[u8],
) -> usize {
    files.partition_point(|f| icmp.compare(&f.largest, internal_key) == CmpOrdering::Less)
}
