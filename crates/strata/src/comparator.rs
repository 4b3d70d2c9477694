// SPDX-License-Identifier: MIT OR Apache-2.0
//! The order of user keys.
//!
//! A [`Comparator`] defines a total order on byte strings and two helpers that let tables store
//! short index keys. Its [`name`](Comparator::name) is recorded in the MANIFEST, and a database
//! may only be opened with a comparator of the same name.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

/// A range of keys in a comparator's order: its start and end bounds.
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A total order over keys, plus the key-shortening helpers used for table indexes.
///
/// Implementations must be consistent for the life of a database: the same name must always mean
/// the same order.
///
/// # Example
///
/// A comparator that orders keys in reverse:
///
/// ```
/// use std::cmp::Ordering;
/// use strata::Comparator;
///
/// struct Reverse;
/// impl Comparator for Reverse {
///     fn name(&self) -> &str { "example.Reverse" }
///     fn compare(&self, a: &[u8], b: &[u8]) -> Ordering { b.cmp(a) }
///     fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}
///     fn find_short_successor(&self, _key: &mut Vec<u8>) {}
/// }
/// assert_eq!(Reverse.compare(b"a", b"b"), Ordering::Greater);
/// ```
pub trait Comparator: Send + Sync {
    /// The name stored in the MANIFEST. Change it whenever the order changes.
    fn name(&self) -> &str;

    /// True if this order is exactly bytewise (`a.cmp(b)` on the bytes). strata then compares
    /// keys itself, inline, without calling [`compare`](Self::compare) (the hot path of every
    /// lookup). The default is `false`, so a comparator is always called unless it says this;
    /// [`BytewiseComparator`] does.
    ///
    /// ```
    /// use strata::{BytewiseComparator, Comparator};
    /// assert!(BytewiseComparator.is_bytewise());
    /// ```
    fn is_bytewise(&self) -> bool {
        false
    }

    /// Three-way comparison of `a` and `b`.
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;

    /// Given `start < limit`, may change `start` to a shorter key in `[start, limit)`.
    /// Leaving `start` unchanged is always correct.
    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]);

    /// May change `key` to a shorter key that is `>= key`. Leaving it unchanged is always correct.
    fn find_short_successor(&self, key: &mut Vec<u8>);

    /// A range of this order holding every key that starts with the bytes `prefix`, if there
    /// is one worth seeking to; [`Db::prefix`](crate::Db::prefix) then reads only that range.
    ///
    /// Requires of an implementation: every key starting with `prefix` lies within the bounds
    /// returned (under [`compare`](Self::compare)). The range may hold other keys too:
    /// `Db::prefix` keeps only those that start with `prefix`, so a wider range costs reads,
    /// never correctness; a narrower one loses keys.
    ///
    /// The default, `None`, promises nothing: in an arbitrary order the keys with a given byte
    /// prefix need not even be contiguous, and `Db::prefix` reads every key to find them.
    /// [`BytewiseComparator`] returns `[prefix, successor of prefix)`.
    ///
    /// # Example
    ///
    /// Descending bytewise order keeps each prefix's keys together, ending at the prefix itself:
    ///
    /// ```
    /// use std::cmp::Ordering;
    /// use std::ops::Bound;
    /// use strata::{Comparator, KeyRange};
    ///
    /// struct Reverse;
    /// impl Comparator for Reverse {
    ///     fn name(&self) -> &str { "example.Reverse" }
    ///     fn compare(&self, a: &[u8], b: &[u8]) -> Ordering { b.cmp(a) }
    ///     fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}
    ///     fn find_short_successor(&self, _key: &mut Vec<u8>) {}
    ///     fn prefix_range(&self, prefix: &[u8]) -> Option<KeyRange> {
    ///         // Keys starting with `prefix` are bytewise below its successor, and at or
    ///         // above `prefix`: here, after the successor and at or before `prefix`.
    ///         let start = strata::BytewiseComparator::prefix_successor(prefix)
    ///             .map_or(Bound::Unbounded, Bound::Excluded);
    ///         Some((start, Bound::Included(prefix.to_vec())))
    ///     }
    /// }
    /// assert!(Reverse.prefix_range(b"ab").is_some());
    /// ```
    fn prefix_range(&self, prefix: &[u8]) -> Option<KeyRange> {
        let _ = prefix;
        None
    }
}

/// LevelDB's default order: lexicographic over unsigned bytes, named
/// `leveldb.BytewiseComparator`.
///
/// # Example
///
/// ```
/// use strata::{BytewiseComparator, Comparator};
/// let mut start = b"abcdef".to_vec();
/// BytewiseComparator.find_shortest_separator(&mut start, b"abzz");
/// assert_eq!(start, b"abd");
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct BytewiseComparator;

impl BytewiseComparator {
    /// The name LevelDB records for this order.
    pub const NAME: &'static str = "leveldb.BytewiseComparator";

    /// The shortest byte string greater than every string starting with `prefix`, or `None`
    /// if there is none (`prefix` is empty or all `0xff`).
    ///
    /// # Example
    ///
    /// ```
    /// use strata::BytewiseComparator;
    /// assert_eq!(BytewiseComparator::prefix_successor(b"ab\xff"), Some(b"ac".to_vec()));
    /// assert_eq!(BytewiseComparator::prefix_successor(b"\xff\xff"), None);
    /// ```
    pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
        let i = prefix.iter().rposition(|&b| b != 0xff)?;
        let mut end = prefix[..=i].to_vec();
        end[i] += 1;
        Some(end)
    }
}

impl Comparator for BytewiseComparator {
    fn name(&self) -> &str {
        Self::NAME
    }

    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_bytes(a, b)
    }

    fn is_bytewise(&self) -> bool {
        true
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let common = common_prefix_len(start, limit);
        if common >= start.len().min(limit.len()) {
            // One is a prefix of the other: no shorter separator.
            return;
        }
        let byte = start[common];
        if byte < 0xff && byte + 1 < limit[common] {
            start[common] = byte + 1;
            start.truncate(common + 1);
            debug_assert!(self.compare(start, limit) == Ordering::Less);
        }
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        if let Some(i) = key.iter().position(|&b| b != 0xff) {
            key[i] += 1;
            key.truncate(i + 1);
        }
    }

    fn prefix_range(&self, prefix: &[u8]) -> Option<KeyRange> {
        let end = Self::prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Some((Bound::Included(prefix.to_vec()), end))
    }
}

/// Bytewise order (`a.cmp(b)`), eight bytes at a time as big-endian words: database keys are
/// short, and a call to `memcmp` costs more than the comparison of a 16-byte key.
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut x, mut y) = (&a[..n], &b[..n]);
    while let (Some((wa, ra)), Some((wb, rb))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        if wa != wb {
            return u64::from_be_bytes(*wa).cmp(&u64::from_be_bytes(*wb));
        }
        (x, y) = (ra, rb);
    }
    for (ca, cb) in x.iter().zip(y) {
        if ca != cb {
            return ca.cmp(cb);
        }
    }
    a.len().cmp(&b.len())
}

/// The length of the longest prefix `a` and `b` share.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The default comparator, shared.
pub fn bytewise() -> Arc<dyn Comparator> {
    Arc::new(BytewiseComparator)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `compare_bytes` is `a.cmp(b)`: over keys of every length up to 40 that share prefixes of
    /// every length (so that the word loop, the byte tail and the length decide in turn).
    #[test]
    fn compare_bytes_is_slice_order() {
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        for len in 1..=40usize {
            let base: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            for flip in [0, len / 2, len - 1] {
                for delta in [1u8, 0x80, 0xff] {
                    let mut k = base.clone();
                    k[flip] = k[flip].wrapping_add(delta);
                    keys.push(k);
                }
            }
            keys.push(base);
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    fn separator(a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut s = a.to_vec();
        BytewiseComparator.find_shortest_separator(&mut s, b);
        s
    }

    fn successor(a: &[u8]) -> Vec<u8> {
        let mut s = a.to_vec();
        BytewiseComparator.find_short_successor(&mut s);
        s
    }

    #[test]
    fn separators_match_leveldb() {
        assert_eq!(separator(b"abcdef", b"abzz"), b"abd");
        assert_eq!(separator(b"abc", b"abd"), b"abc");
        assert_eq!(separator(b"abc", b"abcd"), b"abc");
        assert_eq!(separator(b"a\xffb", b"a\xffd"), b"a\xffc");
        assert_eq!(separator(b"helloworld", b"hellp"), b"helloworld");
        assert_eq!(separator(b"key000099", b"key000100"), b"key000099");
    }

    #[test]
    fn successors_match_leveldb() {
        assert_eq!(successor(b"abc"), b"b");
        assert_eq!(successor(b"\xff\xffa"), b"\xff\xffb");
        assert_eq!(successor(b"\xff\xff"), b"\xff\xff");
        assert_eq!(successor(b""), b"");
    }

    #[test]
    fn bytewise_prefix_range_is_the_prefix_up_to_its_successor() {
        let range = |p: &[u8]| BytewiseComparator.prefix_range(p);
        assert_eq!(
            range(b"ab"),
            Some((
                Bound::Included(b"ab".to_vec()),
                Bound::Excluded(b"ac".to_vec())
            ))
        );
        assert_eq!(
            range(b"a\xff\xff"),
            Some((
                Bound::Included(b"a\xff\xff".to_vec()),
                Bound::Excluded(b"b".to_vec())
            ))
        );
        assert_eq!(
            range(b"\xff"),
            Some((Bound::Included(b"\xff".to_vec()), Bound::Unbounded))
        );
        assert_eq!(
            range(b""),
            Some((Bound::Included(Vec::new()), Bound::Unbounded))
        );
    }

    #[test]
    fn name_is_leveldbs() {
        assert_eq!(BytewiseComparator.name(), "leveldb.BytewiseComparator");
    }
}
