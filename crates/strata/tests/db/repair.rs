// SPDX-License-Identifier: MIT OR Apache-2.0
//! `repair`: a database that will not open (missing CURRENT or MANIFEST, a damaged table, a
//! damaged log) comes back with every record that can be read, and never a wrong value.

use std::collections::BTreeMap;
use std::path::Path;

use strata::{repair, Db, Error, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        compression: strata::Compression::None,
        ..Options::default()
    }
}

/// Every value each key ever had.
type History = BTreeMap<Vec<u8>, Vec<Vec<u8>>>;

/// Fills a database with tables on several levels and a log; returns the model and history.
fn build_with_history(dir: &Path) -> (Model, History) {
    let db = Db::open(dir, options()).unwrap();
    let mut model = Model::new();
    let mut history = History::new();
    for round in 0..3u32 {
        for i in 0..4000u32 {
            let k = format!("key{:06}", (i * 7 + round) % 4000).into_bytes();
            let v = format!("r{round}-i{i}-{}", "p".repeat(60)).into_bytes();
            db.put(&k, &v).unwrap();
            history.entry(k.clone()).or_default().push(v.clone());
            model.insert(k, v);
        }
        if round == 0 {
            db.compact_range(None, None).unwrap();
        }
    }
    for i in (0..4000u32).step_by(9) {
        let k = format!("key{i:06}").into_bytes();
        db.delete(&k).unwrap();
        model.remove(&k);
    }
    (model, history)
}

fn build(dir: &Path) -> Model {
    build_with_history(dir).0
}

fn contents(dir: &Path) -> Model {
    let db = Db::open(dir, options()).unwrap();
    db.scan().unwrap().map(Result::unwrap).collect()
}

fn largest_table(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ldb"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("a table")
}

#[test]
fn repairing_a_healthy_database_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let model = build(tmp.path());
    repair(tmp.path(), &options()).unwrap();
    assert!(contents(tmp.path()) == model);
    repair(tmp.path(), &options()).unwrap();
    assert!(
        contents(tmp.path()) == model,
        "a second repair changes nothing either"
    );
}

#[test]
fn a_lost_current_and_manifest_are_rebuilt_from_tables_and_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let model = build(tmp.path());
    std::fs::remove_file(tmp.path().join("CURRENT")).unwrap();
    for e in std::fs::read_dir(tmp.path()).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("MANIFEST-")
        {
            std::fs::remove_file(p).unwrap();
        }
    }
    // Without CURRENT, opening refuses to create a new database over the old files.
    let err = Db::open(tmp.path(), options()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let report = repair(tmp.path(), &options()).unwrap();
    assert!(report.logs_replayed >= 1);
    assert!(contents(tmp.path()) == model);
}

#[test]
fn a_damaged_table_block_loses_only_that_block() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, history) = build_with_history(tmp.path());
    // Smash 100 bytes in the middle of the largest table (uncompressed 4 KiB blocks).
    let table = largest_table(tmp.path());
    let mut bytes = std::fs::read(&table).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 100] {
        *b ^= 0x5a;
    }
    std::fs::write(&table, &bytes).unwrap();

    // A full scan now reports the damage instead of returning wrong data.
    {
        let db = Db::open(tmp.path(), options()).unwrap();
        let scan: Result<Vec<_>, Error> = db.scan().unwrap().collect();
        let err = scan.unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(
            err.to_string()
                .contains(&*table.file_name().unwrap().to_string_lossy()),
            "{err}"
        );
    }
    let report = repair(tmp.path(), &options()).unwrap();
    assert!(report.damaged_pieces >= 1);
    assert!(report
        .moved_to_lost
        .iter()
        .any(|p| p.file_name() == table.file_name()));
    let got = contents(tmp.path());
    // Nothing wrong: every value present is one the key really had (the current one, or an
    // older version whose newer one, or tombstone, was in the damaged block).
    let wrong = got
        .iter()
        .filter(|(k, v)| !history.get(*k).is_some_and(|h| h.contains(v)))
        .count();
    assert_eq!(wrong, 0, "values the keys never had");
    let stale = got
        .iter()
        .filter(|(k, v)| model.get(*k) != Some(*v))
        .count();
    assert!(stale <= 120, "{stale} keys show an older version");
    // Only the keys of one or two 4 KiB blocks (about 50 entries each) may be missing.
    let missing = model.keys().filter(|k| !got.contains_key(*k)).count();
    assert!(missing <= 120, "{missing} keys lost");
}

#[test]
fn a_damaged_log_record_loses_only_that_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = Model::new();
    {
        let db = Db::open(
            dir,
            Options {
                write_buffer_size: 64 << 20,
                ..options()
            },
        )
        .unwrap();
        for i in 0..5000u32 {
            let k = format!("k{i:04}").into_bytes();
            db.put(&k, b"value").unwrap();
            model.insert(k, b"value".to_vec());
        }
    }
    // The data is only in the log: damage a byte in its middle.
    let log = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&log, &bytes).unwrap();
    repair(dir, &options()).unwrap();
    let got = contents(dir);
    assert!(got.iter().all(|(k, v)| model.get(k) == Some(v)));
    // The log spans five 32 KiB blocks of ~32-byte records. The damaged record's block is
    // dropped from the damage on (a bad checksum makes the rest of its block untrustworthy):
    // at most one block's worth of records, about 1,050.
    assert!(bytes.len() > 4 * 32 * 1024, "the log spans several blocks");
    let missing = model.len() - got.len();
    assert!(missing > 0 && missing <= 1100, "{missing} records lost");
}

#[test]
fn repair_refuses_an_open_database() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), options()).unwrap();
    assert!(matches!(
        repair(tmp.path(), &options()),
        Err(Error::Locked { .. })
    ));
    drop(db);
}

/// Regression (issue #15): a footer whose block handles claim sizes near `u64::MAX` made
/// repair's `offset + size + trailer` overflow (a panic in debug builds). The handles are now
/// damage like any other: reads name the table and the handle's offset, and repair finds the
/// data blocks without them.
#[test]
fn a_footer_handle_near_u64_max_is_damage_not_an_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), options()).unwrap();
    let mut model = Model::new();
    for i in 0..200u32 {
        let (k, v) = (format!("key{i:04}").into_bytes(), vec![b'v'; 50]);
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.compact_range(None, None).unwrap();
    drop(db);
    let table = largest_table(tmp.path());
    let mut bytes = std::fs::read(&table).unwrap();
    // Metaindex at offset 1 and index at offset 2, each u64::MAX - 2 bytes long: two varints
    // of 1 and 10 bytes each, then the zero padding and the magic number left as they were.
    let footer = bytes.len() - 48;
    let mut handles = Vec::new();
    for offset in [1u8, 2] {
        handles.push(offset);
        let mut size = u64::MAX - 2;
        while size >= 0x80 {
            handles.push(size as u8 | 0x80);
            size >>= 7;
        }
        handles.push(size as u8);
    }
    bytes[footer..footer + 40].fill(0);
    bytes[footer..footer + handles.len()].copy_from_slice(&handles);
    std::fs::write(&table, &bytes).unwrap();

    let err = Db::open(tmp.path(), options())
        .and_then(|db| db.get(b"key0001"))
        .unwrap_err();
    match &err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!((file, *offset), (&table, 2), "{err}");
        }
        other => panic!("expected corruption naming the table, got {other}"),
    }
    let report = repair(tmp.path(), &options()).unwrap();
    assert!(report.damaged_pieces >= 1, "{report:?}");
    assert!(report
        .moved_to_lost
        .iter()
        .any(|p| p.file_name() == table.file_name()));
    assert!(
        contents(tmp.path()) == model,
        "the data blocks were all found"
    );
}
