// SPDX-License-Identifier: MIT OR Apache-2.0
//! Compaction: choosing what to merge ([`picker`], pure: it reads a version), the plan it
//! returns ([`Compaction`]), and running a plan ([`job`]: merging tables, writing outputs).
//! Installing the result is the database's background thread's.

pub(crate) mod job;
pub(crate) mod picker;

use std::cmp::Ordering;
use std::sync::Arc;

use crate::comparator::Comparator;
use crate::key::{user_key, InternalKeyComparator};
use crate::version::version::{total_file_size, LiveFile, Version};
use crate::version::{VersionEdit, NUM_LEVELS};

/// A compaction plan: merge `inputs[0]` (at `level`) with `inputs[1]` (at `level + 1`) into new
/// tables at `level + 1`.
pub(crate) struct Compaction {
    pub(crate) level: usize,
    pub(crate) inputs: [Vec<Arc<LiveFile>>; 2],
    /// Files at `level + 2` overlapping the compaction's range: outputs are cut so that none
    /// overlaps too many of them.
    grandparents: Vec<Arc<LiveFile>>,
    /// The version the plan was made from; it keeps the inputs alive.
    pub(crate) input_version: Arc<Version>,
    /// The edit the compaction will log: its compact pointer, deletions and outputs.
    pub(crate) edit: VersionEdit,
    pub(crate) max_output_file_size: u64,
    icmp: InternalKeyComparator,
    /// Manual compactions, and rewrites that apply range deletions, never move a file
    /// trivially.
    pub(crate) manual: bool,
    // State of `should_stop_before`.
    grandparent_index: usize,
    seen_key: bool,
    overlapped_bytes: u64,
    // State of `is_base_level_for_key`: per level, the file index reached so far.
    level_ptrs: [usize; NUM_LEVELS],
}

impl Compaction {
    /// The number of input files at `level + which`.
    pub(crate) fn num_input_files(&self, which: usize) -> usize {
        self.inputs[which].len()
    }

    /// True if the single input file can move down a level without being rewritten: nothing
    /// to merge with, and not so much overlap with the grandparents that a later compaction
    /// would be expensive.
    pub(crate) fn is_trivial_move(&self) -> bool {
        !self.manual
            && self.inputs[0].len() == 1
            && self.inputs[1].is_empty()
            && total_file_size(&self.grandparents) <= 10 * self.max_output_file_size
    }

    /// Adds the deletion of every input file to the edit.
    pub(crate) fn add_input_deletions(&mut self) {
        for which in 0..2 {
            for f in &self.inputs[which] {
                self.edit
                    .deleted_files
                    .insert((self.level + which, f.number));
            }
        }
    }

    /// True if no level below the output level holds `user_key`, so a tombstone for it can be
    /// dropped. Requires: called with increasing user keys.
    pub(crate) fn is_base_level_for_key(&mut self, key: &[u8]) -> bool {
        let ucmp = self.icmp.user_comparator().clone();
        for level in self.level + 2..NUM_LEVELS {
            let files = &self.input_version.files[level];
            while self.level_ptrs[level] < files.len() {
                let f = &files[self.level_ptrs[level]];
                if ucmp.compare(key, user_key(&f.largest)) != Ordering::Greater {
                    if ucmp.compare(key, user_key(&f.smallest)) != Ordering::Less {
                        return false;
                    }
                    break;
                }
                self.level_ptrs[level] += 1;
            }
        }
        true
    }

    /// True if the output table should end before `internal_key`, because the current output
    /// already overlaps more than 20 × max_file_size of grandparent data.
    pub(crate) fn should_stop_before(&mut self, internal_key: &[u8]) -> bool {
        while self.grandparent_index < self.grandparents.len()
            && self.icmp.compare(
                internal_key,
                &self.grandparents[self.grandparent_index].largest,
            ) == Ordering::Greater
        {
            if self.seen_key {
                self.overlapped_bytes += self.grandparents[self.grandparent_index].file_size;
            }
            self.grandparent_index += 1;
        }
        self.seen_key = true;
        if self.overlapped_bytes > 10 * self.max_output_file_size {
            self.overlapped_bytes = 0;
            true
        } else {
            false
        }
    }

    /// The total bytes of the inputs.
    pub(crate) fn input_bytes(&self) -> u64 {
        total_file_size(&self.inputs[0]) + total_file_size(&self.inputs[1])
    }
}
