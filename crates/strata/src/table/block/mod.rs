// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Block`]: a parsed, immutable block, and [`BlockIter`], its cursor.
//!
//! The layout is described in [`block_builder`](super::block_builder). A block is checked when
//! it is parsed: its restart array must fit, and every restart offset must point inside the
//! entry region, in ascending order. Entries are checked as they are decoded; a malformed entry
//! stops the iterator with a corruption error naming the file and offset.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU8, Ordering as MemoryOrdering};
use std::sync::Arc;

use crate::coding::{decode_fixed32, decode_fixed64, decode_varint32, varint_length};
use crate::comparator::Comparator;
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{copy_key_bytes, ValueKind, TAG_LEN};
use crate::table::block_builder::BlockBuilder;
use crate::table::format::BLOCK_TRAILER_SIZE;
use crate::table::chunks::ChunkStarts;
use crate::table::snappy::{decode_buffer_len, SnappyProgress, SnappyReader};

mod fences;
pub(crate) use fences::{count_below, window, window_after, RestartFences};

/// A parsed block.
///
/// Invariants:
/// 1. `restarts_offset + 4 * num_restarts + 4 == data.len()`.
/// 2. If the block has entries, every restart offset is `< restarts_offset`, and they ascend.
/// 3. If the block has entries, the first restart offset is 0.
///
/// A block a cursor is still decompressing ([`Block::partial`]) has no restart array: its
/// entries run to `restarts_offset`, the end of the last one decoded, with `num_restarts` 0.
/// Only that cursor holds it, and it finishes the block before it reads past those entries
/// or searches it ([`PendingDecode`]).
///
/// `repr(C)`: what every read of the block loads (the restart array's place, the fences held
/// inline, the hit count of a cached block, then the bytes' pointer, length and `in_mapping`,
/// see [`BlockBytes`]) lies in its first 96 bytes, with no pointer to follow to the fences
/// (their windows and prefix are one allocation: [`RestartFences`]).
#[repr(C)]
pub struct Block {
    restarts_offset: usize,
    num_restarts: usize,
    /// Set on a table's index block and on a data block's search form, whose keys are
    /// internal keys in bytewise user order and which are only searched in that order
    /// ([`Block::with_fences`]).
    fences: Option<RestartFences>,
    /// Reads that hit the block in the block cache, counted to two
    /// ([`Block::second_hit`]); a search form ([`Block::searchable`]) starts at two. Relaxed:
    /// racing readers can each make a search form of the same block, all alike, never a
    /// wrong one.
    hits: AtomicU8,
    data: BlockBytes,
    /// The file the block came from, and the block's offset in it, for error messages.
    file: Arc<Path>,
    file_offset: u64,
    /// A cached search form of a block read in place: its count in its table's
    /// [`HotForms`], given back when the form is dropped.
    mark: Option<FormMark>,
}

/// How many search forms of a table's blocks read in place (stored uncompressed) are alive,
/// per bucket of block offsets: a read looks in the block cache for a block's form only when
/// its bucket counts one, so that the reads of blocks never made hot do not pay a cache
/// lookup (about 55 ns, 4% of a get that misses, on a 1M database without compression).
/// Relaxed: a count a racing read misses costs it one read in place, never a wrong block.
///
/// A count is 16 bits: a bucket would need 65,536 live forms (a table of some 16 million
/// blocks) to wrap.
pub(crate) struct HotForms {
    counts: [AtomicU16; HOT_FORM_BUCKETS],
}

/// Buckets of [`HotForms`] per table (512 bytes of counts); a power of two.
const HOT_FORM_BUCKETS: usize = 256;

impl HotForms {
    pub(crate) fn new() -> Self {
        HotForms {
            counts: std::array::from_fn(|_| AtomicU16::new(0)),
        }
    }

    fn bucket(offset: u64) -> usize {
        // Blocks are a few KiB apart: the offset's KiB, spread by a multiply.
        let bits = HOT_FORM_BUCKETS.trailing_zeros();
        ((offset >> 10).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    /// False if no search form of a block at `offset` can be alive.
    pub(crate) fn may_hold(&self, offset: u64) -> bool {
        self.counts[Self::bucket(offset)].load(MemoryOrdering::Relaxed) != 0
    }

    /// Counts a search form of the block at `offset` made now; the mark gives it back.
    pub(crate) fn mark(self: &Arc<Self>, offset: u64) -> FormMark {
        let bucket = Self::bucket(offset);
        self.counts[bucket].fetch_add(1, MemoryOrdering::Relaxed);
        FormMark {
            forms: self.clone(),
            bucket,
        }
    }
}

/// A search form's count in its table's [`HotForms`], for as long as the form lives.
pub(crate) struct FormMark {
    forms: Arc<HotForms>,
    bucket: usize,
}

impl Drop for FormMark {
    fn drop(&mut self) {
        self.forms.counts[self.bucket].fetch_sub(1, MemoryOrdering::Relaxed);
    }
}

/// [`Block::hits`] at and past which a hit makes no search form.
const HITS_COUNTED: u8 = 2;

/// A block's bytes, and what keeps them alive: a heap buffer (decompressed, or read into a
/// buffer), or a table file whose mapping holds them (stored uncompressed, read in place).
///
/// Invariant: `ptr..ptr + len` are bytes `owner` keeps alive and unchanged as long as it lives.
/// The pointer is taken once, so a read is a plain slice with no branch on where the bytes are.
///
/// `repr(C)`, the owner last: the pointer, length and `in_mapping` are what reads load.
#[repr(C)]
struct BlockBytes {
    ptr: *const u8,
    len: usize,
    /// True if `_owner` is a `Mapping`.
    in_mapping: bool,
    _owner: BytesOwner,
}

/// Held for what its drop frees (a heap buffer goes to the thread's spare), and read only for
/// the capacity it holds (`BlockBytes::held`). A mapping's file is never read through it.
#[allow(dead_code)]
enum BytesOwner {
    /// A `Vec`, not a `Box`: moving it does not invalidate the pointer taken from it.
    Heap(Vec<u8>),
    /// `ptr..ptr + len` lies within bytes the file's `mapped` returned.
    Mapping(Arc<dyn RandomAccessFile>),
}

// The hand-written `Send` and `Sync` below rely on every owner being both.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Vec<u8>>();
    send_and_sync::<Arc<dyn RandomAccessFile>>();
};

impl BlockBytes {
    fn heap(mut bytes: Vec<u8>) -> BlockBytes {
        // The cache charges a block the capacity it holds; more than the slack a recycled
        // buffer may have is given back to the allocator.
        if bytes.capacity() - bytes.len() > bytes.len() / RECYCLED_SLACK {
            bytes.shrink_to_fit();
        }
        BlockBytes {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            in_mapping: false,
            _owner: BytesOwner::Heap(bytes),
        }
    }

    /// `bytes` as they are, with whatever capacity they have past their length (charged to the
    /// cache: [`Block::cache_copy`]).
    fn heap_with_room(bytes: Vec<u8>) -> BlockBytes {
        BlockBytes {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            in_mapping: false,
            _owner: BytesOwner::Heap(bytes),
        }
    }

    /// The bytes the owner holds: a heap buffer's capacity, or the block's length for a
    /// mapping (whose pages the block cache never holds).
    fn held(&self) -> usize {
        match &self._owner {
            BytesOwner::Heap(bytes) => bytes.capacity(),
            BytesOwner::Mapping(_) => self.len,
        }
    }
}

impl Drop for BlockBytes {
    /// A heap buffer goes to this thread's spare ([`block_buffer`]) rather than back to the
    /// allocator. Nothing reads the bytes once the block is dropped.
    fn drop(&mut self) {
        if let BytesOwner::Heap(bytes) = &mut self._owner {
            let bytes = std::mem::take(bytes);
            // An empty buffer (taken back by `Block::take_heap`) would only evict the spare.
            if bytes.capacity() != 0 && bytes.capacity() <= MAX_SPARE_BYTES {
                // At thread exit the spare may be gone: the buffer is then freed.
                let _ = SPARE_BUFFER.try_with(|spare| spare.set(bytes));
            }
        }
    }
}

thread_local! {
    /// The buffer of the last heap block this thread dropped, for the next block it
    /// decompresses ([`block_buffer`]): a scan, which drops each block as it loads the next,
    /// and a point lookup's or seek's cursor, dropped after each use, then allocate, zero and
    /// free no block buffer in the steady state.
    static SPARE_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A spare buffer larger than this is freed, not kept: one thread keeps at most one buffer of
/// about a block's size.
const MAX_SPARE_BYTES: usize = 64 * 1024;

/// A recycled buffer may hold up to `len / RECYCLED_SLACK` bytes more than the block it
/// carries (charged to the cache as held).
const RECYCLED_SLACK: usize = 8;

/// A buffer of exactly `len` bytes for a block to be decompressed into: this thread's spare
/// (the buffer of a block it dropped) when that holds at least `len` bytes and at most an
/// eighth more, else a new one. The bytes are initialized but their contents are arbitrary:
/// the caller overwrites all of them. Only bytes the spare never held are zeroed.
pub(crate) fn block_buffer(len: usize) -> Vec<u8> {
    let Ok(mut buffer) = SPARE_BUFFER.try_with(std::cell::Cell::take) else {
        return vec![0; len];
    };
    let capacity = buffer.capacity();
    if capacity < len || capacity - len > len / RECYCLED_SLACK {
        // Kept for a block it fits.
        let _ = SPARE_BUFFER.try_with(|spare| spare.set(buffer));
        return vec![0; len];
    }
    if buffer.len() >= len {
        buffer.truncate(len);
    } else {
        buffer.resize(len, 0);
    }
    buffer
}

// SAFETY: the bytes never change (see `deref`), and their owner, a `Vec<u8>` or a
// `RandomAccessFile`, is `Send + Sync`.
#[allow(unsafe_code)]
unsafe impl Send for BlockBytes {}
// SAFETY: as for `Send`: shared access only reads immutable bytes.
#[allow(unsafe_code)]
unsafe impl Sync for BlockBytes {}

impl std::ops::Deref for BlockBytes {
    type Target = [u8];

    #[inline]
    #[allow(unsafe_code)]
    fn deref(&self) -> &[u8] {
        // SAFETY: by the invariant, `owner` (which `self` holds) keeps the bytes alive and
        // unchanged. A heap buffer is a `Vec` no one touches after its pointer was taken until
        // the block's drop gives it away (`BlockBytes::drop`), after the last read. A
        // mapping's bytes were returned by `file.mapped` borrowed from the file, which `self`
        // keeps alive through its `Arc` and no one can borrow mutably (`Arc::get_mut` fails
        // while this `Arc` exists), so that borrow stays valid as long as the file does.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("size", &self.data.len())
            .field("num_restarts", &self.num_restarts)
            .field("file", &self.file)
            .field("file_offset", &self.file_offset)
            .finish()
    }
}

impl Block {
    /// Parses a block read from `file` at `file_offset`.
    ///
    /// # Errors
    /// Corruption if the restart array does not fit in the block or points outside its entries.
    pub fn new(data: Vec<u8>, file: Arc<Path>, file_offset: u64) -> Result<Block> {
        Block::parse(BlockBytes::heap(data), file, file_offset)
    }

    /// Parses the block whose stored form (contents, then whatever follows them: a table's
    /// trailer) is the `stored_len` bytes at `file_offset` where `mapping`'s mapping holds them,
    /// reading its first `len` bytes in place: no copy, and the block keeps `mapping` alive.
    /// `accept` sees the stored bytes first, exactly the bytes the block will read, and may
    /// refuse them (`Ok(false)`: the caller reads the block another way) or fail (a checksum
    /// mismatch). `path` names the file in errors. `None` if the mapping does not hold the
    /// bytes, or `accept` refused them.
    ///
    /// # Errors
    /// `accept`'s error, or as [`Block::new`].
    pub(crate) fn in_mapping(
        mapping: Arc<dyn RandomAccessFile>,
        file_offset: u64,
        stored_len: usize,
        len: usize,
        path: Arc<Path>,
        accept: impl FnOnce(&[u8]) -> Result<bool>,
    ) -> Result<Option<Block>> {
        assert!(len <= stored_len, "a block's contents lie within its stored bytes");
        let ptr = {
            // Exactly `stored_len` bytes, or none: an `Env` may return fewer.
            let Some(stored) = mapping
                .mapped(file_offset, stored_len)
                .filter(|bytes| bytes.len() == stored_len)
            else {
                return Ok(None);
            };
            if !accept(stored)? {
                return Ok(None);
            }
            stored.as_ptr()
        };
        let data = BlockBytes {
            ptr,
            len,
            in_mapping: true,
            _owner: BytesOwner::Mapping(mapping),
        };
        Block::parse(data, path, file_offset).map(Some)
    }

    /// A block being decompressed by a cursor (see [`PendingDecode`]): `data` holds the
    /// block's first bytes, of which the cursor reads only entries before `entries_end`,
    /// and at least four bytes past it (the decoder's slop). It has no restart array
    /// (`num_restarts` 0, so invariant 1 holds over `entries_end + 4` bytes): nothing
    /// searches it, and the cursor finishes it ([`take_heap`](Self::take_heap) gives the
    /// buffer back) before stepping past `entries_end`.
    fn partial(data: Vec<u8>, entries_end: usize, file: Arc<Path>, file_offset: u64) -> Block {
        assert!(entries_end + 4 <= data.len(), "a partial block keeps four bytes past its entries");
        Block {
            data: BlockBytes {
                ptr: data.as_ptr(),
                len: entries_end + 4,
                in_mapping: false,
                _owner: BytesOwner::Heap(data),
            },
            restarts_offset: entries_end,
            num_restarts: 0,
            fences: None,
            file,
            file_offset,
            hits: AtomicU8::new(0),
            mark: None,
        }
    }

    /// The heap buffer holding this block's bytes (at the length it was given with), taken
    /// out: the block is left empty, with no entries. `None` for a block read in place.
    fn take_heap(&mut self) -> Option<Vec<u8>> {
        let BytesOwner::Heap(bytes) = &mut self.data._owner else {
            return None;
        };
        let bytes = std::mem::take(bytes);
        self.data.ptr = std::ptr::NonNull::dangling().as_ptr();
        self.data.len = 0;
        self.restarts_offset = 0;
        self.num_restarts = 0;
        self.fences = None;
        Some(bytes)
    }

    /// True if the block is read in place from a mapping (and so holds the file open).
    pub(crate) fn is_mapped(&self) -> bool {
        self.data.in_mapping
    }

    fn parse(data: BlockBytes, file: Arc<Path>, file_offset: u64) -> Result<Block> {
        let corrupt = |reason: &'static str| Error::corruption(&*file, file_offset, reason);
        let len = data.len();
        if len < 4 {
            return Err(corrupt("block is too short for its restart count"));
        }
        let num_restarts = decode_fixed32(&data[len - 4..]).expect("4 bytes") as usize;
        if num_restarts > (len - 4) / 4 {
            return Err(corrupt("block's restart array is larger than the block"));
        }
        let restarts_offset = len - 4 - 4 * num_restarts;
        let mut previous = None;
        // A block with no entries has nothing to point at (LevelDB writes one restart, 0).
        let checked_restarts = if restarts_offset == 0 {
            0
        } else {
            num_restarts
        };
        for i in 0..checked_restarts {
            let r = decode_fixed32(&data[restarts_offset + 4 * i..]).expect("in bounds") as usize;
            if r >= restarts_offset || previous.is_some_and(|p| r <= p) {
                return Err(corrupt("block's restart array points outside its entries"));
            }
            previous = Some(r);
        }
        let first_restart = (num_restarts > 0)
            .then(|| decode_fixed32(&data[restarts_offset..]).expect("in bounds"));
        if restarts_offset > 0 && first_restart != Some(0) {
            return Err(corrupt("block's first entry is not a restart point"));
        }
        Ok(Block {
            data,
            restarts_offset,
            num_restarts,
            fences: None,
            file,
            file_offset,
            hits: AtomicU8::new(0),
            mark: None,
        })
    }

    /// This block (a search form) counted in `mark`'s [`HotForms`] while it lives.
    pub(crate) fn marked(mut self, mark: FormMark) -> Block {
        self.mark = Some(mark);
        self
    }

    /// This block with [`RestartFences`] over its restart keys, which its searches use to
    /// narrow their binary search (if the keys allow: see [`RestartFences::build`]).
    ///
    /// Requires: the block's keys are internal keys whose user keys are in bytewise order, and
    /// every search of it (`find`, a cursor's `seek`) compares in that order. A table calls this
    /// for its index block and its data blocks' search forms, and only when its comparator is
    /// bytewise.
    pub(crate) fn with_fences(mut self) -> Block {
        self.fences = RestartFences::build(&self);
        self
    }

    /// This block re-encoded for point lookups while the block cache holds it: every entry a
    /// restart point (its key stored whole, none shared with the entry before), and, when
    /// `bytewise`, [`RestartFences`] over all of them. A search then narrows to the target's
    /// entry over the fences and decodes one or two entries, where the stored block (a restart
    /// every 16 entries) has it decode up to 16 in a row, rebuilding each key. The keys'
    /// shared prefixes, four more bytes of restart array and eight of fence per entry are what
    /// it costs, charged to the cache ([`charge`](Self::charge)).
    ///
    /// The form is a heap copy also of a block read in place from a mapping: cached, it holds
    /// no file open.
    ///
    /// `None` if the block has no entries, already has a
    /// restart at every entry and no fences would be built, or has damage a search of it
    /// could meet: an entry that does not decode whole, or a restart that is not an entry
    /// storing its whole key. The stored block is then cached as it is, and its searches
    /// report the damage where they meet it, as before.
    ///
    /// Requires, when `bytewise`: as [`with_fences`](Self::with_fences).
    pub(crate) fn searchable(&self, bytewise: bool) -> Option<Block> {
        if self.restarts_offset == 0 {
            return None;
        }
        let limit = self.restarts_offset;
        // The form's exact size first, so that it is built in one buffer of exactly its
        // length. Grown by doubling and then shrunk, the forms left holes in the allocator's
        // heap: db_bench's seq-reads sequence at 1M entries peaked 2.1 MB higher in anonymous
        // memory (docs/benchmarks.md, "Search forms in buffers of their size").
        let (size, entries) = self.form_size()?;
        let mut builder = BlockBuilder::with_capacity(1, size, entries);
        let mut key = ScratchKey::new();
        let mut offset = 0;
        // The restarts not yet met; each must be where an entry starts, and share nothing.
        let mut restart = 0;
        while offset < limit {
            let h = decode_entry(&self.data, offset, limit)?;
            if restart < self.num_restarts && self.restart_point(restart) == offset {
                if h.shared != 0 {
                    return None;
                }
                restart += 1;
            }
            if !key.rebuild_in(h.shared, &self.data, h.key_delta, h.non_shared) {
                return None;
            }
            builder.add(key.as_slice(), &self.data[h.value_start()..h.end()]);
            offset = h.end();
        }
        if restart != self.num_restarts
            || (!bytewise && builder.entry_count() == self.num_restarts)
        {
            return None;
        }
        let bytes = builder.into_finished();
        debug_assert_eq!(bytes.len(), bytes.capacity(), "the search form's size is exact");
        let block = Block::new(bytes, self.file.clone(), self.file_offset).ok()?;
        block.hits.store(HITS_COUNTED, MemoryOrdering::Relaxed);
        Some(if bytewise { block.with_fences() } else { block })
    }

    /// The size of this block's search form ([`searchable`](Self::searchable)) in bytes, and
    /// its number of entries; `None` if an entry does not decode whole.
    fn form_size(&self) -> Option<(usize, usize)> {
        let limit = self.restarts_offset;
        let (mut size, mut entries, mut offset) = (4, 0, 0);
        while offset < limit {
            let h = decode_entry(&self.data, offset, limit)?;
            let key_len = h.shared + h.non_shared;
            size += 1
                + varint_length(key_len as u64)
                + varint_length(h.value_len as u64)
                + key_len
                + h.value_len
                + 4;
            entries += 1;
            offset = h.end();
        }
        Some((size, entries))
    }

    /// This block copied for the block cache, in a buffer as large as its search form
    /// ([`searchable`](Self::searchable)) will be, and charged that ([`charge`](Self::charge)).
    ///
    /// Why: the cache holds a block as read until its second hit, then its search form, about
    /// a fifth larger. Held in buffers of their own sizes, the two kinds left the allocator
    /// holes of one size that requests of the other did not fit, and split remainders piled
    /// up, resident: random reads with a full cache left the allocator holding free memory
    /// of 46-62% of the cache's capacity (4-32 MiB), and db_bench's readrandom over 1M entries
    /// with a 32 MiB cache peaked at 62.9 MB of anonymous memory, 48.7 with this copy
    /// (docs/benchmarks.md, "The block cache's real size"). With one size per block, a
    /// block's place in the heap is taken by its form, or by a block of about its size.
    ///
    /// `None` for a block in a mapping, a block with fences (an index block, a search form made
    /// for a bytewise comparator), a block without entries, or one whose entries do not
    /// decode whole: that is cached as it is. (A search form without fences would be copied;
    /// the cache is only offered blocks as read.)
    pub(crate) fn cache_copy(&self) -> Option<Block> {
        if self.data.in_mapping || self.fences.is_some() || self.restarts_offset == 0 {
            return None;
        }
        let (form_size, _) = self.form_size()?;
        let mut bytes = Vec::with_capacity(form_size.max(self.data.len()));
        bytes.extend_from_slice(&self.data);
        Block::parse(BlockBytes::heap_with_room(bytes), self.file.clone(), self.file_offset).ok()
    }

    /// Counts a read's hit on this block in the block cache; true at the second, when
    /// the caller should cache its [`searchable`](Self::searchable) form in its place. Loads
    /// only, once the count is reached: hot blocks' headers are not written by every reader.
    pub(crate) fn second_hit(&self) -> bool {
        match self.hits.load(MemoryOrdering::Relaxed) {
            0 => {
                self.hits.store(1, MemoryOrdering::Relaxed);
                false
            }
            1 => {
                self.hits.store(HITS_COUNTED, MemoryOrdering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// The block's size in bytes.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// The bytes the block holds, as charged to the block cache: its buffer (its contents,
    /// and the little spare capacity a recycled buffer may have) and its fences.
    pub fn charge(&self) -> usize {
        self.data.held() + self.fences.as_ref().map_or(0, |f| f.heap_bytes())
    }

    /// `part`, a slice of this block's bytes (a key or value [`find`](Self::find) handed
    /// out), as a [`BlockSlice`] that keeps the block alive. `None` if `part` is not inside
    /// the block.
    pub(crate) fn slice(self: &Arc<Self>, part: &[u8]) -> Option<BlockSlice> {
        // Addresses compared as numbers: no pointer is made from them.
        let start = (part.as_ptr() as usize).checked_sub(self.data.as_ptr() as usize)?;
        let end = start.checked_add(part.len())?;
        (end <= self.data.len()).then(|| BlockSlice {
            block: self.clone(),
            start,
            end,
        })
    }

    /// A cursor over the block's entries, ordered by `comparator`.
    pub fn iter(self: &Arc<Self>, comparator: Arc<dyn Comparator>) -> BlockIter {
        BlockIter::new(self.clone(), comparator)
    }

    fn restart_point(&self, index: usize) -> usize {
        debug_assert!(index < self.num_restarts);
        decode_fixed32(&self.data[self.restarts_offset + 4 * index..]).expect("invariant 1")
            as usize
    }

    fn corruption(&self, offset: usize, reason: &'static str) -> Error {
        Error::corruption(&*self.file, self.file_offset + offset as u64, reason)
    }
}

impl Block {
    /// A point lookup without a cursor: the first entry whose key is at or after `target`
    /// under `comparator`, handed to `found` as its key and value. Nothing is allocated for
    /// keys up to [`STACK_KEY_BYTES`], and the comparator is called directly (generic, so a
    /// concrete one inlines).
    ///
    /// # Errors
    /// Corruption naming the block's file and the entry's offset, as [`BlockIter::seek`] finds
    /// it.
    pub(crate) fn find<C, R>(
        &self,
        comparator: &C,
        target: &[u8],
        found: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>>
    where
        C: Comparator + ?Sized,
    {
        if self.num_restarts == 0 {
            return Ok(None);
        }
        if let Some(fences) = self.fences.as_ref().filter(|f| f.every_entry()) {
            return self.find_among_restarts(fences, comparator, target, found);
        }
        let limit = self.restarts_offset;
        let restart = self
            .last_restart_before(comparator, target)
            .map_err(|offset| self.corruption(offset, "bad restart entry in block"))?;
        let mut key = ScratchKey::new();
        let mut offset = self.restart_point(restart);
        while offset < limit {
            let h = decode_entry(&self.data, offset, limit)
                .ok_or_else(|| self.corruption(offset, "bad entry in block"))?;
            if !key.rebuild_in(h.shared, &self.data, h.key_delta, h.non_shared) {
                return Err(
                    self.corruption(offset, "block entry shares more than the previous key")
                );
            }
            if comparator.compare(key.as_slice(), target) != Ordering::Less {
                return Ok(Some(found(
                    key.as_slice(),
                    &self.data[h.value_start()..h.end()],
                )));
            }
            offset = h.end();
        }
        Ok(None)
    }
}

/// A point lookup in a data block still being decompressed (`reader`): the first entry whose
/// key is at or after the internal key `target`, as [`Block::find`] finds it, decoding the
/// block only as far as that entry's end. Returns `Ok(Some(found(key, value)))`, or
/// `Ok(None)` without calling `found` when the lookup needs the whole block: no entry at or
/// after `target` before the entries end, or an entry this scan does not read (the whole
/// block's search then answers, or reports the damage); `Err` if the Snappy data it decodes
/// (up to the entry, and the rest of the element that ends it) is damaged. Damage past that
/// is not seen: with checksums verified, a damaged block never gets here.
///
/// The scan walks entries from the block's start, as a block's restart array, which would let
/// it skip ahead, is at the block's end. It knows the entries have ended when it meets an
/// entry with no key: the restart array begins with restart 0's offset, four zero bytes
/// (invariant 3 of [`Block`]), which read as an entry of empty key and value, and an entry
/// of a table's block holds an internal key of at least eight bytes.
///
/// `start` is where the scan begins: 0, or the start of the chunk [`reader_at_chunk`] placed
/// `reader` at.
pub(crate) fn find_while_decoding<C, R, F>(
    reader: &mut SnappyReader<'_>,
    start: usize,
    comparator: &C,
    target: &[u8],
    found: F,
) -> std::result::Result<Option<R>, &'static str>
where
    C: Comparator + ?Sized,
    F: FnOnce(&[u8], &[u8]) -> R,
{
    let mut key = ScratchKey::new();
    let entry = scan_while_decoding(reader, start, comparator, target, &mut key)?;
    Ok(entry.map(|e| found(key.as_slice(), &reader.decoded()[e.value_start..e.end])))
}

/// A reader of the Snappy data block `contents`, placed where a scan for the first entry at
/// or after `target` begins, and that place's offset in the decoded block: the start of the
/// last chunk (`table::chunks`, `chunks` their starts) whose first key is before `target`,
/// or of the block. Chunks are chosen by binary search, each probe decoding the first entry
/// of one chunk; a scan from a chunk that the probe decoded goes on from there. The decode
/// writes into `buffer(len)`, `len` the bytes it needs.
///
/// # Errors
/// Damage in a probed chunk's Snappy data, a chunk start outside the block, or a chunk whose
/// first entry is not a restart's (the map does not fit the block).
pub(crate) fn reader_at_chunk<'a, C>(
    contents: &'a [u8],
    chunks: &ChunkStarts,
    comparator: &C,
    target: &[u8],
    buffer: impl FnOnce(usize) -> Vec<u8>,
) -> std::result::Result<(SnappyReader<'a>, usize), &'static str>
where
    C: Comparator + ?Sized,
{
    let starts = chunks.as_slice();
    if starts.is_empty() {
        return Ok((SnappyReader::new_in(contents, buffer)?, 0));
    }
    let mut buffer = buffer(decode_buffer_len(contents)?);
    // The answer is chunk `lo` (0 the block's start, `i` the start `starts[i - 1]`): the
    // last whose first key is before `target`.
    let (mut lo, mut hi) = (0, starts.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let start = starts[mid - 1];
        let mut reader = SnappyReader::at_chunk(contents, start, buffer)?;
        let at = start.output as usize;
        reader.fill_to(at + MAX_ENTRY_HEADER + SCAN_AHEAD)?;
        let (shared, non_shared, _, header_len) = reader
            .decoded()
            .get(at..)
            .and_then(decode_entry_lengths)
            .ok_or("chunk's first entry does not decode")?;
        if shared != 0 {
            return Err("chunk does not start at a restart point");
        }
        let key_start = at + header_len;
        reader.fill_to(key_start + non_shared)?;
        let key = reader
            .decoded()
            .get(key_start..key_start + non_shared)
            .ok_or("chunk's first key overruns the block")?;
        if comparator.compare(key, target) == Ordering::Less {
            lo = mid;
            if lo == hi {
                // The scan goes on from what the probe decoded.
                return Ok((reader, at));
            }
        } else {
            hi = mid - 1;
        }
        buffer = reader.into_buffer();
    }
    if lo == 0 {
        return Ok((SnappyReader::new(contents, buffer)?, 0));
    }
    let start = starts[lo - 1];
    Ok((SnappyReader::at_chunk(contents, start, buffer)?, start.output as usize))
}

/// Where [`scan_while_decoding`] found its entry, in the block's decoded bytes.
#[derive(Debug, Clone, Copy)]
struct DecodedEntry {
    offset: usize,
    value_start: usize,
    end: usize,
}

/// Bytes decoded past what the scan needs next, so that an entry of about this size costs
/// one call into the decoder, not two.
const SCAN_AHEAD: usize = 128;

/// The scan of [`find_while_decoding`]: the first entry whose key is at or after `target`,
/// its key left in `key`; `Ok(None)` when the scan does not settle.
fn scan_while_decoding<C>(
    reader: &mut SnappyReader<'_>,
    start: usize,
    comparator: &C,
    target: &[u8],
    key: &mut ScratchKey,
) -> std::result::Result<Option<DecodedEntry>, &'static str>
where
    C: Comparator + ?Sized,
{
    key.clear();
    let mut offset = start;
    loop {
        if reader.decoded().len() < offset + MAX_ENTRY_HEADER {
            reader.fill_to(offset + MAX_ENTRY_HEADER + SCAN_AHEAD)?;
        }
        let Some((shared, non_shared, value_len, header_len)) = reader
            .decoded()
            .get(offset..)
            .and_then(decode_entry_lengths)
        else {
            return Ok(None);
        };
        let key_delta = offset + header_len;
        let Some(end) = key_delta
            .checked_add(non_shared)
            .and_then(|n| n.checked_add(value_len))
        else {
            return Ok(None);
        };
        if reader.decoded().len() < end {
            reader.fill_to(end + SCAN_AHEAD)?;
        }
        let data = reader.decoded();
        if end > data.len() || !key.rebuild_in(shared, data, key_delta, non_shared) {
            return Ok(None);
        }
        if key.as_slice().len() < crate::key::TAG_LEN {
            return Ok(None);
        }
        if comparator.compare(key.as_slice(), target) != Ordering::Less {
            return Ok(Some(DecodedEntry {
                offset,
                value_start: key_delta + non_shared,
                end,
            }));
        }
        offset = end;
    }
}

thread_local! {
    /// What this thread's cursors did lately after a seek that read its block from the file
    /// ([`BlockIter::watch_seek`]): plus one for each that had moved off the entry the seek
    /// found when it was dropped or pointed at another block, minus one for each still on
    /// it, held within `±SEEK_HABIT_LIMIT`.
    static SEEK_HABIT: std::cell::Cell<i8> = const { std::cell::Cell::new(0) };
}

/// The bound of [`SEEK_HABIT`]: a thread that changes habits follows within this many seeks.
const SEEK_HABIT_LIMIT: i8 = 4;

/// True if this thread's cursors have mostly been dropped where their seek left them (a
/// point read through a cursor, db_bench's seekrandom): a seek then pays for decoding its
/// block only as far as its entry ([`BlockIter::seek_while_decoding`]). Cursors that go on
/// from their seek (a range query) need the whole block, which `snap` decodes faster than
/// [`SnappyReader`] does (about 740 against 900 ns a block in the profile of seeks with ten
/// steps each), so their seeks read it whole.
pub(crate) fn seeks_stay() -> bool {
    SEEK_HABIT.try_with(|h| h.get() <= 0).unwrap_or(false)
}

fn note_seek(moved: bool) {
    let _ = SEEK_HABIT.try_with(|h| {
        let step = if moved { 1 } else { -1 };
        h.set((h.get() + step).clamp(-SEEK_HABIT_LIMIT, SEEK_HABIT_LIMIT));
    });
}

/// Where a data block a cursor decompresses as it reads it is stored, and how far the
/// decode has come ([`BlockIter::seek_while_decoding`]).
///
/// The block's stored bytes (contents, then the trailer) are the `stored_len` bytes at the
/// block's file offset in `file`'s mapping, which stay valid while `file` lives; they are
/// borrowed again when the decode goes on, so the cursor holds no borrow.
struct PendingDecode {
    file: Arc<dyn RandomAccessFile>,
    stored_len: usize,
    progress: SnappyProgress,
}

impl BlockIter {
    /// Seeks the cursor in `slot` (reused, keeping its buffers, or made with
    /// `cursor_comparator`) to the first entry at or after `target` in the data block stored
    /// Snappy-compressed at `stored` (its contents, then the trailer, the checksum already
    /// checked if it is to be), which `file`'s mapping holds at `file_offset` of the file
    /// `path` names. The block is decompressed only as far as that entry: a seek that is
    /// read and dropped (db_bench's seekrandom, a get through a cursor) decodes half a block
    /// on average. The cursor decodes the rest (from where the seek stopped, or the whole
    /// block again if the seek began at a chunk), when it first
    /// needs more of the block (a step past the entry, a step back, another seek). A target
    /// past the block's entries reads the whole block.
    ///
    /// `comparator` is the cursor's comparator (concrete, so that the scan inlines it).
    /// `chunks` are where the block's chunks start (`table::chunks`): the decode begins at
    /// the one that holds the entry, and a cursor that then needs the whole block decodes it
    /// again from its start.
    ///
    /// # Errors
    /// Corruption naming the file and the block's offset if the Snappy data up to the entry,
    /// or the restart array of a block read whole, is damaged.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn seek_while_decoding<C>(
        slot: &mut Option<BlockIter>,
        cursor_comparator: &Arc<dyn Comparator>,
        comparator: &C,
        target: &[u8],
        stored: &[u8],
        chunks: &ChunkStarts,
        file: &Arc<dyn RandomAccessFile>,
        path: &Arc<Path>,
        file_offset: u64,
    ) -> Result<()>
    where
        C: Comparator + ?Sized,
    {
        let corrupt = |reason| Error::corruption(&**path, file_offset, reason);
        let contents = &stored[..stored.len() - BLOCK_TRAILER_SIZE];
        let (mut reader, start) =
            reader_at_chunk(contents, chunks, comparator, target, block_buffer).map_err(corrupt)?;
        let mut key = ScratchKey::new();
        let found = scan_while_decoding(&mut reader, start, comparator, target, &mut key);
        let Some(entry) = found.map_err(corrupt)? else {
            let data = reader.finish().map_err(corrupt)?;
            let block = Arc::new(Block::new(data, path.clone(), file_offset)?);
            let cursor = Self::aim(slot, block, cursor_comparator);
            cursor.seek(target);
            cursor.watch_seek();
            return Ok(());
        };
        let (progress, buffer) = reader.suspend();
        let block = Block::partial(buffer, entry.end, path.clone(), file_offset);
        let cursor = Self::aim(slot, Arc::new(block), cursor_comparator);
        cursor.key.rebuild(0, key.as_slice());
        cursor.current = entry.offset;
        cursor.next_offset = entry.end;
        cursor.value_start = entry.value_start;
        cursor.value_len = entry.end - entry.value_start;
        cursor.pending = Some(PendingDecode {
            file: file.clone(),
            stored_len: stored.len(),
            progress,
        });
        cursor.watch_seek();
        Ok(())
    }

    /// The cursor in `slot` pointed at `block` ([`retarget`](Self::retarget)), or a new one.
    fn aim<'s>(
        slot: &'s mut Option<BlockIter>,
        block: Arc<Block>,
        comparator: &Arc<dyn Comparator>,
    ) -> &'s mut BlockIter {
        match slot {
            Some(cursor) => {
                cursor.retarget(block);
                cursor
            }
            None => slot.insert(BlockIter::new(block, comparator.clone())),
        }
    }

    /// Finishes the block a seek decoded part way, if it did ([`PendingDecode`]), keeping
    /// the position. False if that fails: the cursor is then invalid with the error.
    #[inline]
    fn settle(&mut self) -> bool {
        self.pending.is_none() || self.finish_pending()
    }

    #[cold]
    #[inline(never)]
    fn finish_pending(&mut self) -> bool {
        let Some(pending) = self.pending.take() else {
            return true;
        };
        match self.finish_block(pending) {
            Ok(()) => true,
            Err(e) => {
                self.error.get_or_insert(e);
                self.invalidate();
                false
            }
        }
    }

    /// Decodes the rest of the partial block, from where the seek stopped (the whole block
    /// from its start if the seek began at a chunk; or, if a value
    /// handed out shares the block, from its start into a new buffer), and puts the whole
    /// block in its place. Offsets into the block stay valid: only the restart index is
    /// recomputed, by the next step.
    fn finish_block(&mut self, pending: PendingDecode) -> Result<()> {
        let PendingDecode {
            file,
            stored_len,
            progress,
        } = pending;
        let (path, file_offset) = (self.block.file.clone(), self.block.file_offset);
        let corrupt = |reason| Error::corruption(&*path, file_offset, reason);
        let stored = file
            .mapped(file_offset, stored_len)
            .filter(|bytes| bytes.len() == stored_len)
            .ok_or_else(|| corrupt("table mapping no longer holds the block"))?;
        let contents = &stored[..stored_len - BLOCK_TRAILER_SIZE];
        // A decode begun at a chunk placed the entry where the chunk map said: the whole
        // block must hold the same bytes there, or the cursor's offsets would be wrong.
        let entry = progress
            .began_at_chunk()
            .then(|| self.block.data.get(self.current..self.next_offset).map(<[u8]>::to_vec))
            .flatten();
        let data = match Arc::get_mut(&mut self.block).and_then(Block::take_heap) {
            Some(buffer) => SnappyReader::resume(contents, progress, buffer).finish(),
            None => SnappyReader::new_in(contents, block_buffer).and_then(SnappyReader::finish),
        }
        .map_err(corrupt)?;
        if entry.is_some_and(|entry| data.get(self.current..self.next_offset) != Some(&entry[..])) {
            return Err(corrupt("block's chunk map does not fit the block"));
        }
        let block = Block::new(data, path, file_offset)?;
        match Arc::get_mut(&mut self.block) {
            Some(owned) => *owned = block,
            None => self.block = Arc::new(block),
        }
        self.restart_index = 0;
        Ok(())
    }
}

impl Block {
    /// [`find`](Self::find) in a block whose every entry is a restart point: the answer is
    /// the first restart at or after `target`, searched for between the bounds the fences
    /// give. When the fences alone place it (the target's eight bytes past their prefix tie
    /// with no entry's, or with one that is its answer) only the answer's entry is read.
    #[inline(always)]
    fn find_among_restarts<C, R>(
        &self,
        fences: &RestartFences,
        comparator: &C,
        target: &[u8],
        found: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>>
    where
        C: Comparator + ?Sized,
    {
        let lo = self.first_restart_not_before(fences, comparator, target)?;
        if lo == self.num_restarts {
            return Ok(None);
        }
        let h = self.restart_entry(lo)?;
        Ok(Some(found(
            &self.data[h.key_delta..h.value_start()],
            &self.data[h.value_start()..h.end()],
        )))
    }

    /// The first restart at or after `target` (`num_restarts` if none is), searched for
    /// between the bounds `fences` give; only the restarts they leave in doubt are decoded.
    #[inline(always)]
    fn first_restart_not_before<C>(
        &self,
        fences: &RestartFences,
        comparator: &C,
        target: &[u8],
    ) -> Result<usize>
    where
        C: Comparator + ?Sized,
    {
        let (left, right) = fences.narrow(target);
        // Restart `left` is before `target` unless it is 0; restart `hi`, if there is one, is
        // not before it: the answer is in `lo..=hi`.
        let mut lo = if left > 0 { left + 1 } else { 0 };
        let mut hi = right + 1;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let h = self.restart_entry(mid)?;
            if comparator.compare(&self.data[h.key_delta..h.value_start()], target)
                == Ordering::Less
            {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// In a block whose every entry is a restart and which has fences (an index block): the
    /// position of the first entry at or after `target` (the number of entries if none is),
    /// with no entry decoded unless the fences leave it in doubt. `None` for other blocks.
    ///
    /// # Errors
    /// Corruption if an entry the search decodes is damaged.
    #[inline]
    pub(crate) fn entry_at_or_after<C>(&self, comparator: &C, target: &[u8]) -> Option<Result<usize>>
    where
        C: Comparator + ?Sized,
    {
        let fences = self.fences.as_ref().filter(|f| f.every_entry())?;
        Some(self.first_restart_not_before(fences, comparator, target))
    }

    /// Asks the CPU to fetch the first line of entry `position` of a block whose every entry
    /// is a restart, for a cursor that will read it after other work (a table cursor's seek
    /// reads its index entry after the data block's). Nothing if there is no such entry.
    #[inline]
    pub(crate) fn prefetch_entry(&self, position: usize) {
        if position < self.num_restarts {
            let offset = self.restart_point(position).min(self.data.len());
            crate::iter::prefetch_line(self.data.as_ptr() as usize + offset);
        }
    }

    /// The values of the block's entries in order, if every entry is a restart and has
    /// fences (as [`entry_at_or_after`](Self::entry_at_or_after) needs); `None` otherwise, or
    /// if an entry does not decode.
    pub(crate) fn every_entry_values(&self) -> Option<Vec<&[u8]>> {
        self.fences.as_ref().filter(|f| f.every_entry())?;
        (0..self.num_restarts)
            .map(|i| {
                let h = self.restart_entry(i).ok()?;
                Some(&self.data[h.value_start()..h.end()])
            })
            .collect()
    }

    /// The keys of the block's entries in order, if every entry is a restart and has fences
    /// (as [`every_entry_values`](Self::every_entry_values)); `None` otherwise, or if an entry
    /// does not decode.
    pub(crate) fn every_entry_keys(&self) -> Option<Vec<&[u8]>> {
        self.fences.as_ref().filter(|f| f.every_entry())?;
        (0..self.num_restarts)
            .map(|i| {
                let h = self.restart_entry(i).ok()?;
                Some(&self.data[h.key_delta..h.value_start()])
            })
            .collect()
    }

    /// Takes the block's fences out of it, for a table that keeps them beside its index's
    /// keys (`IndexKeys::from_block`); the block searches without them after.
    pub(crate) fn take_fences(&mut self) -> Option<RestartFences> {
        self.fences.take()
    }

    /// The header of restart `index`'s entry, which stores its whole key.
    ///
    /// # Errors
    /// Corruption if the entry does not decode whole or shares a prefix.
    #[inline(always)]
    fn restart_entry(&self, index: usize) -> Result<EntryHeader> {
        let offset = self.restart_point(index);
        decode_entry(&self.data, offset, self.restarts_offset)
            .filter(|h| h.shared == 0)
            .ok_or_else(|| self.corruption(offset, "bad restart entry in block"))
    }

    /// The index of the last restart point whose key is before `target` (0 if none is), by
    /// binary search over the keys stored whole at restart points; a cursor's seek and
    /// [`find`](Self::find) both start their scan there. Requires: the block has a restart.
    ///
    /// # Errors
    /// The offset of a restart entry that does not decode or shares a prefix.
    #[inline(always)]
    fn last_restart_before<C>(&self, comparator: &C, target: &[u8]) -> Result<usize, usize>
    where
        C: Comparator + ?Sized,
    {
        let (mut left, mut right) = match &self.fences {
            Some(fences) => fences.narrow(target),
            None => (0, self.num_restarts - 1),
        };
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let offset = self.restart_point(mid);
            let mid_key = decode_entry(&self.data, offset, self.restarts_offset)
                .filter(|h| h.shared == 0)
                .map(|h| &self.data[h.key_delta..h.value_start()])
                .ok_or(offset)?;
            if comparator.compare(mid_key, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        Ok(left)
    }
}

/// A range of a block's bytes that keeps the block alive: a value read without a copy (the
/// block stays in memory while it is held, even once the block cache has dropped it).
///
/// Invariant: `start <= end <= block.size()`.
#[derive(Clone)]
pub struct BlockSlice {
    block: Arc<Block>,
    start: usize,
    end: usize,
}

impl BlockSlice {
    /// True if the bytes are read in place from a table's mapping: holding them holds the
    /// table file open (and its disk space, once deleted).
    pub(crate) fn holds_file(&self) -> bool {
        self.block.is_mapped()
    }
}

impl std::ops::Deref for BlockSlice {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.block.data[self.start..self.end]
    }
}

impl std::fmt::Debug for BlockSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockSlice")
            .field("len", &(self.end - self.start))
            .field("file", &self.block.file)
            .field("file_offset", &self.block.file_offset)
            .finish()
    }
}

impl PartialEq for BlockSlice {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for BlockSlice {}

/// Keys up to this long are rebuilt on the stack by [`Block::find`].
pub(crate) const STACK_KEY_BYTES: usize = 128;

/// Key deltas up to this long are copied as one fixed-size move ([`ScratchKey::rebuild_in`]).
const WORD_COPY: usize = 16;

/// A key rebuilt from prefix-compressed entries: on the stack while it fits, then on the
/// heap.
struct ScratchKey {
    stack: [u8; STACK_KEY_BYTES],
    len: usize,
    /// Holds the key once one did not fit on the stack (and from then on).
    heap: Option<Vec<u8>>,
}

impl ScratchKey {
    fn new() -> Self {
        ScratchKey {
            stack: [0; STACK_KEY_BYTES],
            len: 0,
            heap: None,
        }
    }

    /// [`rebuild`](Self::rebuild) with the delta `bytes[start..start + non_shared]`, where
    /// `bytes` goes on past it (the entry's value follows its key): a delta of at most
    /// [`WORD_COPY`] bytes is copied as one fixed-size move (bytes past the key land in the
    /// stack buffer beyond `len`, unread), not a `memcpy` call of a length known only now.
    /// Requires: `start + non_shared <= bytes.len()`.
    #[inline(always)]
    fn rebuild_in(&mut self, shared: usize, bytes: &[u8], start: usize, non_shared: usize) -> bool {
        if non_shared <= WORD_COPY && self.heap.is_none() && shared <= self.len {
            if let (Some(src), Some(dst)) = (
                bytes.get(start..start + WORD_COPY),
                self.stack.get_mut(shared..shared + WORD_COPY),
            ) {
                dst.copy_from_slice(src);
                self.len = shared + non_shared;
                return true;
            }
        }
        self.rebuild(shared, &bytes[start..start + non_shared])
    }

    /// Keeps the first `shared` bytes and appends `delta`; false if fewer than `shared` bytes
    /// are there.
    #[inline]
    fn rebuild(&mut self, shared: usize, delta: &[u8]) -> bool {
        let len = shared + delta.len();
        if self.heap.is_none() && shared <= self.len && len <= STACK_KEY_BYTES {
            self.stack[shared..len].copy_from_slice(delta);
            self.len = len;
            return true;
        }
        self.rebuild_spilled(shared, delta)
    }

    /// [`rebuild`](Self::rebuild) for a key that is, or is becoming, too long for the stack
    /// (and for the damaged entry that shares more than there is).
    #[cold]
    fn rebuild_spilled(&mut self, shared: usize, delta: &[u8]) -> bool {
        if shared > self.len {
            return false;
        }
        let len = shared + delta.len();
        match &mut self.heap {
            // Not on the heap yet: the fast path turned it away, so it no longer fits.
            None => {
                let mut heap = Vec::with_capacity(len);
                heap.extend_from_slice(&self.stack[..shared]);
                heap.extend_from_slice(delta);
                self.heap = Some(heap);
            }
            Some(heap) => {
                heap.truncate(shared);
                heap.extend_from_slice(delta);
            }
        }
        self.len = len;
        true
    }

    /// Forgets the key (a kept heap buffer stays for the next one).
    #[inline]
    fn clear(&mut self) {
        self.len = 0;
        if let Some(heap) = &mut self.heap {
            heap.clear();
        }
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        match &self.heap {
            None => &self.stack[..self.len],
            Some(heap) => heap,
        }
    }
}

/// The decoded header of one entry.
#[derive(Debug, Clone, Copy)]
struct EntryHeader {
    shared: usize,
    non_shared: usize,
    value_len: usize,
    /// Offset of the key delta; the value follows it.
    key_delta: usize,
}

impl EntryHeader {
    fn value_start(&self) -> usize {
        self.key_delta + self.non_shared
    }

    fn end(&self) -> usize {
        self.value_start() + self.value_len
    }
}

/// The longest entry header: three varint32s.
const MAX_ENTRY_HEADER: usize = 15;

/// True if `new` is greater than `old` in bytewise order: the unshared parts of two keys of
/// a block. Their first bytes decide without a call to `memcmp` when they differ, as they do
/// after every entry but a restart (a writer shares the longest common prefix; only a
/// restart shares none and leaves a whole key to compare).
#[inline(always)]
fn suffix_greater(new: &[u8], old: &[u8]) -> bool {
    match (new.first(), old.first()) {
        (Some(a), Some(b)) if a != b => a > b,
        _ => new > old,
    }
}

/// Decodes an entry's three lengths at the start of `src`: `(shared, non_shared, value_len,
/// header bytes)`. The one-byte case is inlined into every step; longer lengths go out of line.
#[inline(always)]
fn decode_entry_lengths(src: &[u8]) -> Option<(usize, usize, usize, usize)> {
    match src {
        [a, b, c, ..] if (a | b | c) < 0x80 => Some((*a as usize, *b as usize, *c as usize, 3)),
        _ => decode_entry_varints(src),
    }
}

/// [`decode_entry_lengths`] when a length takes more than one byte (or `src` is short).
#[inline(never)]
fn decode_entry_varints(src: &[u8]) -> Option<(usize, usize, usize, usize)> {
    let (shared, a) = decode_varint32(src)?;
    let (non_shared, b) = decode_varint32(&src[a..])?;
    let (value_len, c) = decode_varint32(&src[a + b..])?;
    Some((
        shared as usize,
        non_shared as usize,
        value_len as usize,
        a + b + c,
    ))
}

/// Decodes the header of the entry at `offset`, checking that the whole entry ends by `limit`.
#[inline]
fn decode_entry(data: &[u8], offset: usize, limit: usize) -> Option<EntryHeader> {
    let src = data.get(offset..limit)?;
    let (shared, non_shared, value_len, header_len) = decode_entry_lengths(src)?;
    if src.len() - header_len < non_shared.checked_add(value_len)? {
        return None;
    }
    Some(EntryHeader {
        shared,
        non_shared,
        value_len,
        key_delta: offset + header_len,
    })
}

/// Appends to the keys in `buf[..used]` the key that an entry encodes against the key before
/// it, `buf[prev..used]`: that key's first `shared` bytes, then the `non_shared` bytes at
/// `bytes[start..]`. Returns where the new key ends; `None` if `shared` is more than the key
/// before it holds. `buf` only grows (zero-filled, doubling; the bytes past `used` are left
/// over from earlier runs), so that each copy lands in a slice already there: a prefix of up
/// to 32 bytes is two fixed-size moves ([`copy_key_bytes`]) and a delta of at most
/// [`WORD_COPY`] bytes one, whose bytes past the key land beyond it, unread, where the next
/// key is written over them.
///
/// The key is built where it is kept, from the bytes of the key before it, not rebuilt in a
/// scratch key and copied from there: a copy that read the scratch key just after the delta
/// was stored into its middle would wait for that store (a load that spans two stores is not
/// forwarded from them), on every entry of a backward scan.
/// Requires: `prev <= used` and `start + non_shared <= bytes.len()`.
#[inline]
fn append_shared_key(
    buf: &mut Vec<u8>,
    prev: usize,
    used: usize,
    shared: usize,
    bytes: &[u8],
    start: usize,
    non_shared: usize,
) -> Option<usize> {
    if shared > used - prev {
        return None;
    }
    let end = used + shared + non_shared;
    let room = used + shared + non_shared.max(WORD_COPY);
    if buf.len() < room {
        buf.resize(room.max(2 * buf.len()), 0);
    }
    let (before, after) = buf.split_at_mut(used);
    copy_key_bytes(&mut after[..shared], &before[prev..prev + shared]);
    let delta = &mut after[shared..];
    match bytes.get(start..start + WORD_COPY) {
        Some(word) if non_shared <= WORD_COPY => delta[..WORD_COPY].copy_from_slice(word),
        _ => delta[..non_shared].copy_from_slice(&bytes[start..start + non_shared]),
    }
    Some(end)
}

/// One entry of the restart run cached for backward iteration.
#[derive(Debug, Clone, Copy)]
struct RunEntry {
    offset: usize,
    next_offset: usize,
    key_end: usize,
    value_start: usize,
    value_len: usize,
}

/// A cursor over a [`Block`].
///
/// Moving forward decodes one entry per step into a reused key buffer. Moving backward decodes
/// the whole restart run before the current entry once, into reused buffers, and then steps
/// back through it without decoding again; so a backward scan costs about what a forward scan
/// does, and neither allocates per entry once the buffers have grown.
pub struct BlockIter {
    block: Arc<Block>,
    comparator: Arc<dyn Comparator>,
    /// Offset of the current entry; `restarts_offset` when the cursor is not on an entry.
    current: usize,
    /// Offset just past the current entry.
    next_offset: usize,
    /// A hint for backward steps: the restart run of the entry a seek or a backward step
    /// landed on. Forward steps do not move it (the step stays a decode and a copy), so it
    /// may lag behind the current entry; `load_run_before` checks it.
    restart_index: usize,
    /// The current key: rebuilt on the stack while it fits, so a cursor over short keys
    /// allocates nothing for them.
    key: ScratchKey,
    value_start: usize,
    value_len: usize,
    error: Option<Error>,
    /// Keys of the cached run, back to back, and the run's entries. `run_pos` is the current
    /// entry's index in `run`, when the cursor got there backward; `None` otherwise.
    run_keys: Vec<u8>,
    run: Vec<RunEntry>,
    run_pos: Option<usize>,
    /// While `run_pos` is `Some`: where the current key lies in `run_keys`. `key` is then
    /// not the current key (stepping back copies no key); it is rebuilt from the run when the
    /// cursor steps forward out of it, which decodes the next entry against it.
    run_key: (usize, usize),
    /// Set while `block` is a partial block a seek decoded only as far as the current entry
    /// ([`BlockIter::seek_while_decoding`]); every move but the step onto the current entry
    /// finishes it first ([`settle`](Self::settle)).
    pending: Option<PendingDecode>,
    /// Set by a seek that read its block from the file to the offset of the entry it found:
    /// when the cursor is dropped or pointed at another block, whether it is still there is
    /// noted for [`seeks_stay`] (read there, so that a step pays nothing for it).
    watched: Option<usize>,
}

impl Drop for BlockIter {
    fn drop(&mut self) {
        self.note_watched();
    }
}

impl BlockIter {
    fn new(block: Arc<Block>, comparator: Arc<dyn Comparator>) -> Self {
        let end = block.restarts_offset;
        BlockIter {
            block,
            comparator,
            current: end,
            next_offset: end,
            restart_index: 0,
            key: ScratchKey::new(),
            value_start: 0,
            value_len: 0,
            error: None,
            run_keys: Vec::new(),
            run: Vec::new(),
            run_pos: None,
            run_key: (0, 0),
            pending: None,
            watched: None,
        }
    }

    /// Points this cursor at `block`, unpositioned, as [`Block::iter`] with this cursor's
    /// comparator would, but keeping the buffers of its key and its cached run.
    pub(crate) fn retarget(&mut self, block: Arc<Block>) {
        self.note_watched();
        // Every field named, so that a new one cannot be forgotten here.
        let BlockIter {
            block: old_block,
            comparator: _,
            current,
            next_offset,
            restart_index,
            key,
            value_start,
            value_len,
            error,
            run_keys,
            run,
            run_pos,
            run_key,
            pending,
            watched: _,
        } = self;
        *current = block.restarts_offset;
        *next_offset = block.restarts_offset;
        *old_block = block;
        *restart_index = 0;
        key.clear();
        *value_start = 0;
        *value_len = 0;
        *error = None;
        run_keys.clear();
        run.clear();
        *run_pos = None;
        *run_key = (0, 0);
        *pending = None;
    }

    /// Marks the seek just made as one that read its block from the file: whether the cursor
    /// then moves on is noted for [`seeks_stay`].
    pub(crate) fn watch_seek(&mut self) {
        self.watched = Some(self.current);
    }

    /// Notes, for a watched seek, whether the cursor moved on from the entry it found (a
    /// step back and forth to it again counts as moving only if it stepped back).
    fn note_watched(&mut self) {
        if let Some(found) = self.watched.take() {
            note_seek(self.current != found || self.run_pos.is_some());
        }
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_offset;
        self.next_offset = self.current;
        self.run_pos = None;
    }

    fn fail(&mut self, offset: usize, reason: &'static str) {
        if self.error.is_none() {
            self.error = Some(self.block.corruption(offset, reason));
        }
        self.invalidate();
    }

    /// Decodes the entry at `next_offset` onto the current key. Returns false at the end of the
    /// block or on corruption.
    fn parse_next(&mut self) -> bool {
        self.run_pos = None;
        let offset = self.next_offset;
        let limit = self.block.restarts_offset;
        if offset >= limit {
            return self.parse_past_entries();
        }
        let Some(h) = decode_entry(&self.block.data, offset, limit) else {
            self.fail(offset, "bad entry in block");
            return false;
        };
        if !self
            .key
            .rebuild_in(h.shared, &self.block.data, h.key_delta, h.non_shared)
        {
            self.fail(offset, "block entry shares more than the previous key");
            return false;
        }
        self.current = offset;
        self.next_offset = h.end();
        self.value_start = h.value_start();
        self.value_len = h.value_len;
        true
    }

    /// A forward step that a database cursor may take without looking further: onto the next
    /// entry of this block, if that entry is a value (not a deletion, a range deletion or a
    /// blob pointer) with a sequence number at most `seqno`, whose user key is greater than
    /// the current one in bytewise order. Returns the entry's key and value (as `key` and
    /// `value` would), and its user key's and value's lengths summed. `None`, having moved
    /// nothing, if the entry is not such an entry, if there is none in this block, or if the
    /// cursor is not stepping forward through decoded entries (on no entry, in a backward
    /// run, or in a partly decoded block). A damaged entry is left to
    /// [`next`](InternalIterator::next) to report.
    ///
    /// The step decodes the entry as `next` would; what it saves is the caller's: no merge,
    /// no comparison of user keys, no copy of the key before it.
    #[inline(never)]
    pub(crate) fn next_plain(&mut self, seqno: u64) -> Option<(&[u8], &[u8], usize)> {
        self.next_plain_inlined(seqno)
    }

    /// [`next_plain`](Self::next_plain), always inlined: for a walk's lane, whose loop takes up
    /// to eight such steps a call, so that no step pays a call's prologue and epilogue. The
    /// cursor's own step (`MergingIter::next_plain_in_block`) calls `next_plain`, which stays
    /// out of line: inlined there, it made that step longer (callgrind, 0.7% more
    /// instructions a readseq pass).
    #[inline(always)]
    pub(crate) fn next_plain_inlined(&mut self, seqno: u64) -> Option<(&[u8], &[u8], usize)> {
        if self.run_pos.is_some() || self.pending.is_some() || !self.valid() {
            return None;
        }
        let offset = self.next_offset;
        let data = &self.block.data;
        let h = decode_entry(data, offset, self.block.restarts_offset)?;
        // The user keys agree on the shared prefix (whatever prefix the writer chose to share:
        // a restart shares none), so the rest of each decides.
        let user_len = self.key.len.checked_sub(TAG_LEN)?;
        if h.shared > user_len || h.non_shared < TAG_LEN {
            return None;
        }
        let tag_at = h.value_start() - TAG_LEN;
        if !suffix_greater(
            data.get(h.key_delta..tag_at)?,
            &self.key.as_slice()[h.shared..user_len],
        ) {
            return None;
        }
        let tag = decode_fixed64(data.get(tag_at..)?)?;
        if tag as u8 != ValueKind::Value as u8 || tag >> 8 > seqno {
            return None;
        }
        if !self.key.rebuild_in(h.shared, data, h.key_delta, h.non_shared) {
            return None;
        }
        self.current = offset;
        self.next_offset = h.end();
        self.value_start = h.value_start();
        self.value_len = h.value_len;
        let value = &data[h.value_start()..h.end()];
        Some((
            self.key.as_slice(),
            value,
            h.shared + h.non_shared - TAG_LEN + h.value_len,
        ))
    }

    /// True if the block has an entry after the current one (decoded or not).
    #[inline]
    pub(crate) fn has_next_in_block(&self) -> bool {
        self.valid() && (self.next_offset < self.block.restarts_offset || self.pending.is_some())
    }

    /// [`parse_next`](Self::parse_next) at the end of the block's entries: the end of the
    /// block, or of a partial block's, whose rest is then decoded and read on. Out of line,
    /// so that the step through a block stays small.
    #[cold]
    #[inline(never)]
    fn parse_past_entries(&mut self) -> bool {
        if self.pending.is_some()
            && self.finish_pending()
            && self.next_offset < self.block.restarts_offset
        {
            return self.parse_next();
        }
        self.invalidate();
        false
    }

    /// Puts the cursor on entry `position` of a block whose every entry is a restart (the
    /// positions [`Block::entry_at_or_after`] gives); past the end if the block has no such
    /// entry.
    pub(crate) fn seek_to_entry(&mut self, position: usize) {
        if !self.settle() {
            return;
        }
        if position >= self.block.num_restarts {
            self.invalidate();
            return;
        }
        self.seek_to_restart(position);
        self.parse_next();
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.next_offset = self.block.restart_point(index);
        self.run_pos = None;
    }

    /// Decodes every entry of the restart run that holds the entry just before `before`, up to
    /// `before`, into the run cache, and moves to the last of them.
    fn load_run_before(&mut self, before: usize) {
        if !self.settle() {
            return;
        }
        if before == 0 || self.block.num_restarts == 0 {
            self.invalidate();
            return;
        }
        // The run holding the entry before `before` starts at the last restart point < before:
        // the hint's run or the one before it when stepping back (a backward scan), else found
        // by halving (after forward steps, which do not keep the hint).
        let restarts = self.block.num_restarts;
        let mut index = self.restart_index.min(restarts - 1);
        if index > 0 && self.block.restart_point(index) >= before {
            index -= 1;
        }
        let starts_run = |i: usize| self.block.restart_point(i) < before;
        if !(starts_run(index) && (index + 1 == restarts || !starts_run(index + 1))) {
            let (mut lo, mut hi) = (0, restarts);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if starts_run(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            index = lo;
        }
        self.run.clear();
        let limit = self.block.restarts_offset;
        let mut offset = self.block.restart_point(index);
        // Each key is built in `run_keys` at `used` from the key before it, at `prev`
        // (`append_shared_key`). `key` is left as it was: once the cursor is in the run, the
        // run holds its key, and a step forward out of it rebuilds `key` from there.
        let (mut prev, mut used) = (0, 0);
        while offset < before {
            let Some(h) = decode_entry(&self.block.data, offset, limit) else {
                self.fail(offset, "bad entry in block");
                return;
            };
            let Some(end) = append_shared_key(
                &mut self.run_keys,
                prev,
                used,
                h.shared,
                &self.block.data,
                h.key_delta,
                h.non_shared,
            ) else {
                self.fail(offset, "block entry shares more than the previous key");
                return;
            };
            (prev, used) = (used, end);
            self.run.push(RunEntry {
                offset,
                next_offset: h.end(),
                key_end: used,
                value_start: h.value_start(),
                value_len: h.value_len,
            });
            offset = h.end();
        }
        if offset != before {
            // The run's entries do not end where the next entry starts.
            self.fail(offset, "bad entry in block");
            return;
        }
        let Some(last) = self.run.len().checked_sub(1) else {
            self.invalidate();
            return;
        };
        self.restart_index = index;
        self.set_run_position(last);
    }

    /// The current entry's index in the restart run this cursor decoded stepping backward
    /// ([`run_entry`](Self::run_entry)); `None` if the cursor got to its entry otherwise.
    #[inline]
    pub(crate) fn run_position(&self) -> Option<usize> {
        self.run_pos
    }

    /// The internal key and the value of entry `i` of the decoded run. Requires: `i` at most
    /// [`run_position`](Self::run_position).
    #[inline]
    pub(crate) fn run_entry(&self, i: usize) -> (&[u8], &[u8]) {
        let entry = &self.run[i];
        let key_start = match i.checked_sub(1) {
            Some(before) => self.run[before].key_end,
            None => 0,
        };
        (
            &self.run_keys[key_start..entry.key_end],
            &self.block.data[entry.value_start..entry.value_start + entry.value_len],
        )
    }

    /// Moves back to entry `i` of the decoded run, where as many [`prev`](InternalIterator::prev)
    /// steps would have. Requires: `i` at most [`run_position`](Self::run_position).
    #[inline]
    pub(crate) fn move_back_in_run(&mut self, i: usize) {
        debug_assert!(self.run_pos.is_some_and(|p| i <= p));
        self.set_run_position(i);
    }

    fn set_run_position(&mut self, pos: usize) {
        let entry = self.run[pos];
        let key_start = if pos == 0 {
            0
        } else {
            self.run[pos - 1].key_end
        };
        self.run_key = (key_start, entry.key_end);
        self.current = entry.offset;
        self.next_offset = entry.next_offset;
        self.value_start = entry.value_start;
        self.value_len = entry.value_len;
        self.run_pos = Some(pos);
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.current < self.block.restarts_offset
    }

    fn seek_to_first(&mut self) {
        if !self.settle() {
            return;
        }
        if self.block.num_restarts == 0 {
            self.invalidate();
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        if !self.settle() {
            return;
        }
        let end = self.block.restarts_offset;
        self.restart_index = self.block.num_restarts.saturating_sub(1);
        self.load_run_before(end);
    }

    fn seek(&mut self, target: &[u8]) {
        if !self.settle() {
            return;
        }
        if self.block.num_restarts == 0 {
            self.invalidate();
            return;
        }
        match self.block.last_restart_before(&*self.comparator, target) {
            Ok(restart) => self.seek_to_restart(restart),
            Err(offset) => return self.fail(offset, "bad restart entry in block"),
        }
        while self.parse_next() {
            if self.comparator.compare(self.key.as_slice(), target) != Ordering::Less {
                return;
            }
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        match self.run_pos {
            Some(pos) if pos + 1 < self.run.len() => self.set_run_position(pos + 1),
            Some(_) => {
                // Out of the run: the next entry is decoded against `key`. It is a restart
                // (sharing nothing) or the entry the run was loaded before, whose key `key`
                // still holds; rebuilt from the run all the same, so that this does not rest
                // on how the run was entered (once per run, and only when turning forward).
                let (start, end) = self.run_key;
                // From nothing shared: always rebuilds.
                self.key.rebuild(0, &self.run_keys[start..end]);
                self.parse_next();
            }
            None => {
                self.parse_next();
            }
        }
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        match self.run_pos {
            Some(pos) if pos > 0 => self.set_run_position(pos - 1),
            _ => self.load_run_before(self.current),
        }
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid());
        match self.run_pos {
            Some(_) => &self.run_keys[self.run_key.0..self.run_key.1],
            None => self.key.as_slice(),
        }
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid());
        &self.block.data[self.value_start..self.value_start + self.value_len]
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
