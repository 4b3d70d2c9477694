// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`LogReader`]: reads logical records back, reporting damage.

use std::path::{Path, PathBuf};

use super::damage::{Action, Damage, Rules};
use super::{RecordType, BLOCK_SIZE, HEADER_SIZE};
use crate::coding::{crc32c, crc32c_extend, decode_fixed32, locate_single_bit_error, unmask_crc};
use crate::env::SequentialFile;
use crate::error::{Error, RecordError, Result};

/// What the reader does when it finds damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// Return the first corruption as an error.
    Strict,
    /// Record each corruption in [`LogReader::corruptions`] and go on with the next good record.
    Tolerant,
    /// How a database reads its logs and MANIFEST when it opens: damage that runs to the end
    /// of the file is a torn tail, what a crash while appending leaves, and the log simply
    /// ends before it (see [`LogReader::torn_tail`]); damage followed by any readable record
    /// is corruption, returned as an error.
    Recovery,
}

/// One stretch of damaged bytes the reader dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCorruption {
    /// File offset of the first dropped byte.
    pub offset: u64,
    /// How many bytes were dropped.
    pub dropped_bytes: u64,
    /// What was wrong.
    pub reason: &'static str,
}

/// Judges the bytes a log holds after its last whole record (`tail`, which starts at file offset
/// `offset`, just past that record): `None` if they are what a crash while appending leaves,
/// the first damaged piece otherwise.
///
/// A crash leaves a prefix of what the writer appended, perhaps followed by zeros: whole
/// fragments of a record whose last fragment never reached the file, then at most one
/// fragment cut short (or a header shorter than 7 bytes), then nothing or zeros. Bytes a log
/// writer cannot have put there (an unknown record type, a checksum that does not match, a
/// length that runs past its block) are damage.
///
/// Reading in [`ReadMode::Recovery`] is more forgiving: it takes any damage that no readable
/// record follows for a tear, since a file system may show stale bytes after a crash. This
/// judgement is for a person looking at one file (`strata dump`), where bytes that are no
/// record must not pass for an empty log.
///
/// # Example
///
/// ```
/// use strata::log::tail_damage;
/// // A header cut short by the end of the file, or zeros: a crash.
/// assert_eq!(tail_damage(&[0x12, 0x34, 0x56], 0), None);
/// assert_eq!(tail_damage(&[0; 40], 0), None);
/// // Bytes no writer wrote: an unknown record type.
/// let damage = tail_damage(&[0xa5; 100], 0).unwrap();
/// assert_eq!((damage.offset, damage.dropped_bytes), (0, 100));
/// ```
pub fn tail_damage(tail: &[u8], offset: u64) -> Option<LogCorruption> {
    // Zeros after the prefix are space the file system never wrote; a prefix cut short at a
    // zero byte of its own is a prefix all the same.
    let written = tail
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    let tail = &tail[..written];
    let mut pos = 0;
    while pos < tail.len() {
        let rest = &tail[pos..];
        let at = offset + pos as u64;
        let in_block = BLOCK_SIZE - (at % BLOCK_SIZE as u64) as usize;
        if in_block < HEADER_SIZE {
            // A block's trailer: no header starts there.
            pos += in_block;
            continue;
        }
        if rest.len() < HEADER_SIZE {
            return None;
        }
        let damage = |reason| {
            Some(LogCorruption {
                offset: at,
                dropped_bytes: rest.len() as u64,
                reason,
            })
        };
        let len = usize::from(u16::from_le_bytes([rest[4], rest[5]]));
        let type_byte = rest[6];
        let known = matches!(
            RecordType::from_byte(type_byte),
            Some(RecordType::Full | RecordType::First | RecordType::Middle | RecordType::Last)
        );
        if !known {
            return damage("unknown record type");
        }
        if HEADER_SIZE + len > in_block {
            return damage("bad record length");
        }
        if HEADER_SIZE + len > rest.len() {
            return None;
        }
        let stored = unmask_crc(decode_fixed32(rest).expect("a header holds 7 bytes"));
        let actual = crc32c_extend(crc32c(&[type_byte]), &rest[HEADER_SIZE..HEADER_SIZE + len]);
        if stored != actual {
            return damage("checksum mismatch");
        }
        pos += HEADER_SIZE + len;
    }
    None
}

/// The outcome of reading one physical record.
enum Physical {
    /// A fragment: its type and the range of its payload in the block buffer.
    Fragment {
        kind: RecordType,
        start: usize,
        end: usize,
        offset: u64,
    },
    /// An unknown type byte, with the fragment's length and offset.
    Unknown { len: usize, offset: u64 },
    /// Damage was found and dropped (already reported), or padding was skipped.
    Skipped,
    /// The end of the log, including a record torn by a crash while it was written.
    Eof,
}

/// Reads the logical records of a log file in order.
///
/// A record torn at the very end of the file, as a crash during a write leaves it, is the clean
/// end of the log, not corruption. Everything else that is damaged (a bad checksum, a length
/// that runs past its block, an unknown type, fragments out of order) is corruption: in
/// [`ReadMode::Strict`] the first one is returned as an error; in [`ReadMode::Tolerant`] each is
/// recorded with the bytes it cost and reading goes on.
///
/// Memory: one 32 KiB block buffer, plus the largest fragmented record.
pub struct LogReader {
    file: Box<dyn SequentialFile>,
    path: PathBuf,
    mode: ReadMode,
    /// The current block. `buffer[pos..]` is not yet consumed.
    buffer: Vec<u8>,
    pos: usize,
    /// File offset just past the end of `buffer`.
    end_of_buffer_offset: u64,
    /// True once a read returned less than a full block.
    eof: bool,
    /// The fragments of the record being assembled.
    scratch: Vec<u8>,
    /// Where each fragment of the last record returned starts: its first byte's index in the
    /// record, and that byte's file offset (one entry for a record in one block).
    fragments: Vec<(usize, u64)>,
    /// File offset of the last record returned.
    last_record_offset: u64,
    /// File offset just past the last record returned.
    end_of_last_record: u64,
    corruptions: Vec<LogCorruption>,
    /// In recovery mode, the first damage met: a torn tail unless a readable record follows.
    pending_damage: Option<LogCorruption>,
    /// Some byte after the last record returned is not zero (a fragment of an unfinished
    /// record, damage, or a block's rest after a zero header that is not all zeros).
    tail_written: bool,
}

impl LogReader {
    /// A reader at the start of `file`; `path` names it in errors.
    pub fn new(file: Box<dyn SequentialFile>, path: &Path, mode: ReadMode) -> Self {
        LogReader {
            file,
            path: path.to_path_buf(),
            mode,
            buffer: Vec::with_capacity(BLOCK_SIZE),
            pos: 0,
            end_of_buffer_offset: 0,
            eof: false,
            scratch: Vec::new(),
            fragments: Vec::new(),
            last_record_offset: 0,
            end_of_last_record: 0,
            corruptions: Vec::new(),
            pending_damage: None,
            tail_written: false,
        }
    }

    /// After the end of the log was reached: true if bytes after the last record returned
    /// could not be read as records (a record cut off by the end of the file, damage up to
    /// the end, or zero-filled space). A crash while appending leaves such a tail; a log
    /// closed cleanly ends exactly after its last record.
    pub fn torn_tail(&self) -> bool {
        self.eof && self.end_of_last_record < self.end_of_buffer_offset
    }

    /// After the end of the log was reached: true if the bytes after the last record returned
    /// are all zeros, as space allocated ahead and never written leaves them (a log written
    /// through a mapping, after a crash). No write was cut short there, unless a crash lost
    /// whole pages, which the next log's first seqno shows. False when the log ends exactly
    /// after its last record.
    pub fn zero_tail(&self) -> bool {
        self.torn_tail() && !self.tail_written
    }

    /// The corruptions met so far (only in tolerant mode; strict mode returns the first, and
    /// recovery mode the first that a readable record follows).
    pub fn corruptions(&self) -> &[LogCorruption] {
        &self.corruptions
    }

    /// Total bytes dropped because of corruption so far.
    pub fn dropped_bytes(&self) -> u64 {
        self.corruptions.iter().map(|c| c.dropped_bytes).sum()
    }

    /// The file offset of the first physical record of the last record returned.
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }

    /// The corruption error of a last record returned that its decoder refused: it names this
    /// log and the file offset of the byte the decoder refused (a record split across blocks
    /// has headers between its fragments, so that is not the record's offset plus `e.offset`).
    ///
    /// # Example
    ///
    /// ```
    /// use std::path::Path;
    /// use std::sync::Arc;
    /// use strata::log::{LogReader, LogWriter, ReadMode, HEADER_SIZE};
    /// use strata::{Env, Error, MemEnv, WriteBatch};
    ///
    /// let env = MemEnv::new();
    /// let path = Path::new("/000003.log");
    /// let mut log = LogWriter::new(env.new_writable_file(path)?);
    /// log.add_record(b"not a batch")?;
    /// log.sync()?;
    /// let mut reader = LogReader::new(env.new_sequential_file(path)?, path, ReadMode::Strict);
    /// let record = reader.next_record()?.unwrap();
    /// let refused = WriteBatch::decode(record).unwrap_err();
    /// match reader.record_error(refused) {
    ///     Error::Corruption { file, offset, .. } => {
    ///         assert_eq!(file, path);
    ///         assert_eq!(offset, HEADER_SIZE as u64); // the record's first byte
    ///     }
    ///     other => panic!("{other}"),
    /// }
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn record_error(&self, e: RecordError) -> Error {
        Error::Corruption {
            file: self.path.clone(),
            offset: self.file_offset_of(e.offset),
            reason: e.reason,
        }
    }

    /// The file offset of byte `n` of the last record returned (the last record's offset
    /// before the first record). A byte past the record's end is counted on from its last
    /// fragment, saturating: any `n` gives an answer, never a panic.
    pub fn file_offset_of(&self, n: u64) -> u64 {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let fragment = self.fragments.partition_point(|&(start, _)| start <= n);
        match fragment.checked_sub(1).map(|i| self.fragments[i]) {
            Some((start, file_offset)) => file_offset.saturating_add((n - start) as u64),
            None => self.last_record_offset,
        }
    }

    /// The file offset just past the last record returned (0 before the first): where a writer
    /// continuing this log would append. A log whose length is more than this after the last
    /// record ends in a torn write or damage, and must not be appended to.
    pub fn end_of_last_record(&self) -> u64 {
        self.end_of_last_record
    }

    /// The next logical record, or `None` at the end of the log.
    ///
    /// # Errors
    /// An I/O error; in strict mode, the first corruption.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>> {
        self.scratch.clear();
        let mut in_fragmented = false;
        let mut record_offset = 0;
        loop {
            let physical = self.read_physical()?;
            if let Physical::Fragment { .. } | Physical::Unknown { .. } = physical {
                self.refuse_if_damaged()?;
            }
            match physical {
                Physical::Fragment {
                    kind,
                    start,
                    end,
                    offset,
                } => match kind {
                    RecordType::Full => {
                        if in_fragmented && !self.scratch.is_empty() {
                            let bytes = self.scratch.len() as u64;
                            self.report(Damage::PartialRecord, record_offset, bytes)?;
                        }
                        self.refuse_if_damaged()?;
                        self.last_record_offset = offset;
                        self.end_of_last_record = self.buffer_offset(self.pos);
                        self.tail_written = false;
                        self.fragments.clear();
                        self.fragments.push((0, self.buffer_offset(start)));
                        return Ok(Some(&self.buffer[start..end]));
                    }
                    RecordType::First => {
                        if in_fragmented && !self.scratch.is_empty() {
                            let bytes = self.scratch.len() as u64;
                            self.report(Damage::PartialRecord, record_offset, bytes)?;
                        }
                        self.scratch.clear();
                        self.fragments.clear();
                        self.fragments.push((0, self.buffer_offset(start)));
                        self.scratch.extend_from_slice(&self.buffer[start..end]);
                        in_fragmented = true;
                        record_offset = offset;
                    }
                    RecordType::Middle | RecordType::Last => {
                        if !in_fragmented {
                            let bytes = (end - start) as u64;
                            self.report(Damage::MissingStart, offset, bytes)?;
                            continue;
                        }
                        let at = (self.scratch.len(), self.buffer_offset(start));
                        self.fragments.push(at);
                        self.scratch.extend_from_slice(&self.buffer[start..end]);
                        if kind == RecordType::Last {
                            self.refuse_if_damaged()?;
                            self.last_record_offset = record_offset;
                            self.end_of_last_record = self.buffer_offset(self.pos);
                            self.tail_written = false;
                            return Ok(Some(&self.scratch));
                        }
                    }
                    RecordType::Zero => unreachable!("zero records are skipped"),
                },
                Physical::Unknown { len, offset } => {
                    let pending = if in_fragmented { self.scratch.len() } else { 0 };
                    self.report(Damage::UnknownType, offset, (len + pending) as u64)?;
                    in_fragmented = false;
                    self.scratch.clear();
                }
                Physical::Skipped => {
                    if in_fragmented {
                        let bytes = self.scratch.len() as u64;
                        self.report(Damage::BrokenRecord, record_offset, bytes)?;
                        in_fragmented = false;
                        self.scratch.clear();
                    }
                }
                Physical::Eof => {
                    // A fragmented record cut off by the end of the file: the writer died while
                    // writing it. That is not corruption.
                    return Ok(None);
                }
            }
        }
    }

    /// In recovery mode, damage followed by a readable record is corruption.
    fn refuse_if_damaged(&self) -> Result<()> {
        match &self.pending_damage {
            None => Ok(()),
            Some(damage) => Err(Error::corruption(
                &self.path,
                damage.offset,
                format!(
                    "{}, and readable records follow: the damage is inside the log, not a tail \
                     torn by a crash",
                    damage.reason
                ),
            )),
        }
    }

    /// The rules damage is judged by now.
    fn rules(&self) -> Rules {
        match self.mode {
            ReadMode::Strict => Rules::Strict,
            ReadMode::Tolerant => Rules::Tolerant,
            ReadMode::Recovery if self.pending_damage.is_some() => Rules::Searching,
            ReadMode::Recovery => Rules::Recovery,
        }
    }

    /// Applies the rule for `damage` found at `offset` that costs `dropped_bytes`: fails,
    /// records it or keeps it as pending, as [`Damage::action`] says. Moving past it is the
    /// caller's.
    fn report(&mut self, damage: Damage, offset: u64, dropped_bytes: u64) -> Result<()> {
        self.tail_written = true;
        let found = LogCorruption {
            offset,
            dropped_bytes,
            reason: damage.reason(),
        };
        match damage.action(self.rules()) {
            Action::Fail => {
                return Err(Error::corruption(
                    &self.path,
                    offset,
                    format!("{} ({dropped_bytes} bytes dropped)", found.reason),
                ))
            }
            Action::Skip => self.corruptions.push(found),
            Action::Resync => {
                self.pending_damage.get_or_insert(found);
            }
            Action::Step | Action::End => {}
        }
        Ok(())
    }

    fn buffer_offset(&self, pos: usize) -> u64 {
        self.end_of_buffer_offset - (self.buffer.len() - pos) as u64
    }

    /// Reads the next block into the buffer. Sets `eof` on a short read.
    fn fill_block(&mut self) -> Result<()> {
        self.buffer.resize(BLOCK_SIZE, 0);
        let mut filled = 0;
        while filled < BLOCK_SIZE {
            let n = self.file.read(&mut self.buffer[filled..])?;
            if n == 0 {
                self.eof = true;
                break;
            }
            filled += n;
        }
        self.buffer.truncate(filled);
        self.pos = 0;
        self.end_of_buffer_offset += filled as u64;
        Ok(())
    }

    /// Notes whether the rest of the current block, about to be passed over, holds a byte
    /// that is not zero.
    fn note_tail_bytes(&mut self) {
        if self.buffer[self.pos..].iter().any(|&b| b != 0) {
            self.tail_written = true;
        }
    }

    /// Drops the rest of the current block.
    fn drop_block_rest(&mut self) -> u64 {
        let dropped = (self.buffer.len() - self.pos) as u64;
        self.pos = self.buffer.len();
        dropped
    }

    fn read_physical(&mut self) -> Result<Physical> {
        loop {
            if self.buffer.len() - self.pos < HEADER_SIZE {
                self.note_tail_bytes();
                if self.eof {
                    // Fewer than 7 bytes at the end of the file: a header torn by a crash, or
                    // nothing at all.
                    self.pos = self.buffer.len();
                    return Ok(Physical::Eof);
                }
                // The rest of the block is the trailer.
                self.fill_block()?;
                continue;
            }
            let header = &self.buffer[self.pos..self.pos + HEADER_SIZE];
            let stored_crc = decode_fixed32(header).expect("header holds 7 bytes");
            let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
            let type_byte = header[6];
            let offset = self.buffer_offset(self.pos);
            if HEADER_SIZE + len > self.buffer.len() - self.pos {
                let damage = if self.eof {
                    Damage::CutOff
                } else {
                    Damage::BadLength
                };
                match self.header_damage(damage, offset)? {
                    Some(physical) => return Ok(physical),
                    None => continue,
                }
            }
            // When the rules pass over an unknown type, it is judged before the checksum: this
            // keeps a search over a long damaged stretch to a few checksums per kilobyte.
            let known_type = matches!(
                RecordType::from_byte(type_byte),
                Some(RecordType::Full | RecordType::First | RecordType::Middle | RecordType::Last)
            );
            if !known_type && Damage::UnknownType.action(self.rules()) == Action::Step {
                self.tail_written = true;
                self.pos += 1;
                continue;
            }
            if type_byte == RecordType::Zero as u8 && len == 0 {
                // Preallocated space: skip the rest of the block silently.
                self.note_tail_bytes();
                self.drop_block_rest();
                return Ok(Physical::Skipped);
            }
            let start = self.pos + HEADER_SIZE;
            let end = start + len;
            let actual = crc32c_extend(crc32c(&[type_byte]), &self.buffer[start..end]);
            if unmask_crc(stored_crc) != actual {
                match self.header_damage(Damage::BadChecksum, offset)? {
                    Some(physical) => return Ok(physical),
                    None => continue,
                }
            }
            self.pos = end;
            self.tail_written = true;
            return Ok(match RecordType::from_byte(type_byte) {
                Some(RecordType::Zero) | None => Physical::Unknown {
                    len: HEADER_SIZE + len,
                    offset,
                },
                Some(kind) => Physical::Fragment {
                    kind,
                    start,
                    end,
                    offset,
                },
            });
        }
    }

    /// Applies the rule for `damage` found in the header at `self.pos` (file offset `offset`),
    /// and moves past it: `Some` is what `read_physical` returns, `None` means go on at the
    /// new position.
    ///
    /// A damaged header costs the rest of the buffer: its length may be what is damaged, so
    /// nothing after it in this block can be trusted, except by the byte-by-byte search.
    fn header_damage(&mut self, damage: Damage, offset: u64) -> Result<Option<Physical>> {
        debug_assert!(damage.in_header());
        self.tail_written = true;
        let available = (self.buffer.len() - self.pos) as u64;
        match damage.action(self.rules()) {
            Action::Step => {
                self.pos += 1;
                Ok(None)
            }
            Action::Resync => {
                self.refuse_single_bit_damage(offset)?;
                self.report(damage, offset, available)?;
                self.pos += 1;
                Ok(None)
            }
            Action::End => {
                self.drop_block_rest();
                Ok(Some(Physical::Eof))
            }
            Action::Fail | Action::Skip => {
                self.drop_block_rest();
                self.report(damage, offset, available)?;
                Ok(Some(Physical::Skipped))
            }
        }
    }

    /// In recovery mode, the physical record at `self.pos` failed its check. A crash can cut a
    /// write short or leave stale bytes after it, but it does not flip one bit of a record
    /// that otherwise ends exactly at the end of the file: if one flipped bit (in the type,
    /// payload, length or checksum) explains the failure of the last record, the damage is
    /// corruption, never a torn tail.
    fn refuse_single_bit_damage(&self, offset: u64) -> Result<()> {
        if !self.eof {
            return Ok(());
        }
        let header = &self.buffer[self.pos..self.pos + HEADER_SIZE];
        let masked = decode_fixed32(header).expect("header holds 7 bytes");
        let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
        // The record must end exactly at the end of the file, with its stated length or one
        // that differs from it in one bit.
        let payload = &self.buffer[self.pos + HEADER_SIZE..];
        let mut message = Vec::with_capacity(payload.len() + 1);
        message.push(header[6]);
        message.extend_from_slice(payload);
        let found = if len == payload.len() {
            if locate_single_bit_error(&message, unmask_crc(masked)).is_some() {
                Some("one flipped bit in the record")
            } else {
                let actual = crc32c(&message);
                (0..32)
                    .any(|b| unmask_crc(masked ^ (1 << b)) == actual)
                    .then_some("one flipped bit in the record's checksum")
            }
        } else {
            ((len ^ payload.len()).is_power_of_two() && crc32c(&message) == unmask_crc(masked))
                .then_some("one flipped bit in the record's length")
        };
        match found {
            Some(what) => Err(Error::corruption(
                &self.path,
                offset,
                format!("{what}: damage, not a write torn by a crash"),
            )),
            None => Ok(()),
        }
    }
}
