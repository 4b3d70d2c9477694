// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata: an embedded, persistent, ordered key-value store, on-disk compatible with LevelDB 1.23.
//!
//! This crate is being built bottom-up. The storage formats are in place: the file-system
//! interface ([`Env`]), the write-ahead log ([`log`]), sorted tables ([`table`]), bloom filters
//! ([`filter`]), caches ([`cache`]), write batches ([`WriteBatch`]) and MANIFEST records
//! ([`version::VersionEdit`]). The database handle comes next.
//!
//! # Example
//!
//! Append records to a log and read them back, then simulate a power loss:
//!
//! ```
//! use std::path::Path;
//! use strata::log::{LogReader, LogWriter, ReadMode};
//! use strata::{CrashMode, Env, MemEnv, WriteBatch};
//!
//! let env = MemEnv::new();
//! env.create_dir_all(Path::new("/db"))?;
//! let path = Path::new("/db/000003.log");
//! let mut log = LogWriter::new(env.new_writable_file(path)?);
//! let mut batch = WriteBatch::new();
//! batch.put(b"apple", b"red");
//! log.add_record(batch.encoded())?;
//! log.sync()?;
//! env.sync_dir(Path::new("/db"))?;
//! log.add_record(b"not synced")?;
//!
//! env.crash(CrashMode::POWER_LOSS);
//! let mut reader = LogReader::new(env.new_sequential_file(path)?, path, ReadMode::Strict);
//! let record = reader.next_record()?.expect("the synced record survives");
//! assert_eq!(WriteBatch::decode(record)?.count(), 1);
//! assert!(reader.next_record()?.is_none());
//! # Ok::<(), strata::Error>(())
//! ```

mod batch;
// TODO(#3): the database layer uses these; until then only their tests do.
pub mod cache;
pub mod coding;
mod compaction;
mod comparator;
mod db;
pub mod env;
mod error;
#[allow(dead_code)]
mod filename;
pub mod filter;
mod info_log;
pub mod iter;
pub mod key;
pub mod log;
#[allow(dead_code)]
mod memtable;
mod options;
mod repair;
mod snapshot;
pub mod table;
pub mod version;

pub use batch::{BatchIter, BatchOp, WriteBatch};
pub use comparator::{bytewise, BytewiseComparator, Comparator};
pub use db::{destroy, Db, DbIterator, RangeIter, MAX_KEY_SIZE, MAX_VALUE_SIZE};
pub use env::{CrashMode, Env, MemEnv, PosixEnv};
pub use error::{Error, Result};
pub use options::{Options, ReadOptions, WriteOptions};
pub use repair::{repair, RepairReport};
pub use snapshot::Snapshot;
pub use table::Compression;

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;
