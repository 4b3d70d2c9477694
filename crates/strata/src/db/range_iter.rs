// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`RangeIter`]: a key range (or a prefix) as a Rust iterator in either direction, on two
//! cursors from one source, each end stopping at the other's last key.

use std::iter::FusedIterator;
use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};
use std::sync::{Arc, Weak};

use super::iter::{CursorSource, DbIterator};
use super::DbInner;
use crate::comparator::KeyRange;
use crate::error::Result;
use crate::options::ReadOptions;

/// The bounds given to [`Db::range`](crate::Db::range): every form of Rust range (`..`,
/// `a..b`, `a..=b`, `a..`, `..b`, `..=b`) and a `(Bound, Bound)` pair, over any byte-like key
/// type (`&[u8]`, `&str`, `Vec<u8>`, `String`, `[u8; N]`, and references to them).
///
/// # Example
///
/// ```
/// use std::ops::Bound;
/// use strata::IntoKeyRange;
///
/// assert_eq!(("a".."c").into_key_range(), (Bound::Included(b"a".to_vec()), Bound::Excluded(b"c".to_vec())));
/// assert_eq!((..).into_key_range(), (Bound::Unbounded, Bound::Unbounded));
/// let (start, end) = (Bound::Excluded(vec![1u8]), Bound::Unbounded::<Vec<u8>>);
/// assert_eq!((start, end).into_key_range().0, Bound::Excluded(vec![1]));
/// ```
pub trait IntoKeyRange {
    /// The range's start and end, as owned bytes.
    fn into_key_range(self) -> KeyRange;
}

fn owned<K: AsRef<[u8]>>(bound: Bound<&K>) -> Bound<Vec<u8>> {
    bound.map(|k| k.as_ref().to_vec())
}

impl IntoKeyRange for RangeFull {
    fn into_key_range(self) -> KeyRange {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> IntoKeyRange for Range<K> {
    fn into_key_range(self) -> KeyRange {
        (
            Bound::Included(self.start.as_ref().to_vec()),
            Bound::Excluded(self.end.as_ref().to_vec()),
        )
    }
}

impl<K: AsRef<[u8]>> IntoKeyRange for RangeInclusive<K> {
    fn into_key_range(self) -> KeyRange {
        let (start, end) = (
            owned(Bound::Included(self.start())),
            owned(Bound::Included(self.end())),
        );
        (start, end)
    }
}

impl<K: AsRef<[u8]>> IntoKeyRange for RangeFrom<K> {
    fn into_key_range(self) -> KeyRange {
        (
            Bound::Included(self.start.as_ref().to_vec()),
            Bound::Unbounded,
        )
    }
}

impl<K: AsRef<[u8]>> IntoKeyRange for RangeTo<K> {
    fn into_key_range(self) -> KeyRange {
        (
            Bound::Unbounded,
            Bound::Excluded(self.end.as_ref().to_vec()),
        )
    }
}

impl<K: AsRef<[u8]>> IntoKeyRange for RangeToInclusive<K> {
    fn into_key_range(self) -> KeyRange {
        (
            Bound::Unbounded,
            Bound::Included(self.end.as_ref().to_vec()),
        )
    }
}

impl<K: AsRef<[u8]>> IntoKeyRange for (Bound<K>, Bound<K>) {
    fn into_key_range(self) -> KeyRange {
        (owned(self.0.as_ref()), owned(self.1.as_ref()))
    }
}

/// The entries of a key range, in key order, as a Rust iterator; `.rev()` walks it backward.
/// Each item is a `(key, value)` pair or the error that ended the scan.
///
/// Created by [`Db::range`](crate::Db::range) and [`Db::prefix`](crate::Db::prefix). Both ends
/// may be consumed in turn (it is a [`DoubleEndedIterator`]); it ends when they meet.
///
/// It is fused ([`FusedIterator`]): once it has returned `None` or an error, every further
/// call of any of its methods ([`next`](Iterator::next), `next_back`,
/// [`next_borrowed`](Self::next_borrowed), [`next_back_borrowed`](Self::next_back_borrowed),
/// and those of [`keys`](Self::keys)) returns `None`. None of them panics, whatever the order
/// of the calls.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for k in ["apple", "apricot", "banana"] {
///     db.put(k, "fruit")?;
/// }
/// let entries: Vec<(Vec<u8>, Vec<u8>)> = db.prefix("ap")?.rev().collect::<Result<_, _>>()?;
/// assert_eq!(entries[0], (b"apricot".to_vec(), b"fruit".to_vec()));
/// assert_eq!(entries[1].0, b"apple");
/// # Ok::<(), strata::Error>(())
/// ```
pub struct RangeIter {
    /// Both ends' cursors come from one source, so they see the same entries.
    source: CursorSource,
    /// Each end's cursor, built on first use; once built, it stays on the last key that end
    /// returned (the other end stops before that key), or the range is done.
    front: Option<DbIterator>,
    back: Option<DbIterator>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// For [`Db::prefix`](crate::Db::prefix): only keys starting with it are returned, the
    /// others within the bounds skipped (in an arbitrary order they need not be contiguous).
    prefix: Option<Vec<u8>>,
    done: bool,
}

impl std::fmt::Debug for RangeIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter")
            .field("done", &self.done)
            .finish()
    }
}

impl Drop for RangeIter {
    fn drop(&mut self) {
        // The cursors release their views first; the source's is the last to go.
        self.front = None;
        self.back = None;
        if let Some(inner) = self.source.db.as_ref().and_then(Weak::upgrade) {
            inner.release_view(&mut self.source.view);
        }
    }
}

impl RangeIter {
    pub(crate) fn new(
        inner: &Arc<DbInner>,
        options: &ReadOptions<'_>,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> Result<RangeIter> {
        Ok(RangeIter {
            source: CursorSource::new(inner, options)?,
            front: None,
            back: None,
            start,
            end,
            prefix: None,
            done: false,
        })
    }

    /// The entries within the bounds whose keys start with `prefix`.
    pub(crate) fn with_prefix(
        inner: &Arc<DbInner>,
        options: &ReadOptions<'_>,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        prefix: Vec<u8>,
    ) -> Result<RangeIter> {
        let mut range = RangeIter::new(inner, options, start, end)?;
        range.prefix = Some(prefix);
        Ok(range)
    }

    /// Checks the entry the front (`forward`) or back cursor stands on: `Some(Ok(()))` if it
    /// is the end's next entry, or ends the range if that cursor ran out, passed the range's
    /// far bound, or reached the other end's last key. Entries outside the prefix are stepped
    /// over, in the same direction.
    fn settle(&mut self, forward: bool) -> Option<Result<()>> {
        loop {
            let (this, other) = if forward {
                (&self.front, &self.back)
            } else {
                (&self.back, &self.front)
            };
            let this = this.as_ref().expect("the cursor was just positioned");
            if !this.valid() {
                let status = this.status();
                return self.finish_with(status);
            }
            let ucmp = self.source.icmp.user_comparator();
            let key = this.key();
            let crossed = other.as_ref().is_some_and(|o| {
                let order = ucmp.compare(key, o.key());
                if forward {
                    order.is_ge()
                } else {
                    order.is_le()
                }
            });
            let outside = if forward {
                match &self.end {
                    Bound::Unbounded => false,
                    Bound::Included(e) => ucmp.compare(key, e).is_gt(),
                    Bound::Excluded(e) => ucmp.compare(key, e).is_ge(),
                }
            } else {
                match &self.start {
                    Bound::Unbounded => false,
                    Bound::Included(s) => ucmp.compare(key, s).is_lt(),
                    Bound::Excluded(s) => ucmp.compare(key, s).is_le(),
                }
            };
            if crossed || outside {
                self.done = true;
                return None;
            }
            if self.prefix.as_ref().is_some_and(|p| !key.starts_with(p)) {
                let this = if forward {
                    &mut self.front
                } else {
                    &mut self.back
                };
                let this = this.as_mut().expect("checked valid above");
                if forward {
                    this.next();
                } else {
                    this.prev();
                }
                continue;
            }
            return Some(Ok(()));
        }
    }

    fn finish_with(&mut self, cursor_status: Result<()>) -> Option<Result<()>> {
        self.done = true;
        cursor_status.err().map(Err)
    }

    /// The cursor of the front (`forward`) or back end. Requires that end to be positioned.
    fn end_cursor(&self, forward: bool) -> &DbIterator {
        let cursor = if forward { &self.front } else { &self.back };
        cursor.as_ref().expect("the end was positioned")
    }

    /// The entry the end just settled on, borrowed from its cursor; an error reading its value
    /// ends the range.
    fn entry(&mut self, forward: bool) -> Option<Result<(&[u8], &[u8])>> {
        if let Err(e) = self.end_cursor(forward).try_value() {
            self.done = true;
            return Some(Err(e));
        }
        let cursor = self.end_cursor(forward);
        Some(Ok((
            cursor.key(),
            cursor.try_value().expect("read just above"),
        )))
    }

    /// The next entry from the front, borrowed from the cursor: no copy of its key or value.
    /// The borrow lasts until the range is advanced again. As [`Iterator::next`] otherwise.
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "12")?;
    /// db.put("b", "345")?;
    /// let (mut range, mut value_bytes) = (db.scan()?, 0);
    /// while let Some(entry) = range.next_borrowed() {
    ///     let (_key, value) = entry?;
    ///     value_bytes += value.len();
    /// }
    /// assert_eq!(value_bytes, 5);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn next_borrowed(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        match self.advance(true)? {
            Ok(()) => self.entry(true),
            Err(e) => Some(Err(e)),
        }
    }

    /// The next entry from the back, borrowed: [`next_borrowed`](Self::next_borrowed) in
    /// descending order.
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// let mut range = db.scan()?;
    /// assert_eq!(range.next_back_borrowed().transpose()?, Some((&b"b"[..], &b"2"[..])));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn next_back_borrowed(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        match self.advance(false)? {
            Ok(()) => self.entry(false),
            Err(e) => Some(Err(e)),
        }
    }

    /// The keys only, copied; values are never read (a value kept in a blob file is not
    /// fetched). Double-ended, as the range is.
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for k in ["user:1", "user:2", "vendor:1"] {
    ///     db.put(k, "v")?;
    /// }
    /// let users: Vec<Vec<u8>> = db.prefix("user:")?.keys().collect::<Result<_, _>>()?;
    /// assert_eq!(users, [b"user:1", b"user:2"]);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn keys(self) -> Keys {
        Keys(self)
    }
}

/// The keys of a [`RangeIter`], copied, its values never read: made by [`RangeIter::keys`].
/// Fused and double-ended, as the range is.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put("a", "1")?;
/// db.put("b", "2")?;
/// let mut keys = db.scan()?.keys();
/// assert_eq!(keys.next_back().transpose()?, Some(b"b".to_vec()));
/// assert_eq!(keys.next().transpose()?, Some(b"a".to_vec()));
/// assert!(keys.next().is_none() && keys.next_back().is_none()); // the ends met
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug)]
pub struct Keys(RangeIter);

impl Iterator for Keys {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(
            self.0
                .advance(true)?
                .map(|()| self.0.end_cursor(true).key().to_vec()),
        )
    }
}

impl FusedIterator for Keys {}

impl DoubleEndedIterator for Keys {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some(
            self.0
                .advance(false)?
                .map(|()| self.0.end_cursor(false).key().to_vec()),
        )
    }
}

impl RangeIter {
    /// Moves the front end to its next entry (the range's first, the first time) and settles
    /// on it.
    fn advance_front(&mut self) -> Option<Result<()>> {
        if self.done {
            return None;
        }
        match &mut self.front {
            Some(front) => front.next(),
            None => {
                let mut front = match self.source.cursor() {
                    Ok(c) => c,
                    Err(e) => return self.finish_with(Err(e)),
                };
                match &self.start {
                    Bound::Unbounded => front.seek_to_first(),
                    Bound::Included(s) => front.seek(s),
                    Bound::Excluded(s) => {
                        front.seek(s);
                        if front.valid()
                            && self
                                .source
                                .icmp
                                .user_comparator()
                                .compare(front.key(), s)
                                .is_eq()
                        {
                            front.next();
                        }
                    }
                }
                self.front = Some(front);
            }
        };
        self.settle(true)
    }

    /// Moves the back end to its next entry (the range's last, the first time) and settles
    /// on it.
    fn advance_back(&mut self) -> Option<Result<()>> {
        if self.done {
            return None;
        }
        match &mut self.back {
            Some(back) => back.prev(),
            None => {
                let mut back = match self.source.cursor() {
                    Ok(c) => c,
                    Err(e) => return self.finish_with(Err(e)),
                };
                match &self.end {
                    Bound::Unbounded => back.seek_to_last(),
                    Bound::Included(e) | Bound::Excluded(e) => {
                        let inclusive = matches!(self.end, Bound::Included(_));
                        back.seek(e);
                        if !back.valid() {
                            if back.status().is_err() {
                                let status = back.status();
                                return self.finish_with(status);
                            }
                            back.seek_to_last();
                        } else if !(inclusive
                            && self
                                .source
                                .icmp
                                .user_comparator()
                                .compare(back.key(), e)
                                .is_eq())
                        {
                            back.prev();
                        }
                    }
                }
                self.back = Some(back);
            }
        };
        self.settle(false)
    }

    fn advance(&mut self, forward: bool) -> Option<Result<()>> {
        if forward {
            self.advance_front()
        } else {
            self.advance_back()
        }
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_borrowed()?.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some(
            self.next_back_borrowed()?
                .map(|(k, v)| (k.to_vec(), v.to_vec())),
        )
    }
}

impl FusedIterator for RangeIter {}
