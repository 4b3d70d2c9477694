// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`MergingIter`]: one sorted view over several sorted cursors (memtables, level-0 tables,
//! levels).
//!
//! Forward, the current entry is the smallest among the children's current entries; backward,
//! the largest. Every child is positioned at or after (forward) / before (backward) the current
//! key, so changing direction repositions every other child around it first. The children
//! are kept in a binary heap ordered in the merge's direction (its root is the current
//! child), so that a step whose child falls behind another costs about `log2(children)`
//! comparisons of remembered keys rather than a visit to every child: a compaction of many
//! overlapping level-0 tables, or a scan right after heavy writes, changes child at almost
//! every step.
//!
//! A seek puts off positioning the children that can tell, cheaply, that they hold nothing
//! between the target and where the other children landed (a memtable whose key filter rules
//! out the target's user key: its skiplist search is the most expensive step of a seek to a
//! key that lies in a table). Such a child is positioned at the current key before the merge
//! first moves, which lands it where the seek would have.
//!
//! Errors: if any child reports an error, the merge becomes invalid and reports it: a merged
//! view that silently skipped a damaged source would return wrong answers.
//!
//! Unsafe (docs/unsafe.md): the merge remembers where each child's key lies, and the current
//! child's value, as raw slices, so that a scan step is one call into the child that moves
//! (`InternalIterator::next_entry`) and one comparison, heap repairs compare remembered keys
//! without calling into children, and `key`/`value` read a field. Safety model: a child's
//! slices stay valid until it moves (the cursor contract, rule 4); children are boxed and
//! owned by the merge; only the merge's `&mut self` methods move them, and each refreshes the
//! slices of the children it moved before it returns.

use std::cmp::Ordering;

use smallvec::SmallVec;

use super::{Children, InternalIterator, INLINE_CHILDREN};
use crate::comparator::Comparator;
use crate::error::Result;
use crate::table::BlockIter;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A merge of sorted cursors ordered by one comparator (generic, so that a concrete one is
/// called directly: the merge compares keys at every step).
pub(crate) struct MergingIter<C: Comparator> {
    comparator: C,
    children: Children,
    /// The child holding the current entry. Invariant: when `Some(i)`, `children[i]` is valid
    /// and `i == heap[0]`.
    current: Option<usize>,
    /// The valid children not put off, as a binary heap in `direction`'s order: each child's
    /// remembered key comes before (forward: is smaller than) its two heap children's, ties
    /// going to the lower child index. Invariant: outside a method that moves children, the
    /// heap holds exactly the valid children not put off, and is empty when `current` is
    /// `None`.
    heap: SmallVec<[usize; INLINE_CHILDREN]>,
    /// `keys[i]` is `children[i].key()` as that child returned it after its last move.
    /// Invariant: valid for every child in `heap` (it has not moved since).
    keys: SmallVec<[Slice; INLINE_CHILDREN]>,
    direction: Direction,
    /// Children whose seek was put off (bit `i` for `children[i]`; only the first 64 can be):
    /// each has no entry from the last seek's target up to the current key, so it is not
    /// positioned until the merge moves ([`InternalIterator::seek_passes`]). Invariant:
    /// nonzero only after a forward seek whose current entry has not moved, and `current` is
    /// `Some`.
    deferred: u64,
    /// The current child's key and value, as it returned them after its last move.
    /// Invariant: when `current` is `Some(i)`, these point at `children[i].key()` and
    /// `children[i].value()`, which stay valid until that child moves (the cursor contract,
    /// rule 4); every method that moves a child refreshes them before it returns.
    current_entry: CurrentEntry,
    /// Where the runner-up is in `heap` (1 or 2), when the heap holds more than the current
    /// child: the child whose entry comes right after the current one in `direction` among
    /// the others, the better of the root's two heap children. The other children do not move
    /// while the merge steps on in one direction, so it stays right until the current child
    /// moves past it: a step then compares one key.
    runner_up_pos: usize,
    /// The runner-up's key, `keys[heap[runner_up_pos]]` (read on every step, so kept at hand).
    runner_up_key: Slice,
    /// True once [`next_plain_in_block`](Self::next_plain_in_block) found every entry of the
    /// current child's data block before the runner-up's key. Invariant: false after any
    /// other move of the merge (`step` and `settle` clear it), so that the block, the current
    /// child and the runner-up are the ones it checked. (A failed check is not kept: the
    /// bounds of a level's blocks do not grow steadily, the last block of each table being
    /// bounded by a short successor of its last key.)
    lane_open: bool,
    /// Steps left before [`next_plain_in_block`](Self::next_plain_in_block) (moving forward)
    /// or [`back_lane`](Self::back_lane) (backward) tries again, after it found a step it
    /// could not take: where entries that need a second look are
    /// common (older versions after overwrites), trying at every step would cost more than it
    /// saves.
    lane_backoff: u8,
}

/// Steps [`MergingIter::next_plain_in_block`] waits after a step it could not take.
const LANE_BACKOFF_STEPS: u8 = 8;

/// The most steps of read-ahead a walk's lane takes at once ([`MergingIter::lane_moved`],
/// [`MergingIter::forward_lane_done`]): a backward walk moves over up to 15 entries of a
/// restart run per lane, and a burst of more prefetches than the CPU has line-fill buffers
/// stalls. Eight steps (16 lines) a run still fetch a
/// compressed block of 2 KiB, two or three runs, before the walk reaches it.
const LANE_READ_AHEAD_STEPS: usize = 8;

/// What [`MergingIter::forward_lane`] hands a forward walk: the current child's block cursor
/// and the merge's record of its current entry, which each step brings up to date. So the
/// merge stays consistent between steps whatever the walker does there: a closure that
/// panics leaves a cursor on the entry it was given, not one whose merge remembers an entry
/// the block cursor has moved off (whose key may have been rebuilt elsewhere since).
pub(crate) struct ForwardLane<'a> {
    cursor: &'a mut BlockIter,
    /// The current child's entry in `MergingIter::keys`.
    key: &'a mut Slice,
    entry: &'a mut CurrentEntry,
}

impl ForwardLane<'_> {
    /// [`BlockIter::next_plain`](crate::table::BlockIter::next_plain); the merge is then on
    /// the entry it stepped onto.
    #[inline]
    pub(crate) fn step(&mut self, seqno: u64) -> Option<(&[u8], &[u8], usize)> {
        let (key, value, bytes) = self.cursor.next_plain_inlined(seqno)?;
        *self.key = key.into();
        *self.entry = CurrentEntry {
            key: key.into(),
            value: value.into(),
        };
        Some((key, value, bytes))
    }
}

/// What [`MergingIter::back_lane`] hands a backward walk.
pub(crate) struct BackLane<'a, C> {
    /// The current child's data block cursor.
    pub(crate) cursor: &'a mut BlockIter,
    /// The merge's comparator.
    pub(crate) comparator: &'a C,
    /// The runner-up's key: the largest key another child has left. `None` if none has any.
    pub(crate) runner_up: Option<&'a [u8]>,
}

/// The address of a slice a child returned, kept until that child moves (each field that
/// holds one states when it is valid).
#[derive(Clone, Copy)]
struct Slice(*const [u8]);

impl Slice {
    const EMPTY: Slice = Slice(&[] as &[u8]);
}

impl From<&[u8]> for Slice {
    fn from(s: &[u8]) -> Self {
        Slice(s)
    }
}

// SAFETY: a `Slice` points into a child the merge owns (children are `Send`), is read only
// through `&MergingIter`, and owns nothing.
#[allow(unsafe_code)]
unsafe impl Send for Slice {}
// SAFETY: as for `Send`: shared access only reads bytes no one writes meanwhile.
#[allow(unsafe_code)]
unsafe impl Sync for Slice {}

/// The current entry's key and value (see `MergingIter::current_entry`).
struct CurrentEntry {
    key: Slice,
    value: Slice,
}

impl<C: Comparator> MergingIter<C> {
    /// Records where the current child's entry lies (invariant of `current_entry`); its key
    /// is the one `keys` remembers.
    #[inline]
    fn remember_current(&mut self) {
        if let Some(cur) = self.current {
            self.current_entry = CurrentEntry {
                key: self.keys[cur],
                value: self.children[cur].value().into(),
            };
        }
    }

    /// Forgets the position: the merge is then as a new one over the same children, which
    /// stay where they are (holding what they read) until a seek positions them all.
    pub(crate) fn reset(&mut self) {
        self.heap.clear();
        self.current = None;
        self.deferred = 0;
        self.direction = Direction::Forward;
        self.current_entry = CurrentEntry {
            key: Slice::EMPTY,
            value: Slice::EMPTY,
        };
        self.runner_up_key = Slice::EMPTY;
        self.runner_up_pos = 0;
        self.lane_open = false;
        self.lane_backoff = 0;
    }

    /// The comparator the merge orders keys by.
    pub(crate) fn comparator(&self) -> &C {
        &self.comparator
    }

    /// True if no child holds an error (a merge whose children all read cleanly so far).
    pub(crate) fn children_ok(&self) -> bool {
        self.children.iter().all(|c| c.status().is_ok())
    }

    pub(crate) fn new(comparator: C, children: impl Into<Children>) -> Self {
        let children = children.into();
        MergingIter {
            comparator,
            keys: smallvec::smallvec![Slice::EMPTY; children.len()],
            heap: SmallVec::with_capacity(children.len()),
            children,
            current: None,
            direction: Direction::Forward,
            deferred: 0,
            current_entry: CurrentEntry {
                key: Slice::EMPTY,
                value: Slice::EMPTY,
            },
            runner_up_key: Slice::EMPTY,
            runner_up_pos: 0,
            lane_open: false,
            lane_backoff: 0,
        }
    }

    /// Builds the heap again from every child (valid and not put off), in the order `wanted`
    /// asks (`Less`: the smallest first), and takes the current child and the runner-up from
    /// it.
    fn pick(&mut self, wanted: Ordering) {
        self.heap.clear();
        let mut damaged = false;
        for (i, child) in self.children.iter().enumerate() {
            if is_deferred(self.deferred, i) {
                continue;
            }
            if !child.valid() {
                // Only an invalid cursor can hold an error (the cursor contract, rule 5).
                damaged |= child.status().is_err();
                continue;
            }
            self.keys[i] = child.key().into();
            self.heap.push(i);
        }
        if damaged {
            // A damaged child stops the merge.
            self.heap.clear();
        }
        for pos in (0..self.heap.len() / 2).rev() {
            self.sift_down(pos, wanted);
        }
        self.settle(wanted);
    }

    /// Takes the current child and the runner-up from the heap (its root, and the better of
    /// the root's two children).
    fn settle(&mut self, wanted: Ordering) {
        self.lane_open = false;
        self.current = self.heap.first().copied();
        self.runner_up_pos = match self.heap.get(1..3) {
            Some(&[a, b]) if self.comes_before(b, a, wanted) => 2,
            _ => 1,
        };
        if let Some(&r) = self.heap.get(self.runner_up_pos) {
            self.runner_up_key = self.keys[r];
        }
        self.remember_current();
    }

    /// True if child `a`'s remembered key comes before child `b`'s in the order `wanted` asks;
    /// on equal keys (which distinct sources never hold, internal keys carry seqnos), the lower
    /// child index comes first.
    #[inline]
    fn comes_before(&self, a: usize, b: usize, wanted: Ordering) -> bool {
        // SAFETY: callers pass children in the heap, whose `keys` entries point at keys those
        // children returned and still hold: none of them has moved since (the field's
        // invariant; a method that moves a child refreshes its entry before it compares).
        #[allow(unsafe_code)]
        let (key_a, key_b) = unsafe { (&*self.keys[a].0, &*self.keys[b].0) };
        match self.comparator.compare(key_a, key_b) {
            Ordering::Equal => a < b,
            order => order == wanted,
        }
    }

    /// Moves the child at heap position `pos` down until neither of its heap children comes
    /// before it.
    fn sift_down(&mut self, mut pos: usize, wanted: Ordering) {
        let len = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                return;
            }
            let right = left + 1;
            let better = if right < len && self.comes_before(self.heap[right], self.heap[left], wanted)
            {
                right
            } else {
                left
            };
            if !self.comes_before(self.heap[better], self.heap[pos], wanted) {
                return;
            }
            self.heap.swap(pos, better);
            pos = better;
        }
    }

    /// Steps the current child `cur` (the heap's root) on in the merge's direction (`wanted`:
    /// `Less` forward): it stays current if its new key still comes before the runner-up's;
    /// otherwise it sinks in the heap (or leaves it, when it has no more entries).
    #[inline(always)]
    fn step(&mut self, cur: usize, wanted: Ordering) {
        debug_assert_eq!(self.heap.first(), Some(&cur), "the current child is the heap's root");
        self.lane_open = false;
        let child = &mut self.children[cur];
        let entry = if wanted == Ordering::Less {
            child.next_entry()
        } else {
            child.prev_entry()
        };
        if let Some((key, value)) = entry {
            let stays = self.heap.len() < 2 || {
                // SAFETY: another child is in the heap, so `runner_up_key` is the runner-up's
                // key as it returned it, and that child has not moved since: only the current
                // child moves between two settles (the field's invariant).
                #[allow(unsafe_code)]
                let runner_up_key = unsafe { &*self.runner_up_key.0 };
                self.comparator.compare(key, runner_up_key) == wanted
            };
            let entry = CurrentEntry {
                key: key.into(),
                value: value.into(),
            };
            self.keys[cur] = entry.key;
            // The runner-up is the better of the root's two heap children, so when it comes
            // first it takes the root's place and the child sinks on from there; on equal
            // keys the lower child index comes first, which may leave the child current.
            let runner_up_first = !stays && {
                let pos = self.runner_up_pos;
                self.comes_before(self.heap[pos], cur, wanted)
            };
            if !runner_up_first {
                self.current_entry = entry;
                return;
            }
            self.heap.swap(0, self.runner_up_pos);
            self.sift_down(self.runner_up_pos, wanted);
        } else if self.children[cur].status().is_err() {
            // A damaged child stops the merge.
            self.heap.clear();
        } else {
            self.heap.swap_remove(0);
            self.sift_down(0, wanted);
        }
        self.settle(wanted);
    }

    /// A forward step of the current child within its data block, taken only when that
    /// child's next entry is a plain one ([`BlockIter::next_plain`]) and no other child can
    /// hold an entry before it: the block's bound (its index separator) comes before the
    /// runner-up's key, checked once per block. The merge is then on that entry, as `next`
    /// would have left it. Returns what `next_plain` returns; `None`, having moved nothing,
    /// when the step is not one of those (the caller then calls `next`).
    ///
    /// [`BlockIter::next_plain`]: crate::table::BlockIter::next_plain
    #[inline]
    pub(crate) fn next_plain_in_block(&mut self, seqno: u64) -> Option<usize> {
        let cur = self.current?;
        if self.direction != Direction::Forward || self.deferred != 0 {
            return None;
        }
        if self.lane_backoff > 0 {
            self.lane_backoff -= 1;
            return None;
        }
        let lane = self.children[cur].block_lane(1)?;
        if !self.lane_open {
            let below_runner_up = self.heap.len() < 2 || {
                // SAFETY: another child is in the heap, so `runner_up_key` is the runner-up's
                // key as it returned it, and that child has not moved since (the field's
                // invariant; only the current child moves between two settles).
                #[allow(unsafe_code)]
                let runner_up_key = unsafe { &*self.runner_up_key.0 };
                self.comparator.compare(lane.bound, runner_up_key) == Ordering::Less
            };
            if !below_runner_up {
                self.lane_backoff = LANE_BACKOFF_STEPS;
                return None;
            }
            self.lane_open = true;
        }
        let Some((key, value, bytes)) = lane.cursor.next_plain(seqno) else {
            // Not at the block's end, which the next block's steps follow.
            if lane.cursor.has_next_in_block() {
                self.lane_backoff = LANE_BACKOFF_STEPS;
            }
            return None;
        };
        let entry = CurrentEntry {
            key: key.into(),
            value: value.into(),
        };
        self.keys[cur] = entry.key;
        self.current_entry = entry;
        Some(bytes)
    }

    /// For a walk forward through the current child's block: that child's data block cursor,
    /// when [`next_plain_in_block`](Self::next_plain_in_block) would step it (the merge moves
    /// forward, no seek is put off, and the block's bound comes before the runner-up's key,
    /// checked once per block), to step with [`ForwardLane::step`]. The caller then calls
    /// [`forward_lane_done`](Self::forward_lane_done).
    ///
    /// These are [`next_plain_in_block`](Self::next_plain_in_block)'s checks, written out
    /// again: that step built on this measured the same for a cursor's steps and 1.5-1.7%
    /// slower for a walk's (readseq on the fillseq 1M database, 0.0354-0.0360 µs against
    /// 0.0348-0.0354, builds alternating), so each keeps its own copy.
    #[inline]
    pub(crate) fn forward_lane(&mut self) -> Option<ForwardLane<'_>> {
        let cur = self.current?;
        if self.direction != Direction::Forward || self.deferred != 0 {
            return None;
        }
        if self.lane_backoff > 0 {
            self.lane_backoff -= 1;
            return None;
        }
        let lane = self.children[cur].block_lane(0)?;
        if !self.lane_open {
            let below_runner_up = self.heap.len() < 2 || {
                // SAFETY: another child is in the heap, so `runner_up_key` is the runner-up's
                // key as it returned it, and that child has not moved since (the field's
                // invariant; only the current child moves between two settles).
                #[allow(unsafe_code)]
                let runner_up_key = unsafe { &*self.runner_up_key.0 };
                self.comparator.compare(lane.bound, runner_up_key) == Ordering::Less
            };
            if !below_runner_up {
                self.lane_backoff = LANE_BACKOFF_STEPS;
                return None;
            }
            self.lane_open = true;
        }
        Some(ForwardLane {
            cursor: lane.cursor,
            key: &mut self.keys[cur],
            entry: &mut self.current_entry,
        })
    }

    /// After a walk's `steps` steps through a [`ForwardLane`]: the current child's read-ahead
    /// moves on as far as that many steps would have moved it, at most
    /// [`LANE_READ_AHEAD_STEPS`] at once.
    #[inline]
    pub(crate) fn forward_lane_done(&mut self, steps: usize) {
        if let Some(cur) = self.current {
            let _ = self.children[cur].block_lane(steps.min(LANE_READ_AHEAD_STEPS));
        }
    }

    /// For a walk backward through the current child's block: that child's data block cursor,
    /// with the comparator and the runner-up's key (`None` if no other child has entries
    /// left), when the merge moves backward, the cursor stands in a restart run it decoded
    /// stepping back ([`BlockIter::run_position`]), and `accept` takes the current key and
    /// the runner-up's (it is not asked when there is no runner-up). The run's entries from
    /// the current one back, as long as each comes after the runner-up's key, come in that
    /// order before anything another child holds. The caller may move the cursor back over
    /// such entries ([`BlockIter::move_back_in_run`]) and must then call
    /// [`lane_moved`](Self::lane_moved) before the merge is used again. `None` otherwise.
    ///
    /// After a call that found no lane, the next [`LANE_BACKOFF_STEPS`] calls answer `None`
    /// at once, so that a walk through a source without blocks (a memtable), or through a
    /// tree whose sources still hold versions of the same keys (after overwrites), does not
    /// look at every step.
    ///
    /// [`BlockIter::run_position`]: crate::table::BlockIter::run_position
    /// [`BlockIter::move_back_in_run`]: crate::table::BlockIter::move_back_in_run
    #[inline]
    pub(crate) fn back_lane(
        &mut self,
        accept: impl FnOnce(&C, &[u8], &[u8]) -> bool,
    ) -> Option<BackLane<'_, C>> {
        let cur = self.current?;
        if self.direction != Direction::Reverse {
            return None;
        }
        if self.lane_backoff > 0 {
            self.lane_backoff -= 1;
            return None;
        }
        // SAFETY: `current` is `Some`, so `current_entry.key` is the current child's key, and
        // with another child in the heap `runner_up_key` is the runner-up's, each as that
        // child returned it; neither child has moved since (the fields' invariants; only the
        // current child moves between two settles). `key` is used only here; `runner_up`
        // goes out with a borrow of the merge, so no child moves while it lives but the
        // current child's block cursor, which the caller moves and which does not hold it.
        #[allow(unsafe_code)]
        let (key, runner_up) = unsafe {
            (
                &*self.current_entry.key.0,
                (self.heap.len() >= 2).then(|| &*self.runner_up_key.0),
            )
        };
        if runner_up.is_some_and(|r| !accept(&self.comparator, key, r)) {
            self.lane_backoff = LANE_BACKOFF_STEPS;
            return None;
        }
        let Some(cursor) = self.children[cur]
            .block_lane(0)
            .map(|lane| lane.cursor)
            .filter(|cursor| cursor.run_position().is_some())
        else {
            self.lane_backoff = LANE_BACKOFF_STEPS;
            return None;
        };
        Some(BackLane {
            cursor,
            comparator: &self.comparator,
            runner_up,
        })
    }

    /// The current child's block cursor moved back `steps` entries within its run after
    /// [`back_lane`](Self::back_lane): the merge takes the child's new entry as its own, or
    /// the runner-up's if that now comes first (the caller checked only the entries it moved
    /// over, not the one it stopped on), as a step would. The child's read-ahead moves on
    /// as far as that many steps would have moved it, at most [`LANE_READ_AHEAD_STEPS`] at once.
    #[inline]
    pub(crate) fn lane_moved(&mut self, steps: usize) {
        let Some(cur) = self.current else {
            return;
        };
        let child = &mut self.children[cur];
        self.keys[cur] = match child.block_lane(steps.min(LANE_READ_AHEAD_STEPS)) {
            Some(lane) => lane.cursor.key().into(),
            None => child.key().into(),
        };
        let pos = self.runner_up_pos;
        if self.heap.len() >= 2 && self.comes_before(self.heap[pos], cur, Ordering::Greater) {
            self.heap.swap(0, pos);
            self.sift_down(pos, Ordering::Greater);
            self.settle(Ordering::Greater);
        } else {
            self.remember_current();
        }
    }

    /// Positions every child whose seek was put off at the current key (where the seek would
    /// have landed it), and finds the runner-up again among all the children.
    fn undefer(&mut self) {
        if self.deferred == 0 {
            return;
        }
        let deferred = std::mem::take(&mut self.deferred);
        debug_assert!(self.current.is_some(), "children put off without a current entry");
        let Some(cur) = self.current else {
            return;
        };
        let (before, rest) = self.children.split_at_mut(cur);
        let (current, after) = rest.split_first_mut().expect("current is a child");
        let key = current.key();
        for (i, c) in before.iter_mut().enumerate() {
            if is_deferred(deferred, i) {
                c.seek(key);
            }
        }
        for (i, c) in after.iter_mut().enumerate() {
            if is_deferred(deferred, cur + 1 + i) {
                c.seek(key);
            }
        }
        // The current child stays current: every child put off passed its key, so each is now
        // after it.
        self.find_smallest();
        debug_assert_eq!(self.current, Some(cur), "a child put off landed before the current key");
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
        self.deferred = 0;
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        self.deferred = 0;
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        self.deferred = 0;
        for (i, c) in self.children.iter_mut().enumerate() {
            if i < 64 && c.may_pass_seeks() {
                self.deferred |= 1 << i;
            } else {
                c.seek(target);
            }
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        if self.deferred == 0 {
            return;
        }
        // Each child put off must pass the smallest key the others landed on; the rest seek
        // now. A child that seeks may become current: its key is smaller, so the children
        // still put off pass it too.
        let mut sought = false;
        for i in 0..self.children.len().min(64) {
            if !is_deferred(self.deferred, i) {
                continue;
            }
            let passes = match self.current {
                Some(cur) => self.children[i].seek_passes(target, self.children[cur].key()),
                None => false,
            };
            if !passes {
                self.children[i].seek(target);
                self.deferred &= !(1 << i);
                sought = true;
            }
        }
        if sought {
            self.find_smallest();
        }
        if self.current.is_none() {
            // Only a damaged child can stop a merge with children put off: they passed a key
            // another child held. Position them anyway, so that nothing is left unpositioned.
            for i in 0..self.children.len().min(64) {
                if is_deferred(self.deferred, i) {
                    self.children[i].seek(target);
                }
            }
            self.deferred = 0;
        }
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
        self.undefer();
        let cur = self.current.unwrap_or(cur);
        self.step(cur, Ordering::Less);
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else {
            return;
        };
        if self.direction != Direction::Reverse {
            // Every other child is after the current key, or put off (it holds nothing from
            // the seek's target to the current key): move each to the last entry before it.
            self.deferred = 0;
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
        self.step(cur, Ordering::Greater);
    }

    #[inline]
    fn key(&self) -> &[u8] {
        assert!(self.current.is_some(), "requires valid()");
        // SAFETY: `current` is `Some`, so `current_entry.key` is the current child's key as it
        // returned it after its last move (the field's invariant), and that child has not
        // moved since: only `&mut self` methods move children, and each refreshes the field.
        #[allow(unsafe_code)]
        unsafe {
            &*self.current_entry.key.0
        }
    }

    #[inline]
    fn value(&self) -> &[u8] {
        assert!(self.current.is_some(), "requires valid()");
        // SAFETY: as in `key`.
        #[allow(unsafe_code)]
        unsafe {
            &*self.current_entry.value.0
        }
    }

    fn status(&self) -> Result<()> {
        self.children.iter().try_for_each(|c| c.status())
    }
}

/// True if bit `i` of `deferred` is set (children past the 64th are never put off).
#[inline]
fn is_deferred(deferred: u64, i: usize) -> bool {
    i < 64 && deferred & (1 << i) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::BytewiseComparator;
    use crate::iter::contract::check_against_model;
    use crate::iter::{BoxedIter, VecIter};

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// 400 entries spread unevenly over `sources` sources (entry `i` to `(7i/3) % spread`),
    /// and all of them in order: the model.
    fn interleaved(sources: usize, spread: usize) -> (Vec<Entries>, Entries) {
        let mut out = vec![Vec::new(); sources];
        let mut model = Vec::new();
        for i in 0..400u32 {
            let k = format!("k{i:05}").into_bytes();
            let v = format!("v{i}").into_bytes();
            out[(i as usize * 7 / 3) % spread].push((k.clone(), v.clone()));
            model.push((k, v));
        }
        (out, model)
    }

    /// A merge of one cursor per source.
    fn merge_of(sources: Vec<Entries>) -> MergingIter<BytewiseComparator> {
        let children: Vec<BoxedIter> = sources
            .into_iter()
            .map(|s| Box::new(VecIter::new(s)) as BoxedIter)
            .collect();
        MergingIter::new(BytewiseComparator, children)
    }

    /// Keys `k00000`, `k{step}`, ... below `k{end}`: seek targets, present in a model of `k…`
    /// keys or not.
    fn probes(end: usize, step: usize) -> Vec<Vec<u8>> {
        (0..end)
            .step_by(step)
            .map(|i| format!("k{i:05}").into_bytes())
            .collect()
    }

    /// Seek targets for [`interleaved`]'s model: every third key from before the first to past
    /// the last, present or not.
    fn interleaved_probes() -> Vec<Vec<u8>> {
        probes(810, 3)
    }

    #[test]
    fn merge_of_interleaved_sources_meets_the_contract() {
        // Uneven spread, with one source left empty.
        let (sources, model) = interleaved(4, 3);
        let mut it = merge_of(sources);
        check_against_model(&mut it, &model, &BytewiseComparator, &interleaved_probes());
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
        let mut it = merge_of(sources);
        check_against_model(&mut it, &model, &BytewiseComparator, &probes(1210, 7));
    }

    /// Many children, each key sent to a pseudo-random one: the heap is several levels deep
    /// and the current child changes at almost every step, both ways.
    #[test]
    fn merge_of_many_sources_meets_the_contract() {
        for count in [2usize, 3, 7, 16, 37] {
            let mut sources: Vec<Entries> = vec![Vec::new(); count];
            let mut model = Vec::new();
            let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ count as u64;
            for i in 0..1500u32 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let k = format!("k{i:05}").into_bytes();
                let v = format!("v{i}").into_bytes();
                sources[(state % count as u64) as usize].push((k.clone(), v.clone()));
                model.push((k, v));
            }
            let mut it = merge_of(sources);
            check_against_model(&mut it, &model, &BytewiseComparator, &probes(3010, 11));
        }
    }

    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;

    /// A child that answers `seek_passes` truthfully from its own keys (as a memtable's key
    /// filter answers for a user key) and counts its seeks.
    struct Passing {
        inner: VecIter,
        keys: Vec<Vec<u8>>,
        seeks: Arc<AtomicUsize>,
    }

    impl InternalIterator for Passing {
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            self.inner.seek_to_first();
        }
        fn seek_to_last(&mut self) {
            self.inner.seek_to_last();
        }
        fn seek(&mut self, target: &[u8]) {
            self.seeks.fetch_add(1, Relaxed);
            self.inner.seek(target);
        }
        fn next(&mut self) {
            self.inner.next();
        }
        fn prev(&mut self) {
            self.inner.prev();
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
        fn status(&self) -> Result<()> {
            self.inner.status()
        }
        fn may_pass_seeks(&self) -> bool {
            true
        }
        fn seek_passes(&self, target: &[u8], key: &[u8]) -> bool {
            !self
                .keys
                .iter()
                .any(|k| k.as_slice() >= target && k.as_slice() <= key)
        }
    }

    /// Children whose seeks can be put off, among ordinary ones: every seek, step and change
    /// of direction gives the model's answers, and a seek to a key an ordinary child holds
    /// leaves the others unpositioned until the merge moves.
    #[test]
    fn seeks_put_off_change_no_answer() {
        let (sources, model) = interleaved(4, 4);
        let seeks = Arc::new(AtomicUsize::new(0));
        let mut children: Vec<BoxedIter> = Vec::new();
        for (n, source) in sources.into_iter().enumerate() {
            if n % 2 == 0 {
                children.push(Box::new(Passing {
                    keys: source.iter().map(|(k, _)| k.clone()).collect(),
                    inner: VecIter::new(source),
                    seeks: seeks.clone(),
                }));
            } else {
                children.push(Box::new(VecIter::new(source)));
            }
        }
        let mut it = MergingIter::new(BytewiseComparator, children);
        check_against_model(&mut it, &model, &BytewiseComparator, &interleaved_probes());
        // A seek, then steps forward (the model check steps back first from most seeks).
        for i in 0..model.len() {
            it.seek(&model[i].0);
            for expected in model[i..].iter().take(6) {
                assert!(it.valid(), "ran out after seeking {i}");
                assert_eq!((it.key(), it.value()), (&expected.0[..], &expected.1[..]));
                it.next();
            }
        }

        // "k00003" is in source 3 (ordinary): sources 0 and 2 are put off.
        seeks.store(0, Relaxed);
        it.seek(b"k00003");
        assert_eq!(it.key(), b"k00003");
        assert_eq!(seeks.load(Relaxed), 0, "a seek the others settle positions no passing child");
        it.next();
        assert_eq!(seeks.load(Relaxed), 2, "both passing children are positioned before a step");
        assert_eq!(it.key(), b"k00004");
        // "k00000" is in source 0 (passing): it must seek, and does.
        seeks.store(0, Relaxed);
        it.seek(b"k00000");
        assert_eq!(it.key(), b"k00000");
        assert!(seeks.load(Relaxed) >= 1);
    }

    #[test]
    fn a_failing_child_stops_the_merge() {
        let good = VecIter::new(vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"c".to_vec(), b"3".to_vec()),
        ]);
        let mut bad = VecIter::new(vec![(b"b".to_vec(), b"2".to_vec())]);
        bad.fail_after(1, crate::error::Error::corruption("/x", 7, "test damage"));
        let children: Vec<BoxedIter> = vec![Box::new(good), Box::new(bad)];
        let mut it = MergingIter::new(BytewiseComparator, children);
        it.seek_to_first();
        assert!(it.valid());
        assert!(it.children_ok());
        it.next(); // "b"
        it.next(); // the bad child fails while moving past "b"
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());
        assert!(!it.children_ok(), "a cursor with this merge keeps no spare parts");
        it.reset();
        assert!(!it.valid());
        assert!(!it.children_ok(), "reset forgets the position, not the error");
    }
}
