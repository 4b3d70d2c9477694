// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`DbIterator`], the user's cursor over the database, and [`RangeIter`], a Rust iterator over
//! a key range in either direction.
//!
//! The cursor merges the memtables and every table, and shows, for each user key, the newest
//! entry visible at its seqno, hiding deleted keys. Moving forward, it is positioned on the
//! current entry of the merge. Moving backward, the merge is positioned just before all the
//! entries of the current user key, and the cursor keeps a copy of the current key and value.

use std::ops::Bound;
use std::sync::Arc;

use super::{DbInner, ReadView};
use crate::comparator::Comparator;
use crate::error::{Error, Result};
use crate::iter::{BoxedIter, InternalIterator, MergingIter};
use crate::key::{append_internal_key, user_key, ParsedInternalKey, SeqNo, ValueKind};
use crate::options::ReadOptions;
use crate::table::BlockReadOptions;

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
/// # Example
///
/// ```
/// use strata::{Db, Options, ReadOptions, WriteOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for k in ["a", "b", "c"] {
///     db.put(&WriteOptions::default(), k.as_bytes(), b"v")?;
/// }
/// let mut it = db.iter(&ReadOptions::default())?;
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
    merged: MergingIter,
    ucmp: Arc<dyn Comparator>,
    seqno: SeqNo,
    direction: Direction,
    valid: bool,
    /// Reverse: the current key. Forward: scratch for the key being skipped.
    saved_key: Vec<u8>,
    /// Reverse: the current value.
    saved_value: Vec<u8>,
    error: Option<Error>,
    /// Keeps the version (and so its files) alive.
    _view: Arc<ReadView>,
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
    let seqno = inner.read_seqno(options)?;
    let view = inner.view.load_full();
    let read = BlockReadOptions {
        verify_checksums: options.verify_checksums,
        fill_cache: options.fill_cache,
    };
    let mut children: Vec<BoxedIter> = vec![Box::new(view.mem.iter())];
    if let Some(imm) = &view.imm {
        children.push(Box::new(imm.iter()));
    }
    view.version
        .add_iterators(read, &inner.table_cache, &mut children)?;
    let icmp: Arc<dyn Comparator> = Arc::new(inner.icmp.clone());
    Ok(DbIterator {
        merged: MergingIter::new(icmp, children),
        ucmp: inner.icmp.user_comparator().clone(),
        seqno,
        direction: Direction::Forward,
        valid: false,
        saved_key: Vec::new(),
        saved_value: Vec::new(),
        error: None,
        _view: view,
    })
}

impl DbIterator {
    /// True if the cursor is on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key. Requires [`valid`](Self::valid).
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "DbIterator::key on an invalid cursor");
        match self.direction {
            Direction::Forward => user_key(self.merged.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value. Requires [`valid`](Self::valid).
    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "DbIterator::value on an invalid cursor");
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
        self.merged.status()
    }

    /// Stops the cursor on a key that is not a valid internal key.
    fn malformed_key(&mut self) {
        self.error = Some(Error::corruption(
            "",
            0,
            "the database holds a malformed internal key",
        ));
        self.stop();
    }

    fn stop(&mut self) {
        self.valid = false;
        self.saved_key.clear();
        self.saved_value.clear();
    }

    /// Moves to the first entry at or after the merge's position that is visible and not
    /// deleted (skipping entries of `saved_key` if `skipping`).
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        debug_assert_eq!(self.direction, Direction::Forward);
        while self.merged.valid() {
            let Some(k) = ParsedInternalKey::parse(self.merged.key()) else {
                return self.malformed_key();
            };
            if k.seqno <= self.seqno {
                match k.kind {
                    ValueKind::Deletion => {
                        // Hide every older entry of this key.
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(k.user_key);
                        skipping = true;
                    }
                    ValueKind::Value => {
                        let hidden =
                            skipping && self.ucmp.compare(k.user_key, &self.saved_key).is_le();
                        if !hidden {
                            self.valid = true;
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
        debug_assert_eq!(self.direction, Direction::Reverse);
        let mut kind = ValueKind::Deletion;
        while self.merged.valid() {
            let Some(k) = ParsedInternalKey::parse(self.merged.key()) else {
                return self.malformed_key();
            };
            if k.seqno <= self.seqno {
                if kind != ValueKind::Deletion
                    && self.ucmp.compare(k.user_key, &self.saved_key).is_lt()
                {
                    // An entry of an earlier key: the current key's newest entry is saved.
                    break;
                }
                kind = k.kind;
                match kind {
                    ValueKind::Deletion => {
                        self.saved_key.clear();
                        self.saved_value.clear();
                    }
                    ValueKind::Value => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(k.user_key);
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(self.merged.value());
                    }
                }
            }
            self.merged.prev();
        }
        if kind == ValueKind::Deletion {
            // Ran off the start with nothing visible.
            self.stop();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
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
        self.saved_key.clear();
        append_internal_key(&mut self.saved_key, key, self.seqno, ValueKind::FOR_SEEK);
        let target = std::mem::take(&mut self.saved_key);
        self.merged.seek(&target);
        self.saved_key = target;
        self.find_next_user_entry(false);
    }

    /// Moves to the next entry. Requires [`valid`](Self::valid).
    pub fn next(&mut self) {
        assert!(self.valid, "DbIterator::next on an invalid cursor");
        if self.direction == Direction::Reverse {
            // The merge is before the current key's entries: step into them, then skip them.
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
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(user_key(self.merged.key()));
            self.merged.next();
            if !self.merged.valid() {
                return self.stop();
            }
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous entry. Requires [`valid`](Self::valid).
    pub fn prev(&mut self) {
        assert!(self.valid, "DbIterator::prev on an invalid cursor");
        if self.direction == Direction::Forward {
            // Move the merge before every entry of the current key.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(user_key(self.merged.key()));
            loop {
                self.merged.prev();
                if !self.merged.valid() {
                    return self.stop();
                }
                if self
                    .ucmp
                    .compare(user_key(self.merged.key()), &self.saved_key)
                    .is_lt()
                {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }
}

/// The entries of a key range, in key order, as a Rust iterator; `.rev()` walks it backward.
/// Each item is a `(key, value)` pair or the error that ended the scan.
///
/// Created by [`Db::range`](crate::Db::range) and [`Db::prefix`](crate::Db::prefix). Both ends
/// may be consumed in turn (it is a [`DoubleEndedIterator`]); it ends when they meet.
///
/// # Example
///
/// ```
/// use strata::{Db, Options, ReadOptions, WriteOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for k in ["apple", "apricot", "banana"] {
///     db.put(&WriteOptions::default(), k.as_bytes(), b"fruit")?;
/// }
/// let keys: Vec<Vec<u8>> = db
///     .prefix(&ReadOptions::default(), b"ap")?
///     .rev()
///     .map(|item| item.map(|(k, _)| k))
///     .collect::<Result<_, _>>()?;
/// assert_eq!(keys, vec![b"apricot".to_vec(), b"apple".to_vec()]);
/// # Ok::<(), strata::Error>(())
/// ```
pub struct RangeIter {
    front: DbIterator,
    back: DbIterator,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    front_started: bool,
    back_started: bool,
    /// The last key each end returned: the other end stops before it.
    last_front: Option<Vec<u8>>,
    last_back: Option<Vec<u8>>,
    done: bool,
}

impl std::fmt::Debug for RangeIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter")
            .field("done", &self.done)
            .finish()
    }
}

impl RangeIter {
    pub(crate) fn new(
        inner: &Arc<DbInner>,
        options: &ReadOptions<'_>,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> Result<RangeIter> {
        // Both cursors read at the same seqno.
        let seqno = inner.read_seqno(options)?;
        let front = new_iterator(inner, options)?;
        let mut back = new_iterator(inner, options)?;
        back.seqno = seqno;
        let mut front = front;
        front.seqno = seqno;
        Ok(RangeIter {
            front,
            back,
            start,
            end,
            front_started: false,
            back_started: false,
            last_front: None,
            last_back: None,
            done: false,
        })
    }

    fn ucmp(&self) -> &Arc<dyn Comparator> {
        &self.front.ucmp
    }

    fn before_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => self.ucmp().compare(key, e).is_le(),
            Bound::Excluded(e) => self.ucmp().compare(key, e).is_lt(),
        }
    }

    fn after_start(&self, key: &[u8]) -> bool {
        match &self.start {
            Bound::Unbounded => true,
            Bound::Included(s) => self.ucmp().compare(key, s).is_ge(),
            Bound::Excluded(s) => self.ucmp().compare(key, s).is_gt(),
        }
    }

    fn finish_with(&mut self, cursor_status: Result<()>) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        self.done = true;
        cursor_status.err().map(Err)
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.front_started {
            self.front_started = true;
            match self.start.clone() {
                Bound::Unbounded => self.front.seek_to_first(),
                Bound::Included(s) => self.front.seek(&s),
                Bound::Excluded(s) => {
                    self.front.seek(&s);
                    if self.front.valid() && self.ucmp().compare(self.front.key(), &s).is_eq() {
                        self.front.next();
                    }
                }
            }
        } else if self.front.valid() {
            self.front.next();
        }
        if !self.front.valid() {
            let status = self.front.status();
            return self.finish_with(status);
        }
        let key = self.front.key();
        let crossed = self
            .last_back
            .as_deref()
            .is_some_and(|b| self.ucmp().compare(key, b).is_ge());
        if crossed || !self.before_end(key) {
            self.done = true;
            return None;
        }
        let item = (key.to_vec(), self.front.value().to_vec());
        self.last_front = Some(item.0.clone());
        Some(Ok(item))
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.back_started {
            self.back_started = true;
            match self.end.clone() {
                Bound::Unbounded => self.back.seek_to_last(),
                Bound::Included(e) | Bound::Excluded(e) => {
                    let inclusive = matches!(self.end, Bound::Included(_));
                    self.back.seek(&e);
                    if !self.back.valid() {
                        if self.back.status().is_err() {
                            let status = self.back.status();
                            return self.finish_with(status);
                        }
                        self.back.seek_to_last();
                    } else if !(inclusive && self.ucmp().compare(self.back.key(), &e).is_eq()) {
                        self.back.prev();
                    }
                }
            }
        } else if self.back.valid() {
            self.back.prev();
        }
        if !self.back.valid() {
            let status = self.back.status();
            return self.finish_with(status);
        }
        let key = self.back.key();
        let crossed = self
            .last_front
            .as_deref()
            .is_some_and(|f| self.ucmp().compare(key, f).is_le());
        if crossed || !self.after_start(key) {
            self.done = true;
            return None;
        }
        let item = (key.to_vec(), self.back.value().to_vec());
        self.last_back = Some(item.0.clone());
        Some(Ok(item))
    }
}
