// SPDX-License-Identifier: MIT OR Apache-2.0
//! Tests of [`check`](super::check) on the in-memory env: a sound database, each kind of
//! damage it must find and place, and that it writes nothing.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::env::{read_file_to_vec, write_file, MemEnv};
use crate::Db;

const DIR: &str = "/db";

fn options(env: &MemEnv) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        block_size: 1024,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()))
}

/// A database with two tables (a flushed memtable each) and a log holding 100 more writes.
fn build(env: &MemEnv) {
    let db = Db::open(DIR, options(env)).unwrap();
    for round in 0..2u32 {
        for i in 0..1000u32 {
            let key = format!("key{:06}", i * 2 + round);
            db.put(key.as_bytes(), [b'v'; 100]).unwrap();
        }
        db.compact_range(None, None).unwrap();
    }
    for i in 0..100u32 {
        db.put(format!("log{i}").as_bytes(), b"x").unwrap();
    }
}

fn files(env: &MemEnv) -> Vec<(String, Vec<u8>)> {
    let mut names = env.children(Path::new(DIR)).unwrap();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let data = read_file_to_vec(env, &Path::new(DIR).join(&n)).unwrap();
            (n, data)
        })
        .collect()
}

fn find(env: &MemEnv, kind: FileKind) -> String {
    let mut names = env.children(Path::new(DIR)).unwrap();
    names.sort();
    names
        .into_iter()
        .rfind(|n| filename::parse_file_name(n).is_some_and(|(k, _)| k == kind))
        .unwrap()
}

fn flip_byte(env: &MemEnv, name: &str, offset: usize) {
    let path = Path::new(DIR).join(name);
    let mut data = read_file_to_vec(env, &path).unwrap();
    data[offset] ^= 0x40;
    write_file(env, &path, &data, true).unwrap();
}

#[test]
fn a_sound_database_reports_every_live_file_and_no_damage() {
    let env = MemEnv::new();
    build(&env);
    let report = check(DIR, &options(&env)).unwrap();
    assert!(report.is_sound(), "{:?}", report.damage);
    assert_eq!(
        report.comparator.as_deref(),
        Some("leveldb.BytewiseComparator")
    );
    let tables: Vec<_> = report.live_tables().collect();
    assert!(!tables.is_empty());
    let entries: u64 = tables.iter().map(|t| t.records).sum();
    assert_eq!(
        entries, 2000,
        "every flushed write, once each after compaction"
    );
    for t in &tables {
        let v = t.table.as_ref().unwrap();
        assert!(v.data_blocks > 1);
        assert_eq!(v.data_blocks, v.index_entries);
        assert!(v.raw_data_bytes > v.stored_data_bytes, "100 'v's compress");
        assert_eq!(v.key_bytes, 9 * v.entries);
    }
    let log_ops: u64 = report
        .files
        .iter()
        .filter(|f| f.kind == FileKind::Log && f.live)
        .map(|f| f.operations)
        .sum();
    assert_eq!(log_ops, 100);
}

#[test]
fn check_changes_no_file() {
    let env = MemEnv::new();
    build(&env);
    let before = files(&env);
    check(DIR, &options(&env)).unwrap();
    flip_byte(&env, &find(&env, FileKind::Table), 10);
    let damaged = files(&env);
    check(DIR, &options(&env)).unwrap();
    assert_eq!(files(&env), damaged);
    assert_ne!(before, damaged);
}

#[test]
fn a_flipped_byte_in_a_data_block_is_found_at_that_block() {
    let env = MemEnv::new();
    build(&env);
    let table = find(&env, FileKind::Table);
    flip_byte(&env, &table, 3000);
    let report = check(DIR, &options(&env)).unwrap();
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    let damage = &report.damage[0];
    assert_eq!(damage.file, Path::new(DIR).join(&table));
    let offset = damage.offset.unwrap();
    assert!(offset <= 3000 && 3000 - offset < 1200, "block at {offset}");
    assert!(damage.reason.contains("checksum"), "{damage}");
    // Every other block was still read.
    let checked = report.files.iter().find(|f| f.name == table).unwrap();
    let v = checked.table.as_ref().unwrap();
    assert_eq!(v.data_blocks + 1, v.index_entries);
}

#[test]
fn a_damaged_footer_or_index_is_found() {
    let env = MemEnv::new();
    build(&env);
    let table = find(&env, FileKind::Table);
    let size = env.file_size(&Path::new(DIR).join(&table)).unwrap() as usize;
    flip_byte(&env, &table, size - 1);
    let report = check(DIR, &options(&env)).unwrap();
    assert!(!report.is_sound());
    assert_eq!(report.damage[0].file, Path::new(DIR).join(&table));
    assert!(report.damage[0].offset.is_some());
}

#[test]
fn a_missing_or_resized_table_is_damage() {
    let env = MemEnv::new();
    build(&env);
    let table = find(&env, FileKind::Table);
    let path = Path::new(DIR).join(&table);
    let mut data = read_file_to_vec(&env, &path).unwrap();
    data.extend_from_slice(b"garbage");
    write_file(&env, &path, &data, true).unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert!(
        report
            .damage
            .iter()
            .any(|d| d.reason.contains("the MANIFEST records")),
        "{:?}",
        report.damage
    );

    env.remove_file(&path).unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    assert!(report.damage[0].reason.contains("is missing"));
    let number = filename::parse_file_name(&table).unwrap().1;
    assert_eq!(
        report.damage[0].file,
        filename::table_file(Path::new(DIR), number)
    );
}

#[test]
fn a_damaged_log_record_is_found_but_a_torn_tail_is_not() {
    let env = MemEnv::new();
    build(&env);
    let log = find(&env, FileKind::Log);
    let path = Path::new(DIR).join(&log);
    let data = read_file_to_vec(&env, &path).unwrap();
    // A torn tail: the last record cut short, as a crash leaves it.
    write_file(&env, &path, &data[..data.len() - 3], true).unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert!(report.is_sound(), "{:?}", report.damage);
    let checked = report.files.iter().find(|f| f.name == log).unwrap();
    assert!(checked.torn_tail);
    assert_eq!(checked.records, 99, "the torn record is not counted");
    // A tail garbled by a crash (the last record cut, stale bytes after it) is a tear too.
    let mut garbled = data[..data.len() - 3].to_vec();
    garbled.extend_from_slice(&[0x5a; 40]);
    write_file(&env, &path, &garbled, true).unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert!(report.is_sound(), "{:?}", report.damage);

    write_file(&env, &path, &data, true).unwrap();
    flip_byte(&env, &log, 40);
    let report = check(DIR, &options(&env)).unwrap();
    assert!(!report.is_sound());
    assert!(
        report.damage.iter().all(|d| d.file == path),
        "{:?}",
        report.damage
    );
}

/// Regression (issue #16): a log record that is not a write batch was placed at the record's
/// offset, not at the malformed operation's.
#[test]
fn a_log_record_that_is_not_a_batch_is_placed_at_the_malformed_operation() {
    let env = MemEnv::new();
    build(&env);
    let log = find(&env, FileKind::Log);
    let path = Path::new(DIR).join(&log);
    let mut writer = crate::log::LogWriter::new(env.new_writable_file(&path).unwrap());
    let mut good = crate::WriteBatch::new();
    good.put(b"log0", b"x");
    good.set_seqno(5000);
    writer.add_record(good.encoded()).unwrap();
    let second_record = writer.file_len();
    let mut bytes = good.encoded().to_vec();
    bytes[12] = 7; // not an operation
    writer.add_record(&bytes).unwrap();
    writer.sync().unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    let damage = &report.damage[0];
    assert_eq!(damage.file, path);
    assert_eq!(
        damage.offset,
        Some(second_record + crate::log::HEADER_SIZE as u64 + 12),
        "{damage}"
    );
    assert!(damage.reason.contains("unknown operation"), "{damage}");
}

#[test]
fn damaged_or_missing_current_and_manifest_are_found() {
    let env = MemEnv::new();
    build(&env);
    let manifest = find(&env, FileKind::Manifest);
    flip_byte(&env, &manifest, 20);
    let report = check(DIR, &options(&env)).unwrap();
    assert!(!report.is_sound());
    assert_eq!(report.damage[0].file, Path::new(DIR).join(&manifest));

    env.remove_file(&Path::new(DIR).join(&manifest)).unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert!(report.damage[0]
        .reason
        .contains("CURRENT names a MANIFEST that does not exist"));

    env.remove_file(&Path::new(DIR).join("CURRENT")).unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert!(report.damage[0].reason.contains("CURRENT is missing"));
    assert!(
        report.files.iter().all(|f| !f.live),
        "nothing is known live"
    );
}

/// Opening refuses a database whose live log is gone (the MANIFEST lost records, or the log was
/// deleted); `check` used to call it sound.
#[test]
fn a_missing_live_log_is_damage_as_it_makes_open_fail() {
    let env = MemEnv::new();
    build(&env);
    let log = find(&env, FileKind::Log);
    env.remove_file(&Path::new(DIR).join(&log)).unwrap();
    let open_error = Db::open_read_only(DIR, options(&env)).unwrap_err();
    let report = check(DIR, &options(&env)).unwrap();
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    assert_eq!(report.damage[0].file, Path::new(DIR).join(&log));
    assert!(
        report.damage[0].reason.contains("names as live is missing"),
        "{}",
        report.damage[0]
    );
    assert!(open_error.to_string().contains(&report.damage[0].reason));
}

/// Tables that overlap in a level above 0 make opening refuse the MANIFEST; `check` replayed
/// the MANIFEST by its own rules and never looked.
#[test]
fn overlapping_tables_in_level_1_are_damage_as_they_make_open_fail() {
    use crate::key::{append_internal_key, ValueKind};
    use crate::log::LogWriter;
    use crate::version::VersionEdit;
    let env = MemEnv::new();
    env.create_dir_all(Path::new(DIR)).unwrap();
    let ikey = |user_key: &[u8]| {
        let mut key = Vec::new();
        append_internal_key(&mut key, user_key, 1, ValueKind::Value);
        key
    };
    let mut edit = VersionEdit {
        comparator: Some("leveldb.BytewiseComparator".into()),
        log_number: Some(0),
        next_file_number: Some(7),
        last_sequence: Some(1),
        ..VersionEdit::default()
    };
    for (number, smallest, largest) in [(5, b"a", b"m"), (6, b"k", b"z")] {
        edit.new_files.push((
            1,
            FileMetaData {
                number,
                file_size: 100,
                smallest: ikey(smallest),
                largest: ikey(largest),
            },
        ));
    }
    let manifest = Path::new(DIR).join("MANIFEST-000002");
    let mut writer = LogWriter::new(env.new_writable_file(&manifest).unwrap());
    let mut record = Vec::new();
    edit.encode_into(&mut record);
    writer.add_record(&record).unwrap();
    drop(writer);
    write_file(
        &env,
        &Path::new(DIR).join("CURRENT"),
        b"MANIFEST-000002\n",
        true,
    )
    .unwrap();

    assert!(Db::open_read_only(DIR, options(&env)).is_err());
    let report = check(DIR, &options(&env)).unwrap();
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    assert_eq!(report.damage[0].file, manifest);
    assert!(
        report.damage[0]
            .reason
            .contains("tables 5 and 6 overlap in level 1"),
        "{}",
        report.damage[0]
    );
}

#[test]
fn a_directory_without_a_database_is_an_error() {
    let env = MemEnv::new();
    env.create_dir_all(Path::new("/empty")).unwrap();
    write_file(&env, Path::new("/empty/notes.txt"), b"hello", true).unwrap();
    let err = check("/empty", &options(&env)).unwrap_err();
    assert!(
        err.to_string().contains("/empty is not a database"),
        "{err}"
    );
    assert!(matches!(err, Error::NoDatabase { .. }), "{err}");
    let err = check("/nowhere", &options(&env)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/nowhere is not a database: the directory does not exist"
    );
}

#[test]
fn a_check_beside_an_open_writer_takes_no_lock_and_runs_again_on_damage() {
    let env = MemEnv::new();
    build(&env);
    let db = Db::open(DIR, options(&env)).unwrap();
    let report = check(DIR, &options(&env)).unwrap();
    assert!(report.is_sound(), "{:?}", report.damage);
    assert_eq!(report.checks_beside_writer, 1);
    // Damage that stays is reported, after every run.
    let table = find(&env, FileKind::Table);
    flip_byte(&env, &table, 10);
    let report = check(DIR, &options(&env)).unwrap();
    assert!(!report.is_sound());
    assert_eq!(report.checks_beside_writer, crate::check::CHECK_TRIES);
    drop(db);
    // With no writer, the check holds the lock and runs once.
    let report = check(DIR, &options(&env)).unwrap();
    assert!(!report.is_sound());
    assert_eq!(report.checks_beside_writer, 0);
}
