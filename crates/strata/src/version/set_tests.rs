// SPDX-License-Identifier: MIT OR Apache-2.0
//! Tests of `VersionSet` and the MANIFEST replay: damaged CURRENT and MANIFEST files, counters,
//! overlaps, the blob marker, comparators, ranges.

use super::*;
use crate::comparator::bytewise;
use crate::env::{write_file, MemEnv};
use crate::key::{append_internal_key, ValueKind};
use crate::version::BlobFileMeta;

const DIR: &str = "/db";

fn env_with_current(current: &[u8]) -> MemEnv {
    let env = MemEnv::new();
    env.create_dir_all(Path::new(DIR)).unwrap();
    write_file(&env, Path::new("/db/CURRENT"), current, true).unwrap();
    env
}

fn write_manifest(env: &MemEnv, edits: &[VersionEdit]) {
    let file = env
        .new_writable_file(Path::new("/db/MANIFEST-000002"))
        .unwrap();
    let mut w = LogWriter::new(file);
    for e in edits {
        let mut r = Vec::new();
        e.encode_into(&mut r);
        w.add_record(&r).unwrap();
    }
}

fn recover(env: &MemEnv) -> Result<VersionSet> {
    let mut vs = VersionSet::new(
        Path::new(DIR),
        Arc::new(env.clone()),
        InternalKeyComparator::new(bytewise()),
    );
    vs.recover().map(|()| vs)
}

fn full_edit() -> VersionEdit {
    VersionEdit {
        comparator: Some("leveldb.BytewiseComparator".into()),
        log_number: Some(3),
        next_file_number: Some(4),
        last_sequence: Some(0),
        ..VersionEdit::default()
    }
}

fn corruption_reason(result: Result<VersionSet>) -> String {
    match result {
        Err(Error::Corruption { reason, .. }) => reason.into_owned(),
        Err(other) => panic!("expected corruption, got {other}"),
        Ok(_) => panic!("expected corruption, got a recovered version set"),
    }
}

#[test]
fn damaged_current_files_are_corruption() {
    for (bytes, reason) in [
        (&b""[..], "newline"),
        (b"MANIFEST-000002", "newline"),
        (b"MANIFEST-000002\r\n", "does not name"),
        (b"000005.ldb\n", "does not name"),
        (b"\xff\xfe\n", "not a file name"),
    ] {
        let env = env_with_current(bytes);
        let got = corruption_reason(recover(&env));
        assert!(got.contains(reason), "{bytes:?}: {got}");
    }
}

#[test]
fn current_naming_a_missing_manifest_is_corruption() {
    let env = env_with_current(b"MANIFEST-000002\n");
    assert!(corruption_reason(recover(&env)).contains("does not exist"));
}

#[test]
fn manifest_without_required_counters_is_corruption() {
    for (edit, reason) in [
        (
            VersionEdit {
                next_file_number: None,
                ..full_edit()
            },
            "next-file",
        ),
        (
            VersionEdit {
                log_number: None,
                ..full_edit()
            },
            "log-number",
        ),
        (
            VersionEdit {
                last_sequence: None,
                ..full_edit()
            },
            "last-sequence",
        ),
    ] {
        let env = env_with_current(b"MANIFEST-000002\n");
        write_manifest(&env, &[edit]);
        assert!(
            corruption_reason(recover(&env)).contains(reason),
            "{reason}"
        );
    }
    let env = env_with_current(b"MANIFEST-000002\n");
    write_manifest(&env, &[full_edit()]);
    let vs = recover(&env).unwrap();
    assert_eq!((vs.manifest_file_number, vs.next_file_number), (4, 5));
}

#[test]
fn damaged_manifest_record_names_the_manifest_and_offset() {
    let env = env_with_current(b"MANIFEST-000002\n");
    write_manifest(&env, &[full_edit()]);
    let path = Path::new("/db/MANIFEST-000002");
    let mut bytes = crate::env::read_file_to_vec(&env, path).unwrap();
    bytes[10] ^= 0x01;
    write_file(&env, path, &bytes, true).unwrap();
    match recover(&env) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, 0);
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// Regression (issue #15): MANIFEST counters and sizes were trusted in arithmetic: a
/// next-file number of u64::MAX overflowed `next_file + 1`, a log number of u64::MAX
/// overflowed marking it used, and table sizes summing past u64::MAX overflowed the
/// compaction score (each a panic in debug builds).
#[test]
fn manifest_numbers_and_sizes_that_would_overflow_are_corruption() {
    let ikey = |u: &[u8]| {
        let mut k = Vec::new();
        append_internal_key(&mut k, u, 1, ValueKind::Value);
        k
    };
    let mut huge_tables = full_edit();
    for (n, (a, b)) in [(5, (&b"a"[..], &b"b"[..])), (6, (&b"c"[..], &b"d"[..]))] {
        let meta = FileMetaData {
            number: n,
            file_size: 1 << 63,
            smallest: ikey(a),
            largest: ikey(b),
        };
        huge_tables.new_files.push((1, meta));
    }
    for (edit, reason) in [
        (
            VersionEdit {
                next_file_number: Some(u64::MAX),
                ..full_edit()
            },
            "file number 18446744073709551615",
        ),
        (
            VersionEdit {
                log_number: Some(u64::MAX),
                ..full_edit()
            },
            "file number 18446744073709551615",
        ),
        (
            VersionEdit {
                prev_log_number: Some(crate::filename::MAX_FILE_NUMBER + 1),
                ..full_edit()
            },
            "file number 9223372036854775808",
        ),
        (huge_tables, "add up to more than a u64"),
        (
            VersionEdit {
                last_sequence: Some(crate::key::MAX_SEQNO + 1),
                ..full_edit()
            },
            "last sequence number 72057594037927936",
        ),
    ] {
        let env = env_with_current(b"MANIFEST-000002\n");
        write_manifest(&env, &[edit]);
        match recover(&env) {
            Err(Error::Corruption {
                file, reason: got, ..
            }) => {
                assert_eq!(file, Path::new("/db/MANIFEST-000002"));
                assert!(got.contains(reason), "{got}");
            }
            other => panic!("expected corruption, got {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn overlapping_files_in_a_sorted_level_are_corruption() {
    let ikey = |u: &[u8]| {
        let mut k = Vec::new();
        append_internal_key(&mut k, u, 1, ValueKind::Value);
        k
    };
    let mut edit = full_edit();
    for (n, (a, b)) in [(5, (&b"a"[..], &b"m"[..])), (6, (&b"k"[..], &b"z"[..]))] {
        edit.new_files.push((
            1,
            FileMetaData {
                number: n,
                file_size: 100,
                smallest: ikey(a),
                largest: ikey(b),
            },
        ));
    }
    let env = env_with_current(b"MANIFEST-000002\n");
    write_manifest(&env, &[edit]);
    assert!(corruption_reason(recover(&env)).contains("overlap in level 1"));
}

fn new_blob_file(number: u64) -> VersionEdit {
    VersionEdit {
        new_blob_files: vec![BlobFileMeta {
            number,
            file_size: 1000,
            value_bytes: 900,
        }],
        ..VersionEdit::default()
    }
}

/// The comparator names the MANIFEST records, in order.
fn recorded_comparators(env: &MemEnv) -> Vec<String> {
    let name = read_current(env, Path::new(DIR)).unwrap();
    let path = Path::new(DIR).join(name);
    let file = env.new_sequential_file(&path).unwrap();
    let mut reader = LogReader::new(file, &path, ReadMode::Strict);
    let mut names = Vec::new();
    while let Some(record) = reader.next_record().unwrap() {
        names.extend(VersionEdit::decode(record).unwrap().comparator);
    }
    names
}

#[test]
fn the_first_blob_file_marks_the_manifest_and_the_mark_survives() {
    let env = env_with_current(b"MANIFEST-000002\n");
    write_manifest(&env, &[full_edit()]);
    let mut vs = recover(&env).unwrap();
    assert!(!vs.blob_marked);
    vs.log_and_apply(&mut VersionEdit::default()).unwrap();
    let plain = recorded_comparators(&env);
    assert_eq!(
        plain,
        ["leveldb.BytewiseComparator"],
        "no marker without blobs"
    );
    let n = vs.new_file_number();
    vs.log_and_apply(&mut new_blob_file(n)).unwrap();
    assert!(vs.blob_marked);
    let marked = recorded_comparators(&env);
    assert_eq!(marked.len(), 2);
    assert_eq!(
        marked[1],
        format!("leveldb.BytewiseComparator{BLOB_COMPARATOR_SUFFIX}")
    );
    let mut garbage = VersionEdit {
        blob_garbage: vec![(n, 400)],
        ..VersionEdit::default()
    };
    vs.log_and_apply(&mut garbage).unwrap();
    assert_eq!(recorded_comparators(&env).len(), 2, "marked once");
    drop(vs);
    let vs = recover(&env).unwrap();
    assert!(vs.blob_marked);
    let state = vs.current.blob_files[&n];
    assert_eq!((state.meta.value_bytes, state.garbage_bytes), (900, 400));
}

#[test]
fn a_new_manifest_of_a_marked_database_starts_with_the_marker() {
    let env = env_with_current(b"MANIFEST-000002\n");
    write_manifest(&env, &[full_edit(), new_blob_file(3)]);
    // A MANIFEST written by hand with blob fields and no marker still counts as marked.
    let mut vs = recover(&env).unwrap();
    assert!(vs.blob_marked);
    // The first apply after recovery starts a new MANIFEST.
    vs.log_and_apply(&mut VersionEdit::default()).unwrap();
    let names = recorded_comparators(&env);
    assert_eq!(
        names[0],
        format!("leveldb.BytewiseComparator{BLOB_COMPARATOR_SUFFIX}")
    );
    drop(vs);
    let vs = recover(&env).unwrap();
    assert!(vs.current.blob_files.contains_key(&3));
}

#[test]
fn another_comparator_is_refused() {
    let env = env_with_current(b"MANIFEST-000002\n");
    write_manifest(
        &env,
        &[VersionEdit {
            comparator: Some("other.Comparator".into()),
            ..full_edit()
        }],
    );
    assert!(matches!(recover(&env), Err(Error::InvalidArgument(_))));
}

#[test]
fn a_table_that_leaves_level_0_leaves_its_key_filter_behind() {
    let icmp = InternalKeyComparator::new(bytewise());
    let meta = |number: u64, key: &[u8]| {
        let mut smallest = Vec::new();
        append_internal_key(&mut smallest, key, 1, ValueKind::Value);
        FileMetaData {
            number,
            file_size: 100,
            smallest: smallest.clone(),
            largest: smallest,
        }
    };
    let flushed = Version::empty(icmp.clone());
    let mut builder = Builder::new(&icmp, &flushed);
    builder.apply(&VersionEdit {
        new_files: vec![(0, meta(5, b"a")), (0, meta(6, b"b"))],
        ..VersionEdit::default()
    });
    let base = builder.finish(Path::new("/db/MANIFEST-000002")).unwrap();
    let filter = Arc::new(crate::memtable::key_filter::KeyFilter::for_write_buffer(4096));
    filter.insert(b"a");
    base.files[0][0].key_filter.set(filter.clone()).unwrap();
    assert!(base.files[0][1].key_filter.get().is_none());

    // Table 5 moves to level 1; table 6 is compacted into table 7.
    let mut builder = Builder::new(&icmp, &base);
    builder.apply(&VersionEdit {
        deleted_files: [(0, 5), (0, 6)].into_iter().collect(),
        new_files: vec![(1, meta(5, b"a")), (1, meta(7, b"b"))],
        ..VersionEdit::default()
    });
    let next = builder.finish(Path::new("/db/MANIFEST-000002")).unwrap();
    // Only level-0 tables keep a filter (a deeper level's filters would be memory without
    // bound); the moved table is read as any other.
    let moved = next.files[1].iter().find(|f| f.number == 5).unwrap();
    assert!(moved.key_filter.get().is_none());
    assert!(moved.may_hold_hashed(b"z", &mut None));
    assert_eq!(Arc::strong_count(&filter), 2, "the old version holds it, the new one not");
    let rewritten = next.files[1].iter().find(|f| f.number == 7).unwrap();
    assert!(rewritten.key_filter.get().is_none());
    assert!(rewritten.may_hold_hashed(b"anything", &mut None), "no filter rules nothing out");
}
