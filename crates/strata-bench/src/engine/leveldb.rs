// SPDX-License-Identifier: MIT OR Apache-2.0
//! LevelDB 1.23 (Debian's libleveldb) as a db_bench engine, through its C API (strata-testkit's
//! safe wrapper of it, which strata's LevelDB tests use too).

use std::path::Path;

use strata_testkit::leveldb::{LevelDb, Options, WriteBatch};

use super::{Engine, EngineConfig, EngineResult};

/// An open LevelDB.
pub struct LevelDbEngine {
    db: LevelDb,
}

impl LevelDbEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let options = Options {
            create_if_missing: true,
            cache_size: Some(config.cache_size),
            write_buffer_size: Some(config.write_buffer_size),
            compression: Some(i32::from(config.compression)),
            bloom_bits: config.bloom_bits.map(|bits| bits as i32),
            verify_checksums: config.verify_checksums,
            ..Options::default()
        };
        Ok(LevelDbEngine {
            db: LevelDb::open(dir, &options)?,
        })
    }
}

impl Engine for LevelDbEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        let mut batch = WriteBatch::new();
        for (k, v) in entries {
            batch.put(k, v);
        }
        self.db.write(&batch, sync)
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        let mut batch = WriteBatch::new();
        for k in keys {
            batch.delete(k);
        }
        self.db.write(&batch, sync)
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        self.db.get_into(key, None, value)
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        let mut it = self.db.iter(None);
        let mut n = 0u64;
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        while it.valid() && n < limit {
            visit(it.key(), it.value());
            n += 1;
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status()?;
        Ok(n)
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        let mut it = self.db.iter(None);
        it.seek(key);
        let valid = it.valid();
        if valid {
            found.clear();
            found.extend_from_slice(it.key());
        }
        it.status()?;
        Ok(valid)
    }

    fn seek_scan(
        &self,
        key: &[u8],
        nexts: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        let mut it = self.db.iter(None);
        it.seek(key);
        let mut n = 0u64;
        while it.valid() {
            visit(it.key(), it.value());
            n += 1;
            if n > nexts {
                break;
            }
            it.next();
        }
        it.status()?;
        Ok(n)
    }

    fn compact(&self) -> EngineResult<()> {
        self.db.compact_range(None, None);
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        self.db.property("leveldb.stats")
    }
}
