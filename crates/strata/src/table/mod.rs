// SPDX-License-Identifier: MIT OR Apache-2.0
//! Sorted tables (`NNNNNN.ldb`): immutable files of sorted entries, in LevelDB 1.23's format.
//!
//! See [`format`] for the file layout, [`block_builder`] for the block layout.

mod block;
pub mod block_builder;
pub mod filter_block;
pub mod format;

pub use block::{Block, BlockIter};
pub use block_builder::BlockBuilder;
pub use format::{BlockHandle, Compression, Footer};
