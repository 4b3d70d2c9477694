// SPDX-License-Identifier: MIT OR Apache-2.0
//! Reading blob files: a value through its pointer ([`read_value`]), or every record from the
//! front ([`BlobScanner`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{BlobPointer, BLOB_FORMAT_VERSION, BLOB_HEADER_LEN, BLOB_MAGIC, RECORD_HEADER_LEN};
use crate::coding::{crc32c, crc32c_extend, decode_fixed32, decode_fixed64, unmask_crc};
use crate::env::{Env, RandomAccessFile};
use crate::error::{Error, Result};
use crate::table::format::decompress_snappy;
use crate::table::Compression;

/// Turns a stored value into the value: decompresses it if it is compressed.
fn unpack(stored: Vec<u8>, compression: Compression, path: &Path, offset: u64) -> Result<Vec<u8>> {
    match compression {
        Compression::None => Ok(stored),
        Compression::Snappy => {
            decompress_snappy(&stored).map_err(|reason| Error::corruption(path, offset, reason))
        }
    }
}

/// Reads the value `pointer` points to, from `file` (blob file `path`, at least `file_len`
/// bytes long), checking it against the pointer's checksum when `verify` is set.
///
/// The pointer is untrusted (it comes from a table, a log or a memtable, and with checksums off
/// nothing vouches for it): nothing is allocated for it unless its value lies within the
/// first `file_len` bytes.
///
/// # Errors
/// [`Error::Corruption`] naming the file and the value's offset if the value does not lie
/// within `file_len` bytes, the checksum does not match or the value does not decompress;
/// [`Error::Io`] if reading fails (a file shorter than `file_len`, an I/O error of kind
/// `UnexpectedEof`).
pub(crate) fn read_value(
    file: &dyn RandomAccessFile,
    path: &Path,
    file_len: u64,
    pointer: &BlobPointer,
    verify: bool,
) -> Result<Vec<u8>> {
    if !pointer.fits_in(file_len) {
        return Err(Error::corruption(
            path,
            pointer.offset,
            format!(
                "blob pointer to {} bytes reaches outside the file's {file_len} bytes of records",
                pointer.len
            ),
        ));
    }
    let len = usize::try_from(pointer.len)
        .map_err(|_| Error::corruption(path, pointer.offset, "blob value too large"))?;
    let stored = file.read_to_vec(pointer.offset, len)?;
    if verify && crc32c(&stored) != unmask_crc(pointer.crc) {
        return Err(Error::corruption(
            path,
            pointer.offset,
            "blob value checksum mismatch",
        ));
    }
    unpack(stored, pointer.compression, path, pointer.offset)
}

/// One record of a blob file, as [`BlobScanner`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobRecord {
    /// Where the record starts.
    pub offset: u64,
    /// The key it was written for.
    pub key: Vec<u8>,
    /// The pointer that reaches its value.
    pub pointer: BlobPointer,
    /// The value as stored (compressed if `pointer.compression` says so).
    pub stored: Vec<u8>,
}

impl BlobRecord {
    /// The value, decompressed.
    ///
    /// # Errors
    /// [`Error::Corruption`] if it does not decompress.
    pub fn value(&self, path: &Path) -> Result<Vec<u8>> {
        unpack(
            self.stored.clone(),
            self.pointer.compression,
            path,
            self.pointer.offset,
        )
    }

    /// The record's length in the file.
    pub fn len(&self) -> u64 {
        self.pointer.offset + self.pointer.len - self.offset
    }

    /// True if the record holds an empty key and an empty value.
    pub fn is_empty(&self) -> bool {
        self.key.is_empty() && self.stored.is_empty()
    }
}

/// Reads a blob file's records in order, checking each record's checksum.
pub struct BlobScanner {
    path: PathBuf,
    file: Arc<dyn RandomAccessFile>,
    number: u64,
    file_len: u64,
    pos: u64,
    done: bool,
    cut_off: bool,
}

impl std::fmt::Debug for BlobScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobScanner")
            .field("path", &self.path)
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

impl BlobScanner {
    /// Opens blob file `path` and checks its header.
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be read; [`Error::Corruption`] at offset 0 if the header is not
    /// a blob file's.
    pub fn open(env: &dyn Env, path: &Path) -> Result<BlobScanner> {
        let file_len = env.file_size(path)?;
        let file = env.new_random_access_file(path)?;
        if file_len < BLOB_HEADER_LEN {
            return Err(Error::corruption(
                path,
                0,
                "blob file shorter than its header",
            ));
        }
        let mut header = [0u8; BLOB_HEADER_LEN as usize];
        file.read_exact_at(0, &mut header)?;
        if &header[..12] != BLOB_MAGIC {
            return Err(Error::corruption(path, 0, "not a blob file (bad magic)"));
        }
        let version = decode_fixed32(&header[12..]).expect("4 bytes");
        if version != BLOB_FORMAT_VERSION {
            return Err(Error::corruption(
                path,
                12,
                format!("unknown blob format version {version}"),
            ));
        }
        let number = decode_fixed64(&header[16..]).expect("8 bytes");
        Ok(BlobScanner {
            path: path.to_path_buf(),
            file,
            number,
            file_len,
            pos: BLOB_HEADER_LEN,
            done: false,
            cut_off: false,
        })
    }

    /// Stops the scan at `len` bytes, if the file is longer: the records the MANIFEST counts
    /// end there (recovery lists a file up to its last good record; a torn tail after it is
    /// nobody's).
    pub fn limit(&mut self, len: u64) {
        self.file_len = self.file_len.min(len.max(BLOB_HEADER_LEN));
    }

    /// The file number its header names.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The file's length when it was opened.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The offset of the next record: after the last one read, the end of the good records.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// True if the scan ended at a record the end of the file cuts short: the torn tail of a
    /// file being appended to when a crash came.
    pub fn cut_off(&self) -> bool {
        self.cut_off
    }

    fn corrupt(&mut self, offset: u64, reason: &'static str) -> Option<Result<BlobRecord>> {
        self.done = true;
        Some(Err(Error::corruption(&self.path, offset, reason)))
    }

    /// The next record; `None` at the end of the file. A record that runs past the end of the
    /// file (a torn tail) or fails its checksum is a corruption error at its offset, after which
    /// the scan ends: [`position`](Self::position) is then where the good records end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<BlobRecord>> {
        if self.done || self.pos == self.file_len {
            return None;
        }
        let start = self.pos;
        if self.file_len - start < RECORD_HEADER_LEN as u64 {
            self.cut_off = true;
            return self.corrupt(start, "blob record header cut off by the end of the file");
        }
        let mut header = [0u8; RECORD_HEADER_LEN];
        if let Err(e) = self.file.read_exact_at(start, &mut header) {
            self.done = true;
            return Some(Err(e));
        }
        let crc = decode_fixed32(&header).expect("4 bytes");
        let Some(compression) = Compression::from_byte(header[4]) else {
            return self.corrupt(start, "unknown blob compression type");
        };
        let key_len = u64::from(decode_fixed32(&header[5..]).expect("4 bytes"));
        let stored_len = decode_fixed64(&header[9..]).expect("8 bytes");
        let body_start = start + RECORD_HEADER_LEN as u64;
        let Some(end) = body_start
            .checked_add(key_len)
            .and_then(|e| e.checked_add(stored_len))
            .filter(|&e| e <= self.file_len)
        else {
            self.cut_off = true;
            return self.corrupt(start, "blob record cut off by the end of the file");
        };
        let mut body = vec![0u8; (end - body_start) as usize];
        if let Err(e) = self.file.read_exact_at(body_start, &mut body) {
            self.done = true;
            return Some(Err(e));
        }
        let stored = body.split_off(key_len as usize);
        if crc32c_extend(crc32c(&header[4..]), &body) != unmask_crc(crc) {
            return self.corrupt(start, "blob record header checksum mismatch");
        }
        let value_crc = decode_fixed32(&header[17..]).expect("4 bytes");
        if crc32c(&stored) != unmask_crc(value_crc) {
            return self.corrupt(start, "blob value checksum mismatch");
        }
        self.pos = end;
        Some(Ok(BlobRecord {
            offset: start,
            key: body,
            pointer: BlobPointer {
                file: self.number,
                offset: end - stored_len,
                len: stored_len,
                compression,
                crc: value_crc,
            },
            stored,
        }))
    }
}
