// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`SnappyReader`]: decompression of a raw Snappy block that can stop part way and go on
//! later, so that a point lookup decodes a data block only up to the entry it wants.
//!
//! The `snap` crate decodes a block whole or not at all. A point lookup in a block it will not
//! cache wants one entry, on average half way in, and decompression was the largest single
//! cost of such a lookup (a quarter of `readrandom`'s profile): decoding up to the entry, and
//! no further, saves about half of it. Snappy can be decoded a prefix at a time because every
//! element (a literal, or a copy of bytes already decoded) only reads what is already out.
//!
//! The format (Snappy's `format_description.txt`): a varint of the decoded length, then
//! elements. An element's tag byte's low two bits give its kind: `00` a literal of
//! `(tag >> 2) + 1` bytes, or for 60-63 a length of 1-4 little-endian bytes that follow (plus
//! one), the bytes themselves after; `01` a copy of `4 + ((tag >> 2) & 7)` bytes from an offset
//! of 11 bits (`tag >> 5` high, one byte low); `10` and `11` a copy of `(tag >> 2) + 1` bytes
//! from an offset in the next two or four bytes, little-endian.
//!
//! The checks are those of a whole decode (`snap`'s): a length header `snap` reads, no copy
//! from offset 0 or from before the output's start (or the start of the chunk a decode began
//! at, [`SnappyReader::at_chunk`]), no element past the decoded length or past the input, and
//! at the decoded length, no input left. `tests` compares both decoders on
//! valid and damaged input. A decode that stops part way checks only what it decoded.

/// The varint of a block's decoded length at the start of `block`, and its size in bytes,
/// read as `snap` reads it: at most five bytes (a `u32`'s varint), the value at most
/// `u32::MAX`.
fn decoded_length(block: &[u8]) -> Option<(usize, usize)> {
    let mut value = 0u64;
    for (i, &byte) in block.iter().take(5).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some((usize::try_from(u32::try_from(value).ok()?).ok()?, i + 1));
        }
    }
    None
}

/// The decoded length `block` (a raw Snappy block) claims, and its header's size; an error if
/// the header does not read or claims more than the block's elements could produce. Both
/// decoders (this module's and `snap`'s, `format::decompress_snappy`) check it first.
pub(crate) fn checked_length(block: &[u8]) -> Result<(usize, usize), &'static str> {
    let (total, header) = decoded_length(block).ok_or("bad snappy block header")?;
    // Each element of k bytes yields at most 64 bytes, with k >= 3 for copies that long;
    // a claimed length beyond that bound is damage, and must not drive the allocation.
    if total > block.len().saturating_mul(22).saturating_add(64) {
        return Err("snappy block claims an impossible length");
    }
    Ok((total, header))
}

/// Bytes the output buffer holds past the decoded length, so that short literals and copies
/// can move 8 or 16 bytes at once and let the excess fall where later elements overwrite it.
const SLOP: usize = 16;

/// The length of the buffer a decode of `block` needs: its decoded length and the slop.
pub(crate) fn decode_buffer_len(block: &[u8]) -> Result<usize, &'static str> {
    Ok(checked_length(block)?.0 + SLOP)
}

/// Where a suspended decode stands ([`SnappyReader::suspend`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SnappyProgress {
    base: usize,
    header: usize,
    pos: usize,
    decoded: usize,
    total: usize,
}

impl SnappyProgress {
    /// True if the decode began at a chunk ([`SnappyReader::at_chunk`]), not at the block's
    /// start.
    pub(crate) fn began_at_chunk(&self) -> bool {
        self.base > 0
    }
}

/// A Snappy block being decoded into a buffer the caller lends (and takes back whole,
/// [`finish`](Self::finish), or as it stands, [`into_buffer`](Self::into_buffer)).
///
/// Invariants: `out.len() >= total + SLOP`; `out[base..decoded]` is the block's bytes there,
/// `base <= decoded <= total`; the bytes before `base` and after `decoded` are scratch.
/// `pos <= input.len()` is the next element's tag. A decode starts at `base` 0, or at the
/// start of a chunk that decodes alone (`table::chunks`), whose elements never reach before
/// `base`.
pub(crate) struct SnappyReader<'a> {
    /// The block's elements: what follows its length header of `header` bytes.
    input: &'a [u8],
    base: usize,
    header: usize,
    pos: usize,
    out: Vec<u8>,
    decoded: usize,
    total: usize,
}

impl<'a> SnappyReader<'a> {
    /// Starts decoding `block` (a raw Snappy block: the length varint, then the elements) into
    /// `buffer`, whose contents are scratch: it is zeroed only where it grows, so a buffer
    /// lent again and again costs nothing to prepare.
    pub(crate) fn new(block: &'a [u8], buffer: Vec<u8>) -> Result<Self, &'static str> {
        Self::new_in(block, |_| buffer)
    }

    /// [`new`](Self::new) with the buffer `buffer(len)` returns, `len` the bytes the decode
    /// needs (the block's decoded length and the slop past it), asked once the header is
    /// read: a buffer of about that size can be picked (`block_buffer`).
    pub(crate) fn new_in(
        block: &'a [u8],
        buffer: impl FnOnce(usize) -> Vec<u8>,
    ) -> Result<Self, &'static str> {
        let (total, header) = checked_length(block)?;
        let start = SnappyProgress {
            base: 0,
            header,
            pos: 0,
            decoded: 0,
            total,
        };
        Ok(Self::resume(block, start, buffer(total + SLOP)))
    }

    /// Starts decoding `block` at the chunk that
    /// `start` places (`table::chunks`), into `buffer`: the bytes before the chunk are not
    /// decoded, and [`decoded`](Self::decoded) holds scratch there. A copy that reaches
    /// before the chunk is refused as damage. [`finish`](Self::finish) decodes the block
    /// whole, from its start.
    pub(crate) fn at_chunk(
        block: &'a [u8],
        start: crate::table::chunks::ChunkStart,
        buffer: Vec<u8>,
    ) -> Result<Self, &'static str> {
        let (total, header) = checked_length(block)?;
        let (input, output) = (start.input as usize, start.output as usize);
        if input < header || input > block.len() || output > total {
            return Err("block's chunk map places a chunk outside it");
        }
        let progress = SnappyProgress {
            base: output,
            header,
            pos: input - header,
            decoded: output,
            total,
        };
        Ok(Self::resume(block, progress, buffer))
    }

    /// Stops decoding for now: where the decode stands, and the buffer holding the bytes
    /// decoded so far (its length still the decoded length and the slop), to be handed back
    /// to [`resume`](Self::resume) with the same block.
    pub(crate) fn suspend(self) -> (SnappyProgress, Vec<u8>) {
        let progress = SnappyProgress {
            base: self.base,
            header: self.header,
            pos: self.pos,
            decoded: self.decoded,
            total: self.total,
        };
        (progress, self.out)
    }

    /// Goes on with a decode [`suspend`](Self::suspend) stopped (or starts one, from a
    /// progress of nothing decoded). `block` must be the block that decode read, and `buffer`
    /// the one it returned, or a copy holding at least its bytes from where the decode began
    /// (0, or a chunk's start) to `progress.decoded`; it is zeroed only where it grows.
    pub(crate) fn resume(block: &'a [u8], progress: SnappyProgress, mut buffer: Vec<u8>) -> Self {
        let SnappyProgress {
            base,
            header,
            pos,
            decoded,
            total,
        } = progress;
        if buffer.len() < total + SLOP {
            buffer.resize(total + SLOP, 0);
        }
        SnappyReader {
            input: &block[header..],
            base,
            header,
            pos,
            out: buffer,
            decoded,
            total,
        }
    }

    /// The bytes decoded so far; scratch before the chunk a decode [started at](Self::at_chunk).
    pub(crate) fn decoded(&self) -> &[u8] {
        &self.out[..self.decoded]
    }

    /// Decodes until at least `want` bytes (at most the whole block) are out.
    pub(crate) fn fill_to(&mut self, want: usize) -> Result<(), &'static str> {
        let want = want.min(self.total);
        if self.decoded < want {
            self.decode_until(want)?;
        }
        if self.decoded == self.total && self.pos != self.input.len() {
            return Err("snappy block has bytes past its length");
        }
        Ok(())
    }

    /// Decodes the rest of the block and returns it (the buffer, cut to the block).
    pub(crate) fn finish(mut self) -> Result<Vec<u8>, &'static str> {
        if self.base > 0 {
            (self.base, self.pos, self.decoded) = (0, 0, 0);
        }
        self.fill_to(self.total)?;
        self.out.truncate(self.total);
        Ok(self.out)
    }

    /// The buffer, to lend to the next block's reader.
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.out
    }

    /// Decodes elements until `want` (`<= total`) bytes are out.
    ///
    /// Short literals and copies move 16 (or 8) bytes at once into the slop past them, as
    /// fixed-size slice copies the compiler turns into one load and one store. Measured on
    /// the blocks of a 1M-entry db_bench database (`readrandom`'s): 64 blocks decoded again
    /// and again (in the CPU cache), whole in 601-615 ns per block against `snap`'s 500-518,
    /// to their middle (2,048 of 4,097 bytes) in 278-284. So `snap` decodes whole blocks
    /// ([`decompress_snappy`](super::format::decompress_snappy)) and this decoder only blocks
    /// that a lookup reads part of. A variant writing through raw pointers was no faster on
    /// blocks out of the CPU cache (1,203-1,268 ns against 1,060-1,296), so there is no
    /// `unsafe` here; chunked copies of long literals (720 ns) and `copy_within` of long
    /// non-overlapping copies (645 ns) were slower.
    fn decode_until(&mut self, want: usize) -> Result<(), &'static str> {
        let input = self.input;
        let total = self.total;
        let base = self.base;
        let mut pos = self.pos;
        let mut len = self.decoded;
        let out = &mut self.out[..total + SLOP];
        let result = loop {
            if len >= want {
                break Ok(());
            }
            let Some(&tag) = input.get(pos) else {
                break Err("snappy block ends early");
            };
            pos += 1;
            if tag & 3 == 0 {
                let mut n = usize::from(tag >> 2) + 1;
                if n > 60 {
                    let extra = n - 60;
                    let Some(bytes) = input.get(pos..pos + extra) else {
                        break Err("snappy literal length overruns the input");
                    };
                    let len = bytes
                        .iter()
                        .rev()
                        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
                    n = usize::try_from(len + 1).unwrap_or(usize::MAX);
                    pos += extra;
                }
                if n > total - len {
                    break Err("snappy literal overruns the block");
                }
                if n > input.len() - pos {
                    break Err("snappy literal overruns the input");
                }
                // `len + 16 <= total + SLOP`: within the buffer.
                if n <= 16 && input.len() - pos >= 16 {
                    out[len..len + 16].copy_from_slice(&input[pos..pos + 16]);
                } else {
                    out[len..len + n].copy_from_slice(&input[pos..pos + n]);
                }
                pos += n;
                len += n;
                continue;
            }
            let (n, offset, size) = match tag & 3 {
                1 => {
                    let Some(&low) = input.get(pos) else {
                        break Err("snappy copy overruns the input");
                    };
                    (
                        4 + usize::from((tag >> 2) & 7),
                        (usize::from(tag >> 5) << 8) | usize::from(low),
                        1,
                    )
                }
                2 => {
                    let Some(bytes) = input.get(pos..pos + 2) else {
                        break Err("snappy copy overruns the input");
                    };
                    let offset = u16::from_le_bytes([bytes[0], bytes[1]]);
                    (usize::from(tag >> 2) + 1, usize::from(offset), 2)
                }
                _ => {
                    let Some(bytes) = input.get(pos..pos + 4) else {
                        break Err("snappy copy overruns the input");
                    };
                    let offset = u32::from_le_bytes(bytes.try_into().expect("four bytes"));
                    (usize::from(tag >> 2) + 1, offset as usize, 4)
                }
            };
            pos += size;
            if offset == 0 || offset > len - base {
                break Err("snappy copy reaches outside the decoded bytes");
            }
            if n > total - len {
                break Err("snappy copy overruns the block");
            }
            // Chunks end before `len + n + 16 <= total + SLOP`. A chunk at `len + i` reads
            // `[len + i - offset, ...)`, which with `offset >= 16` (or 8) ends at or before
            // `len + i`: bytes already decoded, the earlier chunks' included.
            if offset >= 16 {
                let mut i = len;
                while i < len + n {
                    out.copy_within(i - offset..i - offset + 16, i);
                    i += 16;
                }
            } else if offset >= 8 {
                let mut i = len;
                while i < len + n {
                    out.copy_within(i - offset..i - offset + 8, i);
                    i += 8;
                }
            } else {
                // A repeating pattern: each byte copies the one `offset` before it.
                for i in len..len + n {
                    out[i] = out[i - offset];
                }
            }
            len += n;
        };
        self.decoded = len;
        self.pos = pos;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_whole(block: &[u8]) -> Result<Vec<u8>, &'static str> {
        SnappyReader::new(block, Vec::new())?.finish()
    }

    fn snap_decode(block: &[u8]) -> Option<Vec<u8>> {
        snap::raw::Decoder::new().decompress_vec(block).ok()
    }

    /// Text with repeats near and far, runs, and incompressible stretches, so that every
    /// element kind (and both copy widths of the fast paths) occurs.
    fn mixed(seed: u64, len: usize) -> Vec<u8> {
        let mut s = seed | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match s % 5 {
                0 => out.extend((0..(s >> 8) % 40).map(|i| (s >> (i % 56)) as u8)),
                1 => out.extend(std::iter::repeat_n((s >> 16) as u8, (s >> 24) as usize % 30)),
                _ if !out.is_empty() => {
                    let from = (s >> 8) as usize % out.len();
                    let n = ((s >> 40) as usize % 90).min(out.len() - from);
                    out.extend_from_within(from..from + n);
                }
                _ => out.push(s as u8),
            }
        }
        out.truncate(len);
        out
    }

    #[test]
    fn decodes_what_snap_encodes_whole_and_by_prefixes() {
        let mut encoder = snap::raw::Encoder::new();
        for (seed, len) in [(1, 0), (2, 1), (3, 15), (4, 16), (5, 17), (6, 4096), (7, 70_000)] {
            let original = mixed(seed, len);
            let block = encoder.compress_vec(&original).unwrap();
            assert_eq!(decode_whole(&block).unwrap(), original, "length {len}");
            // Prefix by prefix, in uneven steps: each step's output is a prefix of the block.
            let mut reader = SnappyReader::new(&block, Vec::new()).unwrap();
            let mut want = 0;
            while reader.decoded().len() < original.len() {
                want += 1 + want / 3;
                reader.fill_to(want).unwrap();
                let got = reader.decoded();
                assert!(got.len() >= want.min(len));
                assert_eq!(got, &original[..got.len()]);
            }
            assert_eq!(reader.finish().unwrap(), original);
        }
    }

    #[test]
    fn reuses_the_buffer_it_is_lent() {
        let block = snap::raw::Encoder::new().compress_vec(&mixed(9, 5000)).unwrap();
        let buffer = SnappyReader::new(&block, Vec::new()).unwrap().finish().unwrap();
        let room = buffer.as_ptr();
        let mut reader = SnappyReader::new(&block, buffer).unwrap();
        reader.fill_to(10).unwrap();
        assert_eq!(&reader.decoded()[..10], &mixed(9, 10)[..]);
        let buffer = reader.into_buffer();
        assert_eq!(buffer.as_ptr(), room);
        // A smaller block in the same buffer: stale bytes past it are never handed out.
        let small = snap::raw::Encoder::new().compress_vec(b"abcabcabcabc").unwrap();
        let reader = SnappyReader::new(&small, buffer).unwrap();
        assert_eq!(reader.finish().unwrap(), b"abcabcabcabc");
    }

    #[test]
    fn refuses_damage_as_snap_does() {
        // Hand-made: copy before the start, copy from offset 0, literal past the input,
        // output past the length, input past the length, empty input.
        let cases: [&[u8]; 7] = [
            &[4, 0b0000_0001, 1],
            &[4, 0, b'a', 0b0000_0001, 0],
            &[4, 0, b'a', 0b0000_0010, 0, 0],
            &[4, 12, b'a', b'b'],
            &[2, 8, b'a', b'b', b'c'],
            &[1, 0, b'a', 0, b'b'],
            &[],
        ];
        for case in cases {
            assert!(decode_whole(case).is_err(), "{case:?}");
            assert!(snap_decode(case).is_none(), "{case:?}");
        }
        assert!(SnappyReader::new(&[0xff, 0xff, 0xff, 0x7f], Vec::new()).is_err());
        // Length headers: a five-byte varint past `u32::MAX` (review finding: bits past 32
        // were dropped, reading 4), varints longer than five bytes, which snap refuses even
        // when their value is small, and a five-byte one it accepts.
        let headers: [&[u8]; 5] = [
            &[0x84, 0x80, 0x80, 0x80, 0x10, 0x0c, b'a', b'b', b'c', b'd'],
            &[0x80, 0x80, 0x80, 0x80, 0x10],
            &[0x84, 0x80, 0x80, 0x80, 0x80, 0x00, 0x0c, b'a', b'b', b'c', b'd'],
            &[0x84, 0x80, 0x80, 0x80, 0x00, 0x0c, b'a', b'b', b'c', b'd'],
            &[0x80, 0x80],
        ];
        for case in headers {
            assert_eq!(decode_whole(case).ok(), snap_decode(case), "{case:?}");
        }
        assert_eq!(decode_whole(headers[3]).unwrap(), b"abcd");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any bytes: both decoders agree on whether they are a block, and on what it holds.
        #[test]
        fn agrees_with_snap_on_any_bytes(block in proptest::collection::vec(any::<u8>(), 0..200)) {
            let ours = decode_whole(&block).ok();
            prop_assert_eq!(ours, snap_decode(&block));
        }

        /// A valid block with bytes flipped: the same agreement, on input close to real.
        #[test]
        fn agrees_with_snap_on_damaged_blocks(
            seed in any::<u64>(),
            len in 0usize..3000,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        ) {
            let mut block = snap::raw::Encoder::new().compress_vec(&mixed(seed, len)).unwrap();
            for (at, bits) in flips {
                let i = at % block.len();
                block[i] ^= bits;
            }
            let ours = decode_whole(&block).ok();
            prop_assert_eq!(ours, snap_decode(&block));
        }
    }
}
