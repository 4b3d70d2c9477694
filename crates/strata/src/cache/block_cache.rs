// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`BlockCache`]: uncompressed table blocks, shared by every table of a database, bounded by
//! their total size in bytes.
//!
//! A block read from a table is cached on its second miss, not its first
//! ([`BlockCache::offer`]): a door keeper remembers which blocks missed recently, one 32-bit
//! fingerprint per slot, two slots per block the cache can hold. A block that is read once
//! (most blocks of a random read over a database larger than the cache, every block of a
//! long scan) then costs no insertion, evicts nothing, and its buffer is freed as soon as the
//! read is done, so the next read's buffer is the same warm memory. A block read again before
//! its slot is overwritten is cached, as every block was before. This is the door keeper of
//! TinyLFU (Einziger, Friedman and Manes, 2017) without the frequency sketch behind it: the
//! cache's own CLOCK-Pro policy decides what to keep among the blocks it admits.
//!
//! Locking: `quick_cache` shards its state and takes a shard's read lock for a hit, its write
//! lock for an insert; no lock is held when a method returns. The door keeper's slots are
//! relaxed atomics: two threads racing on one slot can at worst admit a block one read early
//! or late, never lose or corrupt one.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::table::Block;

/// Charges each block the bytes it holds (`Block::charge`) and what its entry costs besides
/// ([`BlockCache::ENTRY_OVERHEAD`]), so that the capacity bounds the memory the cache takes.
#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        (block.charge() + ENTRY_OVERHEAD) as u64
    }
}

/// The cache's own record of an entry, estimated: quick_cache's slab entry (key, value
/// pointer, eviction state, links) and its slot in the shard's index.
const CACHE_RECORD_BYTES: usize = 80;

/// The allocator's header and rounding per allocation (glibc: 8 bytes of header, chunks in
/// 16-byte steps).
const ALLOCATION_BYTES: usize = 16;

const ENTRY_OVERHEAD: usize = BlockCache::ENTRY_OVERHEAD;

/// The typical block, for sizing the cache's index and its door keeper.
const TYPICAL_BLOCK_BYTES: usize = 4096;

/// Door keeper slots per typical block the cache holds: a block read again within about
/// twice as many misses as the cache holds blocks is admitted (a block not read again by
/// then would have been evicted before it was, most likely).
const DOOR_KEEPER_SLOTS_PER_BLOCK: usize = 2;

/// The fewest door keeper slots, for small caches.
const MIN_DOOR_KEEPER_SLOTS: usize = 64;

/// A cache of table blocks keyed by (table id, block offset), charged by what each holds
/// (`Block::charge`: its contents, and the fences of a search form).
///
/// # Example
///
/// ```
/// use strata::cache::BlockCache;
/// let cache = BlockCache::new(8 << 20);
/// assert_eq!(cache.capacity(), 8 << 20);
/// assert_ne!(cache.new_table_id(), cache.new_table_id());
/// assert!(cache.get(1, 0).is_none());
/// assert_eq!((cache.hit_count(), cache.miss_count(), cache.insert_count()), (0, 1, 0));
/// // The door keeper: a block's first miss is remembered, its second admitted.
/// assert!(!cache.admit(1, 0));
/// assert!(cache.admit(1, 0));
/// assert_eq!(cache.deferred_count(), 1);
/// ```
pub struct BlockCache {
    cache: quick_cache::sync::Cache<(u64, u64), Arc<Block>, BlockWeighter>,
    capacity: usize,
    next_table_id: AtomicU64,
    /// Blocks inserted (a relaxed counter: inserts follow misses, which read a table).
    inserts: AtomicU64,
    /// The door keeper: `slots.len()` is a power of two; a slot holds the fingerprint of the
    /// last block offered there and not admitted, or 0.
    slots: Box<[AtomicU32]>,
    /// Offers turned away (counted relaxed, as `inserts`).
    deferred: AtomicU64,
    /// Blocks replaced by their search form (counted relaxed, as `inserts`).
    replaced: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage())
            .finish()
    }
}

impl BlockCache {
    /// What a cached block is charged beyond its bytes: the block's header in its `Arc`, the
    /// cache's record of the entry, and the allocator's share of the block's allocations (the
    /// `Arc`, the buffer, a search form's fences). Left out of the charge, it was about 7% on
    /// top of the capacity (some 370 bytes a block, measured: docs/benchmarks.md, "The block
    /// cache's real size").
    ///
    /// # Example
    ///
    /// ```
    /// use strata::cache::BlockCache;
    /// // A few hundred bytes: a small share of a 4 KiB block.
    /// assert!(BlockCache::ENTRY_OVERHEAD > 100 && BlockCache::ENTRY_OVERHEAD < 1024);
    /// ```
    pub const ENTRY_OVERHEAD: usize = std::mem::size_of::<Block>()
        + 2 * std::mem::size_of::<usize>()
        + CACHE_RECORD_BYTES
        + 3 * ALLOCATION_BYTES;

    /// A cache holding at most `capacity_bytes` of blocks, their entries' overhead included.
    pub fn new(capacity_bytes: usize) -> Self {
        let items = (capacity_bytes / TYPICAL_BLOCK_BYTES).max(1);
        let slots = (items * DOOR_KEEPER_SLOTS_PER_BLOCK)
            .next_power_of_two()
            .max(MIN_DOOR_KEEPER_SLOTS);
        BlockCache {
            slots: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            deferred: AtomicU64::new(0),
            replaced: AtomicU64::new(0),
            cache: quick_cache::sync::Cache::with_weighter(
                items,
                capacity_bytes as u64,
                BlockWeighter,
            ),
            capacity: capacity_bytes,
            next_table_id: AtomicU64::new(1),
            inserts: AtomicU64::new(0),
        }
    }

    /// A fresh id for a newly opened table, so that its blocks never collide with another
    /// table's, even one that reuses a file number.
    pub fn new_table_id(&self) -> u64 {
        self.next_table_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The block of table `table_id` at `offset`, if cached.
    pub fn get(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        self.cache.get(&(table_id, offset))
    }

    /// Caches `block`, just read from table `table_id` at `offset`, if it missed recently
    /// before: the door keeper remembers its first miss and admits it at the second. Returns
    /// true if the block was inserted (and then kept, unless it is larger than the whole
    /// cache).
    pub fn offer(&self, table_id: u64, offset: u64, block: &Arc<Block>) -> bool {
        let admitted = self.admit(table_id, offset);
        if admitted {
            self.insert(table_id, offset, block.clone());
        }
        admitted
    }

    /// The door keeper's half of [`offer`](Self::offer), for a reader that decides how to
    /// read a block by whether the cache will take it: true if the block of table `table_id`
    /// at `offset` missed recently before (the caller then [`insert`](Self::insert)s it),
    /// false if this miss is its first (remembered, and counted as deferred).
    pub fn admit(&self, table_id: u64, offset: u64) -> bool {
        let (slot, fingerprint) = self.door_keeper_slot(table_id, offset);
        if slot.load(Ordering::Relaxed) == fingerprint {
            slot.store(0, Ordering::Relaxed);
            true
        } else {
            slot.store(fingerprint, Ordering::Relaxed);
            self.deferred.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// A door keeper that remembers three misses: true at the fourth miss of the block of
    /// table `table_id` at `offset` within about as many misses as [`admit`](Self::admit)'s
    /// window (each miss of another block that lands on the same slot forgets it). For
    /// blocks that cost nothing to read again but something to cache: a table's uncompressed
    /// blocks, read in place from its mapping, whose cached form is a copy made for
    /// searching. Under random reads over a database larger than the cache, a block read
    /// twice within the window is common (about 7% of reads with 4 MiB of cache over 1M
    /// entries); at the third miss 0.6% of reads were admitted, and the copies cost random
    /// gets 5-8%; a hot block is read four times at once.
    pub fn admit_at_fourth_miss(&self, table_id: u64, offset: u64) -> bool {
        let (slot, fingerprint) = self.door_keeper_slot(table_id, offset);
        // The fingerprint's low two bits count the misses seen (1 to 3); the rest identify
        // the block.
        let id = fingerprint & !3;
        let seen = slot.load(Ordering::Relaxed);
        let misses = if seen & !3 == id { seen & 3 } else { 0 };
        if misses == 3 {
            slot.store(0, Ordering::Relaxed);
            return true;
        }
        // Not counted in `deferred`: these misses are every read of an uncompressed table,
        // and a shared counter's increment on each was a measurable part of one.
        slot.store(id | (misses + 1), Ordering::Relaxed);
        false
    }

    /// The door keeper's slot for the block of table `table_id` at `offset`, and the block's
    /// fingerprint there (never 0, which marks an empty slot).
    fn door_keeper_slot(&self, table_id: u64, offset: u64) -> (&AtomicU32, u32) {
        // One multiply-xorshift mix of the key: the high 32 bits pick the slot, the low 32
        // are the fingerprint.
        let mixed = (table_id.rotate_left(32) ^ offset).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mixed = mixed ^ (mixed >> 29);
        let slot = &self.slots[(mixed >> 32) as usize & (self.slots.len() - 1)];
        (slot, (mixed as u32) | 4)
    }

    /// Caches a block, admitted or not. A block larger than the whole cache is not kept.
    pub fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.cache.insert((table_id, offset), block);
    }

    /// Puts `block` in place of the cached block of table `table_id` at `offset`, if one is
    /// still cached, keeping that entry's standing in the eviction order (a form of the same
    /// block made for searching: `Block::searchable`). Returns true if it was replaced. A
    /// block too heavy for its shard of the cache is not kept, and takes the block it would
    /// have replaced out with it (quick_cache's rule for an overweight insert).
    pub fn replace(&self, table_id: u64, offset: u64, block: Arc<Block>) -> bool {
        let replaced = self.cache.replace((table_id, offset), block, true).is_ok();
        if replaced {
            self.replaced.fetch_add(1, Ordering::Relaxed);
        }
        replaced
    }

    /// Lookups ([`get`](Self::get)) that found their block, since the cache was made. Counted
    /// per shard, under the shard lock the lookup takes anyway.
    pub fn hit_count(&self) -> u64 {
        self.cache.hits()
    }

    /// Lookups that found nothing, since the cache was made.
    pub fn miss_count(&self) -> u64 {
        self.cache.misses()
    }

    /// Blocks [`insert`](Self::insert)ed, since the cache was made (kept or not).
    pub fn insert_count(&self) -> u64 {
        self.inserts.load(Ordering::Relaxed)
    }

    /// Blocks [`offer`](Self::offer)ed, or asked after ([`admit`](Self::admit)), at their
    /// first recent miss and not admitted, since the cache was made.
    pub fn deferred_count(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }

    /// Blocks [`replace`](Self::replace)d, since the cache was made.
    pub fn replace_count(&self) -> u64 {
        self.replaced.load(Ordering::Relaxed)
    }

    /// Bytes charged for the blocks held: each block's bytes (`Block::charge`) and its entry's
    /// [`ENTRY_OVERHEAD`](Self::ENTRY_OVERHEAD).
    pub fn usage(&self) -> usize {
        self.cache.weight() as usize
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn block(size: usize) -> Arc<Block> {
        let mut b = crate::table::BlockBuilder::new(16);
        b.add(b"k", &vec![0u8; size - 20]);
        let data = b.finish().to_vec();
        Arc::new(Block::new(data, Arc::from(Path::new("/t")), 0).unwrap())
    }

    #[test]
    fn usage_stays_within_capacity() {
        let cache = BlockCache::new(64 * 1024);
        for i in 0..1000 {
            cache.insert(1, i * 4096, block(4096));
            assert!(cache.usage() <= 64 * 1024, "usage {}", cache.usage());
        }
        assert!(
            cache.usage() >= 32 * 1024,
            "the cache is used: {}",
            cache.usage()
        );
    }

    /// A block is charged its bytes and its entry's overhead, and a cache full of them holds
    /// no more than its capacity's worth of both.
    #[test]
    fn a_block_is_charged_its_bytes_and_its_entrys_overhead() {
        let cache = BlockCache::new(1 << 20);
        let b = block(4096);
        cache.insert(1, 0, b.clone());
        assert_eq!(cache.usage(), b.charge() + ENTRY_OVERHEAD);
        assert!(ENTRY_OVERHEAD > std::mem::size_of::<Block>());
        let cache = BlockCache::new(64 * (4096 + ENTRY_OVERHEAD));
        for i in 0..1000 {
            cache.insert(1, i * 4096, block(4096));
        }
        let held = (0..1000).filter(|&i| cache.get(1, i * 4096).is_some()).count();
        assert!(held <= 64, "{held} blocks held");
    }

    #[test]
    fn counts_hits_misses_and_inserts() {
        let cache = BlockCache::new(1 << 20);
        assert!(cache.get(1, 0).is_none());
        cache.insert(1, 0, block(100));
        assert!(cache.get(1, 0).is_some());
        assert!(cache.get(1, 0).is_some());
        assert!(cache.get(1, 4096).is_none());
        assert_eq!(
            (cache.hit_count(), cache.miss_count(), cache.insert_count()),
            (2, 2, 1)
        );
    }

    #[test]
    fn tables_do_not_share_keys() {
        let cache = BlockCache::new(1 << 20);
        let (a, b) = (cache.new_table_id(), cache.new_table_id());
        cache.insert(a, 0, block(100));
        assert!(cache.get(a, 0).is_some());
        assert!(cache.get(b, 0).is_none());
    }

    #[test]
    fn an_offered_block_is_cached_at_its_second_miss() {
        let cache = BlockCache::new(1 << 20);
        let b = block(100);
        assert!(!cache.offer(7, 4096, &b), "the first offer is remembered only");
        assert!(cache.get(7, 4096).is_none());
        assert_eq!(Arc::strong_count(&b), 1, "a deferred block is not kept");
        assert!(cache.offer(7, 4096, &b), "the second is admitted");
        assert!(Arc::ptr_eq(&cache.get(7, 4096).unwrap(), &b));
        assert_eq!((cache.insert_count(), cache.deferred_count()), (1, 1));
        // Another table's block at the same offset has its own history.
        assert!(!cache.offer(8, 4096, &b));
    }

    #[test]
    fn the_four_miss_door_keeper_admits_at_the_fourth_miss_only() {
        let cache = BlockCache::new(1 << 20);
        for _ in 0..3 {
            assert!(!cache.admit_at_fourth_miss(7, 4096));
        }
        assert!(cache.admit_at_fourth_miss(7, 4096));
        // Admitted, it starts over; another block's misses are its own.
        assert!(!cache.admit_at_fourth_miss(7, 4096));
        for _ in 0..3 {
            assert!(!cache.admit_at_fourth_miss(8, 4096));
        }
        assert!(cache.admit_at_fourth_miss(8, 4096));
        assert_eq!(cache.deferred_count(), 0, "not counted: see the method");
        // Blocks missed three times each are not admitted (the count allows for a freak
        // collision of 30-bit fingerprints, as `blocks_read_once_leave_the_cache_alone`).
        let cache = BlockCache::new(64 * 1024);
        let admitted = (0..10_000u64)
            .flat_map(|i| [i, i, i])
            .filter(|i| cache.admit_at_fourth_miss(1, i * 4096))
            .count();
        assert!(admitted <= 1, "{admitted}");
    }

    #[test]
    fn blocks_read_once_leave_the_cache_alone() {
        let cache = BlockCache::new(64 * 1024);
        let b = block(4096);
        for i in 0..10_000 {
            cache.offer(1, i * 4096, &b);
        }
        // A few offers meet the fingerprint a colliding block left (the door keeper's
        // fingerprints are 31 bits), so none of 10,000 distinct blocks is expected to be
        // admitted; the count allows for a freak collision.
        assert!(cache.insert_count() <= 1, "{}", cache.insert_count());
        assert!(cache.usage() <= 4096 + ENTRY_OVERHEAD);
    }

    #[test]
    fn a_block_read_again_within_the_window_is_admitted() {
        // A cache of 256 blocks has 512 door keeper slots: a block missed again after 100
        // other misses is still remembered (unless another block took its slot, which the
        // model below allows for by counting, not assuming, admissions).
        let cache = BlockCache::new(256 * 4096);
        let b = block(100);
        let mut admitted = 0;
        for round in 0..2 {
            for i in 0..100 {
                if cache.offer(1, i * 4096, &b) {
                    assert_eq!(round, 1, "block {i} admitted at its first offer");
                    admitted += 1;
                }
            }
        }
        // With 100 blocks in 512 slots, about 9 collide; the rest are admitted.
        assert!(admitted >= 75, "{admitted} of 100 admitted");
        assert_eq!(cache.insert_count(), admitted);
    }

    #[test]
    fn block_larger_than_the_cache_is_not_kept() {
        let cache = BlockCache::new(1000);
        cache.insert(1, 0, block(5000));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage(), 0);
    }
}
