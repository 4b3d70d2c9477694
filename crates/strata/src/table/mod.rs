// SPDX-License-Identifier: MIT OR Apache-2.0
//! Sorted tables (`NNNNNN.ldb`): immutable files of sorted entries, in LevelDB 1.23's format.
//!
//! Tables hold internal keys (see [`key`](crate::key)); data and index blocks are ordered by the
//! internal-key order built on [`TableOptions::comparator`], and filters hold user keys.
//! See [`format`](mod@format) for the file layout and [`block_builder`] for the block layout.

mod block;
pub(crate) mod chunks;
pub mod block_builder;
mod builder;
pub mod filter_block;
pub mod format;
mod index;
mod reader;
mod snappy;

use std::sync::Arc;

pub use block::{Block, BlockIter, BlockSlice};
pub(crate) use block::{count_below, window, window_after};
pub use block_builder::BlockBuilder;
pub use builder::TableBuilder;
pub use format::{BlockHandle, Compression, Footer};
pub use reader::{BlockReadOptions, Table, TableIter, TableVerification};

use crate::comparator::{BytewiseComparator, Comparator};
use crate::filter::FilterPolicy;

/// How tables are written and read.
#[derive(Clone)]
pub struct TableOptions {
    /// The user-key order. Default: [`BytewiseComparator`].
    pub comparator: Arc<dyn Comparator>,
    /// Target uncompressed size of a data block. Default: 4096.
    pub block_size: usize,
    /// Entries between restart points in data and metaindex blocks. Default: 16.
    pub block_restart_interval: usize,
    /// Block compression. Default: Snappy.
    pub compression: Compression,
    /// Filter policy; none by default.
    pub filter_policy: Option<Arc<dyn FilterPolicy>>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            comparator: Arc::new(BytewiseComparator),
            block_size: 4096,
            block_restart_interval: 16,
            compression: Compression::Snappy,
            filter_policy: None,
        }
    }
}

impl std::fmt::Debug for TableOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableOptions")
            .field("comparator", &self.comparator.name())
            .field("block_size", &self.block_size)
            .field("block_restart_interval", &self.block_restart_interval)
            .field("compression", &self.compression)
            .field(
                "filter_policy",
                &self.filter_policy.as_ref().map(|p| p.name()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests;
