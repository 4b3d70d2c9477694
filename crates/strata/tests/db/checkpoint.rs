// SPDX-License-Identifier: MIT OR Apache-2.0
//! `Db::checkpoint` and `Db::close`: a checkpoint taken while a writer writes holds a prefix of
//! its batches, each whole; checkpoints of databases with blob files and of read-only ones;
//! the directory rules; the source going on unharmed. Close: data there after a reopen at once,
//! cursors outliving it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use strata::{Db, Error, Options, WriteBatch};

fn create() -> Options {
    Options {
        create_if_missing: true,
        ..Options::default()
    }
}

/// Every entry of the database at `dir`, opened anew.
fn contents(dir: &Path, options: Options) -> Vec<(Vec<u8>, Vec<u8>)> {
    let db = Db::open(dir, options).unwrap();
    db.scan().unwrap().map(|e| e.unwrap()).collect()
}

const BATCH_KEYS: usize = 5;

/// Batch `i`: `BATCH_KEYS` keys `b<i>-<j>` with value `i`, and `last` set to `i`.
fn batch(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    for j in 0..BATCH_KEYS {
        b.put(format!("b{i:08}-{j}"), i.to_be_bytes());
    }
    b.put("last", i.to_be_bytes());
    b
}

/// Checks that `entries` hold batches `0..n` exactly, each whole, and returns `n`.
fn whole_batches_prefix(entries: &[(Vec<u8>, Vec<u8>)]) -> u64 {
    let mut per_batch = std::collections::BTreeMap::<u64, usize>::new();
    let mut last = None;
    for (k, v) in entries {
        let i = u64::from_be_bytes(v.as_slice().try_into().unwrap());
        if k == b"last" {
            last = Some(i);
            continue;
        }
        assert!(
            k.starts_with(format!("b{i:08}-").as_bytes()),
            "{k:?} holds {i}"
        );
        *per_batch.entry(i).or_default() += 1;
    }
    let n = per_batch.len() as u64;
    for (index, (i, count)) in per_batch.into_iter().enumerate() {
        assert_eq!(i, index as u64, "batch {index} missing before batch {i}");
        assert_eq!(count, BATCH_KEYS, "batch {i} is torn");
    }
    assert_eq!(last, n.checked_sub(1), "`last` disagrees with the batches");
    n
}

#[test]
fn checkpoints_taken_while_a_writer_writes_hold_a_prefix_of_whole_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let options = Options {
        write_buffer_size: 32 << 10,
        ..create()
    };
    let db = Arc::new(Db::open(tmp.path().join("db"), options).unwrap());
    let (started, done, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let writer = {
        let (db, started, done, stop) = (db.clone(), started.clone(), done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                started.store(i + 1, Ordering::SeqCst);
                db.write(batch(i)).unwrap();
                done.store(i + 1, Ordering::SeqCst);
                i += 1;
            }
        })
    };
    let mut seen = Vec::new();
    for c in 0..8 {
        // Let the writer get ahead: some memtables flushed, some compactions.
        while done.load(Ordering::SeqCst) < (c + 1) * 1_000 {
            std::thread::yield_now();
        }
        let dest = tmp.path().join(format!("checkpoint-{c}"));
        let acknowledged = done.load(Ordering::SeqCst);
        db.checkpoint(&dest).unwrap();
        let begun = started.load(Ordering::SeqCst);
        let n = whole_batches_prefix(&contents(&dest, Options::default()));
        assert!(
            (acknowledged..=begun).contains(&n),
            "checkpoint {c} holds {n} batches: {acknowledged} were acknowledged before it, \
             {begun} begun when it returned"
        );
        seen.push(n);
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    // The source holds every batch, and its files the checkpoints linked are still its own.
    let total = done.load(Ordering::SeqCst);
    let db = Arc::into_inner(db).unwrap();
    db.compact_range(None, None).unwrap();
    let entries: Vec<_> = db.scan().unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(whole_batches_prefix(&entries), total);
}

#[test]
fn later_writes_stay_out_of_a_checkpoint_and_the_source_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, dest) = (tmp.path().join("db"), tmp.path().join("empty"));
    // An existing empty directory is accepted.
    std::fs::create_dir(&dest).unwrap();
    let db = Db::open(&dir, create()).unwrap();
    for i in 0..2_000u32 {
        db.put(i.to_be_bytes(), [1; 100]).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.put("unflushed", "yes").unwrap();
    db.checkpoint(&dest).unwrap();
    // The tables are hard links (one device), the MANIFEST and CURRENT the copy's own.
    let mut linked = 0;
    for entry in std::fs::read_dir(&dest).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.ends_with(".ldb") {
            assert_eq!(entry.metadata().unwrap().nlink(), 2, "{name}");
            linked += 1;
        } else {
            assert!(name == "CURRENT" || name.starts_with("MANIFEST-"), "{name}");
            assert_eq!(entry.metadata().unwrap().nlink(), 1, "{name}");
        }
    }
    assert!(linked >= 2, "{linked} tables linked");
    // The source changes and compacts away the tables the checkpoint links.
    for i in 0..2_000u32 {
        db.put(i.to_be_bytes(), [2; 100]).unwrap();
    }
    db.delete("unflushed").unwrap();
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let copy = contents(&dest, Options::default());
    assert_eq!(copy.len(), 2_001);
    assert!(copy
        .iter()
        .all(|(k, v)| k == b"unflushed" || v == &[1; 100]));
    assert_eq!(db.get("unflushed").unwrap(), None);
    assert_eq!(db.get(7u32.to_be_bytes()).unwrap(), Some(vec![2; 100]));
    // The checkpoint is a database of its own: writing it leaves the source alone.
    {
        let copy = Db::open(&dest, Options::default()).unwrap();
        copy.put("only-in-copy", "1").unwrap();
        copy.compact_range(None, None).unwrap();
    }
    assert_eq!(db.get("only-in-copy").unwrap(), None);
    db.close().unwrap();
    assert_eq!(contents(&dir, Options::default()).len(), 2_000);
}

/// From `/dev/shm` (tmpfs) to the temporary directory, another device on most machines: the
/// link fails with `EXDEV` and the files are copied; on one device they are linked.
#[test]
fn a_checkpoint_onto_another_device_copies_the_files() {
    let shm = Path::new("/dev/shm");
    let source = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let target = tempfile::tempdir().unwrap();
    let dest = target.path().join("backup");
    let options = Options {
        blob_threshold: Some(1024),
        ..create()
    };
    let db = Db::open(source.path(), options.clone()).unwrap();
    for i in 0..500u32 {
        db.put(
            i.to_be_bytes(),
            vec![i as u8; if i.is_multiple_of(5) { 3_000 } else { 50 }],
        )
        .unwrap();
    }
    db.checkpoint(&dest).unwrap();
    let other_device = std::fs::metadata(source.path()).unwrap().dev()
        != std::fs::metadata(target.path()).unwrap().dev();
    let mut immutable = 0;
    for entry in std::fs::read_dir(&dest).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.ends_with(".ldb") || name.ends_with(".blob") {
            let links = entry.metadata().unwrap().nlink();
            assert_eq!(links, if other_device { 1 } else { 2 }, "{name}");
            immutable += 1;
        }
    }
    assert!(immutable >= 2, "{immutable} tables and blob files");
    db.close().unwrap();
    assert_eq!(
        contents(&dest, options.clone()),
        contents(source.path(), options)
    );
}

#[test]
fn a_checkpoint_needs_an_empty_or_new_directory_with_a_parent() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("db"), create()).unwrap();
    db.put("k", "v").unwrap();
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.txt"), "mine").unwrap();
    let e = db.checkpoint(&full).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(
        e.to_string().contains("full") && e.to_string().contains("not empty"),
        "{e}"
    );
    let names: Vec<_> = std::fs::read_dir(&full)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["keep.txt"]);
    // Its own directory is not empty either.
    assert!(matches!(
        db.checkpoint(db.path()),
        Err(Error::InvalidArgument(_))
    ));
    let orphan = tmp.path().join("no-parent").join("dest");
    let e = db.checkpoint(&orphan).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("parent"), "{e}");
    assert!(!tmp.path().join("no-parent").exists());
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_checkpoint_of_a_database_with_blob_files_holds_their_values() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, dest) = (tmp.path().join("db"), tmp.path().join("backup"));
    let options = Options {
        blob_threshold: Some(1024),
        write_buffer_size: 256 << 10,
        ..create()
    };
    let db = Db::open(&dir, options.clone()).unwrap();
    let value = |i: u32, round: u8| vec![round.wrapping_add(i as u8); 4_000 + i as usize];
    for round in 0..3u8 {
        for i in 0..200u32 {
            db.put(i.to_be_bytes(), value(i, round)).unwrap();
        }
        if round == 1 {
            db.compact_range(None, None).unwrap();
        }
    }
    db.put("small", "v").unwrap();
    db.checkpoint(&dest).unwrap();
    for i in 0..200u32 {
        db.put(i.to_be_bytes(), b"overwritten").unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.collect_blob_garbage().unwrap();
    let blob_names = std::fs::read_dir(&dest)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".blob")
        })
        .count();
    assert!(blob_names >= 1, "no blob file in the checkpoint");
    let copy = Db::open(&dest, options).unwrap();
    for i in 0..200u32 {
        assert_eq!(
            copy.get(i.to_be_bytes()).unwrap(),
            Some(value(i, 2)),
            "key {i}"
        );
    }
    assert_eq!(copy.get("small").unwrap().as_deref(), Some(&b"v"[..]));
    drop(copy);
    assert!(strata::check(&dest, &Options::default())
        .unwrap()
        .is_sound());
    assert_eq!(
        db.get(5u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"overwritten"[..])
    );
}

#[test]
fn a_read_only_database_checkpoints_its_unflushed_log_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, dest) = (tmp.path().join("db"), tmp.path().join("backup"));
    let options = Options {
        blob_threshold: Some(1024),
        ..create()
    };
    {
        let db = Db::open(&dir, options.clone()).unwrap();
        db.put("flushed", "1").unwrap();
        db.compact_range(None, None).unwrap();
        db.put("in-the-log", "2").unwrap();
        db.put("large-in-the-log", [3; 5_000]).unwrap();
        db.close().unwrap();
    }
    let reader = Db::open_read_only(&dir, Options::default()).unwrap();
    reader.checkpoint(&dest).unwrap();
    drop(reader);
    let copy = contents(&dest, options);
    let expected: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"flushed".to_vec(), b"1".to_vec()),
        (b"in-the-log".to_vec(), b"2".to_vec()),
        (b"large-in-the-log".to_vec(), vec![3; 5_000]),
    ];
    assert_eq!(copy, expected);
}

#[test]
fn close_returns_ok_and_the_directory_reopens_at_once_with_the_data() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), create()).unwrap();
    for i in 0..5_000u32 {
        db.put(i.to_be_bytes(), [7; 100]).unwrap();
    }
    let mut range = db.range(0u32.to_be_bytes()..10u32.to_be_bytes()).unwrap();
    db.close().unwrap();
    // Reopened at once: the lock is free although a cursor of the old handle lives on, and it
    // keeps reading the state it was made at.
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.put(3u32.to_be_bytes(), b"new").unwrap();
    assert_eq!(range.next().unwrap().unwrap().1, vec![7; 100]);
    assert_eq!(range.count(), 9);
    assert_eq!(db.scan().unwrap().count(), 5_000);
    assert_eq!(
        db.get(3u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"new"[..])
    );
    db.close().unwrap();
    let read_only = Db::open_read_only(tmp.path(), Options::default()).unwrap();
    read_only.close().unwrap();
}
