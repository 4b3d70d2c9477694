// SPDX-License-Identifier: MIT OR Apache-2.0
//! Data blocks compressed in chunks that decode on their own, so that a point lookup
//! decompresses from the chunk that holds its key rather than from the block's start.
//!
//! A Snappy block is one stream: an element may copy bytes from anywhere before it, so a
//! reader that wants the entry in the middle of a block must decode the whole first half.
//! strata's builder instead compresses a data block as up to [`MAX_CHUNKS`] pieces, each cut
//! at a restart point (whose entry stores its whole key) and compressed alone, and joins
//! their elements behind one length header. The result is an ordinary Snappy stream (LevelDB
//! and any Snappy decoder read it whole), in which no element of a chunk reaches before the
//! chunk's start. Where each chunk starts, in the decoded block and in the stored bytes, goes
//! into the block's index entry after its handle: LevelDB reads only the handle there, and
//! allows bytes after it for features to come (`Table::BlockReader` in its table.cc).
//!
//! Index entry value: `handle ‖ varint count ‖ (varint output delta ‖ varint input delta) *
//! count`, the deltas from the previous chunk's start (the first from the block's start, 0
//! and 0). `count` is the chunks after the first, 1 to `MAX_CHUNKS - 1`. A value with
//! nothing after its handle (every LevelDB table's) has one chunk: the whole block.

use crate::coding::{decode_fixed32, put_varint32, varint_length, Decoder};
use crate::table::snappy::SnappyReader;

/// The most chunks a data block is compressed in.
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
        put_varint32(dst, u32::from(self.len));
        let mut last = ChunkStart::default();
        for start in self.as_slice() {
            put_varint32(dst, start.output - last.output);
            put_varint32(dst, start.input - last.input);
            last = *start;
        }
    }

    /// Reads what follows a handle in an index entry (`rest`) for a block of `stored_size`
    /// bytes. Nothing reads as one chunk; anything that is not a map of 1 to
    /// `MAX_CHUNKS - 1` starts strictly increasing in both offsets, each input start inside
    /// the block, reads as `None`.
    pub(crate) fn decode(rest: &[u8], stored_size: u64) -> Option<ChunkStarts> {
        let mut starts = ChunkStarts::default();
        if rest.is_empty() {
            return Some(starts);
        }
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
    let mut d = Decoder::new(index_value);
    if d.varint64().and(d.varint64()).is_none() {
        return ChunkStarts::default();
    }
    ChunkStarts::decode(d.remaining(), stored_size).unwrap_or_default()
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

/// The decoded offsets where a data block's chunks after the first begin: restart points
/// (from `restarts`, in increasing order, the first 0) at least `MIN_CHUNK` bytes, and a
/// quarter of the entries, past the previous chunk's start, and at least `MIN_CHUNK` bytes
/// before `entries_end` (where the restart array begins). At most `MAX_CHUNKS - 1`.
pub(crate) fn chunk_cuts(restarts: &[u32], entries_end: usize) -> ([u32; MAX_CHUNKS - 1], usize) {
    let mut cuts = [0u32; MAX_CHUNKS - 1];
    let mut count = 0;
    let step = MIN_CHUNK.max(entries_end / MAX_CHUNKS);
    let mut last = 0usize;
    for &restart in restarts {
        let at = restart as usize;
        if count == cuts.len() || at + MIN_CHUNK > entries_end {
            break;
        }
        if at >= last + step {
            cuts[count] = restart;
            count += 1;
            last = at;
        }
    }
    (cuts, count)
}

/// Compresses `raw` (a data block whose entries end at `entries_end`, with restart points
/// `restarts`) with Snappy in the chunks [`chunk_cuts`] picks, into `out` (grown as
/// needed). Returns the stored length and the chunks' starts; `None` for a block with no
/// cut, to be compressed whole.
pub(crate) fn compress_in_chunks(
    encoder: &mut snap::raw::Encoder,
    raw: &[u8],
    restarts: &[u32],
    entries_end: usize,
    out: &mut Vec<u8>,
) -> Option<(usize, ChunkStarts)> {
    let (cuts, count) = chunk_cuts(restarts, entries_end);
    if count == 0 {
        return None;
    }
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
    for end in cuts[..count].iter().map(|&c| c as usize).chain([raw.len()]) {
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
    fn refuses_maps_that_are_not_increasing_or_too_long() {
        // count 0; count MAX_CHUNKS; a zero delta; a count with its starts missing.
        let cases: [&[u8]; 5] = [&[0], &[4, 1, 1, 1, 1, 1, 1, 1, 1], &[1, 0, 5], &[1, 5, 0], &[2, 5, 5]];
        for case in cases {
            assert_eq!(ChunkStarts::decode(case, 1 << 20), None, "{case:?}");
        }
    }

    #[test]
    fn cuts_at_restarts_far_enough_apart() {
        // db_bench's 116-byte entries, a restart every 16: 1856 bytes apart.
        let restarts: Vec<u32> = (0..3).map(|i| i * 1856).collect();
        assert_eq!(chunk_cuts(&restarts, 4060), ([1856, 0, 0], 1));
        // Small entries: restarts 640 apart, cuts at least a quarter of the block apart.
        let restarts: Vec<u32> = (0..7).map(|i| i * 640).collect();
        assert_eq!(chunk_cuts(&restarts, 4200), ([1280, 2560, 0], 2));
        // A big block: at most MAX_CHUNKS - 1 cuts.
        let restarts: Vec<u32> = (0..100).map(|i| i * 700).collect();
        let (cuts, count) = chunk_cuts(&restarts, 70_000);
        assert_eq!(count, MAX_CHUNKS - 1);
        assert!(cuts.windows(2).all(|w| w[1] - w[0] >= 70_000 / 4));
        // A small block is not cut.
        assert_eq!(chunk_cuts(&[0, 900], 1900).1, 0);
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
        let (len, map) = compress_in_chunks(&mut encoder, &raw, &restarts, entries_end, &mut out).unwrap();
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
