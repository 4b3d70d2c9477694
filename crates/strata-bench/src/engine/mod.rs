// SPDX-License-Identifier: MIT OR Apache-2.0
//! The engines db_bench drives, behind one interface, so that every engine runs the same key
//! and value generator and the same timing loop.

#[cfg(feature = "leveldb")]
mod leveldb;
mod strata_engine;

use std::path::Path;

/// An error from any engine, as text.
pub type EngineResult<T> = Result<T, String>;

/// How every engine is configured (the reports' baseline: 4 MB of cache, compression on).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub cache_size: usize,
    pub write_buffer_size: usize,
    pub bloom_bits: Option<usize>,
    pub compression: bool,
    /// Verify block checksums on reads (strata's default; LevelDB's default is off).
    pub verify_checksums: bool,
}

/// One key-value engine.
pub trait Engine {
    /// Writes `entries` as one atomic batch (one entry for single puts).
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()>;
    /// Reads one key.
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>>;
    /// Visits up to `limit` entries in key order (descending if `reverse`); returns how many
    /// and their total key and value bytes.
    fn scan(&self, reverse: bool, limit: u64) -> EngineResult<(u64, u64)>;
    /// Compacts everything.
    fn compact(&self) -> EngineResult<()>;
}

/// The engines this build knows.
pub fn available() -> Vec<&'static str> {
    let mut names = vec!["strata"];
    if cfg!(feature = "leveldb") {
        names.push("leveldb");
    }
    names
}

/// Opens (creating) engine `name` in `dir`.
pub fn open(name: &str, dir: &Path, config: &EngineConfig) -> EngineResult<Box<dyn Engine>> {
    match name {
        "strata" => strata_engine::StrataEngine::open(dir, config).map(|e| Box::new(e) as _),
        #[cfg(feature = "leveldb")]
        "leveldb" => leveldb::LevelDbEngine::open(dir, config).map(|e| Box::new(e) as _),
        other => Err(format!(
            "unknown engine '{other}' (this build has: {})",
            available().join(", ")
        )),
    }
}
