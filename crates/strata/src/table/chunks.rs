// SPDX-License-Identifier: MIT OR Apache-2.0
//! Data blocks compressed in chunks that decode on their own, so that a point lookup
//! decompresses from the chunk that holds its key rather than from the block's start.
//!
//! A Snappy block is one stream: an element may copy bytes from anywhere before it, so a
//! reader that wants the entry in the middle of a block must decode the whole first half.
//! strata's builder instead compresses a data block as two pieces, cut at the restart point
//! (whose entry stores its whole key) nearest its middle, each compressed alone, and joins
//! their elements behind one length header (the format allows up to [`MAX_CHUNKS`]). The result is an ordinary Snappy stream (LevelDB
//! and any Snappy decoder read it whole), in which no element of a chunk reaches before the
//! chunk's start. Where each chunk starts, in the decoded block and in the stored bytes, goes
//! into the block's index entry after its handle: LevelDB reads only the handle there, and
//! allows bytes after it for features to come (`Table::BlockReader` in its table.cc).
//!
//! Index entry value: `handle ‖ CHUNK_MAP_TAG ‖ varint count ‖ (varint output delta ‖ varint
//! input delta) * count`, the deltas from the previous chunk's start (the first from the
//! block's start, 0 and 0). `count` is the chunks after the first, 1 to `MAX_CHUNKS - 1`. A
//! value with nothing after its handle (every LevelDB table's) has one chunk: the whole block;
//! so does one with anything else after it (some other writer's extension).
//!
//! Trust: a map is as trusted as the handle before it, both under the index block's checksum
//! and written by this builder. What readers check anyway: a chunk start inside the block, a
//! restart entry at each probed start, no copy reaching before the chunk, and, when a cursor
//! begun at a chunk decodes its whole block, the same bytes at its entry. `Table::verify`
//! (`strata check`) checks every map whole (`check_chunks`).

use crate::coding::{decode_fixed32, put_varint32, varint_length, Decoder};
use crate::table::snappy::SnappyReader;

/// The byte after the handle that marks a chunk map (version 1 of it).
const CHUNK_MAP_TAG: u8 = 0xc1;

/// The most chunks a chunk map may describe (the builder makes two).
pub(crate) const MAX_CHUNKS: usize = 4;

/// The fewest decoded bytes a chunk holds: below that, the bytes its index entry costs and
/// the compression its cut gives up are not repaid by the decoding it saves.
const MIN_CHUNK: usize = 1024;

/// Where a chunk after a block's first starts: `output`, the offset of its first entry (a
/// restart point) in the decoded block; `input`, the offset of its first element in the
/// stored block (counting the length header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ChunkStart {
    pub(crate) output: u32,
    pub(crate) input: u32,
}

/// The starts of a data block's chunks after the first, in increasing order of both
/// offsets; empty for a block compressed whole (or stored uncompressed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ChunkStarts {
    len: u8,
    starts: [ChunkStart; MAX_CHUNKS - 1],
}

impl ChunkStarts {
    /// The starts, in order.
    pub(crate) fn as_slice(&self) -> &[ChunkStart] {
        &self.starts[..usize::from(self.len)]
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One start, packed into 32 bits as `Table` keeps it in memory for each data block
    /// (`output << 16 | input`), if there is a start and both offsets fit in 16 bits; 0 (no
    /// start: the block decodes from its beginning) otherwise. Of several starts, the
    /// middle one.
    pub(crate) fn packed(&self) -> u32 {
        let Some(start) = self.as_slice().get(usize::from(self.len) / 2) else {
            return 0;
        };
        match (u16::try_from(start.output), u16::try_from(start.input)) {
            (Ok(output), Ok(input)) => u32::from(output) << 16 | u32::from(input),
            _ => 0,
        }
    }

    /// The starts [`packed`](Self::packed) keeps: one, or none for 0.
    pub(crate) fn unpacked(packed: u32) -> ChunkStarts {
        let mut starts = ChunkStarts::default();
        if packed != 0 {
            starts.push(ChunkStart {
                output: packed >> 16,
                input: packed & 0xffff,
            });
        }
        starts
    }

    /// Puts `start` in place of the `i`-th start (a test's damage).
    #[cfg(test)]
    pub(crate) fn set(&mut self, i: usize, start: ChunkStart) {
        self.starts[i] = start;
    }

    fn push(&mut self, start: ChunkStart) {
        self.starts[usize::from(self.len)] = start;
        self.len += 1;
    }

    /// Appends the encoding that follows the handle in the block's index entry: nothing when
    /// there is one chunk, so that such an entry is LevelDB's byte for byte.
    pub(crate) fn encode_into(&self, dst: &mut Vec<u8>) {
        if self.is_empty() {
            return;
        }
        dst.push(CHUNK_MAP_TAG);
        put_varint32(dst, u32::from(self.len));
        let mut last = ChunkStart::default();
        for start in self.as_slice() {
            put_varint32(dst, start.output - last.output);
            put_varint32(dst, start.input - last.input);
            last = *start;
        }
    }

    /// Reads what follows a handle in an index entry (`rest`) for a block of `stored_size`
    /// bytes. Nothing, or bytes that do not begin with the tag, read as one chunk; a tagged
    /// map that is not 1 to `MAX_CHUNKS - 1` starts strictly increasing in both offsets, each
    /// input start inside the block, reads as `None`.
    pub(crate) fn decode(rest: &[u8], stored_size: u64) -> Option<ChunkStarts> {
        let mut starts = ChunkStarts::default();
        let Some((&CHUNK_MAP_TAG, rest)) = rest.split_first() else {
            return Some(starts);
        };
        let mut d = Decoder::new(rest);
        let count = usize::try_from(d.varint32()?).ok()?;
        if count == 0 || count >= MAX_CHUNKS {
            return None;
        }
        let mut last = ChunkStart::default();
        for _ in 0..count {
            let (output, input) = (d.varint32()?, d.varint32()?);
            if output == 0 || input == 0 {
                return None;
            }
            last = ChunkStart {
                output: last.output.checked_add(output)?,
                input: last.input.checked_add(input)?,
            };
            if u64::from(last.input) >= stored_size {
                return None;
            }
            starts.push(last);
        }
        d.is_empty().then_some(starts)
    }
}

/// The chunk starts in a data block's index entry `index_value` (its handle, then the map),
/// the block `stored_size` bytes long: none when the entry holds only the handle, or when
/// what follows it is not a map that fits the block (a decode from the block's start is
/// right for any block; `Table::verify` reports such a map).
pub(crate) fn after_handle(index_value: &[u8], stored_size: u64) -> ChunkStarts {
    read_map(index_value, stored_size).unwrap_or_default()
}

/// The chunk starts in the index entry `index_value`, as [`ChunkStarts::decode`] reads what
/// follows its handle; `None` if the handle does not decode or the map is malformed.
pub(crate) fn read_map(index_value: &[u8], stored_size: u64) -> Option<ChunkStarts> {
    let mut d = Decoder::new(index_value);
    d.varint64()?;
    d.varint64()?;
    ChunkStarts::decode(d.remaining(), stored_size)
}

/// Checks that `starts` fit the data block stored as the Snappy data `contents`, which
/// decodes to `decoded`: each chunk decodes alone, from its input start, to exactly the
/// block's bytes from its output start on, and that output start is a restart point (in
/// the restart array at the end of `decoded`).
pub(crate) fn check_chunks(
    contents: &[u8],
    decoded: &[u8],
    starts: &ChunkStarts,
) -> Result<(), &'static str> {
    let is_restart = |offset: usize| {
        let Some(count) = decoded.len().checked_sub(4).and_then(|at| decode_fixed32(&decoded[at..])) else {
            return false;
        };
        let Some(array) = (count as usize)
            .checked_mul(4)
            .and_then(|n| decoded.len().checked_sub(4 + n))
        else {
            return false;
        };
        decoded[array..decoded.len() - 4]
            .chunks_exact(4)
            .any(|r| decode_fixed32(r) == Some(offset as u32))
    };
    for &start in starts.as_slice() {
        let output = start.output as usize;
        if !is_restart(output) {
            return Err("block's chunk map places a chunk off a restart point");
        }
        let mut reader = SnappyReader::at_chunk(contents, start, Vec::new())?;
        reader.fill_to(decoded.len())?;
        if reader.decoded().get(output..) != decoded.get(output..) {
            return Err("block's chunk does not decode alone to the block's bytes");
        }
    }
    Ok(())
}

/// Where strata's builder cuts a data block (`raw_len` bytes, entries ending at
/// `entries_end`, restart points `restarts` in increasing order, the first 0): at the
/// restart point nearest the middle of the entries that leaves at least `MIN_CHUNK` bytes on
/// either side, so that a lookup decodes about a quarter of the block on average rather than
/// half. One cut, as `Table` keeps in memory; none in a block of more than 64 KiB (whose
/// offsets the table would not keep) or too small to pay for it.
pub(crate) fn chunk_cut(restarts: &[u32], entries_end: usize, raw_len: usize) -> Option<u32> {
    if raw_len > usize::from(u16::MAX) {
        return None;
    }
    let middle = entries_end / 2;
    restarts
        .iter()
        .copied()
        .filter(|&r| r as usize >= MIN_CHUNK && r as usize + MIN_CHUNK <= entries_end)
        .min_by_key(|&r| (r as usize).abs_diff(middle))
}

/// Compresses `raw` (a data block whose entries end at `entries_end`, with restart points
/// `restarts`) with Snappy in the chunks [`chunk_cut`] picks, into `out` (grown as needed).
/// Returns the stored length and the chunks' starts; `None` for a block with no cut, or one
/// the encoder refuses (too large), to be compressed whole.
pub(crate) fn compress_in_chunks(
    encoder: &mut snap::raw::Encoder,
    raw: &[u8],
    restarts: &[u32],
    entries_end: usize,
    out: &mut Vec<u8>,
) -> Option<(usize, ChunkStarts)> {
    let cut = chunk_cut(restarts, entries_end, raw.len())?;
    compress_at_cuts(encoder, raw, &[cut], out)
}

/// [`compress_in_chunks`] at the decoded offsets `cuts` (restart points, increasing, inside
/// the block, at most `MAX_CHUNKS - 1`).
pub(crate) fn compress_at_cuts(
    encoder: &mut snap::raw::Encoder,
    raw: &[u8],
    cuts: &[u32],
    out: &mut Vec<u8>,
) -> Option<(usize, ChunkStarts)> {
    debug_assert!(cuts.len() < MAX_CHUNKS && cuts.windows(2).all(|w| w[0] < w[1]));
    let mut header = Vec::with_capacity(5);
    put_varint32(&mut header, u32::try_from(raw.len()).ok()?);
    let bound = header.len() + snap::raw::max_compress_len(raw.len()) + 5 * MAX_CHUNKS;
    if out.len() < bound {
        out.resize(bound, 0);
    }
    out[..header.len()].copy_from_slice(&header);
    let mut len = header.len();
    let mut starts = ChunkStarts::default();
    let mut from = 0usize;
    for end in cuts.iter().map(|&c| c as usize).chain([raw.len()]) {
        if from > 0 {
            starts.push(ChunkStart {
                output: u32::try_from(from).ok()?,
                input: u32::try_from(len).ok()?,
            });
        }
        // Each piece is a whole Snappy block: its own length header, which the joined
        // stream drops, then its elements.
        let piece = &raw[from..end];
        let n = encoder.compress(piece, &mut out[len..]).ok()?;
        let own_header = varint_length(piece.len() as u64);
        out.copy_within(len + own_header..len + n, len);
        len += n - own_header;
        from = end;
    }
    Some((len, starts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts(list: &[(u32, u32)]) -> ChunkStarts {
        let mut s = ChunkStarts::default();
        for &(output, input) in list {
            s.push(ChunkStart { output, input });
        }
        s
    }

    #[test]
    fn encodes_and_decodes_maps() {
        let mut buf = Vec::new();
        ChunkStarts::default().encode_into(&mut buf);
        assert!(buf.is_empty(), "one chunk adds nothing to the handle");
        assert_eq!(ChunkStarts::decode(&buf, 10), Some(ChunkStarts::default()));
        for list in [&[(1856, 900)][..], &[(1000, 400), (2000, 900), (3000, 1300)]] {
            let map = starts(list);
            let mut buf = Vec::new();
            map.encode_into(&mut buf);
            assert_eq!(ChunkStarts::decode(&buf, 2000), Some(map));
            // An input start past the block is refused.
            assert_eq!(ChunkStarts::decode(&buf, 900), None);
            // Trailing bytes are refused.
            buf.push(0);
            assert_eq!(ChunkStarts::decode(&buf, 2000), None);
        }
    }

    #[test]
    fn packs_one_start_into_32_bits() {
        assert_eq!(ChunkStarts::default().packed(), 0);
        let one = starts(&[(1856, 930)]);
        assert_eq!(ChunkStarts::unpacked(one.packed()), one);
        // Of three, the middle one.
        let three = starts(&[(1000, 400), (2000, 900), (3000, 1300)]);
        assert_eq!(ChunkStarts::unpacked(three.packed()), starts(&[(2000, 900)]));
        // Offsets past 16 bits are not kept.
        assert_eq!(starts(&[(70_000, 900)]).packed(), 0);
        assert_eq!(starts(&[(900, 70_000)]).packed(), 0);
        assert_eq!(ChunkStarts::unpacked(0), ChunkStarts::default());
    }

    #[test]
    fn refuses_maps_that_are_not_increasing_or_too_long() {
        // count 0; count MAX_CHUNKS; a zero delta; a count with its starts missing.
        let cases: [&[u8]; 5] = [&[0], &[4, 1, 1, 1, 1, 1, 1, 1, 1], &[1, 0, 5], &[1, 5, 0], &[2, 5, 5]];
        for case in cases {
            let tagged = [&[CHUNK_MAP_TAG][..], case].concat();
            assert_eq!(ChunkStarts::decode(&tagged, 1 << 20), None, "{case:?}");
            // Untagged, the same bytes are another writer's: one chunk.
            assert_eq!(ChunkStarts::decode(case, 1 << 20), Some(ChunkStarts::default()));
        }
    }

    #[test]
    fn cuts_at_the_restart_nearest_the_middle() {
        // db_bench's 116-byte entries, a restart every 16: 1856 bytes apart.
        let restarts: Vec<u32> = (0..3).map(|i| i * 1856).collect();
        assert_eq!(chunk_cut(&restarts, 4060, 4076), Some(1856));
        // Small entries: restarts 640 apart.
        let restarts: Vec<u32> = (0..7).map(|i| i * 640).collect();
        assert_eq!(chunk_cut(&restarts, 4200, 4232), Some(1920));
        // Every entry a restart: the one nearest the middle.
        let restarts: Vec<u32> = (0..100).map(|i| i * 41).collect();
        assert_eq!(chunk_cut(&restarts, 4100, 4504), Some(2050));
        // A small block, or one with no restart far enough from both ends, is not cut.
        assert_eq!(chunk_cut(&[0, 900], 1900, 1912), None);
        assert_eq!(chunk_cut(&[0, 300, 2900], 3200, 3216), None);
        // Nor is one larger than 64 KiB.
        let restarts: Vec<u32> = (0..100).map(|i| i * 700).collect();
        assert_eq!(chunk_cut(&restarts, 70_000, 70_404), None);
    }

    #[test]
    fn chunks_join_into_one_stream_and_each_decodes_alone() {
        let mut block = crate::table::block_builder::BlockBuilder::new(16);
        for i in 0..300u32 {
            let value = format!("a value that repeats {}", i % 7).repeat(1 + i as usize % 3);
            block.add(format!("entry {i:08}").as_bytes(), value.as_bytes());
        }
        let (raw, restarts, entries_end) = block.finish_with_restarts();
        let (raw, restarts) = (raw.to_vec(), restarts.to_vec());
        let mut encoder = snap::raw::Encoder::new();
        let mut out = Vec::new();
        assert!(compress_in_chunks(&mut encoder, &raw, &restarts, entries_end, &mut out).is_some());
        // The most cuts a map may hold, each decoding alone.
        let cuts = [restarts[3], restarts[8], restarts[14]];
        let (len, map) = compress_at_cuts(&mut encoder, &raw, &cuts, &mut out).unwrap();
        assert_eq!(map.as_slice().len(), MAX_CHUNKS - 1);
        let stored = &out[..len];
        // Whole, by `snap`: the joined stream is an ordinary Snappy block.
        assert_eq!(snap::raw::Decoder::new().decompress_vec(stored).unwrap(), raw);
        check_chunks(stored, &raw, &map).unwrap();
        // A start moved by a byte, either way, in either offset, is refused by the check.
        for i in 0..map.as_slice().len() {
            let s = map.as_slice()[i];
            for (output, input) in [(s.output + 1, s.input), (s.output - 1, s.input), (s.output, s.input + 1), (s.output, s.input - 1)] {
                let mut wrong = map;
                wrong.set(i, ChunkStart { output, input });
                assert!(check_chunks(stored, &raw, &wrong).is_err(), "{wrong:?}");
            }
        }
        // Each chunk from its start, with nothing before it decoded.
        for start in map.as_slice() {
            let mut reader =
                crate::table::snappy::SnappyReader::at_chunk(stored, *start, Vec::new()).unwrap();
            reader.fill_to(raw.len()).unwrap();
            assert_eq!(&reader.decoded()[start.output as usize..], &raw[start.output as usize..]);
        }
    }
}
