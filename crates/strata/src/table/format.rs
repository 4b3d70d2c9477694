// SPDX-License-Identifier: MIT OR Apache-2.0
//! Block handles, block trailers, the footer, and reading one block from a table file.
//!
//! ```text
//! table file:
//! [data block 0][trailer] ... [data block N-1][trailer]
//! [filter block][trailer]          (only with a filter policy)
//! [metaindex block][trailer]
//! [index block][trailer]
//! [footer: 48 bytes]
//!
//! trailer (5 bytes): compression type (1) ‖ mask(crc32c(stored block ‖ type)) (4, LE)
//! handle:            varint64 offset ‖ varint64 size (size excludes the trailer)
//! footer:            metaindex handle ‖ index handle ‖ zero padding to 40 bytes ‖ magic (8, LE)
//! ```

use std::io;
use std::path::Path;

use crate::coding::{crc32c, crc32c_extend, put_varint64, unmask_crc, Decoder};
use crate::env::RandomAccessFile;
use crate::table::chunks::{compress_in_chunks, ChunkStarts};
use crate::table::snappy::checked_length;
use crate::error::{Error, Result};

/// The magic number that ends every table: `0xdb4775248b80fb57`.
pub const TABLE_MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// The footer's size.
pub const FOOTER_SIZE: usize = 48;
/// The size of the trailer after every block.
pub const BLOCK_TRAILER_SIZE: usize = 5;
/// The largest encoding of a block handle.
pub const MAX_BLOCK_HANDLE_LEN: usize = 20;

/// How a block is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(u8)]
pub enum Compression {
    /// Stored as is.
    None = 0,
    /// Raw Snappy (no framing). Kept only when it saves more than 12.5%.
    #[default]
    Snappy = 1,
}

impl Compression {
    /// Parses a stored compression byte.
    pub fn from_byte(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Snappy),
            _ => None,
        }
    }
}

/// Where a block lies in its file: its offset and its stored size, without the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Stored size of the block, excluding its 5-byte trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the varint encoding.
    pub fn encode_into(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a handle from the start of `d`.
    pub fn decode_from(d: &mut Decoder<'_>) -> Option<BlockHandle> {
        Some(BlockHandle {
            offset: d.varint64()?,
            size: d.varint64()?,
        })
    }

    /// Decodes a handle from the start of `src`, ignoring anything after it.
    pub fn decode(src: &[u8]) -> Option<BlockHandle> {
        let mut d = Decoder::new(src);
        BlockHandle::decode_from(&mut d)
    }

    /// The offset just past this block's trailer.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_SIZE as u64)
    }
}

/// The last 48 bytes of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Where the metaindex block is.
    pub metaindex: BlockHandle,
    /// Where the index block is.
    pub index: BlockHandle,
}

impl Footer {
    /// The 48-byte encoding.
    pub fn encode(&self) -> [u8; FOOTER_SIZE] {
        let mut buf = Vec::with_capacity(FOOTER_SIZE);
        self.metaindex.encode_into(&mut buf);
        self.index.encode_into(&mut buf);
        buf.resize(FOOTER_SIZE - 8, 0);
        buf.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        buf.try_into().expect("footer is 48 bytes")
    }

    /// Decodes a footer found at `offset` of `path`.
    pub fn decode(src: &[u8; FOOTER_SIZE], path: &Path, offset: u64) -> Result<Footer> {
        let magic = u64::from_le_bytes(src[40..].try_into().expect("8 bytes"));
        if magic != TABLE_MAGIC {
            return Err(Error::corruption(
                path,
                offset + 40,
                "not a table: bad magic number",
            ));
        }
        let mut d = Decoder::new(&src[..40]);
        let bad = || Error::corruption(path, offset, "bad block handle in footer");
        let metaindex = BlockHandle::decode_from(&mut d).ok_or_else(bad)?;
        let index = BlockHandle::decode_from(&mut d).ok_or_else(bad)?;
        Ok(Footer { metaindex, index })
    }
}

/// Reads the footer of a table of `file_size` bytes.
pub fn read_footer(file: &dyn RandomAccessFile, path: &Path, file_size: u64) -> Result<Footer> {
    if file_size < FOOTER_SIZE as u64 {
        return Err(Error::corruption(
            path,
            0,
            format!("file is too short ({file_size} bytes) to be a table"),
        ));
    }
    let offset = file_size - FOOTER_SIZE as u64;
    let mut buf = [0u8; FOOTER_SIZE];
    read_exact_at(file, path, offset, &mut buf)?;
    Footer::decode(&buf, path, offset)
}

/// Reads `buf.len()` bytes at `offset`, turning a short file into corruption at that offset.
pub(crate) fn read_exact_at(
    file: &dyn RandomAccessFile,
    path: &Path,
    offset: u64,
    buf: &mut [u8],
) -> Result<()> {
    file.read_exact_at(offset, buf).map_err(|e| match e {
        Error::Io { ref source, .. } if source.kind() == io::ErrorKind::UnexpectedEof => {
            Error::corruption(path, offset, "file is shorter than its recorded size")
        }
        other => other,
    })
}

/// The CRC stored in a block trailer: over the stored bytes, then the type byte.
pub fn block_crc(stored: &[u8], kind: u8) -> u32 {
    crc32c_extend(crc32c(stored), &[kind])
}

/// Reads the block at `handle` from a table whose contents end at `data_end` (the footer's
/// offset), checks its trailer, and returns its uncompressed contents.
///
/// Requires nothing of `handle`: it is checked against `data_end` before anything is read or
/// allocated.
///
/// # Errors
/// Corruption naming `path` and the block's offset if the handle points outside the file, the
/// checksum does not match (when `verify_checksum`), the type is unknown, or the Snappy data is
/// invalid.
pub fn read_block(
    file: &dyn RandomAccessFile,
    path: &Path,
    data_end: u64,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    let corrupt = |reason: &'static str| Error::corruption(path, handle.offset, reason);
    // A mapped table's block is checked and decompressed where it lies: one copy (or the
    // decompression) and no system call. Otherwise it is read into a buffer first.
    if let Some(stored) = mapped_block(file, path, data_end, handle)? {
        return expand_stored_block(stored, verify_checksum).map_err(corrupt);
    }
    // `mapped_block` checked the handle against the file.
    let size = usize::try_from(handle.size).map_err(|_| corrupt("block is too large"))?;
    let mut buf = vec![0u8; size + BLOCK_TRAILER_SIZE];
    read_exact_at(file, path, handle.offset, &mut buf)?;
    let expanded = check_and_expand(&buf, verify_checksum).map_err(corrupt)?;
    Ok(expanded.unwrap_or_else(|| {
        buf.truncate(size);
        buf
    }))
}

/// The stored bytes of the block at `handle` (contents, then the five-byte trailer) where
/// `file`'s mapping holds them, after checking `handle` against `data_end` as
/// [`read_block`] does; `None` if the file is not mapped.
///
/// # Errors
/// Corruption naming `path` and the block's offset if the handle points outside the file.
pub(crate) fn mapped_block<'f>(
    file: &'f dyn RandomAccessFile,
    path: &Path,
    data_end: u64,
    handle: BlockHandle,
) -> Result<Option<&'f [u8]>> {
    let corrupt = |reason: &'static str| Error::corruption(path, handle.offset, reason);
    match handle.end_with_trailer() {
        Some(end) if end <= data_end => {}
        _ => return Err(corrupt("block handle points past the end of the file")),
    }
    let size = usize::try_from(handle.size).map_err(|_| corrupt("block is too large"))?;
    let len = size + BLOCK_TRAILER_SIZE;
    Ok(file.mapped(handle.offset, len).filter(|b| b.len() == len))
}

/// Checks the checksum in a stored block's trailer (`stored`: contents, then trailer).
pub(crate) fn verify_stored_block(stored: &[u8]) -> std::result::Result<(), &'static str> {
    let size = stored.len() - BLOCK_TRAILER_SIZE;
    let stored_crc = u32::from_le_bytes(stored[size + 1..].try_into().expect("4 bytes"));
    if unmask_crc(stored_crc) != block_crc(&stored[..size], stored[size]) {
        return Err("block checksum mismatch");
    }
    Ok(())
}

/// Checks a stored block (its contents, then the five-byte trailer) and returns its contents,
/// decompressed, in a new buffer.
pub(crate) fn expand_stored_block(
    stored: &[u8],
    verify_checksum: bool,
) -> std::result::Result<Vec<u8>, &'static str> {
    let expanded = check_and_expand(stored, verify_checksum)?;
    Ok(expanded.unwrap_or_else(|| stored[..stored.len() - BLOCK_TRAILER_SIZE].to_vec()))
}

/// Checks a stored block (its contents, then the five-byte trailer) and decompresses it;
/// `None` when it is stored uncompressed, so that the caller keeps the contents it has.
fn check_and_expand(
    stored: &[u8],
    verify_checksum: bool,
) -> std::result::Result<Option<Vec<u8>>, &'static str> {
    let size = stored.len() - BLOCK_TRAILER_SIZE;
    let kind = stored[size];
    if verify_checksum {
        verify_stored_block(stored)?;
    }
    match kind {
        k if k == Compression::None as u8 => Ok(None),
        k if k == Compression::Snappy as u8 => {
            decompress_snappy_into(&stored[..size], crate::table::block::block_buffer).map(Some)
        }
        _ => Err("unknown block compression type"),
    }
}

/// Decompresses a raw Snappy block, refusing lengths the input cannot produce.
pub(crate) fn decompress_snappy(stored: &[u8]) -> std::result::Result<Vec<u8>, &'static str> {
    decompress_snappy_into(stored, |len| vec![0u8; len])
}

/// [`decompress_snappy`] into the buffer `buffer(len)` gives, which must be `len` bytes long;
/// its contents are overwritten.
fn decompress_snappy_into(
    stored: &[u8],
    buffer: impl FnOnce(usize) -> Vec<u8>,
) -> std::result::Result<Vec<u8>, &'static str> {
    let (len, _) = checked_length(stored)?;
    let mut out = buffer(len);
    debug_assert_eq!(out.len(), len);
    match snap::raw::Decoder::new().decompress(stored, &mut out) {
        Ok(n) if n == len => Ok(out),
        _ => Err("bad snappy block"),
    }
}

/// Compresses blocks, keeping a result only if it saves more than 12.5%, as LevelDB does. One
/// compressor serves a whole table: its Snappy encoder (and hash table) and its output buffer
/// are reused from block to block.
pub(crate) struct BlockCompressor {
    encoder: snap::raw::Encoder,
    /// Output buffer; its length only grows, so it is zeroed once, not once per block.
    buf: Vec<u8>,
}

impl BlockCompressor {
    pub(crate) fn new() -> Self {
        BlockCompressor {
            encoder: snap::raw::Encoder::new(),
            buf: Vec::new(),
        }
    }

    /// Compresses `raw` per `compression`. Returns the type actually used and the bytes to
    /// store: `raw` itself when that type is [`Compression::None`].
    pub(crate) fn compress<'a>(
        &'a mut self,
        raw: &'a [u8],
        compression: Compression,
    ) -> (Compression, &'a [u8]) {
        match compression {
            Compression::None => (Compression::None, raw),
            Compression::Snappy => {
                let max = snap::raw::max_compress_len(raw.len());
                if self.buf.len() < max {
                    self.buf.resize(max, 0);
                }
                match self.encoder.compress(raw, &mut self.buf) {
                    Ok(n) if n < raw.len() - raw.len() / 8 => (Compression::Snappy, &self.buf[..n]),
                    _ => (Compression::None, raw),
                }
            }
        }
    }
}

impl BlockCompressor {
    /// [`compress`](Self::compress) for a data block, `raw`, whose entries end at
    /// `entries_end` and whose restart points are `restarts`: Snappy compresses it in
    /// chunks that decode alone (`table::chunks`), whose starts it also returns. A block the
    /// chunks do not shrink by an eighth (their joins cost a little) is tried whole, as
    /// [`compress`](Self::compress) does it; none are returned then, nor for a block stored
    /// uncompressed.
    pub(crate) fn compress_data_block<'a>(
        &'a mut self,
        raw: &'a [u8],
        restarts: &[u32],
        entries_end: usize,
        compression: Compression,
    ) -> (Compression, &'a [u8], ChunkStarts) {
        if compression == Compression::Snappy {
            let chunked =
                compress_in_chunks(&mut self.encoder, raw, restarts, entries_end, &mut self.buf);
            if let Some((n, starts)) = chunked {
                if n < raw.len() - raw.len() / 8 {
                    return (Compression::Snappy, &self.buf[..n], starts);
                }
            }
        }
        let (kind, stored) = self.compress(raw, compression);
        (kind, stored, ChunkStarts::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_matches_the_small_fixture() {
        let footer = Footer {
            metaindex: BlockHandle {
                offset: 14211,
                size: 8,
            },
            index: BlockHandle {
                offset: 14224,
                size: 288,
            },
        };
        let bytes = footer.encode();
        assert_eq!(&bytes[..7], &[0x83, 0x6f, 0x08, 0x90, 0x6f, 0xa0, 0x02]);
        assert!(bytes[7..40].iter().all(|&b| b == 0));
        assert_eq!(
            &bytes[40..],
            &[0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb]
        );
        assert_eq!(Footer::decode(&bytes, Path::new("t"), 0).unwrap(), footer);
    }

    #[test]
    fn footer_with_wrong_magic_is_corruption() {
        let mut bytes = Footer {
            metaindex: BlockHandle::default(),
            index: BlockHandle::default(),
        }
        .encode();
        bytes[47] ^= 1;
        let err = Footer::decode(&bytes, Path::new("/x/1.ldb"), 100).unwrap_err();
        assert!(err.to_string().contains("bad magic"), "{err}");
        assert!(matches!(err, Error::Corruption { offset: 140, .. }));
    }

    #[test]
    fn footer_with_unending_varint_is_corruption() {
        let mut bytes = [0xffu8; FOOTER_SIZE];
        bytes[40..].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        let err = Footer::decode(&bytes, Path::new("t"), 0).unwrap_err();
        assert!(err.to_string().contains("bad block handle"), "{err}");
    }

    #[test]
    fn snappy_with_impossible_length_is_refused_before_allocating() {
        // Claims 2^32 - 1 bytes from 6 bytes of input.
        let stored = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        assert_eq!(
            decompress_snappy(&stored),
            Err("snappy block claims an impossible length")
        );
    }

    #[test]
    fn compression_is_kept_only_when_it_saves_an_eighth() {
        let mut compressor = BlockCompressor::new();
        let compressible = vec![b'a'; 4096];
        let (kind, stored) = compressor.compress(&compressible, Compression::Snappy);
        assert_eq!(kind, Compression::Snappy);
        assert!(stored.len() < compressible.len() / 8);
        assert_eq!(decompress_snappy(stored).unwrap(), compressible);
        let mut x = 0x9e37_79b9_u32;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let (kind, stored) = compressor.compress(&random, Compression::Snappy);
        assert_eq!((kind, stored), (Compression::None, &random[..]));
        let (kind, _) = compressor.compress(&[0u8; 8], Compression::Snappy);
        assert_eq!(kind, Compression::None);
        // A small block after large ones decodes to itself: the buffer's stale tail is unused.
        let small = vec![b'b'; 100];
        let (kind, stored) = compressor.compress(&small, Compression::Snappy);
        assert_eq!(kind, Compression::Snappy);
        assert_eq!(decompress_snappy(stored).unwrap(), small);
    }
}
