// SPDX-License-Identifier: MIT OR Apache-2.0
//! Berkeley DB 5.3 (Debian's libdb) as a db_bench engine: a B-tree database in a
//! transactional environment, configured as Symas's 2012 microbenchmarks ran it.
//!
//! Berkeley DB's handles are structs of function pointers, so the calls go through a small C
//! shim, `shim/berkeleydb.c`, compiled by build.rs.
//!
//! Configuration:
//! - Environment in `dir`: `DB_CREATE | DB_INIT_MPOOL | DB_INIT_TXN | DB_INIT_LOCK |
//!   DB_INIT_LOG | DB_THREAD`, plus `DB_PRIVATE` (one process uses it, so its regions live in
//!   the heap rather than in `__db.*` files mapped from `dir`) and `DB_RECOVER` (normal
//!   recovery on open; short, because closing takes a checkpoint).
//! - Cache: `config.memory_budget()`, one region (Berkeley DB itself adds 25% to caches under
//!   500 MB).
//! - Asynchronous commits: `DB_TXN_WRITE_NOSYNC` (the log reaches the operating system at each
//!   commit, without fsync); a `sync` write commits with `DB_TXN_SYNC`.
//! - `DB_LOG_AUTO_REMOVE`, as Symas configured it: log files no longer needed for recovery
//!   are removed (at checkpoints), otherwise they accumulate without bound.
//! - Deadlock detection `DB_LOCK_DEFAULT`: a deadlocked write transaction is aborted and
//!   retried; a deadlocked read is retried (a scan resumes after its last key).
//! - A B-tree with the default page size (the file system's block size, as in the report), no
//!   compression (Berkeley DB has none); `bloom_bits` and `verify_checksums` do not apply.
//! - One transaction per batch. Cursors serve scans (`DB_FIRST`/`DB_NEXT`,
//!   `DB_LAST`/`DB_PREV`) and seeks (`DB_SET_RANGE`, a new cursor per seek).
//! - compact(): `DB->compact` with `DB_FREE_SPACE` (returns emptied pages to the file
//!   system), then a checkpoint (lets old log files be removed).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::marker::PhantomData;
use std::path::Path;

use super::{Engine, EngineConfig, EngineResult};

#[repr(C)]
struct RawStore([u8; 0]);
#[repr(C)]
struct RawTxn([u8; 0]);
#[repr(C)]
struct RawCursor([u8; 0]);

/// The shim's own return codes (see `shim/berkeleydb.c`).
const SHIM_NOTFOUND: c_int = -1;
const SHIM_BUFFER_SMALL: c_int = -2;

/// The shim's cursor operations.
const OP_FIRST: c_int = 0;
const OP_LAST: c_int = 1;
const OP_NEXT: c_int = 2;
const OP_PREV: c_int = 3;
const OP_SET_RANGE: c_int = 4;

extern "C" {
    fn bdbshim_strerror(rc: c_int) -> *const c_char;
    fn bdbshim_is_deadlock(rc: c_int) -> c_int;
    fn bdbshim_open(home: *const c_char, cache_bytes: u64, out: *mut *mut RawStore) -> c_int;
    fn bdbshim_close(s: *mut RawStore) -> c_int;
    fn bdbshim_txn_begin(s: *mut RawStore, txn: *mut *mut RawTxn) -> c_int;
    fn bdbshim_txn_commit(txn: *mut RawTxn, sync: c_int) -> c_int;
    fn bdbshim_txn_abort(txn: *mut RawTxn) -> c_int;
    fn bdbshim_put(
        s: *mut RawStore,
        txn: *mut RawTxn,
        key: *const c_void,
        klen: usize,
        val: *const c_void,
        vlen: usize,
    ) -> c_int;
    fn bdbshim_del(s: *mut RawStore, txn: *mut RawTxn, key: *const c_void, klen: usize) -> c_int;
    fn bdbshim_get(
        s: *mut RawStore,
        key: *const c_void,
        klen: usize,
        buf: *mut c_void,
        cap: usize,
        len: *mut usize,
    ) -> c_int;
    fn bdbshim_cursor_open(s: *mut RawStore, out: *mut *mut RawCursor) -> c_int;
    fn bdbshim_cursor_close(c: *mut RawCursor);
    fn bdbshim_cursor_get(
        c: *mut RawCursor,
        op: c_int,
        seek: *const c_void,
        seek_len: usize,
        key: *mut *const c_void,
        klen: *mut usize,
        val: *mut *const c_void,
        vlen: *mut usize,
    ) -> c_int;
    fn bdbshim_compact(s: *mut RawStore) -> c_int;
    fn bdbshim_stats(s: *mut RawStore) -> *mut c_char;
    fn bdbshim_free(p: *mut c_void);
}

/// The text of a Berkeley DB (or shim) error code.
fn error_text(rc: c_int) -> String {
    // SAFETY: db_strerror returns a NUL-terminated string that stays valid (a static string,
    // or strerror's); it is copied at once.
    let text = unsafe { CStr::from_ptr(bdbshim_strerror(rc)) };
    format!("berkeleydb: {} ({rc})", text.to_string_lossy())
}

fn check(rc: c_int) -> EngineResult<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(error_text(rc))
    }
}

fn is_deadlock(rc: c_int) -> bool {
    // SAFETY: a pure function of an integer.
    unsafe { bdbshim_is_deadlock(rc) != 0 }
}

/// Berkeley DB's DBT lengths are 32-bit.
fn fits(len: usize) -> EngineResult<()> {
    if u32::try_from(len).is_ok() {
        Ok(())
    } else {
        Err(format!("berkeleydb: {len} bytes is more than a DBT holds"))
    }
}

/// An open Berkeley DB environment and database. The pointer is created in `open` and
/// closed once in `Drop`.
pub struct BerkeleyDbEngine {
    store: *mut RawStore,
}

// SAFETY: the environment and the database are opened with DB_THREAD, which makes both
// handles free-threaded: Berkeley DB serialises their use by many threads itself. The
// transaction and cursor handles, which are not free-threaded, are created, used and closed
// within one call on one thread.
unsafe impl Send for BerkeleyDbEngine {}
// SAFETY: as above.
unsafe impl Sync for BerkeleyDbEngine {}

impl BerkeleyDbEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let home = CString::new(dir.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        let mut store = std::ptr::null_mut();
        // SAFETY: `home` is NUL-terminated and outlives the call; on success the shim returns
        // a store that this engine owns.
        check(unsafe { bdbshim_open(home.as_ptr(), config.memory_budget() as u64, &mut store) })?;
        Ok(BerkeleyDbEngine { store })
    }

    /// Runs `body` in a transaction and commits it (with `DB_TXN_SYNC` if `sync`). If `body`
    /// returns an error code the transaction is aborted; after a deadlock it is run again.
    fn transaction(&self, sync: bool, body: impl Fn(*mut RawTxn) -> c_int) -> EngineResult<()> {
        loop {
            let mut txn = std::ptr::null_mut();
            // SAFETY: the store is open; `txn` receives a new transaction handle.
            check(unsafe { bdbshim_txn_begin(self.store, &mut txn) })?;
            let rc = body(txn);
            if rc == 0 {
                // SAFETY: `txn` is live; commit frees it, whether it succeeds or not.
                return check(unsafe { bdbshim_txn_commit(txn, c_int::from(sync)) });
            }
            // SAFETY: `txn` is live; abort frees it.
            unsafe { bdbshim_txn_abort(txn) };
            if !is_deadlock(rc) {
                return Err(error_text(rc));
            }
        }
    }
}

impl Drop for BerkeleyDbEngine {
    fn drop(&mut self) {
        // SAFETY: the store was opened in `open` and is closed once, here, after every
        // transaction and cursor (each confined to one call) has been closed.
        let rc = unsafe { bdbshim_close(self.store) };
        if rc != 0 {
            eprintln!("closing Berkeley DB: {}", error_text(rc));
        }
    }
}

/// A Berkeley DB cursor, closed on drop.
struct Cursor<'a> {
    raw: *mut RawCursor,
    _engine: PhantomData<&'a BerkeleyDbEngine>,
}

impl<'a> Cursor<'a> {
    fn open(engine: &'a BerkeleyDbEngine) -> EngineResult<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: the store is open (it outlives the cursor, per the lifetime).
        check(unsafe { bdbshim_cursor_open(engine.store, &mut raw) })?;
        Ok(Cursor {
            raw,
            _engine: PhantomData,
        })
    }

    /// Runs cursor operation `op` (with `seek` as the key of `OP_SET_RANGE`); returns the
    /// entry it lands on, borrowed until the cursor moves, or None past the end.
    fn step(&mut self, op: c_int, seek: &[u8]) -> EngineResult<Option<(&[u8], &[u8])>> {
        let (mut k, mut kl, mut v, mut vl) = (std::ptr::null(), 0, std::ptr::null(), 0);
        // SAFETY: the cursor is live; `seek` outlives the call (the shim copies it).
        let rc = unsafe {
            bdbshim_cursor_get(
                self.raw,
                op,
                seek.as_ptr().cast(),
                seek.len(),
                &mut k,
                &mut kl,
                &mut v,
                &mut vl,
            )
        };
        match rc {
            0 => {
                // SAFETY: on success the key and value are in the cursor's buffers, which
                // stay unchanged until the next call on this cursor; the returned borrow of
                // `self` ends before that.
                let entry = unsafe { (bytes(k.cast(), kl), bytes(v.cast(), vl)) };
                Ok(Some(entry))
            }
            SHIM_NOTFOUND => Ok(None),
            rc => Err(error_text(rc)),
        }
    }
}

impl Drop for Cursor<'_> {
    fn drop(&mut self) {
        // SAFETY: the cursor was opened in `Cursor::open` and is closed once, here.
        unsafe { bdbshim_cursor_close(self.raw) };
    }
}

/// A byte slice from a pointer and a length that may be zero (with a null pointer).
///
/// # Safety
/// Unless `len` is 0, `p` points at `len` readable bytes that live for `'a`.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: per the function's contract.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

impl Engine for BerkeleyDbEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        for (k, v) in entries {
            fits(k.len())?;
            fits(v.len())?;
        }
        self.transaction(sync, |txn| {
            for (k, v) in entries {
                // SAFETY: the store and `txn` are live; Berkeley DB copies the bytes.
                let rc = unsafe {
                    bdbshim_put(
                        self.store,
                        txn,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    )
                };
                if rc != 0 {
                    return rc;
                }
            }
            0
        })
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        for k in keys {
            fits(k.len())?;
        }
        self.transaction(sync, |txn| {
            for k in keys {
                // SAFETY: the store and `txn` are live; an absent key returns 0.
                let rc = unsafe { bdbshim_del(self.store, txn, k.as_ptr().cast(), k.len()) };
                if rc != 0 {
                    return rc;
                }
            }
            0
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        fits(key.len())?;
        value.clear();
        loop {
            let mut len = 0usize;
            // SAFETY: the store is open; Berkeley DB writes at most `capacity` bytes into the
            // vector's buffer (DB_DBT_USERMEM) and reports the value's length.
            let rc = unsafe {
                bdbshim_get(
                    self.store,
                    key.as_ptr().cast(),
                    key.len(),
                    value.as_mut_ptr().cast(),
                    value.capacity(),
                    &mut len,
                )
            };
            match rc {
                0 => {
                    // SAFETY: on success the first `len` bytes (len <= capacity) were written.
                    unsafe { value.set_len(len) };
                    return Ok(true);
                }
                SHIM_NOTFOUND => return Ok(false),
                // The value is `len` bytes: make room and read it again.
                SHIM_BUFFER_SMALL => value.reserve(len),
                rc => return Err(error_text(rc)),
            }
        }
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        let mut cursor = Cursor::open(self)?;
        let (first, then) = if reverse {
            (OP_LAST, OP_PREV)
        } else {
            (OP_FIRST, OP_NEXT)
        };
        let mut n = 0u64;
        while n < limit {
            let op = if n == 0 { first } else { then };
            match cursor.step(op, &[])? {
                Some((k, v)) => visit(k, v),
                None => break,
            }
            n += 1;
        }
        Ok(n)
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        fits(key.len())?;
        let mut cursor = Cursor::open(self)?;
        match cursor.step(OP_SET_RANGE, key)? {
            Some((k, _)) => {
                found.clear();
                found.extend_from_slice(k);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn compact(&self) -> EngineResult<()> {
        // SAFETY: the store is open; DB->compact runs its own transactions.
        check(unsafe { bdbshim_compact(self.store) })
    }

    fn stats(&self) -> Option<String> {
        // SAFETY: the store is open; the result is a malloc'ed NUL-terminated string (or
        // null), copied and freed here.
        unsafe {
            let p = bdbshim_stats(self.store);
            if p.is_null() {
                return None;
            }
            let text = CStr::from_ptr(p).to_string_lossy().into_owned();
            bdbshim_free(p.cast());
            Some(text)
        }
    }
}
