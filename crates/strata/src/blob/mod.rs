// SPDX-License-Identifier: MIT OR Apache-2.0
//! Blob files: where key-value separation keeps large values, out of the log and the tables.
//!
//! With [`Options::blob_threshold`](crate::Options) set, a value at least that large is
//! appended once to a blob file, and the tree stores a [`BlobPointer`] to it instead (an entry
//! of kind [`ValueKind::BlobPointer`](crate::key::ValueKind)). The format, byte by byte, is in
//! `docs/blobs.md`:
//!
//! ```text
//! blob file:  header ‖ record*
//! header:     "strata-blob\0" (12 bytes) ‖ fixed32 format version (1) ‖ fixed64 file number
//! record:     fixed32 masked crc32c of the rest of the header and the key
//!             ‖ u8 compression (0 none, 1 Snappy)
//!             ‖ fixed32 key length ‖ fixed64 stored value length
//!             ‖ fixed32 masked crc32c of the stored value
//!             ‖ key ‖ stored value
//! pointer:    varint64 file number ‖ varint64 offset of the stored value
//!             ‖ varint64 stored value length ‖ u8 compression
//!             ‖ fixed32 masked crc32c of the stored value
//! ```
//!
//! A read follows the pointer straight to the value: one positioned read into a buffer of the
//! value's size, its checksum checked against the pointer's. Records carry their key and a
//! checksum of their own, so that a blob file can also be read on its own, from the front: by
//! garbage collection (is this record still its key's value?), by `check` and by `repair`.

mod cache;
pub use cache::BlobCache;
pub(crate) use cache::PinnedBlobFile;
mod reader;
mod writer;

// The read path resolves pointers through it once entries can hold them (issue #7, under way).
pub(crate) use reader::read_value;
pub use reader::{BlobRecord, BlobScanner};
pub use writer::BlobFileWriter;

use std::path::Path;

use crate::coding::{put_fixed32, put_varint64, Decoder};
use crate::error::Error;
use crate::filename::blob_file;
use crate::table::Compression;

/// The first bytes of every blob file.
pub const BLOB_MAGIC: &[u8; 12] = b"strata-blob\0";
/// The format version written in the header.
pub const BLOB_FORMAT_VERSION: u32 = 1;
/// The header's length.
pub const BLOB_HEADER_LEN: u64 = 12 + 4 + 8;
/// A record's header: header crc, compression, key length, stored value length, value crc.
pub const RECORD_HEADER_LEN: usize = 4 + 1 + 4 + 8 + 4;

/// Where a value lives in a blob file: what the tree stores in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlobPointer {
    /// The blob file's number (its name is `NNNNNN.blob`).
    pub file: u64,
    /// The offset of the stored value in the file.
    pub offset: u64,
    /// The stored value's length (compressed, if it is).
    pub len: u64,
    /// How the value is stored.
    pub compression: Compression,
    /// The masked crc32c of the stored value.
    pub crc: u32,
}

impl BlobPointer {
    /// The longest encoding.
    pub const MAX_ENCODED_LEN: usize = 3 * 10 + 1 + 4;

    /// Appends the encoding to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.file);
        put_varint64(dst, self.offset);
        put_varint64(dst, self.len);
        dst.push(self.compression as u8);
        put_fixed32(dst, self.crc);
    }

    /// Writes the encoding at the front of `dst` and returns its length.
    pub fn encode_into(&self, dst: &mut [u8; Self::MAX_ENCODED_LEN]) -> usize {
        let mut pos = 0;
        for mut v in [self.file, self.offset, self.len] {
            while v >= 0x80 {
                dst[pos] = v as u8 | 0x80;
                v >>= 7;
                pos += 1;
            }
            dst[pos] = v as u8;
            pos += 1;
        }
        dst[pos] = self.compression as u8;
        dst[pos + 1..pos + 5].copy_from_slice(&self.crc.to_le_bytes());
        pos + 5
    }

    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::MAX_ENCODED_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Parses an encoded pointer; `None` unless `src` is exactly one pointer.
    pub fn decode(src: &[u8]) -> Option<BlobPointer> {
        let mut d = Decoder::new(src);
        let p = BlobPointer {
            file: d.varint64()?,
            offset: d.varint64()?,
            len: d.varint64()?,
            compression: Compression::from_byte(d.u8()?)?,
            crc: d.fixed32()?,
        };
        d.is_empty().then_some(p)
    }

    /// True if the value lies within the first `file_len` bytes of its file, after the file's
    /// header and a record header.
    pub fn fits_in(&self, file_len: u64) -> bool {
        self.offset >= BLOB_HEADER_LEN + RECORD_HEADER_LEN as u64
            && self
                .offset
                .checked_add(self.len)
                .is_some_and(|end| end <= file_len)
    }
}

/// The corruption of an entry of the database in `dir`, with user key `key`, whose value should
/// be a blob pointer but is `encoded`, which does not decode. The entry was read through the
/// merged view of the database, so the table or log it came from is not known: the error names
/// the blob file (and the value's offset in it) if the pointer decodes that far, and otherwise
/// the database's directory; its reason names the entry.
pub(crate) fn malformed_pointer(dir: &Path, key: &[u8], encoded: &[u8]) -> Error {
    let mut d = Decoder::new(encoded);
    let entry = format!(
        "the entry with key '{}' of the database at {}",
        key.escape_ascii(),
        dir.display()
    );
    match (d.varint64(), d.varint64()) {
        (Some(file), Some(offset)) => Error::corruption(
            blob_file(dir, file),
            offset,
            format!("{entry} holds a malformed pointer to a value at this offset"),
        ),
        (Some(file), None) => Error::corruption(
            blob_file(dir, file),
            0,
            format!(
                "{entry} holds a malformed pointer into this file (its offset does not decode)"
            ),
        ),
        _ => Error::corruption(
            dir,
            0,
            format!("{entry} holds a malformed blob pointer (not even its file number decodes)"),
        ),
    }
}

#[cfg(test)]
mod tests;
