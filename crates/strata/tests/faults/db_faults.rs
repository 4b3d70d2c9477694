// SPDX-License-Identifier: MIT OR Apache-2.0
//! Fail-stop after I/O errors: a failed log write or sync, or a failed flush, is returned to
//! the caller; later writes fail with it (reads go on); nothing acknowledged is lost, and
//! reopening recovers.

use std::sync::Arc;

use strata::env::{FaultEnv, FaultKind, FaultPlan};
use strata::{Db, Env, MemEnv, Options, WriteOptions};

/// A `MemEnv` whose calls on files ending with `suffix` can be failed (see [`fill_disk`]), as a
/// full disk would fail them.
fn setup(suffix: &str) -> (FaultEnv<MemEnv>, Options) {
    let env = FaultEnv::new(MemEnv::new());
    env.limit_faults_to_suffix(Some(suffix));
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()));
    (env, options)
}

/// From the next call on, every call on the files `env` limits faults to fails with `ENOSPC`.
fn fill_disk(env: &FaultEnv<MemEnv>) {
    env.set_plan(Some(FaultPlan {
        at: env.ops(),
        kind: FaultKind::NoSpace,
        persistent: true,
    }));
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn a_failed_log_write_stops_writes_keeps_reads_and_reopen_recovers() {
    let (env, options) = setup(".log");
    let db = Db::open("/db", options.clone()).unwrap();
    for i in 0..100 {
        db.put_opt(key(i), b"before", &WriteOptions { sync: true })
            .unwrap();
    }
    fill_disk(&env);
    let err = db
        .put_opt(key(100), b"during", &WriteOptions { sync: true })
        .unwrap_err();
    assert!(err.to_string().contains("No space left"), "{err}");
    env.set_plan(None);
    // The database stays stopped: a log that failed is never appended to again.
    let again = db.put(key(101), b"after").unwrap_err();
    assert!(again.to_string().contains("No space left"), "{again}");
    // Reads go on.
    assert_eq!(db.get(key(5)).unwrap().as_deref(), Some(&b"before"[..]));
    assert_eq!(db.get(key(100)).unwrap(), None);
    drop(db);
    assert!(env.violations().is_empty(), "{:?}", env.violations());
    let db = Db::open("/db", options).unwrap();
    for i in 0..100 {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(&b"before"[..]));
    }
    assert_eq!(db.get(key(101)).unwrap(), None);
    db.put_opt(key(200), b"works again", &WriteOptions { sync: true })
        .unwrap();
}

#[test]
fn a_failed_flush_stops_writes_and_reopen_recovers_every_acknowledged_write() {
    let (env, options) = setup(".ldb");
    let db = Db::open("/db", options.clone()).unwrap();
    fill_disk(&env);
    let mut acknowledged = 0;
    let mut error = None;
    // Enough data to fill the memtable and force flushes, which fail.
    for i in 0..20_000 {
        match db.put(key(i), [b'v'; 100]) {
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
    env.set_plan(None);
    drop(db);
    assert!(env.violations().is_empty(), "{:?}", env.violations());
    let db = Db::open("/db", options).unwrap();
    let found = db.scan().unwrap().count() as u32;
    assert_eq!(
        found, acknowledged,
        "every acknowledged write is back after reopen"
    );
}

#[test]
fn close_returns_the_recorded_background_error_and_reopen_recovers() {
    let (env, options) = setup(".ldb");
    let db = Db::open("/db", options.clone()).unwrap();
    for i in 0..100 {
        db.put(key(i), b"v").unwrap();
    }
    fill_disk(&env);
    let flush = db.compact_range(None, None).unwrap_err();
    env.set_plan(None);
    let closed = db.close().unwrap_err();
    assert_eq!(closed.to_string(), flush.to_string());
    assert!(closed.to_string().contains(".ldb"), "{closed}");
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.scan().unwrap().count(), 100);
    db.close().unwrap();
}

#[test]
fn close_returns_a_failed_log_sync() {
    let (env, options) = setup(".log");
    let db = Db::open("/db", options.clone()).unwrap();
    db.put(key(1), b"v").unwrap();
    env.set_plan(Some(FaultPlan {
        at: env.ops(),
        kind: FaultKind::FailedSync,
        persistent: false,
    }));
    let e = db.close().unwrap_err();
    assert!(
        e.to_string().contains("sync") && e.to_string().contains(".log"),
        "{e}"
    );
    assert_eq!(env.injected(), 1);
    assert!(env.violations().is_empty(), "{:?}", env.violations());
}

/// Every mutating call a checkpoint makes fails in turn: each failure is an error naming a
/// path, the partial checkpoint is removed, and the source database goes on, whole.
#[test]
fn a_checkpoint_that_fails_at_any_call_leaves_nothing_and_harms_nothing() {
    let env = FaultEnv::new(MemEnv::new());
    let options = Options {
        create_if_missing: true,
        blob_threshold: Some(1024),
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()));
    let db = Db::open("/db", options.clone()).unwrap();
    env.create_dir_all(std::path::Path::new("/backups"))
        .unwrap();
    for i in 0..300 {
        db.put(
            key(i),
            vec![i as u8; if i.is_multiple_of(3) { 2_000 } else { 10 }],
        )
        .unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let mut failures = 0;
    for at in 0.. {
        let dest = std::path::PathBuf::from(format!("/backups/{at}"));
        let injected = env.injected();
        env.set_plan(Some(FaultPlan {
            at: env.ops() + at,
            kind: FaultKind::Io,
            persistent: false,
        }));
        let failed_path = Arc::new(std::sync::Mutex::new(None));
        let (planned, seen) = (env.ops() + at, failed_path.clone());
        env.set_observer(Some(Arc::new(move |op: &strata::env::FileOp<'_>| {
            if op.index == planned {
                *seen.lock().unwrap() = Some(op.path.to_path_buf());
            }
        })));
        let result = db.checkpoint(&dest);
        env.set_observer(None);
        env.set_plan(None);
        if env.injected() == injected {
            result.unwrap();
            let copy = Db::open(&dest, options.clone()).unwrap();
            assert_eq!(copy.scan().unwrap().count(), 300);
            break;
        }
        let failed_path = failed_path.lock().unwrap().take().unwrap();
        if failed_path == std::path::Path::new("/db/LOG") {
            // The info log's line about the checkpoint: its failure is not the checkpoint's.
            result.unwrap();
            continue;
        }
        let e = result.unwrap_err();
        assert!(
            e.to_string().contains("Input/output error"),
            "call {at}: {e}"
        );
        assert!(
            !env.exists(&dest),
            "call {at}: {} left behind",
            dest.display()
        );
        // The source reads as before (its writes are tried below: one now would make the
        // next checkpoint flush it, and its flush take the injected fault).
        assert_eq!(db.get(key(3)).unwrap(), Some(vec![3; 2_000]));
        failures += 1;
    }
    assert!(failures >= 8, "only {failures} calls");
    assert!(env.violations().is_empty(), "{:?}", env.violations());
    db.put("after", b"v").unwrap();
    db.close().unwrap();
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.scan().unwrap().count(), 301);
}

/// A power loss before any call of a checkpoint (and after its last) leaves either no database
/// in the checkpoint's directory (`NoDatabase`: no `CURRENT` survived) or the whole copy:
/// every file it names synced, and every entry the source held.
#[test]
fn a_power_loss_during_a_checkpoint_leaves_no_database_or_the_whole_copy() {
    use strata::env::CrashMode;
    let env = FaultEnv::new(MemEnv::new());
    let options = Options {
        create_if_missing: true,
        blob_threshold: Some(1024),
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()));
    let db = Db::open("/db", options).unwrap();
    env.create_dir_all(std::path::Path::new("/backups"))
        .unwrap();
    for i in 0..300 {
        db.put(
            key(i),
            vec![i as u8; if i.is_multiple_of(3) { 2_000 } else { 10 }],
        )
        .unwrap();
    }
    db.compact_range(None, None).unwrap();
    // Left in the memtable and the log: the checkpoint flushes them.
    for i in 300..400 {
        db.put(
            key(i),
            vec![i as u8; if i.is_multiple_of(3) { 2_000 } else { 10 }],
        )
        .unwrap();
    }
    let images = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (mem, seen) = (env.inner().clone(), images.clone());
    env.set_observer(Some(Arc::new(move |_: &strata::env::FileOp<'_>| {
        seen.lock()
            .unwrap()
            .push(mem.crash_clone(CrashMode::POWER_LOSS));
    })));
    db.checkpoint("/backups/copy").unwrap();
    env.set_observer(None);
    let mut images = std::mem::take(&mut *images.lock().unwrap());
    images.push(env.inner().crash_clone(CrashMode::POWER_LOSS));
    let (mut absent, mut whole) = (0, 0);
    for (call, image) in images.into_iter().enumerate() {
        let options = Options::default().with_env(Arc::new(image));
        match Db::open("/backups/copy", options) {
            Err(e) => {
                assert!(
                    matches!(e, strata::Error::NoDatabase { .. }),
                    "call {call}: {e}"
                );
                absent += 1;
            }
            Ok(copy) => {
                let entries: Vec<_> = copy.scan().unwrap().map(|e| e.unwrap()).collect();
                assert_eq!(entries.len(), 400, "call {call}");
                for (i, (k, v)) in entries.iter().enumerate() {
                    let i = i as u32;
                    assert_eq!(
                        (k, v.len()),
                        (&key(i), if i.is_multiple_of(3) { 2_000 } else { 10 })
                    );
                }
                whole += 1;
            }
        }
    }
    assert!(absent >= 5 && whole >= 1, "{absent} absent, {whole} whole");
}

/// The MANIFEST write that marks a database for range deletions fails (a full disk): the
/// `delete_range` that needed it returns the error and deletes nothing, the database stops
/// taking writes (fail-stop), and a reopen has every key and takes range deletions again.
#[test]
fn a_failed_range_deletion_marker_deletes_nothing_and_reopen_recovers() {
    let (env, options) = setup("never-matches");
    let db = Db::open("/db", options.clone()).unwrap();
    for i in 0..100 {
        db.put_opt(key(i), b"v", &WriteOptions { sync: true })
            .unwrap();
    }
    let manifest = env
        .children(std::path::Path::new("/db"))
        .unwrap()
        .into_iter()
        .find(|n| n.starts_with("MANIFEST-"))
        .unwrap();
    env.limit_faults_to_suffix(Some(&manifest));
    fill_disk(&env);
    let err = db.delete_range(key(10), key(20)).unwrap_err();
    assert!(err.to_string().contains("No space left"), "{err}");
    env.set_plan(None);
    assert_eq!(db.get(key(15)).unwrap().as_deref(), Some(&b"v"[..]));
    assert!(
        db.put(key(200), b"after").is_err(),
        "writes go on after a failed MANIFEST"
    );
    drop(db);
    assert!(env.violations().is_empty(), "{:?}", env.violations());
    let db = Db::open("/db", options).unwrap();
    for i in 0..100 {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(&b"v"[..]));
    }
    db.delete_range(key(10), key(20)).unwrap();
    assert_eq!(db.get(key(15)).unwrap(), None);
    assert_eq!(db.get(key(20)).unwrap().as_deref(), Some(&b"v"[..]));
}
