// SPDX-License-Identifier: MIT OR Apache-2.0
//! Kyoto Cabinet 1.2.79 (Debian's libkyotocabinet) as a db_bench engine: its TreeDB, a B+ tree
//! in a file, through the C API of `kclangc.h`, configured as in Google's 2011 LevelDB
//! benchmark report:
//!
//! - One TreeDB file, `kyoto.kct`, opened with `#opts=sl` (TSMALL: 32-bit offsets in the
//!   underlying hash file; TLINEAR: linked-list buckets) and `#pccap=` the engine's
//!   `memory_budget()` (the page cache). Other tuning parameters keep their defaults.
//! - With `compression`, `opts` gains `c` (TCOMPRESS: every B+ tree page is compressed) and
//!   `#zcomp=lzo`, the LZO compressor the report used; Debian's build links liblzo2 (and
//!   zlib and liblzma). Without it, pages are stored raw. The compressor is not recorded in
//!   the file, so every open passes the same parameters.
//! - TreeDB has no atomic multi-key batch. A write or delete of more than one key is one
//!   Kyoto transaction (`kcdbbegintran(db, 0)` ... `kcdbendtran(db, 1)`, aborted on error),
//!   so that the batch survives a crash whole or not at all. Kyoto's transactions are
//!   database-wide, not isolated: a concurrent reader can see part of a batch. A single
//!   key is a plain `kcdbset` / `kcdbremove`, which Kyoto performs atomically.
//! - A `sync` write is followed by `kcdbsync(db, 1, NULL, NULL)`: the B+ tree's cached pages
//!   are written out and the file is fsynced ("physical synchronization with the device").
//! - Scans and seeks use a new cursor (`kcdbcursor`) per call: `kccurjump` / `kccurjumpback`
//!   and `kccurget` / `kccurstepback` for scans, `kccurjumpkey` (the first key at or after
//!   the probe) for seeks. Keys are ordered by TreeDB's default lexical comparator
//!   (memcmp, then length), the byte order of every other engine.
//! - `compact()` is a no-op: the C API has no defragmentation call (there is no
//!   `kcdbdefrag` in 1.2.79's `kclangc.h`, and `PolyDB` has no `defrag` method), and
//!   `TreeDB::defrag` is an inline C++ method that only a C++ shim could reach.
//! - `stats()` is `kcdbstatus`. No checksums: Kyoto has none, so `verify_checksums` is
//!   ignored; there are no filters, so `bloom_bits` is too.
//! - Every buffer Kyoto returns is released with `kcfree`.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{Engine, EngineConfig, EngineResult};

#[repr(C)]
struct RawDb([u8; 0]);
#[repr(C)]
struct RawCursor([u8; 0]);

// Open modes and error codes, from kclangc.h.
const KCOWRITER: u32 = 1 << 1;
const KCOCREATE: u32 = 1 << 2;
const KCENOREC: i32 = 7;

type FileProc = Option<
    unsafe extern "C" fn(path: *const c_char, count: i64, size: i64, opq: *mut c_void) -> i32,
>;

#[link(name = "kyotocabinet")]
extern "C" {
    fn kcfree(ptr: *mut c_void);
    fn kcdbnew() -> *mut RawDb;
    fn kcdbdel(db: *mut RawDb);
    fn kcdbopen(db: *mut RawDb, path: *const c_char, mode: u32) -> i32;
    fn kcdbclose(db: *mut RawDb) -> i32;
    fn kcdbecode(db: *mut RawDb) -> i32;
    fn kcdbemsg(db: *mut RawDb) -> *const c_char;
    fn kcdbset(db: *mut RawDb, k: *const c_char, kl: usize, v: *const c_char, vl: usize) -> i32;
    fn kcdbremove(db: *mut RawDb, k: *const c_char, kl: usize) -> i32;
    fn kcdbget(db: *mut RawDb, k: *const c_char, kl: usize, vl: *mut usize) -> *mut c_char;
    fn kcdbsync(db: *mut RawDb, hard: i32, proc_: FileProc, opq: *mut c_void) -> i32;
    fn kcdbbegintran(db: *mut RawDb, hard: i32) -> i32;
    fn kcdbendtran(db: *mut RawDb, commit: i32) -> i32;
    fn kcdbstatus(db: *mut RawDb) -> *mut c_char;
    fn kcdbcursor(db: *mut RawDb) -> *mut RawCursor;
    fn kccurdel(cur: *mut RawCursor);
    fn kccurjump(cur: *mut RawCursor) -> i32;
    fn kccurjumpkey(cur: *mut RawCursor, k: *const c_char, kl: usize) -> i32;
    fn kccurjumpback(cur: *mut RawCursor) -> i32;
    fn kccurstepback(cur: *mut RawCursor) -> i32;
    fn kccurget(
        cur: *mut RawCursor,
        kl: *mut usize,
        vp: *mut *const c_char,
        vl: *mut usize,
        step: i32,
    ) -> *mut c_char;
    fn kccurgetkey(cur: *mut RawCursor, kl: *mut usize, step: i32) -> *mut c_char;
    fn kccurecode(cur: *mut RawCursor) -> i32;
    fn kccuremsg(cur: *mut RawCursor) -> *const c_char;
}

/// An open TreeDB. `db` is created and opened in `open` and closed and deleted once in `Drop`.
pub struct KyotoEngine {
    db: *mut RawDb,
}

// SAFETY: Kyoto Cabinet's database objects are documented as thread-safe ("each method of
// the database classes is thread-safe"), and TreeDB guards its tree and page cache with its
// own reader-writer lock and per-slot mutexes (visible in kcplantdb.h); the error status
// that `kcdbecode`/`kcdbemsg` read is kept per thread. Cursors are never shared: each call
// makes its own and deletes it before returning. The pointer is only closed in `Drop`.
unsafe impl Send for KyotoEngine {}
// SAFETY: as above.
unsafe impl Sync for KyotoEngine {}

/// A borrowed C string from Kyoto, as text.
///
/// # Safety
/// `p` is null or a NUL-terminated string that stays valid during the call.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::from("unknown error");
    }
    // SAFETY: per the function's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl KyotoEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> EngineResult<Self> {
        let file = dir.join("kyoto.kct");
        let file = file.as_os_str().as_bytes();
        if file.contains(&b'#') {
            return Err(format!(
                "kyotocabinet: the path {} contains '#', which starts Kyoto's tuning parameters",
                String::from_utf8_lossy(file)
            ));
        }
        let (opts, zcomp) = if config.compression {
            ("slc", "#zcomp=lzo")
        } else {
            ("sl", "")
        };
        let mut path = file.to_vec();
        path.extend_from_slice(
            format!("#opts={opts}#pccap={}{zcomp}", config.memory_budget()).as_bytes(),
        );
        let path = CString::new(path).map_err(|e| e.to_string())?;
        // SAFETY: `kcdbnew` returns a fresh object, owned by the engine built here (whose
        // `Drop` deletes it) or deleted here if opening fails; `path` is NUL-terminated.
        unsafe {
            let db = kcdbnew();
            if db.is_null() {
                return Err("kyotocabinet: kcdbnew failed".into());
            }
            if kcdbopen(db, path.as_ptr(), KCOWRITER | KCOCREATE) == 0 {
                let msg = format!(
                    "kyotocabinet: opening {}: {}",
                    path.to_string_lossy(),
                    text(kcdbemsg(db))
                );
                kcdbdel(db);
                return Err(msg);
            }
            Ok(KyotoEngine { db })
        }
    }

    /// The error of this thread's last failed call on the database.
    fn error(&self, what: &str) -> String {
        // SAFETY: the database is live; the message belongs to Kyoto (this thread's last
        // error) and is copied at once.
        let msg = unsafe { text(kcdbemsg(self.db)) };
        format!("kyotocabinet: {what}: {msg}")
    }

    /// Applies `each` to every item, in one transaction if there is more than one, then
    /// syncs to the device if `sync`.
    fn update<T>(
        &self,
        items: &[T],
        sync: bool,
        each: impl Fn(&T) -> EngineResult<()>,
    ) -> EngineResult<()> {
        let transaction = items.len() > 1;
        // SAFETY: the database is live.
        if transaction && unsafe { kcdbbegintran(self.db, 0) } == 0 {
            return Err(self.error("begin transaction"));
        }
        let applied = items.iter().try_for_each(each);
        if transaction {
            let commit = i32::from(applied.is_ok());
            // SAFETY: the database is live, and this thread began the transaction above.
            let ended = unsafe { kcdbendtran(self.db, commit) } != 0;
            applied?;
            if !ended {
                return Err(self.error("commit"));
            }
        } else {
            applied?;
        }
        // SAFETY: the database is live; no postprocessor.
        if sync && unsafe { kcdbsync(self.db, 1, None, std::ptr::null_mut()) } == 0 {
            return Err(self.error("sync"));
        }
        Ok(())
    }

    /// Runs `body` on a new cursor, deleted afterwards.
    fn with_cursor<T>(
        &self,
        body: impl FnOnce(*mut RawCursor) -> EngineResult<T>,
    ) -> EngineResult<T> {
        // SAFETY: the database is live; the cursor is deleted before the database closes.
        let cur = unsafe { kcdbcursor(self.db) };
        if cur.is_null() {
            return Err(self.error("cursor"));
        }
        let out = body(cur);
        // SAFETY: `cur` came from `kcdbcursor` and is deleted once.
        unsafe { kccurdel(cur) };
        out
    }
}

/// Ok(false) if the cursor's last failure was "no record" (the end of the data), else the
/// error.
///
/// # Safety
/// `cur` is a live cursor.
unsafe fn cursor_end(cur: *mut RawCursor, what: &str) -> EngineResult<bool> {
    // SAFETY: per the function's contract.
    unsafe {
        if kccurecode(cur) == KCENOREC {
            Ok(false)
        } else {
            Err(format!("kyotocabinet: {what}: {}", text(kccuremsg(cur))))
        }
    }
}

/// Reads the cursor's record, moving it forward after if `step`, and passes key and value to
/// `visit`. Ok(false) at the end of the data.
///
/// # Safety
/// `cur` is a live cursor.
unsafe fn cursor_visit(
    cur: *mut RawCursor,
    step: bool,
    visit: &mut dyn FnMut(&[u8], &[u8]),
) -> EngineResult<bool> {
    let (mut kl, mut vl) = (0usize, 0usize);
    let mut vp: *const c_char = std::ptr::null();
    // SAFETY: `cur` is live (the contract). `kccurget` returns one allocation holding the key
    // (`kl` bytes at the returned pointer) and the value (`vl` bytes at `vp`), used here and
    // then released with `kcfree`.
    unsafe {
        let kp = kccurget(cur, &mut kl, &mut vp, &mut vl, i32::from(step));
        if kp.is_null() {
            return cursor_end(cur, "cursor get");
        }
        visit(
            std::slice::from_raw_parts(kp.cast::<u8>(), kl),
            std::slice::from_raw_parts(vp.cast::<u8>(), vl),
        );
        kcfree(kp.cast());
    }
    Ok(true)
}

impl Drop for KyotoEngine {
    fn drop(&mut self) {
        // SAFETY: the database was opened in `open`; it is closed (writing out its page cache)
        // and deleted once. A failed close cannot be reported from `drop`.
        unsafe {
            kcdbclose(self.db);
            kcdbdel(self.db);
        }
    }
}

impl Engine for KyotoEngine {
    fn write(&self, entries: &[(&[u8], &[u8])], sync: bool) -> EngineResult<()> {
        self.update(entries, sync, |(k, v)| {
            // SAFETY: the database is live; Kyoto copies key and value.
            let ok = unsafe {
                kcdbset(
                    self.db,
                    k.as_ptr().cast(),
                    k.len(),
                    v.as_ptr().cast(),
                    v.len(),
                )
            };
            if ok == 0 {
                return Err(self.error("set"));
            }
            Ok(())
        })
    }

    fn delete(&self, keys: &[&[u8]], sync: bool) -> EngineResult<()> {
        self.update(keys, sync, |k| {
            // SAFETY: the database is live; the error code is this thread's.
            unsafe {
                if kcdbremove(self.db, k.as_ptr().cast(), k.len()) == 0
                    && kcdbecode(self.db) != KCENOREC
                {
                    return Err(self.error("remove"));
                }
            }
            Ok(())
        })
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> EngineResult<bool> {
        let mut len = 0usize;
        // SAFETY: the database is live; the returned buffer is copied, then freed with kcfree.
        unsafe {
            let p = kcdbget(self.db, key.as_ptr().cast(), key.len(), &mut len);
            if p.is_null() {
                if kcdbecode(self.db) == KCENOREC {
                    return Ok(false);
                }
                return Err(self.error("get"));
            }
            value.clear();
            value.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
            kcfree(p.cast());
        }
        Ok(true)
    }

    fn scan(
        &self,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<u64> {
        self.with_cursor(|cur| {
            let mut n = 0u64;
            if limit == 0 {
                return Ok(0);
            }
            // SAFETY: `cur` is live for this closure.
            unsafe {
                let positioned = if reverse {
                    kccurjumpback(cur)
                } else {
                    kccurjump(cur)
                };
                if positioned == 0 {
                    cursor_end(cur, "cursor jump")?;
                    return Ok(0);
                }
                // Forward, `kccurget` steps after reading; backward, `kccurstepback` does.
                while n < limit && cursor_visit(cur, !reverse, visit)? {
                    n += 1;
                    if reverse && n < limit && kccurstepback(cur) == 0 {
                        cursor_end(cur, "cursor step back")?;
                        break;
                    }
                }
            }
            Ok(n)
        })
    }

    fn seek(&self, key: &[u8], found: &mut Vec<u8>) -> EngineResult<bool> {
        self.with_cursor(|cur| {
            let mut len = 0usize;
            // SAFETY: `cur` is live for this closure; `kccurjumpkey` copies the probe, and the
            // key buffer `kccurgetkey` returns is copied, then freed with kcfree.
            unsafe {
                if kccurjumpkey(cur, key.as_ptr().cast(), key.len()) == 0 {
                    return cursor_end(cur, "cursor jump");
                }
                let p = kccurgetkey(cur, &mut len, 0);
                if p.is_null() {
                    return cursor_end(cur, "cursor get key");
                }
                found.clear();
                found.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
                kcfree(p.cast());
            }
            Ok(true)
        })
    }

    fn compact(&self) -> EngineResult<()> {
        // No defragmentation in Kyoto's C API: see the module's documentation.
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        // SAFETY: the database is live; the returned string is copied, then freed with kcfree.
        unsafe {
            let p = kcdbstatus(self.db);
            if p.is_null() {
                return None;
            }
            let s = text(p);
            kcfree(p.cast());
            Some(s)
        }
    }
}
