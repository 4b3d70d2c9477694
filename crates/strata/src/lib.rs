// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata: an embedded, persistent, ordered key-value store, on-disk compatible with LevelDB 1.23.
//!
//! This crate is being built bottom-up. The storage formats are in place: the file-system
//! interface ([`Env`]), the write-ahead log ([`log`]), sorted tables ([`table`]), bloom filters
//! ([`filter`]) and caches ([`cache`]).

mod batch;
pub mod cache;
pub mod coding;
mod comparator;
pub mod env;
mod error;
pub mod filter;
pub mod iter;
pub mod key;
pub mod log;
pub mod table;
pub mod version;

pub use batch::{BatchIter, BatchOp, WriteBatch};
pub use comparator::{bytewise, BytewiseComparator, Comparator};
pub use env::{CrashMode, Env, MemEnv, PosixEnv};
pub use error::{Error, Result};
