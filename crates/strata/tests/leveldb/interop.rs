// SPDX-License-Identifier: MIT OR Apache-2.0
//! LevelDB 1.23 itself (Debian's libleveldb, through its C API) reads what strata writes.
//!
//! Each case writes a whole database directory with strata's format code alone: tables on two
//! levels (compressed or not, with or without a bloom filter), a write-ahead log of batches on
//! top, a MANIFEST and CURRENT. LevelDB then opens it with paranoid checks, replays the log,
//! and must return exactly the contents a `BTreeMap` model holds, by a forward scan, a backward
//! scan, and a point lookup of every present and many absent keys (through strata's filters
//! when they are on). strata's Snappy tables compress data blocks in chunks and add where
//! they start to the index entries (`table::chunks`); the cases check that they do.
//!
//! Run with `cargo test -p strata --features leveldb-interop --test leveldb interop::` after
//! `scripts/install-peers.sh --leveldb-only`.

#![cfg(feature = "leveldb-interop")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use strata::env::write_file;
use strata::filter::BloomFilterPolicy;
use strata::key::{append_internal_key, ValueKind};
use strata::log::LogWriter;
use strata::table::{Compression, Table, TableBuilder, TableOptions};
use strata::version::{FileMetaData, VersionEdit};
use strata::{Env, PosixEnv, WriteBatch};

use strata_testkit as common;
use strata_testkit::leveldb;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// LevelDB as these tests open it (strata-testkit's safe wrapper of its C API): paranoid
/// checks, checksums verified, closed on drop.
struct LevelDb(leveldb::LevelDb);

impl LevelDb {
    fn open(dir: &Path, bloom_bits: Option<i32>) -> Result<LevelDb, String> {
        Self::open_with(dir, bloom_bits, false)
    }

    fn open_with(dir: &Path, bloom_bits: Option<i32>, create: bool) -> Result<LevelDb, String> {
        let options = leveldb::Options {
            create_if_missing: create,
            paranoid_checks: true,
            bloom_bits,
            verify_checksums: true,
            ..leveldb::Options::default()
        };
        leveldb::LevelDb::open(dir, &options).map(LevelDb)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.0.get(key, None)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.0.put(key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<(), String> {
        self.0.delete(key)
    }

    fn compact_all(&self) {
        self.0.compact_range(None, None);
    }

    fn scan(&self, reverse: bool) -> Result<Entries, String> {
        let mut out = Vec::new();
        let mut it = self.0.iter(None);
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status()?;
        if reverse {
            out.reverse();
        }
        Ok(out)
    }
}

fn ikey(user: &[u8], seqno: u64, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::new();
    append_internal_key(&mut k, user, seqno, kind);
    k
}

fn user(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

fn value(i: u32, version: u32) -> Vec<u8> {
    // Half varied, half repetitive: compressible, like db_bench's values.
    let mut v = format!("v{version}-{i}-").into_bytes();
    let mut x = i.wrapping_mul(2_654_435_761).wrapping_add(version);
    while v.len() < 60 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(b'a' + (x % 26) as u8);
    }
    v.extend(std::iter::repeat_n(b'x', 40 + (i % 50) as usize));
    v
}

/// Writes one table of `entries` (sorted internal keys) and returns its metadata.
fn write_table(
    dir: &Path,
    number: u64,
    options: &TableOptions,
    entries: &[(Vec<u8>, Vec<u8>)],
) -> FileMetaData {
    let env = PosixEnv::new();
    let path = dir.join(format!("{number:06}.ldb"));
    let mut builder = TableBuilder::new(options.clone(), env.new_writable_file(&path).unwrap());
    for (k, v) in entries {
        builder.add(k, v).unwrap();
    }
    let file_size = builder.finish(true).unwrap();
    FileMetaData {
        number,
        file_size,
        smallest: entries.first().unwrap().0.clone(),
        largest: entries.last().unwrap().0.clone(),
    }
}

/// Builds a database with strata's format code and returns the model of its contents.
fn write_database(dir: &Path, options: &TableOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    const N: u32 = 20_000;
    let mut model = BTreeMap::new();
    // Level 2, older: every key, seqnos 1..=N.
    let l2: Vec<_> = (0..N)
        .map(|i| {
            (
                ikey(&user(i), u64::from(i) + 1, ValueKind::Value),
                value(i, 0),
            )
        })
        .collect();
    for i in 0..N {
        model.insert(user(i), value(i, 0));
    }
    // Level 1, newer: every third key overwritten, every tenth key deleted.
    let mut seq = u64::from(N);
    let mut l1 = Vec::new();
    for i in 0..N {
        if i % 3 == 0 {
            seq += 1;
            l1.push((ikey(&user(i), seq, ValueKind::Value), value(i, 1)));
            model.insert(user(i), value(i, 1));
        } else if i % 10 == 1 {
            seq += 1;
            l1.push((ikey(&user(i), seq, ValueKind::Deletion), Vec::new()));
            model.remove(&user(i));
        }
    }
    let last_table_seq = seq;
    let f2 = write_table(dir, 1, options, &l2);
    let f1 = write_table(dir, 2, options, &l1);

    // The log, replayed on top: batches of puts and deletes, new keys and overwrites.
    let env = PosixEnv::new();
    let mut log = LogWriter::new(env.new_writable_file(&dir.join("000004.log")).unwrap());
    for b in 0..50u32 {
        let mut batch = WriteBatch::new();
        batch.set_seqno(seq + 1);
        for j in 0..40u32 {
            let i = (b * 397 + j * 31) % (N + 500);
            if j % 5 == 0 {
                batch.delete(user(i));
                model.remove(&user(i));
            } else {
                batch.put(user(i), value(i, 2 + b));
                model.insert(user(i), value(i, 2 + b));
            }
        }
        seq += u64::from(batch.count());
        log.add_record(batch.encoded()).unwrap();
    }
    // One record large enough to be fragmented across blocks.
    let mut batch = WriteBatch::new();
    batch.set_seqno(seq + 1);
    batch.put(b"large", vec![7u8; 100_000]);
    model.insert(b"large".to_vec(), vec![7u8; 100_000]);
    log.add_record(batch.encoded()).unwrap();
    log.sync().unwrap();

    // MANIFEST-000003: the comparator, then the live files and the counters.
    let mut manifest = LogWriter::new(env.new_writable_file(&dir.join("MANIFEST-000003")).unwrap());
    let mut first = Vec::new();
    VersionEdit {
        comparator: Some("leveldb.BytewiseComparator".into()),
        ..Default::default()
    }
    .encode_into(&mut first);
    manifest.add_record(&first).unwrap();
    let mut edit = VersionEdit {
        log_number: Some(4),
        prev_log_number: Some(0),
        next_file_number: Some(5),
        last_sequence: Some(last_table_seq),
        ..Default::default()
    };
    edit.new_files.push((1, f1));
    edit.new_files.push((2, f2));
    let mut second = Vec::new();
    edit.encode_into(&mut second);
    manifest.add_record(&second).unwrap();
    manifest.sync().unwrap();
    write_file(&env, &dir.join("CURRENT"), b"MANIFEST-000003\n", true).unwrap();
    model
}

fn check_case(compression: Compression, bloom: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let options = TableOptions {
        compression,
        filter_policy: bloom.then(|| Arc::new(BloomFilterPolicy::new(10)) as _),
        ..TableOptions::default()
    };
    let model = write_database(tmp.path(), &options);
    let case = format!("compression {compression:?}, bloom {bloom}");
    // strata's Snappy tables hold blocks compressed in chunks, their starts after each
    // handle in the index: LevelDB must read those too.
    let env = PosixEnv::new();
    for number in [1, 2] {
        let path = tmp.path().join(format!("{number:06}.ldb"));
        let size = std::fs::metadata(&path).unwrap().len();
        let file = env.new_random_access_file(&path).unwrap();
        let verification = Table::open(options.clone(), file, &path, size, None)
            .unwrap()
            .verify();
        assert!(
            verification.damage.is_empty(),
            "{case}: {:?}",
            verification.damage
        );
        let chunked = verification.chunked_blocks;
        assert_eq!(
            chunked > 0,
            compression == Compression::Snappy,
            "{case}: {chunked} chunked"
        );
    }
    let db =
        LevelDb::open(tmp.path(), bloom.then_some(10)).unwrap_or_else(|e| panic!("{case}: {e}"));
    let expected: Vec<_> = model.clone().into_iter().collect();
    assert!(db.scan(false).unwrap() == expected, "{case}: forward scan");
    assert!(db.scan(true).unwrap() == expected, "{case}: backward scan");
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{case}: get {k:?}");
    }
    let mut absent = 0;
    for i in 0..21_000 {
        let k = user(i);
        if !model.contains_key(&k) {
            assert_eq!(db.get(&k).unwrap(), None, "{case}: absent {k:?}");
            absent += 1;
        }
    }
    assert!(absent > 2000, "{case}: {absent} absent keys probed");
}

#[test]
fn leveldb_reads_uncompressed_tables_without_filters() {
    check_case(Compression::None, false);
}

#[test]
fn leveldb_reads_snappy_tables_without_filters() {
    check_case(Compression::Snappy, false);
}

#[test]
fn leveldb_reads_uncompressed_tables_through_strata_bloom_filters() {
    check_case(Compression::None, true);
}

#[test]
fn leveldb_reads_snappy_tables_through_strata_bloom_filters() {
    check_case(Compression::Snappy, true);
}

// ---- Database level: strata's databases in LevelDB, and back. ----

use std::collections::BTreeMap as Model;

fn strata_contents(db: &strata::Db) -> Entries {
    db.scan().unwrap().map(|item| item.unwrap()).collect()
}

/// Applies a deterministic mix of puts and deletes through `put` and `delete`, mirrored in
/// `model`.
fn churn(
    model: &mut Model<Vec<u8>, Vec<u8>>,
    seed: u32,
    count: u32,
    mut put: impl FnMut(&[u8], &[u8]),
    mut delete: impl FnMut(&[u8]),
) {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    for i in 0..count {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let k = user(x % 60_000);
        if x.is_multiple_of(7) {
            delete(&k);
            model.remove(&k);
        } else {
            let v = value(x % 60_000, seed * 1000 + i % 1000);
            put(&k, &v);
            model.insert(k, v);
        }
    }
}

#[test]
fn leveldb_reads_fixture_databases_that_strata_updated_and_compacted() {
    let root = common::project_fixtures();
    for name in ["log-only", "log-edge", "small", "uncompressed", "with-log"] {
        let copy = common::copy_fixture(&root, name);
        let mut model: Model<Vec<u8>, Vec<u8>> = common::expected_contents(&root, name);
        {
            let db = strata::Db::open(copy.path(), strata::Options::default()).unwrap();
            churn(
                &mut model,
                7,
                30_000,
                |k, v| db.put(k, v).unwrap(),
                |k| db.delete(k).unwrap(),
            );
            db.compact_range(None, None).unwrap();
            churn(
                &mut model,
                8,
                2_000,
                |k, v| db.put(k, v).unwrap(),
                |k| db.delete(k).unwrap(),
            );
        }
        let leveldb = LevelDb::open(copy.path(), None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected: Entries = model.into_iter().collect();
        assert!(
            leveldb.scan(false).unwrap() == expected,
            "{name}: LevelDB's scan"
        );
        assert!(
            leveldb.scan(true).unwrap() == expected,
            "{name}: LevelDB's reverse scan"
        );
    }
}

#[test]
fn databases_move_between_strata_and_leveldb_with_default_options() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut model = Model::new();
    // strata creates it, with enough data for flushes and compactions.
    {
        let options = strata::Options {
            create_if_missing: true,
            ..strata::Options::default()
        };
        let db = strata::Db::open(&dir, options).unwrap();
        churn(
            &mut model,
            1,
            120_000,
            |k, v| db.put(k, v).unwrap(),
            |k| db.delete(k).unwrap(),
        );
    }
    // LevelDB reads it and writes more.
    {
        let leveldb = LevelDb::open(&dir, None).unwrap();
        let expected: Entries = model.clone().into_iter().collect();
        assert!(
            leveldb.scan(false).unwrap() == expected,
            "LevelDB reads strata's database"
        );
        churn(
            &mut model,
            2,
            60_000,
            |k, v| leveldb.put(k, v).unwrap(),
            |k| leveldb.delete(k).unwrap(),
        );
        leveldb.compact_all();
        churn(
            &mut model,
            3,
            5_000,
            |k, v| leveldb.put(k, v).unwrap(),
            |k| leveldb.delete(k).unwrap(),
        );
    }
    // strata reads LevelDB's changes, including its unflushed log.
    {
        let db = strata::Db::open(&dir, strata::Options::default()).unwrap();
        let expected: Entries = model.clone().into_iter().collect();
        assert!(
            strata_contents(&db) == expected,
            "strata reads LevelDB's changes"
        );
    }
    // And a database LevelDB creates opens in strata.
    let dir2 = tmp.path().join("db2");
    let mut model2 = Model::new();
    {
        let leveldb = LevelDb::open_with(&dir2, None, true).unwrap();
        churn(
            &mut model2,
            4,
            50_000,
            |k, v| leveldb.put(k, v).unwrap(),
            |k| leveldb.delete(k).unwrap(),
        );
    }
    let db = strata::Db::open(&dir2, strata::Options::default()).unwrap();
    let expected: Entries = model2.into_iter().collect();
    assert!(
        strata_contents(&db) == expected,
        "strata reads a database LevelDB created"
    );
}

#[test]
fn leveldb_opens_a_checkpoint_of_a_live_strata_database() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, backup) = (tmp.path().join("db"), tmp.path().join("backup"));
    let mut model = Model::new();
    let options = strata::Options {
        create_if_missing: true,
        write_buffer_size: 256 << 10,
        ..strata::Options::default()
    };
    let db = strata::Db::open(&dir, options).unwrap();
    // Tables on several levels, and unflushed writes in the log that the checkpoint flushes.
    churn(
        &mut model,
        5,
        60_000,
        |k, v| db.put(k, v).unwrap(),
        |k| db.delete(k).unwrap(),
    );
    db.compact_range(None, None).unwrap();
    churn(
        &mut model,
        6,
        20_000,
        |k, v| db.put(k, v).unwrap(),
        |k| db.delete(k).unwrap(),
    );
    db.checkpoint(&backup).unwrap();
    // Later writes to the open database are not in the checkpoint.
    let expected: Entries = model.clone().into_iter().collect();
    churn(
        &mut model,
        7,
        1_000,
        |k, v| db.put(k, v).unwrap(),
        |k| db.delete(k).unwrap(),
    );
    let leveldb = LevelDb::open(&backup, None).unwrap();
    assert!(
        leveldb.scan(false).unwrap() == expected,
        "LevelDB reads the checkpoint as it was"
    );
    assert!(leveldb.scan(true).unwrap() == expected, "backward too");
    for (k, v) in expected.iter().step_by(97) {
        assert_eq!(leveldb.get(k).unwrap().as_ref(), Some(v));
    }
    // LevelDB writes to it, and strata opens what LevelDB left.
    leveldb.put(b"written-by-leveldb", b"1").unwrap();
    drop(leveldb);
    let copy = strata::Db::open(&backup, strata::Options::default()).unwrap();
    assert_eq!(
        copy.get(b"written-by-leveldb").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(strata_contents(&copy).len(), expected.len() + 1);
    assert_eq!(strata_contents(&db), model.into_iter().collect::<Entries>());
}

/// Set in a child process of `strata_and_leveldb_exclude_each_other_across_processes`: the
/// database directory the child opens with LevelDB and holds until a file appears.
const LOCK_CHILD_ENV: &str = "STRATA_TEST_LEVELDB_LOCK_CHILD";

#[test]
fn strata_and_leveldb_exclude_each_other_in_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let created = LevelDb::open_with(dir.path(), None, true).unwrap();
    let err = strata::Db::open(dir.path(), strata::Options::default())
        .expect_err("strata opened a database LevelDB holds");
    assert!(matches!(err, strata::Error::Locked { .. }), "{err}");
    drop(created);

    let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
    let err = LevelDb::open(dir.path(), None)
        .err()
        .expect("LevelDB opened a database strata holds");
    assert!(err.to_lowercase().contains("lock"), "{err}");
    drop(db);
    LevelDb::open(dir.path(), None).unwrap();
}

#[test]
fn strata_and_leveldb_exclude_each_other_across_processes() {
    if let Ok(dir) = std::env::var(LOCK_CHILD_ENV) {
        // The child: hold LevelDB's lock until the parent says it is done.
        let dir = Path::new(&dir);
        let db = LevelDb::open_with(dir, None, true).unwrap();
        write_file(&PosixEnv::new(), &dir.join("child-ready"), b"", true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !dir.join("parent-done").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(db);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "interop::strata_and_leveldb_exclude_each_other_across_processes",
            "--nocapture",
        ])
        .env(LOCK_CHILD_ENV, dir.path())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !dir.path().join("child-ready").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never opened LevelDB"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let result = strata::Db::open(dir.path(), strata::Options::default());
    write_file(&PosixEnv::new(), &dir.path().join("parent-done"), b"", true).unwrap();
    assert!(child.wait().unwrap().success());
    let err = result.expect_err("strata opened a database another process's LevelDB holds");
    assert!(matches!(err, strata::Error::Locked { .. }), "{err}");
    // Once the child has exited, strata opens it.
    strata::Db::open(dir.path(), strata::Options::default()).unwrap();
}

/// A database that has used blob files (key-value separation) is refused by LevelDB with an
/// error that says why, rather than read with pointers for values; one that never had a value
/// over the threshold stays LevelDB's.
#[test]
fn leveldb_refuses_a_database_with_blob_files_and_opens_one_without() {
    for (large, refused) in [(false, false), (true, true)] {
        let dir = tempfile::tempdir().unwrap();
        let options = strata::Options {
            create_if_missing: true,
            blob_threshold: Some(4096),
            ..strata::Options::default()
        };
        let db = strata::Db::open(dir.path(), options).unwrap();
        let len = if large { 50_000 } else { 100 };
        db.put(b"key", vec![7u8; len]).unwrap();
        db.compact_range(None, None).unwrap();
        drop(db);
        match LevelDb::open_with(dir.path(), None, false) {
            Ok(ldb) => {
                assert!(!refused, "LevelDB opened a database with blob files");
                assert_eq!(ldb.get(b"key").unwrap(), Some(vec![7u8; len]));
            }
            Err(e) => {
                assert!(refused, "LevelDB refused a plain database: {e}");
                assert!(
                    e.contains("strata key-value separation") && e.contains("comparator"),
                    "{e}"
                );
            }
        }
    }
}

/// A database that has taken a range deletion is refused by LevelDB with an error that says
/// why, rather than opened with the deleted keys back: whether the deletion is still only in
/// the log (the process died before a flush), in the MANIFEST, or already applied by
/// compaction. One that never took one stays LevelDB's.
#[test]
fn leveldb_refuses_a_database_that_took_a_range_deletion() {
    for (deletes, flushed) in [(false, true), (true, false), (true, true)] {
        let dir = tempfile::tempdir().unwrap();
        let options = strata::Options {
            create_if_missing: true,
            ..strata::Options::default()
        };
        let db = strata::Db::open(dir.path(), options).unwrap();
        for i in 0..100u32 {
            db.put(format!("k{i:03}"), b"v").unwrap();
        }
        if deletes {
            db.delete_range("k010", "k090").unwrap();
        }
        if flushed {
            db.compact_range(None, None).unwrap();
            db.wait_for_compactions().unwrap();
        }
        drop(db);
        match LevelDb::open_with(dir.path(), None, false) {
            Ok(ldb) => {
                assert!(!deletes, "LevelDB opened a database with range deletions");
                assert_eq!(ldb.get(b"k050").unwrap(), Some(b"v".to_vec()));
            }
            Err(e) => {
                assert!(deletes, "LevelDB refused a plain database: {e}");
                assert!(
                    e.contains("strata range deletions") && e.contains("comparator"),
                    "{e}"
                );
            }
        }
        // strata itself reads it back with the range gone.
        let db = strata::Db::open(dir.path(), strata::Options::default()).unwrap();
        let want = if deletes { 20 } else { 100 };
        assert_eq!(db.scan().unwrap().count(), want);
    }
}
