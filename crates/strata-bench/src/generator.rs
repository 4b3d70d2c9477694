// SPDX-License-Identifier: MIT OR Apache-2.0
//! Keys and values as LevelDB's db_bench makes them.
//!
//! Keys are the entry's index printed as 16 decimal digits (`--key_size`). Values are slices of
//! a 1 MiB pool built from 100-byte pieces, each a random printable string of
//! `100 * compression_ratio` bytes repeated to fill the piece, so that values compress to about
//! `compression_ratio` of their size, as in the reports.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Formats key `index` into `buf` as `key_size` bytes: zero-padded decimal, cut or padded.
pub fn make_key(buf: &mut Vec<u8>, index: u64, key_size: usize) {
    buf.clear();
    let mut digits = [b'0'; 20];
    let mut n = index;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    // At least 16 digits, more if the number needs them, as `%016d` prints.
    let needed = digits.iter().position(|&d| d != b'0').map_or(1, |p| 20 - p);
    buf.extend_from_slice(&digits[20 - needed.max(16)..]);
    buf.resize(key_size, b'0');
}

/// A pool of compressible bytes handing out values.
pub struct ValueGenerator {
    pool: Vec<u8>,
    pos: usize,
}

impl ValueGenerator {
    /// A pool whose values compress to about `compression_ratio`, seeded for repeatability.
    pub fn new(compression_ratio: f64, seed: u64) -> Self {
        const POOL_BYTES: usize = 1 << 20;
        const PIECE: usize = 100;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut pool = Vec::with_capacity(POOL_BYTES + PIECE);
        let raw_len = ((PIECE as f64 * compression_ratio) as usize).clamp(1, PIECE);
        while pool.len() < POOL_BYTES {
            let raw: Vec<u8> = (0..raw_len).map(|_| rng.gen_range(b' '..=b'~')).collect();
            let start = pool.len();
            while pool.len() - start < PIECE {
                let take = raw.len().min(PIECE - (pool.len() - start));
                pool.extend_from_slice(&raw[..take]);
            }
        }
        ValueGenerator { pool, pos: 0 }
    }

    /// The next value of `len` bytes.
    pub fn next(&mut self, len: usize) -> &[u8] {
        if len > self.pool.len() {
            // Values larger than the pool (never in the reports' runs) repeat it.
            let reps = len.div_ceil(self.pool.len());
            self.pool = self.pool.repeat(reps);
        }
        if self.pos + len > self.pool.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.pool[self.pos - len..self.pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_decimal() {
        let mut k = Vec::new();
        make_key(&mut k, 42, 16);
        assert_eq!(k, b"0000000000000042");
        make_key(&mut k, 7, 20);
        assert_eq!(k, b"00000000000000070000");
        make_key(&mut k, 12_345_678_901_234_567, 16);
        assert_eq!(k, b"1234567890123456");
        make_key(&mut k, 0, 16);
        assert_eq!(k, b"0000000000000000");
    }

    #[test]
    fn values_compress_to_about_the_ratio() {
        let mut g = ValueGenerator::new(0.5, 1);
        let v: Vec<u8> = (0..1000).flat_map(|_| g.next(100).to_vec()).collect();
        let compressed = snap_len(&v);
        let ratio = compressed as f64 / v.len() as f64;
        assert!((0.4..0.65).contains(&ratio), "ratio {ratio}");
    }
    fn snap_len(v: &[u8]) -> usize {
        snap::raw::Encoder::new()
            .compress_vec(v)
            .expect("compress")
            .len()
    }
}
