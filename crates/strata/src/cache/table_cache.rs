// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`TableCache`]: open tables, bounded in number so that a database keeps at most about
//! `max_open_files` descriptors open.
//!
//! The caching itself (eviction, sharing, locking) is the `FileCache`'s; this module only
//! knows how to open a table.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::file_cache::{CachedFile, FileCache, FileOpener};
use super::BlockCache;
use crate::env::Env;
use crate::error::Result;
use crate::table::{Table, TableOptions};

/// File descriptors LevelDB keeps back from `max_open_files` for logs, the MANIFEST and others.
const RESERVED_FILES: usize = 10;

/// Opens tables on demand and keeps the most useful ones open.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use std::sync::Arc;
/// use strata::cache::TableCache;
/// use strata::key::{append_internal_key, ValueKind};
/// use strata::table::{TableBuilder, TableOptions};
/// use strata::{Env, MemEnv};
///
/// let env = Arc::new(MemEnv::new());
/// env.create_dir_all(Path::new("/db")).unwrap();
/// let file = env.new_writable_file(Path::new("/db/000007.ldb")).unwrap();
/// let mut builder = TableBuilder::new(TableOptions::default(), file);
/// let mut key = Vec::new();
/// append_internal_key(&mut key, b"k", 1, ValueKind::Value);
/// builder.add(&key, b"v").unwrap();
/// let size = builder.finish(true).unwrap();
///
/// let tables = TableCache::new(env, Path::new("/db"), TableOptions::default(), None, 1000);
/// let table = tables.get(7, size).unwrap();
/// assert!(Arc::ptr_eq(&table, &tables.get(7, size).unwrap()));
/// assert_eq!((tables.hit_count(), tables.miss_count()), (1, 1));
/// ```
#[derive(Debug)]
pub struct TableCache {
    tables: FileCache<TableOpener>,
    /// The tables the cache may keep open: `max_open_files - 10`.
    capacity: usize,
    /// Tables held by a version's file ([`TablePin`]), at most half the capacity. A pinned
    /// table stays in the cache (it is never evicted while pinned), so the cache's bound
    /// counts it, and a lookup through the cache finds the same open table.
    pins: Arc<AtomicUsize>,
}

/// An open table held by a version's file for as long as the file is live
/// ([`TableCache::pin_for_file`]): a point lookup then reads it without a cache lookup (no
/// hash, no lock, no reference count). While any pin holds it, the table cache does not
/// evict it. Dropping the pin releases its place in the cache's budget.
pub(crate) struct TablePin {
    table: Arc<Table>,
    pins: Arc<AtomicUsize>,
}

impl TablePin {
    /// The pinned table (an `Arc`, for a cursor to hold past the pin's borrow).
    pub(crate) fn table(&self) -> &Arc<Table> {
        &self.table
    }
}

impl Drop for TablePin {
    fn drop(&mut self) {
        self.table.unpin();
        self.pins.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for TablePin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TablePin")
            .field("table", &self.table.path())
            .finish()
    }
}

impl CachedFile for Table {
    fn is_pinned(&self) -> bool {
        self.is_pinned()
    }
}

/// Opens the tables of one database directory.
struct TableOpener {
    env: Arc<dyn Env>,
    dir: PathBuf,
    options: TableOptions,
    block_cache: Option<Arc<BlockCache>>,
}

impl FileOpener for TableOpener {
    type File = Table;
    /// The table's size, as the MANIFEST records it.
    type Hint = u64;

    fn open(&self, file_number: u64, file_size: u64) -> Result<Table> {
        let ldb = crate::filename::table_file(&self.dir, file_number);
        let (path, file) = match self.env.new_mapped_file(&ldb) {
            Ok(file) => (ldb, file),
            Err(e) if e.is_not_found() => {
                // LevelDB before 1.14 named tables `.sst`.
                let sst = crate::filename::sst_table_file(&self.dir, file_number);
                match self.env.new_mapped_file(&sst) {
                    Ok(file) => (sst, file),
                    Err(_) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        Table::open(
            self.options.clone(),
            file,
            &path,
            file_size,
            self.block_cache.clone(),
        )
    }
}

impl TableCache {
    /// A cache for the tables of the database in `dir`, keeping up to `max_open_files - 10`
    /// tables open (at least 1).
    pub fn new(
        env: Arc<dyn Env>,
        dir: &Path,
        options: TableOptions,
        block_cache: Option<Arc<BlockCache>>,
        max_open_files: usize,
    ) -> Self {
        let opener = TableOpener {
            env,
            dir: dir.to_path_buf(),
            options,
            block_cache,
        };
        let capacity = max_open_files.saturating_sub(RESERVED_FILES);
        TableCache {
            tables: FileCache::with_opener(opener, capacity),
            capacity,
            pins: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The open table with this file number, as [`get`](Self::get) returns it, pinned for a
    /// version's file if the budget allows (`Ok`): at most half the capacity is pinned, so
    /// that the cache always has room to evict among the rest. Otherwise (`Err`) the table,
    /// as `get` returns it.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub(crate) fn pin_for_file(
        &self,
        file_number: u64,
        file_size: u64,
    ) -> Result<std::result::Result<TablePin, Arc<Table>>> {
        let table = self.get(file_number, file_size)?;
        let budget = self.capacity / 2;
        let taken = self
            .pins
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < budget).then_some(n + 1)
            })
            .is_ok();
        if !taken {
            return Ok(Err(table));
        }
        table.pin();
        self.tables.keep(file_number, table.clone());
        Ok(Ok(TablePin {
            table,
            pins: self.pins.clone(),
        }))
    }

    /// Tables pinned by versions' files ([`pin_for_file`](Self::pin_for_file)) and not yet
    /// released.
    pub fn pinned_count(&self) -> usize {
        self.pins.load(Ordering::Relaxed)
    }

    /// The open table with this file number, opening it if needed. `file_size` is the size the
    /// MANIFEST records.
    ///
    /// # Errors
    /// An I/O error naming `NNNNNN.ldb` if neither `NNNNNN.ldb` nor the legacy `NNNNNN.sst`
    /// can be opened; corruption if the table is damaged.
    #[inline]
    pub fn get(&self, file_number: u64, file_size: u64) -> Result<Arc<Table>> {
        self.tables.get(file_number, file_size)
    }

    /// The open table with this file number, pinned while the caller holds it: lookups of the
    /// number return this open table, however long ago it was evicted (a reader beside a
    /// writer in another process holds its tables this way, since the writer deletes them).
    ///
    /// # Errors
    /// As [`get`](Self::get).
    ///
    /// # Example
    ///
    /// ```
    /// use std::path::Path;
    /// use std::sync::Arc;
    /// use strata::cache::TableCache;
    /// use strata::key::{append_internal_key, ValueKind};
    /// use strata::table::{TableBuilder, TableOptions};
    /// use strata::{Env, MemEnv};
    ///
    /// let env = Arc::new(MemEnv::new());
    /// env.create_dir_all(Path::new("/db")).unwrap();
    /// let file = env.new_writable_file(Path::new("/db/000007.ldb")).unwrap();
    /// let mut builder = TableBuilder::new(TableOptions::default(), file);
    /// let mut key = Vec::new();
    /// append_internal_key(&mut key, b"k", 1, ValueKind::Value);
    /// builder.add(&key, b"v").unwrap();
    /// let size = builder.finish(true).unwrap();
    ///
    /// let tables = TableCache::new(env.clone(), Path::new("/db"), TableOptions::default(), None, 1000);
    /// let held = tables.pin(7, size).unwrap();
    /// tables.evict(7);
    /// env.remove_file(Path::new("/db/000007.ldb")).unwrap();
    /// assert!(Arc::ptr_eq(&held, &tables.get(7, size).unwrap()));
    /// ```
    pub fn pin(&self, file_number: u64, file_size: u64) -> Result<Arc<Table>> {
        self.tables.pin(file_number, file_size)
    }

    /// Forgets the table with this file number (for example once it is deleted).
    pub fn evict(&self, file_number: u64) {
        self.tables.evict(file_number);
    }

    /// The number of tables held open by the cache.
    pub fn open_count(&self) -> usize {
        self.tables.open_count()
    }

    /// Lookups ([`get`](Self::get)) that found their table open, since the cache was made.
    pub fn hit_count(&self) -> u64 {
        self.tables.hit_count()
    }

    /// Lookups that opened their table (or failed to), since the cache was made.
    pub fn miss_count(&self) -> u64 {
        self.tables.miss_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MemEnv;
    use crate::key::{append_internal_key, ValueKind};
    use crate::table::TableBuilder;

    fn make_table(env: &MemEnv, name: &str) -> u64 {
        let file = env.new_writable_file(&Path::new("/db").join(name)).unwrap();
        let mut b = TableBuilder::new(TableOptions::default(), file);
        let mut key = Vec::new();
        append_internal_key(&mut key, name.as_bytes(), 1, ValueKind::Value);
        b.add(&key, b"v").unwrap();
        b.finish(true).unwrap()
    }

    fn setup(max_open_files: usize) -> (MemEnv, TableCache) {
        let env = MemEnv::new();
        env.create_dir_all(Path::new("/db")).unwrap();
        let cache = TableCache::new(
            Arc::new(env.clone()),
            Path::new("/db"),
            TableOptions::default(),
            None,
            max_open_files,
        );
        (env, cache)
    }

    #[test]
    fn opens_legacy_sst_names() {
        let (env, cache) = setup(100);
        let size = make_table(&env, "000003.sst");
        let table = cache.get(3, size).unwrap();
        assert!(table.path().ends_with("000003.sst"));
    }

    #[test]
    fn missing_table_names_the_ldb_path() {
        let (_env, cache) = setup(100);
        let err = cache.get(42, 100).unwrap_err();
        assert!(err.is_not_found());
        assert!(err.to_string().contains("000042.ldb"), "{err}");
    }

    #[test]
    fn damaged_table_is_corruption_and_is_not_cached() {
        let (env, cache) = setup(100);
        crate::env::write_file(&env, Path::new("/db/000005.ldb"), &[0u8; 100], false).unwrap();
        assert!(cache.get(5, 100).unwrap_err().is_corruption());
        assert_eq!(cache.open_count(), 0);
    }

    #[test]
    fn holds_a_bounded_number_of_tables() {
        let (env, cache) = setup(RESERVED_FILES + 20);
        let sizes: Vec<u64> = (1..=200)
            .map(|n| make_table(&env, &format!("{n:06}.ldb")))
            .collect();
        for (i, &size) in sizes.iter().enumerate() {
            cache.get(i as u64 + 1, size).unwrap();
            assert!(cache.open_count() <= 20, "{} open", cache.open_count());
        }
        cache.evict(200);
        assert!(cache.open_count() <= 19);
    }

    /// At most half the capacity is pinned; pinned tables stay in the cache (never evicted
    /// while pinned) and count towards its bound, so a lookup through the cache finds the
    /// same open table; unpinned, they are evicted as any other.
    #[test]
    fn pinned_tables_stay_in_the_cache_within_its_bound() {
        let (env, cache) = setup(RESERVED_FILES + 20);
        let sizes: Vec<u64> = (1..=100)
            .map(|n| make_table(&env, &format!("{n:06}.ldb")))
            .collect();
        let get = |i: usize| cache.get(i as u64 + 1, sizes[i]).unwrap();
        // Filled first, so that the tables after these enter the cache cold (quick_cache
        // admits the first ones as hot).
        for i in 50..70 {
            get(i);
        }
        let mut pins = Vec::new();
        for (i, &size) in sizes.iter().enumerate().take(15) {
            match cache.pin_for_file(i as u64 + 1, size).unwrap() {
                Ok(pin) => {
                    assert!(pin.table().path().ends_with(format!("{:06}.ldb", i + 1)));
                    pins.push(pin);
                }
                Err(table) => assert!(i >= 10, "table {i} not pinned: {table:?}"),
            }
        }
        assert_eq!((pins.len(), cache.pinned_count()), (10, 10));
        for i in 70..100 {
            get(i);
            assert!(cache.open_count() <= 20, "{} open", cache.open_count());
        }
        // Every pinned table is still the cache's: looked up, it is the same open table. The
        // five looked up as often but not pinned (over the budget) were evicted.
        let opens = cache.miss_count();
        for (i, pin) in pins.iter().enumerate() {
            assert!(Arc::ptr_eq(&get(i), pin.table()), "table {i} reopened");
        }
        assert_eq!(cache.miss_count(), opens);
        for i in 10..15 {
            get(i);
        }
        assert_eq!(cache.miss_count() - opens, 5);
        let tables: Vec<Arc<Table>> = pins.iter().map(|p| p.table.clone()).collect();
        drop(pins);
        assert_eq!(cache.pinned_count(), 0);
        assert!(tables.iter().all(|t| !t.is_pinned()), "unpinned, they may be evicted");
    }
}
