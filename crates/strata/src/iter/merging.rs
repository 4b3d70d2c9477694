// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`MergingIter`]: one sorted view over several sorted cursors (memtables, level-0 tables,
//! levels).
//!
//! Forward, the current entry is the smallest among the children's current entries; backward,
//! the largest. Every child is positioned at or after (forward) / before (backward) the current
//! key, so changing direction repositions every other child around it first. The number of
//! children is small (two memtables, the level-0 tables, one per deeper level), so the smallest
//! and largest are found by a linear scan.
//!
//! Errors: if any child reports an error, the merge becomes invalid and reports it: a merged
//! view that silently skipped a damaged source would return wrong answers.

use std::cmp::Ordering;

use super::{BoxedIter, InternalIterator};
use crate::comparator::Comparator;
use crate::error::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A merge of sorted cursors ordered by one comparator (generic, so that a concrete one is
/// called directly: the merge compares keys at every step).
pub(crate) struct MergingIter<C: Comparator> {
    comparator: C,
    children: Vec<BoxedIter>,
    /// The child holding the current entry. Invariant: when `Some(i)`, `children[i]` is valid.
    current: Option<usize>,
    /// The child whose entry comes right after the current one in `direction` among the other
    /// children, as the last full pick found it (`None`: no other child is valid). The other
    /// children do not move while the merge steps on in one direction, so it stays right
    /// until the current child moves past it: a step then compares one key, not every child's.
    runner_up: Option<usize>,
    direction: Direction,
}

impl<C: Comparator> MergingIter<C> {
    /// Drops every child (and the files they read); the iterator is then empty.
    pub(crate) fn clear(&mut self) {
        self.children.clear();
        self.current = None;
        self.runner_up = None;
    }

    pub(crate) fn new(comparator: C, children: Vec<BoxedIter>) -> Self {
        MergingIter {
            comparator,
            children,
            current: None,
            runner_up: None,
            direction: Direction::Forward,
        }
    }

    /// Finds the child whose key comes first in the order `wanted` asks (`Less`: the
    /// smallest), and the runner-up, by asking every child.
    fn pick(&mut self, wanted: Ordering) {
        let mut best: Option<(usize, &[u8])> = None;
        let mut second: Option<(usize, &[u8])> = None;
        let mut damaged = false;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                // Only an invalid cursor can hold an error (the cursor contract, rule 5).
                damaged |= child.status().is_err();
                continue;
            }
            let key = child.key();
            match best {
                Some((_, best_key)) if self.comparator.compare(key, best_key) != wanted => {
                    match second {
                        Some((_, second_key))
                            if self.comparator.compare(key, second_key) != wanted => {}
                        _ => second = Some((i, key)),
                    }
                }
                _ => {
                    second = best;
                    best = Some((i, key));
                }
            }
        }
        // A damaged child stops the merge.
        self.current = if damaged { None } else { best.map(|(i, _)| i) };
        self.runner_up = second.map(|(i, _)| i);
    }

    /// After the current child stepped on in the merge's direction: it stays current if its
    /// new key still comes before the runner-up's; otherwise every child is asked again.
    fn step_pick(&mut self, wanted: Ordering) {
        let Some(cur) = self.current else {
            return;
        };
        let child = &self.children[cur];
        if child.valid() {
            let stays = match self.runner_up {
                None => true,
                Some(r) => self.comparator.compare(child.key(), self.children[r].key()) == wanted,
            };
            if stays {
                return;
            }
        }
        self.pick(wanted);
    }

    fn find_smallest(&mut self) {
        self.pick(Ordering::Less);
    }

    fn find_largest(&mut self) {
        self.pick(Ordering::Greater);
    }
}

impl<C: Comparator> InternalIterator for MergingIter<C> {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else {
            return;
        };
        if self.direction != Direction::Forward {
            // Every other child is before the current key: move each to the first entry after
            // it. The current key is unique across children (internal keys carry seqnos). The
            // others moved, so the runner-up is found again below.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key);
                if c.valid() && self.comparator.compare(&key, c.key()) == Ordering::Equal {
                    c.next();
                }
            }
            self.direction = Direction::Forward;
            self.children[cur].next();
            return self.find_smallest();
        }
        self.children[cur].next();
        self.step_pick(Ordering::Less);
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else {
            return;
        };
        if self.direction != Direction::Reverse {
            // Every other child is after the current key: move each to the last entry before it.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key);
                if c.valid() {
                    c.prev();
                } else {
                    c.seek_to_last();
                }
            }
            self.direction = Direction::Reverse;
            self.children[cur].prev();
            return self.find_largest();
        }
        self.children[cur].prev();
        self.step_pick(Ordering::Greater);
    }

    fn key(&self) -> &[u8] {
        self.children[self.current.expect("requires valid()")].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.current.expect("requires valid()")].value()
    }

    fn status(&self) -> Result<()> {
        self.children.iter().try_for_each(|c| c.status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::BytewiseComparator;
    use crate::iter::contract::check_against_model;
    use crate::iter::VecIter;

    #[test]
    fn merge_of_interleaved_sources_meets_the_contract() {
        let mut sources: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); 4];
        let mut model = Vec::new();
        for i in 0..400u32 {
            let k = format!("k{i:05}").into_bytes();
            let v = format!("v{i}").into_bytes();
            // Uneven spread, with one source left empty.
            sources[(i as usize * 7 / 3) % 3].push((k.clone(), v.clone()));
            model.push((k, v));
        }
        let children: Vec<BoxedIter> = sources
            .into_iter()
            .map(|s| Box::new(VecIter::new(s)) as BoxedIter)
            .collect();
        let mut it = MergingIter::new(BytewiseComparator, children);
        let probes: Vec<Vec<u8>> = (0..810)
            .step_by(3)
            .map(|i| format!("k{i:05}").into_bytes())
            .collect();
        check_against_model(&mut it, &model, &BytewiseComparator, &probes);
    }

    /// Runs of keys from one child, of every length from 1 to 12, so that a step keeps the
    /// current child for a while, then hands over to the runner-up (or to a child that was
    /// third), both ways and across direction changes.
    #[test]
    fn merge_of_sources_in_runs_meets_the_contract() {
        let mut sources: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); 5];
        let mut model = Vec::new();
        let (mut i, mut run) = (0u32, 1usize);
        while i < 600 {
            let child = (run * 3) % 5;
            for _ in 0..run {
                let k = format!("k{i:05}").into_bytes();
                let v = format!("v{i}").into_bytes();
                sources[child].push((k.clone(), v.clone()));
                model.push((k, v));
                i += 1;
            }
            run = run % 12 + 1;
        }
        let children: Vec<BoxedIter> = sources
            .into_iter()
            .map(|s| Box::new(VecIter::new(s)) as BoxedIter)
            .collect();
        let mut it = MergingIter::new(BytewiseComparator, children);
        let probes: Vec<Vec<u8>> = (0..1210)
            .step_by(7)
            .map(|i| format!("k{i:05}").into_bytes())
            .collect();
        check_against_model(&mut it, &model, &BytewiseComparator, &probes);
    }

    #[test]
    fn a_failing_child_stops_the_merge() {
        let good = VecIter::new(vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"c".to_vec(), b"3".to_vec()),
        ]);
        let mut bad = VecIter::new(vec![(b"b".to_vec(), b"2".to_vec())]);
        bad.fail_after(1, crate::error::Error::corruption("/x", 7, "test damage"));
        let mut it = MergingIter::new(BytewiseComparator, vec![Box::new(good), Box::new(bad)]);
        it.seek_to_first();
        assert!(it.valid());
        it.next(); // "b"
        it.next(); // the bad child fails while moving past "b"
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());
    }
}
