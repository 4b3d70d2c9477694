// SPDX-License-Identifier: MIT OR Apache-2.0
//! LMDB 0.9.24 (Debian's liblmdb) as a db_bench engine, through its C API (`lmdb.h`).
//!
//! Configured as Symas's 2012 microbenchmarks configured it for asynchronous writes:
//!
//! - `MDB_NOSYNC | MDB_WRITEMAP`: commits write straight into a shared, writable memory map
//!   and never flush; the OS writes the dirty pages back when it chooses. A `sync` write
//!   commits, then calls `mdb_env_sync(env, 1)` (an `msync(MS_SYNC)` of the used part of the
//!   map), so that it is durable when `write` returns.
//! - Except for values of [`PWRITE_FROM_VALUE_SIZE`] bytes or more: then `MDB_NOSYNC` alone,
//!   so that a commit `pwrite`s its dirty pages. With `MDB_WRITEMAP`, copying a value into
//!   pages of the sparse map that were never written faults each one in, and the kernel
//!   zero-fills the hole (ext4 `filemap_fault` → readahead → `zero_user_segments`) before
//!   LMDB overwrites it; how many pages a fault zero-fills varies with the readahead state,
//!   so 100 KB writes took 37 µs in one run and 60–140 µs in the next, in either benchmark
//!   order (`perf record` of a slow and a fast `fill100K`: kernel `memset` 36% of the
//!   samples against 15%). With `pwrite` they take 28–31 µs, run after run. For small
//!   values `MDB_WRITEMAP` is the faster mode (fillrandom 1.7 against 4.4 µs) and the
//!   crossover is between 4 KiB (3.8 against 5.4 µs) and 16 KiB (9.5 against 8.9 µs).
//! - Not `MDB_NOMETASYNC`: it only skips the meta-page flush of a commit, and `MDB_NOSYNC`
//!   already skips every flush, so it would change nothing.
//! - Not `MDB_NORDAHEAD`: it only `madvise(MADV_RANDOM)`s the map, which helps when the
//!   database is larger than RAM; the suite's databases fit in RAM, and readahead helps the
//!   sequential reads.
//! - Not `MDB_NOTLS`: every read transaction begins and ends inside one call on one thread,
//!   so LMDB's default (a reader slot kept per thread, found again without taking the
//!   reader-table mutex) is both correct and the faster path.
//! - A map of 4 GiB (`MAP_SIZE`), far more than 1,000,000 entries of 100-byte values (about
//!   0.2 GiB with page slack) or 1,000 values of 100,000 bytes (about 0.1 GiB in overflow
//!   pages). With `MDB_WRITEMAP`, LMDB `ftruncate`s `data.mdb` to the map size, so `ls -l`
//!   shows 4 GiB from the start; the file is sparse, and only the pages written are
//!   allocated (what `du`, and db_bench's block-based disk usage, report).
//! - The single unnamed database, default flags (no `MDB_DUPSORT`), default 126 reader slots
//!   and the default maximum key size of 511 bytes (the suite's keys are 16 bytes).
//! - One handle per directory per process, as LMDB requires: opening a directory that is
//!   already open in this process fails, so the old engine must be dropped before a reopen.
//!
//! Every get, scan and seek runs in its own read-only transaction (a seek and a scan also
//! open their own cursor); every write or delete batch is one write transaction. LMDB has no
//! compression, no checksums and no cache of its own (it reads through the OS page cache),
//! so `compression`, `verify_checksums`, `bloom_bits` and the cache sizes do not apply, and
//! `compact()` is a no-op.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Engine, EngineConfig, EngineResult};

#[repr(C)]
struct RawEnv([u8; 0]);
#[repr(C)]
struct RawTxn([u8; 0]);
#[repr(C)]
struct RawCursor([u8; 0]);

type Dbi = c_uint;

/// `MDB_val`.
#[repr(C)]
struct Val {
    mv_size: usize,
    mv_data: *mut c_void,
}

impl Val {
    fn of(bytes: &[u8]) -> Val {
        Val {
            mv_size: bytes.len(),
            mv_data: bytes.as_ptr().cast_mut().cast(),
        }
    }

    fn empty() -> Val {
        Val {
            mv_size: 0,
            mv_data: std::ptr::null_mut(),
        }
    }

    /// The bytes this value points at.
    ///
    /// # Safety
    /// The value was filled in by LMDB inside a transaction that is still open.
    unsafe fn bytes<'a>(&self) -> &'a [u8] {
        if self.mv_size == 0 {
            return &[];
        }
        // SAFETY: per the function's contract, LMDB's pointer and length describe live memory.
        unsafe { std::slice::from_raw_parts(self.mv_data.cast::<u8>(), self.mv_size) }
    }
}

/// `MDB_stat`.
#[repr(C)]
#[derive(Default)]
struct Stat {
    ms_psize: c_uint,
    ms_depth: c_uint,
    ms_branch_pages: usize,
    ms_leaf_pages: usize,
    ms_overflow_pages: usize,
    ms_entries: usize,
}

/// `MDB_envinfo`.
#[repr(C)]
struct EnvInfo {
    me_mapaddr: *mut c_void,
    me_mapsize: usize,
    me_last_pgno: usize,
    me_last_txnid: usize,
    me_maxreaders: c_uint,
    me_numreaders: c_uint,
}

const MDB_NOSYNC: c_uint = 0x10000;
const MDB_RDONLY: c_uint = 0x20000;
const MDB_WRITEMAP: c_uint = 0x80000;

/// Databases created for values of this size or more are opened without `MDB_WRITEMAP` (see
/// the module's documentation).
pub const PWRITE_FROM_VALUE_SIZE: usize = 16 << 10;
const MDB_SUCCESS: c_int = 0;
const MDB_NOTFOUND: c_int = -30798;

// `MDB_cursor_op` values.
const MDB_FIRST: c_int = 0;
const MDB_LAST: c_int = 6;
const MDB_NEXT: c_int = 8;
const MDB_PREV: c_int = 12;
const MDB_SET_RANGE: c_int = 17;

/// The memory map, and so the largest the database can grow: 4 GiB.
const MAP_SIZE: usize = 4 << 30;

#[link(name = "lmdb")]
extern "C" {
    fn mdb_strerror(err: c_int) -> *const c_char;
    fn mdb_env_create(env: *mut *mut RawEnv) -> c_int;
    fn mdb_env_set_mapsize(env: *mut RawEnv, size: usize) -> c_int;
    fn mdb_env_open(env: *mut RawEnv, path: *const c_char, flags: c_uint, mode: u32) -> c_int;
    fn mdb_env_close(env: *mut RawEnv);
    fn mdb_env_sync(env: *mut RawEnv, force: c_int) -> c_int;
    fn mdb_env_stat(env: *mut RawEnv, stat: *mut Stat) -> c_int;
    fn mdb_env_info(env: *mut RawEnv, info: *mut EnvInfo) -> c_int;
    fn mdb_txn_begin(
        env: *mut RawEnv,
        parent: *mut RawTxn,
        flags: c_uint,
        txn: *mut *mut RawTxn,
    ) -> c_int;
    fn mdb_txn_commit(txn: *mut RawTxn) -> c_int;
    fn mdb_txn_abort(txn: *mut RawTxn);
    fn mdb_dbi_open(txn: *mut RawTxn, name: *const c_char, flags: c_uint, dbi: *mut Dbi) -> c_int;
    fn mdb_get(txn: *mut RawTxn, dbi: Dbi, key: *mut Val, data: *mut Val) -> c_int;
    fn mdb_put(txn: *mut RawTxn, dbi: Dbi, key: *mut Val, data: *mut Val, flags: c_uint) -> c_int;
    fn mdb_del(txn: *mut RawTxn, dbi: Dbi, key: *mut Val, data: *mut Val) -> c_int;
    fn mdb_cursor_open(txn: *mut RawTxn, dbi: Dbi, cursor: *mut *mut RawCursor) -> c_int;
    fn mdb_cursor_close(cursor: *mut RawCursor);
    fn mdb_cursor_get(cursor: *mut RawCursor, key: *mut Val, data: *mut Val, op: c_int) -> c_int;
}

/// An LMDB return code as a result.
fn check(rc: c_int, what: &str) -> EngineResult<()> {
    if rc == MDB_SUCCESS {
        return Ok(());
    }
    // SAFETY: mdb_strerror returns a static (or strerror's) NUL-terminated string.
    let msg = unsafe { CStr::from_ptr(mdb_strerror(rc)) }.to_string_lossy();
    Err(format!("lmdb: {what}: {msg} ({rc})"))
}

/// The directories of the environments open in this process.
static OPEN_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A directory's entry in [`OPEN_DIRS`], removed when dropped.
///
/// LMDB forbids opening one environment twice in a process: closing either handle drops the
/// process's `fcntl` locks on `lock.mdb`, and the close, believing itself the last user,
/// destroys the shared mutexes that the other handle still uses. A second `open` of the same
/// directory therefore fails instead.
struct OpenDir(PathBuf);

impl OpenDir {
    fn claim(dir: &Path) -> EngineResult<OpenDir> {
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("lmdb: {}: {e}", dir.display()))?;
        let mut open = OPEN_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        if open.contains(&dir) {
            return Err(format!(
                "lmdb: {} is already open in this process (LMDB allows one handle per process)",
                dir.display()
            ));
        }
        open.push(dir.clone());
        Ok(OpenDir(dir))
    }
}

impl Drop for OpenDir {
    fn drop(&mut self) {
        let mut open = OPEN_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|d| *d != self.0);
    }
}

/// An open LMDB environment and its unnamed database. The environment is created in `open`
/// and closed once in `Drop`; every transaction and cursor lives inside a single call.
pub struct LmdbEngine {
    env: *mut RawEnv,
    dbi: Dbi,
    /// Released after `Drop::drop` has closed the environment (fields drop after it).
    _claim: OpenDir,
}

impl LmdbEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let path = CString::new(dir.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        let claim = OpenDir::claim(dir)?;
        let mut env = std::ptr::null_mut();
        // SAFETY: creates the environment handle; on failure nothing was allocated.
        check(unsafe { mdb_env_create(&mut env) }, "mdb_env_create")?;
        // From here on `engine` owns `env` and closes it in `Drop`, also on failure.
        let mut engine = LmdbEngine {
            env,
            dbi: 0,
            _claim: claim,
        };
        let flags = if config.value_size >= PWRITE_FROM_VALUE_SIZE {
            MDB_NOSYNC
        } else {
            MDB_NOSYNC | MDB_WRITEMAP
        };
        // SAFETY: `env` is a fresh, unopened environment; the path is NUL-terminated and names
        // an existing directory, in which LMDB creates `data.mdb` and `lock.mdb`.
        unsafe {
            check(mdb_env_set_mapsize(env, MAP_SIZE), "mdb_env_set_mapsize")?;
            check(
                mdb_env_open(env, path.as_ptr(), flags, 0o644),
                "mdb_env_open",
            )?;
        }
        // The unnamed database's handle, opened once in a committed transaction, is valid in
        // every later transaction of this environment.
        let mut txn = std::ptr::null_mut();
        // SAFETY: `env` is open; the transaction is committed or aborted before returning.
        unsafe {
            check(
                mdb_txn_begin(env, std::ptr::null_mut(), 0, &mut txn),
                "mdb_txn_begin",
            )?;
            let rc = mdb_dbi_open(txn, std::ptr::null(), 0, &mut engine.dbi);
            if rc != MDB_SUCCESS {
                mdb_txn_abort(txn);
            }
            check(rc, "mdb_dbi_open")?;
            check(mdb_txn_commit(txn), "mdb_txn_commit")?;
        }
        Ok(engine)
    }

    /// Runs `body` in one write transaction: commits if it succeeds, aborts otherwise; then,
    /// with `sync`, flushes the map to disk.
    fn write_txn(
        &self,
        sync: bool,
        body: impl FnOnce(*mut RawTxn) -> EngineResult<()>,
    ) -> EngineResult<()> {
        let mut txn = std::ptr::null_mut();
        // SAFETY: `env` is open; the write transaction is used on this thread only and is
        // committed or aborted before returning (LMDB serializes writers itself).
        unsafe {
            check(
                mdb_txn_begin(self.env, std::ptr::null_mut(), 0, &mut txn),
                "mdb_txn_begin",
            )?;
            if let Err(e) = body(txn) {
                mdb_txn_abort(txn);
                return Err(e);
            }
            check(mdb_txn_commit(txn), "mdb_txn_commit")?;
            if sync {
                check(mdb_env_sync(self.env, 1), "mdb_env_sync")?;
            }
        }
        Ok(())
    }

    /// Runs `body` in a new read-only transaction, which it aborts afterwards.
    fn read_txn<T>(&self, body: impl FnOnce(*mut RawTxn) -> EngineResult<T>) -> EngineResult<T> {
        let mut txn = std::ptr::null_mut();
        // SAFETY: `env` is open; the read transaction is used on this thread only (the thread
        // has no other transaction open, as every call ends its own) and aborted here.
        unsafe {
            check(
                mdb_txn_begin(self.env, std::ptr::null_mut(), MDB_RDONLY, &mut txn),
                "mdb_txn_begin",
            )?;
            let out = body(txn);
            mdb_txn_abort(txn);
            out
        }
    }

    /// Runs `body` on a new cursor in a new read-only transaction.
    fn with_cursor<T>(
        &self,
        body: impl FnOnce(*mut RawCursor) -> EngineResult<T>,
    ) -> EngineResult<T> {
        self.read_txn(|txn| {
            let mut cursor = std::ptr::null_mut();
            // SAFETY: `txn` is live; the cursor is closed before the transaction ends.
            unsafe {
                check(
                    mdb_cursor_open(txn, self.dbi, &mut cursor),
                    "mdb_cursor_open",
                )?;
                let out = body(cursor);
                mdb_cursor_close(cursor);
                out
            }
        })
    }
}

impl Drop for LmdbEngine {
    fn drop(&mut self) {
        // SAFETY: no transaction or cursor outlives a call, so none is open; the environment
        // is closed once. (With MDB_NOSYNC the close does not flush: the pages are in the
        // OS's page cache, as for every engine's asynchronous writes.)
        unsafe { mdb_env_close(self.env) };
    }
}

// SAFETY: an LMDB environment may be used by many threads at once; LMDB's rules are that a
// transaction and its cursors are used by one thread, and that a thread has one transaction
// at a time. Here every transaction and cursor is created, used and ended within one call on
// the calling thread, and the `dbi` handle is read-only after `open`.
unsafe impl Send for LmdbEngine {}
// SAFETY: as above.
unsafe impl Sync for LmdbEngine {}

/// The cursor's entry after moving it with `op`, or `None` at the end.
///
/// # Safety
/// `cursor` is a live cursor; the slices live until it moves or its transaction ends.
unsafe fn cursor_get<'a>(
    cursor: *mut RawCursor,
    key: &mut Val,
    op: c_int,
) -> EngineResult<Option<(&'a [u8], &'a [u8])>> {
    let mut data = Val::empty();
    // SAFETY: per the function's contract.
    unsafe {
        match mdb_cursor_get(cursor, key, &mut data, op) {
            MDB_NOTFOUND => Ok(None),
            rc => {
                check(rc, "mdb_cursor_get")?;
                Ok(Some((key.bytes(), data.bytes())))
            }
        }
    }
}

impl Engine for LmdbEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        self.write_txn(sync, |txn| {
            for (k, v) in entries {
                let (mut key, mut data) = (Val::of(k), Val::of(v));
                // SAFETY: `txn` is a live write transaction; LMDB copies the bytes.
                let rc = unsafe { mdb_put(txn, self.dbi, &mut key, &mut data, 0) };
                check(rc, "mdb_put")?;
            }
            Ok(())
        })
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        self.write_txn(sync, |txn| {
            for k in keys {
                if k.is_empty() {
                    continue; // LMDB cannot store an empty key, so it is absent.
                }
                let mut key = Val::of(k);
                // SAFETY: `txn` is a live write transaction.
                match unsafe { mdb_del(txn, self.dbi, &mut key, std::ptr::null_mut()) } {
                    MDB_NOTFOUND => {}
                    rc => check(rc, "mdb_del")?,
                }
            }
            Ok(())
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        if key.is_empty() {
            return Ok(false); // LMDB cannot store an empty key.
        }
        self.read_txn(|txn| {
            let (mut k, mut data) = (Val::of(key), Val::empty());
            // SAFETY: `txn` is live; the value points into the map and is copied before the
            // transaction ends.
            unsafe {
                match mdb_get(txn, self.dbi, &mut k, &mut data) {
                    MDB_NOTFOUND => Ok(false),
                    rc => {
                        check(rc, "mdb_get")?;
                        value.clear();
                        value.extend_from_slice(data.bytes());
                        Ok(true)
                    }
                }
            }
        })
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        if limit == 0 {
            return Ok(0);
        }
        self.with_cursor(|cursor| {
            let (start, step) = if reverse {
                (MDB_LAST, MDB_PREV)
            } else {
                (MDB_FIRST, MDB_NEXT)
            };
            let mut key = Val::empty();
            let mut n = 0u64;
            let mut op = start;
            // SAFETY: `cursor` is live; each entry is visited before the cursor moves.
            while let Some((k, v)) = unsafe { cursor_get(cursor, &mut key, op)? } {
                visit(k, v);
                n += 1;
                if n >= limit {
                    break;
                }
                op = step;
            }
            Ok(n)
        })
    }

    fn seek_scan(
        &self,
        key: &[u8],
        nexts: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        self.with_cursor(|cursor| {
            // LMDB rejects an empty key for MDB_SET_RANGE; every key is >= the empty key.
            let (mut k, mut op) = if key.is_empty() {
                (Val::empty(), MDB_FIRST)
            } else {
                (Val::of(key), MDB_SET_RANGE)
            };
            let mut n = 0u64;
            // SAFETY: `cursor` is live; each entry is visited before the cursor moves.
            while let Some((at, v)) = unsafe { cursor_get(cursor, &mut k, op)? } {
                visit(at, v);
                n += 1;
                if n > nexts {
                    break;
                }
                op = MDB_NEXT;
            }
            Ok(n)
        })
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        self.with_cursor(|cursor| {
            // LMDB rejects an empty key for MDB_SET_RANGE; every key is >= the empty key.
            let (mut k, op) = if key.is_empty() {
                (Val::empty(), MDB_FIRST)
            } else {
                (Val::of(key), MDB_SET_RANGE)
            };
            // SAFETY: `cursor` is live; the key is copied before it moves.
            match unsafe { cursor_get(cursor, &mut k, op)? } {
                Some((at, _)) => {
                    found.clear();
                    found.extend_from_slice(at);
                    Ok(true)
                }
                None => Ok(false),
            }
        })
    }

    fn compact(&self) -> EngineResult<()> {
        // LMDB is a copy-on-write B+tree that reuses freed pages; it has no compaction.
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        let mut stat = Stat::default();
        let mut info = EnvInfo {
            me_mapaddr: std::ptr::null_mut(),
            me_mapsize: 0,
            me_last_pgno: 0,
            me_last_txnid: 0,
            me_maxreaders: 0,
            me_numreaders: 0,
        };
        // SAFETY: `env` is open; both calls fill in caller-owned structs.
        let ok = unsafe {
            mdb_env_stat(self.env, &mut stat) == MDB_SUCCESS
                && mdb_env_info(self.env, &mut info) == MDB_SUCCESS
        };
        ok.then(|| {
            format!(
                "page size {}, depth {}, branch pages {}, leaf pages {}, overflow pages {}, \
                 entries {}\nmap size {}, last page used {}, last transaction {}, \
                 reader slots used {} of {}\n",
                stat.ms_psize,
                stat.ms_depth,
                stat.ms_branch_pages,
                stat.ms_leaf_pages,
                stat.ms_overflow_pages,
                stat.ms_entries,
                info.me_mapsize,
                info.me_last_pgno,
                info.me_last_txnid,
                info.me_numreaders,
                info.me_maxreaders,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The length of `data.mdb` after a database for `value_size` values is opened and
    /// written once: with `MDB_WRITEMAP`, LMDB extends the file to the whole map.
    fn data_file_len(value_size: usize) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig {
            value_size,
            ..EngineConfig::default()
        };
        let engine = LmdbEngine::open(dir.path(), &config).unwrap();
        let value = vec![7u8; value_size];
        engine.write(&[(b"key", &value)], false).unwrap();
        let mut found = Vec::new();
        assert!(engine.get(b"key", &mut found).unwrap());
        assert_eq!(found, value);
        drop(engine);
        std::fs::metadata(dir.path().join("data.mdb"))
            .unwrap()
            .len()
    }

    #[test]
    fn small_values_use_the_writable_map_and_large_ones_pwrite() {
        assert_eq!(data_file_len(100), MAP_SIZE as u64);
        assert!(data_file_len(PWRITE_FROM_VALUE_SIZE) < MAP_SIZE as u64);
    }
}
