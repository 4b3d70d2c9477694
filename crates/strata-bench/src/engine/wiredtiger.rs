// SPDX-License-Identifier: MIT OR Apache-2.0
//! WiredTiger 3.2 (Debian's libwiredtiger) as two db_bench engines, `wiredtiger-btree` and
//! `wiredtiger-lsm`, configured after WiredTiger's own January 2013 run of the LevelDB
//! benchmark.
//!
//! WiredTiger's handles are structs of function pointers, so the calls go through a small C
//! shim, `shim/wiredtiger.c`, compiled by build.rs.
//!
//! Configuration:
//! - Connection: `create,cache_size=<memory_budget()>`, the log on
//!   (`log=(enabled=true,file_max=10MB,prealloc=false)`),
//!   `transaction_sync=(enabled=true,method=none)`,
//!   `checkpoint=(wait=60)`, and the snappy extension (`extensions=[...]`) when Debian ships
//!   it.
//! - Durability: every commit writes its log records to the operating system without fsync
//!   (`method=none`); a `sync` write commits, then calls `WT_SESSION::log_flush("sync=on")`,
//!   which fsyncs the log through that commit. (In 3.2, `commit_transaction("sync=on")`
//!   inherits the connection's method, which `none` makes a write without fsync.)
//! - Log files of 10 MB, not pre-allocated (WiredTiger's default is 100 MB, pre-allocated two
//!   or three at a time, which would make up to 300 MB of empty log the bulk of every
//!   disk-usage figure); a checkpoint every 60 seconds, so that log files can be archived.
//! - Table `table:bench`: `key_format=u,value_format=u` (raw bytes),
//!   `internal_page_max=16kb,leaf_page_max=16kb`, `block_compressor=snappy` when
//!   `config.compression`.
//! - LSM: `type=lsm`, `lsm=(chunk_size=20MB)` as in 2013, reduced to fit the cache when the
//!   budget is small (WiredTiger refuses to open an LSM tree unless the cache holds three
//!   chunks plus three merges' pages: 61 MB for 20 MB chunks). Bloom filters follow
//!   `config.bloom_bits` (`bloom=false` without, else `bloom_bit_count` and
//!   `bloom_hash_count = bits * 0.69`, LevelDB's rule).
//! - One transaction per batch; a conflict (`WT_ROLLBACK`) rolls back and retries.
//! - Sessions are not thread-safe: a pool of sessions, each with a cursor on the table,
//!   behind a Mutex. Scans use the session's cursor; each seek opens a new cursor.
//! - compact(): `WT_SESSION::compact("table:bench")` (a B-tree rewrites its file to release
//!   free space; an LSM tree merges its chunks).
//! - `verify_checksums` does not apply (WiredTiger's checksums are a table setting, left at
//!   its default, `checksum=uncompressed`).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::{Engine, EngineConfig, EngineResult};

#[repr(C)]
struct RawConn([u8; 0]);
#[repr(C)]
struct RawSession([u8; 0]);
#[repr(C)]
struct RawCursor([u8; 0]);

extern "C" {
    fn wtshim_strerror(s: *mut RawSession, rc: c_int) -> *const c_char;
    fn wtshim_notfound() -> c_int;
    fn wtshim_rollback() -> c_int;
    fn wtshim_open(home: *const c_char, config: *const c_char, out: *mut *mut RawConn) -> c_int;
    fn wtshim_close(conn: *mut RawConn) -> c_int;
    fn wtshim_create(conn: *mut RawConn, uri: *const c_char, config: *const c_char) -> c_int;
    fn wtshim_session_open(
        conn: *mut RawConn,
        uri: *const c_char,
        out: *mut *mut RawSession,
    ) -> c_int;
    fn wtshim_session_close(s: *mut RawSession) -> c_int;
    fn wtshim_begin(s: *mut RawSession) -> c_int;
    fn wtshim_commit(s: *mut RawSession) -> c_int;
    fn wtshim_log_sync(s: *mut RawSession) -> c_int;
    fn wtshim_rollback_txn(s: *mut RawSession) -> c_int;
    fn wtshim_put(
        s: *mut RawSession,
        key: *const c_void,
        klen: usize,
        val: *const c_void,
        vlen: usize,
    ) -> c_int;
    fn wtshim_remove(s: *mut RawSession, key: *const c_void, klen: usize) -> c_int;
    fn wtshim_get(
        s: *mut RawSession,
        key: *const c_void,
        klen: usize,
        val: *mut *const c_void,
        vlen: *mut usize,
    ) -> c_int;
    fn wtshim_reset(s: *mut RawSession) -> c_int;
    fn wtshim_step(
        s: *mut RawSession,
        reverse: c_int,
        key: *mut *const c_void,
        klen: *mut usize,
        val: *mut *const c_void,
        vlen: *mut usize,
    ) -> c_int;
    fn wtshim_seek(
        s: *mut RawSession,
        key: *const c_void,
        klen: usize,
        cursor: *mut *mut RawCursor,
        found: *mut *const c_void,
        flen: *mut usize,
    ) -> c_int;
    fn wtshim_cursor_close(c: *mut RawCursor) -> c_int;
    fn wtshim_compact(conn: *mut RawConn, uri: *const c_char) -> c_int;
}

/// The table every engine instance uses.
const URI: &CStr = c"table:bench";
/// WiredTiger's LSM chunk size in its 2013 run.
const LSM_CHUNK_2013: usize = 20 << 20;
/// The leaf page size of the table (16 KB) and WiredTiger's default `lsm.merge_max` (15),
/// which set the cache an LSM tree needs besides its chunks.
const LEAF_PAGE_MAX: usize = 16 << 10;
const LSM_MERGE_MAX: usize = 15;
/// WiredTiger's smallest LSM chunk.
const LSM_CHUNK_MIN: usize = 512 << 10;

/// The text of a WiredTiger error code; `session` may be null.
fn error_text(session: *mut RawSession, rc: c_int) -> String {
    // SAFETY: WT_SESSION::strerror (thread-safe) or wiredtiger_strerror returns a
    // NUL-terminated string that stays valid until the next such call on the session (which
    // this thread holds); it is copied at once.
    let text = unsafe { CStr::from_ptr(wtshim_strerror(session, rc)) };
    format!("wiredtiger: {} ({rc})", text.to_string_lossy())
}

fn check(session: *mut RawSession, rc: c_int) -> EngineResult<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(error_text(session, rc))
    }
}

fn not_found() -> c_int {
    // SAFETY: returns a constant.
    unsafe { wtshim_notfound() }
}

fn rollback() -> c_int {
    // SAFETY: returns a constant.
    unsafe { wtshim_rollback() }
}

/// A byte slice from a pointer and a length that may be zero.
///
/// # Safety
/// Unless `len` is 0, `p` points at `len` readable bytes that live for `'a`.
unsafe fn bytes<'a>(p: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: per the function's contract.
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    }
}

/// WiredTiger's snappy compressor, as Debian's libwiredtiger0 ships it.
fn snappy_extension() -> Option<PathBuf> {
    let multiarch = format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH);
    [
        multiarch.as_str(),
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ]
    .iter()
    .map(|dir| Path::new(dir).join("libwiredtiger_snappy.so"))
    .find(|p| p.is_file())
}

/// The LSM chunk size: 20 MB, or less when the cache cannot hold three chunks plus the pages
/// of three concurrent merges (WiredTiger's open check), rounded down to whole megabytes.
fn lsm_chunk_size(cache: usize) -> usize {
    let room = cache.saturating_sub(3 * LSM_MERGE_MAX * LEAF_PAGE_MAX) / 3;
    let chunk = room.min(LSM_CHUNK_2013);
    if chunk >= 1 << 20 {
        chunk & !((1 << 20) - 1)
    } else {
        chunk.max(LSM_CHUNK_MIN)
    }
}

/// One WiredTiger session with its cursor on the table, used by one thread at a time.
struct Session(*mut RawSession);

// SAFETY: a WiredTiger session (and its cursors) may move between threads as long as no two
// threads use it at once (WiredTiger's "Multithreading" guide); the pool hands each session
// to one caller at a time.
unsafe impl Send for Session {}

/// An open WiredTiger connection and table. The connection is created in `open` and closed
/// once in `Drop`, after the pooled sessions.
pub struct WiredTigerEngine {
    conn: *mut RawConn,
    sessions: Mutex<Vec<Session>>,
}

// SAFETY: "A WT_CONNECTION handle may be shared between threads" (wiredtiger.h); the engine
// only opens sessions on it, concurrently. Sessions, which are not shared between threads, are
// behind a Mutex, and each is used only by the one thread that took it from the pool.
unsafe impl Send for WiredTigerEngine {}
// SAFETY: as above.
unsafe impl Sync for WiredTigerEngine {}

impl WiredTigerEngine {
    pub fn open(dir: &Path, config: &EngineConfig, lsm: bool) -> EngineResult<Self> {
        let budget = config.memory_budget();
        let snappy = snappy_extension();
        let mut conn_config = format!(
            "create,cache_size={budget},log=(enabled=true,file_max=10MB,prealloc=false),\
             transaction_sync=(enabled=true,method=none),checkpoint=(wait=60)"
        );
        if let Some(path) = &snappy {
            conn_config.push_str(&format!(",extensions=[\"{}\"]", path.display()));
        }
        let mut table =
            String::from("key_format=u,value_format=u,internal_page_max=16kb,leaf_page_max=16kb");
        if config.compression {
            if snappy.is_some() {
                table.push_str(",block_compressor=snappy");
            } else {
                eprintln!("wiredtiger: libwiredtiger_snappy.so not found; running uncompressed");
            }
        }
        if lsm {
            table.push_str(&format!(
                ",type=lsm,lsm=(chunk_size={}",
                lsm_chunk_size(budget)
            ));
            match config.bloom_bits {
                Some(bits) => {
                    let hashes = ((bits as f64 * 0.69) as usize).clamp(2, 100);
                    table.push_str(&format!(
                        ",bloom=true,bloom_bit_count={},bloom_hash_count={hashes})",
                        bits.clamp(2, 1000)
                    ));
                }
                None => table.push_str(",bloom=false)"),
            }
        }

        let home = CString::new(dir.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        let conn_config = CString::new(conn_config).map_err(|e| e.to_string())?;
        let table = CString::new(table).map_err(|e| e.to_string())?;
        let mut conn = std::ptr::null_mut();
        // SAFETY: the strings are NUL-terminated and outlive the call; on success `conn` is a
        // new connection that this engine owns.
        check(std::ptr::null_mut(), unsafe {
            wtshim_open(home.as_ptr(), conn_config.as_ptr(), &mut conn)
        })?;
        let engine = WiredTigerEngine {
            conn,
            sessions: Mutex::new(Vec::new()),
        };
        // SAFETY: the connection is open; the strings outlive the call.
        check(std::ptr::null_mut(), unsafe {
            wtshim_create(engine.conn, URI.as_ptr(), table.as_ptr())
        })?;
        Ok(engine)
    }

    /// Runs `body` on a session taken from the pool (or a new one), then returns it.
    fn with_session<T>(
        &self,
        body: impl FnOnce(*mut RawSession) -> EngineResult<T>,
    ) -> EngineResult<T> {
        let pooled = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let session = match pooled {
            Some(s) => s,
            None => {
                let mut raw = std::ptr::null_mut();
                // SAFETY: the connection is open; the URI is NUL-terminated.
                check(std::ptr::null_mut(), unsafe {
                    wtshim_session_open(self.conn, URI.as_ptr(), &mut raw)
                })?;
                Session(raw)
            }
        };
        let out = body(session.0);
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(session);
        out
    }

    /// Applies `op` to each item in one transaction, committing it (and, with `sync`,
    /// flushing the log to stable storage). A conflict rolls back and runs it again.
    fn transaction<I: Copy>(
        &self,
        items: &[I],
        sync: bool,
        op: impl Fn(*mut RawSession, I) -> c_int,
    ) -> EngineResult<()> {
        self.with_session(|s| loop {
            // SAFETY: this thread holds the session; no transaction is running on it.
            check(s, unsafe { wtshim_begin(s) })?;
            let mut rc = 0;
            for &item in items {
                rc = op(s, item);
                if rc != 0 {
                    break;
                }
            }
            if rc == 0 {
                // SAFETY: the session's transaction is running; a failed commit has rolled
                // it back.
                rc = unsafe { wtshim_commit(s) };
                if rc == 0 {
                    if sync {
                        // SAFETY: this thread holds the session.
                        check(s, unsafe { wtshim_log_sync(s) })?;
                    }
                    return Ok(());
                }
            } else {
                // SAFETY: the session's transaction is running.
                unsafe { wtshim_rollback_txn(s) };
            }
            if rc != rollback() {
                return Err(error_text(s, rc));
            }
            std::thread::yield_now();
        })
    }
}

impl Drop for WiredTigerEngine {
    fn drop(&mut self) {
        let sessions = std::mem::take(
            self.sessions
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for s in sessions {
            // SAFETY: every session is back in the pool (no call is running: `drop` has the
            // engine exclusively) and is closed once.
            unsafe { wtshim_session_close(s.0) };
        }
        // SAFETY: the connection was opened in `open` and is closed once, here.
        let rc = unsafe { wtshim_close(self.conn) };
        if rc != 0 {
            eprintln!(
                "closing WiredTiger: {}",
                error_text(std::ptr::null_mut(), rc)
            );
        }
    }
}

impl Engine for WiredTigerEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        self.transaction(entries, sync, |s, (k, v)| {
            // SAFETY: this thread holds the session; WiredTiger copies the bytes.
            unsafe { wtshim_put(s, k.as_ptr().cast(), k.len(), v.as_ptr().cast(), v.len()) }
        })
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        self.transaction(keys, sync, |s, k| {
            // SAFETY: this thread holds the session; an absent key returns 0.
            unsafe { wtshim_remove(s, k.as_ptr().cast(), k.len()) }
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        self.with_session(|s| loop {
            let (mut p, mut len) = (std::ptr::null(), 0usize);
            // SAFETY: this thread holds the session; the value is copied before the cursor
            // is reset.
            let rc = unsafe {
                let rc = wtshim_get(s, key.as_ptr().cast(), key.len(), &mut p, &mut len);
                if rc == 0 {
                    value.clear();
                    value.extend_from_slice(bytes(p, len));
                }
                wtshim_reset(s);
                rc
            };
            match rc {
                0 => return Ok(true),
                rc if rc == not_found() => return Ok(false),
                rc if rc == rollback() => std::thread::yield_now(),
                rc => return Err(error_text(s, rc)),
            }
        })
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        self.with_session(|s| {
            let mut n = 0u64;
            let mut rc = 0;
            // SAFETY: this thread holds the session. The cursor starts reset (every call
            // resets it when done), so the first step lands on the first (last) entry; each
            // entry is visited before the cursor moves again.
            unsafe {
                while n < limit {
                    let (mut k, mut kl, mut v, mut vl) = (std::ptr::null(), 0, std::ptr::null(), 0);
                    rc = wtshim_step(s, c_int::from(reverse), &mut k, &mut kl, &mut v, &mut vl);
                    if rc != 0 {
                        break;
                    }
                    visit(bytes(k, kl), bytes(v, vl));
                    n += 1;
                }
                wtshim_reset(s);
            }
            if rc != 0 && rc != not_found() {
                return Err(error_text(s, rc));
            }
            Ok(n)
        })
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        self.with_session(|s| {
            let (mut cursor, mut p, mut len) = (std::ptr::null_mut(), std::ptr::null(), 0usize);
            // SAFETY: this thread holds the session; on success the key is copied before the
            // new cursor is closed.
            unsafe {
                let rc = wtshim_seek(
                    s,
                    key.as_ptr().cast(),
                    key.len(),
                    &mut cursor,
                    &mut p,
                    &mut len,
                );
                if rc == not_found() {
                    return Ok(false);
                }
                check(s, rc)?;
                found.clear();
                found.extend_from_slice(bytes(p, len));
                check(s, wtshim_cursor_close(cursor))?;
            }
            Ok(true)
        })
    }

    fn compact(&self) -> EngineResult<()> {
        // SAFETY: the connection is open; the shim uses a session of its own.
        check(std::ptr::null_mut(), unsafe {
            wtshim_compact(self.conn, URI.as_ptr())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsm_chunks_fit_the_cache() {
        // The 2013 chunk size once the cache holds three chunks and the merges' pages.
        assert_eq!(lsm_chunk_size(128 << 20), LSM_CHUNK_2013);
        assert_eq!(
            lsm_chunk_size(3 * LSM_CHUNK_2013 + 3 * LSM_MERGE_MAX * LEAF_PAGE_MAX),
            LSM_CHUNK_2013
        );
        // The default budget (4 MB + 4 MB) gets 2 MB chunks.
        assert_eq!(lsm_chunk_size(8 << 20), 2 << 20);
        for cache in [3 << 20, 8 << 20, 32 << 20, 61 << 20] {
            let chunk = lsm_chunk_size(cache);
            assert!(
                3 * chunk + 3 * LSM_MERGE_MAX * LEAF_PAGE_MAX <= cache,
                "{cache}"
            );
        }
        // Never below WiredTiger's minimum.
        assert_eq!(lsm_chunk_size(1 << 20), LSM_CHUNK_MIN);
    }
}
