// SPDX-License-Identifier: MIT OR Apache-2.0
//! A cursor over a sorted `Vec`, for tests of the cursors built on other cursors. It can be told
//! to fail after some number of moves, to test error propagation.

use super::InternalIterator;
use crate::error::{Error, Result};

pub(crate) struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Invariant: `pos <= entries.len()`; `entries.len()` means not on an entry.
    pos: usize,
    moves_left: Option<usize>,
    pending_error: Option<Error>,
    error: Option<Error>,
}

impl VecIter {
    /// Requires: `entries` sorted by the comparator the caller uses, keys bytewise-comparable
    /// for seeks.
    pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let pos = entries.len();
        VecIter {
            entries,
            pos,
            moves_left: None,
            pending_error: None,
            error: None,
        }
    }

    /// Makes the cursor fail with `error` on its `moves`-th move from now.
    pub(crate) fn fail_after(&mut self, moves: usize, error: Error) {
        self.moves_left = Some(moves);
        self.pending_error = Some(error);
    }

    fn moved(&mut self) {
        if let Some(n) = self.moves_left.as_mut() {
            if *n == 0 {
                self.error = self.pending_error.take();
                self.pos = self.entries.len();
            } else {
                *n -= 1;
            }
        }
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
        self.moved();
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().saturating_sub(1);
        if self.entries.is_empty() {
            self.pos = 0;
        }
        self.moved();
    }
    fn seek(&mut self, target: &[u8]) {
        self.pos = self.entries.partition_point(|(k, _)| k.as_slice() < target);
        self.moved();
    }
    fn next(&mut self) {
        self.pos += 1;
        self.moved();
    }
    fn prev(&mut self) {
        self.pos = if self.pos == 0 {
            self.entries.len()
        } else {
            self.pos - 1
        };
        self.moved();
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
    fn status(&self) -> Result<()> {
        self.error.clone().map_or(Ok(()), Err)
    }
}
