// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Arena`]: bump allocation of memtable nodes, freed all at once when the memtable goes.
//!
//! # Safety model
//!
//! Memory is handed out from blocks of `u64`s (so every block is 8-byte aligned) that are never
//! freed, moved or reused until the [`ArenaState`] that owns them is dropped. Blocks are kept as
//! raw pointers from `Box::into_raw` (not as `Box`es, whose moves would re-assert unique
//! ownership over memory that nodes point into) and turned back into boxes only in `Drop`. So a
//! pointer returned by [`Arena::allocate`] stays valid, for the requested size, for as long as
//! its state lives. The state is kept by the single allocating party (the skiplist, under its
//! writer mutex); reading memory already handed out takes no lock, and is the caller's business
//! (the skiplist publishes nodes with release stores).

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// The size of a regular block: small, so that memory accounting (which counts whole blocks)
/// stays close to what is used, even with a small write buffer.
const BLOCK_BYTES: usize = 4096;
/// Requests larger than this get a block of their own, so that a big value does not waste the
/// rest of the current block.
const DEDICATED_THRESHOLD: usize = BLOCK_BYTES / 4;

pub(crate) struct ArenaState {
    /// Every block, from `Box::<[u64]>::into_raw`; freed only by `ArenaState`'s `Drop`.
    blocks: Vec<*mut [u64]>,
    /// The unused tail of the current block. Invariant: `cursor..cursor + remaining` lies inside
    /// the last regular block (or `remaining == 0`).
    cursor: *mut u8,
    remaining: usize,
}

/// A bump allocator. Its allocation state ([`ArenaState`]) is kept by the one who allocates
/// (the skiplist, under its writer lock), so allocating takes no lock of its own; the memory
/// counter is shared with readers.
pub(crate) struct Arena {
    /// Bytes reserved from the system, for memory accounting. Read without any lock.
    memory_usage: AtomicUsize,
}

// SAFETY: `ArenaState`'s raw pointers point into blocks the state owns; whoever holds the state
// (the skiplist's writer mutex) is the only one to use them. Nothing is tied to a thread.
unsafe impl Send for ArenaState {}

impl ArenaState {
    pub(crate) fn new() -> Self {
        ArenaState {
            blocks: Vec::new(),
            cursor: std::ptr::null_mut(),
            remaining: 0,
        }
    }
}

impl Arena {
    pub(crate) fn new() -> Self {
        Arena {
            memory_usage: AtomicUsize::new(0),
        }
    }

    /// Bytes of memory the arena holds.
    pub(crate) fn memory_usage(&self) -> usize {
        self.memory_usage.load(Ordering::Relaxed)
    }

    fn new_block(&self, state: &mut ArenaState, bytes: usize) -> *mut u8 {
        let words = bytes.div_ceil(8);
        let block = Box::into_raw(vec![0u64; words].into_boxed_slice());
        let ptr = block.cast::<u8>();
        state.blocks.push(block);
        self.memory_usage.fetch_add(
            words * 8 + std::mem::size_of::<Box<[u64]>>(),
            Ordering::Relaxed,
        );
        ptr
    }

    /// Returns `bytes` bytes of zeroed memory, 8-byte aligned, valid until `state` is dropped.
    pub(crate) fn allocate(&self, state: &mut ArenaState, bytes: usize) -> *mut u8 {
        let bytes = bytes.max(1).next_multiple_of(8);
        if bytes > DEDICATED_THRESHOLD {
            return self.new_block(state, bytes);
        }
        if bytes > state.remaining {
            state.cursor = self.new_block(state, BLOCK_BYTES);
            state.remaining = BLOCK_BYTES;
        }
        let ptr = state.cursor;
        // SAFETY: `bytes <= remaining`, so `cursor + bytes` stays inside the current block
        // (invariant of `ArenaState`), or lands one past its end.
        state.cursor = unsafe { state.cursor.add(bytes) };
        state.remaining -= bytes;
        ptr
    }
}

impl Drop for ArenaState {
    fn drop(&mut self) {
        for &block in &self.blocks {
            // SAFETY: each pointer came from `Box::into_raw` in `new_block` and is freed once,
            // here. The state is dropped with its skiplist, when no reader holds it (the
            // skiplist's invariant 5).
            drop(unsafe { Box::from_raw(block) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_distinct_and_accounted() {
        let arena = Arena::new();
        let mut state = ArenaState::new();
        let mut ptrs = Vec::new();
        for size in [1usize, 7, 8, 9, 100, 4096, 20_000, 3, BLOCK_BYTES] {
            let p = arena.allocate(&mut state, size);
            assert_eq!(p as usize % 8, 0);
            // SAFETY: `p` is valid for `size` bytes; writing them checks the allocation is real.
            unsafe { std::ptr::write_bytes(p, 0xab, size) };
            ptrs.push((p as usize, size));
        }
        ptrs.sort();
        for w in ptrs.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "allocations overlap");
        }
        assert!(arena.memory_usage() >= BLOCK_BYTES + 20_000 + BLOCK_BYTES);
    }
}
