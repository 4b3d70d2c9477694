// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata as a db_bench engine: `strata` with default options, and `strata-blobs` with key-value
//! separation (values of [`BLOB_THRESHOLD`] bytes or more in blob files, compressed when
//! `--no_compression` is not given, as the tables are).

use std::ops::ControlFlow;
use std::path::Path;

use strata::{Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

use super::{Engine, EngineConfig, EngineResult};

/// The value size from which `strata-blobs` keeps values in blob files.
pub const BLOB_THRESHOLD: usize = 4096;

pub struct StrataEngine {
    db: Db,
    verify_checksums: bool,
    /// `EngineConfig::copying_reads`.
    copying_reads: bool,
    /// `EngineConfig::cursor_scans`.
    cursor_scans: bool,
}

impl StrataEngine {
    pub fn open(
        dir: &Path,
        config: &EngineConfig,
        blob_threshold: Option<usize>,
    ) -> EngineResult<Self> {
        let mut options = Options {
            create_if_missing: true,
            block_cache_capacity: config.cache_size,
            row_cache_capacity: config.row_cache_size,
            write_buffer_size: config.write_buffer_size,
            compression: if config.compression {
                Compression::Snappy
            } else {
                Compression::None
            },
            blob_threshold,
            blob_compression: if config.compression {
                Compression::Snappy
            } else {
                Compression::None
            },
            ..Options::default()
        };
        if let Some(n) = config.l0_slowdown_writes_trigger {
            options.l0_slowdown_writes_trigger = n;
            // A slowdown past the default stop raises the stop with it, as RocksDB does.
            options.l0_stop_writes_trigger = options.l0_stop_writes_trigger.max(n);
        }
        if let Some(n) = config.l0_stop_writes_trigger {
            options.l0_stop_writes_trigger = n;
        }
        if let Some(bits) = config.bloom_bits {
            options = options.with_bloom_filter(bits);
        }
        let db = Db::open(dir, options).map_err(|e| e.to_string())?;
        Ok(StrataEngine {
            db,
            verify_checksums: config.verify_checksums,
            copying_reads: config.copying_reads,
            cursor_scans: config.cursor_scans,
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
        // One entry is a put, as a user writes it (a large value then goes to its blob file
        // without first being copied into a batch).
        if let [(k, v)] = entries {
            return self
                .db
                .put_opt(k, v, &WriteOptions { sync })
                .map_err(|e| e.to_string());
        }
        let bytes: usize = entries.iter().map(|(k, v)| k.len() + v.len() + 11).sum();
        let mut batch = WriteBatch::with_capacity(bytes);
        for (k, v) in entries {
            batch.put(k, v);
        }
        self.db
            .write_opt(batch, &WriteOptions { sync })
            .map_err(|e| e.to_string())
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        let mut batch = WriteBatch::new();
        for k in keys {
            batch.delete(k);
        }
        self.db
            .write_opt(batch, &WriteOptions { sync })
            .map_err(|e| e.to_string())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        if self.copying_reads {
            return match self.db.get_opt(key, &self.read_options()) {
                Ok(Some(v)) => {
                    *value = v;
                    Ok(true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(e.to_string()),
            };
        }
        // Copied into the caller's buffer, as the other engines' values are: no allocation.
        match self.db.get_pinned_opt(key, &self.read_options()) {
            Ok(Some(v)) => {
                value.clear();
                value.extend_from_slice(&v);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        if self.copying_reads {
            let range = self
                .db
                .scan_opt(&self.read_options())
                .map_err(|e| e.to_string())?;
            let entries: Box<dyn Iterator<Item = _>> = if reverse {
                Box::new(range.rev())
            } else {
                Box::new(range)
            };
            let mut n = 0u64;
            for entry in entries.take(usize::try_from(limit).unwrap_or(usize::MAX)) {
                let (k, v) = entry.map_err(|e| e.to_string())?;
                visit(&k, &v);
                n += 1;
            }
            return Ok(n);
        }
        let mut it = self
            .db
            .iter_opt(&self.read_options())
            .map_err(|e| e.to_string())?;
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut n = 0u64;
        if self.cursor_scans {
            while it.valid() && n < limit {
                visit(it.key(), it.value());
                n += 1;
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
            }
        } else {
            let mut each = |key: &[u8], value: &[u8]| {
                if n == limit {
                    return ControlFlow::Break(());
                }
                visit(key, value);
                n += 1;
                ControlFlow::Continue(())
            };
            let _ = if reverse {
                it.walk_back(&mut each)
            } else {
                it.walk_forward(&mut each)
            };
        }
        it.status().map_err(|e| e.to_string())?;
        Ok(n)
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        let mut it = self
            .db
            .iter_opt(&self.read_options())
            .map_err(|e| e.to_string())?;
        it.seek(key);
        if it.valid() {
            found.clear();
            found.extend_from_slice(it.key());
            return Ok(true);
        }
        it.status().map_err(|e| e.to_string())?;
        Ok(false)
    }

    fn seek_scan(
        &self,
        key: &[u8],
        nexts: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        let mut it = self
            .db
            .iter_opt(&self.read_options())
            .map_err(|e| e.to_string())?;
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
        it.status().map_err(|e| e.to_string())?;
        Ok(n)
    }

    fn compact(&self) -> EngineResult<()> {
        self.db.compact_range(None, None).map_err(|e| e.to_string())
    }

    fn stats(&self) -> Option<String> {
        let mut out = self.db.property("leveldb.stats")?;
        let stats = self.db.stats();
        let c = &stats.block_cache;
        out.push_str(&format!(
            "Block cache: {} of {} bytes held, {} hits, {} misses, {} inserts; memtables {} bytes\n",
            c.usage_bytes,
            c.capacity_bytes,
            c.hit_count,
            c.miss_count,
            c.insert_count,
            stats.memtable_bytes + stats.immutable_memtable_bytes,
        ));
        let s = stats.stalls;
        out.push_str(&format!(
            "Write stalls: memtable full {} ({:.1} ms), level-0 stop {} ({:.1} ms), \
             level-0 slowdown {} ({:.1} ms)\n",
            s.memtable_stop_count,
            s.memtable_stop_time.as_secs_f64() * 1e3,
            s.l0_stop_count,
            s.l0_stop_time.as_secs_f64() * 1e3,
            s.l0_slowdown_count,
            s.l0_slowdown_time.as_secs_f64() * 1e3,
        ));
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers of the `Block cache:` line of `stats`: held, capacity, hits.
    fn cache_line(stats: &str) -> (u64, u64, u64) {
        let line = stats
            .lines()
            .find_map(|l| l.strip_prefix("Block cache: "))
            .unwrap_or_else(|| panic!("no block cache line in {stats}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| words[i].trim_end_matches(',').parse::<u64>().unwrap();
        assert_eq!(
            (words[1], words[3], words[4]),
            ("of", "bytes", "held,"),
            "{line}"
        );
        (number(0), number(2), number(5))
    }

    #[test]
    fn stats_report_the_block_cache_within_its_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig {
            cache_size: 64 << 10,
            ..EngineConfig::default()
        };
        let engine = StrataEngine::open(dir.path(), &config, None).unwrap();
        let value = vec![b'v'; 100];
        let keys: Vec<String> = (0..5_000).map(|i| format!("{i:016}")).collect();
        for key in &keys {
            engine.write(&[(key.as_bytes(), &value)], false).unwrap();
        }
        engine.compact().unwrap();
        let (held, capacity, hits) = cache_line(&engine.stats().unwrap());
        assert_eq!((capacity, hits), (64 << 10, 0));
        assert!(held <= capacity, "{held}");
        let mut found = Vec::new();
        for _ in 0..4 {
            for key in keys.iter().step_by(7) {
                assert!(engine.get(key.as_bytes(), &mut found).unwrap());
            }
        }
        let (held, capacity, hits) = cache_line(&engine.stats().unwrap());
        assert!(held > 0 && held <= capacity, "{held} of {capacity}");
        assert!(hits > 0);
    }
}
