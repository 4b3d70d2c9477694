// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`BlockCache`]: uncompressed table blocks, shared by every table of a database, bounded by
//! their total size in bytes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::LruCache;
use crate::table::Block;

/// The number of shards: enough that concurrent readers rarely meet on one lock.
const SHARDS: usize = 16;

/// A cache of table blocks keyed by (table id, block offset), charged by block size.
///
/// # Example
///
/// ```
/// use strata::cache::BlockCache;
/// let cache = BlockCache::new(8 << 20);
/// assert_eq!(cache.capacity(), 8 << 20);
/// assert_ne!(cache.new_table_id(), cache.new_table_id());
/// ```
pub struct BlockCache {
    lru: LruCache<(u64, u64), Arc<Block>>,
    next_table_id: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: usize) -> Self {
        BlockCache {
            lru: LruCache::new(capacity_bytes, SHARDS),
            next_table_id: AtomicU64::new(1),
        }
    }

    /// A fresh id for a newly opened table, so that its blocks never collide with another
    /// table's, even one that reuses a file number.
    pub fn new_table_id(&self) -> u64 {
        self.next_table_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The block of table `table_id` at `offset`, if cached.
    pub fn get(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        self.lru.get(&(table_id, offset))
    }

    /// Caches a block.
    pub fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        let charge = block.size();
        self.lru.insert((table_id, offset), block, charge);
    }

    /// Bytes of blocks held.
    pub fn usage(&self) -> usize {
        self.lru.usage()
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.lru.capacity()
    }
}
