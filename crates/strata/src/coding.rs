// SPDX-License-Identifier: MIT OR Apache-2.0
//! Little-endian fixed-width integers, LEB128 varints, length-prefixed slices, and LevelDB's
//! masked CRC32C.
//!
//! Decoders take untrusted bytes: they never panic and never read past the slice. A decoder
//! returns `None` on truncated or malformed input and leaves it to the caller to turn that into a
//! corruption error naming the file and offset.

/// The largest encoded size of a varint32.
pub const MAX_VARINT32_LEN: usize = 5;
/// The largest encoded size of a varint64.
pub const MAX_VARINT64_LEN: usize = 10;

/// Appends `v` as 4 little-endian bytes.
#[inline]
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
#[inline]
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian u32 from the start of `src`, or `None` if it is shorter than 4 bytes.
#[inline]
pub fn decode_fixed32(src: &[u8]) -> Option<u32> {
    let bytes: [u8; 4] = src.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// Reads a little-endian u64 from the start of `src`, or `None` if it is shorter than 8 bytes.
#[inline]
pub fn decode_fixed64(src: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = src.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Appends `v` as a varint (at most 5 bytes).
#[inline]
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends `v` as a varint (at most 10 bytes).
#[inline]
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// The encoded length of `v` as a varint.
#[inline]
pub fn varint_length(mut v: u64) -> usize {
    let mut len = 1;
    while v >= 0x80 {
        v >>= 7;
        len += 1;
    }
    len
}

/// Decodes a varint32 from the start of `src`: `(value, bytes used)`.
///
/// Returns `None` if the input ends first or the encoding needs more than 5 bytes. Like LevelDB,
/// value bits above bit 31 in the fifth byte are dropped.
#[inline]
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    // Fast path: one byte, the common case for lengths in blocks.
    if let Some(&b) = src.first() {
        if b < 0x80 {
            return Some((u32::from(b), 1));
        }
    }
    let mut result: u32 = 0;
    for (i, &byte) in src.iter().take(MAX_VARINT32_LEN).enumerate() {
        result |= u32::from(byte & 0x7f).wrapping_shl(7 * i as u32);
        if byte < 0x80 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a varint64 from the start of `src`: `(value, bytes used)`.
///
/// Returns `None` if the input ends first or the encoding needs more than 10 bytes.
#[inline]
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().take(MAX_VARINT64_LEN).enumerate() {
        result |= u64::from(byte & 0x7f).wrapping_shl(7 * i as u32);
        if byte < 0x80 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Appends a varint32 length followed by `value`.
///
/// Requires: `value.len() <= u32::MAX` (callers enforce key and value size limits first).
pub fn put_length_prefixed(dst: &mut Vec<u8>, value: &[u8]) {
    debug_assert!(value.len() <= u32::MAX as usize);
    put_varint32(dst, value.len() as u32);
    dst.extend_from_slice(value);
}

/// A cursor over untrusted bytes that remembers how far it has read, so that a decoding failure
/// can be reported at its offset.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    src: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `src`.
    pub fn new(src: &'a [u8]) -> Self {
        Decoder { src, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.src.len()
    }

    /// The bytes not yet consumed.
    pub fn remaining(&self) -> &'a [u8] {
        &self.src[self.pos..]
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.src.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Reads a fixed32.
    pub fn fixed32(&mut self) -> Option<u32> {
        let v = decode_fixed32(self.remaining())?;
        self.pos += 4;
        Some(v)
    }

    /// Reads a fixed64.
    pub fn fixed64(&mut self) -> Option<u64> {
        let v = decode_fixed64(self.remaining())?;
        self.pos += 8;
        Some(v)
    }

    /// Reads a varint32.
    pub fn varint32(&mut self) -> Option<u32> {
        let (v, n) = decode_varint32(self.remaining())?;
        self.pos += n;
        Some(v)
    }

    /// Reads a varint64.
    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = decode_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }

    /// Reads `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.src.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// Reads a varint32 length and that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        let result = self.varint32().and_then(|len| self.bytes(len as usize));
        if result.is_none() {
            self.pos = start;
        }
        result
    }
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// The CRC32C (Castagnoli) of `data`.
///
/// Computed by `crc-fast`, which folds with carry-less multiplication (AVX-512 VPCLMULQDQ
/// where the CPU has it): about 4 times the rate of the CPU's `crc32` instruction on a 100 KB
/// value (docs/benchmarks.md, "Checksums").
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// The reflected CRC32C (Castagnoli) polynomial.
const CRC32C_POLY: u32 = 0x82f6_3b78;

/// The register update for one byte, for the error arithmetic below (the checksums themselves
/// come from the `crc-fast` crate, which uses the CPU's instructions).
const fn crc32c_byte_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = i as u32;
        let mut k = 0;
        while k < 8 {
            r = if r & 1 != 0 {
                (r >> 1) ^ CRC32C_POLY
            } else {
                r >> 1
            };
            k += 1;
        }
        table[i] = r;
        i += 1;
    }
    table
}

static CRC32C_TABLE: [u32; 256] = crc32c_byte_table();

/// If `data`, whose CRC32C should be `expected`, differs from the data that had that CRC by
/// exactly one flipped bit, returns that bit's position (byte index, bit index). `None` if no
/// single flipped bit explains the difference.
///
/// A CRC is linear: flipping bit `b` of byte `j` of an `n`-byte message changes its CRC by a
/// value that depends only on `b` and `n - 1 - j`, whatever the other bytes. The function walks
/// those values from the last byte to the first: 8 table steps a byte, no CRC recomputed.
///
/// # Example
///
/// ```
/// use strata::coding::{crc32c, locate_single_bit_error};
/// let original = b"a record".to_vec();
/// let expected = crc32c(&original);
/// let mut damaged = original.clone();
/// damaged[3] ^= 0x10;
/// assert_eq!(locate_single_bit_error(&damaged, expected), Some((3, 4)));
/// assert_eq!(locate_single_bit_error(&original, expected), None);
/// ```
pub fn locate_single_bit_error(data: &[u8], expected: u32) -> Option<(usize, u8)> {
    let syndrome = crc32c(data) ^ expected;
    if syndrome == 0 || data.is_empty() {
        return None;
    }
    // effect[b]: the change a flip of bit b makes, for the byte position being looked at.
    let mut effect: [u32; 8] = std::array::from_fn(|b| CRC32C_TABLE[1usize << b]);
    for j in (0..data.len()).rev() {
        if let Some(b) = effect.iter().position(|&e| e == syndrome) {
            return Some((j, b as u8));
        }
        for e in &mut effect {
            *e = (*e >> 8) ^ CRC32C_TABLE[(*e & 0xff) as usize];
        }
    }
    None
}

/// Extends `crc` (the CRC32C of some prefix) with `data`.
#[inline]
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    // The running register is the finished CRC with its final inversion undone.
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

/// LevelDB's mask for CRCs stored on disk: a CRC over bytes that contain CRCs is weak, so stored
/// CRCs are rotated and offset.
#[inline]
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The inverse of [`mask_crc`].
#[inline]
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_right(17)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint_bytes(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint64(&mut out, v);
        out
    }

    #[test]
    fn varints_match_the_format_table() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (16383, &[0xff, 0x7f]),
            (16384, &[0x80, 0x80, 0x01]),
            (u32::MAX as u64, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for &(v, bytes) in cases {
            assert_eq!(varint_bytes(v), bytes, "encoding {v}");
            assert_eq!(varint_length(v), bytes.len());
            assert_eq!(decode_varint64(bytes), Some((v, bytes.len())));
            if v <= u32::MAX as u64 {
                assert_eq!(decode_varint32(bytes), Some((v as u32, bytes.len())));
            }
        }
    }

    #[test]
    fn varint_round_trips_every_width() {
        for shift in 0..64 {
            for delta in [0u64, 1, 2] {
                let v = (1u64 << shift).wrapping_sub(delta);
                let bytes = varint_bytes(v);
                assert_eq!(decode_varint64(&bytes), Some((v, bytes.len())));
            }
        }
    }

    #[test]
    fn truncated_varint_is_rejected() {
        assert_eq!(decode_varint32(&[]), None);
        assert_eq!(decode_varint32(&[0x80]), None);
        assert_eq!(decode_varint64(&[0xff, 0xff]), None);
    }

    #[test]
    fn varint_that_never_ends_is_rejected() {
        assert_eq!(decode_varint32(&[0x80; 6]), None);
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        assert_eq!(decode_varint64(&[0xff; 64]), None);
    }

    #[test]
    fn varint32_drops_high_bits_of_fifth_byte_like_leveldb() {
        assert_eq!(
            decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x7f]),
            Some((u32::MAX, 5))
        );
    }

    #[test]
    fn fixed_round_trip_and_truncation() {
        let mut buf = Vec::new();
        put_fixed32(&mut buf, 0xdead_beef);
        put_fixed64(&mut buf, 0x0123_4567_89ab_cdef);
        assert_eq!(buf[..4], [0xef, 0xbe, 0xad, 0xde]);
        assert_eq!(decode_fixed32(&buf), Some(0xdead_beef));
        assert_eq!(decode_fixed64(&buf[4..]), Some(0x0123_4567_89ab_cdef));
        assert_eq!(decode_fixed32(&buf[..3]), None);
        assert_eq!(decode_fixed64(&buf[5..]), None);
    }

    #[test]
    fn decoder_length_prefixed_rejects_lengths_past_the_end() {
        let mut buf = Vec::new();
        put_length_prefixed(&mut buf, b"hello");
        let mut d = Decoder::new(&buf);
        assert_eq!(d.length_prefixed(), Some(&b"hello"[..]));
        assert!(d.is_empty());
        // A length that claims more bytes than exist fails and does not move the cursor.
        let mut d = Decoder::new(&[0xff, 0xff, 0x03, b'a']);
        assert_eq!(d.length_prefixed(), None);
        assert_eq!(d.position(), 0);
    }

    #[test]
    fn every_single_bit_error_is_located_and_nothing_else_is() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let expected = crc32c(&data);
        for j in 0..data.len() {
            for b in 0..8 {
                let mut damaged = data.clone();
                damaged[j] ^= 1 << b;
                assert_eq!(locate_single_bit_error(&damaged, expected), Some((j, b)));
            }
        }
        let mut two = data.clone();
        two[10] ^= 1;
        two[200] ^= 4;
        assert_eq!(locate_single_bit_error(&two, expected), None);
        let mut zeroed = data.clone();
        zeroed[100..164].fill(0);
        assert_eq!(locate_single_bit_error(&zeroed, expected), None);
    }

    #[test]
    fn crc_vectors_from_leveldb() {
        let cases: &[(&[u8], u32, Option<u32>)] = &[
            (b"", 0x0000_0000, Some(0xa282_ead8)),
            (b"a", 0xc1d0_4330, Some(0x28e4_6e78)),
            (b"123456789", 0xe306_9283, Some(0xc78a_b0e5)),
            (b"hello world", 0xc994_65aa, Some(0x6dd8_7e00)),
            (b"leveldb", 0xe637_8e98, Some(0xbfb4_b747)),
            (&[0u8; 32], 0x8a91_36aa, None),
            (b"\x01hello", 0x6719_daea, Some(0x5857_b90b)),
            (b"abc\x00", 0x3494_0e4c, Some(0xbf1b_5400)),
        ];
        for &(input, crc, masked) in cases {
            assert_eq!(crc32c(input), crc);
            if let Some(m) = masked {
                assert_eq!(mask_crc(crc), m);
                assert_eq!(unmask_crc(m), crc);
            }
        }
        assert_eq!(
            crc32c_extend(crc32c(b"hello "), b"world"),
            crc32c(b"hello world")
        );
    }

    /// CRC32C a byte at a time from the table: slow, but independent of the SIMD code.
    fn table_crc32c(data: &[u8]) -> u32 {
        !data.iter().fold(!0u32, |r, &b| {
            (r >> 8) ^ CRC32C_TABLE[((r ^ u32::from(b)) & 0xff) as usize]
        })
    }

    #[test]
    fn crc_matches_a_table_computation_at_every_length_and_split() {
        // Lengths cross the SIMD code's block sizes (16 to 4,096 bytes and more); offsets
        // start at unaligned addresses.
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let lengths = (0..300).chain([511, 512, 513, 1_023, 4_095, 4_096, 4_097, 16_385, 65_536]);
        for len in lengths {
            for start in [0, 1, 3] {
                let bytes = &data[start..start + len];
                let expected = table_crc32c(bytes);
                assert_eq!(crc32c(bytes), expected, "length {len} at offset {start}");
                for split in [0, 1.min(len), len / 3, len / 2, len.saturating_sub(1), len] {
                    let (head, tail) = bytes.split_at(split);
                    assert_eq!(
                        crc32c_extend(crc32c(head), tail),
                        expected,
                        "length {len} split at {split}"
                    );
                }
            }
        }
    }
}
