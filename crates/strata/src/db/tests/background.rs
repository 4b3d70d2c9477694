// SPDX-License-Identifier: MIT OR Apache-2.0
//! Background work on the in-memory env: flushes, compactions (size, seek and manual), the
//! deletion of obsolete files, and a panic poisoning the database.

use super::*;

#[test]
fn many_writes_flush_compact_and_survive_reopen() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    let n = 20_000u32;
    for i in 0..n {
        let k = format!("key{:06}", (i * 7919) % n);
        db.put_opt(
            k.as_bytes(),
            format!("value{i}-{}", "x".repeat(50)).as_bytes(),
            &w(),
        )
        .unwrap();
    }
    for i in (0..n).step_by(3) {
        db.delete_opt(format!("key{i:06}").as_bytes(), &w())
            .unwrap();
    }
    let files: usize = (0..NUM_LEVELS)
        .map(|l| {
            db.property(&format!("leveldb.num-files-at-level{l}"))
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert!(
        files > 1,
        "flushes happened: {}",
        db.property("leveldb.sstables").unwrap()
    );
    let check = |db: &Db| {
        for i in 0..n {
            let k = format!("key{i:06}");
            let got = db.get_opt(k.as_bytes(), &r()).unwrap();
            assert_eq!(got.is_some(), i % 3 != 0, "{k}");
        }
        let all = scan(db);
        assert_eq!(all.len() as u32, n - n.div_ceil(3));
        assert!(all.windows(2).all(|p| p[0].0 < p[1].0));
    };
    check(&db);
    drop(db);
    let db = Db::open(DIR, small_options(&env)).unwrap();
    check(&db);
    db.compact_range(None, None).unwrap();
    check(&db);
    assert_eq!(
        db.property("leveldb.num-files-at-level0").as_deref(),
        Some("0")
    );
}

/// The number of files at each level, from `leveldb.num-files-at-level<N>`.
fn files_per_level(db: &Db) -> Vec<usize> {
    (0..crate::version::NUM_LEVELS)
        .map(|level| {
            db.property(&format!("leveldb.num-files-at-level{level}"))
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// A database whose keys `k000`..`k199` sit in one table at level 2, with a newer table at
/// level 1 over the same range holding the even keys: a lookup of an odd key reads both.
fn overlapping_tables(env: &MemEnv) -> Db {
    let db = Db::open(DIR, options(env)).unwrap();
    for i in 0..200 {
        db.put_opt(format!("k{i:03}").as_bytes(), [b'a'; 1000], &w())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    for i in (0..200).step_by(2) {
        db.put_opt(format!("k{i:03}").as_bytes(), [b'b'; 1000], &w())
            .unwrap();
    }
    // Flushes the memtable; the range holds nothing to compact.
    db.compact_range(Some(b"z"), Some(b"zz")).unwrap();
    assert_eq!(files_per_level(&db), [0, 1, 1, 0, 0, 0, 0]);
    db
}

/// Waits (up to 20 s) for the background thread to empty level 1.
fn wait_for_level1_compaction(db: &Db) -> Vec<usize> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let files = files_per_level(db);
        if files[1] == 0 || std::time::Instant::now() > deadline {
            return files;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn lookups_that_read_two_files_trigger_a_seek_compaction() {
    let env = MemEnv::new();
    let db = overlapping_tables(&env);
    // The level-1 table is small, so its allowance is LevelDB's minimum of 100 seeks. Lookups
    // of even keys stop at level 1 and charge nothing.
    for _ in 0..3 {
        for i in (0..200).step_by(2) {
            db.get_opt(format!("k{i:03}").as_bytes(), &r()).unwrap();
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(files_per_level(&db), [0, 1, 1, 0, 0, 0, 0]);
    // Odd keys below the level-1 table's last key read level 1, miss, and read level 2: each
    // charges the level-1 table.
    for i in (1..199).step_by(2).cycle().take(100) {
        assert_eq!(
            db.get_opt(format!("k{i:03}").as_bytes(), &r()).unwrap(),
            Some(vec![b'a'; 1000])
        );
    }
    assert_eq!(wait_for_level1_compaction(&db), [0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(db.get_opt(b"k000", &r()).unwrap(), Some(vec![b'b'; 1000]));
    assert_eq!(db.get_opt(b"k001", &r()).unwrap(), Some(vec![b'a'; 1000]));
}

#[test]
fn scans_over_overlapping_files_trigger_a_seek_compaction() {
    let env = MemEnv::new();
    let db = overlapping_tables(&env);
    // About one sample per MiB read, each charging the level-1 table (two files overlap every
    // key): its 100 seeks run out after about 100 MiB read, some 560 scans of 200 entries of
    // 1 KB (a count that varies by a few percent with the random sampling gaps). Allow up to
    // 1,000 scans, stopping as soon as the compaction has happened.
    let mut scans = 0;
    while files_per_level(&db)[1] == 1 && scans < 1000 {
        let entries = db.scan_opt(&r()).unwrap().count();
        assert_eq!(entries, 200);
        scans += 1;
    }
    assert_eq!(
        wait_for_level1_compaction(&db),
        [0, 0, 1, 0, 0, 0, 0],
        "after {scans} scans"
    );
    assert!(scans > 100, "a compaction after only {scans} scans");
    let all = scan(&db);
    assert_eq!(all.len(), 200);
    assert!(all
        .iter()
        .enumerate()
        .all(|(i, (_, v))| v[0] == if i % 2 == 0 { b'b' } else { b'a' }));
}

#[test]
fn a_manual_compaction_ends_while_writes_go_on() {
    // Flushed files span the whole key space ("a..." to "z"), so a level-0 file always
    // overlaps the range [m, n] and its largest key lies past it: a manual compaction that
    // kept stepping would take in every new flush for as long as writes come.
    let env = MemEnv::new();
    let db = Arc::new(Db::open(DIR, small_options(&env)).unwrap());
    for i in 0..2000u32 {
        db.put_opt(format!("a{i:05}").as_bytes(), [b'v'; 100], &w())
            .unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut batch = WriteBatch::new();
                batch.put(format!("a{:05}", i % 50_000).as_bytes(), [b'w'; 100]);
                batch.put(b"z", i.to_le_bytes());
                db.write_opt(batch, &w()).unwrap();
                i += 1;
            }
        })
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let compactor = {
        let db = db.clone();
        std::thread::spawn(move || {
            let result = db.compact_range(Some(b"m"), Some(b"n"));
            let _ = done_tx.send(result.is_ok());
        })
    };
    // One step takes milliseconds; without the fix it went on for as long as the writer did.
    let ended = done_rx.recv_timeout(std::time::Duration::from_secs(15));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    compactor.join().unwrap();
    assert_eq!(
        ended,
        Ok(true),
        "compact_range did not return while writes went on"
    );
}

/// The table numbers in the directory, and those of the current version.
pub(super) fn tables_on_disk_and_live(env: &MemEnv, db: &Db) -> (Vec<u64>, Vec<u64>) {
    let mut on_disk: Vec<u64> = env
        .children(Path::new(DIR))
        .unwrap()
        .iter()
        .filter_map(|n| match crate::filename::parse_file_name(n) {
            Some((crate::filename::FileKind::Table, number)) => Some(number),
            _ => None,
        })
        .collect();
    on_disk.sort_unstable();
    let live: Vec<u64> = db
        .inner
        .lock_state()
        .versions
        .live_file_list()
        .into_iter()
        .map(|(_, n)| n)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    (on_disk, live)
}

/// Enough writes for several level-0 tables.
pub(super) fn fill_tables(db: &Db, round: u32) {
    for i in 0..3000u32 {
        let key = format!("key{:05}", (i * 7919) % 3000);
        db.put_opt(key.as_bytes(), format!("{round}:{i:0>80}").as_bytes(), &w())
            .unwrap();
    }
}

#[test]
fn a_compaction_deletes_its_inputs_before_it_returns() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    fill_tables(&db, 0);
    db.compact_range(None, None).unwrap();
    fill_tables(&db, 1);
    db.compact_range(None, None).unwrap();
    let (on_disk, live) = tables_on_disk_and_live(&env, &db);
    assert!(!live.is_empty());
    assert_eq!(on_disk, live, "tables left on disk after the compaction");
}

#[test]
fn tables_a_cursor_reads_stay_until_it_is_dropped_then_go() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    fill_tables(&db, 0);
    db.compact_range(None, None).unwrap();
    let (_, before) = tables_on_disk_and_live(&env, &db);
    let mut cursor = db.iter_opt(&r()).unwrap();
    let range = db.scan_opt(&r()).unwrap();
    fill_tables(&db, 1);
    db.compact_range(None, None).unwrap();
    let (on_disk, live) = tables_on_disk_and_live(&env, &db);
    for n in &before {
        assert!(
            on_disk.contains(n),
            "table {n} deleted while a cursor reads it"
        );
    }
    // The cursors still read the old tables, whole.
    cursor.seek_to_first();
    let mut count = 0;
    while cursor.valid() {
        assert!(cursor.value().starts_with(b"0:"));
        count += 1;
        cursor.next();
    }
    assert_eq!(count, 3000);
    drop(cursor);
    let (on_disk, _) = tables_on_disk_and_live(&env, &db);
    assert!(on_disk.len() > live.len(), "the range still reads them");
    assert_eq!(range.count(), 3000); // consumes and drops the range
    let (on_disk, live) = tables_on_disk_and_live(&env, &db);
    assert_eq!(
        on_disk, live,
        "tables left after the last cursor was dropped"
    );
}

#[test]
fn a_panic_while_the_state_mutex_is_held_poisons_the_database() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put_opt(b"k", b"v", &w()).unwrap();
    let inner = db.inner.clone();
    let panicked = std::thread::spawn(move || {
        let _state = inner.state.lock().unwrap();
        panic!("a bug while holding the state mutex");
    })
    .join();
    assert!(panicked.is_err());
    let e = db.put_opt(b"k", b"w", &w()).unwrap_err();
    assert!(e.is_poisoned(), "{e}");
    assert_eq!(db.get_opt(b"k", &r()).unwrap().as_deref(), Some(&b"v"[..]));
    let e = db.compact_range(None, None).unwrap_err();
    assert!(e.is_poisoned(), "{e}");
}

/// A point read holds the read view for its length (an `arc-swap` guard): a compaction that
/// finishes meanwhile cannot delete the tables of the version the read holds, and the read
/// lets go of it from a thread that deletes nothing. Waiting for compactions deletes them (the
/// model test met this as "tables on disk and in the version differ" under load).
#[test]
fn tables_a_finished_read_let_go_of_are_gone_once_compactions_are_waited_for() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    fill_tables(&db, 0);
    db.compact_range(None, None).unwrap();
    // What a point read holds while a compaction installs its result.
    let held = db.inner.view.load_full();
    fill_tables(&db, 1);
    db.compact_range(None, None).unwrap();
    let (on_disk, live) = tables_on_disk_and_live(&env, &db);
    assert_ne!(
        on_disk, live,
        "the held version's tables should still be there"
    );
    drop(held);
    db.wait_for_compactions().unwrap();
    let (on_disk, live) = tables_on_disk_and_live(&env, &db);
    assert_eq!(
        on_disk, live,
        "tables a finished read let go of were left on disk"
    );
}

/// A point lookup pins the table it reads in the current state's file; the pin goes with the
/// file once compaction replaces it and no state lists it.
#[test]
fn a_tables_pin_goes_when_compaction_replaces_its_file() {
    let env = MemEnv::new();
    let db = overlapping_tables(&env);
    assert_eq!(db.stats().table_cache.pinned_count, 0);
    let mut cursor = db.iter_opt(&r()).unwrap();
    cursor.seek_to_first();
    let key = cursor.key().to_vec();
    // A cursor pins the tables of a sorted level it opens, as a get does (level 0's it opens
    // at once, through the cache).
    let by_cursor = db.stats().table_cache.pinned_count;
    drop(cursor);
    assert!(db.get(&key).unwrap().is_some());
    let pinned = db.stats().table_cache.pinned_count;
    assert!((1..=2).contains(&pinned), "{pinned} pinned");
    assert!(
        by_cursor <= pinned,
        "{by_cursor} pinned by the cursor, {pinned} after"
    );
    db.compact_range(None, None).unwrap();
    assert_eq!(files_per_level(&db).iter().sum::<usize>(), 1);
    assert_eq!(
        db.stats().table_cache.pinned_count,
        0,
        "the inputs' pins went"
    );
    assert!(db.get(&key).unwrap().is_some());
    assert_eq!(
        db.stats().table_cache.pinned_count,
        1,
        "the output is pinned"
    );
}

#[test]
fn a_compactions_inputs_leave_the_table_cache_even_while_a_cursor_holds_them() {
    let env = MemEnv::new();
    let db = overlapping_tables(&env);
    assert_eq!(db.stats().table_cache.open_count, 2);
    // The cursor holds the version with both tables: they stay live (not deleted).
    let mut cursor = db.iter_opt(&r()).unwrap();
    db.compact_range(None, None).unwrap();
    let after = files_per_level(&db);
    assert_eq!(after.iter().sum::<usize>(), 1, "{after:?}");
    // Only the output is open in the cache: the inputs were let go when the output was
    // installed, though the cursor's version still lists them.
    assert_eq!(db.stats().table_cache.open_count, 1);
    // The cursor still reads its version, reopening the inputs it reaches.
    cursor.seek_to_first();
    let mut entries = 0;
    while cursor.valid() {
        let expected = if cursor.key()[3].is_multiple_of(2) {
            b'b'
        } else {
            b'a'
        };
        assert_eq!(cursor.value(), &[expected; 1000][..], "{:?}", cursor.key());
        entries += 1;
        cursor.next();
    }
    cursor.status().unwrap();
    assert_eq!(entries, 200);
}

/// A cursor reads a sorted level's tables through their files' pins, pinning each table it
/// opens as a get does (within the table cache's budget), so that later cursors and gets
/// skip the table cache's lookup; the pins go with the files.
#[test]
fn a_cursor_pins_the_sorted_level_tables_it_opens() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    fill_tables(&db, 0);
    db.compact_range(None, None).unwrap();
    let levels = files_per_level(&db);
    assert_eq!(levels[0], 0, "{levels:?}");
    let tables: usize = levels.iter().sum();
    assert!(tables >= 1, "{levels:?}");
    assert_eq!(db.stats().table_cache.pinned_count, 0);
    let mut cursor = db.iter_opt(&r()).unwrap();
    cursor.seek_to_first();
    assert!(cursor.valid());
    assert_eq!(db.stats().table_cache.pinned_count, 1, "the first table");
    let mut entries = 0;
    while cursor.valid() {
        entries += 1;
        cursor.next();
    }
    cursor.status().unwrap();
    drop(cursor);
    assert!(entries > 0);
    assert_eq!(
        db.stats().table_cache.pinned_count as usize,
        tables,
        "{levels:?}"
    );
    fill_tables(&db, 1);
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.stats().table_cache.pinned_count,
        0,
        "the files went, and their pins"
    );
}

/// A level-0 file's cursor is asked, as a shallower level's is, whether a seek would pass it:
/// a seek that a deeper level answers before the file's range leaves the file's table
/// unopened, and a seek into its range reads it.
#[test]
fn a_seek_leaves_a_level0_file_that_starts_after_the_key_found_unopened() {
    let env = MemEnv::new();
    let db = overlapping_tables(&env);
    for i in 150..200 {
        db.put_opt(format!("k{i:03}x").as_bytes(), b"new", &w())
            .unwrap();
    }
    // Flushed to level 0: the memtable overlaps level 1.
    db.compact_range(Some(b"z"), Some(b"zz")).unwrap();
    assert_eq!(files_per_level(&db), [1, 1, 1, 0, 0, 0, 0]);
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    let opened = |db: &Db| db.stats().table_cache.open_count;
    assert_eq!(opened(&db), 0);
    let mut cursor = db.iter_opt(&r()).unwrap();
    cursor.seek(b"k011");
    assert_eq!(cursor.key(), b"k011");
    assert_eq!(cursor.value(), [b'a'; 1000]);
    assert_eq!(
        opened(&db),
        2,
        "the tables of levels 1 and 2; the level-0 table starts at k150x"
    );
    cursor.next();
    assert_eq!(
        (cursor.key(), cursor.value()),
        (&b"k012"[..], &[b'b'; 1000][..])
    );
    cursor.seek(b"k160");
    assert_eq!(cursor.key(), b"k160");
    cursor.next();
    assert_eq!((cursor.key(), cursor.value()), (&b"k160x"[..], &b"new"[..]));
    assert_eq!(opened(&db), 3);
    let mut entries = 0;
    cursor.seek_to_first();
    while cursor.valid() {
        entries += 1;
        cursor.next();
    }
    cursor.status().unwrap();
    assert_eq!(entries, 250);
}

/// A level-0 table that cannot be opened, now that a cursor opens it only when a move
/// reaches it, is still an error, reported by the cursor's status and naming the file: a seek
/// the deeper levels answer before its range does not need it; one into its range fails.
#[test]
fn a_damaged_level0_table_is_the_cursors_error_once_a_seek_needs_it() {
    let env = MemEnv::new();
    let db = overlapping_tables(&env);
    let (before, _) = tables_on_disk_and_live(&env, &db);
    for i in 150..200 {
        db.put_opt(format!("k{i:03}x").as_bytes(), b"new", &w())
            .unwrap();
    }
    db.compact_range(Some(b"z"), Some(b"zz")).unwrap();
    assert_eq!(files_per_level(&db), [1, 1, 1, 0, 0, 0, 0]);
    let (after, _) = tables_on_disk_and_live(&env, &db);
    let level0: Vec<u64> = after.into_iter().filter(|n| !before.contains(n)).collect();
    assert_eq!(level0.len(), 1, "the flush made one table");
    let name = format!("{:06}.ldb", level0[0]);
    drop(db);
    // The same size, every byte zero: open finds the file the MANIFEST lists, its footer is
    // read only when the table is opened.
    let path = Path::new(DIR).join(&name);
    let size = crate::env::read_file_to_vec(&env, &path).unwrap().len();
    crate::env::write_file(&env, &path, &vec![0; size], true).unwrap();
    let db = Db::open(DIR, options(&env)).unwrap();
    let mut cursor = db.iter_opt(&r()).unwrap();
    cursor.seek(b"k011");
    assert_eq!(cursor.key(), b"k011");
    cursor.status().unwrap();
    cursor.seek(b"k160");
    assert!(!cursor.valid());
    let err = cursor.status().unwrap_err();
    assert!(err.to_string().contains(&name), "{err}");
}

/// A writer that finds the blob collector's estimate a blob file behind wakes the collector and
/// waits for it. The wake-up can come while the collector is busy, before it idles: the
/// collector must then look again instead of waiting out its poll (200 ms). Here the
/// collector is held just before it idles (`blob_gc::idle_gate`) while a writer appends more
/// than a blob file of values and waits; once let go, it must release the writer at once.
#[test]
fn a_writer_waiting_for_the_blob_collector_is_not_left_to_its_poll() {
    use std::time::{Duration, Instant};

    use crate::db::blob_gc::idle_gate::{IdleGate, IDLE_GATE};

    let env = MemEnv::new();
    let gate = IdleGate::held();
    IDLE_GATE.with(|g| g.replace(Some(gate.clone())));
    let db = Arc::new(
        Db::open(
            DIR,
            Options {
                blob_threshold: Some(1000),
                blob_file_size: 1 << 20,
                ..options(&env)
            },
        )
        .unwrap(),
    );
    IDLE_GATE.with(|g| g.replace(None));
    gate.wait_parked();
    // 48 values of 64 KiB: three blob files' worth; the writer waits after the first 16.
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..48u32 {
                db.put_opt(format!("k{i:03}").as_bytes(), vec![i as u8; 64 << 10], &w())
                    .unwrap();
            }
            Instant::now()
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(!writer.is_finished(), "the writer waits for the collector");
    let opened = Instant::now();
    gate.open();
    let done = writer.join().unwrap();
    let waited = done.duration_since(opened);
    assert!(
        waited < Duration::from_millis(180),
        "the writer was released {waited:?} after the collector went on"
    );
    assert_eq!(db.get(b"k047").unwrap().unwrap(), vec![47u8; 64 << 10]);
}
