// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata: an embedded, persistent, ordered key-value store, on-disk compatible with LevelDB 1.23.
//!
//! Keys and values are arbitrary byte strings, kept in key order (bytewise, or a
//! [`Comparator`] of yours). A [`Db`] gives `put`, `get`, `delete`, atomic [`WriteBatch`]es,
//! [`Snapshot`]s, cursors ([`DbIterator`]) and Rust iterators over ranges ([`RangeIter`]),
//! forward and backward. Every write goes through a write-ahead log first; a write with
//! [`WriteOptions::sync`] survives a power loss when it returns. Tables are Snappy-compressed,
//! optionally carry bloom filters, and are merged by leveled compaction on a background thread.
//! All file access goes through an [`Env`]: [`PosixEnv`] by default, [`MemEnv`] (with crash
//! simulation) for tests.
//!
//! A database directory written by LevelDB 1.23 opens here, and one written here with default
//! options opens in LevelDB. One process opens a database at a time (the `LOCK` file);
//! within it, a `Db` is `Send + Sync`.
//!
//! What users plug in is public: [`Env`] and its files ([`mod@env`]), [`FilterPolicy`]
//! ([`filter`]), [`Comparator`]. [`check()`] reads every file a database depends on and lists
//! what is damaged; [`repair()`] rebuilds a database that will not open. The lower layers (the
//! log format, tables, caches, MANIFEST records, internal keys) are public only with the
//! `internals` feature, for strata's command-line tool and tests: they are outside the semver
//! promise.
//!
//! [`FilterPolicy`]: filter::FilterPolicy
//!
//! # Durability
//!
//! strata keeps what it acknowledged (the project's `docs/durability.md` gives the whole
//! contract and the tests behind it):
//! 1. a write acknowledged with `sync` survives a process kill, a power loss and a crash at any
//!    file-system call; one acknowledged without `sync` survives a process kill;
//! 2. after a crash the database holds exactly a prefix of the acknowledged writes, with every
//!    synced one: no holes;
//! 3. a [`WriteBatch`] is applied whole or not at all; one `write` refuses never is, and one
//!    whose `write` failed after logging it (a failed sync, a panicking comparator) may be
//!    there, whole, after a reopen;
//! 4. every block read is checksum-verified by default; damage is an [`Error::Corruption`]
//!    naming the file and offset, never a wrong value;
//! 5. only a tail torn by a crash (a log or MANIFEST whose last write was cut short) is
//!    forgiven: other damage makes [`Db::open`] fail, and [`repair()`] salvages the rest;
//! 6. opening and repairing delete no file they cannot prove obsolete, and `create_if_missing`
//!    will not create a database over database files without `CURRENT`;
//! 7. after a failed log or MANIFEST write or sync, a handle refuses writes (reads go on) until
//!    the database is reopened, and a failed sync is never retried;
//! 8. one writer at a time, across processes and with LevelDB ([`Error::Locked`]);
//! 9. keys up to [`MAX_KEY_SIZE`], values up to [`MAX_VALUE_SIZE`]; larger ones are refused and
//!    nothing of their batch is applied.
//!
//! # Example
//!
//! ```
//! use strata::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
//! db.put("apple", "red")?;
//! let mut batch = WriteBatch::new();
//! batch.put("banana", "yellow");
//! batch.put("cherry", "dark red");
//! db.write_opt(batch, &WriteOptions { sync: true })?; // atomic, and durable when it returns
//!
//! let snapshot = db.snapshot();
//! db.delete("apple")?;
//! let then = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
//! assert_eq!(db.get("apple")?, None);
//! assert_eq!(db.get_opt("apple", &then)?.as_deref(), Some(&b"red"[..]));
//!
//! let newest_first: Vec<Vec<u8>> = db.scan_opt(&then)?.keys().rev().collect::<Result<_, _>>()?;
//! assert_eq!(newest_first, [&b"cherry"[..], b"banana", b"apple"]);
//! assert_eq!(db.range("b"..="c")?.count(), 1);
//! # Ok::<(), strata::Error>(())
//! ```

/// Modules public only with the `internals` feature: the formats and machinery below the
/// `Db` API, for strata's own tools and tests. They are not part of the semver promise.
macro_rules! internal_modules {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code, unreachable_pub, unused_imports)]
        mod $name;
    )*};
}

mod batch;
pub mod check;
mod compaction;
mod comparator;
mod db;
pub mod env;
mod error;
mod filename;
pub mod filter;
mod info_log;
mod memtable;
mod options;
mod range_del;
mod repair;
mod snapshot;

internal_modules! {
    /// Blob files (`internals`).
    blob;
    /// The block cache and the open-file caches (`internals`).
    cache;
    /// Varints, fixed-width integers, CRC32C (`internals`).
    coding;
    /// The cursor contract of every internal iterator (`internals`).
    iter;
    /// Internal keys (`internals`).
    key;
    /// The log format of WALs and MANIFESTs (`internals`).
    log;
    /// Sorted tables (`internals`).
    table;
    /// MANIFEST records and versions (`internals`).
    version;
}

pub use batch::{BatchIter, BatchOp, WriteBatch};
pub use cache::BlockCache;
pub use check::{check, CheckReport};
pub use comparator::{bytewise, BytewiseComparator, Comparator, KeyRange};
pub use db::{
    destroy, BlobFileInfo, BlobStats, BlockCacheStats, Db, DbIterator, DbStats, IntoKeyRange, Keys,
    LevelStats, PinnedValue, RangeIter, RowCacheStats, TableCacheStats, WriteStalls, MAX_KEY_SIZE,
    MAX_VALUE_SIZE,
};
pub use env::{CrashMode, Env, IoFaults, MemEnv, PosixEnv};
pub use error::{Error, RecordError, Result};
pub use key::ValueKind;
pub use options::{Options, ReadOptions, WriteOptions};
pub use repair::{repair, RepairReport};
pub use snapshot::Snapshot;
pub use table::Compression;

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;
