// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`VersionEdit`]: one MANIFEST record, a change to the set of live tables.
//!
//! ```text
//! record: (varint32 tag ‖ field)*
//! tag 1 comparator      length-prefixed name
//! tag 2 log number      varint64
//! tag 9 prev log number varint64
//! tag 3 next file       varint64
//! tag 4 last sequence   varint64
//! tag 5 compact pointer varint32 level ‖ length-prefixed internal key
//! tag 6 deleted file    varint32 level ‖ varint64 number
//! tag 7 new file        varint32 level ‖ varint64 number ‖ varint64 size
//!                       ‖ length-prefixed smallest ‖ length-prefixed largest
//! tag 20 new blob file  varint64 number ‖ varint64 size ‖ varint64 value bytes   (strata)
//! tag 21 deleted blob   varint64 number                                          (strata)
//! tag 22 blob garbage   varint64 number ‖ varint64 value bytes no longer reached (strata)
//! tag 23 blob tombstone varint64 number ‖ varint64 log                           (strata)
//! tag 24 range deletion varint64 seqno ‖ length-prefixed start ‖ length-prefixed end
//!                                                                                 (strata)
//! tag 25 range deletion dropped  varint64 seqno                                  (strata)
//! tag 26 file's range-deletion horizon  varint64 file number ‖ varint64 seqno   (strata)
//! ```
//!
//! Fields are written in LevelDB's order (1, 2, 9, 3, 4, 5*, 6*, 7*), so records are
//! byte-identical to LevelDB's; the blob tags (only in databases that use key-value separation,
//! see `docs/blobs.md`) come last. Decoding accepts any order; tag 8 (retired) and unknown tags
//! are corruption.

use std::collections::BTreeSet;

use crate::coding::{put_length_prefixed, put_varint32, put_varint64, Decoder};
use crate::error::RecordError;
use crate::key::{ParsedInternalKey, SeqNo};
pub use crate::range_del::RangeTombstone;

/// The number of levels, L0 to L6.
pub const NUM_LEVELS: usize = 7;

const TAG_COMPARATOR: u32 = 1;
const TAG_LOG_NUMBER: u32 = 2;
const TAG_NEXT_FILE_NUMBER: u32 = 3;
const TAG_LAST_SEQUENCE: u32 = 4;
const TAG_COMPACT_POINTER: u32 = 5;
const TAG_DELETED_FILE: u32 = 6;
const TAG_NEW_FILE: u32 = 7;
const TAG_PREV_LOG_NUMBER: u32 = 9;
const TAG_NEW_BLOB_FILE: u32 = 20;
const TAG_DELETED_BLOB_FILE: u32 = 21;
const TAG_BLOB_GARBAGE: u32 = 22;
const TAG_BLOB_TOMBSTONE: u32 = 23;
const TAG_RANGE_TOMBSTONE: u32 = 24;
const TAG_DROPPED_RANGE_TOMBSTONE: u32 = 25;
const TAG_RANGE_DELETION_HORIZON: u32 = 26;

/// What a database that uses blob files appends to its comparator's name in the MANIFEST record
/// that marks it, so that LevelDB refuses to open it ("does not match existing comparator")
/// rather than return blob pointers as values.
pub const BLOB_COMPARATOR_SUFFIX: &str = " (strata key-value separation)";

/// What a database that has taken a range deletion appends to its comparator's name in the
/// MANIFEST record that marks it (after [`BLOB_COMPARATOR_SUFFIX`] if both apply), so that
/// LevelDB refuses to open it rather than return the keys it deleted.
pub const RANGE_DELETION_COMPARATOR_SUFFIX: &str = " (strata range deletions)";

/// What the MANIFEST records about one blob file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileMeta {
    /// The file number (`NNNNNN.blob`).
    pub number: u64,
    /// The file's size in bytes when it was added.
    pub file_size: u64,
    /// The sum of its records' stored value lengths.
    pub value_bytes: u64,
}

/// What the MANIFEST records about one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMetaData {
    /// The file number (`NNNNNN.ldb`).
    pub number: u64,
    /// The exact size of the file in bytes.
    pub file_size: u64,
    /// The first internal key in the table.
    pub smallest: Vec<u8>,
    /// The last internal key in the table.
    pub largest: Vec<u8>,
}

/// One MANIFEST record.
///
/// # Example
///
/// ```
/// use strata::version::VersionEdit;
/// let mut edit = VersionEdit::default();
/// edit.log_number = Some(3);
/// edit.next_file_number = Some(4);
/// edit.last_sequence = Some(0);
/// let mut bytes = Vec::new();
/// edit.encode_into(&mut bytes);
/// assert_eq!(VersionEdit::decode(&bytes).unwrap(), edit);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// The user comparator's name.
    pub comparator: Option<String>,
    /// Logs numbered below this are obsolete.
    pub log_number: Option<u64>,
    /// Legacy: a log with exactly this number is still live. Written as 0.
    pub prev_log_number: Option<u64>,
    /// The next file number to hand out.
    pub next_file_number: Option<u64>,
    /// The last sequence number covered by the tables.
    pub last_sequence: Option<SeqNo>,
    /// Where the last compaction at each level ended, in the order recorded.
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// Tables removed: (level, file number).
    pub deleted_files: BTreeSet<(usize, u64)>,
    /// Tables added, in the order recorded.
    pub new_files: Vec<(usize, FileMetaData)>,
    /// Blob files added.
    pub new_blob_files: Vec<BlobFileMeta>,
    /// Blob files removed.
    pub deleted_blob_files: BTreeSet<u64>,
    /// Value bytes of blob files that no entry reaches any more: (file number, bytes).
    pub blob_garbage: Vec<(u64, u64)>,
    /// Blob files removed while logs still to be replayed may point into them: (file number,
    /// the log being written when it was removed). Such pointers are stale (newer entries
    /// supersede them), and recovery must not take them for lost values. Dropped once the log
    /// is obsolete.
    pub blob_tombstones: Vec<(u64, u64)>,
    /// Range deletions that enter the version (from a flushed memtable), in seqno order.
    pub new_range_tombstones: Vec<RangeTombstone>,
    /// Range deletions that leave it, by seqno: compaction removed every entry they delete.
    pub dropped_range_tombstones: BTreeSet<SeqNo>,
    /// For tables this edit adds: (file number, horizon), every range deletion of the version
    /// with a seqno at or below the horizon having been applied when the table was written
    /// (it holds no entry they delete). A table not listed has horizon 0.
    pub range_deletion_horizons: Vec<(u64, SeqNo)>,
}

impl VersionEdit {
    /// Appends the record's encoding.
    pub fn encode_into(&self, dst: &mut Vec<u8>) {
        if let Some(name) = &self.comparator {
            put_varint32(dst, TAG_COMPARATOR);
            put_length_prefixed(dst, name.as_bytes());
        }
        let numbers = [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_PREV_LOG_NUMBER, self.prev_log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
        ];
        for (tag, value) in numbers {
            if let Some(v) = value {
                put_varint32(dst, tag);
                put_varint64(dst, v);
            }
        }
        for (level, key) in &self.compact_pointers {
            put_varint32(dst, TAG_COMPACT_POINTER);
            put_varint32(dst, *level as u32);
            put_length_prefixed(dst, key);
        }
        for &(level, number) in &self.deleted_files {
            put_varint32(dst, TAG_DELETED_FILE);
            put_varint32(dst, level as u32);
            put_varint64(dst, number);
        }
        for (level, f) in &self.new_files {
            put_varint32(dst, TAG_NEW_FILE);
            put_varint32(dst, *level as u32);
            put_varint64(dst, f.number);
            put_varint64(dst, f.file_size);
            put_length_prefixed(dst, &f.smallest);
            put_length_prefixed(dst, &f.largest);
        }
        for b in &self.new_blob_files {
            put_varint32(dst, TAG_NEW_BLOB_FILE);
            put_varint64(dst, b.number);
            put_varint64(dst, b.file_size);
            put_varint64(dst, b.value_bytes);
        }
        for &number in &self.deleted_blob_files {
            put_varint32(dst, TAG_DELETED_BLOB_FILE);
            put_varint64(dst, number);
        }
        for &(number, bytes) in &self.blob_garbage {
            put_varint32(dst, TAG_BLOB_GARBAGE);
            put_varint64(dst, number);
            put_varint64(dst, bytes);
        }
        for &(number, log) in &self.blob_tombstones {
            put_varint32(dst, TAG_BLOB_TOMBSTONE);
            put_varint64(dst, number);
            put_varint64(dst, log);
        }
        for t in &self.new_range_tombstones {
            put_varint32(dst, TAG_RANGE_TOMBSTONE);
            t.encode_into(dst);
        }
        for &seqno in &self.dropped_range_tombstones {
            put_varint32(dst, TAG_DROPPED_RANGE_TOMBSTONE);
            put_varint64(dst, seqno);
        }
        for &(number, horizon) in &self.range_deletion_horizons {
            put_varint32(dst, TAG_RANGE_DELETION_HORIZON);
            put_varint64(dst, number);
            put_varint64(dst, horizon);
        }
    }

    /// True if the edit mentions range deletions (a horizon of 0 says nothing).
    pub fn has_range_deletion_changes(&self) -> bool {
        !self.new_range_tombstones.is_empty()
            || !self.dropped_range_tombstones.is_empty()
            || self.range_deletion_horizons.iter().any(|&(_, h)| h > 0)
    }

    /// True if the edit mentions blob files.
    pub fn has_blob_changes(&self) -> bool {
        !self.new_blob_files.is_empty()
            || !self.deleted_blob_files.is_empty()
            || !self.blob_garbage.is_empty()
            || !self.blob_tombstones.is_empty()
    }

    /// Parses a record.
    ///
    /// # Errors
    /// A [`RecordError`] at the offset within the record of the field that is malformed: an
    /// unknown tag, a level of 7 or more, an invalid internal key, or a truncated field. The
    /// caller, who knows where the record was read, turns it into an
    /// [`Error`](crate::Error) with
    /// [`LogReader::record_error`](crate::log::LogReader::record_error).
    pub fn decode(src: &[u8]) -> Result<VersionEdit, RecordError> {
        let mut edit = VersionEdit::default();
        let mut d = Decoder::new(src);
        while !d.is_empty() {
            let at = d.position();
            let fail = |what: &'static str| RecordError::new(at as u64, what);
            let tag = d
                .varint32()
                .ok_or_else(|| fail("bad tag in version edit"))?;
            match tag {
                TAG_COMPARATOR => {
                    let name = d
                        .length_prefixed()
                        .and_then(|n| std::str::from_utf8(n).ok())
                        .ok_or_else(|| fail("bad comparator name in version edit"))?;
                    edit.comparator = Some(name.to_owned());
                }
                TAG_LOG_NUMBER => {
                    edit.log_number = Some(d.varint64().ok_or_else(|| fail("bad log number"))?)
                }
                TAG_PREV_LOG_NUMBER => {
                    edit.prev_log_number =
                        Some(d.varint64().ok_or_else(|| fail("bad prev log number"))?)
                }
                TAG_NEXT_FILE_NUMBER => {
                    edit.next_file_number =
                        Some(d.varint64().ok_or_else(|| fail("bad next file number"))?)
                }
                TAG_LAST_SEQUENCE => {
                    edit.last_sequence =
                        Some(d.varint64().ok_or_else(|| fail("bad last sequence"))?)
                }
                TAG_COMPACT_POINTER => {
                    let level = decode_level(&mut d).ok_or_else(|| fail("bad compact pointer"))?;
                    let key =
                        decode_internal_key(&mut d).ok_or_else(|| fail("bad compact pointer"))?;
                    edit.compact_pointers.push((level, key));
                }
                TAG_DELETED_FILE => {
                    let level = decode_level(&mut d).ok_or_else(|| fail("bad deleted file"))?;
                    let number = d.varint64().ok_or_else(|| fail("bad deleted file"))?;
                    edit.deleted_files.insert((level, number));
                }
                TAG_NEW_FILE => {
                    let file = decode_level(&mut d).and_then(|level| {
                        Some((
                            level,
                            FileMetaData {
                                number: d.varint64()?,
                                file_size: d.varint64()?,
                                smallest: decode_internal_key(&mut d)?,
                                largest: decode_internal_key(&mut d)?,
                            },
                        ))
                    });
                    edit.new_files
                        .push(file.ok_or_else(|| fail("bad new file entry"))?);
                }
                TAG_NEW_BLOB_FILE => {
                    let meta = (|| {
                        Some(BlobFileMeta {
                            number: d.varint64()?,
                            file_size: d.varint64()?,
                            value_bytes: d.varint64()?,
                        })
                    })();
                    edit.new_blob_files
                        .push(meta.ok_or_else(|| fail("bad new blob file entry"))?);
                }
                TAG_DELETED_BLOB_FILE => {
                    let number = d.varint64().ok_or_else(|| fail("bad deleted blob file"))?;
                    edit.deleted_blob_files.insert(number);
                }
                TAG_BLOB_GARBAGE => {
                    let entry = (|| Some((d.varint64()?, d.varint64()?)))();
                    edit.blob_garbage
                        .push(entry.ok_or_else(|| fail("bad blob garbage entry"))?);
                }
                TAG_BLOB_TOMBSTONE => {
                    let entry = (|| Some((d.varint64()?, d.varint64()?)))();
                    edit.blob_tombstones
                        .push(entry.ok_or_else(|| fail("bad blob tombstone entry"))?);
                }
                TAG_RANGE_TOMBSTONE => {
                    let t = RangeTombstone::decode_from(&mut d)
                        .ok_or_else(|| fail("bad range deletion entry"))?;
                    edit.new_range_tombstones.push(t);
                }
                TAG_DROPPED_RANGE_TOMBSTONE => {
                    let seqno = d
                        .varint64()
                        .ok_or_else(|| fail("bad dropped range deletion"))?;
                    edit.dropped_range_tombstones.insert(seqno);
                }
                TAG_RANGE_DELETION_HORIZON => {
                    let entry = (|| Some((d.varint64()?, d.varint64()?)))();
                    edit.range_deletion_horizons
                        .push(entry.ok_or_else(|| fail("bad range deletion horizon"))?);
                }
                _ => return Err(fail("unknown tag in version edit")),
            }
        }
        Ok(edit)
    }
}

fn decode_level(d: &mut Decoder<'_>) -> Option<usize> {
    let level = d.varint32()? as usize;
    (level < NUM_LEVELS).then_some(level)
}

fn decode_internal_key(d: &mut Decoder<'_>) -> Option<Vec<u8>> {
    let key = d.length_prefixed()?;
    ParsedInternalKey::parse(key).map(|_| key.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{append_internal_key, ValueKind};

    fn ikey(user: &[u8], seqno: u64) -> Vec<u8> {
        let mut k = Vec::new();
        append_internal_key(&mut k, user, seqno, ValueKind::Value);
        k
    }

    fn full_edit() -> VersionEdit {
        let mut e = VersionEdit {
            comparator: Some("leveldb.BytewiseComparator".into()),
            log_number: Some(8),
            prev_log_number: Some(0),
            next_file_number: Some(10),
            last_sequence: Some(33603),
            ..Default::default()
        };
        e.compact_pointers.push((1, ikey(b"m", 5)));
        e.deleted_files.insert((0, 4));
        e.deleted_files.insert((2, 3));
        e.new_files.push((
            6,
            FileMetaData {
                number: 9,
                file_size: 226_739,
                smallest: ikey(b"a", 1),
                largest: ikey(&[0xff; 300], 2),
            },
        ));
        e
    }

    #[test]
    fn round_trips() {
        let e = full_edit();
        let mut bytes = Vec::new();
        e.encode_into(&mut bytes);
        assert_eq!(VersionEdit::decode(&bytes).unwrap(), e);
    }

    #[test]
    fn blob_fields_round_trip_and_come_last() {
        let mut e = full_edit();
        let mut leveldb_part = Vec::new();
        e.encode_into(&mut leveldb_part);
        e.new_blob_files.push(BlobFileMeta {
            number: 12,
            file_size: 67_108_999,
            value_bytes: 67_000_000,
        });
        e.deleted_blob_files.insert(5);
        e.blob_garbage.push((12, 300_000));
        e.blob_tombstones.push((5, 9));
        assert!(e.has_blob_changes());
        let mut bytes = Vec::new();
        e.encode_into(&mut bytes);
        assert_eq!(VersionEdit::decode(&bytes).unwrap(), e);
        assert_eq!(bytes[..leveldb_part.len()], leveldb_part[..]);
        // Each blob field cut short is corruption.
        for cut in leveldb_part.len() + 1..bytes.len() {
            if let Ok(partial) = VersionEdit::decode(&bytes[..cut]) {
                assert_ne!(partial, e);
            }
        }
        assert!(VersionEdit::decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn fresh_database_manifest_records_match_leveldb() {
        let first = VersionEdit {
            comparator: Some("leveldb.BytewiseComparator".into()),
            ..Default::default()
        };
        let mut bytes = Vec::new();
        first.encode_into(&mut bytes);
        assert_eq!(bytes[..2], [0x01, 0x1a]);
        let second = VersionEdit {
            log_number: Some(3),
            prev_log_number: Some(0),
            next_file_number: Some(4),
            last_sequence: Some(0),
            ..Default::default()
        };
        let mut bytes = Vec::new();
        second.encode_into(&mut bytes);
        assert_eq!(bytes, [0x02, 0x03, 0x09, 0x00, 0x03, 0x04, 0x04, 0x00]);
    }

    #[test]
    fn malformed_records_are_corruption() {
        // The retired tag 8, and an unknown tag.
        for tag in [8u8, 10, 0x7f] {
            let err = VersionEdit::decode(&[tag, 0]).unwrap_err();
            assert!(err.to_string().contains("unknown tag"), "{err}");
        }
        // Level 7.
        let err = VersionEdit::decode(&[6, 7, 1]).unwrap_err();
        assert!(err.to_string().contains("bad deleted file"), "{err}");
        // An internal key shorter than 8 bytes.
        let err = VersionEdit::decode(&[5, 1, 3, b'a', b'b', b'c']).unwrap_err();
        assert!(err.to_string().contains("compact pointer"), "{err}");
        // The range-deletion tags cut short.
        let mut range = Vec::new();
        VersionEdit {
            new_range_tombstones: vec![RangeTombstone {
                start: b"a".to_vec(),
                end: b"b".to_vec(),
                seqno: 9,
            }],
            dropped_range_tombstones: [4].into(),
            range_deletion_horizons: vec![(7, 9)],
            ..Default::default()
        }
        .encode_into(&mut range);
        assert!(VersionEdit::decode(&range).unwrap().has_range_deletion_changes());
        let err = VersionEdit::decode(&[24, 9, 1, b'a']).unwrap_err();
        assert!(err.to_string().contains("bad range deletion entry"), "{err}");
        let err = VersionEdit::decode(&[25]).unwrap_err();
        assert!(err.to_string().contains("bad dropped range deletion"), "{err}");
        let err = VersionEdit::decode(&[26, 7]).unwrap_err();
        assert!(err.to_string().contains("bad range deletion horizon"), "{err}");
        for len in 0..range.len() {
            let _ = VersionEdit::decode(&range[..len]);
        }
        // Truncations and flips of a full record never panic.
        let mut bytes = Vec::new();
        full_edit().encode_into(&mut bytes);
        for len in 0..bytes.len() {
            let _ = VersionEdit::decode(&bytes[..len]);
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x80;
            let _ = VersionEdit::decode(&bad);
        }
    }
}
