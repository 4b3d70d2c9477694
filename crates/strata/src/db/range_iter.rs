// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`RangeIter`]: a key range (or a prefix) as a Rust iterator in either direction, on two
//! cursors from one source, each end stopping at the other's last key.

use std::ops::Bound;
use std::sync::{Arc, Weak};

use super::iter::{CursorSource, DbIterator};
use super::DbInner;
use crate::error::Result;
use crate::options::ReadOptions;

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

    /// Returns the entry the front (`forward`) or back cursor stands on, or ends the range if
    /// that cursor ran out, passed the range's far bound, or reached the other end's last key.
    /// Entries outside the prefix are stepped over, in the same direction.
    fn emit(&mut self, forward: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
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
            return match this.try_value() {
                Ok(value) => Some(Ok((key.to_vec(), value.to_vec()))),
                Err(e) => {
                    self.done = true;
                    Some(Err(e))
                }
            };
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
        self.emit(true)
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Self::Item> {
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
        self.emit(false)
    }
}
