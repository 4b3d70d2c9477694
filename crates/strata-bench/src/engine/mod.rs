// SPDX-License-Identifier: MIT OR Apache-2.0
//! The engines db_bench drives, behind one interface, so that every engine runs the same key
//! and value generator and the same timing loop.
//!
//! strata is always built. Every peer is a cargo feature: `leveldb`, `rocksdb`, `lmdb`,
//! `sqlite`, `kyotocabinet`, `berkeleydb`, `wiredtiger` (two engines: `wiredtiger-btree` and
//! `wiredtiger-lsm`), `fjall` and `redb`; `peers` turns them all on. The C libraries are
//! Debian's (`scripts/install-peers.sh`), reached through small FFI shims; fjall and redb are
//! crates. How each engine is configured is written down in its module and in
//! docs/benchmarks.md.

#[cfg(feature = "berkeleydb")]
mod berkeleydb;
#[cfg(feature = "fjall")]
mod fjall_engine;
#[cfg(feature = "kyotocabinet")]
mod kyotocabinet;
#[cfg(feature = "leveldb")]
mod leveldb;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(feature = "redb")]
mod redb_engine;
#[cfg(feature = "rocksdb")]
mod rocksdb;
#[cfg(feature = "sqlite")]
mod sqlite;
mod strata_engine;
#[cfg(feature = "wiredtiger")]
mod wiredtiger;

#[cfg(test)]
pub mod conformance;

use std::path::Path;

/// An error from any engine, as text.
pub type EngineResult<T> = Result<T, String>;

/// How every engine is configured. The reports' baseline is 4 MB of cache and compression on.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Block or page cache, in bytes.
    pub cache_size: usize,
    /// Memtable size of the log-structured engines, in bytes.
    pub write_buffer_size: usize,
    /// Bloom filter bits per key, for engines that have filters.
    pub bloom_bits: Option<usize>,
    /// Compress stored data, for engines that can.
    pub compression: bool,
    /// Verify block checksums on reads (strata's default; LevelDB's default is off).
    pub verify_checksums: bool,
    /// The size of the values the database is created for: `--value_size`, or 100,000 for
    /// the 100K benchmarks. Engines whose best settings differ with the value size (LMDB's
    /// write mode) choose by it.
    pub value_size: usize,
    /// strata reads with its copying calls (`get`, and `RangeIter` items that own their key
    /// and value) instead of `get_pinned` and cursor borrows: to measure what zero-copy reads
    /// save. Other engines ignore it.
    pub copying_reads: bool,
    /// strata's scans step a cursor (`key`, `value`, `next` or `prev`) instead of walking it
    /// (`DbIterator::walk_forward`, `walk_back`). Other engines ignore it.
    pub cursor_scans: bool,
    /// The row cache of strata and RocksDB, in bytes (0: off). Other engines ignore it.
    pub row_cache_size: usize,
    /// The level-0 slowdown and stop triggers of strata and RocksDB (`None`: the engine's
    /// default). Other engines ignore them.
    pub l0_slowdown_writes_trigger: Option<usize>,
    pub l0_stop_writes_trigger: Option<usize>,
}

impl EngineConfig {
    /// The memory an engine may use for caching: an LSM engine's block cache plus its memtable.
    /// Engines with a single cache (the B-trees) get all of it, so that every engine has the
    /// same budget.
    pub fn memory_budget(&self) -> usize {
        self.cache_size + self.write_buffer_size
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_size: 4 << 20,
            write_buffer_size: 4 << 20,
            bloom_bits: None,
            compression: true,
            verify_checksums: true,
            value_size: 100,
            copying_reads: false,
            cursor_scans: false,
            row_cache_size: 0,
            l0_slowdown_writes_trigger: None,
            l0_stop_writes_trigger: None,
        }
    }
}

/// One key-value engine. Shared by every thread of a multi-threaded benchmark.
pub trait Engine: Send + Sync {
    /// Writes `entries` as one atomic batch (one entry for single puts). With `sync`, the
    /// batch is durable when this returns; without, it has reached the operating system (or
    /// the engine's own asynchronous log) but may be lost in a power failure.
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()>;
    /// Deletes `keys` as one atomic batch; absent keys are not an error.
    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()>;
    /// Reads `key` into `value` (replacing its contents); returns false if the key is absent.
    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool>;
    /// Visits up to `limit` entries in key order (descending if `reverse`), passing each to
    /// `visit`; returns how many it visited.
    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64>;
    /// Opens a cursor at the first key at or after `key` and copies that key into `found`;
    /// returns false if there is none. (LevelDB's seekrandom: one new cursor per seek.)
    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool>;
    /// Opens a cursor at the first key at or after `key`, then steps forward up to `nexts`
    /// times, visiting every entry it is on (so at most `nexts + 1`); returns how many it
    /// visited. A short range query: RocksDB's `seekrandom --seek_nexts`. Engines without it
    /// return an error naming the flag.
    fn seek_scan(
        &self,
        key: &[u8],
        nexts: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        let _ = (key, nexts, visit);
        Err(format!(
            "--seek_nexts is not supported by this engine (these have it: {})",
            SEEK_SCAN.join(", ")
        ))
    }
    /// Compacts the whole database; engines without such an operation return at once.
    fn compact(&self) -> EngineResult<()>;
    /// The engine's own statistics report, if it has one (db_bench's `stats`).
    fn stats(&self) -> Option<String> {
        None
    }
}

/// Every engine name db_bench knows, whether or not this build has it.
pub const ALL: &[&str] = &[
    "strata",
    "strata-blobs",
    "leveldb",
    "rocksdb",
    "lmdb",
    "sqlite",
    "kyotocabinet",
    "berkeleydb",
    "wiredtiger-btree",
    "wiredtiger-lsm",
    "fjall",
    "redb",
];

/// The engines that implement [`Engine::seek_scan`] (db_bench's `--seek_nexts`); the
/// conformance test checks this list against every engine of the build.
pub const SEEK_SCAN: &[&str] = &["strata", "strata-blobs", "leveldb", "rocksdb", "lmdb"];

/// The cargo feature that builds engine `name`.
pub fn feature_of(name: &str) -> &str {
    match name {
        "wiredtiger-btree" | "wiredtiger-lsm" => "wiredtiger",
        other => other,
    }
}

/// The engines this build has, in the order of [`ALL`].
pub fn available() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut names = vec!["strata", "strata-blobs"];
    #[cfg(feature = "leveldb")]
    names.push("leveldb");
    #[cfg(feature = "rocksdb")]
    names.push("rocksdb");
    #[cfg(feature = "lmdb")]
    names.push("lmdb");
    #[cfg(feature = "sqlite")]
    names.push("sqlite");
    #[cfg(feature = "kyotocabinet")]
    names.push("kyotocabinet");
    #[cfg(feature = "berkeleydb")]
    names.push("berkeleydb");
    #[cfg(feature = "wiredtiger")]
    names.extend(["wiredtiger-btree", "wiredtiger-lsm"]);
    #[cfg(feature = "fjall")]
    names.push("fjall");
    #[cfg(feature = "redb")]
    names.push("redb");
    names
}

/// Opens (creating) engine `name` in `dir`, an existing empty or engine-owned directory.
pub fn open(name: &str, dir: &Path, config: &EngineConfig) -> EngineResult<Box<dyn Engine>> {
    let engine: Box<dyn Engine> = match name {
        "strata" => Box::new(strata_engine::StrataEngine::open(dir, config, None)?),
        "strata-blobs" => Box::new(strata_engine::StrataEngine::open(
            dir,
            config,
            Some(strata_engine::BLOB_THRESHOLD),
        )?),
        #[cfg(feature = "leveldb")]
        "leveldb" => Box::new(leveldb::LevelDbEngine::open(dir, config)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(rocksdb::RocksDbEngine::open(dir, config)?),
        #[cfg(feature = "lmdb")]
        "lmdb" => Box::new(lmdb::LmdbEngine::open(dir, config)?),
        #[cfg(feature = "sqlite")]
        "sqlite" => Box::new(sqlite::SqliteEngine::open(dir, config)?),
        #[cfg(feature = "kyotocabinet")]
        "kyotocabinet" => Box::new(kyotocabinet::KyotoEngine::open(dir, config)?),
        #[cfg(feature = "berkeleydb")]
        "berkeleydb" => Box::new(berkeleydb::BerkeleyDbEngine::open(dir, config)?),
        #[cfg(feature = "wiredtiger")]
        "wiredtiger-btree" => Box::new(wiredtiger::WiredTigerEngine::open(dir, config, false)?),
        #[cfg(feature = "wiredtiger")]
        "wiredtiger-lsm" => Box::new(wiredtiger::WiredTigerEngine::open(dir, config, true)?),
        #[cfg(feature = "fjall")]
        "fjall" => Box::new(fjall_engine::FjallEngine::open(dir, config)?),
        #[cfg(feature = "redb")]
        "redb" => Box::new(redb_engine::RedbEngine::open(dir, config)?),
        other if ALL.contains(&other) => {
            return Err(format!(
                "engine '{other}' is not in this build: rebuild with `--features {}` (this build has: {})",
                feature_of(other),
                available().join(", ")
            ))
        }
        other => {
            return Err(format!(
                "unknown engine '{other}' (known: {})",
                ALL.join(", ")
            ))
        }
    };
    Ok(engine)
}
