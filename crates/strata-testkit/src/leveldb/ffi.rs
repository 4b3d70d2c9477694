// SPDX-License-Identifier: MIT OR Apache-2.0
//! The part of LevelDB 1.23's C API (`leveldb/c.h`, Debian's libleveldb-dev) that strata's
//! LevelDB tests and db_bench's LevelDB engine use. Declarations only: [`super`] wraps them in
//! safe types.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uchar, c_void};

#[repr(C)]
pub struct Db {
    _private: [u8; 0],
}
#[repr(C)]
pub struct Options {
    _private: [u8; 0],
}
#[repr(C)]
pub struct ReadOptions {
    _private: [u8; 0],
}
#[repr(C)]
pub struct WriteOptions {
    _private: [u8; 0],
}
#[repr(C)]
pub struct Iter {
    _private: [u8; 0],
}
#[repr(C)]
pub struct FilterPolicy {
    _private: [u8; 0],
}
#[repr(C)]
pub struct Snapshot {
    _private: [u8; 0],
}
#[repr(C)]
pub struct WriteBatch {
    _private: [u8; 0],
}
#[repr(C)]
pub struct Cache {
    _private: [u8; 0],
}

#[link(name = "leveldb")]
extern "C" {
    // Options.
    pub fn leveldb_options_create() -> *mut Options;
    pub fn leveldb_options_destroy(o: *mut Options);
    pub fn leveldb_options_set_create_if_missing(o: *mut Options, v: c_uchar);
    pub fn leveldb_options_set_paranoid_checks(o: *mut Options, v: c_uchar);
    pub fn leveldb_options_set_filter_policy(o: *mut Options, p: *mut FilterPolicy);
    pub fn leveldb_options_set_write_buffer_size(o: *mut Options, v: usize);
    pub fn leveldb_options_set_max_file_size(o: *mut Options, v: usize);
    pub fn leveldb_options_set_block_size(o: *mut Options, v: usize);
    pub fn leveldb_options_set_compression(o: *mut Options, v: c_int);
    pub fn leveldb_options_set_cache(o: *mut Options, c: *mut Cache);
    pub fn leveldb_cache_create_lru(capacity: usize) -> *mut Cache;
    pub fn leveldb_cache_destroy(c: *mut Cache);
    pub fn leveldb_filterpolicy_create_bloom(bits_per_key: c_int) -> *mut FilterPolicy;
    pub fn leveldb_filterpolicy_destroy(p: *mut FilterPolicy);

    pub fn leveldb_readoptions_create() -> *mut ReadOptions;
    pub fn leveldb_readoptions_destroy(o: *mut ReadOptions);
    pub fn leveldb_readoptions_set_verify_checksums(o: *mut ReadOptions, v: c_uchar);
    pub fn leveldb_readoptions_set_snapshot(o: *mut ReadOptions, s: *const Snapshot);

    pub fn leveldb_writeoptions_create() -> *mut WriteOptions;
    pub fn leveldb_writeoptions_destroy(o: *mut WriteOptions);
    pub fn leveldb_writeoptions_set_sync(o: *mut WriteOptions, v: c_uchar);

    // The database.
    pub fn leveldb_open(o: *const Options, name: *const c_char, err: *mut *mut c_char) -> *mut Db;
    pub fn leveldb_close(db: *mut Db);
    pub fn leveldb_get(
        db: *mut Db,
        o: *const ReadOptions,
        key: *const c_char,
        keylen: usize,
        vallen: *mut usize,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    pub fn leveldb_put(
        db: *mut Db,
        o: *const WriteOptions,
        key: *const c_char,
        keylen: usize,
        val: *const c_char,
        vallen: usize,
        err: *mut *mut c_char,
    );
    pub fn leveldb_delete(
        db: *mut Db,
        o: *const WriteOptions,
        key: *const c_char,
        keylen: usize,
        err: *mut *mut c_char,
    );
    pub fn leveldb_write(
        db: *mut Db,
        o: *const WriteOptions,
        batch: *mut WriteBatch,
        err: *mut *mut c_char,
    );
    pub fn leveldb_compact_range(
        db: *mut Db,
        start: *const c_char,
        start_len: usize,
        limit: *const c_char,
        limit_len: usize,
    );
    pub fn leveldb_create_snapshot(db: *mut Db) -> *const Snapshot;
    pub fn leveldb_release_snapshot(db: *mut Db, s: *const Snapshot);
    pub fn leveldb_property_value(db: *mut Db, name: *const c_char) -> *mut c_char;
    pub fn leveldb_free(ptr: *mut c_void);

    // Write batches.
    pub fn leveldb_writebatch_create() -> *mut WriteBatch;
    pub fn leveldb_writebatch_destroy(b: *mut WriteBatch);
    pub fn leveldb_writebatch_put(
        b: *mut WriteBatch,
        key: *const c_char,
        keylen: usize,
        val: *const c_char,
        vallen: usize,
    );
    pub fn leveldb_writebatch_delete(b: *mut WriteBatch, key: *const c_char, keylen: usize);

    // Iterators.
    pub fn leveldb_create_iterator(db: *mut Db, o: *const ReadOptions) -> *mut Iter;
    pub fn leveldb_iter_destroy(it: *mut Iter);
    pub fn leveldb_iter_valid(it: *const Iter) -> c_uchar;
    pub fn leveldb_iter_seek_to_first(it: *mut Iter);
    pub fn leveldb_iter_seek_to_last(it: *mut Iter);
    pub fn leveldb_iter_seek(it: *mut Iter, key: *const c_char, keylen: usize);
    pub fn leveldb_iter_next(it: *mut Iter);
    pub fn leveldb_iter_prev(it: *mut Iter);
    pub fn leveldb_iter_key(it: *const Iter, len: *mut usize) -> *const c_char;
    pub fn leveldb_iter_value(it: *const Iter, len: *mut usize) -> *const c_char;
    pub fn leveldb_iter_get_error(it: *const Iter, err: *mut *mut c_char);
}
