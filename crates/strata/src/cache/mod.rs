// SPDX-License-Identifier: MIT OR Apache-2.0
//! Caches: the [`BlockCache`] (uncompressed table blocks, bounded in bytes) and the
//! [`TableCache`] (open tables, bounded by `max_open_files`).
//!
//! Open files of every kind (the tables here, blob files in [`crate::blob`]) are kept by one
//! generic open-file cache, `file_cache::FileCache`, which takes how to open a file from its
//! user.
//!
//! All are built on `quick_cache`, which beat a hand-written sharded LRU on the access patterns
//! of db_bench's readrandom and readhot (`benches/cache.rs`; figures in docs/benchmarks.md).

mod block_cache;
pub(crate) mod file_cache;
pub(crate) mod row_cache;
mod table_cache;

pub use block_cache::BlockCache;
pub(crate) use table_cache::TablePin;
pub use table_cache::TableCache;
