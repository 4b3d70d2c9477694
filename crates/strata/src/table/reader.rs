// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Table`]: an open table file, and [`TableIter`], its cursor.
//!
//! Opening a table reads its footer, index block and (with a filter policy) its metaindex and
//! filter block, verifying their checksums. Data blocks are read on demand, through the block
//! cache when there is one. Everything read is checked: handles against the file's size,
//! checksums (when asked), block structure. Damage is a corruption error naming the file and
//! the offset of the damaged block.
//!
//! Locking: a `Table` is immutable after open and shared by `Arc`; reads are positional and need
//! no lock. The block cache has its own locks.

use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::block::{find_while_decoding, reader_at_chunk, Block, BlockIter, HotForms};
use super::chunks::{self, ChunkStarts};
use super::filter_block::FilterBlockReader;
use super::index::{IndexCursor, IndexKeys, TableIndex};
use super::format::{
    expand_stored_block, mapped_block, read_block, read_exact_at, read_footer, verify_stored_block,
    BlockHandle,
    Compression, BLOCK_TRAILER_SIZE, FOOTER_SIZE,
};
use super::TableOptions;
use crate::cache::BlockCache;
use crate::coding::Decoder;
use crate::comparator::{BytewiseComparator, Comparator};
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::iter::{BlockLane, InternalIterator, SecondLevel, TwoLevelIter};
use crate::key::{user_key, InternalKeyComparator, ParsedInternalKey, ValueKind};

/// How one read treats blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockReadOptions {
    /// Verify the checksum of every data block read from the file (a block found in the
    /// block cache is not read from the file). A block of a mapped table is read in place
    /// from the mapping (decompressed from it, or searched where it lies) on every read; see
    /// `trust_verified` for when it is verified again.
    pub verify_checksums: bool,
    /// With `verify_checksums`, a compressed block of a mapped table that this table verified
    /// since it was opened is not verified again: the mapping serves it as the block cache
    /// serves a block it holds, as bytes already checked. What that misses: damage arising on
    /// the disk after the first check, while the table stays open, in a page the kernel
    /// dropped and read again. A block stored uncompressed is verified on every read all the
    /// same (the check's pass brings it into the CPU cache for the search in place). False
    /// makes every read verify every block it reads: compaction's inputs (damage must not be
    /// rewritten under a fresh checksum), repair, `Table::verify`.
    pub trust_verified: bool,
    /// Offer blocks read from the file to the block cache, which keeps a block at its second
    /// recent offer ([`BlockCache::offer`]).
    pub fill_cache: bool,
    /// The cursor reads each block once, front to back (a compaction reading its inputs): the
    /// table's mapped pages it has passed are taken out of the process's resident memory as
    /// it goes ([`RandomAccessFile::release_resident`], once per MiB of the file, and for the
    /// rest when the cursor is dropped). Point lookups ignore it.
    pub release_behind: bool,
}

impl Default for BlockReadOptions {
    /// Verify checksums (strata's default, unlike LevelDB's) and fill the cache.
    fn default() -> Self {
        BlockReadOptions {
            verify_checksums: true,
            trust_verified: true,
            fill_cache: true,
            release_behind: false,
        }
    }
}

/// Where the index keeps a data block's entry, whose value after the handle says where the
/// block's chunks start (`table::chunks`): read only when the block is decoded part way.
#[derive(Debug, Clone, Copy)]
enum IndexSpot {
    /// The entry at this position (restart) of the index block.
    Position(usize),
    /// The starts, read already.
    Chunks(ChunkStarts),
}

/// What the block cache's door keeper said of a block a point lookup missed
/// ([`BlockCache::admit`]).
#[derive(Debug, Clone, Copy)]
enum Door {
    /// Not asked: the lookup reads the block whole and offers it.
    NotAsked,
    /// The cache takes the block.
    Admitted,
    /// The cache does not take it this time (the miss is remembered).
    Declined,
}

/// What [`Table::streamable`] found a data block to be.
enum Streamable<'t> {
    /// Stored compressed in the mapping, and not to be cached: its stored bytes.
    Stream(&'t [u8]),
    /// To be read whole: what the door keeper said, and true if its checksum was verified.
    Whole(Door, bool),
}

/// The largest buffer a thread keeps for decompressing blocks part way (larger ones, for
/// blocks far over the default size, are freed after use).
const MAX_KEPT_DECODE_BUFFER: usize = 256 << 10;

thread_local! {
    /// The buffer a point lookup decompresses a block into part way
    /// ([`Table::find_while_decoding`]): taken for the decode and put back after, so a
    /// lookup allocates no block buffer and touches memory the last one warmed.
    static DECODE_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An open table.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use std::sync::Arc;
/// use strata::{Env, MemEnv};
/// use strata::key::{append_internal_key, ValueKind};
/// use strata::table::{BlockReadOptions, Table, TableBuilder, TableOptions};
///
/// let env = MemEnv::new();
/// let path = Path::new("/000005.ldb");
/// let mut builder = TableBuilder::new(TableOptions::default(), env.new_writable_file(path).unwrap());
/// let mut key = Vec::new();
/// append_internal_key(&mut key, b"apple", 1, ValueKind::Value);
/// builder.add(&key, b"red").unwrap();
/// let size = builder.finish(true).unwrap();
///
/// let file = env.new_random_access_file(path).unwrap();
/// let table = Arc::new(Table::open(TableOptions::default(), file, path, size, None).unwrap());
/// let value = table.get(&BlockReadOptions::default(), &key, |_k, v| v.to_vec()).unwrap();
/// assert_eq!(value.as_deref(), Some(&b"red"[..]));
/// ```
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<Path>,
    /// The offset of the footer: every block must end by here.
    data_end: u64,
    /// The order of the table's keys: `icmp` for point lookups (called directly), and the
    /// same as a trait object for cursors.
    icmp: InternalKeyComparator,
    icmp_dyn: Arc<dyn Comparator>,
    /// True if the user keys are in bytewise order: the index and cached data blocks then
    /// carry fences ([`Block::with_fences`]).
    bytewise: bool,
    /// The index: its keys alone when `block_offsets` holds the handles (and the comparator
    /// is bytewise), else the index block ([`TableIndex`]).
    index: TableIndex,
    /// Where the index block is in the file, for the walks that read its values again
    /// (`verify`, `salvage`, `data_blocks`) when only its keys are kept.
    index_block_handle: BlockHandle,
    /// The data blocks' offsets, decoded from the index at open, in index order, then the end
    /// of the last block's trailer: a table's data blocks lie back to back, so block `i` is
    /// the `offsets[i + 1] - offsets[i] - BLOCK_TRAILER_SIZE` bytes at `offsets[i]` (4 bytes a
    /// block where a whole handle would take 8). A point lookup takes its handle from here by
    /// the position the index's fences give, decoding no index entry (but the block's chunk
    /// map, read from its entry when the block is decoded part way). `None` when the index
    /// has no fences over every entry, or its blocks are not back to back, or an offset does
    /// not fit in 32 bits ([`block_offsets`]).
    block_offsets: Option<Box<[u32]>>,
    /// Beside `block_offsets` (same positions), where each data block's second chunk starts
    /// (`ChunkStarts::packed`, 0 for a block compressed whole or stored uncompressed), from
    /// the chunk maps in the index entries: a lookup that decodes a block part way starts
    /// there without reading the index entry (a cache miss: 5.8% of readrandom's time when it
    /// did). `None` when no block has one (every LevelDB table), or `block_offsets` is.
    block_cuts: Option<Box<[u32]>>,
    metaindex: BlockHandle,
    filter: Option<FilterBlockReader>,
    cache: Option<Arc<BlockCache>>,
    /// This table's key space in the block cache.
    cache_id: u64,
    /// True if the last data block read from the file was stored uncompressed (a hint, Relaxed:
    /// a table's blocks are nearly always all compressed or all not). Such a block is read in place
    /// from the mapping (the cache holds only the search forms of hot ones, looked for first
    /// when `hot_forms` says one may live); a compressed one is looked for in the cache first.
    raw_blocks: AtomicBool,
    /// The search forms of this table's blocks read in place that are alive (in the cache).
    hot_forms: Arc<HotForms>,
    /// Versions' files holding the table (`TablePin`s): while any does, the table cache keeps
    /// it (a relaxed count, changed only when a pin is made or dropped).
    version_pins: AtomicUsize,
    /// One bit per data block (in index order, as `block_offsets`): set once the block's
    /// checksum was verified in the mapping, so that reads trusting it
    /// (`BlockReadOptions::trust_verified`) skip the check. Empty when the offsets were not
    /// kept. Relaxed: a bit seen late costs one more check, never a skipped one (a bit is set
    /// only after its block passed).
    verified_blocks: Box<[AtomicU64]>,
}

/// The data blocks' offsets and the end of the last one's trailer (see `Table::block_offsets`),
/// from the index's values in order; `None` if a value is not a handle, the blocks are not
/// back to back, an offset does not fit in 32 bits, or there is no block.
pub(super) fn block_offsets(values: Vec<&[u8]>) -> Option<Box<[u32]>> {
    let mut offsets = Vec::with_capacity(values.len() + 1);
    let mut end: Option<u64> = None;
    for value in values {
        let handle = BlockHandle::decode(value)?;
        if end.is_some_and(|end| end != handle.offset) {
            return None;
        }
        offsets.push(u32::try_from(handle.offset).ok()?);
        end = Some(
            handle
                .offset
                .checked_add(handle.size)?
                .checked_add(BLOCK_TRAILER_SIZE as u64)?,
        );
    }
    offsets.push(u32::try_from(end?).ok()?);
    Some(offsets.into_boxed_slice())
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("size", &self.file_len())
            .finish()
    }
}

impl Table {
    /// Opens the table in `file`, which is `file_size` bytes long (the size the MANIFEST
    /// records). `path` names it in errors.
    ///
    /// # Errors
    /// Corruption if the footer, index, metaindex or filter block is damaged; an I/O error if
    /// reading fails.
    pub fn open(
        options: TableOptions,
        file: Arc<dyn RandomAccessFile>,
        path: &Path,
        file_size: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Table> {
        let footer = read_footer(&*file, path, file_size)?;
        let data_end = file_size - FOOTER_SIZE as u64;
        let path: Arc<Path> = Arc::from(path);
        let index_data = read_block(&*file, &path, data_end, footer.index, true)?;
        let mut index = Block::new(index_data, path.clone(), footer.index.offset)?;
        let bytewise = options.comparator.is_bytewise();
        if bytewise {
            index = index.with_fences();
        }
        let values = index.every_entry_values();
        let block_offsets = values.clone().and_then(block_offsets);
        let block_cuts = values.filter(|_| block_offsets.is_some()).and_then(|values| {
            let cuts: Box<[u32]> = values
                .iter()
                .map(|value| {
                    let size = BlockHandle::decode(value).map_or(0, |h| h.size);
                    chunks::after_handle(value, size).packed()
                })
                .collect();
            cuts.iter().any(|&c| c != 0).then_some(cuts)
        });
        let verified_blocks = block_offsets
            .as_ref()
            .map_or(0, |o| (o.len() - 1).div_ceil(64));
        let verified_blocks = (0..verified_blocks).map(|_| AtomicU64::new(0)).collect();
        // With the handles and chunk starts kept apart, the index's keys are all a table
        // needs of it; the decompressed block goes.
        let kept_keys = block_offsets
            .as_ref()
            .and_then(|_| IndexKeys::from_block(&mut index));
        let index = match kept_keys {
            Some(keys) => TableIndex::Keys(Arc::new(keys)),
            None => TableIndex::Block(Arc::new(index)),
        };
        // The blocks after the data blocks: read once here, and held copied.
        let mut meta_start = footer.index.offset.min(footer.metaindex.offset);
        let filter = match &options.filter_policy {
            None => None,
            Some(policy) => {
                let name = format!("filter.{}", policy.name());
                read_meta_entry(&*file, &path, data_end, footer.metaindex, name.as_bytes())?
                    .map(|handle| -> Result<FilterBlockReader> {
                        meta_start = meta_start.min(handle.offset);
                        let data = read_block(&*file, &path, data_end, handle, true)?;
                        Ok(FilterBlockReader::new(policy.clone(), data))
                    })
                    .transpose()?
            }
        };
        // Their pages, and the footer's, need not stay in memory (0.34 MB of 33 tables of 2 MiB
        // each: docs/benchmarks.md, "peak memory across sizes").
        file.release_resident(meta_start, file_size.saturating_sub(meta_start));
        let cache_id = cache.as_ref().map_or(0, |c| c.new_table_id());
        Ok(Table {
            file,
            path,
            data_end,
            icmp: InternalKeyComparator::new(options.comparator.clone()),
            icmp_dyn: Arc::new(InternalKeyComparator::new(options.comparator)),
            bytewise,
            index,
            index_block_handle: footer.index,
            block_offsets,
            block_cuts,
            metaindex: footer.metaindex,
            filter,
            cache,
            cache_id,
            raw_blocks: AtomicBool::new(false),
            hot_forms: Arc::new(HotForms::new()),
            version_pins: AtomicUsize::new(0),
            verified_blocks,
        })
    }

    /// The word and bit of `verified_blocks` for the data block at `offset`, if the offsets
    /// were kept and a block starts there.
    fn verified_bit(&self, offset: u64) -> Option<(&AtomicU64, u64)> {
        let offsets = self.block_offsets.as_deref()?;
        let offset = u32::try_from(offset).ok()?;
        // The last offset is the end of the last block, no block's start.
        let i = offsets[..offsets.len() - 1].binary_search(&offset).ok()?;
        Some((self.verified_blocks.get(i / 64)?, 1 << (i % 64)))
    }

    /// Verifies the checksum of `stored` (the data block at `handle`, as it lies in the
    /// mapping, with its trailer) as `options` asks: not at all, or unless this table
    /// verified it before and `options` trusts that (`BlockReadOptions::trust_verified`).
    fn verify_mapped(
        &self,
        handle: BlockHandle,
        stored: &[u8],
        options: &BlockReadOptions,
    ) -> Result<()> {
        if !options.verify_checksums {
            return Ok(());
        }
        let bit = self.verified_bit(handle.offset);
        if options.trust_verified {
            if let Some((word, mask)) = bit {
                if word.load(Ordering::Relaxed) & mask != 0 {
                    return Ok(());
                }
            }
        }
        verify_stored_block(stored)
            .map_err(|reason| Error::corruption(&*self.path, handle.offset, reason))?;
        if let Some((word, mask)) = bit {
            word.fetch_or(mask, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The index's block handles as kept at open, if kept (`Table::block_offsets`).
    #[cfg(test)]
    pub(crate) fn index_handles(&self) -> Option<Vec<BlockHandle>> {
        let count = self.block_offsets.as_ref()?.len() - 1;
        (0..count).map(|i| self.index_handle(i)).collect()
    }

    /// True if the table keeps its index's keys alone ([`TableIndex::Keys`]), not the block.
    #[cfg(test)]
    pub(crate) fn keeps_index_keys(&self) -> bool {
        matches!(self.index, TableIndex::Keys(_))
    }

    /// True if a cursor's seek finds its index entry without the index cursor (the offsets
    /// kept and the index's fences covering every entry: `TableIter::seek`).
    #[cfg(test)]
    pub(crate) fn locates_seeks(&self) -> bool {
        self.index_position(b"").is_some()
    }

    /// The handle of the data block at `position` in the index, from the offsets kept at
    /// open; `None` past the last block, or if they were not kept.
    #[inline]
    fn index_handle(&self, position: usize) -> Option<BlockHandle> {
        let offsets = self.block_offsets.as_deref()?;
        let (&start, &next) = (offsets.get(position)?, offsets.get(position + 1)?);
        Some(BlockHandle {
            offset: start.into(),
            // At least the trailer's size: `block_offsets` made them so.
            size: u64::from(next - start) - BLOCK_TRAILER_SIZE as u64,
        })
    }

    /// Counts a version's file holding the table (`TablePin`).
    pub(crate) fn pin(&self) {
        self.version_pins.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a version's file letting the table go.
    pub(crate) fn unpin(&self) {
        self.version_pins.fetch_sub(1, Ordering::Relaxed);
    }

    /// True while a version's file holds the table.
    pub(crate) fn is_pinned(&self) -> bool {
        self.version_pins.load(Ordering::Relaxed) > 0
    }

    /// The path the table was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True if the table has a filter block this reader uses.
    pub fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// Reads the data block at `handle`: in place from the mapping when it is stored
    /// uncompressed there (never cached itself; its search form is once it is hot), else from
    /// the cache when it is there, else from the file. Which is tried first follows the last
    /// block read ([`Table::raw_blocks`]).
    ///
    /// A read that fills the cache and hits a cached block the second time caches the block's
    /// search form in its place ([`Block::searchable`]). Cursors make them too: their seeks
    /// search a block as a point lookup does (seekrandom was 2% slower when only lookups
    /// made them), and a scan reads most blocks once, which the door keeper does not cache.
    fn data_block(&self, handle: BlockHandle, options: &BlockReadOptions) -> Result<Arc<Block>> {
        if let Some(block) = self.resident_block(handle, options)? {
            return Ok(block);
        }
        self.read_whole(handle, options, Door::NotAsked, false)
    }

    /// The data block at `handle`, not in memory, read whole (its checksum verified if
    /// `options` asks and it is not `checked` already), and cached as the door keeper said:
    /// inserted if admitted, offered if not asked, left out if deferred. A block read in place
    /// from the mapping is never cached.
    fn read_whole(
        &self,
        handle: BlockHandle,
        options: &BlockReadOptions,
        door: Door,
        checked: bool,
    ) -> Result<Arc<Block>> {
        let read = BlockReadOptions {
            verify_checksums: options.verify_checksums && !checked,
            ..*options
        };
        let (block, in_mapping) = self.read_data_block(handle, &read)?;
        if options.fill_cache && !in_mapping {
            if let Some(cache) = &self.cache {
                // The cache keeps a copy the size of the block's search form: the block read
                // goes back to this thread's spare buffer when the read is done.
                let copy = || block.cache_copy().map_or_else(|| block.clone(), Arc::new);
                match door {
                    Door::Admitted => cache.insert(self.cache_id, handle.offset, copy()),
                    Door::NotAsked => {
                        if cache.admit(self.cache_id, handle.offset) {
                            cache.insert(self.cache_id, handle.offset, copy());
                        }
                    }
                    Door::Declined => {}
                }
            }
        }
        Ok(block)
    }

    /// The data block at `handle` if it is in memory: stored uncompressed in the mapping (looked
    /// for first when the last block read was), or in the cache.
    fn resident_block(
        &self,
        handle: BlockHandle,
        options: &BlockReadOptions,
    ) -> Result<Option<Arc<Block>>> {
        let raw_first = self.raw_blocks.load(Ordering::Relaxed);
        if raw_first {
            // A hot block's search form may be cached; the block itself never is.
            if let Some(cache) = self.cache.as_ref().filter(|_| self.hot_forms.may_hold(handle.offset)) {
                if let Some(block) = cache.get(self.cache_id, handle.offset) {
                    return Ok(Some(block));
                }
            }
            if let Some(block) = self.block_in_mapping(handle, options)? {
                return Ok(Some(self.cache_if_hot(handle, options, block)));
            }
            self.raw_blocks.store(false, Ordering::Relaxed);
        }
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.get(self.cache_id, handle.offset) {
                // A block hit twice is worth its search form (a block cached but evicted
                // before its second hit, as most are under random reads over a database
                // larger than the cache, never pays for one).
                if options.fill_cache && block.second_hit() {
                    if let Some(searchable) = block.searchable(self.bytewise) {
                        let searchable = Arc::new(searchable);
                        cache.replace(self.cache_id, handle.offset, searchable.clone());
                        return Ok(Some(searchable));
                    }
                }
                return Ok(Some(block));
            }
        }
        Ok(None)
    }

    /// `block`, just read in place from the mapping (its checksum verified if `options`
    /// asks), as the read returns it: at its fourth miss within the door keeper's window (a
    /// hot block: `BlockCache::admit_at_fourth_miss`), its search form, cached; else itself.
    /// Reading a mapped block again costs a checksum pass and a search without fences (about
    /// 0.55 µs a readhot get on a 1M database without compression, against 0.31 from the
    /// search forms of compressed blocks); caching its form costs a copy, which a block read
    /// only twice in a while under random reads would not repay.
    fn cache_if_hot(&self, handle: BlockHandle, options: &BlockReadOptions, block: Block) -> Arc<Block> {
        if options.fill_cache {
            if let Some(cache) = &self.cache {
                if cache.admit_at_fourth_miss(self.cache_id, handle.offset) {
                    if let Some(form) = block.searchable(self.bytewise) {
                        let form = Arc::new(form.marked(self.hot_forms.mark(handle.offset)));
                        cache.insert(self.cache_id, handle.offset, form.clone());
                        return form;
                    }
                }
            }
        }
        Arc::new(block)
    }

    /// The data block at `handle`, read from the file (whole, decompressed), and true if it is
    /// read in place from the mapping (stored uncompressed: not cached; `cache_if_hot` caches
    /// the search forms of hot ones on the reads that follow).
    fn read_data_block(
        &self,
        handle: BlockHandle,
        options: &BlockReadOptions,
    ) -> Result<(Arc<Block>, bool)> {
        let block = match mapped_block(&*self.file, &self.path, self.data_end, handle)? {
            Some(stored) if stored[stored.len() - BLOCK_TRAILER_SIZE] == Compression::None as u8 => {
                if let Some(block) = self.block_in_mapping(handle, options)? {
                    self.raw_blocks.store(true, Ordering::Relaxed);
                    return Ok((Arc::new(block), true));
                }
                self.read_from_file(handle, options)?
            }
            // Checked and decompressed where it lies: one look at the mapping.
            Some(stored) => {
                self.verify_mapped(handle, stored, options)?;
                Block::new(
                    expand_stored_block(stored, false)
                        .map_err(|reason| Error::corruption(&*self.path, handle.offset, reason))?,
                    self.path.clone(),
                    handle.offset,
                )?
            }
            None => self.read_from_file(handle, options)?,
        };
        Ok((Arc::new(block), false))
    }

    /// A point lookup in the data block at `handle`, which is not in memory, when the block is
    /// stored compressed with Snappy in the mapping and the cache will not keep it (the door
    /// keeper defers it, or the read does not fill the cache): the block is checked, then
    /// decompressed only as far as the entry found ([`find_while_decoding`]), into a buffer
    /// each thread reuses. `Ok(Err(found))` hands `found` back, with what the door keeper said,
    /// when the lookup needs the whole block (not mapped, not Snappy, admitted to the cache,
    /// or a scan that does not settle), and true if the block's checksum has been verified
    /// since (if `options` asks): the door keeper is asked only of a checked block.
    fn find_while_decoding<R, F>(
        &self,
        handle: BlockHandle,
        spot: IndexSpot,
        options: &BlockReadOptions,
        target: &[u8],
        found: F,
    ) -> Result<std::result::Result<Option<R>, (F, Door, bool)>>
    where
        F: FnOnce(Option<&Arc<Block>>, &[u8], &[u8]) -> R,
    {
        let stored = match self.streamable(handle, options)? {
            Streamable::Stream(stored) => stored,
            Streamable::Whole(door, checked) => return Ok(Err((found, door, checked))),
        };
        let size = stored.len() - BLOCK_TRAILER_SIZE;
        let corrupt = |reason| Error::corruption(&*self.path, handle.offset, reason);
        let door = if options.fill_cache && self.cache.is_some() {
            Door::Declined
        } else {
            Door::NotAsked
        };
        let chunks = self.chunk_starts(spot);
        let (mut reader, start) =
            reader_at_chunk(&stored[..size], &chunks, &self.icmp, target, |_| DECODE_BUFFER.take())
                .map_err(corrupt)?;
        let mut slot = Some(found);
        let answer = find_while_decoding(&mut reader, start, &self.icmp, target, |k, v| {
            let found = slot.take().expect("find_while_decoding calls `found` at most once");
            found(None, k, v)
        });
        let buffer = reader.into_buffer();
        if buffer.len() <= MAX_KEPT_DECODE_BUFFER {
            DECODE_BUFFER.set(buffer);
        }
        match answer.map_err(corrupt)? {
            Some(r) => Ok(Ok(Some(r))),
            None => Ok(Err((
                slot.expect("`found` is not called when the scan does not settle"),
                door,
                true,
            ))),
        }
    }

    /// Whether the data block at `handle`, not in memory, can be decompressed part way: its
    /// stored bytes ([`Streamable::Stream`]) if it is stored compressed with Snappy in the
    /// mapping and the cache will not keep it (the door keeper declines it, or the read does
    /// not fill the cache), checked if `options` asks; else what the door keeper said, and
    /// whether the checksum has been verified since (the door keeper is asked only of a
    /// checked block, so that a damaged block is neither counted nor admitted, and the whole
    /// read that follows need not check it again).
    fn streamable(&self, handle: BlockHandle, options: &BlockReadOptions) -> Result<Streamable<'_>> {
        let Some(stored) = mapped_block(&*self.file, &self.path, self.data_end, handle)? else {
            return Ok(Streamable::Whole(Door::NotAsked, false));
        };
        let size = stored.len() - BLOCK_TRAILER_SIZE;
        if stored[size] != Compression::Snappy as u8 {
            return Ok(Streamable::Whole(Door::NotAsked, false));
        }
        self.verify_mapped(handle, stored, options)?;
        if options.fill_cache {
            if let Some(cache) = &self.cache {
                if cache.admit(self.cache_id, handle.offset) {
                    return Ok(Streamable::Whole(Door::Admitted, true));
                }
            }
        }
        Ok(Streamable::Stream(stored))
    }

    /// The block at `handle` read from the file (with `pread`, or out of the mapping).
    fn read_from_file(&self, handle: BlockHandle, options: &BlockReadOptions) -> Result<Block> {
        let data = read_block(
            &*self.file,
            &self.path,
            self.data_end,
            handle,
            options.verify_checksums,
        )?;
        Block::new(data, self.path.clone(), handle.offset)
    }

    /// The block at `handle` read in place, if the table is mapped and the block is stored
    /// uncompressed: no copy, no cache (the mapping is the page cache's). Its checksum is
    /// verified on every read, as a block read from the file always is; the checksum's pass
    /// also brings the block into the CPU cache, so the search that follows does not miss entry
    /// by entry.
    fn block_in_mapping(
        &self,
        handle: BlockHandle,
        options: &BlockReadOptions,
    ) -> Result<Option<Block>> {
        // A look at the type byte first, so that a compressed block costs no reference count.
        let Some(stored) = mapped_block(&*self.file, &self.path, self.data_end, handle)? else {
            return Ok(None);
        };
        let size = stored.len() - BLOCK_TRAILER_SIZE;
        if stored[size] != Compression::None as u8 {
            return Ok(None);
        }
        let corrupt = |reason| Error::corruption(&*self.path, handle.offset, reason);
        Block::in_mapping(
            self.file.clone(),
            handle.offset,
            stored.len(),
            size,
            self.path.clone(),
            |stored| {
                if stored[size] != Compression::None as u8 {
                    return Ok(false);
                }
                if options.verify_checksums {
                    verify_stored_block(stored).map_err(corrupt)?;
                }
                Ok(true)
            },
        )
    }

    fn decode_handle(&self, index_value: &[u8], index_key_offset: u64) -> Result<BlockHandle> {
        BlockHandle::decode(index_value).ok_or_else(|| {
            Error::corruption(&*self.path, index_key_offset, "bad block handle in index")
        })
    }

    /// Looks up `internal_key`: finds the first entry at or after it, and if one is in the
    /// table, returns `found(key, value)` of that entry. The caller checks whether its user key
    /// is the one it wants. Skips the data block when the filter rules the user key out.
    pub fn get<R>(
        &self,
        options: &BlockReadOptions,
        internal_key: &[u8],
        found: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>> {
        self.get_in_block(options, internal_key, |_, k, v| found(k, v))
    }

    /// [`get`](Self::get), also handing `found` the data block the key and value lie in, so
    /// that it can keep the value without copying it ([`Block::slice`]); `None` when they lie
    /// in a block decompressed only part way into a buffer the thread reuses, and must be
    /// copied to be kept.
    pub(crate) fn get_in_block<R>(
        &self,
        options: &BlockReadOptions,
        internal_key: &[u8],
        found: impl FnOnce(Option<&Arc<Block>>, &[u8], &[u8]) -> R,
    ) -> Result<Option<R>> {
        let Some((handle, spot)) = self.data_block_for(internal_key)? else {
            return Ok(None);
        };
        if self.filter_rules_out(handle, internal_key) {
            return Ok(None);
        }
        if let Some(block) = self.resident_block(handle, options)? {
            return block.find(&self.icmp, internal_key, |k, v| found(Some(&block), k, v));
        }
        let (found, door, checked) =
            match self.find_while_decoding(handle, spot, options, internal_key, found)? {
                Ok(answer) => return Ok(answer),
                Err(back) => back,
            };
        let block = self.read_whole(handle, options, door, checked)?;
        block.find(&self.icmp, internal_key, |k, v| found(Some(&block), k, v))
    }

    /// True if the table certainly holds no entry with `internal_key`'s user key at or after
    /// `internal_key`: it has no entry at or after it at all, or the filter rules the user key
    /// out of the one data block that would hold it. Reads no data block. False when it cannot
    /// tell (no filter) or the index is damaged (a seek then reports it).
    pub(crate) fn rules_out(&self, internal_key: &[u8]) -> bool {
        match self.data_block_for(internal_key) {
            Ok(None) => true,
            Ok(Some((handle, _))) => self.filter_rules_out(handle, internal_key),
            Err(_) => false,
        }
    }

    /// True if the filter rules `internal_key`'s user key out of the data block at `handle`
    /// (false without a filter).
    fn filter_rules_out(&self, handle: BlockHandle, internal_key: &[u8]) -> bool {
        self.filter
            .as_ref()
            .is_some_and(|f| !f.key_may_match(handle.offset, user_key(internal_key)))
    }

    /// The handle of the first data block whose last key is at or after `internal_key` (the
    /// only block that may hold it), and where its index entry is; `None` if every key in the
    /// table is before it.
    fn data_block_for(&self, internal_key: &[u8]) -> Result<Option<(BlockHandle, IndexSpot)>> {
        let found = match self.index_position(internal_key) {
            Some(position) => {
                let position = position?;
                let Some(handle) = self.index_handle(position) else {
                    return Ok(None);
                };
                (handle, IndexSpot::Position(position))
            }
            None => {
                // A table keeping its index's keys always has a position (`index_position`).
                let TableIndex::Block(index) = &self.index else {
                    return Ok(None);
                };
                let Some(found) = index.find(&self.icmp, internal_key, |_, value| {
                    let handle = self.decode_handle(value, self.metaindex.offset)?;
                    Ok((handle, IndexSpot::Chunks(chunks::after_handle(value, handle.size))))
                })?
                else {
                    return Ok(None);
                };
                found?
            }
        };
        Ok(Some(found))
    }

    /// The position of the first index entry at or after `internal_key`, found by the index's
    /// fences without the index cursor, when the block offsets were kept (so that the entry's
    /// handle is [`index_handle`](Self::index_handle)); `None` when they were not, or the
    /// fences do not cover every entry.
    #[inline]
    fn index_position(&self, internal_key: &[u8]) -> Option<Result<usize>> {
        self.block_offsets.as_ref()?;
        self.index.entry_at_or_after(&self.icmp, internal_key)
    }

    /// Where the chunks of a data block start, its index entry at `spot`.
    fn chunk_starts(&self, spot: IndexSpot) -> ChunkStarts {
        match spot {
            IndexSpot::Chunks(chunks) => chunks,
            IndexSpot::Position(position) => self
                .block_cuts
                .as_deref()
                .and_then(|cuts| cuts.get(position))
                .map_or_else(ChunkStarts::default, |&cut| ChunkStarts::unpacked(cut)),
        }
    }

    /// What a walk reads ahead after (`forward`) or before the data block at `handle`: the
    /// range's offset in the file and its length, or `None`.
    #[cfg(test)]
    pub(crate) fn read_ahead_range(
        self: &Arc<Self>,
        handle: BlockHandle,
        forward: bool,
    ) -> Option<(u64, usize)> {
        let blocks = DataBlocks {
            table: self.clone(),
            options: BlockReadOptions::default(),
            released: Cell::new(0),
            spare: Cell::new(None),
        };
        let bytes = if forward {
            blocks.expect_next(handle)
        } else {
            blocks.expect_previous(handle)
        }?;
        let base = self.file.mapped(0, 1)?.as_ptr() as usize;
        Some(((bytes.as_ptr() as usize - base) as u64, bytes.len()))
    }

    /// A cursor over the table's entries.
    pub fn iter(self: &Arc<Self>, options: BlockReadOptions) -> TableIter {
        let blocks = DataBlocks {
            table: self.clone(),
            options,
            released: Cell::new(0),
            spare: Cell::new(None),
        };
        TableIter(TwoLevelIter::new(self.index.cursor(&self.icmp_dyn), blocks))
    }

    /// Visits every entry of every data block that can be read, block by block, skipping the
    /// blocks that cannot (bad checksum, bad structure). For repair: it keeps what a normal scan,
    /// which stops at the first damage, would lose after it. Returns the number of blocks
    /// skipped and the first error among them.
    pub fn salvage(&self, mut visit: impl FnMut(&[u8], &[u8])) -> (usize, Option<Error>) {
        let read = BlockReadOptions {
            verify_checksums: true,
            trust_verified: false,
            fill_cache: false,
            release_behind: false,
        };
        let index = match self.index_block() {
            Ok(index) => index,
            Err(e) => return (1, Some(e)),
        };
        let mut index = index.iter(self.icmp_dyn.clone());
        let (mut skipped, mut first_error) = (0, None);
        index.seek_to_first();
        while index.valid() {
            let block = self
                .decode_handle(index.value(), self.metaindex.offset)
                .and_then(|handle| self.data_block(handle, &read));
            match block {
                Ok(block) => {
                    let mut it = block.iter(self.icmp_dyn.clone());
                    it.seek_to_first();
                    while it.valid() {
                        visit(it.key(), it.value());
                        it.next();
                    }
                    if let Err(e) = it.status() {
                        skipped += 1;
                        first_error.get_or_insert(e);
                    }
                }
                Err(e) => {
                    skipped += 1;
                    first_error.get_or_insert(e);
                }
            }
            index.next();
        }
        if let Err(e) = index.status() {
            skipped += 1;
            first_error.get_or_insert(e);
        }
        (skipped, first_error)
    }

    /// Reads every block of the table (metaindex, meta blocks, index, every data block),
    /// verifying every checksum, the structure of every block, that every key is a valid
    /// internal key, that keys ascend through the whole table, and that each index entry is at
    /// or above the last key of its block. Damage does not stop the walk: each damaged block is
    /// reported once and the next one is read, so the result lists everything that is wrong.
    ///
    /// Reads bypass the block cache.
    ///
    /// # Example
    ///
    /// ```
    /// use std::path::Path;
    /// use std::sync::Arc;
    /// use strata::{Env, MemEnv};
    /// use strata::key::{append_internal_key, ValueKind};
    /// use strata::table::{Table, TableBuilder, TableOptions};
    ///
    /// let env = MemEnv::new();
    /// let path = Path::new("/000005.ldb");
    /// let mut builder = TableBuilder::new(TableOptions::default(), env.new_writable_file(path).unwrap());
    /// for (seqno, key) in [b"apple", b"melon"].into_iter().enumerate() {
    ///     let mut ikey = Vec::new();
    ///     append_internal_key(&mut ikey, key, seqno as u64 + 1, ValueKind::Value);
    ///     builder.add(&ikey, b"fruit").unwrap();
    /// }
    /// let size = builder.finish(true).unwrap();
    /// let file = env.new_random_access_file(path).unwrap();
    /// let table = Table::open(TableOptions::default(), file, path, size, None).unwrap();
    /// let verified = table.verify();
    /// assert!(verified.damage.is_empty());
    /// assert_eq!((verified.entries, verified.value_bytes), (2, 10));
    /// ```
    pub fn verify(&self) -> TableVerification {
        let mut v = TableVerification::default();
        self.verify_meta_blocks(&mut v);
        let index = match self.index_block() {
            Ok(index) => index,
            Err(e) => {
                v.damage.push(e);
                return v;
            }
        };
        let mut index = index.iter(self.icmp_dyn.clone());
        index.seek_to_first();
        let mut last_key: Option<Vec<u8>> = None;
        while index.valid() {
            v.index_entries += 1;
            match self.decode_handle(index.value(), self.metaindex.offset) {
                Ok(handle) => {
                    let (key, value) = (index.key(), index.value());
                    self.verify_data_block(handle, key, value, &mut last_key, &mut v)
                }
                Err(e) => v.damage.push(e),
            }
            index.next();
        }
        if let Err(e) = index.status() {
            v.damage.push(e);
        }
        v.largest = last_key;
        // Read once, front to back: a check of a large database leaves no table resident.
        self.file.release_resident(0, self.file_len());
        v
    }

    fn verify_meta_blocks(&self, v: &mut TableVerification) {
        let data = match read_block(&*self.file, &self.path, self.data_end, self.metaindex, true) {
            Ok(data) => data,
            Err(e) => return v.damage.push(e),
        };
        let block = match Block::new(data, self.path.clone(), self.metaindex.offset) {
            Ok(block) => Arc::new(block),
            Err(e) => return v.damage.push(e),
        };
        let mut it = block.iter(Arc::new(BytewiseComparator));
        it.seek_to_first();
        while it.valid() {
            let Some(handle) = BlockHandle::decode(it.value()) else {
                v.damage.push(Error::corruption(
                    &*self.path,
                    self.metaindex.offset,
                    "bad block handle in metaindex",
                ));
                break;
            };
            match read_block(&*self.file, &self.path, self.data_end, handle, true) {
                Ok(_) => {
                    if let Some(name) = it.key().strip_prefix(b"filter.") {
                        v.filter_name = Some(String::from_utf8_lossy(name).into_owned());
                        v.filter_bytes += handle.size;
                    }
                }
                Err(e) => v.damage.push(e),
            }
            it.next();
        }
        if let Err(e) = it.status() {
            v.damage.push(e);
        }
    }

    /// Reads one data block for [`Table::verify`]; `last_key` is the table's last key so far.
    fn verify_data_block(
        &self,
        handle: BlockHandle,
        index_key: &[u8],
        index_value: &[u8],
        last_key: &mut Option<Vec<u8>>,
        v: &mut TableVerification,
    ) {
        let corrupt = |reason: &'static str| Error::corruption(&*self.path, handle.offset, reason);
        let data = match read_block(&*self.file, &self.path, self.data_end, handle, true) {
            Ok(data) => data,
            Err(e) => return v.damage.push(e),
        };
        v.data_blocks += 1;
        v.stored_data_bytes += handle.size;
        v.raw_data_bytes += data.len() as u64;
        // A map that does not fit is damage, but readers ignore it (they decode from the
        // block's start), so the block's entries are checked all the same.
        match self.verify_chunks(handle, index_value, &data) {
            Ok(chunked) => v.chunked_blocks += u64::from(chunked),
            Err(e) => v.damage.push(e),
        }
        let block = match Block::new(data, self.path.clone(), handle.offset) {
            Ok(block) => Arc::new(block),
            Err(e) => return v.damage.push(e),
        };
        let mut it = block.iter(self.icmp_dyn.clone());
        it.seek_to_first();
        let mut block_has_entries = false;
        while it.valid() {
            let Some(parsed) = ParsedInternalKey::parse(it.key()) else {
                return v
                    .damage
                    .push(corrupt("entry with a malformed internal key"));
            };
            if let Some(prev) = last_key.as_deref() {
                if self.icmp.compare(prev, it.key()) != std::cmp::Ordering::Less {
                    return v.damage.push(corrupt("keys out of order"));
                }
            }
            v.entries += 1;
            if parsed.kind == ValueKind::Deletion {
                v.deletions += 1;
            }
            v.key_bytes += parsed.user_key.len() as u64;
            v.value_bytes += it.value().len() as u64;
            if v.smallest.is_none() {
                v.smallest = Some(it.key().to_vec());
            }
            let key = last_key.get_or_insert_with(Vec::new);
            key.clear();
            key.extend_from_slice(it.key());
            block_has_entries = true;
            it.next();
        }
        if let Err(e) = it.status() {
            return v.damage.push(e);
        }
        if let (true, Some(last)) = (block_has_entries, last_key.as_deref()) {
            if self.icmp.compare(last, index_key) == std::cmp::Ordering::Greater {
                v.damage
                    .push(corrupt("index entry is below the last key of its block"));
            }
        }
    }

    /// Checks the chunk map in the index entry `index_value` of the data block at `handle`
    /// (read whole and decompressed as `data`, its checksum verified) against the block
    /// (`chunks::check_chunks`): true if it has one, false for an entry that holds only its
    /// handle.
    fn verify_chunks(&self, handle: BlockHandle, index_value: &[u8], data: &[u8]) -> Result<bool> {
        let corrupt = |reason: &'static str| Error::corruption(&*self.path, handle.offset, reason);
        // The caller decoded the handle: `None` is the map's.
        let starts = chunks::read_map(index_value, handle.size)
            .ok_or_else(|| corrupt("index entry's chunk map is malformed"))?;
        if starts.is_empty() {
            // Bytes after the handle that are no chunk map: another writer's, ignored.
            return Ok(false);
        }
        let read;
        let stored = match mapped_block(&*self.file, &self.path, self.data_end, handle)? {
            Some(stored) => stored,
            None => {
                let mut buf = vec![0u8; handle.size as usize + BLOCK_TRAILER_SIZE];
                read_exact_at(&*self.file, &self.path, handle.offset, &mut buf)?;
                read = buf;
                &read[..]
            }
        };
        let size = stored.len() - BLOCK_TRAILER_SIZE;
        if stored[size] != Compression::Snappy as u8 {
            return Err(corrupt("index entry maps chunks of a block not stored with Snappy"));
        }
        chunks::check_chunks(&stored[..size], data, &starts).map_err(corrupt)?;
        Ok(true)
    }

    /// Where each data block is, and the internal keys of its entries: the table's layout,
    /// for tools and tests that need to know which records a damaged byte range holds.
    ///
    /// # Errors
    /// The first damaged block met, as a corruption error.
    pub fn data_blocks(&self) -> Result<Vec<(BlockHandle, Vec<Vec<u8>>)>> {
        let read = BlockReadOptions {
            verify_checksums: true,
            trust_verified: false,
            fill_cache: false,
            release_behind: false,
        };
        let mut out = Vec::new();
        let mut index = self.index_block()?.iter(self.icmp_dyn.clone());
        index.seek_to_first();
        while index.valid() {
            let handle = self.decode_handle(index.value(), self.metaindex.offset)?;
            let block = self.data_block(handle, &read)?;
            let mut it = block.iter(self.icmp_dyn.clone());
            it.seek_to_first();
            let mut keys = Vec::new();
            while it.valid() {
                keys.push(it.key().to_vec());
                it.next();
            }
            it.status()?;
            out.push((handle, keys));
            index.next();
        }
        index.status()?;
        Ok(out)
    }

    /// The index block, for the walks that read its entries' values: the one kept, or read
    /// again from the file (not cached) when only its keys are kept.
    ///
    /// # Errors
    /// Corruption if the block is damaged now; an I/O error if reading it fails.
    fn index_block(&self) -> Result<Arc<Block>> {
        match &self.index {
            TableIndex::Block(block) => Ok(block.clone()),
            TableIndex::Keys(_) => {
                let handle = self.index_block_handle;
                let data = read_block(&*self.file, &self.path, self.data_end, handle, true)?;
                Ok(Arc::new(Block::new(data, self.path.clone(), handle.offset)?))
            }
        }
    }

    /// The table file's length: its data, meta and index blocks, and the footer.
    fn file_len(&self) -> u64 {
        self.data_end + FOOTER_SIZE as u64
    }

    /// The approximate file offset where the data for `internal_key` is, or would be.
    pub fn approximate_offset_of(&self, internal_key: &[u8]) -> u64 {
        if let Some(Ok(position)) = self.index_position(internal_key) {
            return self
                .index_handle(position)
                .map_or(self.metaindex.offset, |handle| handle.offset);
        }
        let TableIndex::Block(index) = &self.index else {
            return self.metaindex.offset;
        };
        let mut index = index.iter(self.icmp_dyn.clone());
        index.seek(internal_key);
        if index.valid() {
            if let Some(handle) = BlockHandle::decode(index.value()) {
                return handle.offset;
            }
        }
        // Past the last key (or a damaged index): near the end of the file.
        self.metaindex.offset
    }
}

/// What [`Table::verify`] found: the table's contents in figures, and every piece of damage.
#[derive(Debug, Clone, Default)]
pub struct TableVerification {
    /// Entries read, deletions included.
    pub entries: u64,
    /// Of those, deletion markers.
    pub deletions: u64,
    /// Data blocks read whole.
    pub data_blocks: u64,
    /// Of those, blocks compressed in chunks that decode alone (strata's Snappy blocks; see
    /// `table::chunks` in the architecture notes), each chunk checked against the block.
    pub chunked_blocks: u64,
    /// Entries in the index block (one per data block the table was written with).
    pub index_entries: u64,
    /// Bytes of user keys read.
    pub key_bytes: u64,
    /// Bytes of values read.
    pub value_bytes: u64,
    /// Bytes of the data blocks read as stored (compressed), without their trailers.
    pub stored_data_bytes: u64,
    /// Bytes of the same blocks after decompression.
    pub raw_data_bytes: u64,
    /// The filter policy named in the metaindex (`leveldb.BuiltinBloomFilter2`), if any.
    pub filter_name: Option<String>,
    /// Bytes of the filter block.
    pub filter_bytes: u64,
    /// The first internal key read.
    pub smallest: Option<Vec<u8>>,
    /// The last internal key read.
    pub largest: Option<Vec<u8>>,
    /// Every damaged piece: each a corruption (or I/O) error naming the file and the offset.
    pub damage: Vec<Error>,
}

/// Reads the metaindex block and returns the handle stored under `name`, if any.
fn read_meta_entry(
    file: &dyn RandomAccessFile,
    path: &Arc<Path>,
    data_end: u64,
    metaindex: BlockHandle,
    name: &[u8],
) -> Result<Option<BlockHandle>> {
    let data = read_block(file, path, data_end, metaindex, true)?;
    let block = Arc::new(Block::new(data, path.clone(), metaindex.offset)?);
    let mut it = block.iter(Arc::new(BytewiseComparator));
    it.seek(name);
    if it.valid() && it.key() == name {
        let mut d = Decoder::new(it.value());
        return BlockHandle::decode_from(&mut d)
            .map(Some)
            .ok_or_else(|| Error::corruption(&**path, metaindex.offset, "bad filter handle"));
    }
    it.status()?;
    Ok(None)
}

/// A cursor over a table: walks the index block, and the data block each index entry names.
pub struct TableIter(TwoLevelIter<DataBlocks>);

/// Opens the data blocks of a table's index entries for [`TableIter`].
struct DataBlocks {
    table: Arc<Table>,
    options: BlockReadOptions,
    /// With `options.release_behind`: the file offset below which the cursor has released the
    /// table's pages (a multiple of [`RELEASE_ALIGN`]).
    released: Cell<u64>,
    /// The block cursor of the table this cursor was on before [`TableIter::retarget`], for
    /// the first block it opens in this one: its key and run buffers are kept.
    spare: Cell<Option<BlockIter>>,
}

/// A cursor that releases the pages behind it ([`BlockReadOptions::release_behind`]) does so
/// once it is this far past the last release: one `madvise` per MiB of a compaction's input.
pub(crate) const RELEASE_STEP: u64 = 1 << 20;

/// Releases start and end at multiples of this, a multiple of every page size Linux has on
/// the machines strata builds for, so that no page straddling two releases is kept by both.
const RELEASE_ALIGN: u64 = 64 << 10;

impl DataBlocks {
    /// A release-behind cursor is about to read the block at `handle`: once it is
    /// [`RELEASE_STEP`] past the last release, the pages before the block's aligned start go.
    /// Gets that read those pages meanwhile map them again from the page cache.
    #[inline]
    fn passing(&self, handle: BlockHandle) {
        if self.options.release_behind {
            self.release_before(handle);
        }
    }

    /// [`passing`](Self::passing)'s work, out of line: the cursors of reads (every cursor
    /// but a compaction's) only test the flag. Inline, it made readreverse 3% slower.
    #[cold]
    #[inline(never)]
    fn release_before(&self, handle: BlockHandle) {
        let from = self.released.get();
        if handle.offset >= from.saturating_add(RELEASE_STEP) {
            let to = handle.offset - handle.offset % RELEASE_ALIGN;
            self.table.file.release_resident(from, to - from);
            self.released.set(to);
        }
    }
}

impl DataBlocks {
    /// What a release-behind cursor's drop releases: the table from where it last released.
    #[cold]
    #[inline(never)]
    fn release_rest(&self) {
        let from = self.released.get();
        let end = self.table.file_len();
        self.table
            .file
            .release_resident(from, end.saturating_sub(from));
    }
}

impl Drop for DataBlocks {
    /// A release-behind cursor releases the rest of the table it read.
    fn drop(&mut self) {
        if self.options.release_behind {
            self.release_rest();
        }
    }
}

/// The stored length (contents and trailer) to read ahead for the block beside the one at
/// `handle`, which is about as long: that block's own and a quarter more (blocks end where an
/// entry does, so their lengths vary; the first byte a load reads is the type byte at the
/// block's end), up to 64 KiB (a damaged handle asks for no more). After the last data block
/// this reaches into the filter and index blocks, never past the footer: harmless.
fn neighbour_len(handle: BlockHandle) -> u64 {
    const MAX_READ_AHEAD: u64 = 64 << 10;
    let len = handle.size.saturating_add(BLOCK_TRAILER_SIZE as u64);
    len.saturating_add(len / 4).min(MAX_READ_AHEAD)
}

impl SecondLevel for DataBlocks {
    type Index = IndexCursor;
    type Iter = BlockIter;
    type Id = BlockHandle;

    /// The block cursor, bounded by the index entry's key (at or after each key of the block:
    /// a separator, or the block's last key).
    #[inline]
    fn lane<'a>(
        index: &'a IndexCursor,
        data: &'a mut BlockIter,
        _steps: usize,
    ) -> Option<BlockLane<'a>> {
        (data.valid() && index.valid()).then(|| BlockLane {
            cursor: data,
            bound: index.key(),
        })
    }

    /// From the kept block offsets when the index keeps only its keys, else decoded from the
    /// index entry's value.
    fn id(&self, index: &IndexCursor) -> Result<BlockHandle> {
        match index.position() {
            Some(position) => self.table.index_handle(position).ok_or_else(|| {
                Error::corruption(
                    &*self.table.path,
                    self.table.index_block_handle.offset,
                    "index entry past the table's block offsets",
                )
            }),
            None => self
                .table
                .decode_handle(index.value(), self.table.metaindex.offset),
        }
    }

    #[inline]
    fn open(&self, _: &IndexCursor, handle: BlockHandle) -> Result<BlockIter> {
        self.passing(handle);
        let block = self.table.data_block(handle, &self.options)?;
        Ok(block.iter(self.table.icmp_dyn.clone()))
    }

    /// Data blocks lie back to back, each with its trailer, and are of about one size: the
    /// block after `handle` starts where it ends and is about as long. Measured on a scan of
    /// a 1M-entry database (readseq): without a prefetch, the first read of each block (its
    /// type byte, at its end) missed the CPU cache, 5% of the scan's time; a prefetch of the
    /// next two blocks was slower than of one.
    fn expect_next(&self, handle: BlockHandle) -> Option<&[u8]> {
        let start = handle
            .offset
            .saturating_add(handle.size)
            .saturating_add(BLOCK_TRAILER_SIZE as u64);
        let end = start
            .saturating_add(neighbour_len(handle))
            .min(self.table.data_end);
        let len = usize::try_from(end.checked_sub(start)?).ok()?;
        self.table.file.mapped(start, len)
    }

    /// As [`expect_next`](Self::expect_next): the block before `handle` is about as long and
    /// ends where it starts.
    fn expect_previous(&self, handle: BlockHandle) -> Option<&[u8]> {
        let len = neighbour_len(handle).min(handle.offset);
        self.table
            .file
            .mapped(handle.offset - len, usize::try_from(len).ok()?)
    }

    /// The cursor of the previous block, if any, is pointed at the new one: same comparator,
    /// its key and run buffers kept.
    #[inline]
    fn open_into(
        &self,
        _: &IndexCursor,
        handle: BlockHandle,
        slot: &mut Option<BlockIter>,
    ) -> Result<()> {
        self.passing(handle);
        let block = self.table.data_block(handle, &self.options)?;
        self.take_spare(slot);
        self.aim(block, slot);
        Ok(())
    }

    /// A block not in memory, stored compressed in the mapping and not to be cached, is
    /// decompressed only as far as the entry the seek finds ([`BlockIter::seek_while_decoding`]);
    /// any other is read as [`open_into`](Self::open_into) reads it.
    fn seek_into(
        &self,
        index: &IndexCursor,
        handle: BlockHandle,
        target: &[u8],
        slot: &mut Option<BlockIter>,
    ) -> Result<()> {
        self.seek_block(handle, target, slot, || match index.position() {
            Some(position) => self.table.chunk_starts(IndexSpot::Position(position)),
            None => chunks::after_handle(index.value(), handle.size),
        })
    }
}

impl DataBlocks {
    /// [`SecondLevel::seek_into`] for the block at `handle`, whose chunk starts `chunks`
    /// gives (asked only for a block decoded part way).
    fn seek_block(
        &self,
        handle: BlockHandle,
        target: &[u8],
        slot: &mut Option<BlockIter>,
        chunks: impl FnOnce() -> ChunkStarts,
    ) -> Result<()> {
        let table = &*self.table;
        self.take_spare(slot);
        // A block read from the file for a seek that could have streamed is watched: what
        // the cursor does after the seek decides how the thread's next seeks read.
        let (block, watched) = match table.resident_block(handle, &self.options)? {
            Some(block) => (block, false),
            None => match table.streamable(handle, &self.options)? {
                Streamable::Stream(stored) if crate::table::block::seeks_stay() => {
                    let chunks = chunks();
                    return BlockIter::seek_while_decoding(
                        slot,
                        &table.icmp_dyn,
                        &table.icmp,
                        target,
                        stored,
                        &chunks,
                        &table.file,
                        &table.path,
                        handle.offset,
                    );
                }
                // Checked, and declined by the door keeper: decompressed whole, not cached.
                Streamable::Stream(stored) => {
                    let data = expand_stored_block(stored, false)
                        .map_err(|reason| Error::corruption(&*table.path, handle.offset, reason))?;
                    let block = Block::new(data, table.path.clone(), handle.offset)?;
                    (Arc::new(block), true)
                }
                Streamable::Whole(door, checked) => {
                    (table.read_whole(handle, &self.options, door, checked)?, false)
                }
            },
        };
        self.aim(block, slot);
        if let Some(cursor) = slot {
            cursor.seek(target);
            if watched {
                cursor.watch_seek();
            }
        }
        Ok(())
    }
}

impl DataBlocks {
    /// Puts the spare block cursor, if any, in an empty `slot`, to be re-pointed.
    #[inline]
    fn take_spare(&self, slot: &mut Option<BlockIter>) {
        if slot.is_none() {
            *slot = self.spare.take();
        }
    }

    /// The cursor in `slot` (reused, or made) pointed at `block`.
    #[inline]
    fn aim(&self, block: Arc<Block>, slot: &mut Option<BlockIter>) {
        match slot {
            Some(cursor) => cursor.retarget(block),
            None => *slot = Some(block.iter(self.table.icmp_dyn.clone())),
        }
    }
}

impl TableIter {
    /// Points the cursor at `table`, read with `options`, unpositioned, as `table.iter(options)`
    /// would make it, reusing its parts: its index cursor (its key buffer) and its open block
    /// cursor (its key and run buffers), where a new cursor allocates them again. A level's
    /// cursor moving on to another table does this (`LevelTables::open_into`): a seek into a
    /// level of many tables, as db_bench's seekrandom makes on a new cursor each time, mostly
    /// lands in another table than the last. Requires: `table` orders keys as the table this
    /// cursor was made for (the database's comparator).
    pub(crate) fn retarget(&mut self, table: &Arc<Table>, options: BlockReadOptions) {
        let (index, blocks, open) = self.0.restart();
        index.retarget(&table.index, &table.icmp_dyn);
        let spare = open.or_else(|| blocks.spare.take());
        *blocks = DataBlocks {
            table: table.clone(),
            options,
            released: Cell::new(0),
            spare: Cell::new(spare),
        };
    }
}

impl InternalIterator for TableIter {
    #[inline]
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn seek_to_first(&mut self) {
        self.0.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.0.seek_to_last();
    }
    /// When the table kept its blocks' offsets, the index entry is found from the index's
    /// fences and the data block's handle and chunk start from the kept arrays, as a point
    /// lookup finds them; the index cursor is put on the entry after the data block's seek
    /// (the entry's line fetched meanwhile). Reading the entry first made the seek wait for
    /// it: a miss, 7% of a seek's time on a fillseq 1M database (docs/benchmarks.md (36)).
    fn seek(&mut self, target: &[u8]) {
        let table = &*self.0.second().table;
        let position = match table.index_position(target) {
            Some(Ok(position)) => position,
            // Not kept, or an index entry that does not decode: the cursor's own seek reads
            // the index and reports the damage.
            _ => return self.0.seek(target),
        };
        table.index.prefetch_entry(position);
        let handle = table.index_handle(position);
        self.0.seek_located(
            target,
            handle,
            |blocks, slot| {
                let handle = handle.expect("seek_data is called only with an id");
                blocks.seek_block(handle, target, slot, || {
                    blocks.table.chunk_starts(IndexSpot::Position(position))
                })
            },
            |index| index.seek_to_entry(position),
        );
    }
    #[inline]
    fn next(&mut self) {
        self.0.next();
    }
    #[inline]
    fn prev(&mut self) {
        self.0.prev();
    }
    #[inline]
    fn key(&self) -> &[u8] {
        self.0.key()
    }
    #[inline]
    fn value(&self) -> &[u8] {
        self.0.value()
    }
    fn status(&self) -> Result<()> {
        self.0.status()
    }
    #[inline]
    fn block_lane(&mut self, steps: usize) -> Option<BlockLane<'_>> {
        self.0.block_lane(steps)
    }
}
