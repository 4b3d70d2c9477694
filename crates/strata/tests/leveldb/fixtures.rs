// SPDX-License-Identifier: MIT OR Apache-2.0
//! Every file of every LevelDB 1.23 fixture decodes to exactly the contents LevelDB reads from
//! it: MANIFESTs through the log reader and version edits, tables through the table reader
//! (checksums verified, filters used), logs through the log reader and write batches.
//! Logs, MANIFESTs and an uncompressed table are rebuilt byte for byte.

use strata_testkit as common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata::env::read_file_to_vec;
use strata::filter::BloomFilterPolicy;
use strata::iter::InternalIterator;
use strata::key::{append_internal_key, ParsedInternalKey, ValueKind, MAX_SEQNO};
use strata::log::{LogReader, LogWriter, ReadMode};
use strata::table::{BlockReadOptions, Compression, Table, TableBuilder, TableOptions};
use strata::version::{FileMetaData, VersionEdit, NUM_LEVELS};
use strata::{Env, MemEnv, PosixEnv, WriteBatch};

const SMALL_FIXTURES: [&str; 5] = ["log-only", "log-edge", "small", "uncompressed", "with-log"];

/// One version of one user key.
#[derive(Debug, Clone)]
struct Entry {
    seqno: u64,
    kind: ValueKind,
    value: Vec<u8>,
}

fn read_records(env: &dyn Env, path: &Path) -> Vec<Vec<u8>> {
    let file = env.new_sequential_file(path).unwrap();
    let mut reader = LogReader::new(file, path, ReadMode::Strict);
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        records.push(r.to_vec());
    }
    records
}

struct Manifest {
    edits: Vec<VersionEdit>,
    levels: Vec<Vec<FileMetaData>>,
    log_number: u64,
    last_sequence: u64,
}

fn read_manifest(env: &dyn Env, dir: &Path) -> Manifest {
    let current = read_file_to_vec(env, &dir.join("CURRENT")).unwrap();
    assert_eq!(current.last(), Some(&b'\n'));
    let name = std::str::from_utf8(&current[..current.len() - 1]).unwrap();
    let records = read_records(env, &dir.join(name));
    let edits: Vec<VersionEdit> = records
        .iter()
        .map(|r| VersionEdit::decode(r).unwrap())
        .collect();
    let mut live: BTreeMap<(usize, u64), FileMetaData> = BTreeMap::new();
    let (mut log_number, mut last_sequence) = (None, None);
    for e in &edits {
        if let Some(c) = &e.comparator {
            assert_eq!(c, "leveldb.BytewiseComparator");
        }
        log_number = e.log_number.or(log_number);
        last_sequence = e.last_sequence.or(last_sequence);
        for key in &e.deleted_files {
            live.remove(key);
        }
        for (level, f) in &e.new_files {
            live.insert((*level, f.number), f.clone());
        }
    }
    let mut levels = vec![Vec::new(); NUM_LEVELS];
    for ((level, _), f) in live {
        levels[level].push(f);
    }
    Manifest {
        edits,
        levels,
        log_number: log_number.expect("log number"),
        last_sequence: last_sequence.expect("last sequence"),
    }
}

/// LevelDB's escaping of keys in `leveldb.sstables`: printable ASCII as is, else `\xNN`.
fn escape(key: &[u8]) -> String {
    key.iter()
        .map(|&b| {
            if (b' '..=b'~').contains(&b) {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

/// The `leveldb.sstables` text LevelDB would print for these levels.
fn sstables_text(levels: &[Vec<FileMetaData>]) -> String {
    let mut out = String::new();
    for (level, files) in levels.iter().enumerate() {
        out.push_str(&format!("--- level {level} ---\n"));
        for f in files {
            let s = ParsedInternalKey::parse(&f.smallest).unwrap();
            let l = ParsedInternalKey::parse(&f.largest).unwrap();
            out.push_str(&format!(
                " {}:{}['{}' @ {} : {} .. '{}' @ {} : {}]\n",
                f.number,
                f.file_size,
                escape(s.user_key),
                s.seqno,
                s.kind as u8,
                escape(l.user_key),
                l.seqno,
                l.kind as u8
            ));
        }
    }
    out
}

fn table_options(filter: bool) -> TableOptions {
    TableOptions {
        filter_policy: filter.then(|| Arc::new(BloomFilterPolicy::new(10)) as _),
        ..TableOptions::default()
    }
}

fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.ldb"))
}

fn open_table(env: &dyn Env, dir: &Path, f: &FileMetaData, filter: bool) -> Arc<Table> {
    let path = table_path(dir, f.number);
    let file = env.new_random_access_file(&path).unwrap();
    Arc::new(Table::open(table_options(filter), file, &path, f.file_size, None).unwrap())
}

/// Every entry of a table, checked to lie between the MANIFEST's smallest and largest keys.
fn table_entries(table: &Arc<Table>, f: &FileMetaData) -> Vec<(Vec<u8>, Entry)> {
    let mut it = table.iter(BlockReadOptions {
        verify_checksums: true,
        trust_verified: false,
        fill_cache: false,
        release_behind: false,
    });
    let mut out = Vec::new();
    it.seek_to_first();
    let mut first = None;
    let mut last = Vec::new();
    while it.valid() {
        let k = ParsedInternalKey::parse(it.key()).expect("valid internal key");
        first.get_or_insert_with(|| it.key().to_vec());
        last = it.key().to_vec();
        out.push((
            k.user_key.to_vec(),
            Entry {
                seqno: k.seqno,
                kind: k.kind,
                value: it.value().to_vec(),
            },
        ));
        it.next();
    }
    it.status().unwrap();
    assert_eq!(
        first.as_deref(),
        Some(&f.smallest[..]),
        "table {} smallest",
        f.number
    );
    assert_eq!(last, f.largest, "table {} largest", f.number);
    out
}

fn log_entries(env: &dyn Env, path: &Path) -> Vec<(Vec<u8>, Entry)> {
    let mut out = Vec::new();
    for record in read_records(env, path) {
        let batch = WriteBatch::decode(&record).unwrap();
        for (i, op) in batch.iter().enumerate() {
            out.push((
                op.key.to_vec(),
                Entry {
                    seqno: batch.seqno() + i as u64,
                    kind: op.kind,
                    value: op.value.to_vec(),
                },
            ));
        }
    }
    out
}

/// Resolves a fixture's contents from its files alone and checks them against the expected
/// file and the `leveldb.sstables` listing. Returns the manifest for further checks.
fn check_fixture(root: &Path, name: &str, filter: bool) -> Manifest {
    let copy = common::copy_fixture(root, name);
    let dir = copy.path();
    let env = PosixEnv::new();
    let manifest = read_manifest(&env, dir);
    let listing = std::fs::read_to_string(root.join(format!("{name}.sstables.txt"))).unwrap();
    assert_eq!(sstables_text(&manifest.levels), listing, "{name}: sstables");

    let mut versions: BTreeMap<Vec<u8>, Vec<Entry>> = BTreeMap::new();
    let mut max_table_seqno = 0;
    for f in manifest.levels.iter().flatten() {
        let table = open_table(&env, dir, f, filter);
        assert_eq!(
            table.has_filter(),
            filter,
            "{name}: table {} filter",
            f.number
        );
        for (k, e) in table_entries(&table, f) {
            max_table_seqno = max_table_seqno.max(e.seqno);
            versions.entry(k).or_default().push(e);
        }
    }
    assert!(
        max_table_seqno <= manifest.last_sequence,
        "{name}: table seqno beyond last"
    );
    let mut logs: Vec<u64> = env
        .children(dir)
        .unwrap()
        .iter()
        .filter_map(|n| n.strip_suffix(".log")?.parse().ok())
        .filter(|&n| n >= manifest.log_number)
        .collect();
    logs.sort();
    for number in logs {
        for (k, e) in log_entries(&env, &dir.join(format!("{number:06}.log"))) {
            versions.entry(k).or_default().push(e);
        }
    }
    let resolved: BTreeMap<Vec<u8>, Vec<u8>> = versions
        .into_iter()
        .filter_map(|(k, mut vs)| {
            vs.sort_by_key(|e| std::cmp::Reverse(e.seqno));
            let newest = vs.swap_remove(0);
            (newest.kind == ValueKind::Value).then_some((k, newest.value))
        })
        .collect();
    let expected = common::expected_contents(root, name);
    assert_eq!(resolved.len(), expected.len(), "{name}: live key count");
    assert!(resolved == expected, "{name}: contents differ");
    manifest
}

#[test]
fn small_fixtures_decode_to_their_expected_contents() {
    let root = common::project_fixtures();
    for name in SMALL_FIXTURES {
        check_fixture(&root, name, false);
    }
}

#[test]
fn with_log_fixture_has_the_documented_shape() {
    let m = check_fixture(&common::project_fixtures(), "with-log", false);
    assert_eq!(m.last_sequence, 33603);
    let counts: Vec<usize> = m.levels.iter().map(Vec::len).collect();
    assert_eq!(counts, [1, 1, 1, 0, 0, 0, 0]);
}

#[test]
fn compacted_fixture_decodes_and_its_bloom_filters_work() {
    let Some(root) = common::shared_fixtures() else {
        return;
    };
    let m = check_fixture(&root, "compacted", true);
    assert_eq!(m.last_sequence, 246_754);
    assert_eq!(m.levels[2].len(), 7);
    assert!(m.edits.len() >= 10);

    // Point lookups through LevelDB's filters: every live key is found, and every deleted key
    // (i % 7 == 0 and not i % 77 == 0) is found absent.
    let copy = common::copy_fixture(&root, "compacted");
    let env = PosixEnv::new();
    let tables: Vec<Arc<Table>> = m.levels[2]
        .iter()
        .map(|f| open_table(&env, copy.path(), f, true))
        .collect();
    let expected = common::expected_contents(&root, "compacted");
    let read = BlockReadOptions::default();
    let lookup = |user: &[u8]| -> Option<Vec<u8>> {
        let mut ikey = Vec::new();
        append_internal_key(&mut ikey, user, MAX_SEQNO, ValueKind::Value);
        let i = m.levels[2]
            .partition_point(|f| ParsedInternalKey::parse(&f.largest).unwrap().user_key < user);
        let table = tables.get(i)?;
        table
            .get(&read, &ikey, |k, v| {
                (ParsedInternalKey::parse(k).unwrap().user_key == user).then(|| v.to_vec())
            })
            .unwrap()
            .flatten()
    };
    for (k, v) in &expected {
        assert_eq!(
            lookup(k).as_ref(),
            Some(v),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    let mut absent = 0;
    for i in (0..200_000u32).filter(|i| i % 7 == 0 && i % 77 != 0) {
        let key = format!("key-{i:012}");
        assert_eq!(lookup(key.as_bytes()), None, "{key}");
        absent += 1;
    }
    assert_eq!(absent, 28_572 - 2_598);
}

#[test]
fn logs_and_manifests_rebuild_byte_for_byte() {
    let root = common::project_fixtures();
    let mut rebuilt = 0;
    for name in SMALL_FIXTURES {
        let copy = common::copy_fixture(&root, name);
        let env = PosixEnv::new();
        for file in env.children(copy.path()).unwrap() {
            if !(file.ends_with(".log") || file.starts_with("MANIFEST-")) {
                continue;
            }
            let path = copy.path().join(&file);
            let original = read_file_to_vec(&env, &path).unwrap();
            let mem = MemEnv::new();
            let out = Path::new("/rebuilt");
            let mut writer = LogWriter::new(mem.new_writable_file(out).unwrap());
            for record in read_records(&env, &path) {
                if file.starts_with("MANIFEST-") {
                    // Re-encode each edit from its decoded form, not just its bytes.
                    let mut encoded = Vec::new();
                    VersionEdit::decode(&record)
                        .unwrap()
                        .encode_into(&mut encoded);
                    writer.add_record(&encoded).unwrap();
                } else {
                    writer.add_record(&record).unwrap();
                }
            }
            assert!(
                read_file_to_vec(&mem, out).unwrap() == original,
                "{name}/{file}"
            );
            rebuilt += 1;
        }
    }
    assert_eq!(rebuilt, 10, "five MANIFESTs and five logs");
}

#[test]
fn uncompressed_table_rebuilds_byte_for_byte() {
    let root = common::project_fixtures();
    let copy = common::copy_fixture(&root, "uncompressed");
    let env = PosixEnv::new();
    let m = read_manifest(&env, copy.path());
    let f = &m.levels[2][0];
    let table = open_table(&env, copy.path(), f, false);
    let mut it = table.iter(BlockReadOptions::default());
    let mem = MemEnv::new();
    let out = Path::new("/000005.ldb");
    let options = TableOptions {
        compression: Compression::None,
        ..TableOptions::default()
    };
    let mut builder = TableBuilder::new(options, mem.new_writable_file(out).unwrap());
    it.seek_to_first();
    while it.valid() {
        builder.add(it.key(), it.value()).unwrap();
        it.next();
    }
    let size = builder.finish(true).unwrap();
    assert_eq!(size, 62_077);
    let original = read_file_to_vec(&env, &table_path(copy.path(), f.number)).unwrap();
    assert!(read_file_to_vec(&mem, out).unwrap() == original);
}

#[test]
fn snappy_table_rebuilds_to_the_same_entries() {
    // Snappy encoders differ byte-wise, so a compressed table cannot be compared byte for byte;
    // a rebuilt one must still read back to exactly the same entries.
    let root = common::project_fixtures();
    let copy = common::copy_fixture(&root, "small");
    let env = PosixEnv::new();
    let m = read_manifest(&env, copy.path());
    let f = &m.levels[2][0];
    let original = open_table(&env, copy.path(), f, false);
    let mem = MemEnv::new();
    let out = Path::new("/000005.ldb");
    let mut builder =
        TableBuilder::new(TableOptions::default(), mem.new_writable_file(out).unwrap());
    let mut it = original.iter(BlockReadOptions::default());
    let mut keys = BTreeSet::new();
    it.seek_to_first();
    while it.valid() {
        builder.add(it.key(), it.value()).unwrap();
        keys.insert(it.key().to_vec());
        it.next();
    }
    let size = builder.finish(true).unwrap();
    let rebuilt_file = mem.new_random_access_file(out).unwrap();
    let rebuilt =
        Arc::new(Table::open(TableOptions::default(), rebuilt_file, out, size, None).unwrap());
    let mut a = original.iter(BlockReadOptions::default());
    let mut b = rebuilt.iter(BlockReadOptions::default());
    a.seek_to_first();
    b.seek_to_first();
    let mut n = 0;
    while a.valid() {
        assert!(b.valid());
        assert_eq!((a.key(), a.value()), (b.key(), b.value()));
        a.next();
        b.next();
        n += 1;
    }
    assert!(!b.valid());
    assert_eq!(n, 500);
    assert_eq!(keys.len(), 500);
}
