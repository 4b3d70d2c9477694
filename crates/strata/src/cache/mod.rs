// SPDX-License-Identifier: MIT OR Apache-2.0
//! Caches: the block cache (uncompressed blocks, bounded in bytes) and the table cache (open
//! tables, bounded by `max_open_files`).

mod block_cache;
mod lru;

pub use block_cache::BlockCache;
pub use lru::LruCache;
