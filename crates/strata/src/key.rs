// SPDX-License-Identifier: MIT OR Apache-2.0
//! User keys and internal keys.
//!
//! An *internal key* is a user key followed by an 8-byte little-endian *tag*,
//! `tag = (seqno << 8) | kind`. Internal keys order by user key (under the user comparator), then
//! by tag descending, so that for one user key the newest entry comes first.
//!
//! ```text
//! +-------------------+---------------------------------+
//! | user key (n)      | fixed64 LE: seqno << 8 | kind   |
//! +-------------------+---------------------------------+
//! ```

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::coding::{decode_fixed64, put_fixed64};
use crate::comparator::{compare_bytes, Comparator};

/// A sequence number: the position of a write in the database's history. 56 bits.
pub type SeqNo = u64;

/// The largest sequence number an internal key can hold (2^56 - 1).
pub const MAX_SEQNO: SeqNo = (1 << 56) - 1;

/// The length of the tag that ends every internal key.
pub const TAG_LEN: usize = 8;

/// What an internal-key entry records about its user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted at this seqno.
    Deletion = 0,
    /// The key was set to the entry's value at this seqno.
    Value = 1,
    /// The key was set to a value kept in a blob file; the entry's value is a
    /// `BlobPointer` (a blob file and offset) to it. Not a LevelDB kind: only databases that
    /// use key-value separation hold it (see `docs/blobs.md`).
    BlobPointer = 2,
    /// A range deletion in a write batch: the operation's key is the range's start, its value
    /// the range's end (see `range_del`). Not a LevelDB kind, and never in an internal key:
    /// range deletions are kept apart from the entries (`ParsedInternalKey::parse` refuses
    /// the kind).
    RangeDeletion = 3,
}

impl ValueKind {
    /// The kind a lookup's seek key uses: the highest kind, so that a seek finds every entry at
    /// its seqno.
    pub const FOR_SEEK: ValueKind = ValueKind::BlobPointer;
    /// The kind of the separators and successors written into index blocks: LevelDB's
    /// `kValueTypeForSeek`, so that tables stay byte-identical to LevelDB's. (They carry the
    /// largest seqno, which no entry has, so their kind never decides an order.)
    pub const FOR_SEPARATOR: ValueKind = ValueKind::Value;

    /// Parses the low byte of a tag.
    pub fn from_byte(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::BlobPointer),
            3 => Some(ValueKind::RangeDeletion),
            _ => None,
        }
    }

    /// True for the kinds that set a value: `Value` and `BlobPointer`.
    pub fn is_value(self) -> bool {
        matches!(self, ValueKind::Value | ValueKind::BlobPointer)
    }
}

/// Packs a seqno and kind into a tag.
#[inline]
pub fn pack_tag(seqno: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seqno <= MAX_SEQNO);
    (seqno << 8) | kind as u64
}

/// Appends the internal key `user_key ‖ tag(seqno, kind)` to `dst`.
#[inline]
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seqno: SeqNo, kind: ValueKind) {
    // One allocation at most: the tag would otherwise grow a buffer sized for the key.
    dst.reserve(user_key.len() + 8);
    dst.extend_from_slice(user_key);
    put_fixed64(dst, pack_tag(seqno, kind));
}

/// The longest internal seek key [`with_seek_key`] builds on the stack.
const STACK_SEEK_KEY_BYTES: usize = 128;

/// Calls `f` with the internal key that seeks to the newest entry of `user_key` at or below
/// `seqno` (`user_key ‖ tag(seqno, FOR_SEEK)`), built on the stack for user keys of up to 120
/// bytes and on the heap for longer ones: a point lookup needs it only while it searches.
#[inline]
pub(crate) fn with_seek_key<R>(user_key: &[u8], seqno: SeqNo, f: impl FnOnce(&[u8]) -> R) -> R {
    let n = user_key.len();
    if n + 8 <= STACK_SEEK_KEY_BYTES {
        let mut stack = [0u8; STACK_SEEK_KEY_BYTES];
        stack[..n].copy_from_slice(user_key);
        stack[n..n + 8].copy_from_slice(&pack_tag(seqno, ValueKind::FOR_SEEK).to_le_bytes());
        f(&stack[..n + 8])
    } else {
        let mut heap = Vec::with_capacity(n + 8);
        append_internal_key(&mut heap, user_key, seqno, ValueKind::FOR_SEEK);
        f(&heap)
    }
}

/// An internal key borrowed from a buffer, parsed into its parts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ParsedInternalKey<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// The entry's sequence number.
    pub seqno: SeqNo,
    /// Value or tombstone.
    pub kind: ValueKind,
}

impl<'a> ParsedInternalKey<'a> {
    /// Parses an internal key; `None` if it is shorter than 8 bytes or its kind is unknown
    /// or one no internal key has ([`ValueKind::RangeDeletion`]).
    #[inline]
    pub fn parse(internal_key: &'a [u8]) -> Option<Self> {
        let split = internal_key.len().checked_sub(TAG_LEN)?;
        let tag = decode_fixed64(&internal_key[split..])?;
        let kind = ValueKind::from_byte(tag as u8).filter(|&k| k != ValueKind::RangeDeletion)?;
        Some(ParsedInternalKey {
            user_key: &internal_key[..split],
            seqno: tag >> 8,
            kind,
        })
    }
}

impl fmt::Debug for ParsedInternalKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} @ {} : {}",
            String::from_utf8_lossy(self.user_key),
            self.seqno,
            self.kind as u8
        )
    }
}

/// The user-key part of an internal key.
///
/// Requires: `internal_key.len() >= 8`; shorter input yields an empty user key rather than a
/// panic.
#[inline]
pub fn user_key(internal_key: &[u8]) -> &[u8] {
    &internal_key[..internal_key.len().saturating_sub(TAG_LEN)]
}

/// The tag of an internal key, or 0 if it is shorter than 8 bytes.
#[inline]
fn tag(internal_key: &[u8]) -> u64 {
    internal_key
        .len()
        .checked_sub(TAG_LEN)
        .and_then(|split| decode_fixed64(&internal_key[split..]))
        .unwrap_or(0)
}

/// Copies `src` into `dst`, of the same length: up to 32 bytes as two fixed-size moves that
/// overlap in the middle, which the compiler emits as a few loads and stores, where
/// `copy_from_slice` of a length known only at run time calls `memcpy` (which costs more than
/// copying a 16-byte key). Keys are copied on a scan's every step.
#[inline]
pub(crate) fn copy_key_bytes(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    match n {
        16..=32 => {
            dst[..16].copy_from_slice(&src[..16]);
            dst[n - 16..].copy_from_slice(&src[n - 16..]);
        }
        8..=15 => {
            dst[..8].copy_from_slice(&src[..8]);
            dst[n - 8..].copy_from_slice(&src[n - 8..]);
        }
        _ => dst.copy_from_slice(src),
    }
}

/// Orders internal keys: user key ascending under the user comparator, then tag descending.
///
/// Its key-shortening helpers shorten the user-key part and give a shortened key the largest
/// possible tag, so that it still sorts at or after the original.
#[derive(Clone)]
pub struct InternalKeyComparator {
    user: Arc<dyn Comparator>,
    /// The user comparator says it is bytewise order (`Comparator::is_bytewise`): user keys are
    /// then compared inline, with no call through `user`.
    bytewise: bool,
}

impl InternalKeyComparator {
    /// Wraps a user comparator.
    pub fn new(user: Arc<dyn Comparator>) -> Self {
        let bytewise = user.is_bytewise();
        InternalKeyComparator { user, bytewise }
    }

    /// True if the user comparator is bytewise order: user keys are then equal exactly when
    /// their bytes are.
    #[inline]
    pub(crate) fn is_bytewise(&self) -> bool {
        self.bytewise
    }

    /// The user comparator.
    pub fn user_comparator(&self) -> &Arc<dyn Comparator> {
        &self.user
    }

    /// Orders two user keys by the user comparator: inline when it is bytewise, with no
    /// call through `user`.
    #[inline]
    pub(crate) fn compare_user(&self, a: &[u8], b: &[u8]) -> Ordering {
        if self.bytewise {
            compare_bytes(a, b)
        } else {
            self.user.compare(a, b)
        }
    }
}

impl fmt::Debug for InternalKeyComparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InternalKeyComparator({})", self.user.name())
    }
}

impl Comparator for InternalKeyComparator {
    fn name(&self) -> &str {
        "leveldb.InternalKeyComparator"
    }

    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        let users = if self.bytewise {
            compare_bytes(user_key(a), user_key(b))
        } else {
            self.user.compare(user_key(a), user_key(b))
        };
        users.then_with(|| tag(b).cmp(&tag(a)))
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let start_user = user_key(start);
        let limit_user = user_key(limit);
        let mut shortened = start_user.to_vec();
        self.user
            .find_shortest_separator(&mut shortened, limit_user);
        if shortened.len() < start_user.len()
            && self.user.compare(start_user, &shortened) == Ordering::Less
        {
            put_fixed64(
                &mut shortened,
                pack_tag(MAX_SEQNO, ValueKind::FOR_SEPARATOR),
            );
            debug_assert!(self.compare(start, &shortened) == Ordering::Less);
            debug_assert!(self.compare(&shortened, limit) == Ordering::Less);
            *start = shortened;
        }
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        let user = user_key(key);
        let mut shortened = user.to_vec();
        self.user.find_short_successor(&mut shortened);
        if shortened.len() < user.len() && self.user.compare(user, &shortened) == Ordering::Less {
            put_fixed64(
                &mut shortened,
                pack_tag(MAX_SEQNO, ValueKind::FOR_SEPARATOR),
            );
            debug_assert!(self.compare(key, &shortened) == Ordering::Less);
            *key = shortened;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::bytewise;

    #[test]
    fn seek_keys_on_the_stack_and_on_the_heap_are_the_internal_key() {
        // Around the stack's 120-byte limit for user keys, and the empty key.
        for len in [0, 1, 16, 119, 120, 121, 500] {
            let user: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let built = with_seek_key(&user, 77, |k| k.to_vec());
            assert_eq!(built, ikey(&user, 77, ValueKind::FOR_SEEK), "length {len}");
        }
    }

    fn ikey(user: &[u8], seqno: SeqNo, kind: ValueKind) -> Vec<u8> {
        let mut out = Vec::new();
        append_internal_key(&mut out, user, seqno, kind);
        out
    }

    #[test]
    fn encoding_matches_the_format_vectors() {
        assert_eq!(
            ikey(b"foo", 1, ValueKind::Value),
            b"foo\x01\x01\0\0\0\0\0\0"
        );
        assert_eq!(
            ikey(b"foo", 1, ValueKind::Deletion),
            b"foo\x00\x01\0\0\0\0\0\0"
        );
        assert_eq!(
            ikey(b"", MAX_SEQNO, ValueKind::Value),
            b"\x01\xff\xff\xff\xff\xff\xff\xff"
        );
    }

    #[test]
    fn parse_round_trips_and_rejects_bad_input() {
        let k = ikey(b"key", 77, ValueKind::Deletion);
        let p = ParsedInternalKey::parse(&k).expect("valid");
        assert_eq!(
            (p.user_key, p.seqno, p.kind),
            (&b"key"[..], 77, ValueKind::Deletion)
        );
        assert!(ParsedInternalKey::parse(b"short").is_none());
        let mut bad = ikey(b"k", 1, ValueKind::Value);
        bad[1] = 3; // unknown kind byte
        assert!(ParsedInternalKey::parse(&bad).is_none());
        bad[1] = 2; // a blob pointer
        assert_eq!(
            ParsedInternalKey::parse(&bad).unwrap().kind,
            ValueKind::BlobPointer
        );
        // The empty user key is legal.
        assert_eq!(
            ParsedInternalKey::parse(&ikey(b"", 3, ValueKind::Value))
                .unwrap()
                .user_key,
            b""
        );
    }

    #[test]
    fn order_is_user_key_then_newest_first() {
        let c = InternalKeyComparator::new(bytewise());
        let a1 = ikey(b"a", 1, ValueKind::Value);
        let a2 = ikey(b"a", 2, ValueKind::Value);
        let a2d = ikey(b"a", 2, ValueKind::Deletion);
        let b1 = ikey(b"b", 1, ValueKind::Value);
        assert_eq!(c.compare(&a2, &a1), Ordering::Less);
        assert_eq!(c.compare(&a2, &a2d), Ordering::Less);
        assert_eq!(c.compare(&a1, &b1), Ordering::Less);
        // Bytewise comparison of the same keys would be wrong, since the tag is little-endian.
        assert_eq!(a2.cmp(&a1), Ordering::Greater);
        let big = ikey(b"a", 256, ValueKind::Value);
        assert_eq!(c.compare(&big, &a2), Ordering::Less);
    }

    #[test]
    fn shortening_uses_the_max_tag() {
        let c = InternalKeyComparator::new(bytewise());
        let mut start = ikey(b"abcdef", 5, ValueKind::Value);
        c.find_shortest_separator(&mut start, &ikey(b"abzz", 9, ValueKind::Value));
        assert_eq!(start, ikey(b"abd", MAX_SEQNO, ValueKind::Value));

        let mut same = ikey(b"key000099", 5, ValueKind::Value);
        let orig = same.clone();
        c.find_shortest_separator(&mut same, &ikey(b"key000100", 9, ValueKind::Value));
        assert_eq!(same, orig);

        let mut succ = ikey(b"key000499", 500, ValueKind::Value);
        c.find_short_successor(&mut succ);
        assert_eq!(succ, b"l\x01\xff\xff\xff\xff\xff\xff\xff");
    }
}
