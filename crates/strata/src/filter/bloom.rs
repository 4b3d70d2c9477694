// SPDX-License-Identifier: MIT OR Apache-2.0
//! LevelDB's built-in bloom filter, `leveldb.BuiltinBloomFilter2`.
//!
//! ```text
//! +---------------------------------+-------+
//! | bit array: ceil(n*bits_per_key/8) bytes, at least 8 | k (1) |
//! +---------------------------------+-------+
//! ```
//!
//! Each key sets `k` bits by double hashing: `h = hash(key)`, `delta = h rotated right by 17`,
//! and probe `i` sets bit `(h + i*delta) mod bits`. `k = floor(bits_per_key * 0.69)` clamped to
//! [1, 30]; readers take `k` from the filter's last byte, so filters of any size can be read.

use super::FilterPolicy;
use crate::coding::decode_fixed32;

const HASH_SEED: u32 = 0xbc9f_1d34;
const HASH_M: u32 = 0xc6a4_a793;

/// LevelDB's 32-bit Murmur-like hash with the bloom filter's seed. Tail bytes are unsigned.
pub fn bloom_hash(data: &[u8]) -> u32 {
    let mut h = HASH_SEED ^ (data.len() as u32).wrapping_mul(HASH_M);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let w = decode_fixed32(chunk).expect("chunk of 4");
        h = h.wrapping_add(w).wrapping_mul(HASH_M);
        h ^= h >> 16;
    }
    let tail = chunks.remainder();
    if tail.len() == 3 {
        h = h.wrapping_add(u32::from(tail[2]) << 16);
    }
    if tail.len() >= 2 {
        h = h.wrapping_add(u32::from(tail[1]) << 8);
    }
    if !tail.is_empty() {
        h = h.wrapping_add(u32::from(tail[0])).wrapping_mul(HASH_M);
        h ^= h >> 24;
    }
    h
}

/// `h mod bits` for a fixed `bits`, by multiplication (Lemire, Kaser and Kurz, "Faster
/// Remainder by Direct Computation", 2019): exact for every 32-bit `h` and every divisor below
/// 2^32, which a filter's bit count always is in practice. A 64-bit division per probe was most
/// of a filter's build time.
#[derive(Debug, Clone, Copy)]
struct BitIndex {
    bits: u64,
    /// ceil(2^64 / bits), or 0 when the plain remainder is used (`bits` of 2^32 or more, or 1).
    magic: u64,
}

impl BitIndex {
    fn new(bits: usize) -> Self {
        let bits = bits as u64;
        let magic = if bits > 1 && bits < 1 << 32 {
            u64::MAX / bits + 1
        } else {
            0
        };
        BitIndex { bits, magic }
    }

    #[inline]
    fn of(&self, h: u32) -> usize {
        if self.magic == 0 {
            return (u64::from(h) % self.bits) as usize;
        }
        let low = self.magic.wrapping_mul(u64::from(h));
        ((u128::from(low) * u128::from(self.bits)) >> 64) as usize
    }
}

/// The bloom filter LevelDB builds with `NewBloomFilterPolicy(bits_per_key)`.
///
/// # Example
///
/// ```
/// use strata::filter::{BloomFilterPolicy, FilterPolicy};
/// let policy = BloomFilterPolicy::new(10);
/// let mut filter = Vec::new();
/// policy.create_filter(&[b"hello", b"world"], &mut filter);
/// assert!(policy.key_may_match(b"hello", &filter));
/// assert!(!policy.key_may_match(b"x", &filter));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct BloomFilterPolicy {
    bits_per_key: usize,
    /// Probes per key. Invariant: 1 <= k <= 30.
    k: u8,
}

impl BloomFilterPolicy {
    /// The name LevelDB stores in its metaindex.
    pub const NAME: &'static str = "leveldb.BuiltinBloomFilter2";

    /// A policy spending `bits_per_key` bits per key (10 gives about 1% false positives).
    pub fn new(bits_per_key: usize) -> Self {
        // 0.69 is ln 2 rounded down, as LevelDB computes it.
        let k = (bits_per_key as f64 * 0.69) as usize;
        BloomFilterPolicy {
            bits_per_key,
            k: k.clamp(1, 30) as u8,
        }
    }

    /// Bits spent per key.
    pub fn bits_per_key(&self) -> usize {
        self.bits_per_key
    }
}

impl FilterPolicy for BloomFilterPolicy {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        let bits = (keys.len() * self.bits_per_key).max(64);
        let bytes = bits.div_ceil(8);
        let bits = bytes * 8;
        let start = dst.len();
        dst.resize(start + bytes, 0);
        dst.push(self.k);
        let array = &mut dst[start..start + bytes];
        let index = BitIndex::new(bits);
        for key in keys {
            let mut h = bloom_hash(key);
            let delta = h.rotate_right(17);
            for _ in 0..self.k {
                let pos = index.of(h);
                array[pos / 8] |= 1 << (pos % 8);
                h = h.wrapping_add(delta);
            }
        }
    }

    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
        let Some((&k, array)) = filter.split_last() else {
            return false;
        };
        if array.is_empty() {
            return false;
        }
        if k > 30 {
            // Reserved for encodings this version does not know: never hide data.
            return true;
        }
        let index = BitIndex::new(array.len() * 8);
        let mut h = bloom_hash(key);
        let delta = h.rotate_right(17);
        for _ in 0..k {
            let pos = index.of(h);
            if array[pos / 8] & (1 << (pos % 8)) == 0 {
                return false;
            }
            h = h.wrapping_add(delta);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(bits: usize, keys: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        BloomFilterPolicy::new(bits).create_filter(keys, &mut out);
        out
    }

    #[test]
    fn hash_matches_leveldb() {
        let cases: &[(&[u8], u32)] = &[
            (b"", 0xbc9f_1d34),
            (b"a", 0x286e_9db0),
            (b"ab", 0x39ac_a330),
            (b"abc", 0x855d_012f),
            (b"abcd", 0xb9c8_3353),
            (b"hello", 0xf795_964e),
            (b"hello world", 0x008d_fddb),
            (b"key000000", 0x4b91_6297),
            (&[0xe2, 0x99, 0xa5], 0x323c_078f),
            (&[0x62], 0xef13_45c4),
        ];
        for &(input, hash) in cases {
            assert_eq!(bloom_hash(input), hash, "{input:?}");
        }
    }

    #[test]
    fn filters_match_leveldb_bit_for_bit() {
        assert_eq!(
            filter(10, &[b"hello", b"world"]),
            [0x11, 0x40, 0x00, 0x41, 0x44, 0x10, 0x40, 0x10, 0x06]
        );
        assert_eq!(
            filter(10, &[b"foo"]),
            [0x20, 0x49, 0x12, 0, 0, 0, 0, 0, 0x06]
        );
        assert_eq!(filter(1, &[b"foo"]), [0, 0, 0x10, 0, 0, 0, 0, 0, 0x01]);
        let keys: Vec<Vec<u8>> = (0..10).map(|i| format!("key{i:06}").into_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        assert_eq!(
            filter(10, &refs),
            [0x2d, 0xca, 0x90, 0xb9, 0x8a, 0x09, 0xc4, 0x6b, 0x80, 0x89, 0xbc, 0xce, 0xfa, 0x06]
        );
        let f100 = filter(100, &[b"foo"]);
        assert_eq!(f100.len(), 14);
        assert_eq!(f100[13], 30);
    }

    /// The multiplication gives the remainder exactly: the edges of both operands, and random
    /// pairs.
    #[test]
    fn bit_index_is_the_remainder() {
        let mut divisors: Vec<u64> = vec![1, 2, 3, 7, 8, 64, 72, 1000, 4096, 65_536, 1 << 31];
        divisors.extend([
            (1 << 32) - 8,
            (1 << 32) - 1,
            1 << 32,
            (1 << 32) + 8,
            1 << 40,
        ]);
        let mut numerators: Vec<u32> = vec![0, 1, 2, 63, 64, 65, u32::MAX - 1, u32::MAX];
        // A fixed xorshift stream: the same pairs every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            divisors.push((next() % (1 << 32)) | 1);
            divisors.push((next() % (1 << 20) + 1) * 8);
            numerators.push(next() as u32);
        }
        for &d in &divisors {
            let index = BitIndex::new(d as usize);
            for &h in &numerators {
                assert_eq!(index.of(h) as u64, u64::from(h) % d, "{h} mod {d}");
            }
        }
    }

    #[test]
    fn probe_count_follows_leveldb() {
        for (bits, k) in [
            (1, 1),
            (2, 1),
            (5, 3),
            (10, 6),
            (16, 11),
            (20, 13),
            (44, 30),
            (100, 30),
        ] {
            assert_eq!(BloomFilterPolicy::new(bits).k, k, "bits {bits}");
        }
    }

    #[test]
    fn every_added_key_matches_and_false_positives_are_rare() {
        let policy = BloomFilterPolicy::new(10);
        for n in [1usize, 10, 100, 1000, 10_000] {
            let keys: Vec<Vec<u8>> = (0..n).map(|i| (i as u32).to_le_bytes().to_vec()).collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let mut f = Vec::new();
            policy.create_filter(&refs, &mut f);
            assert!(refs.iter().all(|k| policy.key_may_match(k, &f)));
            let false_positives = (0..10_000u32)
                .filter(|i| policy.key_may_match(&(i + 1_000_000_000).to_le_bytes(), &f))
                .count();
            assert!(false_positives < 200, "n={n}: {false_positives} of 10000");
        }
    }

    #[test]
    fn degenerate_filters_do_not_hide_or_panic() {
        let policy = BloomFilterPolicy::new(10);
        assert!(!policy.key_may_match(b"k", &[]));
        assert!(!policy.key_may_match(b"k", &[6]));
        // An unknown encoding (k > 30) answers "may match".
        assert!(policy.key_may_match(b"k", &[0, 0, 0, 31]));
    }
}
