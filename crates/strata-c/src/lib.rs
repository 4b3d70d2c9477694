// SPDX-License-Identifier: MIT OR Apache-2.0
//! LevelDB 1.23's C API over strata: `libstrata_c.so` and `libstrata_c.a` export every function
//! LevelDB's `leveldb/c.h` declares, under the same names and signatures, so that a C program
//! written for LevelDB links with `-lstrata_c` instead of `-lleveldb` unchanged. The header of
//! this crate, `include/strata/c.h`, declares the same functions and documents where strata
//! differs (what a NULL argument does, which options have no effect).
//!
//! # Conventions of the C side
//!
//! - Every object (`leveldb_t`, options, batches, iterators, snapshots, comparators, filter
//!   policies, caches, envs) is a `Box` handed to C as an opaque pointer and taken back by its
//!   `*_destroy` (or `leveldb_close`, `leveldb_release_snapshot`) function, once.
//! - Memory given to C (values, property values, error strings, the test directory) comes from
//!   libc's `malloc`, so C may release it with `free` or `leveldb_free`.
//! - Errors: a function with `char** errptr` leaves `*errptr` untouched on success; on failure
//!   it frees the string `*errptr` held (if any) and stores a new `malloc`ed one, shaped as
//!   LevelDB shapes its `Status` strings (`"IO error: ..."`, `"Corruption: ..."`,
//!   `"Invalid argument: ..."`, `"Not implemented: ..."`). A NULL `errptr` drops the error.
//! - No panic crosses into C: every function body runs under `catch_unwind`. A panic becomes an
//!   error string where the function has `errptr`, and otherwise the fallback its rustdoc
//!   names (NULL, 0, or nothing done).
//! - Options keep what they are given by reference, as LevelDB's do: setting a comparator,
//!   filter policy, cache or env on options shares it (an `Arc`), so a database opened with
//!   them keeps the object's memory alive; the C state a comparator or filter policy carries
//!   is the caller's, and its destructor runs when the caller destroys the object.

#![allow(unsafe_code)]
// The C API's type names are LevelDB's (`leveldb_t`, ...), which C programs use.
#![allow(non_camel_case_types)]

use std::cmp::Ordering;
use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use libc::size_t;
use strata::filter::{BloomFilterPolicy, FilterPolicy};
use strata::{
    BlockCache, Comparator, Compression, Db, DbIterator, Env, Error, Options, PosixEnv,
    ReadOptions, Snapshot, ValueKind, WriteBatch, WriteOptions,
};

/// The major version of the API implemented: LevelDB 1.23's C API (not strata's version).
pub const API_MAJOR_VERSION: c_int = 1;
/// The minor version of the API implemented: LevelDB 1.23's C API (not strata's version).
pub const API_MINOR_VERSION: c_int = 23;

// ---------------------------------------------------------------------------------------------
// The opaque types.

/// An open database (`leveldb_open`), closed and freed by `leveldb_close`.
pub struct leveldb_t {
    db: Db,
}

/// Options for opening, repairing and destroying a database: strata's [`Options`], whose
/// comparator, filter policy, cache and env are shared (`Arc`) with the objects set on them.
pub struct leveldb_options_t {
    options: Options,
}

/// Options for reads. The snapshot is borrowed: the caller keeps it alive (not released)
/// while these options are used, as LevelDB requires.
pub struct leveldb_readoptions_t {
    verify_checksums: bool,
    fill_cache: bool,
    snapshot: *const leveldb_snapshot_t,
}

/// Options for writes.
pub struct leveldb_writeoptions_t {
    sync: bool,
}

/// A snapshot of a database (`leveldb_create_snapshot`), freed by `leveldb_release_snapshot`.
pub struct leveldb_snapshot_t {
    snapshot: Snapshot,
}

/// A cursor (`leveldb_create_iterator`), freed by `leveldb_iter_destroy`. LevelDB's
/// `NewIterator` cannot fail, strata's can (a table that cannot be opened): such a cursor is
/// never valid and `leveldb_iter_get_error` returns the error.
pub struct leveldb_iterator_t {
    iter: Result<DbIterator, Error>,
}

/// A write batch (`leveldb_writebatch_create`), freed by `leveldb_writebatch_destroy`.
pub struct leveldb_writebatch_t {
    batch: WriteBatch,
}

/// A comparator made of C callbacks (`leveldb_comparator_create`). The `Arc` is shared with
/// every options object it is set on, and so with the databases opened with them.
pub struct leveldb_comparator_t {
    inner: Arc<CComparator>,
}

/// A filter policy: LevelDB's bloom filter, or one made of C callbacks.
pub struct leveldb_filterpolicy_t {
    policy: Arc<dyn FilterPolicy>,
    /// The C policy behind `policy`, whose destructor `leveldb_filterpolicy_destroy` runs;
    /// `None` for the bloom filter.
    c_policy: Option<Arc<CFilterPolicy>>,
}

/// A block cache bounded in bytes (`leveldb_cache_create_lru`): strata's [`BlockCache`].
pub struct leveldb_cache_t {
    cache: Arc<BlockCache>,
}

/// An environment (`leveldb_create_default_env`): strata's [`PosixEnv`].
pub struct leveldb_env_t {
    env: Arc<dyn Env>,
}

/// LevelDB's info logger. The C API has no function that makes one, so no value of this type
/// is ever constructed here; `leveldb_options_set_info_log` accepts any pointer and ignores it.
pub enum leveldb_logger_t {}

// ---------------------------------------------------------------------------------------------
// Comparators and filter policies made of C callbacks.

/// `compare(state, a, alen, b, blen)`: negative, zero or positive.
type CompareFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, size_t, *const c_char, size_t) -> c_int;
/// `name(state)`: a NUL-terminated name that lives as long as the state.
type NameFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
/// `destructor(state)`.
type DestructorFn = unsafe extern "C" fn(*mut c_void);
/// `create_filter(state, keys, key_lengths, num_keys, &filter_length)`: a malloc'd filter.
type CreateFilterFn = unsafe extern "C" fn(
    *mut c_void,
    *const *const c_char,
    *const size_t,
    c_int,
    *mut size_t,
) -> *mut c_char;
/// `key_may_match(state, key, length, filter, filter_length)`.
type KeyMayMatchFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, size_t, *const c_char, size_t) -> u8;

/// A comparator made of a C state and callbacks. The name is read once, when it is created
/// (strata's `Comparator::name` returns a borrowed `&str`); LevelDB asks for it as it needs
/// it, and a C comparator's name does not change.
pub struct CComparator {
    state: *mut c_void,
    destructor: Option<DestructorFn>,
    compare: CompareFn,
    name: String,
}

// SAFETY: the C state is only passed to the caller's callbacks. LevelDB's contract for a C
// comparator is that it is called from any thread, concurrently (reads, writes and background
// compactions all compare keys), so the caller's state and callbacks must already be safe to
// share and to use from other threads; nothing here reads or writes the state itself.
unsafe impl Send for CComparator {}
// SAFETY: as for `Send` above: the callbacks are required to be callable concurrently.
unsafe impl Sync for CComparator {}

impl Comparator for CComparator {
    fn name(&self) -> &str {
        &self.name
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        // SAFETY: `compare` is the caller's callback with its state, which the caller keeps
        // alive until `leveldb_comparator_destroy` (LevelDB's contract: not before every
        // database using it is closed); the pointers and lengths describe live slices.
        let r = unsafe {
            (self.compare)(
                self.state,
                a.as_ptr().cast(),
                a.len(),
                b.as_ptr().cast(),
                b.len(),
            )
        };
        r.cmp(&0)
    }

    // LevelDB's C comparators do not shorten keys either: leaving them unchanged is correct.
    fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}

    fn find_short_successor(&self, _key: &mut Vec<u8>) {}
}

/// A filter policy made of a C state and callbacks. The name is read once, at creation.
pub struct CFilterPolicy {
    state: *mut c_void,
    destructor: Option<DestructorFn>,
    create_filter: CreateFilterFn,
    key_may_match: KeyMayMatchFn,
    name: String,
}

// SAFETY: as for `CComparator`: LevelDB calls a filter policy's callbacks from any thread
// (flushes and compactions build filters in the background while reads probe them), so the
// caller's state and callbacks must be safe to use concurrently; nothing here touches the state.
unsafe impl Send for CFilterPolicy {}
// SAFETY: as for `Send` above.
unsafe impl Sync for CFilterPolicy {}

impl FilterPolicy for CFilterPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        let pointers: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr().cast()).collect();
        let lengths: Vec<size_t> = keys.iter().map(|k| k.len()).collect();
        let count = c_int::try_from(keys.len()).unwrap_or(c_int::MAX);
        let mut length: size_t = 0;
        // SAFETY: the callback and state are the caller's, alive until
        // `leveldb_filterpolicy_destroy`; the arrays hold `count` live pointers and lengths
        // (count is at most their length), and `length` is a valid place to store a size.
        let filter = unsafe {
            (self.create_filter)(
                self.state,
                pointers.as_ptr(),
                lengths.as_ptr(),
                count,
                &mut length,
            )
        };
        if filter.is_null() {
            return;
        }
        // SAFETY: the callback returns `length` bytes it allocated with malloc, which are ours
        // to read and then free (LevelDB's contract for `create_filter`).
        unsafe {
            dst.extend_from_slice(std::slice::from_raw_parts(filter.cast::<u8>(), length));
            libc::free(filter.cast());
        }
    }

    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
        // SAFETY: the caller's callback and state, alive until `leveldb_filterpolicy_destroy`;
        // both slices are live for the call.
        unsafe {
            (self.key_may_match)(
                self.state,
                key.as_ptr().cast(),
                key.len(),
                filter.as_ptr().cast(),
                filter.len(),
            ) != 0
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers: panics, errors, C memory, arguments.

/// Runs `f`, returning `fallback` if it panics: no unwinding into C. The payload is dropped
/// under `catch_unwind` too, as its `Drop` could panic.
fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            fallback
        }
    }
}

/// Runs `f`; its error, or a panic, is stored in `*errptr` and `fallback` returned.
///
/// # Safety
/// `errptr` is NULL, or points to a `char*` that is NULL or a string from `malloc`.
unsafe fn guard_err<R>(
    errptr: *mut *mut c_char,
    fallback: R,
    f: impl FnOnce() -> Result<R, String>,
) -> R {
    let message = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(r)) => return r,
        Ok(Err(message)) => message,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            format!("IO error: strata panicked: {what}")
        }
    };
    // SAFETY: the caller's promise about `errptr`, passed on.
    unsafe { store_error(errptr, &message) };
    fallback
}

/// Frees the string `*errptr` holds, if any, and stores a malloc'd copy of `message`.
///
/// # Safety
/// `errptr` is NULL, or points to a `char*` that is NULL or a string from `malloc`.
unsafe fn store_error(errptr: *mut *mut c_char, message: &str) {
    if errptr.is_null() {
        return;
    }
    // SAFETY: `errptr` is a valid `char**` whose string, if any, was malloc'd (the caller's
    // promise, LevelDB's convention), so it is ours to free before replacing it.
    unsafe {
        let old = *errptr;
        if !old.is_null() {
            libc::free(old.cast());
        }
        *errptr = malloc_string(message);
    }
}

/// A malloc'd NUL-terminated copy of `s` (NUL bytes inside written as `\0`); NULL if malloc
/// fails.
fn malloc_string(s: &str) -> *mut c_char {
    let escaped;
    let s = if s.contains('\0') {
        escaped = s.replace('\0', "\\0");
        &escaped
    } else {
        s
    };
    let p = malloc_bytes(s.as_bytes(), 1);
    if !p.is_null() {
        // SAFETY: `malloc_bytes` allocated `s.len() + 1` bytes.
        unsafe { *p.add(s.len()) = 0 };
    }
    p
}

/// A malloc'd copy of `bytes` with `extra` more bytes after them (uninitialized), never a
/// zero-byte allocation (so a copy of an empty value is not NULL); NULL if malloc fails.
fn malloc_bytes(bytes: &[u8], extra: usize) -> *mut c_char {
    let size = (bytes.len() + extra).max(1);
    // SAFETY: malloc of a non-zero size; its result is checked before use.
    let p = unsafe { libc::malloc(size) }.cast::<c_char>();
    if !p.is_null() {
        // SAFETY: `p` holds `size >= bytes.len()` bytes, a fresh allocation that cannot overlap.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast::<u8>(), bytes.len()) };
    }
    p
}

/// LevelDB's `Status::ToString` shapes for strata's errors.
fn status_string(e: &Error) -> String {
    match e {
        Error::Io { path, op, source } => format!("IO error: {}: {op}: {source}", path.display()),
        Error::Corruption {
            file,
            offset,
            reason,
        } => format!(
            "Corruption: {} at offset {offset}: {reason}",
            file.display()
        ),
        Error::InvalidArgument(reason) => format!("Invalid argument: {reason}"),
        Error::NotSupported(reason) => format!("Not implemented: {reason}"),
        Error::NoDatabase { path, reason } => {
            format!("Invalid argument: {}: {reason}", path.display())
        }
        Error::Locked { path } => {
            format!("IO error: lock {}: already held by process", path.display())
        }
        other => format!("IO error: {other}"),
    }
}

/// The bytes `(p, len)`: empty when `len` is 0 (whatever `p` is), `None` for NULL with a length.
///
/// # Safety
/// Unless NULL or `len` is 0, `p` points to `len` readable bytes that live for `'a`.
unsafe fn bytes<'a>(p: *const c_char, len: size_t) -> Option<&'a [u8]> {
    if len == 0 {
        Some(&[])
    } else if p.is_null() {
        None
    } else {
        // SAFETY: the caller's promise.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
    }
}

/// [`bytes`], or the "Invalid argument" error naming `what`.
///
/// # Safety
/// As [`bytes`].
unsafe fn arg<'a>(p: *const c_char, len: size_t, what: &str) -> Result<&'a [u8], String> {
    // SAFETY: the caller's promise, passed on.
    unsafe { bytes(p, len) }
        .ok_or_else(|| format!("Invalid argument: {what} is NULL with a length of {len}"))
}

/// The path named by the NUL-terminated `name`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string that lives for `'a`.
unsafe fn path_arg<'a>(name: *const c_char) -> Result<&'a Path, String> {
    if name.is_null() {
        return Err("Invalid argument: the database name is NULL".into());
    }
    // SAFETY: the caller's promise: a live NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name) };
    Ok(Path::new(OsStr::from_bytes(name.to_bytes())))
}

/// The database behind `db`.
///
/// # Safety
/// `db` is NULL or a live `leveldb_t` from `leveldb_open`.
unsafe fn db_arg<'a>(db: *mut leveldb_t) -> Result<&'a Db, String> {
    // SAFETY: the caller's promise.
    unsafe { db.as_ref() }
        .map(|d| &d.db)
        .ok_or_else(|| "Invalid argument: the database is NULL".to_string())
}

/// strata's write options for `options` (NULL: the defaults).
///
/// # Safety
/// `options` is NULL or a live `leveldb_writeoptions_t`.
unsafe fn write_options(options: *const leveldb_writeoptions_t) -> WriteOptions {
    // SAFETY: the caller's promise.
    let sync = unsafe { options.as_ref() }.is_some_and(|o| o.sync);
    WriteOptions { sync }
}

/// strata's read options for `options` (NULL: the defaults), borrowing its snapshot.
///
/// # Safety
/// `options` is NULL or a live `leveldb_readoptions_t` whose snapshot, if set, is live (not
/// released) for `'a`.
unsafe fn read_options<'a>(options: *const leveldb_readoptions_t) -> ReadOptions<'a> {
    let mut read = ReadOptions::default();
    // SAFETY: the caller's promise.
    if let Some(o) = unsafe { options.as_ref() } {
        read.verify_checksums = o.verify_checksums;
        read.fill_cache = o.fill_cache;
        // SAFETY: the caller's promise: the snapshot, if not NULL, is live for `'a`.
        read.snapshot = unsafe { o.snapshot.as_ref() }.map(|s| &s.snapshot);
    }
    read
}

/// strata's options for `options` (NULL: strata's defaults).
///
/// # Safety
/// `options` is NULL or a live `leveldb_options_t`.
unsafe fn options_arg(options: *const leveldb_options_t) -> Options {
    // SAFETY: the caller's promise.
    match unsafe { options.as_ref() } {
        Some(o) => o.options.clone(),
        None => Options::default(),
    }
}

/// Runs `f` on the object behind `p`, if not NULL, under a guard: what every option setter
/// does.
///
/// # Safety
/// `p` is NULL or a live `T` of ours no other thread uses meanwhile.
unsafe fn with_mut<T>(p: *mut T, f: impl FnOnce(&mut T)) {
    // SAFETY: the caller's promise.
    if let Some(o) = unsafe { p.as_mut() } {
        guard((), || f(o));
    }
}

/// Runs `f` on the options behind `options`, if not NULL, under a guard.
///
/// # Safety
/// `options` is NULL or a live `leveldb_options_t` no other thread uses meanwhile.
unsafe fn with_options(options: *mut leveldb_options_t, f: impl FnOnce(&mut Options)) {
    // SAFETY: the caller's promise.
    unsafe { with_mut(options, |o| f(&mut o.options)) };
}

/// Drops the box behind `p`, if not NULL, under a guard.
///
/// # Safety
/// `p` is NULL or came from `Box::into_raw` of a `T` and is not used again.
unsafe fn free_box<T>(p: *mut T) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller's promise: `p` is an unused `Box<T>` of ours.
    let b = unsafe { Box::from_raw(p) };
    guard((), move || drop(b));
}

// ---------------------------------------------------------------------------------------------
// The database.

/// Opens (or creates, per the options) the database in the directory `name`. NULL options
/// mean strata's defaults. Returns NULL and sets `*errptr` on failure.
///
/// # Safety
/// `options` is NULL or a live options object; `name` is NULL or a NUL-terminated string;
/// `errptr` is NULL or points to NULL or a malloc'd string.
#[no_mangle]
pub unsafe extern "C" fn leveldb_open(
    options: *const leveldb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut leveldb_t {
    // SAFETY: the caller's promises on `errptr`, `options` and `name`.
    unsafe {
        guard_err(errptr, ptr::null_mut(), || {
            let path = path_arg(name)?;
            let db = Db::open(path, options_arg(options)).map_err(|e| status_string(&e))?;
            Ok(Box::into_raw(Box::new(leveldb_t { db })))
        })
    }
}

/// Closes the database and frees `db` (NULL: nothing). Syncs the log as strata's `Db::close`
/// does; errors of the close have nowhere to go and are dropped, as in LevelDB.
///
/// # Safety
/// `db` is NULL or a live `leveldb_t`, not used again; its iterators are destroyed first.
#[no_mangle]
pub unsafe extern "C" fn leveldb_close(db: *mut leveldb_t) {
    if db.is_null() {
        return;
    }
    // SAFETY: the caller's promise: `db` came from `leveldb_open` and is not used again.
    let db = unsafe { Box::from_raw(db) };
    guard((), move || {
        let _ = db.db.close();
    });
}

/// Stores `value` under `key`.
///
/// # Safety
/// `db` is a live `leveldb_t` (NULL is an error); `options` is NULL (defaults) or live; `key`
/// and `val` point to `keylen` and `vallen` bytes (either may be NULL with length 0);
/// `errptr` as for `leveldb_open`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_put(
    db: *mut leveldb_t,
    options: *const leveldb_writeoptions_t,
    key: *const c_char,
    keylen: size_t,
    val: *const c_char,
    vallen: size_t,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's promises on every argument.
    unsafe {
        guard_err(errptr, (), || {
            let db = db_arg(db)?;
            let key = arg(key, keylen, "key")?;
            let val = arg(val, vallen, "value")?;
            db.put_opt(key, val, &write_options(options))
                .map_err(|e| status_string(&e))
        })
    }
}

/// Deletes `key` (not an error if it is absent).
///
/// # Safety
/// As for `leveldb_put`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_delete(
    db: *mut leveldb_t,
    options: *const leveldb_writeoptions_t,
    key: *const c_char,
    keylen: size_t,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's promises on every argument.
    unsafe {
        guard_err(errptr, (), || {
            let db = db_arg(db)?;
            let key = arg(key, keylen, "key")?;
            db.delete_opt(key, &write_options(options))
                .map_err(|e| status_string(&e))
        })
    }
}

/// Applies `batch` atomically. The batch is left as it was (it may be written again).
///
/// # Safety
/// As for `leveldb_put`; `batch` is a live batch (NULL is an error).
#[no_mangle]
pub unsafe extern "C" fn leveldb_write(
    db: *mut leveldb_t,
    options: *const leveldb_writeoptions_t,
    batch: *mut leveldb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's promises on every argument.
    unsafe {
        guard_err(errptr, (), || {
            let db = db_arg(db)?;
            let batch = batch
                .as_ref()
                .ok_or_else(|| "Invalid argument: the write batch is NULL".to_string())?;
            db.write_opt(batch.batch.clone(), &write_options(options))
                .map_err(|e| status_string(&e))
        })
    }
}

/// The value of `key`, malloc'd (free it with `leveldb_free` or `free`), its length in
/// `*vallen`; NULL with `*vallen` 0 if the key is absent or on error.
///
/// # Safety
/// As for `leveldb_put`; `vallen` is NULL or a valid place for a size; a snapshot in `options`
/// is not released.
#[no_mangle]
pub unsafe extern "C" fn leveldb_get(
    db: *mut leveldb_t,
    options: *const leveldb_readoptions_t,
    key: *const c_char,
    keylen: size_t,
    vallen: *mut size_t,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    let set_len = |n: size_t| {
        if !vallen.is_null() {
            // SAFETY: the caller's promise: a valid place for a size.
            unsafe { *vallen = n };
        }
    };
    set_len(0);
    // SAFETY: the caller's promises on every argument.
    unsafe {
        guard_err(errptr, ptr::null_mut(), || {
            let db = db_arg(db)?;
            let key = arg(key, keylen, "key")?;
            let found = db
                .get_pinned_opt(key, &read_options(options))
                .map_err(|e| status_string(&e))?;
            let Some(value) = found else {
                return Ok(ptr::null_mut());
            };
            let p = malloc_bytes(&value, 0);
            if p.is_null() {
                return Err("IO error: out of memory for the value".into());
            }
            set_len(value.len());
            Ok(p)
        })
    }
}

/// A cursor over the database (at the snapshot of `options`, if set), not positioned. Never
/// NULL unless `db` is NULL or memory runs out; a cursor strata could not make is never valid
/// and `leveldb_iter_get_error` says why.
///
/// # Safety
/// `db` is NULL or live; `options` is NULL or live, with its snapshot (if set) not released.
/// The iterator is destroyed before the database is closed.
#[no_mangle]
pub unsafe extern "C" fn leveldb_create_iterator(
    db: *mut leveldb_t,
    options: *const leveldb_readoptions_t,
) -> *mut leveldb_iterator_t {
    guard(ptr::null_mut(), || {
        // SAFETY: the caller's promises on `db` and `options`.
        let (db, read) = unsafe { (db_arg(db), read_options(options)) };
        let Ok(db) = db else {
            return ptr::null_mut();
        };
        Box::into_raw(Box::new(leveldb_iterator_t {
            iter: db.iter_opt(&read),
        }))
    })
}

/// A snapshot of the database's current state. NULL only if `db` is NULL (or on a panic).
///
/// # Safety
/// `db` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_create_snapshot(db: *mut leveldb_t) -> *const leveldb_snapshot_t {
    guard(ptr::null(), || {
        // SAFETY: the caller's promise on `db`.
        match unsafe { db_arg(db) } {
            Ok(db) => Box::into_raw(Box::new(leveldb_snapshot_t {
                snapshot: db.snapshot(),
            })),
            Err(_) => ptr::null(),
        }
    })
}

/// Releases `snapshot` (NULL: nothing). `db` is not read: a snapshot knows its database.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot, not used again (nor by read options).
#[no_mangle]
pub unsafe extern "C" fn leveldb_release_snapshot(
    db: *mut leveldb_t,
    snapshot: *const leveldb_snapshot_t,
) {
    let _ = db;
    // SAFETY: the caller's promise: a snapshot of ours, released once.
    unsafe { free_box(snapshot.cast_mut()) };
}

/// The value of the property `propname` (LevelDB's names: `leveldb.stats`,
/// `leveldb.num-files-at-level<N>`, `leveldb.sstables`, `leveldb.approximate-memory-usage`,
/// and strata's), malloc'd; NULL for an unknown property or NULL arguments.
///
/// # Safety
/// `db` is NULL or live; `propname` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn leveldb_property_value(
    db: *mut leveldb_t,
    propname: *const c_char,
) -> *mut c_char {
    guard(ptr::null_mut(), || {
        // SAFETY: the caller's promise on `db`.
        let Ok(db) = (unsafe { db_arg(db) }) else {
            return ptr::null_mut();
        };
        if propname.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: the caller's promise: a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(propname) };
        let Ok(name) = name.to_str() else {
            return ptr::null_mut();
        };
        match db.property(name) {
            Some(value) => malloc_string(&value),
            None => ptr::null_mut(),
        }
    })
}

/// Stores in `sizes[i]` the approximate bytes on disk of the keys in
/// `[range_start_key[i], range_limit_key[i])`, for `i < num_ranges`. A NULL array, or a NULL
/// key with a length, gives 0 for the ranges it concerns; NULL `db` gives 0 everywhere.
///
/// # Safety
/// Each non-NULL array holds `num_ranges` entries, each key pointing to its length in bytes;
/// `sizes` is NULL or holds `num_ranges` places.
#[no_mangle]
pub unsafe extern "C" fn leveldb_approximate_sizes(
    db: *mut leveldb_t,
    num_ranges: c_int,
    range_start_key: *const *const c_char,
    range_start_key_len: *const size_t,
    range_limit_key: *const *const c_char,
    range_limit_key_len: *const size_t,
    sizes: *mut u64,
) {
    let n = usize::try_from(num_ranges).unwrap_or(0);
    if sizes.is_null() || n == 0 {
        return;
    }
    // SAFETY: the caller's promise: `sizes` holds `num_ranges` places.
    let sizes = unsafe { std::slice::from_raw_parts_mut(sizes, n) };
    sizes.fill(0);
    guard((), || {
        // SAFETY: the caller's promise on `db`.
        let Ok(db) = (unsafe { db_arg(db) }) else {
            return;
        };
        if [
            range_start_key.cast::<()>(),
            range_start_key_len.cast(),
            range_limit_key.cast(),
            range_limit_key_len.cast(),
        ]
        .iter()
        .any(|p| p.is_null())
        {
            return;
        }
        // SAFETY: the four arrays are not NULL and hold `num_ranges` entries (the caller's
        // promise), each key pointing to its length in bytes.
        let ranges: Vec<Option<(&[u8], &[u8])>> = (0..n)
            .map(|i| unsafe {
                let start = bytes(*range_start_key.add(i), *range_start_key_len.add(i))?;
                let limit = bytes(*range_limit_key.add(i), *range_limit_key_len.add(i))?;
                Some((start, limit))
            })
            .collect();
        let wanted: Vec<(&[u8], &[u8])> = ranges.iter().flatten().copied().collect();
        let mut measured = db.approximate_sizes(&wanted).into_iter();
        for (size, range) in sizes.iter_mut().zip(&ranges) {
            if range.is_some() {
                *size = measured.next().unwrap_or(0);
            }
        }
    });
}

/// Compacts the keys in `[start_key, limit_key]`; a NULL key is an open end (before the first
/// key, after the last). Errors are dropped, as LevelDB's `CompactRange` returns none.
///
/// # Safety
/// `db` is NULL (nothing done) or live; each key is NULL or points to its length in bytes.
#[no_mangle]
pub unsafe extern "C" fn leveldb_compact_range(
    db: *mut leveldb_t,
    start_key: *const c_char,
    start_key_len: size_t,
    limit_key: *const c_char,
    limit_key_len: size_t,
) {
    guard((), || {
        // SAFETY: the caller's promise on `db`.
        let Ok(db) = (unsafe { db_arg(db) }) else {
            return;
        };
        // SAFETY: the caller's promise: each key, if not NULL, points to its length in bytes.
        let (start, limit) = unsafe {
            (
                (!start_key.is_null())
                    .then(|| bytes(start_key, start_key_len))
                    .flatten(),
                (!limit_key.is_null())
                    .then(|| bytes(limit_key, limit_key_len))
                    .flatten(),
            )
        };
        let _ = db.compact_range(start, limit);
    });
}

/// Deletes the database in `name` and its files (strata's `destroy`: only a database's own
/// files, then the directory if nothing else is in it). A directory that does not exist, or
/// holds nothing but a `LOCK` file, is not an error (it is removed, as LevelDB removes it);
/// one that holds other files but no database is refused ("Invalid argument"), where LevelDB
/// would delete the files with database names in it.
///
/// # Safety
/// As for `leveldb_open`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_destroy_db(
    options: *const leveldb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's promises on every argument.
    unsafe {
        guard_err(errptr, (), || {
            let path = path_arg(name)?;
            strata::destroy(path, &options_arg(options)).map_err(|e| status_string(&e))
        })
    }
}

/// Rebuilds the database in `name` from what is left of it (strata's `repair`).
///
/// # Safety
/// As for `leveldb_open`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_repair_db(
    options: *const leveldb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's promises on every argument.
    unsafe {
        guard_err(errptr, (), || {
            let path = path_arg(name)?;
            strata::repair(path, &options_arg(options))
                .map(|_| ())
                .map_err(|e| status_string(&e))
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Iterators.

/// Runs `f` on the cursor behind `it`, if there is one, under a guard; `fallback` otherwise.
///
/// # Safety
/// `it` is NULL or a live iterator no other thread uses meanwhile.
unsafe fn with_iter<R>(
    it: *const leveldb_iterator_t,
    fallback: R,
    f: impl FnOnce(&mut DbIterator) -> R,
) -> R {
    // SAFETY: the caller's promise: a live iterator used by this thread only. The pointer is
    // `const` in LevelDB's signatures of the read-only functions; it is our own allocation.
    let Some(it) = (unsafe { it.cast_mut().as_mut() }) else {
        return fallback;
    };
    match &mut it.iter {
        Ok(iter) => {
            // The fallback is moved into the guard; its value is kept for the failed case.
            guard_ref(fallback, iter, f)
        }
        Err(_) => fallback,
    }
}

/// [`guard`] for a function of a borrowed cursor.
fn guard_ref<R>(fallback: R, iter: &mut DbIterator, f: impl FnOnce(&mut DbIterator) -> R) -> R {
    guard(fallback, move || f(iter))
}

/// Frees the iterator (NULL: nothing).
///
/// # Safety
/// `it` is NULL or a live iterator, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_destroy(it: *mut leveldb_iterator_t) {
    // SAFETY: the caller's promise.
    unsafe { free_box(it) };
}

/// 1 if the cursor is on an entry, else 0 (NULL: 0).
///
/// # Safety
/// `it` is NULL or a live iterator.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_valid(it: *const leveldb_iterator_t) -> u8 {
    // SAFETY: the caller's promise.
    unsafe { with_iter(it, 0, |i| u8::from(i.valid())) }
}

/// Moves to the first entry.
///
/// # Safety
/// `it` is NULL (nothing done) or a live iterator.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_seek_to_first(it: *mut leveldb_iterator_t) {
    // SAFETY: the caller's promise.
    unsafe { with_iter(it, (), |i| i.seek_to_first()) }
}

/// Moves to the last entry.
///
/// # Safety
/// `it` is NULL (nothing done) or a live iterator.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_seek_to_last(it: *mut leveldb_iterator_t) {
    // SAFETY: the caller's promise.
    unsafe { with_iter(it, (), |i| i.seek_to_last()) }
}

/// Moves to the first entry at or after `k`. NULL `k` with a length: nothing done.
///
/// # Safety
/// `it` is NULL or live; `k` points to `klen` bytes (or is NULL with 0).
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_seek(
    it: *mut leveldb_iterator_t,
    k: *const c_char,
    klen: size_t,
) {
    // SAFETY: the caller's promise on `k`.
    let Some(key) = (unsafe { bytes(k, klen) }) else {
        return;
    };
    // SAFETY: the caller's promise on `it`.
    unsafe { with_iter(it, (), |i| i.seek(key)) }
}

/// Moves to the next entry. On a cursor not on an entry (undefined in LevelDB): nothing done.
///
/// # Safety
/// `it` is NULL (nothing done) or a live iterator.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_next(it: *mut leveldb_iterator_t) {
    // SAFETY: the caller's promise.
    unsafe { with_iter(it, (), |i| i.next()) }
}

/// Moves to the previous entry. On a cursor not on an entry (undefined in LevelDB): nothing
/// done.
///
/// # Safety
/// `it` is NULL (nothing done) or a live iterator.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_prev(it: *mut leveldb_iterator_t) {
    // SAFETY: the caller's promise.
    unsafe { with_iter(it, (), |i| i.prev()) }
}

/// The current key, not NUL-terminated, its length in `*klen`; valid until the cursor moves
/// or is destroyed. On a cursor not on an entry (undefined in LevelDB): NULL and length 0.
///
/// # Safety
/// `it` is NULL or live; `klen` is NULL or a valid place for a size.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_key(
    it: *const leveldb_iterator_t,
    klen: *mut size_t,
) -> *const c_char {
    // SAFETY: the caller's promise on `it`.
    let (p, n) = unsafe {
        with_iter(it, (ptr::null(), 0), |i| {
            if i.valid() {
                let k = i.key();
                (k.as_ptr().cast::<c_char>(), k.len())
            } else {
                (ptr::null(), 0)
            }
        })
    };
    if !klen.is_null() {
        // SAFETY: the caller's promise: a valid place for a size.
        unsafe { *klen = n };
    }
    p
}

/// The current value, its length in `*vlen`; valid until the cursor moves or is destroyed.
/// NULL and length 0 on a cursor not on an entry, or when the value (kept in a blob file)
/// cannot be read: `leveldb_iter_get_error` then says why.
///
/// # Safety
/// As for `leveldb_iter_key`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_value(
    it: *const leveldb_iterator_t,
    vlen: *mut size_t,
) -> *const c_char {
    // SAFETY: the caller's promise on `it`.
    let (p, n) = unsafe {
        with_iter(it, (ptr::null(), 0), |i| match i.try_value() {
            Ok(v) => (v.as_ptr().cast::<c_char>(), v.len()),
            Err(_) => (ptr::null(), 0),
        })
    };
    if !vlen.is_null() {
        // SAFETY: the caller's promise: a valid place for a size.
        unsafe { *vlen = n };
    }
    p
}

/// Stores the first error the cursor met in `*errptr` (untouched if none).
///
/// # Safety
/// `it` is NULL (nothing done) or live; `errptr` as for `leveldb_open`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_get_error(
    it: *const leveldb_iterator_t,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's promise on `it`.
    let Some(it) = (unsafe { it.as_ref() }) else {
        return;
    };
    // SAFETY: the caller's promise on `errptr`.
    unsafe {
        guard_err(errptr, (), || match &it.iter {
            Ok(iter) => iter.status().map_err(|e| status_string(&e)),
            Err(e) => Err(status_string(e)),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Write batches.

/// Runs `f` on the batch behind `b`, if not NULL, under a guard.
///
/// # Safety
/// `b` is NULL or a live batch no other thread uses meanwhile.
unsafe fn with_batch(b: *mut leveldb_writebatch_t, f: impl FnOnce(&mut WriteBatch)) {
    // SAFETY: the caller's promise.
    if let Some(b) = unsafe { b.as_mut() } {
        guard((), || f(&mut b.batch));
    }
}

/// An empty write batch. NULL only on a panic.
#[no_mangle]
pub extern "C" fn leveldb_writebatch_create() -> *mut leveldb_writebatch_t {
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(leveldb_writebatch_t {
            batch: WriteBatch::new(),
        }))
    })
}

/// Frees the batch (NULL: nothing).
///
/// # Safety
/// `b` is NULL or a live batch, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_destroy(b: *mut leveldb_writebatch_t) {
    // SAFETY: the caller's promise.
    unsafe { free_box(b) };
}

/// Empties the batch.
///
/// # Safety
/// `b` is NULL (nothing done) or a live batch.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_clear(b: *mut leveldb_writebatch_t) {
    // SAFETY: the caller's promise.
    unsafe { with_batch(b, WriteBatch::clear) };
}

/// Adds a put of `key` to `val`. A NULL key or value with a length: nothing added.
///
/// # Safety
/// `b` is NULL (nothing done) or live; `key` and `val` point to their lengths in bytes.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_put(
    b: *mut leveldb_writebatch_t,
    key: *const c_char,
    klen: size_t,
    val: *const c_char,
    vlen: size_t,
) {
    // SAFETY: the caller's promises on `key` and `val`.
    let (Some(key), Some(val)) = (unsafe { (bytes(key, klen), bytes(val, vlen)) }) else {
        return;
    };
    // SAFETY: the caller's promise on `b`.
    unsafe { with_batch(b, |b| b.put(key, val)) };
}

/// Adds a deletion of `key`. A NULL key with a length: nothing added.
///
/// # Safety
/// `b` is NULL (nothing done) or live; `key` points to `klen` bytes.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_delete(
    b: *mut leveldb_writebatch_t,
    key: *const c_char,
    klen: size_t,
) {
    // SAFETY: the caller's promise on `key`.
    let Some(key) = (unsafe { bytes(key, klen) }) else {
        return;
    };
    // SAFETY: the caller's promise on `b`.
    unsafe { with_batch(b, |b| b.delete(key)) };
}

/// Calls `put(state, key, klen, value, vlen)` for each put and `deleted(state, key, klen)` for
/// each deletion of the batch, in the order they were added. The pointers are valid for the
/// call only. A NULL callback skips the operations of its kind.
///
/// # Safety
/// `b` is NULL (nothing done) or live; the callbacks are NULL or functions that may be called
/// with `state`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_iterate(
    b: *const leveldb_writebatch_t,
    state: *mut c_void,
    put: Option<unsafe extern "C" fn(*mut c_void, *const c_char, size_t, *const c_char, size_t)>,
    deleted: Option<unsafe extern "C" fn(*mut c_void, *const c_char, size_t)>,
) {
    // SAFETY: the caller's promise on `b`.
    let Some(b) = (unsafe { b.as_ref() }) else {
        return;
    };
    guard((), || {
        for op in b.batch.iter() {
            let key = op.key.as_ptr().cast::<c_char>();
            match (op.kind, put, deleted) {
                // SAFETY: the caller's callback with its state; the key and value are live
                // slices of the batch for the call.
                (ValueKind::Value, Some(put), _) => unsafe {
                    put(
                        state,
                        key,
                        op.key.len(),
                        op.value.as_ptr().cast(),
                        op.value.len(),
                    )
                },
                // SAFETY: as above.
                (ValueKind::Deletion, _, Some(deleted)) => unsafe {
                    deleted(state, key, op.key.len())
                },
                // Batches built through this API hold only puts and deletions.
                _ => {}
            }
        }
    });
}

/// Appends the operations of `source` to `destination`, after its own.
///
/// # Safety
/// Both are NULL (nothing done) or live batches; they may be the same batch.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_append(
    destination: *mut leveldb_writebatch_t,
    source: *const leveldb_writebatch_t,
) {
    if destination.is_null() || source.is_null() {
        return;
    }
    guard((), || {
        if ptr::eq(destination.cast_const(), source) {
            // SAFETY: the caller's promise: a live batch, used by this thread only.
            let b = unsafe { &mut (*destination).batch };
            let copy = b.clone();
            b.append(&copy);
        } else {
            // SAFETY: the caller's promise: two live, distinct batches.
            let (dst, src) = unsafe { (&mut (*destination).batch, &(*source).batch) };
            dst.append(src);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Options.

/// Options with strata's defaults (LevelDB's: no creation, 4 MiB write buffer, 4 KiB blocks,
/// Snappy, 8 MiB block cache, ...). NULL only on a panic.
#[no_mangle]
pub extern "C" fn leveldb_options_create() -> *mut leveldb_options_t {
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(leveldb_options_t {
            options: Options::default(),
        }))
    })
}

/// Frees the options (NULL: nothing). Databases opened with them are not affected.
///
/// # Safety
/// `options` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_destroy(options: *mut leveldb_options_t) {
    // SAFETY: the caller's promise.
    unsafe { free_box(options) };
}

/// Sets the key order. NULL restores the bytewise order.
///
/// # Safety
/// `options` is NULL (nothing done) or live; `cmp` is NULL or a live comparator.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_comparator(
    options: *mut leveldb_options_t,
    cmp: *mut leveldb_comparator_t,
) {
    // SAFETY: the caller's promise on `cmp`.
    let cmp = unsafe { cmp.as_ref() };
    // SAFETY: the caller's promise on `options`.
    unsafe {
        with_options(options, |o| {
            o.comparator = match cmp {
                Some(c) => c.inner.clone(),
                None => strata::bytewise(),
            }
        })
    };
}

/// Sets the filter policy of new tables (and of reading their filters). NULL: none.
///
/// # Safety
/// `options` is NULL (nothing done) or live; `policy` is NULL or a live filter policy.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_filter_policy(
    options: *mut leveldb_options_t,
    policy: *mut leveldb_filterpolicy_t,
) {
    // SAFETY: the caller's promise on `policy`.
    let policy = unsafe { policy.as_ref() }.map(|p| p.policy.clone());
    // SAFETY: the caller's promise on `options`.
    unsafe { with_options(options, |o| o.filter_policy = policy) };
}

/// Create the database if it is missing (non-zero) or not (0, the default).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_create_if_missing(
    options: *mut leveldb_options_t,
    v: u8,
) {
    // SAFETY: the caller's promise.
    unsafe { with_options(options, |o| o.create_if_missing = v != 0) };
}

/// Fail to open a database that exists (non-zero) or not (0, the default).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_error_if_exists(
    options: *mut leveldb_options_t,
    v: u8,
) {
    // SAFETY: the caller's promise.
    unsafe { with_options(options, |o| o.error_if_exists = v != 0) };
}

/// strata's `paranoid_checks`: also open and verify every table at open.
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_paranoid_checks(
    options: *mut leveldb_options_t,
    v: u8,
) {
    // SAFETY: the caller's promise.
    unsafe { with_options(options, |o| o.paranoid_checks = v != 0) };
}

/// Sets the environment. NULL restores the default (POSIX) one.
///
/// # Safety
/// `options` is NULL (nothing done) or live; `env` is NULL or a live env.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_env(
    options: *mut leveldb_options_t,
    env: *mut leveldb_env_t,
) {
    // SAFETY: the caller's promise on `env`.
    let env = unsafe { env.as_ref() }.map(|e| e.env.clone());
    // SAFETY: the caller's promise on `options`.
    unsafe { with_options(options, |o| o.env = env.unwrap_or_else(PosixEnv::shared)) };
}

/// Accepted and ignored: the C API cannot make a logger, and strata writes its own `LOG`.
///
/// # Safety
/// None: neither pointer is read.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_info_log(
    options: *mut leveldb_options_t,
    logger: *mut leveldb_logger_t,
) {
    let _ = (options, logger);
}

/// Bytes of writes buffered in memory before a flush (clamped to [64 KiB, 1 GiB] at open).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_write_buffer_size(
    options: *mut leveldb_options_t,
    v: size_t,
) {
    // SAFETY: the caller's promise.
    unsafe { with_options(options, |o| o.write_buffer_size = v) };
}

/// Files the database may keep open (clamped to [74, 50,000] at open; negative: 74).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_max_open_files(
    options: *mut leveldb_options_t,
    v: c_int,
) {
    // SAFETY: the caller's promise.
    unsafe {
        with_options(options, |o| {
            o.max_open_files = usize::try_from(v).unwrap_or(0)
        })
    };
}

/// Shares `cache` as the block cache. NULL: a cache of the database's own (8 MiB).
///
/// # Safety
/// `options` is NULL (nothing done) or live; `cache` is NULL or a live cache.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_cache(
    options: *mut leveldb_options_t,
    cache: *mut leveldb_cache_t,
) {
    // SAFETY: the caller's promise on `cache`.
    let cache = unsafe { cache.as_ref() }.map(|c| c.cache.clone());
    // SAFETY: the caller's promise on `options`.
    unsafe { with_options(options, |o| o.block_cache = cache) };
}

/// Uncompressed bytes per data block (clamped to [1 KiB, 4 MiB] at open).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_block_size(
    options: *mut leveldb_options_t,
    v: size_t,
) {
    // SAFETY: the caller's promise.
    unsafe { with_options(options, |o| o.block_size = v) };
}

/// Keys between restart points in a block; less than 1 makes open fail ("Invalid argument").
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_block_restart_interval(
    options: *mut leveldb_options_t,
    v: c_int,
) {
    // SAFETY: the caller's promise.
    unsafe {
        with_options(options, |o| {
            o.block_restart_interval = usize::try_from(v).unwrap_or(0)
        })
    };
}

/// Bytes written to a table before the next is started (clamped to [1 MiB, 1 GiB] at open).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_max_file_size(
    options: *mut leveldb_options_t,
    v: size_t,
) {
    // SAFETY: the caller's promise.
    unsafe { with_options(options, |o| o.max_file_size = v) };
}

/// `leveldb_no_compression` (0) or `leveldb_snappy_compression` (1); other values are ignored.
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_compression(
    options: *mut leveldb_options_t,
    v: c_int,
) {
    let compression = match v {
        0 => Some(Compression::None),
        1 => Some(Compression::Snappy),
        _ => None,
    };
    if let Some(c) = compression {
        // SAFETY: the caller's promise.
        unsafe { with_options(options, |o| o.compression = c) };
    }
}

// ---------------------------------------------------------------------------------------------
// Comparators and filter policies.

/// Reads the name a C `name` callback returns for `state`.
///
/// # Safety
/// `name` may be called with `state` and returns NULL or a NUL-terminated string.
unsafe fn read_name(name: NameFn, state: *mut c_void) -> String {
    // SAFETY: the caller's promise.
    let p = unsafe { name(state) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise: a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A comparator made of `state` and callbacks. `name(state)` is called once, here, and its
/// string copied. `destructor(state)` runs in `leveldb_comparator_destroy`. NULL if `compare`
/// or `name` is NULL.
///
/// # Safety
/// The callbacks may be called with `state`, from any thread, concurrently, until
/// `leveldb_comparator_destroy`; `name` returns a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn leveldb_comparator_create(
    state: *mut c_void,
    destructor: Option<DestructorFn>,
    compare: Option<CompareFn>,
    name: Option<NameFn>,
) -> *mut leveldb_comparator_t {
    let (Some(compare), Some(name)) = (compare, name) else {
        return ptr::null_mut();
    };
    guard(ptr::null_mut(), || {
        // SAFETY: the caller's promise on `name` and `state`.
        let name = unsafe { read_name(name, state) };
        Box::into_raw(Box::new(leveldb_comparator_t {
            inner: Arc::new(CComparator {
                state,
                destructor,
                compare,
                name,
            }),
        }))
    })
}

/// Runs the comparator's destructor on its state, once, and frees it (NULL: nothing). Options
/// and databases that share it keep its memory, not its state: no database may still use it.
///
/// # Safety
/// `cmp` is NULL or a live comparator, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_comparator_destroy(cmp: *mut leveldb_comparator_t) {
    if cmp.is_null() {
        return;
    }
    // SAFETY: the caller's promise: a comparator of ours, destroyed once.
    let cmp = unsafe { Box::from_raw(cmp) };
    if let Some(destructor) = cmp.inner.destructor {
        // SAFETY: the caller's destructor with its state, called once: this box is gone after.
        unsafe { destructor(cmp.inner.state) };
    }
    guard((), move || drop(cmp));
}

/// A filter policy made of `state` and callbacks. `name(state)` is called once, here.
/// `create_filter` returns a filter allocated with malloc, which strata frees; `destructor(state)`
/// runs in `leveldb_filterpolicy_destroy`. NULL if a callback other than `destructor` is NULL.
///
/// # Safety
/// The callbacks may be called with `state`, from any thread, concurrently, until
/// `leveldb_filterpolicy_destroy`; `name` returns a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn leveldb_filterpolicy_create(
    state: *mut c_void,
    destructor: Option<DestructorFn>,
    create_filter: Option<CreateFilterFn>,
    key_may_match: Option<KeyMayMatchFn>,
    name: Option<NameFn>,
) -> *mut leveldb_filterpolicy_t {
    let (Some(create_filter), Some(key_may_match), Some(name)) =
        (create_filter, key_may_match, name)
    else {
        return ptr::null_mut();
    };
    guard(ptr::null_mut(), || {
        // SAFETY: the caller's promise on `name` and `state`.
        let name = unsafe { read_name(name, state) };
        let c_policy = Arc::new(CFilterPolicy {
            state,
            destructor,
            create_filter,
            key_may_match,
            name,
        });
        Box::into_raw(Box::new(leveldb_filterpolicy_t {
            policy: c_policy.clone(),
            c_policy: Some(c_policy),
        }))
    })
}

/// Runs a C policy's destructor on its state, once, and frees the policy (NULL: nothing).
///
/// # Safety
/// `policy` is NULL or a live policy, not used again; no database still uses it.
#[no_mangle]
pub unsafe extern "C" fn leveldb_filterpolicy_destroy(policy: *mut leveldb_filterpolicy_t) {
    if policy.is_null() {
        return;
    }
    // SAFETY: the caller's promise: a policy of ours, destroyed once.
    let policy = unsafe { Box::from_raw(policy) };
    if let Some(c) = &policy.c_policy {
        if let Some(destructor) = c.destructor {
            // SAFETY: the caller's destructor with its state, called once.
            unsafe { destructor(c.state) };
        }
    }
    guard((), move || drop(policy));
}

/// LevelDB's bloom filter (`leveldb.BuiltinBloomFilter2`, the same bits) at `bits_per_key`
/// (10 gives about 1% false positives; negative counts as 0). Free it with
/// `leveldb_filterpolicy_destroy`.
#[no_mangle]
pub extern "C" fn leveldb_filterpolicy_create_bloom(
    bits_per_key: c_int,
) -> *mut leveldb_filterpolicy_t {
    guard(ptr::null_mut(), || {
        let bits = usize::try_from(bits_per_key).unwrap_or(0);
        Box::into_raw(Box::new(leveldb_filterpolicy_t {
            policy: Arc::new(BloomFilterPolicy::new(bits)),
            c_policy: None,
        }))
    })
}

// ---------------------------------------------------------------------------------------------
// Read and write options.

/// Read options: checksums verified (strata's default; LevelDB's is not to), blocks cached,
/// no snapshot. NULL only on a panic.
#[no_mangle]
pub extern "C" fn leveldb_readoptions_create() -> *mut leveldb_readoptions_t {
    guard(ptr::null_mut(), || {
        let d = ReadOptions::default();
        Box::into_raw(Box::new(leveldb_readoptions_t {
            verify_checksums: d.verify_checksums,
            fill_cache: d.fill_cache,
            snapshot: ptr::null(),
        }))
    })
}

/// Frees the read options (NULL: nothing).
///
/// # Safety
/// `options` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_destroy(options: *mut leveldb_readoptions_t) {
    // SAFETY: the caller's promise.
    unsafe { free_box(options) };
}

/// Verify the checksum of every block read (non-zero) or not (0).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_set_verify_checksums(
    options: *mut leveldb_readoptions_t,
    v: u8,
) {
    // SAFETY: the caller's promise.
    unsafe { with_mut(options, |o| o.verify_checksums = v != 0) };
}

/// Keep the blocks read in the block cache (non-zero, the default) or not (0).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_set_fill_cache(
    options: *mut leveldb_readoptions_t,
    v: u8,
) {
    // SAFETY: the caller's promise.
    unsafe { with_mut(options, |o| o.fill_cache = v != 0) };
}

/// Read at `snapshot` (NULL: the current state). The snapshot is borrowed: keep it alive while
/// these options are used.
///
/// # Safety
/// `options` is NULL (nothing done) or live; `snapshot` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_set_snapshot(
    options: *mut leveldb_readoptions_t,
    snapshot: *const leveldb_snapshot_t,
) {
    // SAFETY: the caller's promise.
    unsafe { with_mut(options, |o| o.snapshot = snapshot) };
}

/// Write options: not synced. NULL only on a panic.
#[no_mangle]
pub extern "C" fn leveldb_writeoptions_create() -> *mut leveldb_writeoptions_t {
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(leveldb_writeoptions_t { sync: false }))
    })
}

/// Frees the write options (NULL: nothing).
///
/// # Safety
/// `options` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writeoptions_destroy(options: *mut leveldb_writeoptions_t) {
    // SAFETY: the caller's promise.
    unsafe { free_box(options) };
}

/// Sync the log before a write returns (non-zero) or not (0, the default).
///
/// # Safety
/// `options` is NULL (nothing done) or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writeoptions_set_sync(
    options: *mut leveldb_writeoptions_t,
    v: u8,
) {
    // SAFETY: the caller's promise.
    unsafe { with_mut(options, |o| o.sync = v != 0) };
}

// ---------------------------------------------------------------------------------------------
// Caches, environments, memory, versions.

/// A block cache of `capacity` bytes, to share between databases through their options.
#[no_mangle]
pub extern "C" fn leveldb_cache_create_lru(capacity: size_t) -> *mut leveldb_cache_t {
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(leveldb_cache_t {
            cache: Arc::new(BlockCache::new(capacity)),
        }))
    })
}

/// Frees the cache handle (NULL: nothing); databases using the cache keep it until they close.
///
/// # Safety
/// `cache` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_cache_destroy(cache: *mut leveldb_cache_t) {
    // SAFETY: the caller's promise.
    unsafe { free_box(cache) };
}

/// The default environment: strata's POSIX env.
#[no_mangle]
pub extern "C" fn leveldb_create_default_env() -> *mut leveldb_env_t {
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(leveldb_env_t {
            env: PosixEnv::shared(),
        }))
    })
}

/// Frees the env handle (NULL: nothing); databases using it keep it until they close.
///
/// # Safety
/// `env` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn leveldb_env_destroy(env: *mut leveldb_env_t) {
    // SAFETY: the caller's promise.
    unsafe { free_box(env) };
}

/// A directory for tests, malloc'd: `$TEST_TMPDIR` if set and not empty, else
/// `/tmp/leveldbtest-<euid>` (LevelDB's choice, which C tests may expect); it is created if
/// missing. NULL if it cannot be created or `env` is NULL.
///
/// # Safety
/// `env` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn leveldb_env_get_test_directory(env: *mut leveldb_env_t) -> *mut c_char {
    if env.is_null() {
        return ptr::null_mut();
    }
    guard(ptr::null_mut(), || {
        let dir = match std::env::var_os("TEST_TMPDIR") {
            Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
            // SAFETY: geteuid has no preconditions and cannot fail.
            _ => format!("/tmp/leveldbtest-{}", unsafe { libc::geteuid() }).into(),
        };
        if std::fs::create_dir_all(&dir).is_err() {
            return ptr::null_mut();
        }
        let bytes = dir.as_os_str().as_bytes();
        let p = malloc_bytes(bytes, 1);
        if !p.is_null() {
            // SAFETY: `malloc_bytes` allocated `bytes.len() + 1` bytes.
            unsafe { *p.add(bytes.len()) = 0 };
        }
        p
    })
}

/// Frees memory this library returned (values, property values, error strings, the test
/// directory): libc's `free`. NULL: nothing.
///
/// # Safety
/// `ptr` is NULL or was returned by this library and not freed yet.
#[no_mangle]
pub unsafe extern "C" fn leveldb_free(ptr: *mut c_void) {
    // SAFETY: the caller's promise: memory from libc's malloc, freed once (free(NULL) is a
    // no-op).
    unsafe { libc::free(ptr) };
}

/// 1: the major version of the C API implemented (LevelDB 1.23's), not of strata.
#[no_mangle]
pub extern "C" fn leveldb_major_version() -> c_int {
    API_MAJOR_VERSION
}

/// 23: the minor version of the C API implemented (LevelDB 1.23's), not of strata.
#[no_mangle]
pub extern "C" fn leveldb_minor_version() -> c_int {
    API_MINOR_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_leveldb_shapes() {
        assert!(status_string(&Error::invalid_argument("x")).starts_with("Invalid argument: "));
        assert!(status_string(&Error::corruption("/f", 3, "bad"))
            .starts_with("Corruption: /f at offset 3"));
        assert!(status_string(&Error::not_supported("x")).starts_with("Not implemented: "));
    }

    #[test]
    fn a_panic_becomes_an_error_string_or_the_fallback() {
        let mut err: *mut c_char = malloc_string("earlier");
        // SAFETY: `err` is NULL or a malloc'd string throughout; it is freed below.
        unsafe {
            let r: *mut leveldb_t = guard_err(&mut err, ptr::null_mut(), || panic!("boom"));
            assert!(r.is_null());
            assert_eq!(
                CStr::from_ptr(err).to_str().unwrap(),
                "IO error: strata panicked: boom"
            );
            libc::free(err.cast());
        }
        assert_eq!(guard(7, || -> i32 { panic!("no unwinding into C") }), 7);
    }

    #[test]
    fn an_existing_error_string_is_replaced() {
        let mut err: *mut c_char = malloc_string("old");
        // SAFETY: `err` is a malloc'd string; it is freed below.
        unsafe {
            store_error(&mut err, "new\0x");
            assert_eq!(CStr::from_ptr(err).to_str().unwrap(), "new\\0x");
            libc::free(err.cast());
        }
    }
}
