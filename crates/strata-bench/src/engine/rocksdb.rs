// SPDX-License-Identifier: MIT OR Apache-2.0
//! RocksDB 7.8 (Debian's librocksdb) as a db_bench engine, through its C API (`rocksdb/c.h`).
//!
//! Configured like the LevelDB baseline, and otherwise left at RocksDB's defaults:
//!
//! - `create_if_missing`.
//! - A block-based table factory with an LRU block cache of `cache_size` bytes
//!   (`rocksdb_cache_create_lru`: RocksDB picks the shard count itself).
//! - `write_buffer_size` from the configuration.
//! - Snappy compression when `compression` is on, none otherwise.
//! - A full-filter Bloom filter of `bloom_bits` bits per key when set (RocksDB 7 has no
//!   block-based filters any more); none otherwise.
//! - Reads with `verify_checksums` from the configuration.
//! - Asynchronous writes go to the write-ahead log without fsync; `sync` writes use write
//!   options with `sync = 1` (the WAL is synced before the write returns).
//!
//! Notable defaults that apply (RocksDB 7.8): leveled compaction, 7 levels, L0 compaction at
//! 4 files (slowdown at 20, stop at 36), `max_background_jobs = 2` (one flush and one
//! compaction thread), `max_write_buffer_number = 2`, `target_file_size_base = 64 MiB`,
//! `max_bytes_for_level_base = 256 MiB` with a multiplier of 10, 4 KiB blocks,
//! `max_open_files = -1`, the WAL on, concurrent memtable writes on, and the skip-list
//! memtable. The exact list is in the `OPTIONS-*` file RocksDB writes into the directory.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::path::Path;

use super::{Engine, EngineConfig, EngineResult};

#[repr(C)]
struct RawDb([u8; 0]);
#[repr(C)]
struct RawOptions([u8; 0]);
#[repr(C)]
struct RawTableOptions([u8; 0]);
#[repr(C)]
struct RawReadOptions([u8; 0]);
#[repr(C)]
struct RawWriteOptions([u8; 0]);
#[repr(C)]
struct RawIter([u8; 0]);
#[repr(C)]
struct RawBatch([u8; 0]);
#[repr(C)]
struct RawCache([u8; 0]);
#[repr(C)]
struct RawPolicy([u8; 0]);
#[repr(C)]
struct RawPinnable([u8; 0]);

/// `rocksdb_no_compression` in c.h.
const NO_COMPRESSION: c_int = 0;
/// `rocksdb_snappy_compression` in c.h.
const SNAPPY_COMPRESSION: c_int = 1;

#[link(name = "rocksdb")]
extern "C" {
    fn rocksdb_options_create() -> *mut RawOptions;
    fn rocksdb_options_destroy(o: *mut RawOptions);
    fn rocksdb_options_set_create_if_missing(o: *mut RawOptions, v: c_uchar);
    fn rocksdb_options_set_write_buffer_size(o: *mut RawOptions, v: usize);
    fn rocksdb_options_set_level0_slowdown_writes_trigger(o: *mut RawOptions, n: c_int);
    fn rocksdb_options_set_level0_stop_writes_trigger(o: *mut RawOptions, n: c_int);
    fn rocksdb_options_set_compression(o: *mut RawOptions, v: c_int);
    fn rocksdb_options_set_block_based_table_factory(o: *mut RawOptions, t: *mut RawTableOptions);
    fn rocksdb_block_based_options_create() -> *mut RawTableOptions;
    fn rocksdb_block_based_options_destroy(t: *mut RawTableOptions);
    fn rocksdb_block_based_options_set_block_cache(t: *mut RawTableOptions, c: *mut RawCache);
    fn rocksdb_block_based_options_set_filter_policy(t: *mut RawTableOptions, p: *mut RawPolicy);
    fn rocksdb_cache_create_lru(capacity: usize) -> *mut RawCache;
    fn rocksdb_options_set_row_cache(o: *mut RawOptions, c: *mut RawCache);
    fn rocksdb_cache_destroy(c: *mut RawCache);
    fn rocksdb_filterpolicy_create_bloom_full(bits_per_key: f64) -> *mut RawPolicy;
    fn rocksdb_open(o: *const RawOptions, name: *const c_char, err: *mut *mut c_char)
        -> *mut RawDb;
    fn rocksdb_close(db: *mut RawDb);
    fn rocksdb_readoptions_create() -> *mut RawReadOptions;
    fn rocksdb_readoptions_destroy(o: *mut RawReadOptions);
    fn rocksdb_readoptions_set_verify_checksums(o: *mut RawReadOptions, v: c_uchar);
    fn rocksdb_writeoptions_create() -> *mut RawWriteOptions;
    fn rocksdb_writeoptions_destroy(o: *mut RawWriteOptions);
    fn rocksdb_writeoptions_set_sync(o: *mut RawWriteOptions, v: c_uchar);
    fn rocksdb_writebatch_create() -> *mut RawBatch;
    fn rocksdb_writebatch_destroy(b: *mut RawBatch);
    fn rocksdb_writebatch_put(
        b: *mut RawBatch,
        k: *const c_char,
        kl: usize,
        v: *const c_char,
        vl: usize,
    );
    fn rocksdb_writebatch_delete(b: *mut RawBatch, k: *const c_char, kl: usize);
    fn rocksdb_write(
        db: *mut RawDb,
        o: *const RawWriteOptions,
        b: *mut RawBatch,
        err: *mut *mut c_char,
    );
    fn rocksdb_get_pinned(
        db: *mut RawDb,
        o: *const RawReadOptions,
        k: *const c_char,
        kl: usize,
        err: *mut *mut c_char,
    ) -> *mut RawPinnable;
    fn rocksdb_pinnableslice_value(p: *const RawPinnable, vl: *mut usize) -> *const c_char;
    fn rocksdb_pinnableslice_destroy(p: *mut RawPinnable);
    fn rocksdb_free(p: *mut c_void);
    fn rocksdb_create_iterator(db: *mut RawDb, o: *const RawReadOptions) -> *mut RawIter;
    fn rocksdb_iter_destroy(it: *mut RawIter);
    fn rocksdb_iter_valid(it: *const RawIter) -> c_uchar;
    fn rocksdb_iter_seek_to_first(it: *mut RawIter);
    fn rocksdb_iter_seek_to_last(it: *mut RawIter);
    fn rocksdb_iter_seek(it: *mut RawIter, k: *const c_char, kl: usize);
    fn rocksdb_iter_next(it: *mut RawIter);
    fn rocksdb_iter_prev(it: *mut RawIter);
    fn rocksdb_iter_key(it: *const RawIter, l: *mut usize) -> *const c_char;
    fn rocksdb_iter_value(it: *const RawIter, l: *mut usize) -> *const c_char;
    fn rocksdb_iter_get_error(it: *const RawIter, err: *mut *mut c_char);
    fn rocksdb_compact_range(
        db: *mut RawDb,
        s: *const c_char,
        sl: usize,
        l: *const c_char,
        ll: usize,
    );
    fn rocksdb_property_value(db: *mut RawDb, name: *const c_char) -> *mut c_char;
}

/// Turns a RocksDB error string (malloc'ed, or null for success) into a result, freeing it.
fn check(err: *mut c_char) -> EngineResult<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: RocksDB reports errors as malloc'ed NUL-terminated strings (strdup), read here.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: the string is freed once, with the library's allocator.
    unsafe { rocksdb_free(err.cast()) };
    Err(format!("rocksdb: {msg}"))
}

/// An open RocksDB. Every raw pointer is created in `open` and destroyed once in `Drop`.
/// The Bloom filter policy, if any, is owned by the table options (RocksDB's C API moves it
/// into a `shared_ptr`), so it is not destroyed separately.
pub struct RocksDbEngine {
    db: *mut RawDb,
    options: *mut RawOptions,
    table: *mut RawTableOptions,
    cache: *mut RawCache,
    /// RocksDB's row cache (`--row_cache_size`), or null.
    row_cache: *mut RawCache,
    read: *mut RawReadOptions,
    write_plain: *mut RawWriteOptions,
    write_sync: *mut RawWriteOptions,
}

impl RocksDbEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let name = CString::new(dir.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: plain C API calls on objects created here and owned by the returned value
        // (which destroys them in `Drop`, also when `rocksdb_open` fails and `db` is null).
        unsafe {
            let options = rocksdb_options_create();
            rocksdb_options_set_create_if_missing(options, 1);
            rocksdb_options_set_write_buffer_size(options, config.write_buffer_size);
            rocksdb_options_set_compression(
                options,
                if config.compression {
                    SNAPPY_COMPRESSION
                } else {
                    NO_COMPRESSION
                },
            );
            let table = rocksdb_block_based_options_create();
            let cache = rocksdb_cache_create_lru(config.cache_size);
            rocksdb_block_based_options_set_block_cache(table, cache);
            if let Some(bits) = config.bloom_bits {
                // Ownership of the policy passes to `table`.
                let policy = rocksdb_filterpolicy_create_bloom_full(bits as f64);
                rocksdb_block_based_options_set_filter_policy(table, policy);
            }
            rocksdb_options_set_block_based_table_factory(options, table);
            if let Some(n) = config.l0_slowdown_writes_trigger {
                rocksdb_options_set_level0_slowdown_writes_trigger(options, trigger(n));
            }
            if let Some(n) = config.l0_stop_writes_trigger {
                rocksdb_options_set_level0_stop_writes_trigger(options, trigger(n));
            }
            let row_cache = if config.row_cache_size > 0 {
                let row_cache = rocksdb_cache_create_lru(config.row_cache_size);
                rocksdb_options_set_row_cache(options, row_cache);
                row_cache
            } else {
                std::ptr::null_mut()
            };
            let read = rocksdb_readoptions_create();
            rocksdb_readoptions_set_verify_checksums(read, u8::from(config.verify_checksums));
            let write_plain = rocksdb_writeoptions_create();
            let write_sync = rocksdb_writeoptions_create();
            rocksdb_writeoptions_set_sync(write_sync, 1);
            let mut err = std::ptr::null_mut();
            let db = rocksdb_open(options, name.as_ptr(), &mut err);
            let engine = RocksDbEngine {
                db,
                options,
                table,
                cache,
                row_cache,
                read,
                write_plain,
                write_sync,
            };
            check(err)?;
            if engine.db.is_null() {
                return Err("rocksdb: open failed without an error message".into());
            }
            Ok(engine)
        }
    }

    fn write_batch(&self, sync: bool, fill: impl Fn(*mut RawBatch)) -> EngineResult<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the batch lives only in this call; RocksDB copies keys and values into it.
        unsafe {
            let batch = rocksdb_writebatch_create();
            fill(batch);
            let options = if sync {
                self.write_sync
            } else {
                self.write_plain
            };
            rocksdb_write(self.db, options, batch, &mut err);
            rocksdb_writebatch_destroy(batch);
        }
        check(err)
    }

    /// Runs `body` on a new iterator, then checks the iterator's status and destroys it.
    fn with_iter<T>(&self, body: impl FnOnce(*mut RawIter) -> T) -> EngineResult<T> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the iterator is created, used while the database is open, and destroyed here.
        let out = unsafe {
            let it = rocksdb_create_iterator(self.db, self.read);
            let out = body(it);
            rocksdb_iter_get_error(it, &mut err);
            rocksdb_iter_destroy(it);
            out
        };
        check(err)?;
        Ok(out)
    }
}

impl Drop for RocksDbEngine {
    fn drop(&mut self) {
        // SAFETY: each object is destroyed once, the database before what it uses. The cache
        // and table options are reference-counted inside RocksDB, so destroying our handles
        // after the close is always safe.
        unsafe {
            if !self.db.is_null() {
                rocksdb_close(self.db);
            }
            rocksdb_readoptions_destroy(self.read);
            rocksdb_writeoptions_destroy(self.write_plain);
            rocksdb_writeoptions_destroy(self.write_sync);
            rocksdb_options_destroy(self.options);
            rocksdb_block_based_options_destroy(self.table);
            rocksdb_cache_destroy(self.cache);
            if !self.row_cache.is_null() {
                rocksdb_cache_destroy(self.row_cache);
            }
        }
    }
}

// SAFETY: RocksDB's `DB` is safe for concurrent use by many threads without external
// synchronization (its wiki's "Basic Operations: Concurrency"); iterators and batches are
// created and destroyed within one call on one thread, and the options objects are only read
// after `open`.
unsafe impl Send for RocksDbEngine {}
// SAFETY: as above.
unsafe impl Sync for RocksDbEngine {}

/// The current key of a valid iterator.
///
/// # Safety
/// `it` is a valid RocksDB iterator positioned on an entry; the slice lives until it moves.
unsafe fn iter_key<'a>(it: *mut RawIter) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: per the function's contract.
    unsafe {
        let p = rocksdb_iter_key(it, &mut len);
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

/// The current value of a valid iterator.
///
/// # Safety
/// As for [`iter_key`].
unsafe fn iter_value<'a>(it: *mut RawIter) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: per the function's contract.
    unsafe {
        let p = rocksdb_iter_value(it, &mut len);
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

impl Engine for RocksDbEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        self.write_batch(sync, |batch| {
            for (k, v) in entries {
                // SAFETY: `batch` is live; RocksDB copies the bytes.
                unsafe {
                    rocksdb_writebatch_put(
                        batch,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    )
                };
            }
        })
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        self.write_batch(sync, |batch| {
            for k in keys {
                // SAFETY: `batch` is live; RocksDB copies the bytes.
                unsafe { rocksdb_writebatch_delete(batch, k.as_ptr().cast(), k.len()) };
            }
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the database is open; the pinned value is copied out, then released.
        unsafe {
            let pinned =
                rocksdb_get_pinned(self.db, self.read, key.as_ptr().cast(), key.len(), &mut err);
            check(err)?;
            if pinned.is_null() {
                return Ok(false);
            }
            let mut len = 0usize;
            let p = rocksdb_pinnableslice_value(pinned, &mut len);
            value.clear();
            if len > 0 {
                value.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
            }
            rocksdb_pinnableslice_destroy(pinned);
            Ok(true)
        }
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        self.with_iter(|it| {
            let mut n = 0u64;
            // SAFETY: `it` is live for this closure; key and value slices are used before the
            // iterator moves.
            unsafe {
                if reverse {
                    rocksdb_iter_seek_to_last(it);
                } else {
                    rocksdb_iter_seek_to_first(it);
                }
                while n < limit && rocksdb_iter_valid(it) != 0 {
                    visit(iter_key(it), iter_value(it));
                    n += 1;
                    if reverse {
                        rocksdb_iter_prev(it);
                    } else {
                        rocksdb_iter_next(it);
                    }
                }
            }
            n
        })
    }

    fn seek_scan(
        &self,
        key: &[u8],
        nexts: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        self.with_iter(|it| {
            let mut n = 0u64;
            // SAFETY: `it` is live for this closure; key and value slices are used before the
            // iterator moves.
            unsafe {
                rocksdb_iter_seek(it, key.as_ptr().cast(), key.len());
                while rocksdb_iter_valid(it) != 0 {
                    visit(iter_key(it), iter_value(it));
                    n += 1;
                    if n > nexts {
                        break;
                    }
                    rocksdb_iter_next(it);
                }
            }
            n
        })
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        self.with_iter(|it| {
            // SAFETY: `it` is live for this closure; the key is copied before it moves.
            unsafe {
                rocksdb_iter_seek(it, key.as_ptr().cast(), key.len());
                if rocksdb_iter_valid(it) == 0 {
                    return false;
                }
                found.clear();
                found.extend_from_slice(iter_key(it));
                true
            }
        })
    }

    fn compact(&self) -> EngineResult<()> {
        // SAFETY: null bounds compact the whole key space (the memtable is flushed first).
        unsafe { rocksdb_compact_range(self.db, std::ptr::null(), 0, std::ptr::null(), 0) };
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        // SAFETY: the name is NUL-terminated; the result is malloc'ed, copied and freed.
        unsafe {
            let p = rocksdb_property_value(self.db, c"rocksdb.stats".as_ptr());
            if p.is_null() {
                return None;
            }
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            rocksdb_free(p.cast());
            Some(s)
        }
    }
}

/// A level-0 trigger as RocksDB's C API takes it (an `int`; larger counts are clamped).
fn trigger(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}
