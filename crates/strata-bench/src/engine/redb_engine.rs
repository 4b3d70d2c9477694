// SPDX-License-Identifier: MIT OR Apache-2.0
//! redb (crates.io, pure Rust), a copy-on-write B-tree, as a db_bench engine.
//!
//! One file, `dir/db_bench.redb`, with one table `&[u8] -> &[u8]`.
//!
//! - Cache: `memory_budget()` (`Builder::set_cache_size`; redb's default is 1 GiB). It holds
//!   both read pages and the pages written by commits that are not yet on disk.
//! - Compression: none; redb has none. Bloom filters: none; a B-tree has none.
//! - Checksums: redb has no read option to verify them; it checks them when it repairs a
//!   database after a crash.
//! - A write or delete is one write transaction (redb runs one at a time), committed
//!   atomically.
//! - An asynchronous write commits with `Durability::None`: the commit is visible to later
//!   transactions at once, but its pages stay in redb's write buffer (written to the file at
//!   the next durable commit or the close, or earlier when the cache needs the room) and
//!   nothing is fsynced. A crash, even of the process alone, loses every
//!   such commit since the last durable one, and the database reopens consistent at that
//!   durable commit. This is the weakest level redb has. Closing the database (dropping it)
//!   makes the pending commits durable.
//! - A synced write commits with `Durability::Immediate` (redb's default): durable when
//!   `commit` returns, with fsync.
//! - Everything else is redb's default: 4 KiB pages, 1-phase commit (two-phase off),
//!   quick-repair off (so opening after a crash walks the whole file), exclusive-writer mode.
//! - compact(): `Database::compact()`, repeated until it reports nothing left to do. It
//!   needs `&mut Database`, so the database sits behind an `RwLock`: every operation takes the
//!   read lock, and compact() the write lock, which also guarantees it that no transaction is
//!   live.

use std::path::Path;
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use redb::{Builder, Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Engine, EngineConfig, EngineResult};

/// The one table db_bench writes.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("db_bench");

pub struct RedbEngine {
    db: RwLock<Database>,
}

fn err(e: impl std::fmt::Display) -> String {
    format!("redb: {e}")
}

impl RedbEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        // `create` opens the file if it is already a redb database.
        let db = Builder::new()
            .set_cache_size(config.memory_budget())
            .create(dir.join("db_bench.redb"))
            .map_err(err)?;
        // Create the table, so that reads on an empty database find it.
        let txn = db.begin_write().map_err(err)?;
        txn.open_table(TABLE).map_err(err)?;
        txn.commit().map_err(err)?;
        Ok(RedbEngine {
            db: RwLock::new(db),
        })
    }

    fn db(&self) -> RwLockReadGuard<'_, Database> {
        // A panic elsewhere cannot leave the database half-changed: redb rolls back an
        // uncommitted transaction when it is dropped.
        self.db.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `apply` on the table inside one write transaction, and commits it.
    fn transact(
        &self,
        sync: bool,
        apply: impl FnOnce(
            &mut redb::Table<'_, &'static [u8], &'static [u8]>,
        ) -> Result<(), redb::StorageError>,
    ) -> EngineResult<()> {
        let db = self.db();
        let mut txn = db.begin_write().map_err(err)?;
        let durability = if sync {
            Durability::Immediate
        } else {
            Durability::None
        };
        txn.set_durability(durability).map_err(err)?;
        {
            let mut table = txn.open_table(TABLE).map_err(err)?;
            apply(&mut table).map_err(err)?;
        }
        txn.commit().map_err(err)
    }
}

impl Engine for RedbEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        self.transact(sync, |table| {
            for (key, value) in entries {
                table.insert(*key, *value)?;
            }
            Ok(())
        })
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        self.transact(sync, |table| {
            for key in keys {
                table.remove(*key)?;
            }
            Ok(())
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        let db = self.db();
        let txn = db.begin_read().map_err(err)?;
        let table = txn.open_table(TABLE).map_err(err)?;
        match table.get(key).map_err(err)? {
            Some(found) => {
                value.clear();
                value.extend_from_slice(found.value());
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
        let db = self.db();
        let txn = db.begin_read().map_err(err)?;
        let table = txn.open_table(TABLE).map_err(err)?;
        let mut iter = table.iter().map_err(err)?;
        let mut n = 0;
        while n < limit {
            let next = if reverse {
                iter.next_back()
            } else {
                iter.next()
            };
            let Some(entry) = next else { break };
            let (key, value) = entry.map_err(err)?;
            visit(key.value(), value.value());
            n += 1;
        }
        Ok(n)
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        let db = self.db();
        let txn = db.begin_read().map_err(err)?;
        let table = txn.open_table(TABLE).map_err(err)?;
        let mut range = table.range::<&[u8]>(key..).map_err(err)?;
        match range.next() {
            Some(entry) => {
                let (first, _) = entry.map_err(err)?;
                found.clear();
                found.extend_from_slice(first.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn compact(&self) -> EngineResult<()> {
        // The write lock: no other operation, hence no transaction, is live meanwhile.
        let mut db = self.db.write().unwrap_or_else(PoisonError::into_inner);
        while db.compact().map_err(err)? {}
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        let db = self.db();
        let txn = db.begin_write().ok()?;
        let stats = txn.stats().ok()?;
        txn.abort().ok()?;
        Some(format!(
            "redb: tree height {}, {} pages allocated ({} leaf, {} branch) of {} bytes\n\
             stored {} bytes, metadata {} bytes, fragmented {} bytes\n",
            stats.tree_height(),
            stats.allocated_pages(),
            stats.leaf_pages(),
            stats.branch_pages(),
            stats.page_size(),
            stats.stored_bytes(),
            stats.metadata_bytes(),
            stats.fragmented_bytes(),
        ))
    }
}
