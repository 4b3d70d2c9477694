// SPDX-License-Identifier: MIT OR Apache-2.0
//! Range deletions: [`RangeTombstone`], one `delete_range(start, end)`, and [`Fragments`], the
//! tombstones of a memtable or a version cut into pieces that do not overlap, for lookups.
//!
//! A tombstone at seqno `t` deletes every entry of a key in `[start, end)` (in the user
//! comparator's order) whose seqno is below `t`. A reader at snapshot `s` sees the tombstones
//! with `t <= s`; the newest entry it would return for a key is deleted if some tombstone it
//! sees covers the key and is newer than that entry. So a lookup needs one number per key:
//! the largest seqno at or below `s` among the tombstones covering it
//! ([`Fragments::covering`]).
//!
//! Where tombstones live (see `docs/range-deletes.md`): in the memtable that took them, and
//! once it is flushed, in the version, recorded in the MANIFEST, until compaction has removed
//! every entry they delete. They are never stored in tables, so tables stay LevelDB's.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::coding::{put_length_prefixed, put_varint64, Decoder};
use crate::comparator::Comparator;
use crate::key::SeqNo;

/// One range deletion: the keys in `[start, end)`, as of `seqno`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// The first key deleted.
    pub start: Vec<u8>,
    /// The first key past the range (not deleted).
    pub end: Vec<u8>,
    /// The write's seqno: entries below it are deleted, entries at or above it are not.
    pub seqno: SeqNo,
}

impl RangeTombstone {
    /// Appends the MANIFEST encoding: varint64 seqno ‖ length-prefixed start ‖ length-prefixed
    /// end.
    pub(crate) fn encode_into(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.seqno);
        put_length_prefixed(dst, &self.start);
        put_length_prefixed(dst, &self.end);
    }

    /// Reads what [`encode_into`](Self::encode_into) wrote.
    pub(crate) fn decode_from(d: &mut Decoder<'_>) -> Option<RangeTombstone> {
        let seqno = d.varint64()?;
        let start = d.length_prefixed()?.to_vec();
        let end = d.length_prefixed()?.to_vec();
        Some(RangeTombstone { start, end, seqno })
    }

    /// True if the range and `[smallest, largest]` (a file's user keys, both included) share
    /// a key.
    pub(crate) fn overlaps(&self, ucmp: &dyn Comparator, smallest: &[u8], largest: &[u8]) -> bool {
        ucmp.compare(&self.start, largest) != Ordering::Greater
            && ucmp.compare(smallest, &self.end) == Ordering::Less
    }
}

/// One piece of the key space and the seqnos of the tombstones that cover all of it.
#[derive(Debug, Clone)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    /// Newest first, no repeats.
    seqnos: Vec<SeqNo>,
}

/// A set of tombstones cut at every start and end into fragments that do not overlap, sorted
/// by start: a lookup is a binary search.
///
/// Invariants: fragments ascend and do not overlap (`f[i].end <= f[i + 1].start`); each is
/// non-empty (`start < end`) and has at least one seqno.
#[derive(Clone)]
pub(crate) struct Fragments {
    fragments: Vec<Fragment>,
    ucmp: Arc<dyn Comparator>,
}

impl std::fmt::Debug for Fragments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.fragments).finish()
    }
}

impl Fragments {
    /// Fragments `tombstones` under `ucmp`. Tombstones whose end is not after their start
    /// cover nothing and are left out. Costs O(n log n) for the sort and, for each boundary,
    /// the tombstones open across it.
    pub(crate) fn new<'a>(
        tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
        ucmp: Arc<dyn Comparator>,
    ) -> Fragments {
        let c = &*ucmp;
        let mut list: Vec<&RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| c.compare(&t.start, &t.end) == Ordering::Less)
            .collect();
        list.sort_by(|a, b| c.compare(&a.start, &b.start));
        let mut bounds: Vec<&[u8]> = list
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        bounds.sort_by(|a, b| c.compare(a, b));
        bounds.dedup_by(|a, b| c.compare(a, b) == Ordering::Equal);
        let mut fragments = Vec::new();
        let mut open: Vec<&RangeTombstone> = Vec::new();
        let mut next = 0;
        for pair in bounds.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            while next < list.len() && c.compare(&list[next].start, from) != Ordering::Greater {
                open.push(list[next]);
                next += 1;
            }
            open.retain(|t| c.compare(&t.end, from) == Ordering::Greater);
            if open.is_empty() {
                continue;
            }
            let mut seqnos: Vec<SeqNo> = open.iter().map(|t| t.seqno).collect();
            seqnos.sort_unstable_by(|a, b| b.cmp(a));
            seqnos.dedup();
            fragments.push(Fragment {
                start: from.to_vec(),
                end: to.to_vec(),
                seqnos,
            });
        }
        Fragments { fragments, ucmp }
    }

    /// The newest seqno at or below `snapshot` of a tombstone covering `key`, if any.
    pub(crate) fn covering(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        let c = &*self.ucmp;
        let after = self
            .fragments
            .partition_point(|f| c.compare(&f.start, key) != Ordering::Greater);
        let f = self.fragments.get(after.checked_sub(1)?)?;
        if c.compare(key, &f.end) != Ordering::Less {
            return None;
        }
        f.seqnos.iter().copied().find(|&s| s <= snapshot)
    }
}

/// The newest seqno at or below `snapshot` of a tombstone covering `key` among several sets
/// (a memtable's, the immutable memtable's, the version's).
pub(crate) fn newest_covering<'a>(
    sets: impl IntoIterator<Item = &'a Fragments>,
    key: &[u8],
    snapshot: SeqNo,
) -> Option<SeqNo> {
    sets.into_iter()
        .filter_map(|f| f.covering(key, snapshot))
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::bytewise;

    fn t(start: &str, end: &str, seqno: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seqno,
        }
    }

    /// What `covering` must answer: the newest visible tombstone over `key`, by brute force.
    fn model(list: &[RangeTombstone], key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        list.iter()
            .filter(|t| t.seqno <= snapshot && t.start.as_slice() <= key && key < t.end.as_slice())
            .map(|t| t.seqno)
            .max()
    }

    #[test]
    fn covering_is_the_newest_visible_tombstone_over_the_key() {
        let list = [
            t("b", "f", 5),
            t("d", "h", 9),
            t("a", "c", 2),
            t("e", "e", 50),
        ];
        let f = Fragments::new(&list, bytewise());
        assert_eq!(f.covering(b"a", 100), Some(2));
        assert_eq!(f.covering(b"b", 100), Some(5));
        assert_eq!(f.covering(b"d", 100), Some(9));
        assert_eq!(f.covering(b"d", 8), Some(5));
        assert_eq!(f.covering(b"d", 4), None);
        assert_eq!(f.covering(b"f", 100), Some(9), "end of one, inside another");
        assert_eq!(f.covering(b"h", 100), None, "end excluded");
        assert_eq!(
            f.covering(b"e", 100),
            Some(9),
            "an empty range covers nothing"
        );
        assert_eq!(f.covering(b"", 100), None);
        assert_eq!(f.covering(b"z", 100), None);
    }

    /// Every key and snapshot, over random sets of tombstones on a small alphabet, against
    /// the brute-force model.
    #[test]
    fn random_sets_agree_with_the_model() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let key = |i: u64| vec![b'a' + i as u8];
        for _ in 0..300 {
            let list: Vec<RangeTombstone> = (0..next(8))
                .map(|_| RangeTombstone {
                    start: key(next(10)),
                    end: key(next(11)),
                    seqno: 1 + next(20),
                })
                .collect();
            let f = Fragments::new(&list, bytewise());
            for k in 0..12 {
                for snapshot in 0..22 {
                    assert_eq!(
                        f.covering(&key(k), snapshot),
                        model(&list, &key(k), snapshot),
                        "{list:?} key {k} snapshot {snapshot}"
                    );
                }
            }
        }
    }

    #[test]
    fn encoding_round_trips() {
        let tomb = t("from", "to", 77);
        let mut buf = Vec::new();
        tomb.encode_into(&mut buf);
        let mut d = Decoder::new(&buf);
        assert_eq!(RangeTombstone::decode_from(&mut d), Some(tomb));
        assert!(d.is_empty());
        assert_eq!(
            RangeTombstone::decode_from(&mut Decoder::new(&buf[..3])),
            None
        );
    }

    #[test]
    fn overlaps_follows_the_bounds() {
        let c = bytewise();
        let tomb = t("c", "f", 1);
        assert!(tomb.overlaps(&*c, b"a", b"c"));
        assert!(!tomb.overlaps(&*c, b"a", b"b"));
        assert!(!tomb.overlaps(&*c, b"f", b"z"), "the end is not deleted");
        assert!(tomb.overlaps(&*c, b"e", b"z"));
    }
}
