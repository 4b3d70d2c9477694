// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`BlockBuilder`]: writes the entries of one block with prefix-compressed keys.
//!
//! ```text
//! entry:   varint32 shared ‖ varint32 non_shared ‖ varint32 value_len
//!          ‖ key[shared..] (non_shared bytes) ‖ value (value_len bytes)
//! block:   entry* ‖ u32 restart offset * num_restarts ‖ u32 num_restarts
//! ```
//!
//! Every `restart_interval`-th entry is a *restart point*: it stores its whole key
//! (`shared = 0`) and its offset goes into the restart array, so a reader can binary-search the
//! restart points and decode forward from one of them.

use crate::coding::{put_fixed32, put_varint32};

/// Builds one block. Keys must be added in strictly increasing order.
#[derive(Debug)]
pub struct BlockBuilder {
    restart_interval: usize,
    buffer: Vec<u8>,
    /// Offsets of the restart points. Invariant: never empty; `restarts[0] == 0`.
    restarts: Vec<u32>,
    /// Entries added since the last restart point.
    counter: usize,
    last_key: Vec<u8>,
    entry_count: usize,
    finished: bool,
}

impl BlockBuilder {
    /// A builder starting a restart point every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            restart_interval: restart_interval.max(1),
            buffer: Vec::new(),
            restarts: vec![0],
            counter: 0,
            last_key: Vec::new(),
            entry_count: 0,
            finished: false,
        }
    }

    /// A builder whose buffers are sized for a block of `bytes` bytes (entries and restart
    /// array) with `restarts` restart points, so that a block of that size is built without
    /// growing them: its bytes then end in a buffer of exactly their length.
    pub(crate) fn with_capacity(restart_interval: usize, bytes: usize, restarts: usize) -> Self {
        let mut builder = BlockBuilder::new(restart_interval);
        builder.buffer.reserve_exact(bytes);
        builder.restarts.reserve_exact(restarts.saturating_sub(1));
        builder
    }

    /// Forgets everything added, keeping the allocations.
    pub fn reset(&mut self) {
        self.buffer.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.entry_count = 0;
        self.finished = false;
    }

    /// Appends an entry.
    ///
    /// Requires: `finish` was not called since the last `reset`, and `key` is greater than every
    /// key added before (under the block's comparator).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished);
        let mut shared = 0;
        if self.counter < self.restart_interval {
            shared = self
                .last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
        } else {
            self.restarts.push(self.buffer.len() as u32);
            self.counter = 0;
        }
        let non_shared = key.len() - shared;
        put_varint32(&mut self.buffer, shared as u32);
        put_varint32(&mut self.buffer, non_shared as u32);
        put_varint32(&mut self.buffer, value.len() as u32);
        self.buffer.extend_from_slice(&key[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
        self.entry_count += 1;
    }

    /// Appends the restart array and returns the finished block. It stays valid until `reset`.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &r in &self.restarts {
                put_fixed32(&mut self.buffer, r);
            }
            put_fixed32(&mut self.buffer, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buffer
    }

    /// The finished block, taken from the builder.
    pub fn into_finished(mut self) -> Vec<u8> {
        self.finish();
        self.buffer
    }

    /// [`finish`](Self::finish), with the restart points' offsets (the first 0) and where
    /// the entries end (the restart array's offset).
    pub(crate) fn finish_with_restarts(&mut self) -> (&[u8], &[u32], usize) {
        self.finish();
        let entries_end = self.buffer.len() - 4 * self.restarts.len() - 4;
        (&self.buffer, &self.restarts, entries_end)
    }

    /// The number of entries added since the last reset.
    pub fn entry_count(&self) -> usize {
        self.entry_count
    }

    /// The size the block would have if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buffer.len() + 4 * self.restarts.len() + 4
    }

    /// True if no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entry_count == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }
}
