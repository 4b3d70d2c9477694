// SPDX-License-Identifier: MIT OR Apache-2.0
//! Database tests on the in-memory env: the API, recovery, flushes and compactions.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::env::MemEnv;
use crate::Comparator;

fn options(env: &MemEnv) -> Options {
    Options {
        create_if_missing: true,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()))
}

fn small_options(env: &MemEnv) -> Options {
    Options {
        write_buffer_size: 64 << 10,
        max_file_size: 1 << 20,
        block_size: 1024,
        ..options(env)
    }
}

const DIR: &str = "/db";

/// Descending bytewise order, for tests of custom comparators.
struct Reverse;

impl Comparator for Reverse {
    fn name(&self) -> &str {
        "test.Reverse"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        b.cmp(a)
    }
    fn find_shortest_separator(&self, _: &mut Vec<u8>, _: &[u8]) {}
    fn find_short_successor(&self, _: &mut Vec<u8>) {}
}
fn w() -> WriteOptions {
    WriteOptions::default()
}
fn r() -> ReadOptions<'static> {
    ReadOptions::default()
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan(&r()).unwrap().map(Result::unwrap).collect()
}

#[test]
fn put_get_delete_and_reopen() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put(&w(), b"a", b"1").unwrap();
    db.put(&w(), b"b", b"2").unwrap();
    db.delete(&w(), b"a").unwrap();
    db.put(&w(), b"", b"empty key").unwrap();
    assert_eq!(db.get(&r(), b"a").unwrap(), None);
    assert_eq!(db.get(&r(), b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(
        db.get(&r(), b"").unwrap().as_deref(),
        Some(&b"empty key"[..])
    );
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_eq!(db.get(&r(), b"a").unwrap(), None);
    assert_eq!(db.get(&r(), b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(scan(&db).len(), 2);
}

#[test]
fn fresh_database_has_leveldbs_files() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    let mut names = env.children(Path::new(DIR)).unwrap();
    names.sort();
    assert_eq!(
        names,
        ["000003.log", "CURRENT", "LOCK", "LOG", "MANIFEST-000002"]
    );
    assert_eq!(
        crate::env::read_file_to_vec(&env, Path::new("/db/CURRENT")).unwrap(),
        b"MANIFEST-000002\n"
    );
    assert_eq!(env.file_size(Path::new("/db/MANIFEST-000002")).unwrap(), 50);
}

#[test]
fn many_writes_flush_compact_and_survive_reopen() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    let n = 20_000u32;
    for i in 0..n {
        let k = format!("key{:06}", (i * 7919) % n);
        db.put(
            &w(),
            k.as_bytes(),
            format!("value{i}-{}", "x".repeat(50)).as_bytes(),
        )
        .unwrap();
    }
    for i in (0..n).step_by(3) {
        db.delete(&w(), format!("key{i:06}").as_bytes()).unwrap();
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
            let got = db.get(&r(), k.as_bytes()).unwrap();
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

#[test]
fn iterators_hide_deletions_and_old_versions_both_ways() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for round in 0..3 {
        for i in 0..500u32 {
            let k = format!("k{i:04}");
            if (i + round) % 4 == 0 {
                db.delete(&w(), k.as_bytes()).unwrap();
            } else {
                db.put(&w(), k.as_bytes(), format!("{round}").as_bytes())
                    .unwrap();
            }
        }
        if round == 1 {
            db.compact_range(None, None).unwrap();
        }
    }
    let forward = scan(&db);
    let mut backward: Vec<_> = db.scan(&r()).unwrap().rev().map(Result::unwrap).collect();
    backward.reverse();
    assert_eq!(forward, backward);
    assert!(forward.iter().all(|(_, v)| v == b"2"));
    assert_eq!(forward.len(), 375);
    // Mixed directions on the cursor.
    let mut it = db.iter(&r()).unwrap();
    it.seek(b"k0100");
    let at = it.key().to_vec();
    it.next();
    it.prev();
    assert_eq!(it.key(), &at[..]);
    it.prev();
    it.next();
    assert_eq!(it.key(), &at[..]);
}

#[test]
fn snapshots_see_exactly_the_writes_before_them() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    db.put(&w(), b"k", b"v1").unwrap();
    let s1 = db.snapshot();
    db.put(&w(), b"k", b"v2").unwrap();
    db.delete(&w(), b"k").unwrap();
    for i in 0..5000u32 {
        db.put(&w(), format!("filler{i}").as_bytes(), &[0u8; 100])
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    fn at(s: &Snapshot) -> ReadOptions<'_> {
        ReadOptions {
            snapshot: Some(s),
            ..ReadOptions::default()
        }
    }
    assert_eq!(db.get(&at(&s1), b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(db.get(&r(), b"k").unwrap(), None);
    let snap_scan: Vec<_> = db
        .prefix(&at(&s1), b"k")
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(snap_scan, vec![(b"k".to_vec(), b"v1".to_vec())]);
    let other = Db::open("/other", options(&env)).unwrap();
    assert!(matches!(
        other.get(&at(&s1), b"k"),
        Err(Error::InvalidArgument(_))
    ));
}

/// A refused open of a directory that holds no database creates nothing in it: no `LOCK`, no
/// `LOG` (it used to take the lock and open the info log before it looked for `CURRENT`).
#[test]
fn a_refused_open_creates_no_file() {
    let env = MemEnv::new();
    let dir = Path::new("/plain");
    env.create_dir_all(dir).unwrap();
    crate::env::write_file(&env, &dir.join("notes.txt"), b"mine", true).unwrap();
    let no_create = Options::default().with_env(Arc::new(env.clone()));
    for read_only in [false, true] {
        let err = if read_only {
            Db::open_read_only(dir, no_create.clone()).unwrap_err()
        } else {
            Db::open(dir, no_create.clone()).unwrap_err()
        };
        assert!(
            matches!(&err, Error::NoDatabase { path, reason } if path == dir
                && reason.contains("no CURRENT")),
            "{err}"
        );
        assert_eq!(env.children(dir).unwrap(), ["notes.txt"]);
    }
    // With create_if_missing, a directory holding a table but no CURRENT is refused, and
    // nothing is added to it either.
    crate::env::write_file(&env, &dir.join("000005.ldb"), b"table", true).unwrap();
    let err = Db::open(dir, options(&env)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let mut names = env.children(dir).unwrap();
    names.sort();
    assert_eq!(names, ["000005.ldb", "notes.txt"]);
}

#[test]
fn open_errors_are_clear() {
    let env = MemEnv::new();
    let no_create = Options::default().with_env(Arc::new(env.clone()));
    let err = Db::open("/missing", no_create.clone()).unwrap_err();
    assert!(
        matches!(&err, Error::NoDatabase { path, .. } if path == Path::new("/missing")),
        "{err}"
    );
    assert!(err.is_not_found());
    assert_eq!(
        err.to_string(),
        "/missing is not a database: the directory does not exist (create_if_missing is not set)"
    );
    let err = Db::open_read_only("/missing", no_create.clone()).unwrap_err();
    assert!(matches!(err, Error::NoDatabase { .. }), "{err}");
    let db = Db::open(DIR, options(&env)).unwrap();
    assert!(matches!(
        Db::open(DIR, options(&env)),
        Err(Error::Locked { .. })
    ));
    drop(db);
    let err = Db::open(
        DIR,
        Options {
            error_if_exists: true,
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    let err = Db::open(
        DIR,
        Options {
            comparator: Arc::new(Reverse),
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("leveldb.BytewiseComparator"),
        "{err}"
    );
}

#[test]
fn custom_comparator_orders_keys() {
    let env = MemEnv::new();
    let opts = Options {
        comparator: Arc::new(Reverse),
        ..small_options(&env)
    };
    let db = Db::open(DIR, opts.clone()).unwrap();
    for i in 0..3000u32 {
        db.put(&w(), format!("{i:05}").as_bytes(), b"v").unwrap();
    }
    db.compact_range(None, None).unwrap();
    let keys: Vec<Vec<u8>> = scan(&db).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys.first().unwrap(), b"02999");
    assert_eq!(keys.last().unwrap(), b"00000");
    assert_eq!(keys.len(), 3000);
    drop(db);
    assert_eq!(scan(&Db::open(DIR, opts).unwrap()).len(), 3000);
}

/// Keys are a 4-byte user id then a time: users ascending, and each user's times descending
/// (the newest first). A key's first 4 bytes are compared bytewise, the rest in reverse.
struct UserTime;

impl Comparator for UserTime {
    fn name(&self) -> &str {
        "test.UserTime"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        let (ua, ta) = a.split_at(a.len().min(4));
        let (ub, tb) = b.split_at(b.len().min(4));
        ua.cmp(ub).then_with(|| tb.cmp(ta))
    }
    fn find_shortest_separator(&self, _: &mut Vec<u8>, _: &[u8]) {}
    fn find_short_successor(&self, _: &mut Vec<u8>) {}
}

fn user_time_key(user: u32, time: u64) -> Vec<u8> {
    [&user.to_be_bytes()[..], &time.to_be_bytes()].concat()
}

/// Regression (issue #15): `prefix` computed bytewise bounds under any comparator. Here a
/// bare user id sorts after all of that user's keys, so `prefix(user 3)` returned user 4's.
#[test]
fn prefix_returns_exactly_the_keys_starting_with_it_under_a_custom_comparator() {
    let env = MemEnv::new();
    let db = Db::open(
        DIR,
        Options {
            comparator: Arc::new(UserTime),
            ..small_options(&env)
        },
    )
    .unwrap();
    for user in 1..=5u32 {
        for time in 1..=4u64 {
            db.put(&w(), &user_time_key(user, time), b"v").unwrap();
        }
    }
    fn keys(range: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>) -> Vec<Vec<u8>> {
        range.map(|i| i.unwrap().0).collect()
    }
    let newest_first: Vec<Vec<u8>> = (1..=4u64).rev().map(|t| user_time_key(3, t)).collect();
    let oldest_first: Vec<Vec<u8>> = newest_first.iter().rev().cloned().collect();
    for flushed in [false, true] {
        let prefix = 3u32.to_be_bytes();
        assert_eq!(
            keys(db.prefix(&r(), &prefix).unwrap()),
            newest_first,
            "{flushed}"
        );
        assert_eq!(
            keys(db.prefix(&r(), &prefix).unwrap().rev()),
            oldest_first,
            "{flushed}"
        );
        // A prefix longer than the user id, and one every key has.
        let with_time = [&prefix[..], &[0; 7]].concat();
        assert_eq!(keys(db.prefix(&r(), &with_time).unwrap()), newest_first);
        assert_eq!(keys(db.prefix(&r(), &[0, 0, 0]).unwrap()).len(), 20);
        db.compact_range(None, None).unwrap();
    }
}

#[test]
fn oversized_keys_are_refused_and_nothing_is_applied() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"fine", b"v");
    batch.put(&vec![0u8; MAX_KEY_SIZE + 1], b"v");
    let err = db.write(&w(), batch).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(db.get(&r(), b"fine").unwrap(), None);
    // The handle goes on, and the refused batch never reached the log.
    db.put(&w(), b"after", b"v").unwrap();
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_eq!(db.get(&r(), b"fine").unwrap(), None);
    assert_eq!(scan(&db).len(), 1);
}

#[test]
fn read_only_open_writes_nothing() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..3000u32 {
        db.put(&w(), format!("{i:05}").as_bytes(), b"v").unwrap();
    }
    drop(db);
    let before = env.snapshot();
    let ro = Db::open_read_only(DIR, small_options(&env)).unwrap();
    // Readers share the database; a writer is kept out while they read.
    let ro2 = Db::open_read_only(DIR, small_options(&env)).unwrap();
    assert!(matches!(
        Db::open(DIR, small_options(&env)),
        Err(Error::Locked { .. })
    ));
    drop(ro2);
    assert_eq!(scan(&ro).len(), 3000);
    assert!(matches!(
        ro.put(&w(), b"x", b"y"),
        Err(Error::NotSupported(_))
    ));
    assert!(matches!(
        ro.compact_range(None, None),
        Err(Error::NotSupported(_))
    ));
    drop(ro);
    let mut a = before.children(Path::new(DIR)).unwrap();
    let mut b = env.children(Path::new(DIR)).unwrap();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    for name in a {
        let p = Path::new(DIR).join(name);
        assert_eq!(
            crate::env::read_file_to_vec(&before, &p).unwrap(),
            crate::env::read_file_to_vec(&env, &p).unwrap()
        );
    }
    // And a reader is kept out while a writer has the database open.
    let writer = Db::open(DIR, small_options(&env)).unwrap();
    assert!(matches!(
        Db::open_read_only(DIR, small_options(&env)),
        Err(Error::Locked { .. })
    ));
    drop(writer);
}

#[test]
fn destroy_removes_the_database() {
    let env = MemEnv::new();
    let opts = options(&env);
    let db = Db::open(DIR, opts.clone()).unwrap();
    db.put(&w(), b"k", b"v").unwrap();
    assert!(matches!(
        crate::destroy(DIR, &opts),
        Err(Error::Locked { .. })
    ));
    drop(db);
    crate::destroy(DIR, &opts).unwrap();
    assert!(!env.exists(Path::new(DIR)));
}

/// The names in `dir`, sorted.
fn names_in(env: &MemEnv, dir: &str) -> Vec<String> {
    let mut names = env.children(Path::new(dir)).unwrap();
    names.sort();
    names
}

/// `destroy` deletes only a database: it used to delete every file whose name the database
/// could use (`000001.log`, `LOG`), and, with nothing else there, the directory itself.
#[test]
fn destroy_refuses_a_directory_that_is_not_a_database_and_changes_nothing() {
    let env = MemEnv::new();
    let opts = options(&env);
    let put = |name: &str, bytes: &[u8]| {
        crate::env::write_file(&env, &Path::new("/plain").join(name), bytes, true).unwrap()
    };
    env.create_dir_all(Path::new("/plain")).unwrap();
    put("000001.log", b"someone else's log");
    put("LOG", b"someone else's notes");
    let refused = |expected: &str| {
        let before = names_in(&env, "/plain");
        let err = crate::destroy("/plain", &opts).unwrap_err();
        assert!(
            matches!(&err, Error::NoDatabase { path, reason }
                if path == Path::new("/plain") && reason.contains(expected)),
            "{err}"
        );
        assert!(err.is_not_found());
        assert_eq!(
            names_in(&env, "/plain"),
            before,
            "nothing deleted or created"
        );
    };
    refused("it has no CURRENT file");
    // A CURRENT that names nothing, beside a table.
    put("000005.sst", b"a table");
    put("CURRENT", b"MANIFEST-000004\n");
    refused("CURRENT names a MANIFEST that does not exist");
    put("CURRENT", b"not a manifest name\n");
    refused("does not name a MANIFEST");
    put("CURRENT", b"MANIFEST-000004\n");
    put("MANIFEST-000004", &[0x5a; 64]);
    refused("its CURRENT does not name a MANIFEST that reads");
}

#[test]
fn destroy_keeps_what_is_not_the_databases_and_the_directory_holding_it() {
    let env = MemEnv::new();
    let opts = options(&env);
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..2000u32 {
        db.put(&w(), format!("{i:05}").as_bytes(), &[1u8; 100])
            .unwrap();
    }
    drop(db);
    crate::env::write_file(&env, Path::new("/db/notes.txt"), b"mine", true).unwrap();
    env.create_dir_all(Path::new("/db/lost")).unwrap();
    crate::destroy(DIR, &opts).unwrap();
    assert_eq!(names_in(&env, DIR), ["lost", "notes.txt"]);
    // A missing directory: nothing to destroy, as in LevelDB.
    crate::destroy("/nowhere", &opts).unwrap();
}

#[test]
fn destroy_removes_a_database_made_with_another_comparator() {
    let env = MemEnv::new();
    let made = Options {
        comparator: Arc::new(Reverse),
        ..options(&env)
    };
    let db = Db::open(DIR, made).unwrap();
    db.put(&w(), b"k", b"v").unwrap();
    drop(db);
    crate::destroy(DIR, &options(&env)).unwrap();
    assert!(!env.exists(Path::new(DIR)));
}

#[test]
fn properties_answer_leveldbs_names() {
    let env = MemEnv::new();
    let opts = Options {
        compression: crate::table::Compression::None,
        ..small_options(&env)
    };
    let db = Db::open(DIR, opts).unwrap();
    for i in 0..5000u32 {
        db.put(&w(), format!("{i:05}").as_bytes(), &[7u8; 100])
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    assert!(db
        .property("leveldb.stats")
        .unwrap()
        .contains("Level  Files"));
    assert!(db
        .property("leveldb.sstables")
        .unwrap()
        .contains("--- level 0 ---"));
    let mem: usize = db
        .property("leveldb.approximate-memory-usage")
        .unwrap()
        .parse()
        .unwrap();
    assert!(mem > 0);
    assert_eq!(db.property("leveldb.num-files-at-level7"), None);
    assert_eq!(db.property("leveldb.nonsense"), None);
    let sizes = db.approximate_sizes(&[(b"00000", b"02500"), (b"02500", b"99999"), (b"x", b"y")]);
    // About 2,500 entries of 105 bytes on each side of the split.
    assert!(
        sizes
            .iter()
            .take(2)
            .all(|&s| (200_000..350_000).contains(&s)),
        "{sizes:?}"
    );
    assert_eq!(sizes[2], 0);
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
        db.put(&w(), format!("k{i:03}").as_bytes(), &[b'a'; 1000])
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    for i in (0..200).step_by(2) {
        db.put(&w(), format!("k{i:03}").as_bytes(), &[b'b'; 1000])
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
            db.get(&r(), format!("k{i:03}").as_bytes()).unwrap();
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(files_per_level(&db), [0, 1, 1, 0, 0, 0, 0]);
    // Odd keys below the level-1 table's last key read level 1, miss, and read level 2: each
    // charges the level-1 table.
    for i in (1..199).step_by(2).cycle().take(100) {
        assert_eq!(
            db.get(&r(), format!("k{i:03}").as_bytes()).unwrap(),
            Some(vec![b'a'; 1000])
        );
    }
    assert_eq!(wait_for_level1_compaction(&db), [0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(db.get(&r(), b"k000").unwrap(), Some(vec![b'b'; 1000]));
    assert_eq!(db.get(&r(), b"k001").unwrap(), Some(vec![b'a'; 1000]));
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
        let entries = db.scan(&r()).unwrap().count();
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
fn a_range_consumed_from_both_ends_yields_each_key_once() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..500u32 {
        db.put(&w(), format!("{i:04}").as_bytes(), b"v").unwrap();
    }
    for (start, end, expected) in [
        (0u32, 500u32, 500usize),
        (10, 11, 1),
        (10, 12, 2),
        (250, 250, 0),
    ] {
        let (s, e) = (format!("{start:04}"), format!("{end:04}"));
        let mut range = db.range(&r(), s.as_bytes()..e.as_bytes()).unwrap();
        let mut seen = Vec::new();
        let mut from_back = false;
        loop {
            let item = if from_back {
                range.next_back()
            } else {
                range.next()
            };
            let Some(item) = item else { break };
            seen.push(String::from_utf8(item.unwrap().0).unwrap());
            from_back = !from_back;
        }
        seen.sort();
        let want: Vec<String> = (start..end).map(|i| format!("{i:04}")).collect();
        assert_eq!(seen.len(), expected);
        assert_eq!(seen, want);
    }
}

#[test]
fn a_ranges_back_end_started_late_sees_the_same_state_as_its_front() {
    // The back cursor is built on first use; it must still read the state of the range's
    // creation, even after overwrites, deletes and a compaction that drops the old versions.
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..300u32 {
        db.put(&w(), format!("{i:04}").as_bytes(), b"old").unwrap();
    }
    let mut range = db.scan(&r()).unwrap();
    assert_eq!(range.next().unwrap().unwrap().0, b"0000");
    for i in 0..300u32 {
        if i % 2 == 0 {
            db.delete(&w(), format!("{i:04}").as_bytes()).unwrap();
        } else {
            db.put(&w(), format!("{i:04}").as_bytes(), b"new").unwrap();
        }
    }
    db.put(&w(), b"9999", b"new").unwrap();
    db.compact_range(None, None).unwrap();
    let rest: Vec<(Vec<u8>, Vec<u8>)> = range.rev().map(Result::unwrap).collect();
    assert_eq!(rest.len(), 299);
    assert_eq!(rest[0].0, b"0299");
    assert!(rest.iter().all(|(_, v)| v == b"old"));
}

/// The database's files of one kind, by extension (`log`, `ldb`).
fn files_named(env: &MemEnv, extension: &str) -> Vec<String> {
    let mut names: Vec<String> = env
        .children(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(&format!(".{extension}")))
        .collect();
    names.sort();
    names
}

#[test]
fn reuse_logs_keeps_appending_to_the_last_log() {
    let env = MemEnv::new();
    let reuse = || Options {
        reuse_logs: true,
        ..options(&env)
    };
    let db = Db::open(DIR, reuse()).unwrap();
    db.put(&w(), b"a", b"1").unwrap();
    db.put(&w(), b"b", b"2").unwrap();
    drop(db);
    let log = files_named(&env, "log");
    assert_eq!(log.len(), 1);
    let len = env.file_size(&Path::new(DIR).join(&log[0])).unwrap();

    // Reopened, the log and its memtable carry on: no table, no new log.
    let db = Db::open(DIR, reuse()).unwrap();
    assert_eq!(files_named(&env, "log"), log);
    assert!(files_named(&env, "ldb").is_empty());
    assert_eq!(db.get(&r(), b"a").unwrap().as_deref(), Some(&b"1"[..]));
    db.put(&w(), b"c", b"3").unwrap();
    assert!(env.file_size(&Path::new(DIR).join(&log[0])).unwrap() > len);
    drop(db);

    // The log is an ordinary log: a default open replays it whole and starts a new one.
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_ne!(files_named(&env, "log"), log);
    assert_eq!(
        scan(&db),
        [
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"3".to_vec())
        ]
    );
}

#[test]
fn reuse_logs_does_not_append_after_a_torn_tail() {
    let env = MemEnv::new();
    let reuse = |paranoid_checks| Options {
        reuse_logs: true,
        paranoid_checks,
        ..options(&env)
    };
    let db = Db::open(DIR, reuse(false)).unwrap();
    db.put(&w(), b"kept", b"1").unwrap();
    db.put(&w(), b"torn", b"2").unwrap();
    drop(db);
    let log = files_named(&env, "log");
    let path = Path::new(DIR).join(&log[0]);
    let bytes = crate::env::read_file_to_vec(&env, &path).unwrap();
    // Cut the last record short, as a crash in the middle of its write leaves it.
    crate::env::write_file(&env, &path, &bytes[..bytes.len() - 2], false).unwrap();

    let db = Db::open(DIR, reuse(false)).unwrap();
    assert_ne!(files_named(&env, "log"), log, "a torn log was reused");
    assert_eq!(db.get(&r(), b"kept").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(&r(), b"torn").unwrap(), None);
    db.put(&w(), b"after", b"3").unwrap();
    drop(db);
    // Nothing was appended after damage, so even a strict open finds none.
    let db = Db::open(DIR, reuse(true)).unwrap();
    assert_eq!(scan(&db).len(), 2);
}

#[test]
fn a_manual_compaction_ends_while_writes_go_on() {
    // Flushed files span the whole key space ("a..." to "z"), so a level-0 file always
    // overlaps the range [m, n] and its largest key lies past it: a manual compaction that
    // kept stepping would take in every new flush for as long as writes come.
    let env = MemEnv::new();
    let db = Arc::new(Db::open(DIR, small_options(&env)).unwrap());
    for i in 0..2000u32 {
        db.put(&w(), format!("a{i:05}").as_bytes(), &[b'v'; 100])
            .unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut batch = WriteBatch::new();
                batch.put(format!("a{:05}", i % 50_000).as_bytes(), &[b'w'; 100]);
                batch.put(b"z", &i.to_le_bytes());
                db.write(&w(), batch).unwrap();
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
fn tables_on_disk_and_live(env: &MemEnv, db: &Db) -> (Vec<u64>, Vec<u64>) {
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
fn fill_tables(db: &Db, round: u32) {
    for i in 0..3000u32 {
        let key = format!("key{:05}", (i * 7919) % 3000);
        db.put(&w(), key.as_bytes(), format!("{round}:{i:0>80}").as_bytes())
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
    let mut cursor = db.iter(&r()).unwrap();
    let range = db.scan(&r()).unwrap();
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

/// Failing to start a thread panicked in open (`expect`). It is an I/O error, and the failed
/// open leaves nothing running: a thread already started holds the database, and with it
/// `LOCK`, so it is stopped and joined before open returns.
#[test]
fn a_thread_that_cannot_be_started_fails_the_open_and_leaves_nothing_running() {
    let env = MemEnv::new();
    let opts = Options {
        blob_threshold: Some(1000),
        ..options(&env)
    };
    for name in ["strata-background", "strata-blob-gc"] {
        FAIL_SPAWN.set(Some(name));
        let opened = Db::open(DIR, opts.clone());
        FAIL_SPAWN.set(None);
        let err = opened.unwrap_err();
        assert!(
            matches!(&err, Error::Io { op: "spawn thread", path, .. } if path == Path::new(DIR)),
            "{name}: {err}"
        );
        // Released: it opens again at once, and works.
        let db = Db::open(DIR, opts.clone()).unwrap();
        db.put(&w(), b"k", name.as_bytes()).unwrap();
        assert_eq!(
            db.get(&r(), b"k").unwrap().as_deref(),
            Some(name.as_bytes())
        );
    }
}

/// A file whose number no database could have allocated (u64::MAX) is not the database's:
/// opening marked every log and blob file number as used, `number + 1`, which overflowed (a
/// panic in debug builds).
#[test]
fn a_file_numbered_beyond_any_database_is_left_alone() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    for name in ["18446744073709551615.log", "18446744073709551615.blob"] {
        let path = Path::new(DIR).join(name);
        crate::env::write_file(&env, &path, b"not ours", true).unwrap();
    }
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put(&w(), b"k", b"v").unwrap();
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_eq!(db.get(&r(), b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert!(env.exists(&Path::new(DIR).join("18446744073709551615.log")));
}

/// A logged batch whose sequence numbers run past the largest (crafted, with a good
/// checksum) is corruption naming the log; replaying it overflowed `seqno + count` (a panic in
/// debug builds).
#[test]
fn a_logged_batch_with_sequence_numbers_past_the_largest_is_corruption() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    let path = Path::new(DIR).join("000099.log");
    let mut log = LogWriter::new(env.new_writable_file(&path).unwrap());
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"v");
    batch.set_seqno(u64::MAX);
    log.add_record(batch.encoded()).unwrap();
    log.sync().unwrap();
    match Db::open(DIR, options(&env)) {
        Err(Error::Corruption { file, offset, .. }) => assert_eq!((file, offset), (path, 0)),
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// A log record that is not a write batch (crafted, with a good checksum, after a good one) is
/// corruption naming the log and the absolute offset of the bad operation: the record's offset
/// in the log plus the operation's offset in the record.
#[test]
fn a_malformed_batch_in_a_log_names_the_log_and_the_absolute_offset() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    let path = Path::new(DIR).join("000099.log");
    let mut log = LogWriter::new(env.new_writable_file(&path).unwrap());
    let mut good = WriteBatch::new();
    good.put(b"k", b"v");
    good.set_seqno(1);
    log.add_record(good.encoded()).unwrap();
    let second_record = log.file_len();
    let mut bad = WriteBatch::new();
    bad.put(b"k", b"v");
    bad.set_seqno(2);
    let mut bytes = bad.encoded().to_vec();
    bytes[12] = 7; // not an operation
    log.add_record(&bytes).unwrap();
    log.sync().unwrap();
    match Db::open(DIR, options(&env)) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (path, second_record + 12))
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_panic_while_the_state_mutex_is_held_poisons_the_database() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put(&w(), b"k", b"v").unwrap();
    let inner = db.inner.clone();
    let panicked = std::thread::spawn(move || {
        let _state = inner.state.lock().unwrap();
        panic!("a bug while holding the state mutex");
    })
    .join();
    assert!(panicked.is_err());
    let e = db.put(&w(), b"k", b"w").unwrap_err();
    assert!(e.is_poisoned(), "{e}");
    assert_eq!(db.get(&r(), b"k").unwrap().as_deref(), Some(&b"v"[..]));
    let e = db.compact_range(None, None).unwrap_err();
    assert!(e.is_poisoned(), "{e}");
}
