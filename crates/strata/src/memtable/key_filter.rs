// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`KeyFilter`]: a bloom filter over the user keys added to a memtable, so that a point
//! lookup of a key the memtable does not hold (most lookups, once the data has been flushed)
//! skips the skiplist search: about twenty dependent, cache-missing pointer loads in a
//! memtable of a few MiB, against one load of one word here.
//!
//! Blocked to one 64-bit word per key: a key sets [`PROBES`] bits of one word, so a lookup
//! reads one cache line. Sized by the write buffer: one bit per 8 bytes of it, about 14 bits
//! per entry for db_bench's 116-byte entries (a false positive rate near 1%); a false
//! positive only costs the search the filter would have saved.
//!
//! Concurrency: the one writer sets bits with `fetch_or` before it inserts the entries, and
//! readers load words, both `Relaxed`. A reader needs to see the bits of every entry its
//! sequence number makes visible, and those entries were published by the write path's
//! `Release` store of the visible sequence number after the bits were set; the reader's
//! `Acquire` load of it (or of a snapshot, taken the same way) orders the bits before its
//! lookup. A key added later may be missed, and its entry is not visible to that reader
//! anyway.
//!
//! Only for bytewise comparators: a bloom filter answers for equal bytes, and a custom
//! comparator may call different bytes equal.
//!
//! The filter outlives its memtable: the level-0 table the memtable is flushed to keeps it
//! (`LiveFile::key_filter`), so that a lookup of a key the table does not hold skips the
//! table as it skipped the memtable. It is complete by then (the memtable takes no more
//! writes), so every user key of the table is in it.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bits a key sets in its word.
const PROBES: u32 = 4;

/// The hash's seed: fixed, so that a filter behaves the same in every run.
const HASH_SEED: u64 = 0x5172_a7a0_f11e_7e25;

/// A bloom filter of user keys, one word per key. Invariant: `words.len()` is a power of two.
pub(crate) struct KeyFilter {
    words: Box<[AtomicU64]>,
}

impl std::fmt::Debug for KeyFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFilter")
            .field("bytes", &(self.words.len() * 8))
            .finish()
    }
}

/// A user key's hash as the filters use it: computed once, asked of many filters (a get asks
/// the filter of every level-0 table whose range holds its key).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHash(u64);

impl KeyHash {
    /// The hash of `user_key`.
    #[inline]
    pub(crate) fn of(user_key: &[u8]) -> Self {
        KeyHash(foldhash::fast::FixedState::with_seed(HASH_SEED).hash_one(user_key))
    }
}

impl KeyFilter {
    /// A filter for a memtable of about `write_buffer_size` bytes: one bit per 8 bytes, as a
    /// power of two of words, at least 64 words and at most 2^24 (128 MiB of filter would be a
    /// write buffer of 1 GiB).
    pub(crate) fn for_write_buffer(write_buffer_size: usize) -> Self {
        let words = (write_buffer_size / 512)
            .clamp(64, 1 << 24)
            .next_power_of_two();
        KeyFilter {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The word a key uses and the bits it sets there.
    #[inline]
    fn locate(&self, KeyHash(h): KeyHash) -> (usize, u64) {
        // One 64-bit hash: the word from its high bits, each probe's bit from six low bits of
        // its own. (LevelDB's 32-bit bloom hash collides too often on keys that differ in a few
        // digits: 3,500 collisions among 130,000 16-digit keys.)
        let word = (h >> 40) as usize & (self.words.len() - 1);
        let mask = (0..PROBES).fold(0u64, |mask, i| mask | 1 << ((h >> (6 * i)) & 63));
        (word, mask)
    }

    /// Notes `user_key`. Requires: the caller is the memtable's one writer, and inserts the
    /// key's entries after this returns.
    #[inline]
    pub(crate) fn insert(&self, user_key: &[u8]) {
        let (word, mask) = self.locate(KeyHash::of(user_key));
        self.words[word].fetch_or(mask, Ordering::Relaxed);
    }

    /// False if no entry of `user_key` was added before the visible sequence number (or
    /// snapshot) the caller read; true if one may have been.
    #[inline]
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(KeyHash::of(user_key))
    }

    /// [`may_contain`](Self::may_contain) for the key whose hash is `hash`.
    #[inline]
    pub(crate) fn may_contain_hash(&self, hash: KeyHash) -> bool {
        let (word, mask) = self.locate(hash);
        self.words[word].load(Ordering::Relaxed) & mask == mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_added_key_may_be_there_and_few_others_are() {
        // 4 MiB write buffer, 30,000 keys: about 17 bits per key.
        let filter = KeyFilter::for_write_buffer(4 << 20);
        assert_eq!(filter.words.len() * 8, 64 << 10);
        let key = |i: u32| format!("{i:016}").into_bytes();
        for i in 0..30_000 {
            filter.insert(&key(i));
        }
        for i in 0..30_000 {
            assert!(filter.may_contain(&key(i)), "{i}");
        }
        let false_positives = (30_000..130_000)
            .filter(|&i| filter.may_contain(&key(i)))
            .count();
        // The ideal rate for 4 bits in one word at this load is about 0.6%.
        assert!(false_positives < 2_000, "{false_positives} of 100,000");
    }

    #[test]
    fn an_empty_filter_holds_nothing_and_tiny_buffers_get_the_minimum() {
        let filter = KeyFilter::for_write_buffer(0);
        assert_eq!(filter.words.len(), 64);
        assert!(!filter.may_contain(b""));
        filter.insert(b"");
        assert!(filter.may_contain(b""));
    }
}
