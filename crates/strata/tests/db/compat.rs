// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata opens the databases LevelDB 1.23 wrote (copies of the fixtures) and reads exactly
//! their contents; then writes to them, compacts, reopens, and reads what it wrote.

use strata_testkit as common;

use std::collections::BTreeMap;
use std::path::Path;

use strata::{Db, Options, WriteBatch, WriteOptions};

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan().unwrap().map(|item| item.unwrap()).collect()
}

fn check_fixture(root: &Path, name: &str, options: Options) {
    let copy = common::copy_fixture(root, name);
    let expected = common::expected_contents(root, name);
    let db = Db::open(copy.path(), options.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let got = contents(&db);
    assert_eq!(got.len(), expected.len(), "{name}: key count");
    assert!(got == expected, "{name}: contents differ");
    // Backward as well.
    let backward: Vec<_> = db.scan().unwrap().rev().map(|item| item.unwrap()).collect();
    assert!(
        backward.iter().rev().eq(expected
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
            .iter()),
        "{name}: backward"
    );
    for (k, v) in expected.iter().step_by(7) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{name}");
    }

    // Write on top, compact everything, reopen: the model must still match.
    let mut model = expected;
    let mut batch = WriteBatch::new();
    for (i, k) in model
        .keys()
        .cloned()
        .collect::<Vec<_>>()
        .iter()
        .enumerate()
        .step_by(5)
    {
        if i % 2 == 0 {
            batch.delete(k);
        } else {
            batch.put(k, b"rewritten by strata");
        }
    }
    for (i, k) in model.clone().keys().enumerate().step_by(5) {
        if i % 2 == 0 {
            model.remove(k);
        } else {
            model.insert(k.clone(), b"rewritten by strata".to_vec());
        }
    }
    db.write_opt(batch, &WriteOptions { sync: true }).unwrap();
    db.put(b"strata-was-here", b"yes").unwrap();
    model.insert(b"strata-was-here".to_vec(), b"yes".to_vec());
    db.compact_range(None, None).unwrap();
    assert!(contents(&db) == model, "{name}: after compaction");
    drop(db);
    let db = Db::open(copy.path(), options).unwrap();
    assert!(contents(&db) == model, "{name}: after reopen");
}

#[test]
fn strata_reads_and_updates_every_small_leveldb_fixture() {
    let root = common::project_fixtures();
    for name in ["log-only", "log-edge", "small", "uncompressed", "with-log"] {
        check_fixture(&root, name, Options::default());
    }
}

#[test]
fn strata_reads_and_updates_the_compacted_fixture_with_its_bloom_filters() {
    let Some(root) = common::shared_fixtures() else {
        return;
    };
    check_fixture(&root, "compacted", Options::default().with_bloom_filter(10));
}
