// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`LogWriter`]: appends logical records to a log file.

use super::{RecordType, BLOCK_SIZE, HEADER_SIZE};
use crate::coding::{crc32c, crc32c_extend, mask_crc};
use crate::env::WritableFile;
use crate::error::{Error, Result};

/// Appends records to a log, cutting them into fragments at block boundaries exactly as LevelDB
/// does, so that the bytes are identical to LevelDB's.
///
/// Each [`add_record`](LogWriter::add_record) hands the whole record to the operating system
/// before it returns (it survives a process crash); [`sync`](LogWriter::sync) makes it durable.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use strata::{Env, MemEnv};
/// use strata::log::{LogReader, LogWriter, ReadMode};
///
/// let env = MemEnv::new();
/// let path = Path::new("/000003.log");
/// let mut writer = LogWriter::new(env.new_writable_file(path).unwrap());
/// writer.add_record(b"hello").unwrap();
/// writer.sync().unwrap();
///
/// let mut reader = LogReader::new(env.new_sequential_file(path).unwrap(), path, ReadMode::Strict);
/// assert_eq!(reader.next_record().unwrap(), Some(&b"hello"[..]));
/// assert_eq!(reader.next_record().unwrap(), None);
/// ```
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Position inside the current block. Invariant: `block_offset <= BLOCK_SIZE`.
    block_offset: usize,
    /// Bytes written through this writer, plus the initial length of the file.
    file_len: u64,
    /// The CRC of each type byte, so that a fragment's CRC extends it with the payload.
    type_crc: [u32; 5],
    /// The first write or sync error. Once set, the log's tail is unknown and nothing is
    /// appended or synced again (fail-stop, whatever the file does after a failure).
    failed: Option<Error>,
}

impl LogWriter {
    /// A writer at the start of an empty file.
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        Self::with_existing_len(file, 0)
    }

    /// A writer that appends to a file already `existing_len` bytes long.
    pub fn with_existing_len(file: Box<dyn WritableFile>, existing_len: u64) -> Self {
        let type_crc = [0u8, 1, 2, 3, 4].map(|t| crc32c(&[t]));
        LogWriter {
            file,
            block_offset: (existing_len % BLOCK_SIZE as u64) as usize,
            file_len: existing_len,
            type_crc,
            failed: None,
        }
    }

    /// The length of the file after everything written so far.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Appends one logical record (which may be empty) and flushes it to the operating system.
    ///
    /// # Errors
    /// The file's write error. After an error the log's tail is unspecified: every later call
    /// of this writer returns the same error without touching the file.
    pub fn add_record(&mut self, record: &[u8]) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.write_record(record);
        self.remember(result)
    }

    fn remember(&mut self, result: Result<()>) -> Result<()> {
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn write_record(&mut self, record: &[u8]) -> Result<()> {
        let mut rest = record;
        let mut first = true;
        loop {
            let space = BLOCK_SIZE - self.block_offset;
            if space < HEADER_SIZE {
                const ZEROS: [u8; HEADER_SIZE] = [0; HEADER_SIZE];
                self.file.append(&ZEROS[..space])?;
                self.file_len += space as u64;
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let len = rest.len().min(avail);
            let last = len == rest.len();
            let kind = match (first, last) {
                (true, true) => RecordType::Full,
                (true, false) => RecordType::First,
                (false, true) => RecordType::Last,
                (false, false) => RecordType::Middle,
            };
            self.emit_physical(kind, &rest[..len])?;
            rest = &rest[len..];
            first = false;
            if last {
                break;
            }
        }
        self.file.flush()
    }

    /// Makes every record added so far durable.
    ///
    /// # Errors
    /// The file's sync error, or the error that failed an earlier call.
    pub fn sync(&mut self) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.file.sync();
        self.remember(result)
    }

    fn emit_physical(&mut self, kind: RecordType, payload: &[u8]) -> Result<()> {
        debug_assert!(payload.len() <= 0xffff);
        debug_assert!(self.block_offset + HEADER_SIZE + payload.len() <= BLOCK_SIZE);
        let crc = mask_crc(crc32c_extend(self.type_crc[kind as usize], payload));
        let mut header = [0u8; HEADER_SIZE];
        header[..4].copy_from_slice(&crc.to_le_bytes());
        header[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        header[6] = kind as u8;
        self.file.append(&header)?;
        self.file.append(payload)?;
        let written = HEADER_SIZE + payload.len();
        self.block_offset += written;
        self.file_len += written as u64;
        Ok(())
    }
}
