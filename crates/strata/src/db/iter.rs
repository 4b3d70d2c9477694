// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`DbIterator`], the user's cursor over the database (`range_iter.rs` builds [`RangeIter`],
//! a Rust iterator over a key range in either direction, on it).
//!
//! The cursor merges the memtables and every table, and shows, for each user key, the newest
//! entry visible at its seqno, hiding deleted keys. Moving forward, it is positioned on the
//! current entry of the merge. Moving backward, the merge is positioned just before all the
//! entries of the current user key, and the cursor keeps a copy of the current key and value.

use std::cell::OnceCell;
use std::mem::ManuallyDrop;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use super::key_buf::KeyBuf;
use super::spare_cursor::SpareCursor;
use super::{DbInner, ReadView};
use crate::blob::BlobCache;
use crate::error::{Error, Result};
use crate::iter::{BackLane, Children, InternalIterator, MergingIter};
use crate::key::{
    user_key, with_seek_key, InternalKeyComparator, ParsedInternalKey, SeqNo, ValueKind,
};
use crate::options::ReadOptions;
use crate::table::BlockReadOptions;
use crate::version::version::Version;

/// The mean number of bytes (keys and values) a cursor reads between two read samples.
const READ_SAMPLE_PERIOD: u64 = 1 << 20;

/// Read sampling, as LevelDB does it: about every [`READ_SAMPLE_PERIOD`] bytes a cursor reads
/// (the exact gap is random, so that regular scans do not always sample the same keys), it
/// charges a seek to the first file that a lookup of the current key would read, if more than
/// one file overlaps that key. Scans over overlapping files thus trigger seek compactions, as
/// lookups do.
pub(crate) struct ReadSampler {
    bytes_until_sample: u64,
    rng: u64,
    /// Woken when a file's seek allowance runs out, and offered the cursor's parts when it
    /// drops (`spare_cursor.rs`); `None` for a read-only database, which never compacts.
    db: Option<Weak<DbInner>>,
}

impl ReadSampler {
    fn new(db: Option<Weak<DbInner>>) -> Self {
        // Each cursor draws its own gaps: were they all the same, cursors reading less than the
        // first gap would never sample. Seeds are a counter spread by SplitMix64.
        static CURSORS: AtomicU64 = AtomicU64::new(0);
        let mut z = CURSORS
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let mut sampler = ReadSampler {
            bytes_until_sample: 0,
            rng: (z ^ (z >> 31)) | 1,
            db,
        };
        sampler.bytes_until_sample = sampler.random_period();
        sampler
    }

    /// A gap drawn uniformly from `[0, 2 * READ_SAMPLE_PERIOD)`.
    /// A sampler that never samples: the placeholder a dropped cursor leaves when its own
    /// goes to the next cursor.
    fn none() -> Self {
        ReadSampler {
            bytes_until_sample: u64::MAX,
            rng: 1,
            db: None,
        }
    }

    fn random_period(&mut self) -> u64 {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % (2 * READ_SAMPLE_PERIOD)
    }

    /// Counts an entry of `bytes` bytes read at `user_key`, sampling when a gap runs out.
    #[inline]
    fn account(&mut self, version: &Version, user_key: &[u8], bytes: usize) {
        let bytes = bytes as u64;
        if self.bytes_until_sample < bytes {
            self.sample(version, user_key, bytes);
        }
        self.bytes_until_sample -= bytes;
    }

    /// Counts `bytes` read if that does not run the gap out (no sample due); false, counting
    /// nothing, if it would.
    #[inline]
    fn take_without_sample(&mut self, bytes: u64) -> bool {
        if self.bytes_until_sample < bytes {
            return false;
        }
        self.bytes_until_sample -= bytes;
        true
    }

    /// Undoes [`take_without_sample`](Self::take_without_sample).
    #[inline]
    fn give_back(&mut self, bytes: u64) {
        self.bytes_until_sample += bytes;
    }

    #[cold]
    fn sample(&mut self, version: &Version, user_key: &[u8], bytes: u64) {
        while self.bytes_until_sample < bytes {
            self.bytes_until_sample += self.random_period();
            let Some(db) = &self.db else { continue };
            if let Some(charge) = version.read_sample(user_key) {
                if version.charge_seek(&charge) {
                    if let Some(db) = db.upgrade() {
                        db.wake_background();
                    }
                }
            }
        }
    }
}

/// The most entries [`DbIterator::walk_forward`] takes from one block before it goes back
/// through the merge: each such return moves the table's read-ahead on as far as the entries
/// taken (at most 8 steps at once, so that its prefetches do not come in a burst).
const FORWARD_WALK_STEPS: usize = 8;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over the database's entries in key order, as of one seqno.
///
/// Start it with [`seek_to_first`](Self::seek_to_first), [`seek_to_last`](Self::seek_to_last)
/// or [`seek`](Self::seek); move with [`next`](Self::next) and [`prev`](Self::prev). After it
/// becomes invalid, check [`status`](Self::status): an error there (a damaged block, a failed
/// read) means the scan stopped early.
///
/// The cursor keeps the tables and memtables it reads alive, so it sees a fixed state however
/// long it lives; it holds files open and memory, so don't keep it longer than needed.
///
/// # An invalid cursor
///
/// LevelDB and RocksDB require a valid cursor for `key`, `value`, `next` and `prev`, and fail
/// an assertion (or read freed memory) otherwise. Here none of them panics: on a cursor that
/// is not on an entry (never positioned, run off either end, or stopped by an error),
/// [`key`](Self::key) and [`value`](Self::value) return an empty slice, and
/// [`next`](Self::next) and [`prev`](Self::prev) do nothing (the cursor stays invalid until
/// a seek). An empty slice is also a possible key and value, so code that cannot tell
/// should check [`valid`](Self::valid) first, or call [`try_key`](Self::try_key) and
/// [`try_value`](Self::try_value), which say why there is no entry.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for k in ["a", "b", "c"] {
///     db.put(k.as_bytes(), b"v")?;
/// }
/// let mut it = db.iter()?;
/// it.seek(b"b");
/// let mut keys = Vec::new();
/// while it.valid() {
///     keys.push(it.key().to_vec());
///     it.next();
/// }
/// it.status()?;
/// assert_eq!(keys, vec![b"b".to_vec(), b"c".to_vec()]);
/// # Ok::<(), strata::Error>(())
/// ```
pub struct DbIterator {
    /// Taken by `drop` only (to keep it for the next cursor, `spare_cursor.rs`).
    merged: ManuallyDrop<MergingIter<InternalKeyComparator>>,
    seqno: SeqNo,
    direction: Direction,
    valid: bool,
    /// Reverse: the current key. Forward: scratch for the key being skipped.
    saved_key: KeyBuf,
    /// Reverse: the current value.
    saved_value: Vec<u8>,
    error: Option<Error>,
    sampler: ReadSampler,
    /// Keeps the version (and so its files) alive. Taken by `drop` only.
    view: ManuallyDrop<Arc<ReadView>>,
    /// True if the current entry's value is a blob pointer.
    blob: bool,
    /// The current entry's value read from its blob file, once asked for; reset on every move.
    resolved: OnceCell<Result<Vec<u8>>>,
    /// Taken by `drop` only.
    blob_cache: ManuallyDrop<Arc<BlobCache>>,
    /// How the children read blocks.
    read: BlockReadOptions,
    /// The view's range deletions (empty for nearly every database): a value one of them
    /// covers and is newer than is hidden as a deletion is.
    range_deletions: Vec<Arc<crate::range_del::Fragments>>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("seqno", &self.seqno)
            .field("valid", &self.valid)
            .finish()
    }
}

pub(crate) fn new_iterator(inner: &Arc<DbInner>, options: &ReadOptions<'_>) -> Result<DbIterator> {
    if options.snapshot.is_none() && !inner.read_only {
        // The seqno first, then the view (as `CursorSource::new` reads them): the view the
        // spare parts must match then holds every entry the seqno covers.
        let seqno = inner.read_seqno(options)?;
        if let Some(spare) = inner
            .spare_cursor
            .take(&inner.view_generation, block_read_options(options))
        {
            return Ok(DbIterator::from_spare(spare, seqno));
        }
    }
    CursorSource::new(inner, options)?.into_cursor()
}

fn block_read_options(options: &ReadOptions<'_>) -> BlockReadOptions {
    BlockReadOptions {
        verify_checksums: options.verify_checksums,
        trust_verified: true,
        fill_cache: options.fill_cache,
        release_behind: false,
    }
}

/// What a cursor is built from: one read view (memtables and version) and one seqno. Every
/// cursor built from the same source sees exactly the same entries, however much later it is
/// built: the view keeps its files alive.
#[derive(Clone)]
pub(crate) struct CursorSource {
    pub(crate) view: Arc<ReadView>,
    pub(crate) seqno: SeqNo,
    pub(crate) read: BlockReadOptions,
    pub(crate) table_cache: Arc<crate::cache::TableCache>,
    pub(crate) blob_cache: Arc<BlobCache>,
    pub(crate) icmp: crate::key::InternalKeyComparator,
    /// For read sampling; `None` for a read-only database.
    pub(crate) db: Option<Weak<DbInner>>,
}

impl CursorSource {
    pub(crate) fn new(inner: &Arc<DbInner>, options: &ReadOptions<'_>) -> Result<Self> {
        let seqno = inner.read_seqno(options)?;
        let view = match options.snapshot.and_then(crate::Snapshot::view) {
            Some(view) => view.clone(),
            None => inner.view.load_full(),
        };
        // A read-only handle's view is a fixed state with its own seqno (`read_only.rs`).
        let seqno = match (options.snapshot, view.fixed_seqno) {
            (None, Some(fixed)) => fixed,
            _ => seqno,
        };
        Ok(CursorSource {
            view,
            seqno,
            read: block_read_options(options),
            table_cache: inner.table_cache.clone(),
            blob_cache: inner.blob_cache.clone(),
            icmp: inner.icmp.clone(),
            db: (!inner.read_only).then(|| Arc::downgrade(inner)),
        })
    }

    /// A cursor over this source; the source stays, for more.
    pub(crate) fn cursor(&self) -> Result<DbIterator> {
        self.clone().into_cursor()
    }

    /// A cursor over this source, which it takes: what the cursor keeps (the view, the
    /// comparator, the caches) is moved into it rather than counted again, and a cursor made
    /// for one seek (db_bench's seekrandom builds one per seek, as LevelDB's does) pays for
    /// each shared handle once.
    pub(crate) fn into_cursor(self) -> Result<DbIterator> {
        let CursorSource {
            view,
            seqno,
            read,
            table_cache,
            blob_cache,
            icmp,
            db,
        } = self;
        let mut children = Children::with_capacity(2 + view.version.iterator_count());
        children.push(Box::new(view.mem.iter()));
        if let Some(imm) = &view.imm {
            children.push(Box::new(imm.iter()));
        }
        view.version
            .add_iterators(read, &table_cache, &mut children)?;
        let range_deletions = view.range_fragment_sets();
        Ok(DbIterator {
            merged: ManuallyDrop::new(MergingIter::new(icmp, children)),
            seqno,
            direction: Direction::Forward,
            valid: false,
            saved_key: KeyBuf::default(),
            saved_value: Vec::new(),
            error: None,
            sampler: ReadSampler::new(db),
            view: ManuallyDrop::new(view),
            blob: false,
            resolved: OnceCell::new(),
            blob_cache: ManuallyDrop::new(blob_cache),
            read,
            range_deletions,
        })
    }
}

impl DbIterator {
    /// A cursor on the parts a dropped one left (`spare_cursor.rs`), reading at `seqno`, not
    /// positioned. The range deletions are read anew: the memtable's may have grown since.
    fn from_spare(spare: SpareCursor, seqno: SeqNo) -> DbIterator {
        let SpareCursor {
            mut merged,
            view,
            read,
            blob_cache,
            sampler,
            mut saved_key,
            mut saved_value,
        } = spare;
        merged.reset();
        saved_key.clear();
        saved_value.clear();
        DbIterator {
            merged: ManuallyDrop::new(merged),
            seqno,
            direction: Direction::Forward,
            valid: false,
            saved_key,
            saved_value,
            error: None,
            sampler,
            range_deletions: view.range_fragment_sets(),
            view: ManuallyDrop::new(view),
            blob: false,
            resolved: OnceCell::new(),
            blob_cache: ManuallyDrop::new(blob_cache),
            read,
        }
    }
}

impl Drop for DbIterator {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and is the last use of the cursor; each of these fields is
        // taken here and nowhere else, then moved or dropped exactly once below.
        #[allow(unsafe_code)]
        let (mut merged, mut view, blob_cache) = unsafe {
            (
                ManuallyDrop::take(&mut self.merged),
                ManuallyDrop::take(&mut self.view),
                ManuallyDrop::take(&mut self.blob_cache),
            )
        };
        let Some(inner) = self.sampler.db.as_ref().and_then(Weak::upgrade) else {
            return;
        };
        // A cursor that met no error leaves its parts for the next cursor if its view is
        // still current (`spare_cursor.rs`); a damaged child would carry its error over.
        if self.error.is_none() && merged.children_ok() {
            let spare = SpareCursor {
                merged,
                view,
                read: self.read,
                blob_cache,
                sampler: std::mem::replace(&mut self.sampler, ReadSampler::none()),
                saved_key: std::mem::take(&mut self.saved_key),
                saved_value: std::mem::take(&mut self.saved_value),
            };
            match inner.spare_cursor.offer(spare, &inner.view_generation) {
                None => return,
                Some(spare) => {
                    merged = spare.merged;
                    view = spare.view;
                }
            }
        }
        if !Arc::ptr_eq(&view.version, &inner.view.load().version) {
            // The tables' handles go first, then the version that kept the files listed.
            drop(merged);
            inner.release_view(&mut view);
        }
    }
}

impl DbIterator {
    /// True if the cursor is on an entry.
    #[inline]
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key, or an empty slice if the cursor is not on an entry (see
    /// [`try_key`](Self::try_key) to tell the two apart).
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// let mut it = db.iter()?;
    /// assert_eq!(it.key(), b""); // not positioned yet
    /// it.seek_to_first();
    /// assert_eq!(it.key(), b"a");
    /// # Ok::<(), strata::Error>(())
    /// ```
    #[inline]
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        self.current_key()
    }

    /// The current key; an error if the cursor is not on an entry.
    ///
    /// # Errors
    /// The error that stopped the cursor, if one did (as [`status`](Self::status) returns
    /// it); otherwise [`Error::InvalidArgument`]: the cursor was never positioned, or ran off
    /// an end.
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("", "the empty key")?;
    /// let mut it = db.iter()?;
    /// it.seek_to_first();
    /// assert_eq!(it.try_key()?, b""); // on the empty key
    /// it.next();
    /// assert!(it.try_key().is_err()); // past the end
    /// it.status()?; // which is no error of the data
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn try_key(&self) -> Result<&[u8]> {
        self.check_valid()?;
        Ok(self.current_key())
    }

    /// The key of the entry the cursor is on. Requires `valid`.
    #[inline]
    fn current_key(&self) -> &[u8] {
        match self.direction {
            Direction::Forward => user_key(self.merged.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// `Ok` if the cursor is on an entry; else why not. Inlined, with the error built out of
    /// line, so that `value` and `try_value` cost what the assertion they had did.
    #[inline]
    fn check_valid(&self) -> Result<()> {
        if self.valid {
            Ok(())
        } else {
            Err(self.why_not_on_an_entry())
        }
    }

    /// The error that stopped the cursor, or the misuse of one that is not on an entry.
    #[cold]
    fn why_not_on_an_entry(&self) -> Error {
        match self.status() {
            Err(e) => e,
            Ok(()) => Error::invalid_argument(
                "the cursor is not on an entry (never positioned, or past an end)",
            ),
        }
    }

    /// The current value, or an empty slice if the cursor is not on an entry.
    ///
    /// A value kept in a blob file (see `Options::blob_threshold`) is read when first asked
    /// for. If that read fails, this returns an empty slice and the error is in
    /// [`status`](Self::status); [`try_value`](Self::try_value) returns it directly.
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// let mut it = db.iter()?;
    /// it.seek_to_last();
    /// assert_eq!(it.value(), b"1");
    /// it.next();
    /// assert_eq!(it.value(), b""); // past the end
    /// # Ok::<(), strata::Error>(())
    /// ```
    #[inline]
    pub fn value(&self) -> &[u8] {
        self.try_value().unwrap_or(&[])
    }

    /// The current value; an error if the cursor is not on an entry or the value cannot be
    /// read from its blob file.
    ///
    /// # Errors
    /// [`Error::Corruption`] or [`Error::Io`] naming the blob file, if the value is kept in one
    /// and cannot be read; as [`try_key`](Self::try_key) on a cursor that is not on an entry.
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// let mut it = db.iter()?;
    /// assert!(it.try_value().is_err()); // not positioned yet
    /// it.seek(b"a");
    /// assert_eq!(it.try_value()?, b"1");
    /// # Ok::<(), strata::Error>(())
    /// ```
    #[inline]
    pub fn try_value(&self) -> Result<&[u8]> {
        self.check_valid()?;
        let stored = self.stored_value();
        if !self.blob {
            return Ok(stored);
        }
        self.blob_value(stored)
    }

    /// The value a blob pointer names, read once per entry.
    fn blob_value(&self, stored: &[u8]) -> Result<&[u8]> {
        let resolved = self.resolved.get_or_init(|| {
            self.blob_cache
                .read_encoded(self.key(), stored, self.read.verify_checksums)
        });
        match resolved {
            Ok(v) => Ok(v),
            Err(e) => Err(e.clone()),
        }
    }

    /// The current entry's value as the tree holds it: the value, or a blob pointer.
    #[inline]
    fn stored_value(&self) -> &[u8] {
        match self.direction {
            Direction::Forward => self.merged.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The first error met, if any.
    pub fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if let Some(Err(e)) = self.resolved.get() {
            return Err(e.clone());
        }
        self.merged.status()
    }

    /// Stops the cursor on a key that is not a valid internal key. Requires: the merge is on
    /// that key. Its file is not known to the merge, so the error names the database.
    fn malformed_key(&mut self) {
        let dir = self.blob_cache.dir();
        let key = self.merged.key();
        self.error = Some(Error::corruption(
            dir,
            0,
            format!(
                "the database at {} holds a malformed internal key '{}'",
                dir.display(),
                key.escape_ascii()
            ),
        ));
        self.stop();
    }

    /// The entry's kind, or `Deletion` for a value a visible range deletion covers (`parse`
    /// never yields `RangeDeletion`).
    fn effective_kind(&self, k: &ParsedInternalKey<'_>) -> ValueKind {
        if k.kind.is_value()
            && !self.range_deletions.is_empty()
            && crate::range_del::newest_covering(
                self.range_deletions.iter().map(|f| &**f),
                k.user_key,
                self.seqno,
            )
            .is_some_and(|t| t > k.seqno)
        {
            return ValueKind::Deletion;
        }
        k.kind
    }

    fn stop(&mut self) {
        self.valid = false;
        self.blob = false;
        self.saved_key.clear();
        self.saved_value.clear();
    }

    /// Orders two user keys by the database's comparator.
    #[inline]
    fn compare_user_keys(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        self.merged.comparator().compare_user(a, b)
    }

    /// Moves to the first entry at or after the merge's position that is visible and not
    /// deleted (skipping entries of `saved_key` if `skipping`).
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        debug_assert_eq!(self.direction, Direction::Forward);
        self.resolved.take();
        while self.merged.valid() {
            let Some(k) = ParsedInternalKey::parse(self.merged.key()) else {
                return self.malformed_key();
            };
            let bytes = k.user_key.len() + self.merged.value().len();
            self.sampler.account(&self.view.version, k.user_key, bytes);
            if k.seqno <= self.seqno {
                match self.effective_kind(&k) {
                    ValueKind::Deletion | ValueKind::RangeDeletion => {
                        // Hide every older entry of this key.
                        self.saved_key.set(k.user_key);
                        skipping = true;
                    }
                    ValueKind::Value | ValueKind::BlobPointer => {
                        let hidden =
                            skipping && self.compare_user_keys(k.user_key, &self.saved_key).is_le();
                        if !hidden {
                            self.valid = true;
                            self.blob = k.kind == ValueKind::BlobPointer;
                            self.saved_key.clear();
                            return;
                        }
                    }
                }
            }
            self.merged.next();
        }
        self.stop();
    }

    /// Moving backward: collects the newest visible entry of the user key before the merge's
    /// position into `saved_key`/`saved_value`, leaving the merge before that key's entries.
    fn find_prev_user_entry(&mut self) {
        self.find_prev_user_entry_from(ValueKind::Deletion);
    }

    /// [`find_prev_user_entry`](Self::find_prev_user_entry) picked up where it would be with
    /// `kind` the kind of the entry saved so far (`Deletion`: none saved; a value kind: the
    /// saved key and value are that entry's, and the merge is just before it).
    fn find_prev_user_entry_from(&mut self, mut kind: ValueKind) {
        debug_assert_eq!(self.direction, Direction::Reverse);
        self.resolved.take();
        while self.merged.valid() {
            let Some(k) = ParsedInternalKey::parse(self.merged.key()) else {
                return self.malformed_key();
            };
            let bytes = k.user_key.len() + self.merged.value().len();
            self.sampler.account(&self.view.version, k.user_key, bytes);
            if k.seqno <= self.seqno {
                if kind != ValueKind::Deletion
                    && self.compare_user_keys(k.user_key, &self.saved_key).is_lt()
                {
                    // An entry of an earlier key: the current key's newest entry is saved.
                    break;
                }
                kind = self.effective_kind(&k);
                match kind {
                    ValueKind::Deletion | ValueKind::RangeDeletion => {
                        self.saved_key.clear();
                        self.saved_value.clear();
                    }
                    ValueKind::Value | ValueKind::BlobPointer => {
                        self.saved_key.set(k.user_key);
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(self.merged.value());
                    }
                }
            }
            self.merged.prev();
        }
        if !kind.is_value() {
            // Ran off the start with nothing visible.
            self.stop();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
            self.blob = kind == ValueKind::BlobPointer;
        }
    }

    /// Moves to the first entry.
    pub fn seek_to_first(&mut self) {
        self.direction = Direction::Forward;
        self.saved_value.clear();
        self.merged.seek_to_first();
        self.find_next_user_entry(false);
    }

    /// Moves to the last entry.
    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        self.saved_value.clear();
        self.merged.seek_to_last();
        self.find_prev_user_entry();
    }

    /// Moves to the first entry whose key is at or after `key`.
    pub fn seek(&mut self, key: &[u8]) {
        self.direction = Direction::Forward;
        self.saved_value.clear();
        // The target lives on the stack: a cursor made for one seek allocates no key buffer.
        with_seek_key(key, self.seqno, |target| self.merged.seek(target));
        self.find_next_user_entry(false);
    }

    /// Moves to the next entry. On a cursor that is not on an entry, does nothing: seek
    /// first (see [the type's notes](Self#an-invalid-cursor)).
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// let mut it = db.iter()?;
    /// it.next(); // not positioned: nothing happens
    /// assert!(!it.valid());
    /// it.seek_to_first();
    /// it.next();
    /// assert!(!it.valid()); // past the end
    /// # Ok::<(), strata::Error>(())
    /// ```
    #[inline]
    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            return self.next_after_reverse();
        }
        // The step within a data block onto the next user key's visible value (nearly every
        // step of a scan over compacted tables), with nothing to hide it: no range deletion,
        // and a comparator under which different bytes are different keys.
        if self.range_deletions.is_empty() && self.merged.comparator().is_bytewise() {
            if let Some(bytes) = self.merged.next_plain_in_block(self.seqno) {
                let key = user_key(self.merged.key());
                self.sampler.account(&self.view.version, key, bytes);
                self.resolved.take();
                self.blob = false;
                return;
            }
        }
        self.saved_key.set(user_key(self.merged.key()));
        self.merged.next();
        if !self.merged.valid() {
            return self.stop();
        }
        if !self.on_next_key() {
            self.find_next_user_entry(true);
        }
    }

    /// A forward step's common case, decided inline: the merge's entry is a value, visible,
    /// not under a range deletion, of a user key after `saved_key`, and reading it takes no
    /// read sample. Then the cursor is on it and this returns true; otherwise it changes
    /// nothing and [`find_next_user_entry`](Self::find_next_user_entry) decides.
    #[inline]
    fn on_next_key(&mut self) -> bool {
        let Some(k) = ParsedInternalKey::parse(self.merged.key()) else {
            return false;
        };
        let bytes = (k.user_key.len() + self.merged.value().len()) as u64;
        if k.kind != ValueKind::Value
            || k.seqno > self.seqno
            || !self.range_deletions.is_empty()
            || !self.sampler.take_without_sample(bytes)
        {
            return false;
        }
        if !self.compare_user_keys(k.user_key, &self.saved_key).is_gt() {
            // Counted above; the slow path counts the entry again. Give it back.
            self.sampler.give_back(bytes);
            return false;
        }
        self.resolved.take();
        self.valid = true;
        self.blob = false;
        self.saved_key.clear();
        true
    }

    /// [`next`](Self::next) on a cursor that moved backward last: the merge is before the
    /// current key's entries; step into them, then skip them.
    #[cold]
    fn next_after_reverse(&mut self) {
        self.direction = Direction::Forward;
        if self.merged.valid() {
            self.merged.next();
        } else {
            self.merged.seek_to_first();
        }
        if !self.merged.valid() {
            return self.stop();
        }
        // `saved_key` holds the current key, which is skipped.
        self.find_next_user_entry(true);
    }

    /// Moves to the previous entry. On a cursor that is not on an entry, does nothing: seek
    /// first (a cursor that ran off the end does not step back onto the last entry; use
    /// [`seek_to_last`](Self::seek_to_last)).
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// let mut it = db.iter()?;
    /// it.seek_to_last();
    /// it.prev();
    /// assert_eq!(it.key(), b"a");
    /// it.prev();
    /// it.prev(); // before the start: nothing happens
    /// assert!(!it.valid());
    /// # Ok::<(), strata::Error>(())
    /// ```
    #[inline]
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            return self.prev_after_forward();
        }
        self.step_back();
    }

    /// A backward step from a cursor moving backward (the merge is on the last entry of the
    /// key before the current one). The common case is decided inline: that entry is a
    /// visible value, not under a range deletion, no read sample is due, and the entry before
    /// it belongs to an earlier key (or there is none). Anything else goes on in
    /// [`find_prev_user_entry_from`](Self::find_prev_user_entry_from) from where this got.
    /// (The merge's entry is always visible here: a backward step stops only on a visible
    /// entry of an earlier key. The check stays, as cheap as the invariant is far away.)
    #[inline]
    fn step_back(&mut self) {
        if !self.merged.valid() {
            return self.find_prev_user_entry();
        }
        let Some(k) = ParsedInternalKey::parse(self.merged.key()) else {
            return self.find_prev_user_entry();
        };
        let bytes = (k.user_key.len() + self.merged.value().len()) as u64;
        if k.kind != ValueKind::Value
            || k.seqno > self.seqno
            || !self.range_deletions.is_empty()
            || !self.sampler.take_without_sample(bytes)
        {
            return self.find_prev_user_entry();
        }
        self.resolved.take();
        self.saved_key.set(k.user_key);
        self.saved_value.clear();
        self.saved_value.extend_from_slice(self.merged.value());
        self.merged.prev();
        if self.merged.valid() {
            // The entry before is counted when a step reads it as its own.
            let earlier = ParsedInternalKey::parse(self.merged.key()).is_some_and(|p| {
                p.seqno <= self.seqno && self.compare_user_keys(p.user_key, &self.saved_key).is_lt()
            });
            if !earlier {
                return self.find_prev_user_entry_from(ValueKind::Value);
            }
        }
        self.valid = true;
        self.blob = false;
    }

    /// [`prev`](Self::prev) on a cursor that moved forward last: moves the merge before
    /// every entry of the current key, then steps back.
    #[cold]
    fn prev_after_forward(&mut self) {
        self.saved_key.set(user_key(self.merged.key()));
        loop {
            self.merged.prev();
            if !self.merged.valid() {
                return self.stop();
            }
            if self
                .compare_user_keys(user_key(self.merged.key()), &self.saved_key)
                .is_lt()
            {
                break;
            }
        }
        self.direction = Direction::Reverse;
        self.find_prev_user_entry();
    }

    /// Calls `visit` with the current entry's key and value, then with each entry after it
    /// in turn, as a loop of [`key`](Self::key), [`value`](Self::value) and
    /// [`next`](Self::next) would, until `visit` returns [`ControlFlow::Break`] or the
    /// entries run out. Within a table's data block, entries reach `visit` from the block
    /// cursor's steps, without a call through the merge and the cursors for each.
    ///
    /// Returns the break, if `visit` broke: the cursor is then on the entry `visit` broke on.
    /// Otherwise the cursor is no longer on an entry (check [`status`](Self::status)), or it
    /// is on an entry whose value could not be read from its blob file, which `visit` was
    /// not called with and `status` reports. If `visit` panics, the cursor is left on an
    /// entry (which one is not said), and steps on from there as usual.
    ///
    /// # Example
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v")?;
    /// }
    /// let mut it = db.iter()?;
    /// it.seek(b"b");
    /// let mut keys = Vec::new();
    /// let stopped = it.walk_forward(|key, _value| {
    ///     if key == b"d" {
    ///         return ControlFlow::Break("at d");
    ///     }
    ///     keys.push(key.to_vec());
    ///     ControlFlow::Continue(())
    /// });
    /// assert_eq!(stopped, ControlFlow::Break("at d"));
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// assert_eq!(it.key(), b"d"); // on the entry `visit` broke on
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn walk_forward<B>(
        &mut self,
        mut visit: impl FnMut(&[u8], &[u8]) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        while self.valid {
            let Ok(value) = self.try_value() else {
                break;
            };
            visit(self.current_key(), value)?;
            if self.direction == Direction::Forward {
                self.walk_block_forward(&mut visit)?;
            }
            self.next();
        }
        ControlFlow::Continue(())
    }

    /// Part of [`walk_forward`](Self::walk_forward), just after it visited the current
    /// entry: visits the entries after it in the merge's current child's data block while
    /// `next` would take them one by one within the block ([`MergingIter::forward_lane`],
    /// [`BlockIter::next_plain`](crate::table::BlockIter::next_plain): a visible value of a
    /// greater user key, the block bounded before the runner-up, no range deletion, a
    /// bytewise comparator), up to [`FORWARD_WALK_STEPS`] of them, without a call through
    /// the merge and the cursors for each. The cursor is then on the last entry visited, as
    /// `next` would have left it; on the entry `visit` broke on, if it broke.
    fn walk_block_forward<B>(
        &mut self,
        visit: &mut impl FnMut(&[u8], &[u8]) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        if !self.range_deletions.is_empty() || !self.merged.comparator().is_bytewise() {
            return ControlFlow::Continue(());
        }
        let Some(mut lane) = self.merged.forward_lane() else {
            return ControlFlow::Continue(());
        };
        let mut moved = 0;
        let mut flow = ControlFlow::Continue(());
        while moved < FORWARD_WALK_STEPS {
            // The merge is on the entry stepped onto before `visit` sees it; so is this
            // cursor, below: were `visit` to panic, the cursor is on that entry.
            let Some((key, value, bytes)) = lane.step(self.seqno) else {
                break;
            };
            if moved == 0 {
                self.resolved.take();
                self.blob = false;
            }
            moved += 1;
            let key = user_key(key);
            self.sampler.account(&self.view.version, key, bytes);
            flow = visit(key, value);
            if flow.is_break() {
                break;
            }
        }
        if moved > 0 {
            self.merged.forward_lane_done(moved);
        }
        flow
    }

    /// Calls `visit` with the current entry's key and value, then with each entry before it
    /// in turn, as a loop of [`key`](Self::key), [`value`](Self::value) and
    /// [`prev`](Self::prev) would, until `visit` returns [`ControlFlow::Break`] or the
    /// entries run out. Returns as [`walk_forward`](Self::walk_forward) does.
    ///
    /// Faster than that loop over tables: a backward step decodes a block's restart run (16
    /// entries at the default `block_restart_interval`) at once, and the entries of that run
    /// reach `visit` from the block as it was decoded, without a copy or a step through the
    /// merge for each, while each is the only visible version of its key.
    ///
    /// # Example
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
    ///     db.put(k, v)?;
    /// }
    /// let mut it = db.iter()?;
    /// it.seek_to_last();
    /// let mut seen = Vec::new();
    /// let walked = it.walk_back(|key, value| {
    ///     seen.push((key.to_vec(), value.to_vec()));
    ///     ControlFlow::<()>::Continue(())
    /// });
    /// assert!(walked.is_continue());
    /// it.status()?;
    /// assert!(!it.valid()); // ran off the start
    /// let keys: Vec<&[u8]> = seen.iter().map(|(k, _)| k.as_slice()).collect();
    /// assert_eq!(keys, [b"c", b"b", b"a"]);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn walk_back<B>(
        &mut self,
        mut visit: impl FnMut(&[u8], &[u8]) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        while self.valid {
            let Ok(value) = self.try_value() else {
                break;
            };
            visit(self.current_key(), value)?;
            if self.direction == Direction::Reverse {
                self.walk_run_back(&mut visit)?;
                self.step_back();
            } else {
                self.prev();
            }
        }
        ControlFlow::Continue(())
    }

    /// Part of [`walk_back`](Self::walk_back), just after it visited the current entry:
    /// visits the entries before it that the merge's current child holds in the restart run
    /// its block cursor decoded stepping back ([`MergingIter::back_lane`]), from the run's
    /// buffers, down to the run's second entry. Each must be a value (not a deletion or a
    /// blob pointer) visible at the cursor's sequence number, with no range deletion in the
    /// view and no read sample due, whose user key comes after the user key of the entry
    /// before it in the run and after the runner-up's (so that it comes next, and is its
    /// key's newest entry: another child's entries of that key would sort before the
    /// runner-up, which is the largest they have left). It stops at the first entry
    /// that is not such an entry, leaving it to `prev`. The cursor is then on the last entry
    /// visited, exactly as `prev` would have left it there (its key and value saved, the
    /// merge on the entry before it); on the entry `visit` broke on, if it broke.
    fn walk_run_back<B>(
        &mut self,
        visit: &mut impl FnMut(&[u8], &[u8]) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        if !self.range_deletions.is_empty() {
            return ControlFlow::Continue(());
        }
        // The merge's entry itself would be refused if another child holds its key (a newer
        // version, in a tree that has not yet merged overwrites): told before the lane calls
        // into the child.
        let Some(BackLane {
            cursor,
            comparator,
            runner_up,
        }) = self.merged.back_lane(|comparator, key, runner_up| {
            comparator
                .compare_user(user_key(runner_up), user_key(key))
                .is_lt()
        })
        else {
            return ControlFlow::Continue(());
        };
        let Some(mut pos) = cursor.run_position() else {
            return ControlFlow::Continue(());
        };
        let runner_up = runner_up.map(user_key);
        let first = pos;
        // `last`: the last entry visited here (the cursor's new current entry), if any.
        let mut last = None;
        let mut flow = ControlFlow::Continue(());
        while pos > 0 {
            let (key, value) = cursor.run_entry(pos);
            let Some(k) = ParsedInternalKey::parse(key) else {
                break;
            };
            if k.kind != ValueKind::Value || k.seqno > self.seqno {
                break;
            }
            let Some(before) = ParsedInternalKey::parse(cursor.run_entry(pos - 1).0) else {
                break;
            };
            if !comparator.compare_user(before.user_key, k.user_key).is_lt()
                || runner_up.is_some_and(|r| !comparator.compare_user(r, k.user_key).is_lt())
            {
                break;
            }
            let bytes = (k.user_key.len() + value.len()) as u64;
            if !self.sampler.take_without_sample(bytes) {
                break;
            }
            last = Some(pos);
            flow = visit(k.user_key, value);
            pos -= 1;
            if flow.is_break() {
                break;
            }
        }
        let Some(last) = last else {
            return flow;
        };
        let (key, value) = cursor.run_entry(last);
        self.saved_key.set(user_key(key));
        self.saved_value.clear();
        self.saved_value.extend_from_slice(value);
        cursor.move_back_in_run(last - 1);
        self.merged.lane_moved(first - last + 1);
        self.resolved.take();
        self.blob = false;
        self.valid = true;
        flow
    }
}

// A cursor may move to another thread (the bindings hand them across): the merge's remembered
// slices must not take that away.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<DbIterator>();
};
