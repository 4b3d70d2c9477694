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

impl Engine for LevelDbEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the batch lives only in this call; keys and values outlive it.
        unsafe {
            let batch = leveldb_writebatch_create();
            for (k, v) in entries {
                leveldb_writebatch_put(
                    batch,
                    k.as_ptr().cast(),
                    k.len(),
                    v.as_ptr().cast(),
                    v.len(),
                );
            }
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

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
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
                return Ok(None);
            }
            let v = std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec();
            leveldb_free(p.cast());
            Ok(Some(v))
        }
    }

    fn scan(&self, reverse: bool, limit: u64) -> EngineResult<(u64, u64)> {
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut err = std::ptr::null_mut();
        // SAFETY: the iterator is created, used while the database is open, and destroyed here.
        unsafe {
            let it = leveldb_create_iterator(self.db, self.read);
            if reverse {
                leveldb_iter_seek_to_last(it);
            } else {
                leveldb_iter_seek_to_first(it);
            }
            while leveldb_iter_valid(it) != 0 && n < limit {
                let (mut kl, mut vl) = (0usize, 0usize);
                leveldb_iter_key(it, &mut kl);
                leveldb_iter_value(it, &mut vl);
                bytes += (kl + vl) as u64;
                n += 1;
                if reverse {
                    leveldb_iter_prev(it);
                } else {
                    leveldb_iter_next(it);
                }
            }
            leveldb_iter_get_error(it, &mut err);
            leveldb_iter_destroy(it);
        }
        check(err)?;
        Ok((n, bytes))
    }

    fn compact(&self) -> EngineResult<()> {
        // SAFETY: null bounds compact the whole key space.
        unsafe { leveldb_compact_range(self.db, std::ptr::null(), 0, std::ptr::null(), 0) };
        Ok(())
    }
}
