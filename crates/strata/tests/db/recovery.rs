// SPDX-License-Identifier: MIT OR Apache-2.0
//! Recovery after crashes, on the in-memory env.
//!
//! A workload writes numbered batches (each sets two keys to the same number, so a half-applied
//! batch shows). Crash images are taken at many moments while it runs, with flushes and
//! compactions going on in the background: `CrashMode::POWER_LOSS` keeps only what was synced
//! (data and directory entries), `PROCESS_KILL` keeps everything handed to the OS. Each image is
//! reopened and must hold exactly a prefix of the acknowledged batches, including every batch
//! acknowledged as synced before the crash (power loss) or every batch acknowledged at all
//! (process kill).

use std::sync::Arc;

use strata::{CrashMode, Db, MemEnv, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";

fn options(env: &MemEnv) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 1 << 20,
        block_size: 1024,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()))
}

fn batch(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    let v = format!("{i:010}-{}", "v".repeat((i % 97) as usize));
    b.put(format!("a{:05}", i % 5000).as_bytes(), v.as_bytes());
    b.put(format!("b{:05}", i % 5000).as_bytes(), v.as_bytes());
    if i.is_multiple_of(11) {
        b.delete(format!("a{:05}", (i * 7) % 5000).as_bytes());
        b.delete(format!("b{:05}", (i * 7) % 5000).as_bytes());
    }
    b
}

/// The expected contents after batches `0..n`.
fn model(n: u64) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = std::collections::BTreeMap::new();
    for i in 0..n {
        for op in batch(i).iter() {
            match op.kind {
                strata::key::ValueKind::Deletion => m.remove(op.key),
                _ => m.insert(op.key.to_vec(), op.value.to_vec()),
            };
        }
    }
    m
}

/// Finds which prefix of the batches a recovered database holds; fails if it holds none.
fn recovered_prefix(db: &Db, upper: u64) -> u64 {
    let contents: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
        db.scan().unwrap().map(Result::unwrap).collect();
    // The newest number any key holds bounds the prefix from below.
    let newest = contents
        .values()
        .filter_map(|v| std::str::from_utf8(&v[..10]).ok()?.parse::<u64>().ok())
        .max()
        .map_or(0, |n| n + 1);
    for n in newest..=upper {
        if model(n) == contents {
            return n;
        }
    }
    panic!("the recovered database is not a prefix of the acknowledged batches (newest {newest}, upper {upper})");
}

fn run_crash_workload(sync_every: u64, mode: CrashMode, images_wanted: usize) -> usize {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    let total = 6000u64;
    let every = total / images_wanted as u64;
    let mut images = Vec::new();
    let mut last_synced = 0u64;
    for i in 0..total {
        let sync = sync_every > 0 && i % sync_every == 0;
        db.write_opt(batch(i), &WriteOptions { sync }).unwrap();
        if sync {
            last_synced = i + 1;
        }
        if i % every == every / 2 {
            images.push((env.crash_clone(mode), last_synced, i + 1));
        }
        if i == total / 2 {
            db.compact_range(None, None).unwrap();
        }
    }
    drop(db);
    let mut checked = 0;
    for (image, synced, acknowledged) in images {
        let db =
            Db::open(DIR, options(&image)).unwrap_or_else(|e| panic!("reopen after crash: {e}"));
        let n = recovered_prefix(&db, acknowledged);
        match mode {
            CrashMode::PROCESS_KILL => assert_eq!(n, acknowledged, "a process kill lost writes"),
            _ => assert!(n >= synced, "a synced write was lost: {n} < {synced}"),
        }
        // The recovered database keeps working.
        db.put_opt(b"after", b"crash", &WriteOptions { sync: true })
            .unwrap();
        drop(db);
        let db = Db::open(DIR, options(&image)).unwrap();
        assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"crash"[..]));
        checked += 1;
    }
    checked
}

#[test]
fn power_loss_keeps_every_synced_batch_and_a_prefix() {
    assert_eq!(run_crash_workload(10, CrashMode::POWER_LOSS, 40), 40);
}

#[test]
fn power_loss_without_any_sync_still_leaves_a_prefix() {
    assert_eq!(run_crash_workload(0, CrashMode::POWER_LOSS, 20), 20);
}

#[test]
fn process_kill_loses_nothing_acknowledged() {
    assert_eq!(run_crash_workload(0, CrashMode::PROCESS_KILL, 20), 20);
}

#[test]
fn unsynced_directory_changes_are_undone_but_data_survives() {
    let mode = CrashMode {
        drop_unsynced_data: false,
        undo_unsynced_dir_ops: true,
    };
    assert_eq!(run_crash_workload(25, mode, 20), 20);
}
