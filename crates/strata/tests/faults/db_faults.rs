// SPDX-License-Identifier: MIT OR Apache-2.0
//! Fail-stop after I/O errors: a failed log write or sync, or a failed flush, is returned to
//! the caller; later writes fail with it (reads go on); nothing acknowledged is lost, and
//! reopening recovers.

use std::sync::Arc;

use strata::env::{FaultEnv, FaultKind, FaultPlan};
use strata::{Db, MemEnv, Options, WriteOptions};

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
