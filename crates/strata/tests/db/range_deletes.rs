// SPDX-License-Identifier: MIT OR Apache-2.0
//! `delete_range`: what it hides and from whom, across flushes, compactions, reopens and
//! recovery from the log; compaction dropping the entries it deletes and then the deletion;
//! the marker that keeps LevelDB out; and the errors.
//! (The model test in `model.rs` mixes range deletions with everything else.)

use std::sync::Arc;

use strata::{Db, Error, MemEnv, Options, ReadOptions, WriteBatch};

fn options(env: &MemEnv) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()))
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

/// The keys a full scan returns, as numbers.
fn keys(db: &Db) -> Vec<u32> {
    db.scan()
        .unwrap()
        .keys()
        .map(|k| String::from_utf8(k.unwrap()).unwrap()[3..].parse().unwrap())
        .collect()
}

fn fill(db: &Db, n: u32) {
    for i in 0..n {
        db.put(key(i), format!("value{i}")).unwrap();
    }
}

/// The range deletions the database still holds (in the version or a memtable).
fn live_range_deletions(db: &Db) -> usize {
    db.property("strata.range-deletions")
        .unwrap()
        .lines()
        .count()
}

#[test]
fn reads_and_cursors_stop_seeing_the_range_and_only_it() {
    let env = MemEnv::new();
    let db = Db::open("/db", options(&env)).unwrap();
    fill(&db, 100);
    db.delete_range(key(10), key(20)).unwrap();
    let want: Vec<u32> = (0..10).chain(20..100).collect();
    assert_eq!(keys(&db), want);
    assert_eq!(db.get(key(10)).unwrap(), None, "the start is deleted");
    assert_eq!(db.get(key(19)).unwrap(), None);
    assert!(db.get(key(20)).unwrap().is_some(), "the end is not");
    assert!(db.get(key(9)).unwrap().is_some());
    // Backward, and a cursor seeking into the range lands past it.
    let backward: Vec<u32> = {
        let mut v = keys(&db);
        v.reverse();
        v
    };
    let rev: Vec<u32> = db
        .scan()
        .unwrap()
        .keys()
        .rev()
        .map(|k| String::from_utf8(k.unwrap()).unwrap()[3..].parse().unwrap())
        .collect();
    assert_eq!(rev, backward);
    let mut it = db.iter().unwrap();
    it.seek(key(15).as_bytes());
    assert_eq!(it.key(), key(20).as_bytes());
    it.prev();
    assert_eq!(it.key(), key(9).as_bytes());
    // A key put after the deletion is there.
    db.put(key(15), "again").unwrap();
    assert_eq!(db.get(key(15)).unwrap().as_deref(), Some(&b"again"[..]));
    assert_eq!(db.range(key(10)..key(20)).unwrap().count(), 1);
}

#[test]
fn a_snapshot_taken_before_still_sees_the_range() {
    let env = MemEnv::new();
    let db = Db::open("/db", options(&env)).unwrap();
    fill(&db, 50);
    let before = db.snapshot();
    db.delete_range(key(0), key(50)).unwrap();
    let at = ReadOptions {
        snapshot: Some(&before),
        ..ReadOptions::default()
    };
    assert_eq!(db.scan_opt(&at).unwrap().count(), 50);
    assert_eq!(
        db.get_opt(key(7), &at).unwrap().as_deref(),
        Some(&b"value7"[..])
    );
    assert_eq!(db.scan().unwrap().count(), 0);
    // Compaction keeps what the snapshot reads, and the deletion with it.
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.scan_opt(&at).unwrap().count(), 50);
    assert_eq!(db.scan().unwrap().count(), 0);
    assert_eq!(live_range_deletions(&db), 1);
    drop(before);
    // Released: the next compaction drops the entries, then the deletion.
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.scan().unwrap().count(), 0);
    assert_eq!(
        live_range_deletions(&db),
        0,
        "the deletion outlived what it deleted"
    );
    assert_eq!(
        db.property("leveldb.sstables")
            .unwrap()
            .matches("key")
            .count(),
        0,
        "a table still holds deleted keys"
    );
}

#[test]
fn the_deletion_survives_flush_compaction_reopen_and_log_replay() {
    let env = MemEnv::new();
    {
        let db = Db::open("/db", options(&env)).unwrap();
        fill(&db, 3000); // several memtables: tables in level 0 and below
        db.delete_range(key(1000), key(2000)).unwrap();
        fill_range(&db, 1500..1510, "new");
        // Not flushed: the deletion is only in the log when the handle goes.
    }
    let want: Vec<u32> = (0..1000).chain(1500..1510).chain(2000..3000).collect();
    let db = Db::open("/db", options(&env)).unwrap();
    assert_eq!(keys(&db), want, "after replaying the log");
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(keys(&db), want, "after compaction");
    assert_eq!(live_range_deletions(&db), 0);
    drop(db);
    let db = Db::open("/db", options(&env)).unwrap();
    assert_eq!(keys(&db), want, "after reopening");
    assert_eq!(db.get(key(1505)).unwrap().as_deref(), Some(&b"new"[..]));
}

fn fill_range(db: &Db, range: std::ops::Range<u32>, value: &str) {
    for i in range {
        db.put(key(i), value).unwrap();
    }
}

#[test]
fn a_flushed_deletion_is_kept_in_the_manifest_until_compaction_drops_it() {
    let env = MemEnv::new();
    let want: Vec<u32> = (0..100).chain(400..500).collect();
    {
        let db = Db::open("/db", options(&env)).unwrap();
        fill(&db, 500);
        db.compact_range(None, None).unwrap();
        // A snapshot keeps compaction from applying the deletion.
        let snapshot = db.snapshot();
        db.delete_range(key(100), key(400)).unwrap();
        // A flush alone (compact_range of an empty range) moves it into the version.
        db.compact_range(Some(b"zzz0"), Some(b"zzz1")).unwrap();
        db.wait_for_compactions().unwrap();
        let listed = db.property("strata.range-deletions").unwrap();
        assert!(
            listed.lines().count() == 1 && !listed.contains("pending"),
            "{listed}"
        );
        assert_eq!(keys(&db), want);
        drop(snapshot);
    }
    let db = Db::open("/db", options(&env)).unwrap();
    assert_eq!(keys(&db), want, "the MANIFEST kept the deletion");
    // With no snapshot, the background rewrites the tables the deletion covers, then drops it.
    db.wait_for_compactions().unwrap();
    assert_eq!(live_range_deletions(&db), 0);
    assert_eq!(keys(&db), want);
    drop(db);
    let db = Db::open("/db", options(&env)).unwrap();
    assert_eq!(keys(&db), want);
}

#[test]
fn a_batch_applies_its_range_deletion_in_order_with_its_other_writes() {
    let env = MemEnv::new();
    let db = Db::open("/db", options(&env)).unwrap();
    fill(&db, 10);
    let mut batch = WriteBatch::new();
    batch.put(key(2), "before the deletion");
    batch.delete_range(key(0), key(5));
    batch.put(key(3), "after the deletion");
    db.write(batch).unwrap();
    assert_eq!(keys(&db), [3, 5, 6, 7, 8, 9]);
    assert_eq!(
        db.get(key(3)).unwrap().as_deref(),
        Some(&b"after the deletion"[..])
    );
}

#[test]
fn bad_ranges_are_refused_and_empty_ones_delete_nothing() {
    let env = MemEnv::new();
    let db = Db::open("/db", options(&env)).unwrap();
    fill(&db, 10);
    match db.delete_range(key(5), key(2)) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("before its start"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    db.delete_range(key(5), key(5)).unwrap();
    assert_eq!(keys(&db).len(), 10);
    let huge = vec![b'k'; strata::MAX_KEY_SIZE + 1];
    assert!(matches!(
        db.delete_range(b"a", &huge),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn only_a_database_that_took_a_range_deletion_is_marked() {
    let env = MemEnv::new();
    let manifest_text = |env: &MemEnv| -> String {
        let names = strata::Env::children(env, std::path::Path::new("/db")).unwrap();
        let manifest = names.iter().find(|n| n.starts_with("MANIFEST-")).unwrap();
        let bytes = strata::env::read_file_to_vec(env, &std::path::Path::new("/db").join(manifest))
            .unwrap();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let db = Db::open("/db", options(&env)).unwrap();
    fill(&db, 10);
    drop(db);
    // Recovery's flush of the log, then a compaction: still LevelDB's format.
    let db = Db::open("/db", options(&env)).unwrap();
    db.compact_range(None, None).unwrap();
    assert!(!manifest_text(&env).contains("range deletions"));
    db.delete_range(key(0), key(1)).unwrap();
    // The marker is in the MANIFEST before the deletion is anywhere else.
    assert!(manifest_text(&env).contains(strata::version::RANGE_DELETION_COMPARATOR_SUFFIX));
    drop(db);
    // strata reads its own marker.
    let db = Db::open("/db", options(&env)).unwrap();
    assert_eq!(keys(&db), (1..10).collect::<Vec<_>>());
}

#[test]
fn many_overlapping_deletions_and_writes_agree_with_a_model_across_compactions() {
    let env = MemEnv::new();
    let db = Db::open("/db", options(&env)).unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut seed = 7u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for round in 0..40u32 {
        for _ in 0..200 {
            let i = next(2000) as u32;
            db.put(key(i), format!("r{round}")).unwrap();
            model.insert(i, format!("r{round}"));
        }
        let (a, b) = (next(2000) as u32, next(2000) as u32);
        let (a, b) = (a.min(b), a.max(b));
        db.delete_range(key(a), key(b)).unwrap();
        model.retain(|k, _| !(a..b).contains(k));
        if round % 7 == 3 {
            db.compact_range(None, None).unwrap();
        }
    }
    db.wait_for_compactions().unwrap();
    let got: Vec<(u32, String)> = db
        .scan()
        .unwrap()
        .map(|e| {
            let (k, v) = e.unwrap();
            (
                String::from_utf8(k).unwrap()[3..].parse().unwrap(),
                String::from_utf8(v).unwrap(),
            )
        })
        .collect();
    let want: Vec<(u32, String)> = model.into_iter().collect();
    assert_eq!(got, want);
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(live_range_deletions(&db), 0);
}

/// Repair rebuilds the MANIFEST from the tables and logs: the range deletions of the old
/// MANIFEST and of the logs must come along, or the keys they deleted would come back.
#[test]
fn repair_keeps_range_deletions_from_the_manifest_and_the_logs() {
    for in_manifest in [true, false] {
        let env = MemEnv::new();
        {
            let db = Db::open("/db", options(&env)).unwrap();
            fill(&db, 300);
            db.compact_range(None, None).unwrap();
            // A snapshot keeps compaction from applying it: the tables still hold the keys.
            let snapshot = db.snapshot();
            db.delete_range(key(50), key(250)).unwrap();
            if in_manifest {
                db.compact_range(Some(b"zzz0"), Some(b"zzz1")).unwrap();
            }
            // Closed with the snapshot held: no compaction can have applied it.
            drop(db);
            drop(snapshot);
        }
        strata::Env::remove_file(&env, std::path::Path::new("/db/CURRENT")).unwrap();
        let report = strata::repair("/db", &options(&env)).unwrap();
        assert!(report.tables > 0);
        let db = Db::open("/db", options(&env)).unwrap();
        let want: Vec<u32> = (0..50).chain(250..300).collect();
        assert_eq!(keys(&db), want, "in the MANIFEST: {in_manifest}");
    }
}

/// A checkpoint holds the range deletions, those still in the memtable and those in the
/// version, and is marked as its source is.
#[test]
fn a_checkpoint_keeps_range_deletions() {
    let env = MemEnv::new();
    let db = Db::open("/db", options(&env)).unwrap();
    fill(&db, 300);
    db.compact_range(None, None).unwrap();
    let snapshot = db.snapshot(); // keeps the first deletion from being applied
    db.delete_range(key(10), key(20)).unwrap();
    db.compact_range(Some(b"zzz0"), Some(b"zzz1")).unwrap(); // into the version
    db.delete_range(key(100), key(200)).unwrap(); // still in the memtable
    db.checkpoint("/copy").unwrap();
    drop(snapshot);
    let copy = Db::open("/copy", options(&env)).unwrap();
    let want: Vec<u32> = (0..10).chain(20..100).chain(200..300).collect();
    assert_eq!(keys(&copy), want);
    copy.compact_range(None, None).unwrap();
    copy.wait_for_compactions().unwrap();
    assert_eq!(keys(&copy), want);
    assert_eq!(live_range_deletions(&copy), 0);
}

/// Range deletions are refused in a database with key-value separation, and nothing of the
/// batch is applied (see `Db::delete_range`).
#[test]
fn range_deletions_are_refused_with_blob_files() {
    let env = MemEnv::new();
    let blobs = Options {
        blob_threshold: Some(100),
        ..options(&env)
    };
    let db = Db::open("/db", blobs).unwrap();
    fill(&db, 10);
    let mut batch = WriteBatch::new();
    batch.put("new", "v");
    batch.delete_range(key(0), key(5));
    match db.write(batch) {
        Err(Error::NotSupported(msg)) => assert!(msg.contains("blob"), "{msg}"),
        other => panic!("expected NotSupported, got {other:?}"),
    }
    assert_eq!(db.get("new").unwrap(), None);
    assert_eq!(keys(&db).len(), 10);
}
