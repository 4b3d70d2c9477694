// SPDX-License-Identifier: MIT OR Apache-2.0
//! Fail-stop after I/O errors: a failed log write or sync, or a failed flush, is returned to
//! the caller; later writes fail with it (reads go on); nothing acknowledged is lost, and
//! reopening recovers.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strata::env::{FileLock, RandomAccessFile, SequentialFile, WritableFile};
use strata::{Db, Env, Error, MemEnv, Options, ReadOptions, Result, WriteOptions};

/// A `MemEnv` whose appends and syncs to files matching a suffix fail while `failing` is set,
/// as a full disk would make them.
#[derive(Debug, Clone)]
struct FaultyEnv {
    inner: MemEnv,
    suffix: &'static str,
    failing: Arc<AtomicBool>,
}

struct FaultyFile {
    inner: Box<dyn WritableFile>,
    path: std::path::PathBuf,
    failing: Option<Arc<AtomicBool>>,
}

impl FaultyFile {
    fn check(&self) -> Result<()> {
        match &self.failing {
            Some(f) if f.load(Ordering::SeqCst) => Err(Error::io(
                &self.path,
                "write",
                std::io::Error::from_raw_os_error(28), // ENOSPC
            )),
            _ => Ok(()),
        }
    }
}

impl WritableFile for FaultyFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.check()?;
        self.inner.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.check()?;
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.check()?;
        self.inner.sync()
    }
}

impl FaultyEnv {
    fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        let matches = path.to_string_lossy().ends_with(self.suffix);
        Box::new(FaultyFile {
            inner,
            path: path.to_path_buf(),
            failing: matches.then(|| self.failing.clone()),
        })
    }
}

impl Env for FaultyEnv {
    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        self.inner.new_sequential_file(path)
    }
    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.new_random_access_file(path)
    }
    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.new_writable_file(path)?))
    }
    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.new_appendable_file(path)?))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn children(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.children(dir)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        self.inner.remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }
    fn remove_dir(&self, path: &Path) -> Result<()> {
        self.inner.remove_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock_file(path)
    }
}

fn setup(suffix: &'static str) -> (FaultyEnv, Options) {
    let env = FaultyEnv {
        inner: MemEnv::new(),
        suffix,
        failing: Arc::new(AtomicBool::new(false)),
    };
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()));
    (env, options)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn a_failed_log_write_stops_writes_keeps_reads_and_reopen_recovers() {
    let (env, options) = setup(".log");
    let db = Db::open("/db", options.clone()).unwrap();
    for i in 0..100 {
        db.put(&WriteOptions { sync: true }, &key(i), b"before")
            .unwrap();
    }
    env.failing.store(true, Ordering::SeqCst);
    let err = db
        .put(&WriteOptions { sync: true }, &key(100), b"during")
        .unwrap_err();
    assert!(err.to_string().contains("No space left"), "{err}");
    env.failing.store(false, Ordering::SeqCst);
    // The database stays stopped: a log that failed is never appended to again.
    let again = db
        .put(&WriteOptions::default(), &key(101), b"after")
        .unwrap_err();
    assert!(again.to_string().contains("No space left"), "{again}");
    // Reads go on.
    assert_eq!(
        db.get(&ReadOptions::default(), &key(5)).unwrap().as_deref(),
        Some(&b"before"[..])
    );
    assert_eq!(db.get(&ReadOptions::default(), &key(100)).unwrap(), None);
    drop(db);
    let db = Db::open("/db", options).unwrap();
    for i in 0..100 {
        assert_eq!(
            db.get(&ReadOptions::default(), &key(i)).unwrap().as_deref(),
            Some(&b"before"[..])
        );
    }
    assert_eq!(db.get(&ReadOptions::default(), &key(101)).unwrap(), None);
    db.put(&WriteOptions { sync: true }, &key(200), b"works again")
        .unwrap();
}

#[test]
fn a_failed_flush_stops_writes_and_reopen_recovers_every_acknowledged_write() {
    let (env, options) = setup(".ldb");
    let db = Db::open("/db", options.clone()).unwrap();
    env.failing.store(true, Ordering::SeqCst);
    let mut acknowledged = 0;
    let mut error = None;
    // Enough data to fill the memtable and force flushes, which fail.
    for i in 0..20_000 {
        match db.put(&WriteOptions::default(), &key(i), &[b'v'; 100]) {
            Ok(()) => acknowledged = i + 1,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let error = error.expect("a write fails once the flush has failed");
    assert!(error.to_string().contains("No space left"), "{error}");
    assert!(acknowledged > 0);
    env.failing.store(false, Ordering::SeqCst);
    drop(db);
    let db = Db::open("/db", options).unwrap();
    let found = db.scan(&ReadOptions::default()).unwrap().count() as u32;
    assert_eq!(
        found, acknowledged,
        "every acknowledged write is back after reopen"
    );
}
