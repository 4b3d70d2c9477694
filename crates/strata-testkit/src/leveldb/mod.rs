// SPDX-License-Identifier: MIT OR Apache-2.0
//! LevelDB 1.23 itself (Debian's libleveldb), through its C API ([`ffi`]), in small safe types:
//! a database ([`LevelDb`]), its snapshots ([`Snapshot`]), iterators ([`Iter`]) and write
//! batches ([`WriteBatch`]). Errors are LevelDB's messages.
//!
//! Used by strata's LevelDB tests (interop and differential) and by db_bench's LevelDB engine.

#![allow(unsafe_code)]

pub mod ffi;

use std::ffi::{c_char, CStr, CString};
use std::path::Path;
use std::sync::Arc;

/// How to open a LevelDB database; `None` leaves LevelDB's default.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub create_if_missing: bool,
    pub paranoid_checks: bool,
    /// A bloom filter of this many bits per key.
    pub bloom_bits: Option<i32>,
    pub write_buffer_size: Option<usize>,
    pub max_file_size: Option<usize>,
    pub block_size: Option<usize>,
    /// LevelDB's `CompressionType`: 0 none, 1 snappy.
    pub compression: Option<i32>,
    /// A block cache of this many bytes (LevelDB's own 8 MiB one otherwise).
    pub cache_size: Option<usize>,
    /// Whether reads verify block checksums.
    pub verify_checksums: bool,
}

/// Moves an error LevelDB reported into a `Result`, freeing its message.
fn take_error(err: *mut c_char) -> Result<(), String> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB sets `err` to a NUL-terminated string it allocated with malloc.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `err` came from LevelDB's allocator and is freed once.
    unsafe { ffi::leveldb_free(err.cast()) };
    Err(msg)
}

/// The open database and the objects it uses; closed when the last `Arc` to it goes (the
/// database's own handle, its snapshots' and its iterators').
struct Handle {
    db: *mut ffi::Db,
    options: *mut ffi::Options,
    policy: *mut ffi::FilterPolicy,
    cache: *mut ffi::Cache,
    /// Read options without a snapshot.
    read: *mut ffi::ReadOptions,
    verify_checksums: bool,
    write: *mut ffi::WriteOptions,
    write_sync: *mut ffi::WriteOptions,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: each object was created by `LevelDb::open` and is destroyed exactly once,
        // the database first (no snapshot or iterator of it is left: they hold this handle)
        // and then the options, the filter policy and the cache it used.
        unsafe {
            if !self.db.is_null() {
                ffi::leveldb_close(self.db);
            }
            ffi::leveldb_readoptions_destroy(self.read);
            ffi::leveldb_writeoptions_destroy(self.write);
            ffi::leveldb_writeoptions_destroy(self.write_sync);
            ffi::leveldb_options_destroy(self.options);
            if !self.policy.is_null() {
                ffi::leveldb_filterpolicy_destroy(self.policy);
            }
            if !self.cache.is_null() {
                ffi::leveldb_cache_destroy(self.cache);
            }
        }
    }
}

// SAFETY: LevelDB's `DB` is safe for concurrent use by many threads (its documentation's
// "Concurrency" section); the options objects are only read after `open`.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// A LevelDB database. Its snapshots and iterators keep it open until they are dropped.
pub struct LevelDb {
    h: Arc<Handle>,
}

/// A LevelDB snapshot, released on drop.
pub struct Snapshot {
    snap: *const ffi::Snapshot,
    h: Arc<Handle>,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: the snapshot was created from `h.db`, which is still open (this holds `h`),
        // and is released once.
        unsafe { ffi::leveldb_release_snapshot(self.h.db, self.snap) };
    }
}

/// A LevelDB iterator, destroyed on drop.
pub struct Iter {
    it: *mut ffi::Iter,
    _h: Arc<Handle>,
}

/// Read options for one call through a snapshot, destroyed on drop.
struct SnapshotReadOptions(*mut ffi::ReadOptions);

impl SnapshotReadOptions {
    fn new(h: &Arc<Handle>, snapshot: &Snapshot) -> Self {
        assert!(
            Arc::ptr_eq(&snapshot.h, h),
            "a snapshot of another database"
        );
        // SAFETY: creates and sets a read options object owned by the result; the snapshot
        // belongs to this database (checked) and outlives the call using the options.
        unsafe {
            let o = ffi::leveldb_readoptions_create();
            ffi::leveldb_readoptions_set_verify_checksums(o, u8::from(h.verify_checksums));
            ffi::leveldb_readoptions_set_snapshot(o, snapshot.snap);
            SnapshotReadOptions(o)
        }
    }
}

impl Drop for SnapshotReadOptions {
    fn drop(&mut self) {
        // SAFETY: created by `new`, destroyed once.
        unsafe { ffi::leveldb_readoptions_destroy(self.0) };
    }
}

/// Converts an optional key to the pointer and length LevelDB's C API takes: null for none
/// (an open end); a slice's pointer is never null, even for the empty key.
fn key_ptr(key: Option<&[u8]>) -> (*const c_char, usize) {
    match key {
        Some(k) => (k.as_ptr().cast(), k.len()),
        None => (std::ptr::null(), 0),
    }
}

impl LevelDb {
    pub fn open(dir: &Path, o: &Options) -> Result<LevelDb, String> {
        let name =
            CString::new(dir.to_str().ok_or("a non-UTF-8 path")?).map_err(|e| e.to_string())?;
        // SAFETY: plain C API calls on objects this function creates; they are owned by the
        // handle, which destroys them after closing the database.
        unsafe {
            let options = ffi::leveldb_options_create();
            ffi::leveldb_options_set_create_if_missing(options, u8::from(o.create_if_missing));
            ffi::leveldb_options_set_paranoid_checks(options, u8::from(o.paranoid_checks));
            if let Some(size) = o.write_buffer_size {
                ffi::leveldb_options_set_write_buffer_size(options, size);
            }
            if let Some(size) = o.max_file_size {
                ffi::leveldb_options_set_max_file_size(options, size);
            }
            if let Some(size) = o.block_size {
                ffi::leveldb_options_set_block_size(options, size);
            }
            if let Some(c) = o.compression {
                ffi::leveldb_options_set_compression(options, c);
            }
            let cache = match o.cache_size {
                Some(capacity) => {
                    let c = ffi::leveldb_cache_create_lru(capacity);
                    ffi::leveldb_options_set_cache(options, c);
                    c
                }
                None => std::ptr::null_mut(),
            };
            let policy = match o.bloom_bits {
                Some(bits) => {
                    let p = ffi::leveldb_filterpolicy_create_bloom(bits);
                    ffi::leveldb_options_set_filter_policy(options, p);
                    p
                }
                None => std::ptr::null_mut(),
            };
            let read = ffi::leveldb_readoptions_create();
            ffi::leveldb_readoptions_set_verify_checksums(read, u8::from(o.verify_checksums));
            let write_sync = ffi::leveldb_writeoptions_create();
            ffi::leveldb_writeoptions_set_sync(write_sync, 1);
            let mut err = std::ptr::null_mut();
            let db = ffi::leveldb_open(options, name.as_ptr(), &mut err);
            let h = Arc::new(Handle {
                db,
                options,
                policy,
                cache,
                read,
                verify_checksums: o.verify_checksums,
                write: ffi::leveldb_writeoptions_create(),
                write_sync,
            });
            take_error(err)?;
            assert!(!db.is_null());
            Ok(LevelDb { h })
        }
    }

    /// How many handles keep the database open: 1 (this one) once every snapshot and iterator
    /// of it is dropped.
    pub fn handles(&self) -> usize {
        Arc::strong_count(&self.h)
    }

    fn write_options(&self, sync: bool) -> *const ffi::WriteOptions {
        if sync {
            self.h.write_sync
        } else {
            self.h.write
        }
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the database is open; key and value are valid for their lengths during the
        // call.
        unsafe {
            ffi::leveldb_put(
                self.h.db,
                self.h.write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        take_error(err)
    }

    pub fn delete(&self, key: &[u8]) -> Result<(), String> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the database is open; the key is valid for its length during the call.
        unsafe {
            ffi::leveldb_delete(
                self.h.db,
                self.h.write,
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            );
        }
        take_error(err)
    }

    /// Applies `batch` atomically, synced to disk first if `sync`.
    pub fn write(&self, batch: &WriteBatch, sync: bool) -> Result<(), String> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the database is open and the batch is live; LevelDB only reads the batch.
        unsafe { ffi::leveldb_write(self.h.db, self.write_options(sync), batch.0, &mut err) };
        take_error(err)
    }

    /// The value of `key` (through `snapshot`, if any).
    pub fn get(&self, key: &[u8], snapshot: Option<&Snapshot>) -> Result<Option<Vec<u8>>, String> {
        let mut value = Vec::new();
        Ok(self.get_into(key, snapshot, &mut value)?.then_some(value))
    }

    /// Like [`LevelDb::get`], into `value` (replacing what it held): whether `key` was found.
    pub fn get_into(
        &self,
        key: &[u8],
        snapshot: Option<&Snapshot>,
        value: &mut Vec<u8>,
    ) -> Result<bool, String> {
        let read = snapshot.map(|s| SnapshotReadOptions::new(&self.h, s));
        let read_options = read.as_ref().map_or(self.h.read, |r| r.0);
        let mut len = 0usize;
        let mut err = std::ptr::null_mut();
        // SAFETY: the database is open; the key is valid for its length during the call.
        let ptr = unsafe {
            ffi::leveldb_get(
                self.h.db,
                read_options,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            )
        };
        take_error(err)?;
        // Not found is a null result; an empty value is a malloc(0) buffer, which glibc
        // returns as a unique non-null pointer.
        if ptr.is_null() {
            return Ok(false);
        }
        value.clear();
        // SAFETY: LevelDB returned a malloc'ed buffer of `len` bytes, freed right after copying.
        value.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) });
        // SAFETY: freed once, with LevelDB's allocator.
        unsafe { ffi::leveldb_free(ptr.cast()) };
        Ok(true)
    }

    pub fn snapshot(&self) -> Snapshot {
        // SAFETY: the database is open; the snapshot keeps it open until released.
        let snap = unsafe { ffi::leveldb_create_snapshot(self.h.db) };
        Snapshot {
            snap,
            h: Arc::clone(&self.h),
        }
    }

    /// A new iterator (through `snapshot`, if any), not yet positioned.
    pub fn iter(&self, snapshot: Option<&Snapshot>) -> Iter {
        let read = snapshot.map(|s| SnapshotReadOptions::new(&self.h, s));
        let read_options = read.as_ref().map_or(self.h.read, |r| r.0);
        // SAFETY: the database is open, and the iterator keeps it open until destroyed; the
        // iterator copies what it needs from the read options.
        let it = unsafe { ffi::leveldb_create_iterator(self.h.db, read_options) };
        Iter {
            it,
            _h: Arc::clone(&self.h),
        }
    }

    /// The value of a property, if LevelDB knows it.
    pub fn property(&self, name: &str) -> Option<String> {
        let name = CString::new(name).ok()?;
        // SAFETY: the database is open; the name is NUL-terminated.
        let ptr = unsafe { ffi::leveldb_property_value(self.h.db, name.as_ptr()) };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: LevelDB returned a malloc'ed NUL-terminated string, freed after copying.
        let value = unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: freed once, with LevelDB's allocator.
        unsafe { ffi::leveldb_free(ptr.cast()) };
        Some(value)
    }

    /// Compacts `[begin, end]`; `None` is an open end.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) {
        let (b, bl) = key_ptr(begin);
        let (e, el) = key_ptr(end);
        // SAFETY: the database is open; each bound is null or valid for its length.
        unsafe { ffi::leveldb_compact_range(self.h.db, b, bl, e, el) };
    }
}

/// A LevelDB write batch, destroyed on drop.
pub struct WriteBatch(*mut ffi::WriteBatch);

impl WriteBatch {
    pub fn new() -> Self {
        // SAFETY: creates a batch owned by the result.
        WriteBatch(unsafe { ffi::leveldb_writebatch_create() })
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        // SAFETY: the batch is live; LevelDB copies the bytes.
        unsafe {
            ffi::leveldb_writebatch_put(
                self.0,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        };
    }

    pub fn delete(&mut self, key: &[u8]) {
        // SAFETY: the batch is live; LevelDB copies the bytes.
        unsafe { ffi::leveldb_writebatch_delete(self.0, key.as_ptr().cast(), key.len()) };
    }
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for WriteBatch {
    fn drop(&mut self) {
        // SAFETY: created by `new`, destroyed once.
        unsafe { ffi::leveldb_writebatch_destroy(self.0) };
    }
}

impl Iter {
    pub fn valid(&self) -> bool {
        // SAFETY: `it` is a live iterator.
        unsafe { ffi::leveldb_iter_valid(self.it) != 0 }
    }

    pub fn seek_to_first(&mut self) {
        // SAFETY: `it` is a live iterator.
        unsafe { ffi::leveldb_iter_seek_to_first(self.it) }
    }

    pub fn seek_to_last(&mut self) {
        // SAFETY: `it` is a live iterator.
        unsafe { ffi::leveldb_iter_seek_to_last(self.it) }
    }

    pub fn seek(&mut self, key: &[u8]) {
        // SAFETY: `it` is a live iterator; the key is valid for its length during the call.
        unsafe { ffi::leveldb_iter_seek(self.it, key.as_ptr().cast(), key.len()) }
    }

    pub fn next(&mut self) {
        assert!(self.valid(), "next on an invalid LevelDB iterator");
        // SAFETY: `it` is a live iterator on an entry.
        unsafe { ffi::leveldb_iter_next(self.it) }
    }

    pub fn prev(&mut self) {
        assert!(self.valid(), "prev on an invalid LevelDB iterator");
        // SAFETY: `it` is a live iterator on an entry.
        unsafe { ffi::leveldb_iter_prev(self.it) }
    }

    pub fn key(&self) -> &[u8] {
        assert!(self.valid(), "key of an invalid LevelDB iterator");
        let mut len = 0usize;
        // SAFETY: the iterator is on an entry; the key stays valid until the iterator moves
        // or is destroyed, which needs `&mut self`, so not while the slice is borrowed.
        unsafe {
            let k = ffi::leveldb_iter_key(self.it, &mut len);
            if len == 0 {
                return &[];
            }
            std::slice::from_raw_parts(k.cast::<u8>(), len)
        }
    }

    pub fn value(&self) -> &[u8] {
        assert!(self.valid(), "value of an invalid LevelDB iterator");
        let mut len = 0usize;
        // SAFETY: as for `key`.
        unsafe {
            let v = ffi::leveldb_iter_value(self.it, &mut len);
            if len == 0 {
                return &[];
            }
            std::slice::from_raw_parts(v.cast::<u8>(), len)
        }
    }

    /// The error the iterator met, if any.
    pub fn status(&self) -> Result<(), String> {
        let mut err = std::ptr::null_mut();
        // SAFETY: `it` is a live iterator.
        unsafe { ffi::leveldb_iter_get_error(self.it, &mut err) };
        take_error(err)
    }
}

impl Drop for Iter {
    fn drop(&mut self) {
        // SAFETY: created by `LevelDb::iter` and destroyed once, while the database is still
        // open (`_h` is dropped after this).
        unsafe { ffi::leveldb_iter_destroy(self.it) };
    }
}
