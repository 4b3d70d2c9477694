// SPDX-License-Identifier: MIT OR Apache-2.0
//! The filter block: one filter per 2 KiB window of table offsets.
//!
//! ```text
//! [filter 0] ... [filter N-1]
//! [u32 offset of filter 0] ... [u32 offset of filter N-1]
//! [u32 offset of the offset array]
//! [u8 base_lg = 11]
//! ```
//!
//! Filter `i` holds the keys of every data block whose start offset `o` has `o >> 11 == i`.
//! Windows where no block starts get an empty filter (its offset equals the next one), which
//! answers "no match".

use std::sync::Arc;

use crate::coding::{decode_fixed32, put_fixed32};
use crate::filter::FilterPolicy;

/// log2 of the table-offset window each filter covers.
const FILTER_BASE_LG: u8 = 11;
const FILTER_BASE: u64 = 1 << FILTER_BASE_LG;

/// Builds a table's filter block as its data blocks are written.
pub struct FilterBlockBuilder {
    policy: Arc<dyn FilterPolicy>,
    /// The pending keys, back to back, and where each starts.
    keys: Vec<u8>,
    starts: Vec<usize>,
    result: Vec<u8>,
    filter_offsets: Vec<u32>,
}

impl FilterBlockBuilder {
    /// A builder using `policy`.
    pub fn new(policy: Arc<dyn FilterPolicy>) -> Self {
        FilterBlockBuilder {
            policy,
            keys: Vec::new(),
            starts: Vec::new(),
            result: Vec::new(),
            filter_offsets: Vec::new(),
        }
    }

    /// Announces that the next data block starts at `block_offset`.
    pub fn start_block(&mut self, block_offset: u64) {
        let index = block_offset / FILTER_BASE;
        while index > self.filter_offsets.len() as u64 {
            self.generate_filter();
        }
    }

    /// Adds the filter key of one entry of the current data block.
    pub fn add_key(&mut self, key: &[u8]) {
        self.starts.push(self.keys.len());
        self.keys.extend_from_slice(key);
    }

    /// Finishes the block and returns its bytes.
    pub fn finish(&mut self) -> &[u8] {
        if !self.starts.is_empty() {
            self.generate_filter();
        }
        let array_offset = self.result.len() as u32;
        for i in 0..self.filter_offsets.len() {
            put_fixed32(&mut self.result, self.filter_offsets[i]);
        }
        put_fixed32(&mut self.result, array_offset);
        self.result.push(FILTER_BASE_LG);
        &self.result
    }

    fn generate_filter(&mut self) {
        self.filter_offsets.push(self.result.len() as u32);
        if self.starts.is_empty() {
            return;
        }
        let ends = self.starts[1..].iter().copied().chain([self.keys.len()]);
        let keys: Vec<&[u8]> = self
            .starts
            .iter()
            .zip(ends)
            .map(|(&s, e)| &self.keys[s..e])
            .collect();
        self.policy.create_filter(&keys, &mut self.result);
        self.keys.clear();
        self.starts.clear();
    }
}

/// Answers filter queries from a table's filter block.
///
/// A damaged filter block never hides data: any inconsistency answers "may match".
pub struct FilterBlockReader {
    policy: Arc<dyn FilterPolicy>,
    data: Vec<u8>,
    /// Offset of the offset array. Invariant: `array_offset + 4 * num_filters + 5 == data.len()`
    /// when `num_filters > 0`.
    array_offset: usize,
    num_filters: usize,
    base_lg: u8,
}

impl FilterBlockReader {
    /// Reads a filter block.
    pub fn new(policy: Arc<dyn FilterPolicy>, data: Vec<u8>) -> Self {
        let n = data.len();
        let mut reader = FilterBlockReader {
            policy,
            data,
            array_offset: 0,
            num_filters: 0,
            base_lg: FILTER_BASE_LG,
        };
        if n < 5 {
            return reader;
        }
        reader.base_lg = reader.data[n - 1];
        let array_offset = decode_fixed32(&reader.data[n - 5..]).expect("4 bytes") as usize;
        if array_offset > n - 5 {
            return reader;
        }
        reader.array_offset = array_offset;
        reader.num_filters = (n - 5 - array_offset) / 4;
        reader
    }

    /// The memory the reader holds, for cache accounting.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// False only if the data block at `block_offset` certainly does not hold `key`.
    pub fn key_may_match(&self, block_offset: u64, key: &[u8]) -> bool {
        let Some(index) = block_offset.checked_shr(u32::from(self.base_lg)) else {
            return true;
        };
        let Ok(index) = usize::try_from(index) else {
            return true;
        };
        if index >= self.num_filters {
            return true;
        }
        let at = |i: usize| decode_fixed32(&self.data[self.array_offset + 4 * i..]);
        let start = at(index).map(|v| v as usize);
        // For the last filter the "next offset" is the word holding the array offset.
        let limit = at(index + 1).map(|v| v as usize);
        match (start, limit) {
            (Some(start), Some(limit)) if start <= limit && limit <= self.array_offset => {
                self.policy.key_may_match(key, &self.data[start..limit])
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::BloomFilterPolicy;

    fn bloom() -> Arc<dyn FilterPolicy> {
        Arc::new(BloomFilterPolicy::new(10))
    }

    #[test]
    fn empty_filter_block_is_five_bytes() {
        let mut b = FilterBlockBuilder::new(bloom());
        assert_eq!(b.finish(), &[0, 0, 0, 0, 11]);
        let r = FilterBlockReader::new(bloom(), vec![0, 0, 0, 0, 11]);
        assert!(r.key_may_match(0, b"foo"));
        assert!(r.key_may_match(100_000, b"foo"));
    }

    #[test]
    fn single_block_matches_the_format_vector() {
        let mut b = FilterBlockBuilder::new(bloom());
        b.start_block(0);
        b.add_key(b"hello");
        b.add_key(b"world");
        assert_eq!(
            b.finish(),
            &[0x11, 0x40, 0x00, 0x41, 0x44, 0x10, 0x40, 0x10, 0x06, 0, 0, 0, 0, 9, 0, 0, 0, 0x0b]
        );
    }

    #[test]
    fn windows_without_a_block_get_empty_filters() {
        let mut b = FilterBlockBuilder::new(bloom());
        b.start_block(0);
        b.add_key(b"foo");
        b.add_key(b"bar");
        b.add_key(b"box");
        b.start_block(3100);
        b.add_key(b"box");
        b.start_block(9000);
        b.add_key(b"hello");
        let data = b.finish().to_vec();
        let r = FilterBlockReader::new(bloom(), data);
        // Block at 0: filter 0.
        assert!(r.key_may_match(0, b"foo"));
        assert!(r.key_may_match(0, b"box"));
        assert!(!r.key_may_match(0, b"hello"));
        // Block at 3100: filter 1.
        assert!(r.key_may_match(3100, b"box"));
        assert!(!r.key_may_match(3100, b"foo"));
        // Windows 2 and 3 have empty filters.
        assert!(!r.key_may_match(4100, b"box"));
        assert!(!r.key_may_match(6200, b"hello"));
        // Block at 9000: filter 4.
        assert!(r.key_may_match(9000, b"hello"));
        assert!(!r.key_may_match(9000, b"foo"));
    }

    /// A key's answer is read from its own filter and the two offset words around it; a flip
    /// there can look like a consistent filter that leaves the key out, which no reader can
    /// tell. Damage anywhere else, or any truncation, must still answer "may match".
    #[test]
    fn damage_outside_a_keys_own_filter_answers_may_match_without_panic() {
        let mut b = FilterBlockBuilder::new(bloom());
        b.start_block(0);
        b.add_key(b"a");
        b.start_block(5000);
        b.add_key(b"b");
        let good = b.finish().to_vec();
        let array_offset = decode_fixed32(&good[good.len() - 5..]).unwrap() as usize;
        let own_bytes = |window: usize| {
            let word = array_offset + 4 * window;
            let start = decode_fixed32(&good[word..]).unwrap() as usize;
            let limit = decode_fixed32(&good[word + 4..]).unwrap() as usize;
            [start..limit, word..word + 8]
        };
        // Block 5000 is in window 2 (windows are 2 KiB); window 1 has an empty filter.
        let probes = [(0, b"a", own_bytes(0)), (5000, b"b", own_bytes(2))];
        for i in 0..good.len() {
            for bit in [1u8, 0x80] {
                let mut data = good.clone();
                data[i] ^= bit;
                let r = FilterBlockReader::new(bloom(), data);
                for (offset, key, own) in &probes {
                    if !own.iter().any(|range| range.contains(&i)) {
                        assert!(
                            r.key_may_match(*offset, *key),
                            "flipping {bit:#x} at byte {i} hid {key:?}"
                        );
                    }
                }
                for offset in [2048, 1 << 40, u64::MAX] {
                    let _ = r.key_may_match(offset, b"a");
                }
            }
        }
        for len in 0..good.len() {
            let r = FilterBlockReader::new(bloom(), good[..len].to_vec());
            for (offset, key, _) in &probes {
                assert!(r.key_may_match(*offset, *key), "{len} bytes hid {key:?}");
            }
        }
    }
}
