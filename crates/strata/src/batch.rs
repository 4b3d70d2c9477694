// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`WriteBatch`]: a group of puts and deletes applied atomically, and the record format it has
//! in the write-ahead log.
//!
//! ```text
//! batch:  fixed64 seqno ‖ fixed32 count ‖ op*
//! op:     0x01 ‖ length-prefixed key ‖ length-prefixed value     (put)
//!         0x00 ‖ length-prefixed key                             (delete)
//!         0x02 ‖ length-prefixed key ‖ length-prefixed pointer   (put of a value kept in a
//!                                                                 blob file; strata only)
//!         0x03 ‖ length-prefixed start ‖ length-prefixed end     (delete of [start, end);
//!                                                                 strata only)
//! ```
//!
//! Operation `i` gets sequence number `seqno + i`.

use crate::coding::{decode_fixed32, decode_fixed64, put_length_prefixed, Decoder};
use crate::error::RecordError;
use crate::key::{SeqNo, ValueKind, MAX_SEQNO};

/// The size of a batch's header: seqno and count.
pub const BATCH_HEADER_LEN: usize = 12;

/// An ordered group of updates, applied all at once or not at all.
///
/// # Example
///
/// ```
/// use strata::WriteBatch;
/// let mut batch = WriteBatch::new();
/// batch.put(b"apple", b"red");
/// batch.delete(b"banana");
/// assert_eq!(batch.count(), 2);
/// let ops: Vec<_> = batch.iter().collect();
/// assert_eq!(ops[0].key, b"apple");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// The encoded batch. Invariant: at least `BATCH_HEADER_LEN` bytes, every operation that
    /// follows decodes (blob pointers included), and the count in the header is their number.
    rep: Vec<u8>,
    /// Some operation is a blob pointer: set where one can come in (`put_blob_pointer`,
    /// `decode`, `append`), so the write path need not decode the batch to ask.
    blob_pointers: bool,
    /// Some operation is a range deletion (`delete_range`, `decode`, `append`).
    range_deletions: bool,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.count())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

/// One operation of a batch, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOp<'a> {
    /// Put, delete, or range deletion.
    pub kind: ValueKind,
    /// The user key; a range deletion's start.
    pub key: &'a [u8],
    /// The value; empty for a delete; a range deletion's end.
    pub value: &'a [u8],
}

impl BatchOp<'_> {
    /// The bytes this operation takes in a batch's encoding (what `WriteBatch::put` and the
    /// like append).
    pub(crate) fn encoded_len(&self) -> usize {
        let prefixed = |b: &[u8]| crate::coding::varint_length(b.len() as u64) + b.len();
        match self.kind {
            ValueKind::Deletion => 1 + prefixed(self.key),
            _ => 1 + prefixed(self.key) + prefixed(self.value),
        }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; BATCH_HEADER_LEN],
            blob_pointers: false,
            range_deletions: false,
        }
    }

    /// An empty batch with room for `bytes` bytes of operations, so that filling it does not
    /// reallocate.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(BATCH_HEADER_LEN + bytes);
        rep.resize(BATCH_HEADER_LEN, 0);
        WriteBatch {
            rep,
            blob_pointers: false,
            range_deletions: false,
        }
    }

    /// Adds `key → value`. Keys and values are any bytes (`&[u8]`, `&str`, `Vec<u8>`...).
    ///
    /// # Example
    ///
    /// ```
    /// let mut batch = strata::WriteBatch::new();
    /// batch.put("k", "v");
    /// batch.put(b"n", 1u64.to_be_bytes());
    /// assert_eq!(batch.count(), 2);
    /// ```
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.rep
            .reserve(1 + 2 * crate::coding::MAX_VARINT32_LEN + key.len() + value.len());
        self.set_count(self.count() + 1);
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
    }

    /// Adds `key → value kept in a blob file at pointer`. Only the write path makes these, from
    /// large values (see `docs/blobs.md`).
    pub(crate) fn put_blob_pointer(&mut self, key: &[u8], pointer: &crate::blob::BlobPointer) {
        let mut encoded = [0u8; crate::blob::BlobPointer::MAX_ENCODED_LEN];
        let len = pointer.encode_into(&mut encoded);
        self.set_count(self.count() + 1);
        self.blob_pointers = true;
        self.rep.push(ValueKind::BlobPointer as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, &encoded[..len]);
    }

    /// True if some operation puts a value kept in a blob file.
    pub(crate) fn has_blob_pointers(&self) -> bool {
        self.blob_pointers
    }

    /// Adds a deletion of `key`.
    ///
    /// # Example
    ///
    /// ```
    /// let mut batch = strata::WriteBatch::new();
    /// batch.delete("k");
    /// assert_eq!(batch.count(), 1);
    /// ```
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        self.set_count(self.count() + 1);
        self.rep.push(ValueKind::Deletion as u8);
        put_length_prefixed(&mut self.rep, key);
    }

    /// Adds a deletion of every key in `[start, end)` (in the database's key order): one
    /// operation, however many keys the range holds. A key the range deletes and that a later
    /// operation of the same batch puts is there after the batch.
    ///
    /// A database that has applied a range deletion can no longer be opened by LevelDB (see
    /// [`Db::delete_range`](crate::Db::delete_range)).
    ///
    /// # Example
    ///
    /// ```
    /// let mut batch = strata::WriteBatch::new();
    /// batch.delete_range("user:42:", "user:42;");
    /// batch.put("user:42:name", "new");
    /// assert_eq!(batch.count(), 2);
    /// ```
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        let (start, end) = (start.as_ref(), end.as_ref());
        self.rep
            .reserve(1 + 2 * crate::coding::MAX_VARINT32_LEN + start.len() + end.len());
        self.set_count(self.count() + 1);
        self.range_deletions = true;
        self.rep.push(ValueKind::RangeDeletion as u8);
        put_length_prefixed(&mut self.rep, start);
        put_length_prefixed(&mut self.rep, end);
    }

    /// True if some operation is a range deletion.
    pub(crate) fn has_range_deletions(&self) -> bool {
        self.range_deletions
    }

    /// The bytes the batch's buffer holds without growing.
    pub(crate) fn capacity(&self) -> usize {
        self.rep.capacity()
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
        self.blob_pointers = false;
        self.range_deletions = false;
    }

    /// The number of operations.
    pub fn count(&self) -> u32 {
        decode_fixed32(&self.rep[8..]).expect("invariant: header present")
    }

    fn set_count(&mut self, count: u32) {
        self.rep[8..12].copy_from_slice(&count.to_le_bytes());
    }

    /// The sequence number of the first operation.
    pub fn seqno(&self) -> SeqNo {
        decode_fixed64(&self.rep).expect("invariant: header present")
    }

    /// Sets the sequence number of the first operation.
    pub fn set_seqno(&mut self, seqno: SeqNo) {
        self.rep[..8].copy_from_slice(&seqno.to_le_bytes());
    }

    /// The encoded size in bytes.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// The encoded batch, as it is written to the log.
    pub fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Parses a batch read from a log. Every operation is checked, and so are its sequence
    /// numbers: the last must not exceed 2^56 - 1 (the largest seqno an internal key holds).
    ///
    /// # Errors
    /// A [`RecordError`] at the offset (within the record) of the first malformed byte; the
    /// caller, who knows where the record was read, turns it into an [`Error`](crate::Error)
    /// with the log reader's `record_error`.
    pub fn decode(record: &[u8]) -> Result<WriteBatch, RecordError> {
        if record.len() < BATCH_HEADER_LEN {
            return Err(RecordError::new(
                0,
                "log record too small for a write batch",
            ));
        }
        let mut decoder = Decoder::new(&record[BATCH_HEADER_LEN..]);
        let mut found = 0u32;
        let (mut blob_pointers, mut range_deletions) = (false, false);
        while !decoder.is_empty() {
            let at = (BATCH_HEADER_LEN + decoder.position()) as u64;
            let op = next_op(&mut decoder).map_err(|reason| RecordError::new(at, reason))?;
            if op.kind == ValueKind::BlobPointer {
                if crate::blob::BlobPointer::decode(op.value).is_none() {
                    return Err(RecordError::new(at, "bad blob pointer in write batch"));
                }
                blob_pointers = true;
            }
            range_deletions |= op.kind == ValueKind::RangeDeletion;
            found += 1;
        }
        let batch = WriteBatch {
            rep: record.to_vec(),
            blob_pointers,
            range_deletions,
        };
        if found != batch.count() {
            return Err(RecordError::new(
                8,
                format!(
                    "write batch holds {found} operations, its header says {}",
                    batch.count()
                ),
            ));
        }
        let end = batch.seqno().checked_add(u64::from(batch.count()));
        if end.is_none_or(|end| end > MAX_SEQNO + 1) {
            return Err(RecordError::new(
                0,
                format!(
                    "write batch's sequence numbers from {} run past the largest, 2^56 - 1",
                    batch.seqno()
                ),
            ));
        }
        Ok(batch)
    }

    /// Appends every operation of `other` to this batch.
    pub fn append(&mut self, other: &WriteBatch) {
        self.set_count(self.count() + other.count());
        self.rep.extend_from_slice(&other.rep[BATCH_HEADER_LEN..]);
        self.blob_pointers |= other.blob_pointers;
        self.range_deletions |= other.range_deletions;
    }

    /// The operations in order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            decoder: Decoder::new(&self.rep[BATCH_HEADER_LEN..]),
        }
    }
}

/// Reads one operation at the decoder's position; on failure, what is wrong with it. Does not
/// look inside a blob pointer (`decode` does, once).
fn next_op<'a>(decoder: &mut Decoder<'a>) -> Result<BatchOp<'a>, &'static str> {
    match decoder.u8().and_then(ValueKind::from_byte) {
        Some(kind @ (ValueKind::Value | ValueKind::BlobPointer | ValueKind::RangeDeletion)) => {
            match (decoder.length_prefixed(), decoder.length_prefixed()) {
                (Some(key), Some(value)) => Ok(BatchOp { kind, key, value }),
                _ if kind == ValueKind::Value => Err("bad put in write batch"),
                _ if kind == ValueKind::RangeDeletion => Err("bad range deletion in write batch"),
                _ => Err("bad blob pointer in write batch"),
            }
        }
        Some(ValueKind::Deletion) => match decoder.length_prefixed() {
            Some(key) => Ok(BatchOp {
                kind: ValueKind::Deletion,
                key,
                value: &[],
            }),
            None => Err("bad delete in write batch"),
        },
        None => Err("unknown operation in write batch"),
    }
}

/// The operations of a [`WriteBatch`], in order. Iteration cannot fail: a batch is well-formed
/// by construction (see [`WriteBatch::decode`]).
pub struct BatchIter<'a> {
    decoder: Decoder<'a>,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = BatchOp<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.decoder.is_empty() {
            return None;
        }
        Some(next_op(&mut self.decoder).expect(
            "WriteBatch invariant: put, delete and append build well-formed operations, and \
             decode, the only constructor from bytes, checks every one",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_forgets_every_kind_of_operation() {
        let mut batch = WriteBatch::new();
        batch.put("a", "1");
        batch.delete_range("b", "c");
        assert!(batch.has_range_deletions());
        batch.clear();
        assert_eq!(batch.count(), 0);
        assert!(!batch.has_range_deletions());
        assert_eq!(batch, WriteBatch::new());
    }

    /// Regression (issue #15): a logged batch's sequence numbers were trusted: past 2^56 - 1
    /// they do not fit an internal key, and near u64::MAX replay's `seqno + count` overflowed.
    #[test]
    fn sequence_numbers_past_the_largest_are_corruption() {
        for (seqno, ops, ok) in [
            (MAX_SEQNO, 1, true),
            (MAX_SEQNO, 2, false),
            (MAX_SEQNO + 1, 0, true),
            (MAX_SEQNO + 1, 1, false),
            (u64::MAX, 1, false),
            (u64::MAX, 0, false),
        ] {
            let mut b = WriteBatch::new();
            for i in 0..ops {
                b.put([i], b"v");
            }
            b.set_seqno(seqno);
            match WriteBatch::decode(b.encoded()) {
                Ok(_) => assert!(ok, "{seqno} + {ops} accepted"),
                Err(RecordError { offset, reason }) => {
                    assert!(!ok && offset == 0, "{seqno} + {ops}: {reason}");
                }
            }
        }
    }

    #[test]
    fn encodings_match_the_format_vectors() {
        let mut b = WriteBatch::new();
        b.put(b"foo", b"bar");
        b.set_seqno(1);
        assert_eq!(
            b.encoded(),
            [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 3, b'f', b'o', b'o', 3, b'b', b'a', b'r']
        );
        let mut d = WriteBatch::new();
        d.delete(b"foo");
        d.set_seqno(5);
        assert_eq!(
            d.encoded(),
            [5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 3, b'f', b'o', b'o']
        );
    }

    #[test]
    fn decode_round_trips() {
        let mut b = WriteBatch::new();
        b.put(b"", b"empty key");
        b.put(b"k", b"");
        b.delete(b"gone");
        b.put([0xff; 300], [7; 70_000]);
        b.set_seqno(77);
        let d = WriteBatch::decode(b.encoded()).unwrap();
        assert_eq!(d, b);
        assert_eq!(d.seqno(), 77);
        let ops: Vec<_> = d.iter().collect();
        assert_eq!(ops.len(), 4);
        assert_eq!(
            ops[2],
            BatchOp {
                kind: ValueKind::Deletion,
                key: b"gone",
                value: b""
            }
        );
        assert_eq!(ops[3].value.len(), 70_000);
    }

    #[test]
    fn append_concatenates() {
        let mut a = WriteBatch::new();
        a.put(b"a", b"1");
        let mut b = WriteBatch::new();
        b.delete(b"b");
        b.put(b"c", b"3");
        a.append(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(WriteBatch::decode(a.encoded()).unwrap().iter().count(), 3);
    }

    #[test]
    fn malformed_batches_are_corruption() {
        assert_eq!(WriteBatch::decode(&[0; 11]).unwrap_err().offset, 0);
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        let good = b.encoded().to_vec();
        // Count larger than the operations present.
        let mut bad = good.clone();
        bad[8] = 2;
        assert!(WriteBatch::decode(&bad)
            .unwrap_err()
            .to_string()
            .contains("header says 2"));
        // Unknown tag.
        let mut bad = good.clone();
        bad[12] = 7;
        let err = WriteBatch::decode(&bad).unwrap_err();
        assert_eq!(err.offset, 12, "{err}");
        // Truncated value, and a length that runs past the end.
        assert!(WriteBatch::decode(&good[..good.len() - 1]).is_err());
        let mut bad = good.clone();
        bad[13] = 0xff;
        assert!(WriteBatch::decode(&bad).is_err());
        // Every truncation and every byte flip decodes or fails, never panics.
        for len in 0..good.len() {
            let _ = WriteBatch::decode(&good[..len]);
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0xff;
            let _ = WriteBatch::decode(&bad);
        }
    }

    /// A range deletion cut short is named as one, and no truncation or flip of a batch
    /// holding one panics.
    #[test]
    fn malformed_range_deletions_are_corruption() {
        let mut b = WriteBatch::new();
        b.delete_range(b"from", b"to");
        let good = b.encoded().to_vec();
        let decoded = WriteBatch::decode(&good).unwrap();
        assert!(decoded.has_range_deletions());
        let err = WriteBatch::decode(&good[..good.len() - 1]).unwrap_err();
        assert!(err.to_string().contains("bad range deletion"), "{err}");
        for len in 0..good.len() {
            let _ = WriteBatch::decode(&good[..len]);
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0xff;
            let _ = WriteBatch::decode(&bad);
        }
    }

    #[test]
    fn empty_batch_is_legal() {
        let b = WriteBatch::decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!((b.seqno(), b.count()), (9, 0));
    }
}
