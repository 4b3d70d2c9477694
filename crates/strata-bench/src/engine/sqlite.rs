// SPDX-License-Identifier: MIT OR Apache-2.0
//! SQLite 3 (Debian's libsqlite3, linked through rusqlite without its `bundled` feature) as a
//! db_bench engine, configured as in Google's 2011 LevelDB benchmark report:
//!
//! - One database file, `sqlite.db`, in WAL journal mode with exclusive locking mode.
//! - 1 KB pages, and `cache_size` = `memory_budget() / 1024` pages.
//! - `wal_autocheckpoint` = `write_buffer_size / 1024` pages, so that the WAL is
//!   checkpointed about as often as an LSM engine flushes its memtable.
//! - One ordinary (rowid) table `kv (key BLOB PRIMARY KEY, value BLOB)`, as in the report.
//!   Not `WITHOUT ROWID`: that stores the whole row in the interior pages of its b-tree,
//!   and SQLite advises it only for rows under about 1/20 of a page; a 16-byte key with a
//!   100-byte value is about 1/9 of a 1 KB page.
//! - Cached prepared statements. A batch of more than one entry is one transaction; a
//!   single entry is one autocommitted statement (which is the same thing).
//!   `INSERT OR REPLACE`, and `DELETE ... WHERE key = ?`.
//! - `synchronous = OFF` for asynchronous writes: a commit is written to the WAL file, and
//!   so reaches the operating system, without fsync. A `sync` write switches to
//!   `synchronous = FULL` for its transaction, so that the WAL is fsynced at commit (in WAL
//!   mode NORMAL would not make a commit durable), and back to OFF afterwards.
//! - Scans: `ORDER BY key [DESC] LIMIT ?`; seeks: `WHERE key >= ? ORDER BY key LIMIT 1`.
//!   Blobs compare with memcmp, then by length: the byte order of every other engine.
//! - `compact()` is `VACUUM` (SQLite's rebuild of the whole database into packed pages),
//!   followed by `PRAGMA wal_checkpoint(TRUNCATE)` so that the file holds the result.
//! - No compression and no checksums: SQLite has neither, so those settings are ignored.
//! - One connection behind a `Mutex`: exclusive locking mode forbids a second connection,
//!   and a rusqlite `Connection` is `Send` but not `Sync`.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};

use super::{Engine, EngineConfig, EngineResult};

/// SQLite's page size, as in the 2011 report.
const PAGE_SIZE: usize = 1024;

const INSERT: &str = "INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)";
const DELETE: &str = "DELETE FROM kv WHERE key = ?1";
const GET: &str = "SELECT value FROM kv WHERE key = ?1";
const SCAN_FORWARD: &str = "SELECT key, value FROM kv ORDER BY key LIMIT ?1";
const SCAN_REVERSE: &str = "SELECT key, value FROM kv ORDER BY key DESC LIMIT ?1";
const SEEK: &str = "SELECT key FROM kv WHERE key >= ?1 ORDER BY key LIMIT 1";

fn err(e: rusqlite::Error) -> String {
    format!("sqlite: {e}")
}

/// An open SQLite database: one connection, shared through a mutex.
pub struct SqliteEngine {
    conn: Mutex<Connection>,
}

impl SqliteEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let conn = Connection::open(dir.join("sqlite.db")).map_err(err)?;
        // The page size must be set before the database is first written (and before WAL
        // mode is on); on a reopen SQLite keeps the file's page size.
        conn.pragma_update(None, "page_size", PAGE_SIZE as i64)
            .map_err(err)?;
        let cache_pages = (config.memory_budget() / PAGE_SIZE).max(1) as i64;
        conn.pragma_update(None, "cache_size", cache_pages)
            .map_err(err)?;
        let locking: String = conn
            .pragma_update_and_check(None, "locking_mode", "EXCLUSIVE", |row| row.get(0))
            .map_err(err)?;
        if !locking.eq_ignore_ascii_case("exclusive") {
            return Err(format!("sqlite: locking_mode is {locking}, not exclusive"));
        }
        let journal: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(err)?;
        if !journal.eq_ignore_ascii_case("wal") {
            return Err(format!("sqlite: journal_mode is {journal}, not wal"));
        }
        let checkpoint_pages = (config.write_buffer_size / PAGE_SIZE).max(1) as i64;
        conn.pragma_update(None, "wal_autocheckpoint", checkpoint_pages)
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "OFF")
            .map_err(err)?;
        conn.execute_batch("CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB)")
            .map_err(err)?;
        Ok(SqliteEngine {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> EngineResult<MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| "sqlite: the connection's mutex is poisoned".to_string())
    }

    /// Runs `apply` as one transaction (or, for a single statement, as one autocommitted
    /// statement), durable at return if `sync`.
    fn transaction(
        &self,
        statements: usize,
        sync: bool,
        apply: impl FnOnce(&Connection) -> rusqlite::Result<()>,
    ) -> EngineResult<()> {
        let conn = self.conn()?;
        if sync {
            conn.execute_batch("PRAGMA synchronous = FULL")
                .map_err(err)?;
        }
        let explicit = statements > 1;
        let mut result = if explicit {
            conn.prepare_cached("BEGIN").and_then(|mut s| s.execute([]))
        } else {
            Ok(0)
        };
        if result.is_ok() {
            result = apply(&conn).map(|()| 0);
        }
        if explicit && result.is_ok() {
            result = conn
                .prepare_cached("COMMIT")
                .and_then(|mut s| s.execute([]));
        }
        if result.is_err() && !conn.is_autocommit() {
            // Best effort: the error being reported is the original one.
            let _ = conn.execute_batch("ROLLBACK");
        }
        if sync {
            let restored = conn.execute_batch("PRAGMA synchronous = OFF");
            if result.is_ok() {
                restored.map_err(err)?;
            }
        }
        result.map(|_| ()).map_err(err)
    }
}

/// Column `i` of `row` as bytes: every key and value is stored as a blob.
fn blob<'r>(row: &'r Row<'_>, i: usize) -> EngineResult<&'r [u8]> {
    match row.get_ref(i).map_err(err)? {
        ValueRef::Blob(b) => Ok(b),
        ValueRef::Null => Ok(&[]),
        other => Err(format!(
            "sqlite: column {i} holds {:?}, not a blob",
            other.data_type()
        )),
    }
}

impl Engine for SqliteEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        self.transaction(entries.len(), sync, |conn| {
            let mut insert = conn.prepare_cached(INSERT)?;
            for (k, v) in entries {
                insert.execute((k, v))?;
            }
            Ok(())
        })
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        self.transaction(keys.len(), sync, |conn| {
            let mut delete = conn.prepare_cached(DELETE)?;
            for k in keys {
                delete.execute([k])?;
            }
            Ok(())
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        let conn = self.conn()?;
        let mut get = conn.prepare_cached(GET).map_err(err)?;
        let mut rows = get.query([key]).map_err(err)?;
        match rows.next().map_err(err)? {
            Some(row) => {
                value.clear();
                value.extend_from_slice(blob(row, 0)?);
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
        let conn = self.conn()?;
        let sql = if reverse { SCAN_REVERSE } else { SCAN_FORWARD };
        let mut scan = conn.prepare_cached(sql).map_err(err)?;
        let limit_param = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = scan.query([limit_param]).map_err(err)?;
        let mut n = 0u64;
        while let Some(row) = rows.next().map_err(err)? {
            visit(blob(row, 0)?, blob(row, 1)?);
            n += 1;
        }
        Ok(n)
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        let conn = self.conn()?;
        let mut seek = conn.prepare_cached(SEEK).map_err(err)?;
        let mut rows = seek.query([key]).map_err(err)?;
        match rows.next().map_err(err)? {
            Some(row) => {
                found.clear();
                found.extend_from_slice(blob(row, 0)?);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn compact(&self) -> EngineResult<()> {
        let conn = self.conn()?;
        conn.execute_batch("VACUUM").map_err(err)?;
        // VACUUM's output sits in the WAL until a checkpoint; copy it into the database file
        // and empty the WAL, so that the file on disk is the compacted one.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(err)
    }

    fn stats(&self) -> Option<String> {
        let conn = self.conn().ok()?;
        let mut out = String::new();
        for pragma in ["page_size", "page_count", "freelist_count", "cache_size"] {
            let v: i64 = conn
                .query_row(&format!("PRAGMA {pragma}"), [], |row| row.get(0))
                .ok()?;
            out.push_str(&format!("{pragma}: {v}\n"));
        }
        Some(out)
    }
}
