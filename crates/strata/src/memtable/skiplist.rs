// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`SkipList`]: the sorted structure under the memtable. Inserts are serialized; reads take no
//! lock and run concurrently with an insert.
//!
//! # Safety model
//!
//! A node is one arena allocation, never freed before the list (which owns the arena):
//!
//! ```text
//! +--------------------------+------------------------------+-----------+---------+
//! | key_len u32 | value_len u32 | height u32 | pad u32 | next[0..height]: AtomicPtr | key | value |
//! +--------------------------+------------------------------+-----------+---------+
//! ```
//!
//! Invariants:
//! 1. A node's header, key and value are written before the node is published, and never
//!    changed after.
//! 2. A node is published at level `i` by a `Release` store of its pointer into its
//!    predecessor's `next[i]`; readers load `next` pointers with `Acquire`, so a reader that
//!    reaches a node sees its invariant-1 contents.
//! 3. Each level is a sorted list: following `next[i]` visits keys in increasing order.
//!    Level-0 holds every node; level `i` a subset of level `i - 1`.
//! 4. Only one insert runs at a time (the writer mutex), so the "find predecessors, then link"
//!    sequence of an insert sees no other insert in between.
//! 5. Every node pointer reachable from `head` points into the arena, which lives as long as
//!    the list; `&SkipList` therefore keeps every reachable node valid.

#![allow(unsafe_code)]

use super::arena::{Arena, ArenaState};
use super::sync::{AtomicPtr, AtomicUsize, Mutex, Ordering};
use crate::comparator::Comparator;
use crate::key::InternalKeyComparator;
use std::cmp::Ordering as CmpOrdering;

/// The tallest tower. With branching 4, enough for 4^12 = 16M entries per memtable.
pub(crate) const MAX_HEIGHT: usize = 12;
const BRANCHING: u32 = 4;

#[repr(C)]
struct NodeHeader {
    key_len: u32,
    value_len: u32,
    height: u32,
    _pad: u32,
}

const HEADER_BYTES: usize = std::mem::size_of::<NodeHeader>();
const LINK_BYTES: usize = std::mem::size_of::<AtomicPtr<NodeHeader>>();
// Links sit right after the header in 8-byte aligned arena memory (loom's atomics included).
const _: () = assert!(
    std::mem::align_of::<AtomicPtr<NodeHeader>>() <= 8
        && HEADER_BYTES.is_multiple_of(8)
        && LINK_BYTES.is_multiple_of(8)
);

type Node = *mut NodeHeader;

/// The tower slot `level` of `node`.
///
/// # Safety
/// `node` points to a live node (invariant 5) whose height is greater than `level`.
unsafe fn link<'a>(node: Node) -> impl Fn(usize) -> &'a AtomicPtr<NodeHeader> {
    move |level| {
        // SAFETY: the tower starts right after the 16-byte header (8-byte aligned, since arena
        // memory is) and holds `height > level` links, per this function's contract.
        unsafe {
            &*node
                .cast::<u8>()
                .add(HEADER_BYTES + level * LINK_BYTES)
                .cast()
        }
    }
}

/// The key of `node`.
///
/// # Safety
/// `node` points to a live, published node (invariants 1 and 5).
unsafe fn node_key<'a>(node: Node) -> &'a [u8] {
    // SAFETY: the header was written before publication and is immutable; the key follows the
    // tower and is `key_len` bytes long.
    unsafe {
        let h = &*node;
        let start = node
            .cast::<u8>()
            .add(HEADER_BYTES + h.height as usize * LINK_BYTES);
        std::slice::from_raw_parts(start, h.key_len as usize)
    }
}

/// The value of `node`.
///
/// # Safety
/// As for [`node_key`].
unsafe fn node_value<'a>(node: Node) -> &'a [u8] {
    // SAFETY: the value follows the key; see `node_key`.
    unsafe {
        let h = &*node;
        let start = node
            .cast::<u8>()
            .add(HEADER_BYTES + h.height as usize * LINK_BYTES + h.key_len as usize);
        std::slice::from_raw_parts(start, h.value_len as usize)
    }
}

/// What only the (single, serialized) writer touches.
struct WriterState {
    /// The arena's blocks; dropped with the list (after every reader, invariant 5).
    arena: ArenaState,
    /// The height generator's state.
    rng: u64,
    /// The internal key being inserted, built here so that inserts do not allocate.
    key: Vec<u8>,
    /// For each level, the last node linked at that level (`head` while there is none).
    /// `tail[0]` is the last node of the list: a key after it is appended without a search,
    /// which makes ascending inserts (sequential loads, sorted batches) cost one comparison.
    tail: [Node; MAX_HEIGHT],
}

/// A concurrent skiplist of (internal key, value) entries in internal-key order.
pub(crate) struct SkipList {
    arena: Arena,
    comparator: InternalKeyComparator,
    /// The sentinel before every node; its height is `MAX_HEIGHT`.
    head: Node,
    /// The height of the tallest tower; read without a lock (a stale value is safe: higher
    /// levels of `head` are null until linked).
    max_height: AtomicUsize,
    /// Serializes inserts (invariant 4) and holds the writer's scratch state.
    writer: Mutex<WriterState>,
    len: AtomicUsize,
}

// SAFETY: the raw `head` pointer and every node pointer point into the arena the list owns
// (invariant 5); nodes are immutable once published (invariant 1), links are atomics, and
// inserts are serialized by `writer` (invariant 4). Sharing across threads is the design.
unsafe impl Send for SkipList {}
// SAFETY: see `Send`.
unsafe impl Sync for SkipList {}

impl SkipList {
    pub(crate) fn new(comparator: InternalKeyComparator) -> Self {
        let arena = Arena::new();
        let mut arena_state = ArenaState::new();
        let head = Self::allocate_node(&arena, &mut arena_state, MAX_HEIGHT, &[], &[]);
        SkipList {
            arena,
            comparator,
            head,
            max_height: AtomicUsize::new(1),
            writer: Mutex::new(WriterState {
                arena: arena_state,
                rng: 0x2545_f491_4f6c_dd1d,
                key: Vec::new(),
                tail: [head; MAX_HEIGHT],
            }),
            len: AtomicUsize::new(0),
        }
    }

    /// Allocates a node and writes its header, null links, key and value (invariant 1).
    fn allocate_node(
        arena: &Arena,
        state: &mut ArenaState,
        height: usize,
        key: &[u8],
        value: &[u8],
    ) -> Node {
        let bytes = HEADER_BYTES + height * LINK_BYTES + key.len() + value.len();
        let node = arena.allocate(state, bytes).cast::<NodeHeader>();
        // SAFETY: `node` is fresh, 8-byte aligned memory of `bytes` bytes that nothing else
        // references; the writes below stay within it, and each link slot is aligned for an
        // `AtomicPtr` (see the assertion on `LINK_BYTES`).
        unsafe {
            node.write(NodeHeader {
                key_len: u32::try_from(key.len()).expect("keys are limited below 4 GiB"),
                value_len: u32::try_from(value.len()).expect("values are limited below 4 GiB"),
                height: height as u32,
                _pad: 0,
            });
            for level in 0..height {
                node.cast::<u8>()
                    .add(HEADER_BYTES + level * LINK_BYTES)
                    .cast::<AtomicPtr<NodeHeader>>()
                    .write(AtomicPtr::new(std::ptr::null_mut()));
            }
            let data = node.cast::<u8>().add(HEADER_BYTES + height * LINK_BYTES);
            std::ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), data.add(key.len()), value.len());
        }
        node
    }

    fn random_height(state: &mut u64) -> usize {
        let mut height = 1;
        loop {
            // xorshift64*
            *state ^= *state >> 12;
            *state ^= *state << 25;
            *state ^= *state >> 27;
            let r = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32;
            if height < MAX_HEIGHT && r.is_multiple_of(BRANCHING) {
                height += 1;
            } else {
                return height;
            }
        }
    }

    /// The bytes the list's memory takes.
    pub(crate) fn memory_usage(&self) -> usize {
        self.arena.memory_usage()
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn next(&self, node: Node, level: usize) -> Node {
        // SAFETY: `node` is `head` or a reachable node (invariant 5) and callers only ask for
        // levels below its height (they walk down from a level the node was reached at).
        unsafe { link(node)(level).load(Ordering::Acquire) }
    }

    /// The last node at `level` with key < `key`, walking right from `from`: `head` or a node
    /// of a height above `level` whose key is before `key`.
    #[inline]
    fn last_before(&self, mut from: Node, level: usize, key: &[u8]) -> Node {
        loop {
            let next = self.next(from, level);
            if !self.key_is_after(key, next) {
                return from;
            }
            from = next;
        }
    }

    /// The height of `node`'s tower.
    fn height_of(&self, node: Node) -> usize {
        // SAFETY: `node` is a reachable, published node (invariants 1, 2, 5): its header is
        // written before publication and never changed.
        unsafe { (*node).height as usize }
    }

    fn key_of(&self, node: Node) -> &[u8] {
        // SAFETY: `node` is a reachable, published node (invariants 1, 2, 5).
        unsafe { node_key(node) }
    }

    /// True if `key` sorts after the key of `node` (a null node is past every key).
    fn key_is_after(&self, key: &[u8], node: Node) -> bool {
        !node.is_null() && self.comparator.compare(self.key_of(node), key) == CmpOrdering::Less
    }

    /// The first node with key >= `key`, filling `prev` with the last node before it at each
    /// level when given.
    fn find_greater_or_equal(&self, key: &[u8], mut prev: Option<&mut [Node; MAX_HEIGHT]>) -> Node {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            let next = self.next(x, level);
            if self.key_is_after(key, next) {
                x = next;
            } else {
                if let Some(p) = prev.as_deref_mut() {
                    p[level] = x;
                }
                if level == 0 {
                    return next;
                }
                level -= 1;
            }
        }
    }

    /// The last node with key < `key`, or `head` if there is none (the search a step back
    /// made before it kept its fingers; the tests' reference).
    #[cfg(test)]
    fn find_less_than(&self, key: &[u8]) -> Node {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            let next = self.next(x, level);
            if self.key_is_after(key, next) {
                x = next;
            } else if level == 0 {
                return x;
            } else {
                level -= 1;
            }
        }
    }

    /// The last node, or `head` if the list is empty.
    fn find_last(&self) -> Node {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            let next = self.next(x, level);
            if !next.is_null() {
                x = next;
            } else if level == 0 {
                return x;
            } else {
                level -= 1;
            }
        }
    }

    #[cfg(test)]
    /// Inserts the entry `user_key ‖ fixed64(tag) → value`. Inserts are serialized; readers
    /// are never blocked.
    ///
    /// Requires: no entry with the same internal key is present (tags carry unique seqnos).
    pub(crate) fn insert(&self, user_key: &[u8], tag: u64, value: &[u8]) {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.insert_locked(&mut writer, user_key, tag, value);
    }

    /// Inserts several entries under one acquisition of the writer lock.
    pub(crate) fn insert_all<'a>(&self, entries: impl Iterator<Item = (&'a [u8], u64, &'a [u8])>) {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for (user_key, tag, value) in entries {
            self.insert_locked(&mut writer, user_key, tag, value);
        }
    }

    fn insert_locked(&self, writer: &mut WriterState, user_key: &[u8], tag: u64, value: &[u8]) {
        let WriterState {
            arena,
            rng,
            key,
            tail,
        } = writer;
        key.clear();
        key.extend_from_slice(user_key);
        key.extend_from_slice(&tag.to_le_bytes());
        let last = tail[0];
        let prev = if last == self.head || self.key_is_after(key, last) {
            // Appending: the last node of each level precedes the new key there.
            *tail
        } else {
            let mut prev = [self.head; MAX_HEIGHT];
            let found = self.find_greater_or_equal(key, Some(&mut prev));
            debug_assert!(
                found.is_null()
                    || self.comparator.compare(self.key_of(found), key) != CmpOrdering::Equal,
                "duplicate internal key"
            );
            prev
        };
        let height = Self::random_height(rng);
        let max_height = self.max_height.load(Ordering::Relaxed);
        if height > max_height {
            // `prev` already holds `head` for the new levels. Readers that see the new height
            // early find null links from `head` there, which is correct.
            self.max_height.store(height, Ordering::Relaxed);
        }
        let node = Self::allocate_node(&self.arena, arena, height, key, value);
        for (level, &p) in prev.iter().enumerate().take(height) {
            // SAFETY: `node` has `height > level` links; `p` is `head` or a node reached at
            // `level`, so its height is > `level`. The node is not yet visible, so its own link
            // needs no ordering; publishing it into `p` is a Release store (invariant 2), and
            // no other insert runs (invariant 4: the caller holds the writer lock).
            unsafe {
                let successor = link(p)(level).load(Ordering::Relaxed);
                link(node)(level).store(successor, Ordering::Relaxed);
                link(p)(level).store(node, Ordering::Release);
                if successor.is_null() {
                    tail[level] = node;
                }
            }
        }
        self.len.fetch_add(1, Ordering::Relaxed);
    }
}

/// Something that keeps a [`SkipList`] alive: a borrow of it, or an owner such as
/// `Arc<MemTable>`.
pub(crate) trait ListOwner {
    fn list(&self) -> &SkipList;
}

impl ListOwner for &SkipList {
    fn list(&self) -> &SkipList {
        self
    }
}

/// A position in a [`SkipList`]: a node, or nowhere (null). The cursor holds its list's owner,
/// so every node it reaches stays valid while it lives (invariant 5).
pub(crate) struct Cursor<L: ListOwner> {
    owner: L,
    /// Invariant: null, or a node reachable in `owner.list()`.
    node: Node,
    /// Where the last step back started its search from, kept for the next one: when
    /// `fingers_on` is `node` (not null), each `fingers[level]` is `head` or a reachable node
    /// of a height above `level` whose key is before `node`'s. Nodes are never removed and never
    /// change (invariants 1, 5), so once true of a node this stays true, whatever the cursor
    /// or the writer does meanwhile.
    fingers: [Node; MAX_HEIGHT],
    fingers_on: Node,
}

// SAFETY: the node pointer is only dereferenced through `owner`, which keeps it valid; a cursor
// is as thread-safe as its owner.
unsafe impl<L: ListOwner + Send> Send for Cursor<L> {}

impl<'a> Cursor<&'a SkipList> {
    /// The current key and value, borrowed from the list itself rather than from the cursor.
    /// Requires `valid()`.
    pub(crate) fn entry(&self) -> (&'a [u8], &'a [u8]) {
        assert!(self.valid(), "cursor is not on an entry");
        // SAFETY: a valid cursor is on a reachable node of a list borrowed for `'a`; nodes live
        // as long as their list (invariant 5) and never change (invariant 1).
        unsafe { (node_key(self.node), node_value(self.node)) }
    }
}

impl<L: ListOwner> Cursor<L> {
    /// A cursor over `owner`'s list, not yet positioned.
    pub(crate) fn new(owner: L) -> Self {
        Cursor {
            owner,
            node: std::ptr::null_mut(),
            fingers: [std::ptr::null_mut(); MAX_HEIGHT],
            fingers_on: std::ptr::null_mut(),
        }
    }

    pub(crate) fn valid(&self) -> bool {
        !self.node.is_null()
    }

    /// What keeps the list alive.
    pub(crate) fn owner(&self) -> &L {
        &self.owner
    }

    /// The current key. Requires `valid()`.
    pub(crate) fn key(&self) -> &[u8] {
        assert!(self.valid(), "cursor is not on an entry");
        // SAFETY: a valid cursor is on a reachable node of the list `owner` keeps alive, and the
        // returned slice borrows `self`, hence `owner`.
        unsafe { node_key(self.node) }
    }

    /// The current value. Requires `valid()`.
    pub(crate) fn value(&self) -> &[u8] {
        assert!(self.valid(), "cursor is not on an entry");
        // SAFETY: as for `key`.
        unsafe { node_value(self.node) }
    }

    pub(crate) fn seek(&mut self, key: &[u8]) {
        self.node = self.owner.list().find_greater_or_equal(key, None);
    }

    pub(crate) fn seek_to_first(&mut self) {
        let list = self.owner.list();
        self.node = list.next(list.head, 0);
    }

    pub(crate) fn seek_to_last(&mut self) {
        let list = self.owner.list();
        let last = list.find_last();
        self.node = if last == list.head {
            std::ptr::null_mut()
        } else {
            last
        };
    }

    /// Requires `valid()`.
    pub(crate) fn next(&mut self) {
        assert!(self.valid(), "cursor is not on an entry");
        self.node = self.owner.list().next(self.node, 0);
    }

    /// Moves back. Requires `valid()`.
    ///
    /// The list has no back links, so the node before is searched for; from the head (about
    /// `log4(len)` levels of a few comparisons each) only when the cursor did not get here by
    /// a step back. A step back notes, at each level, a node before the one it lands on
    /// (`fingers`); the next step finds the node before on level 0 from `fingers[0]` (one
    /// comparison when no insert came between), and searches again only the levels that
    /// node's own tower spans (one in three-quarters of nodes), each from the finger a level
    /// up, which precedes it closely. The fingers above stay right: every node before the
    /// current one is at or before the node found, which is on none of those levels.
    pub(crate) fn prev(&mut self) {
        assert!(self.valid(), "cursor is not on an entry");
        let Cursor {
            owner,
            node,
            fingers,
            fingers_on,
        } = self;
        let list = owner.list();
        let key = list.key_of(*node);
        if *fingers_on != *node {
            *fingers = [list.head; MAX_HEIGHT];
            list.find_greater_or_equal(key, Some(fingers));
        }
        let before = list.last_before(fingers[0], 0, key);
        if before == list.head {
            *node = std::ptr::null_mut();
            *fingers_on = std::ptr::null_mut();
            return;
        }
        let height = list.height_of(before);
        let before_key = list.key_of(before);
        let mut x = fingers.get(height).copied().unwrap_or(list.head);
        for level in (0..height).rev() {
            x = list.last_before(x, level, before_key);
            fingers[level] = x;
        }
        *node = before;
        *fingers_on = before;
    }
}

#[cfg(test)]
#[path = "skiplist_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
#[path = "skiplist_loom.rs"]
pub(crate) mod loom_model;
