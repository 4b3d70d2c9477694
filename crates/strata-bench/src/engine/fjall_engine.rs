// SPDX-License-Identifier: MIT OR Apache-2.0
//! fjall (crates.io, pure Rust), a log-structured merge tree, as a db_bench engine.
//!
//! One database in `dir` with one keyspace (fjall's column family), `db_bench`.
//!
//! - Block cache: `cache_size` (`DatabaseBuilder::cache_size`; fjall's default is 32 MiB).
//! - Memtable: `write_buffer_size` (`KeyspaceCreateOptions::max_memtable_size`; default 64 MiB).
//! - Compression: LZ4, fjall's only codec, on the data blocks of every level when
//!   `compression` is on (fjall's own default leaves L0 and L1 uncompressed); none at all,
//!   journal included, when it is off. Index blocks stay uncompressed, as by default.
//! - Bloom filters: `bloom_bits` bits per key on every level when set; none when unset, as
//!   for every other engine (fjall's own default is a filter on every level).
//! - Checksums: fjall checks every block it reads from disk, always; `verify_checksums`
//!   has nothing to switch.
//! - Writes: an asynchronous write goes into the journal and is flushed to the operating
//!   system (`PersistMode::Buffer`, fjall's default), without fsync. A synced write is
//!   fsynced (`PersistMode::SyncAll`) before it returns. Batches are fjall's atomic
//!   `WriteBatch`.
//! - compact(): flushes the memtable, then fjall's major compaction (`Keyspace::major_compact`).
//! - Everything else is fjall's default: leveled compaction, 7 levels, 4 KiB blocks, 64 MB
//!   tables in a major compaction, background workers = min(cores, 4), 512 MiB journal cap.
//!
//! Closing is dropping: the last handle stops the background workers, waits for them, fsyncs
//! the journal and releases the lock file.

use std::path::Path;

use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{Engine, EngineConfig, EngineResult};

/// The one keyspace db_bench writes.
const KEYSPACE: &str = "db_bench";

pub struct FjallEngine {
    // Declared before `db`: a keyspace handle is dropped before the database it belongs to.
    keyspace: Keyspace,
    db: Database,
}

fn err(e: fjall::Error) -> String {
    format!("fjall: {e}")
}

impl FjallEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let mut builder = Database::builder(dir).cache_size(config.cache_size as u64);
        if !config.compression {
            builder = builder.journal_compression(CompressionType::None);
        }
        let db = builder.open().map_err(err)?;

        // These options apply when the keyspace is created; a reopened keyspace keeps the
        // options it was created with, which fjall stores.
        let compression = if config.compression {
            CompressionPolicy::all(CompressionType::Lz4)
        } else {
            CompressionPolicy::disabled()
        };
        let filters = match config.bloom_bits {
            Some(bits) => FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(bits as f32),
            )),
            None => FilterPolicy::disabled(),
        };
        let write_buffer_size = config.write_buffer_size as u64;
        let keyspace = db
            .keyspace(KEYSPACE, || {
                KeyspaceCreateOptions::default()
                    .max_memtable_size(write_buffer_size)
                    .data_block_compression_policy(compression)
                    .filter_policy(filters)
            })
            .map_err(err)?;
        Ok(FjallEngine { keyspace, db })
    }

    fn commit(&self, batch: fjall::OwnedWriteBatch, sync: bool) -> EngineResult<()> {
        // `Database::batch` starts with `PersistMode::Buffer`: flushed to the OS, no fsync.
        let batch = if sync {
            batch.durability(Some(PersistMode::SyncAll))
        } else {
            batch
        };
        batch.commit().map_err(err)
    }
}

impl Engine for FjallEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        if let [(key, value)] = entries {
            // A single put: fjall's direct path, which journals it the same way a batch does.
            self.keyspace.insert(*key, *value).map_err(err)?;
            if sync {
                self.db.persist(PersistMode::SyncAll).map_err(err)?;
            }
            return Ok(());
        }
        let mut batch = self.db.batch();
        for (key, value) in entries {
            batch.insert(&self.keyspace, *key, *value);
        }
        self.commit(batch, sync)
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        if let [key] = keys {
            self.keyspace.remove(*key).map_err(err)?;
            if sync {
                self.db.persist(PersistMode::SyncAll).map_err(err)?;
            }
            return Ok(());
        }
        let mut batch = self.db.batch();
        for key in keys {
            batch.remove(&self.keyspace, *key);
        }
        self.commit(batch, sync)
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        match self.keyspace.get(key).map_err(err)? {
            Some(found) => {
                value.clear();
                value.extend_from_slice(&found);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        let mut iter = self.keyspace.iter();
        let mut n = 0;
        while n < limit {
            let next = if reverse {
                iter.next_back()
            } else {
                iter.next()
            };
            let Some(guard) = next else { break };
            let (key, value) = guard.into_inner().map_err(err)?;
            visit(&key, &value);
            n += 1;
        }
        Ok(n)
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        match self.keyspace.range::<&[u8], _>(key..).next() {
            Some(guard) => {
                let first = guard.key().map_err(err)?;
                found.clear();
                found.extend_from_slice(&first);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn compact(&self) -> EngineResult<()> {
        // Major compaction merges the tables only, so the memtable is flushed into one first.
        // Both are public but `#[doc(hidden)]` in fjall 3.
        self.keyspace.rotate_memtable_and_wait().map_err(err)?;
        self.keyspace.major_compact().map_err(err)
    }

    fn stats(&self) -> Option<String> {
        let ks = &self.keyspace;
        let mut out = format!(
            "fjall: {} tables ({} in L0), {} sealed memtables, {} bytes on disk\n",
            ks.table_count(),
            ks.l0_table_count(),
            ks.sealed_memtable_count(),
            ks.disk_space(),
        );
        out.push_str(&format!(
            "journals: {}; write buffer: {} bytes; block cache: {} of {} bytes\n",
            self.db.journal_count(),
            self.db.write_buffer_size(),
            self.db.cache_size(),
            self.db.cache_capacity(),
        ));
        out.push_str(&format!(
            "compactions: {} completed, {} active, {:?} spent\n",
            self.db.compactions_completed(),
            self.db.active_compactions(),
            self.db.time_compacting(),
        ));
        Some(out)
    }
}
