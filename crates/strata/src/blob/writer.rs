// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`BlobFileWriter`]: appends records to one blob file.

use std::path::{Path, PathBuf};

use super::{BlobPointer, BLOB_FORMAT_VERSION, BLOB_HEADER_LEN, BLOB_MAGIC, RECORD_HEADER_LEN};
use crate::coding::{crc32c, crc32c_extend, mask_crc, put_fixed32, put_fixed64};
use crate::env::{Env, WritableFile};
use crate::error::{Error, Result};
use crate::filename::blob_file;
use crate::table::format::BlockCompressor;
use crate::table::Compression;

/// How far ahead of its appends a blob file asks the environment for space
/// ([`WritableFile::reserve`]): one call per this many bytes of values.
const RESERVE_AHEAD: u64 = 4 << 20;

/// Appends records to a new blob file. Not shared: its owner (the write path, or a garbage
/// collection) serializes the appends.
///
/// Fail-stop: once an append or a sync has failed, every later call fails, so that nothing is
/// ever written after a gap, and a failed sync is never retried.
pub struct BlobFileWriter {
    number: u64,
    path: PathBuf,
    file: Box<dyn WritableFile>,
    /// Bytes appended so far, header included: the offset of the next record.
    len: u64,
    /// Bytes known durable (`len` at the last successful sync).
    synced_len: u64,
    /// The end of the space last reserved ahead of the appends (`len` or more).
    reserved_to: u64,
    /// The length at which the owner closes the file ([`reserving_up_to`]): space is not
    /// reserved past it.
    ///
    /// [`reserving_up_to`]: Self::reserving_up_to
    target_len: u64,
    records: u64,
    /// The sum of the stored value lengths.
    value_bytes: u64,
    header: Vec<u8>,
    /// Taken out while a value is compressed (its output borrows it), put back after.
    compressor: Option<BlockCompressor>,
    failed: bool,
}

impl std::fmt::Debug for BlobFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFileWriter")
            .field("number", &self.number)
            .field("len", &self.len)
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

impl BlobFileWriter {
    /// Creates blob file `number` in `dir` and writes its header (not synced).
    ///
    /// # Errors
    /// An I/O error creating or writing the file.
    pub fn create(env: &dyn Env, dir: &Path, number: u64) -> Result<BlobFileWriter> {
        let path = blob_file(dir, number);
        let mut file = env.new_writable_file(&path)?;
        let mut header = Vec::with_capacity(BLOB_HEADER_LEN as usize);
        header.extend_from_slice(BLOB_MAGIC);
        put_fixed32(&mut header, BLOB_FORMAT_VERSION);
        put_fixed64(&mut header, number);
        file.append(&header)?;
        Ok(BlobFileWriter {
            number,
            path,
            file,
            len: BLOB_HEADER_LEN,
            synced_len: 0,
            reserved_to: BLOB_HEADER_LEN,
            target_len: u64::MAX,
            records: 0,
            value_bytes: 0,
            header,
            compressor: None,
            failed: false,
        })
    }

    /// The writer, told that its owner closes the file once it is `len` bytes long or more:
    /// space is then reserved ahead only up to `len`, and the record that crosses it is
    /// written without a reservation of its own (a reservation past it would be given back
    /// when the file is dropped, for nothing). Default: no such length.
    #[must_use]
    pub fn reserving_up_to(mut self, len: u64) -> Self {
        self.target_len = len;
        self
    }

    /// The file's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes appended so far, header included.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if nothing but the header was written.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Records appended so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The sum of the stored value lengths appended so far.
    pub fn value_bytes(&self) -> u64 {
        self.value_bytes
    }

    /// True if every byte appended is synced.
    pub fn is_synced(&self) -> bool {
        self.synced_len == self.len
    }

    fn check_not_failed(&self) -> Result<()> {
        if self.failed {
            return Err(Error::io(
                &self.path,
                "append",
                std::io::Error::other("an earlier write to this blob file failed"),
            ));
        }
        Ok(())
    }

    /// Appends the record `key → value`, compressing the value if `compression` asks and it
    /// saves more than 12.5%, and returns the pointer to it.
    ///
    /// # Errors
    /// An I/O error; the writer then refuses every later call.
    pub fn add(
        &mut self,
        key: &[u8],
        value: &[u8],
        compression: Compression,
    ) -> Result<BlobPointer> {
        self.check_not_failed()?;
        if compression == Compression::None {
            return self.add_stored(key, value, Compression::None);
        }
        let mut compressor = self.compressor.take().unwrap_or_else(BlockCompressor::new);
        let (kind, stored) = compressor.compress(value, compression);
        let result = self.add_stored(key, stored, kind);
        self.compressor = Some(compressor);
        result
    }

    /// Appends a record whose value is already in its stored form `stored` (compressed as
    /// `kind` says): what a rewrite of another blob file copies.
    ///
    /// # Errors
    /// An I/O error; the writer then refuses every later call.
    pub fn add_stored(
        &mut self,
        key: &[u8],
        stored: &[u8],
        kind: Compression,
    ) -> Result<BlobPointer> {
        self.check_not_failed()?;
        let key_len = u32::try_from(key.len())
            .map_err(|_| Error::invalid_argument("a key of 4 GiB or more"))?;
        let header = &mut self.header;
        header.clear();
        header.extend_from_slice(&[0; 4]);
        header.push(kind as u8);
        put_fixed32(header, key_len);
        put_fixed64(header, stored.len() as u64);
        let value_crc = mask_crc(crc32c(stored));
        put_fixed32(header, value_crc);
        debug_assert_eq!(header.len(), RECORD_HEADER_LEN);
        let header_crc = crc32c_extend(crc32c(&header[4..]), key);
        header[..4].copy_from_slice(&mask_crc(header_crc).to_le_bytes());
        let pointer = BlobPointer {
            file: self.number,
            offset: self.len + (RECORD_HEADER_LEN + key.len()) as u64,
            len: stored.len() as u64,
            compression: kind,
            crc: value_crc,
        };
        let end = pointer.offset + pointer.len;
        if end > self.reserved_to && self.reserved_to < self.target_len {
            // `len <= reserved_to < target_len`.
            let ahead = RESERVE_AHEAD
                .min(self.target_len - self.len)
                .max(end - self.len);
            self.file.reserve(ahead);
            self.reserved_to = self.len + ahead;
        }
        let appended = self
            .file
            .append(header)
            .and_then(|()| self.file.append(key))
            .and_then(|()| self.file.append(stored));
        if let Err(e) = appended {
            self.failed = true;
            return Err(e);
        }
        self.len = pointer.offset + pointer.len;
        self.records += 1;
        self.value_bytes += pointer.len;
        Ok(pointer)
    }

    /// Hands every appended byte to the file system (no sync).
    ///
    /// # Errors
    /// An I/O error; the writer then refuses every later call.
    pub fn flush(&mut self) -> Result<()> {
        self.check_not_failed()?;
        self.file.flush().inspect_err(|_| self.failed = true)
    }

    /// Makes every appended byte durable; does nothing if they already are.
    ///
    /// # Errors
    /// An I/O error; the writer then refuses every later call (a failed sync is not retried).
    pub fn sync(&mut self) -> Result<()> {
        self.check_not_failed()?;
        if self.is_synced() {
            return Ok(());
        }
        match self.file.sync() {
            Ok(()) => {
                self.synced_len = self.len;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }
}
