// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`BlockCache`]: uncompressed table blocks, shared by every table of a database, bounded by
//! their total size in bytes.
//!
//! Locking: `quick_cache` shards its state and takes a shard's read lock for a hit, its write
//! lock for an insert; no lock is held when a method returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::table::Block;

/// Charges each block its size in bytes.
#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        // A zero weight would make an entry free to keep forever.
        block.size().max(1) as u64
    }
}

/// The typical block, for sizing the cache's index.
const TYPICAL_BLOCK_BYTES: usize = 4096;

/// A cache of table blocks keyed by (table id, block offset), charged by block size.
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
/// ```
pub struct BlockCache {
    cache: quick_cache::sync::Cache<(u64, u64), Arc<Block>, BlockWeighter>,
    capacity: usize,
    next_table_id: AtomicU64,
    /// Blocks inserted (a relaxed counter: inserts follow misses, which read a table).
    inserts: AtomicU64,
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
    /// A cache holding at most `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: usize) -> Self {
        let items = (capacity_bytes / TYPICAL_BLOCK_BYTES).max(1);
        BlockCache {
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

    /// Caches a block. A block larger than the whole cache is not kept.
    pub fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.cache.insert((table_id, offset), block);
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

    /// Bytes of blocks held.
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
    fn block_larger_than_the_cache_is_not_kept() {
        let cache = BlockCache::new(1000);
        cache.insert(1, 0, block(5000));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage(), 0);
    }
}
