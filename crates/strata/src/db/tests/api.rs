// SPDX-License-Identifier: MIT OR Apache-2.0
//! The API on the in-memory env: reads, writes, iterators, snapshots, comparators, ranges and
//! properties.

use super::*;

#[test]
fn put_get_delete_and_reopen() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put_opt(b"a", b"1", &w()).unwrap();
    db.put_opt(b"b", b"2", &w()).unwrap();
    db.delete_opt(b"a", &w()).unwrap();
    db.put_opt(b"", b"empty key", &w()).unwrap();
    assert_eq!(db.get_opt(b"a", &r()).unwrap(), None);
    assert_eq!(db.get_opt(b"b", &r()).unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(
        db.get_opt(b"", &r()).unwrap().as_deref(),
        Some(&b"empty key"[..])
    );
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_eq!(db.get_opt(b"a", &r()).unwrap(), None);
    assert_eq!(db.get_opt(b"b", &r()).unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(scan(&db).len(), 2);
}

#[test]
fn iterators_hide_deletions_and_old_versions_both_ways() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for round in 0..3 {
        for i in 0..500u32 {
            let k = format!("k{i:04}");
            if (i + round) % 4 == 0 {
                db.delete_opt(k.as_bytes(), &w()).unwrap();
            } else {
                db.put_opt(k.as_bytes(), format!("{round}").as_bytes(), &w())
                    .unwrap();
            }
        }
        if round == 1 {
            db.compact_range(None, None).unwrap();
        }
    }
    let forward = scan(&db);
    let mut backward: Vec<_> = db
        .scan_opt(&r())
        .unwrap()
        .rev()
        .map(Result::unwrap)
        .collect();
    backward.reverse();
    assert_eq!(forward, backward);
    assert!(forward.iter().all(|(_, v)| v == b"2"));
    assert_eq!(forward.len(), 375);
    // Mixed directions on the cursor.
    let mut it = db.iter_opt(&r()).unwrap();
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
    db.put_opt(b"k", b"v1", &w()).unwrap();
    let s1 = db.snapshot();
    db.put_opt(b"k", b"v2", &w()).unwrap();
    db.delete_opt(b"k", &w()).unwrap();
    for i in 0..5000u32 {
        db.put_opt(format!("filler{i}").as_bytes(), [0u8; 100], &w())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    fn at(s: &Snapshot) -> ReadOptions<'_> {
        ReadOptions {
            snapshot: Some(s),
            ..ReadOptions::default()
        }
    }
    assert_eq!(
        db.get_opt(b"k", &at(&s1)).unwrap().as_deref(),
        Some(&b"v1"[..])
    );
    assert_eq!(db.get_opt(b"k", &r()).unwrap(), None);
    let snap_scan: Vec<_> = db
        .prefix_opt(b"k", &at(&s1))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(snap_scan, vec![(b"k".to_vec(), b"v1".to_vec())]);
    let other = Db::open("/other", options(&env)).unwrap();
    assert!(matches!(
        other.get_opt(b"k", &at(&s1)),
        Err(Error::InvalidArgument(_))
    ));
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
        db.put_opt(format!("{i:05}").as_bytes(), b"v", &w())
            .unwrap();
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
            db.put_opt(user_time_key(user, time), b"v", &w()).unwrap();
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
            keys(db.prefix_opt(prefix, &r()).unwrap()),
            newest_first,
            "{flushed}"
        );
        assert_eq!(
            keys(db.prefix_opt(prefix, &r()).unwrap().rev()),
            oldest_first,
            "{flushed}"
        );
        // A prefix longer than the user id, and one every key has.
        let with_time = [&prefix[..], &[0; 7]].concat();
        assert_eq!(keys(db.prefix_opt(&with_time, &r()).unwrap()), newest_first);
        assert_eq!(keys(db.prefix_opt([0, 0, 0], &r()).unwrap()).len(), 20);
        db.compact_range(None, None).unwrap();
    }
}

#[test]
fn oversized_keys_are_refused_and_nothing_is_applied() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"fine", b"v");
    batch.put(vec![0u8; MAX_KEY_SIZE + 1], b"v");
    let err = db.write_opt(batch, &w()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(db.get_opt(b"fine", &r()).unwrap(), None);
    // The handle goes on, and the refused batch never reached the log.
    db.put_opt(b"after", b"v", &w()).unwrap();
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_eq!(db.get_opt(b"fine", &r()).unwrap(), None);
    assert_eq!(scan(&db).len(), 1);
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
        db.put_opt(format!("{i:05}").as_bytes(), [7u8; 100], &w())
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

#[test]
fn a_range_consumed_from_both_ends_yields_each_key_once() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..500u32 {
        db.put_opt(format!("{i:04}").as_bytes(), b"v", &w())
            .unwrap();
    }
    for (start, end, expected) in [
        (0u32, 500u32, 500usize),
        (10, 11, 1),
        (10, 12, 2),
        (250, 250, 0),
    ] {
        let (s, e) = (format!("{start:04}"), format!("{end:04}"));
        let mut range = db.range_opt(s.as_bytes()..e.as_bytes(), &r()).unwrap();
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
        db.put_opt(format!("{i:04}").as_bytes(), b"old", &w())
            .unwrap();
    }
    let mut range = db.scan_opt(&r()).unwrap();
    assert_eq!(range.next().unwrap().unwrap().0, b"0000");
    for i in 0..300u32 {
        if i % 2 == 0 {
            db.delete_opt(format!("{i:04}").as_bytes(), &w()).unwrap();
        } else {
            db.put_opt(format!("{i:04}").as_bytes(), b"new", &w())
                .unwrap();
        }
    }
    db.put_opt(b"9999", b"new", &w()).unwrap();
    db.compact_range(None, None).unwrap();
    let rest: Vec<(Vec<u8>, Vec<u8>)> = range.rev().map(Result::unwrap).collect();
    assert_eq!(rest.len(), 299);
    assert_eq!(rest[0].0, b"0299");
    assert!(rest.iter().all(|(_, v)| v == b"old"));
}

/// `get_pinned` answers as `get` does, from the memtable (the value borrows the memtable), a
/// table (the value borrows its block) and a blob file (a copy); a pinned value stays right
/// after the block cache has dropped its block, the table has been compacted away, the
/// memtable has been flushed, and the database has been closed.
#[test]
fn get_pinned_borrows_table_blocks_and_matches_get() {
    let env = MemEnv::new();
    let db = Db::open(
        DIR,
        Options {
            block_cache_capacity: 16 << 10,
            blob_threshold: Some(1000),
            ..small_options(&env)
        },
    )
    .unwrap();
    let value = |i: u32| format!("value-{i:05}-{}", "x".repeat((i % 7) as usize)).into_bytes();
    for i in 0..2000u32 {
        db.put_opt(format!("k{i:05}").as_bytes(), value(i), &w())
            .unwrap();
    }
    db.put_opt(b"big", [9u8; 5000], &w()).unwrap();
    db.delete_opt(b"k00007", &w()).unwrap();

    // In the memtable: the value borrows it.
    let in_mem = db.get_pinned_opt(b"k01999", &r()).unwrap().unwrap();
    assert_eq!(&*in_mem, &value(1999)[..]);
    assert!(!in_mem.is_pinned_in_block());

    db.compact_range(None, None).unwrap();
    let pinned = db.get_pinned_opt(b"k00042", &r()).unwrap().unwrap();
    assert!(pinned.is_pinned_in_block());
    assert_eq!(&*pinned, &value(42)[..]);
    let big = db.get_pinned_opt(b"big", &r()).unwrap().unwrap();
    assert!(
        !big.is_pinned_in_block(),
        "a blob value is read into a buffer"
    );
    assert_eq!(&*big, &[9u8; 5000][..]);
    assert_eq!(db.get_pinned_opt(b"k00007", &r()).unwrap(), None);
    assert_eq!(db.get_pinned_opt(b"absent", &r()).unwrap(), None);
    for i in (0..2000u32).step_by(37) {
        let k = format!("k{i:05}");
        let got = db.get_pinned_opt(k.as_bytes(), &r()).unwrap();
        assert_eq!(
            got.map(PinnedValue::into_vec),
            db.get_opt(k.as_bytes(), &r()).unwrap(),
            "{k}"
        );
    }

    // Every other block through the 16 KiB cache, new writes and a compaction that replaces
    // the table the value came from: the pinned block is the value's own.
    for i in 0..2000u32 {
        db.get_opt(format!("k{i:05}").as_bytes(), &r()).unwrap();
        db.put_opt(format!("k{i:05}").as_bytes(), b"new", &w())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    assert_eq!(&*pinned, &value(42)[..]);
    assert_eq!(
        db.get_opt(b"k00042", &r()).unwrap().as_deref(),
        Some(&b"new"[..])
    );
    // The memtable the first value came from was flushed and dropped by the database long
    // ago, and the database is closed now: the value still reads the same.
    assert!(db.stats().memtable_bytes > 0);
    let clone = in_mem.clone();
    drop(db);
    assert_eq!(&*in_mem, &value(1999)[..]);
    assert_eq!(clone, in_mem);
    assert_eq!(clone.into_vec(), value(1999));
}

/// Every call takes every byte-like key type, and `range` every form of Rust range: this test
/// is mostly that it compiles. Each answer is checked too.
#[test]
// The owned and borrowed forms are the point: each is a type a caller may hold.
#[allow(
    clippy::unnecessary_to_owned,
    clippy::needless_borrows_for_generic_args
)]
fn byte_like_keys_and_every_range_form_are_accepted() {
    use std::ops::Bound;
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put("a", "1").unwrap(); // &str
    db.put(b"b", b"2").unwrap(); // &[u8; N]
    db.put(b"c".to_vec(), vec![b'3']).unwrap(); // Vec<u8>
    db.put(String::from("d"), String::from("4")).unwrap(); // String
    db.put(&b"e"[..], [b'5']).unwrap(); // &[u8], [u8; N]
    db.put(&String::from("f"), &vec![b'6']).unwrap(); // references
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"c".to_vec()).unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(
        db.get_pinned(String::from("d")).unwrap().as_deref(),
        Some(&b"4"[..])
    );
    let keys = |r: RangeIter| -> Vec<Vec<u8>> { r.keys().map(Result::unwrap).collect() };
    let k = |s: &str| s.as_bytes().to_vec();
    assert_eq!(keys(db.range(..).unwrap()).len(), 6);
    assert_eq!(keys(db.range("b".."d").unwrap()), [k("b"), k("c")]);
    assert_eq!(
        keys(db.range(b"b"..=b"d").unwrap()),
        [k("b"), k("c"), k("d")]
    );
    assert_eq!(keys(db.range(k("e")..).unwrap()), [k("e"), k("f")]);
    assert_eq!(keys(db.range(..String::from("b")).unwrap()), [k("a")]);
    assert_eq!(keys(db.range(..=&b"b"[..]).unwrap()), [k("a"), k("b")]);
    let bounds = (Bound::Excluded("a"), Bound::Included("c"));
    assert_eq!(keys(db.range(bounds).unwrap()), [k("b"), k("c")]);
    assert_eq!(keys(db.prefix(String::from("f")).unwrap()), [k("f")]);
    db.delete(String::from("a")).unwrap();
    db.delete_range("b", b"d".to_vec()).unwrap();
    assert_eq!(keys(db.scan().unwrap()), [k("d"), k("e"), k("f")]);
    let mut batch = WriteBatch::new();
    batch.put(String::from("x"), b"y");
    batch.delete(b"d".to_vec());
    batch.delete_range("e", "f");
    db.write(batch).unwrap();
    assert_eq!(keys(db.scan().unwrap()), [k("f"), k("x")]);
}

/// A seek to a key that lies in a table leaves the memtable unpositioned when its key filter
/// rules the key out (the merge puts the skiplist search off): stepping either way from there
/// must still meet the memtable's keys, a memtable entry of the sought key must still win, and
/// writes made after the cursor stay invisible.
#[test]
fn a_seek_that_puts_off_the_memtable_steps_into_it_both_ways() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    let key = |i: u32| format!("k{i:04}");
    for i in (0..400).step_by(2) {
        db.put_opt(key(i), b"table", &w()).unwrap();
    }
    db.compact_range(None, None).unwrap();
    for i in (1..400).step_by(2) {
        db.put_opt(key(i), b"mem", &w()).unwrap();
    }
    // Key 100 is in both; key 200 is deleted in the memtable.
    db.put_opt(key(100), b"mem", &w()).unwrap();
    db.delete_opt(key(200), &w()).unwrap();
    let mut it = db.iter().unwrap();
    // Written after the cursor: must not show, even where the seek put the memtable off.
    db.put_opt(key(300), b"late", &w()).unwrap();
    db.put_opt(key(301), b"late", &w()).unwrap();
    for i in (2..398).step_by(2) {
        it.seek(key(i).as_bytes());
        let (want_key, want_value) = match i {
            200 => (key(201), &b"mem"[..]),
            100 => (key(100), &b"mem"[..]),
            _ => (key(i), &b"table"[..]),
        };
        assert_eq!(
            (it.key(), it.value()),
            (want_key.as_bytes(), want_value),
            "seek {i}"
        );
        it.next();
        let after = if i == 200 { 202 } else { i + 1 };
        assert_eq!(it.key(), key(after).as_bytes(), "next after seeking {i}");
        let want = if after % 2 == 1 || after == 100 {
            &b"mem"[..]
        } else {
            b"table"
        };
        assert_eq!(it.value(), want, "value after seeking {i}");

        it.seek(key(i).as_bytes());
        it.prev();
        assert_eq!(it.key(), key(i - 1).as_bytes(), "prev after seeking {i}");
        assert_eq!(it.value(), b"mem", "prev value after seeking {i}");
    }
    // Back across the key deleted in the memtable.
    it.seek(key(202).as_bytes());
    it.prev();
    it.prev();
    assert_eq!(it.key(), key(199).as_bytes());
    // Written between a seek that put the memtable off and the step that positions it: the
    // new entries sort before the cursor's view of their keys, and stay invisible.
    it.seek(key(298).as_bytes());
    assert_eq!(it.value(), b"table");
    db.put_opt(key(298), b"later", &w()).unwrap();
    db.put_opt(key(299), b"later", &w()).unwrap();
    it.next();
    assert_eq!((it.key(), it.value()), (key(299).as_bytes(), &b"mem"[..]));
    it.status().unwrap();
}

/// With compression off on the real file system, table blocks are read in place from the
/// mapping: every read answers as the model says, a cursor reads across compactions, and a
/// value `get_pinned` returns is a copy (it never holds a table file open), so once
/// compaction deleted the tables no descriptor of the process points at a deleted table.
#[test]
fn uncompressed_tables_are_read_in_place_and_pinned_values_hold_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let env: Arc<dyn Env> = Arc::new(crate::PosixEnv::new());
    let opts = Options {
        create_if_missing: true,
        compression: crate::Compression::None,
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
    .with_env(env);
    let db = Db::open(dir.path(), opts).unwrap();
    let key = |i: u32| format!("key{i:06}");
    let value = |i: u32, round: u32| format!("{round}:{}", "v".repeat((i % 200) as usize));
    for i in 0..5000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let pinned: Vec<_> = (0..5000)
        .step_by(97)
        .map(|i| (i, db.get_pinned(key(i)).unwrap().unwrap()))
        .collect();
    assert!(pinned.iter().all(|(_, v)| !v.is_pinned_in_block()));
    let mut it = db.iter().unwrap();
    it.seek(key(100).as_bytes());
    // Rewrite everything and compact: the tables the first reads used are deleted.
    for i in 0..5000 {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    for (i, v) in &pinned {
        assert_eq!(&v[..], value(*i, 0).as_bytes());
    }
    // The cursor still reads its own state, in place, from the tables it holds.
    for i in 100..600 {
        assert_eq!(it.key(), key(i).as_bytes());
        assert_eq!(it.value(), value(i, 0).as_bytes());
        it.next();
    }
    it.status().unwrap();
    drop(it);
    db.wait_for_compactions().unwrap();
    for i in (0..5000).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 1).as_bytes());
    }
    let held_deleted: Vec<_> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|target| {
            target.starts_with(dir.path()) && target.to_string_lossy().ends_with("(deleted)")
        })
        .collect();
    assert!(held_deleted.is_empty(), "{held_deleted:?}");
    drop(pinned);
}

#[test]
fn puts_reuse_their_threads_queue_entry_across_databases_and_sizes() {
    let (env_a, env_b) = (MemEnv::new(), MemEnv::new());
    let a = Db::open(DIR, small_options(&env_a)).unwrap();
    let b = Db::open(DIR, small_options(&env_b)).unwrap();
    write::take_spare_put();
    let big = vec![b'x'; 100_000];
    let mut model_a = std::collections::BTreeMap::new();
    let mut model_b = std::collections::BTreeMap::new();
    for i in 0..200u32 {
        let key = format!("k{:03}", i % 50).into_bytes();
        let value = if i % 37 == 0 {
            big.clone()
        } else {
            format!("v{i}").into_bytes()
        };
        let (db, model) = if i % 3 == 0 {
            (&a, &mut model_a)
        } else {
            (&b, &mut model_b)
        };
        db.put_opt(&key, &value, &w()).unwrap();
        model.insert(key, value);
        // A queue entry comes back after each put, but not one that a 100 KB value grew.
        assert_eq!(write::take_spare_put().is_some(), i % 37 != 0, "put {i}");
        if i % 2 == 0 {
            // Put the taken entry back only every other time: both paths are exercised.
            db.put_opt(b"other", i.to_le_bytes(), &w()).unwrap();
            model.insert(b"other".to_vec(), i.to_le_bytes().to_vec());
        }
    }
    // A refused put leaves the database and the next put as they were.
    let huge_key = vec![0u8; MAX_KEY_SIZE + 1];
    assert!(a.put_opt(&huge_key, b"v", &w()).is_err());
    for (db, model) in [(&a, &model_a), (&b, &model_b)] {
        let got: std::collections::BTreeMap<_, _> = scan(db).into_iter().collect();
        assert_eq!(&got, model);
    }
    drop((a, b));
    let a = Db::open(DIR, small_options(&env_a)).unwrap();
    let got: std::collections::BTreeMap<_, _> = scan(&a).into_iter().collect();
    assert_eq!(got, model_a);
}

/// A cursor on the last entry if `back`, else on the first.
fn cursor_at_start(db: &Db, options: &ReadOptions<'_>, back: bool) -> DbIterator {
    let mut it = db.iter_opt(options).unwrap();
    if back {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    it
}

/// `it.walk_back(visit)` if `back`, else `it.walk_forward(visit)`.
fn walk<B>(
    it: &mut DbIterator,
    back: bool,
    visit: impl FnMut(&[u8], &[u8]) -> ControlFlow<B>,
) -> ControlFlow<B> {
    if back {
        it.walk_back(visit)
    } else {
        it.walk_forward(visit)
    }
}

/// Entries as a cursor's steps visit them: from the last entry backward (`prev`), or from the
/// first forward.
fn stepped(db: &Db, options: &ReadOptions<'_>, back: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = cursor_at_start(db, options, back);
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if back {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().unwrap();
    out
}

#[test]
fn walks_visit_what_cursor_steps_visit_and_stop_where_asked() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..3000u32 {
        db.put_opt(format!("k{i:05}").as_bytes(), format!("v{i}-0"), &w())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    let before = db.snapshot();
    // Newer versions beside the old ones in the same tables (the snapshot keeps the old),
    // then newer still in the memtable and level 0: runs whose neighbours share a user key,
    // and keys whose newest version another source holds.
    for i in (0..3000u32).step_by(3) {
        db.put_opt(format!("k{i:05}").as_bytes(), format!("v{i}-1"), &w())
            .unwrap();
    }
    for i in (0..3000u32).step_by(7) {
        db.delete_opt(format!("k{i:05}").as_bytes(), &w()).unwrap();
    }
    db.compact_range(None, None).unwrap();
    for i in (0..3000u32).step_by(5) {
        db.put_opt(format!("k{i:05}").as_bytes(), format!("v{i}-2"), &w())
            .unwrap();
    }
    // Keys of their own among the tables' (in the memtable): a walk through a table's run
    // meets another source's entry between two of its own.
    for i in (0..3000u32).step_by(4) {
        db.put_opt(format!("k{i:05}x").as_bytes(), format!("x{i}"), &w())
            .unwrap();
    }
    let latest = r();
    let old = ReadOptions {
        snapshot: Some(&before),
        ..ReadOptions::default()
    };
    for options in [&latest, &old] {
        check_walks(&db, options);
    }
    // One sorted level and nothing else: the lanes run through whole blocks.
    drop(before);
    db.compact_range(None, None).unwrap();
    check_walks(&db, &latest);
}

/// Walks both ways against cursor steps: whole, and broken after some entries, then stepped on
/// and turned.
fn check_walks(db: &Db, options: &ReadOptions<'_>) {
    let want_back = stepped(db, options, true);
    let mut want_forward = stepped(db, options, false);
    want_forward.reverse();
    assert_eq!(want_back, want_forward);
    assert!(want_back.len() > 2000);
    for back in [true, false] {
        let want: Vec<_> = if back {
            want_back.clone()
        } else {
            want_back.iter().rev().cloned().collect()
        };
        let mut it = cursor_at_start(db, options, back);
        let mut seen = Vec::new();
        let flow = walk(&mut it, back, |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            ControlFlow::<()>::Continue(())
        });
        assert!(flow.is_continue());
        assert!(!it.valid());
        it.status().unwrap();
        assert!(seen == want, "a whole walk (back {back}) differs");
        // Stopped after `n` entries, the cursor is on the next, and steps on from there.
        for n in [0usize, 1, 2, 15, 16, 17, 31, 100, 999, 1500] {
            let mut it = cursor_at_start(db, options, back);
            let mut count = 0;
            let flow = walk(&mut it, back, |k, _| {
                if count == n {
                    return ControlFlow::Break(k.to_vec());
                }
                count += 1;
                ControlFlow::Continue(())
            });
            assert_eq!(flow, ControlFlow::Break(want[n].0.clone()));
            assert_eq!((it.key(), it.value()), (&want[n].0[..], &want[n].1[..]));
            if back {
                it.prev();
            } else {
                it.next();
            }
            assert_eq!(
                it.key(),
                &want[n + 1].0[..],
                "the step after stopping at {n}"
            );
            if back {
                it.next();
                it.next();
            } else {
                it.prev();
                it.prev();
            }
            let turned = if n == 0 {
                None
            } else {
                Some(&want[n - 1].0[..])
            };
            assert_eq!(it.valid().then(|| it.key()), turned, "turned after {n}");
        }
    }
}

#[test]
fn a_walk_whose_closure_panics_leaves_the_cursor_on_an_entry() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..2000u32 {
        db.put_opt(format!("k{i:05}").as_bytes(), format!("v{i}"), &w())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    let want = stepped(&db, &r(), false);
    for back in [false, true] {
        for n in [1usize, 3, 10, 40, 100] {
            let mut it = cursor_at_start(&db, &r(), back);
            let mut count = 0;
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                walk(&mut it, back, |_, _| {
                    assert!(count < n, "the walk's closure panics");
                    count += 1;
                    ControlFlow::<()>::Continue(())
                })
            }));
            assert!(caught.is_err());
            // On an entry of the database, its key and value together, and steps go on from
            // it in order both ways.
            assert!(it.valid(), "after a panic at {n} (back {back})");
            let pos = want
                .iter()
                .position(|(k, _)| k == it.key())
                .expect("a key of the database");
            assert_eq!(
                it.value(),
                &want[pos].1[..],
                "after a panic at {n} (back {back})"
            );
            it.next();
            assert_eq!(
                (it.key(), it.value()),
                (&want[pos + 1].0[..], &want[pos + 1].1[..])
            );
            it.prev();
            it.prev();
            assert_eq!(
                (it.key(), it.value()),
                (&want[pos - 1].0[..], &want[pos - 1].1[..])
            );
            it.status().unwrap();
        }
    }
}
