// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata as a db_bench engine.

use std::path::Path;

use strata::{Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

use super::{Engine, EngineConfig, EngineResult};

pub struct StrataEngine {
    db: Db,
    verify_checksums: bool,
}

impl StrataEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let mut options = Options {
            create_if_missing: true,
            block_cache_capacity: config.cache_size,
            write_buffer_size: config.write_buffer_size,
            compression: if config.compression {
                Compression::Snappy
            } else {
                Compression::None
            },
            ..Options::default()
        };
        if let Some(bits) = config.bloom_bits {
            options = options.with_bloom_filter(bits);
        }
        let db = Db::open(dir, options).map_err(|e| e.to_string())?;
        Ok(StrataEngine {
            db,
            verify_checksums: config.verify_checksums,
        })
    }

    fn read_options(&self) -> ReadOptions<'static> {
        ReadOptions {
            verify_checksums: self.verify_checksums,
            ..ReadOptions::default()
        }
    }
}

impl Engine for StrataEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        let bytes: usize = entries.iter().map(|(k, v)| k.len() + v.len() + 11).sum();
        let mut batch = WriteBatch::with_capacity(bytes);
        for (k, v) in entries {
            batch.put(k, v);
        }
        self.db
            .write(&WriteOptions { sync }, batch)
            .map_err(|e| e.to_string())
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        self.db
            .get(&self.read_options(), key)
            .map_err(|e| e.to_string())
    }

    fn scan(&self, reverse: bool, limit: u64) -> EngineResult<(u64, u64)> {
        let mut it = self
            .db
            .iter(&self.read_options())
            .map_err(|e| e.to_string())?;
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let (mut n, mut bytes) = (0u64, 0u64);
        while it.valid() && n < limit {
            bytes += (it.key().len() + it.value().len()) as u64;
            n += 1;
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status().map_err(|e| e.to_string())?;
        Ok((n, bytes))
    }

    fn compact(&self) -> EngineResult<()> {
        self.db.compact_range(None, None).map_err(|e| e.to_string())
    }
}
