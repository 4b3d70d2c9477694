// SPDX-License-Identifier: MIT OR Apache-2.0
//! LevelDB 1.23 (Debian's libleveldb) as a db_bench engine, through its C API.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::path::Path;

use super::{Engine, EngineConfig, EngineResult};

#[repr(C)]
struct RawDb([u8; 0]);
#[repr(C)]
struct RawOptions([u8; 0]);
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

#[link(name = "leveldb")]
extern "C" {
    fn leveldb_options_create() -> *mut RawOptions;
    fn leveldb_options_destroy(o: *mut RawOptions);
    fn leveldb_options_set_create_if_missing(o: *mut RawOptions, v: c_uchar);
    fn leveldb_options_set_cache(o: *mut RawOptions, c: *mut RawCache);
    fn leveldb_options_set_write_buffer_size(o: *mut RawOptions, v: usize);
    fn leveldb_options_set_compression(o: *mut RawOptions, v: c_int);
    fn leveldb_options_set_filter_policy(o: *mut RawOptions, p: *mut RawPolicy);
    fn leveldb_cache_create_lru(capacity: usize) -> *mut RawCache;
    fn leveldb_cache_destroy(c: *mut RawCache);
    fn leveldb_filterpolicy_create_bloom(bits: c_int) -> *mut RawPolicy;
    fn leveldb_filterpolicy_destroy(p: *mut RawPolicy);
    fn leveldb_open(o: *const RawOptions, name: *const c_char, err: *mut *mut c_char)
        -> *mut RawDb;
    fn leveldb_close(db: *mut RawDb);
    fn leveldb_readoptions_create() -> *mut RawReadOptions;
    fn leveldb_readoptions_destroy(o: *mut RawReadOptions);
    fn leveldb_readoptions_set_verify_checksums(o: *mut RawReadOptions, v: c_uchar);
    fn leveldb_writeoptions_create() -> *mut RawWriteOptions;
    fn leveldb_writeoptions_destroy(o: *mut RawWriteOptions);
    fn leveldb_writeoptions_set_sync(o: *mut RawWriteOptions, v: c_uchar);
    fn leveldb_writebatch_create() -> *mut RawBatch;
    fn leveldb_writebatch_destroy(b: *mut RawBatch);
    fn leveldb_writebatch_delete(b: *mut RawBatch, k: *const c_char, kl: usize);
    fn leveldb_iter_seek(it: *mut RawIter, k: *const c_char, kl: usize);
    fn leveldb_property_value(db: *mut RawDb, name: *const c_char) -> *mut c_char;
    fn leveldb_writebatch_put(
        b: *mut RawBatch,
        k: *const c_char,
        kl: usize,
        v: *const c_char,
        vl: usize,
    );
    fn leveldb_write(
        db: *mut RawDb,
        o: *const RawWriteOptions,
        b: *mut RawBatch,
        err: *mut *mut c_char,
    );
    fn leveldb_get(
        db: *mut RawDb,
        o: *const RawReadOptions,
        k: *const c_char,
        kl: usize,
        vl: *mut usize,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    fn leveldb_free(p: *mut c_void);
    fn leveldb_create_iterator(db: *mut RawDb, o: *const RawReadOptions) -> *mut RawIter;
    fn leveldb_iter_destroy(it: *mut RawIter);
    fn leveldb_iter_valid(it: *const RawIter) -> c_uchar;
    fn leveldb_iter_seek_to_first(it: *mut RawIter);
    fn leveldb_iter_seek_to_last(it: *mut RawIter);
    fn leveldb_iter_next(it: *mut RawIter);
    fn leveldb_iter_prev(it: *mut RawIter);
    fn leveldb_iter_key(it: *const RawIter, l: *mut usize) -> *const c_char;
    fn leveldb_iter_value(it: *const RawIter, l: *mut usize) -> *const c_char;
    fn leveldb_iter_get_error(it: *const RawIter, err: *mut *mut c_char);
    fn leveldb_compact_range(
        db: *mut RawDb,
        s: *const c_char,
        sl: usize,
        l: *const c_char,
        ll: usize,
    );
}

fn check(err: *mut c_char) -> EngineResult<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB reports errors as malloc'ed NUL-terminated strings, freed once here.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above.
    unsafe { leveldb_free(err.cast()) };
    Err(msg)
}

/// An open LevelDB. Every raw pointer is created in `open` and destroyed once in `Drop`.
pub struct LevelDbEngine {
    db: *mut RawDb,
    options: *mut RawOptions,
    cache: *mut RawCache,
    policy: *mut RawPolicy,
    read: *mut RawReadOptions,
    write_plain: *mut RawWriteOptions,
    write_sync: *mut RawWriteOptions,
}

impl LevelDbEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let name = CString::new(dir.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: plain C API calls on objects created here and owned by the returned value.
        unsafe {
            let options = leveldb_options_create();
            leveldb_options_set_create_if_missing(options, 1);
            let cache = leveldb_cache_create_lru(config.cache_size);
            leveldb_options_set_cache(options, cache);
            leveldb_options_set_write_buffer_size(options, config.write_buffer_size);
            leveldb_options_set_compression(options, c_int::from(config.compression));
            let policy = match config.bloom_bits {
                Some(bits) => {
                    let p = leveldb_filterpolicy_create_bloom(bits as c_int);
                    leveldb_options_set_filter_policy(options, p);
                    p
                }
                None => std::ptr::null_mut(),
            };
            let read = leveldb_readoptions_create();
            leveldb_readoptions_set_verify_checksums(read, u8::from(config.verify_checksums));
            let write_plain = leveldb_writeoptions_create();
            let write_sync = leveldb_writeoptions_create();
            leveldb_writeoptions_set_sync(write_sync, 1);
            let mut err = std::ptr::null_mut();
            let db = leveldb_open(options, name.as_ptr(), &mut err);
            let engine = LevelDbEngine {
                db,
                options,
                cache,
                policy,
                read,
                write_plain,
                write_sync,
            };
            check(err)?;
            Ok(engine)
        }
    }
}

impl Drop for LevelDbEngine {
    fn drop(&mut self) {
        // SAFETY: each object is destroyed once, the database before what it uses.
        unsafe {
            if !self.db.is_null() {
                leveldb_close(self.db);
            }
            leveldb_readoptions_destroy(self.read);
            leveldb_writeoptions_destroy(self.write_plain);
            leveldb_writeoptions_destroy(self.write_sync);
            leveldb_options_destroy(self.options);
            leveldb_cache_destroy(self.cache);
            if !self.policy.is_null() {
                leveldb_filterpolicy_destroy(self.policy);
            }
        }
    }
}

// SAFETY: LevelDB's `DB` is safe for concurrent use by many threads (its documentation's
// "Concurrency" section); the options objects are only read after `open`.
unsafe impl Send for LevelDbEngine {}
// SAFETY: as above.
unsafe impl Sync for LevelDbEngine {}

impl LevelDbEngine {
    fn write_batch(&self, sync: bool, fill: impl Fn(*mut RawBatch)) -> EngineResult<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the batch lives only in this call; keys and values outlive it.
        unsafe {
            let batch = leveldb_writebatch_create();
            fill(batch);
            let options = if sync {
                self.write_sync
            } else {
                self.write_plain
            };
            leveldb_write(self.db, options, batch, &mut err);
            leveldb_writebatch_destroy(batch);
        }
        check(err)
    }

    /// Runs `body` on a new iterator, then checks the iterator's status and destroys it.
    fn with_iter<T>(&self, body: impl FnOnce(*mut RawIter) -> T) -> EngineResult<T> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the iterator is created, used while the database is open, and destroyed here.
        let out = unsafe {
            let it = leveldb_create_iterator(self.db, self.read);
            let out = body(it);
            leveldb_iter_get_error(it, &mut err);
            leveldb_iter_destroy(it);
            out
        };
        check(err)?;
        Ok(out)
    }
}

/// The current key of a valid iterator.
///
/// # Safety
/// `it` is a valid LevelDB iterator positioned on an entry; the slice lives until it moves.
unsafe fn iter_key<'a>(it: *mut RawIter) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: per the function's contract.
    unsafe {
        let p = leveldb_iter_key(it, &mut len);
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

impl Engine for LevelDbEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        self.write_batch(sync, |batch| {
            for (k, v) in entries {
                // SAFETY: `batch` is live; LevelDB copies the bytes.
                unsafe {
                    leveldb_writebatch_put(
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
                // SAFETY: `batch` is live; LevelDB copies the bytes.
                unsafe { leveldb_writebatch_delete(batch, k.as_ptr().cast(), k.len()) };
            }
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        let mut err = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: the database is open; the returned buffer is copied and freed.
        unsafe {
            let p = leveldb_get(
                self.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            );
            check(err)?;
            if p.is_null() {
                return Ok(false);
            }
            value.clear();
            value.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
            leveldb_free(p.cast());
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
                    leveldb_iter_seek_to_last(it);
                } else {
                    leveldb_iter_seek_to_first(it);
                }
                while leveldb_iter_valid(it) != 0 && n < limit {
                    let mut vl = 0usize;
                    let v = leveldb_iter_value(it, &mut vl);
                    visit(iter_key(it), std::slice::from_raw_parts(v.cast::<u8>(), vl));
                    n += 1;
                    if reverse {
                        leveldb_iter_prev(it);
                    } else {
                        leveldb_iter_next(it);
                    }
                }
            }
            n
        })
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        self.with_iter(|it| {
            // SAFETY: `it` is live for this closure; the key is copied before it moves.
            unsafe {
                leveldb_iter_seek(it, key.as_ptr().cast(), key.len());
                if leveldb_iter_valid(it) == 0 {
                    return false;
                }
                found.clear();
                found.extend_from_slice(iter_key(it));
                true
            }
        })
    }

    fn compact(&self) -> EngineResult<()> {
        // SAFETY: null bounds compact the whole key space.
        unsafe { leveldb_compact_range(self.db, std::ptr::null(), 0, std::ptr::null(), 0) };
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        // SAFETY: the name is NUL-terminated; the result is malloc'ed, copied and freed.
        unsafe {
            let p = leveldb_property_value(self.db, c"leveldb.stats".as_ptr());
            if p.is_null() {
                return None;
            }
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            leveldb_free(p.cast());
            Some(s)
        }
    }
}
