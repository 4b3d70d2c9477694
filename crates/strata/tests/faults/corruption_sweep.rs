// SPDX-License-Identifier: MIT OR Apache-2.0
//! The corruption sweep: every file of a small closed database (CURRENT, the MANIFEST, the log,
//! each table's data, filter, metaindex and index blocks and footer) damaged in every way, one
//! damage at a time, on the in-memory env:
//! - one bit flipped at every byte (bit `offset % 8`);
//! - each 512-byte sector zeroed;
//! - the file cut at every offset;
//! - garbage appended (a few sizes, random bytes and zeros).
//!
//! Each damaged database is opened and every key read, by `get` and by a scan:
//! - nothing panics;
//! - no read returns a wrong value, and none silently misses a key: a read returns the right
//!   value or an error naming the file and, for corruption, the offset. The one allowed loss
//!   is a torn tail of the log (a cut, zeroed or garbled end, as a crash leaves it): then the
//!   database holds a prefix of the log's writes;
//! - an open that fails changes no file of the database (the info log `LOG` aside);
//! - `repair` then keeps every record outside the damaged block (a table's data block, or the
//!   32 KiB log block), and returns no wrong value.
//!
//! The base database has each key written once, so that a lost record can only mean a missing
//! key, never an older value.

use strata_testkit as common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata::env::{read_file_to_vec, write_file};
use strata::filter::BloomFilterPolicy;
use strata::key::ParsedInternalKey;
use strata::log::{LogReader, ReadMode, BLOCK_SIZE};
use strata::table::{Table, TableOptions};
use strata::{Db, Env, Error, MemEnv, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";

fn options(env: &MemEnv) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        block_size: 256,
        filter_policy: Some(Arc::new(BloomFilterPolicy::new(10))),
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()))
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value {i:05} {}", "x".repeat((i % 40) as usize)).into_bytes()
}

/// A byte range of a file and the keys whose records lie in it.
type Span = (u64, u64, Vec<Vec<u8>>);

/// Where each key's record is, to tell which keys a damaged block may take with it.
#[derive(Default)]
struct Layout {
    /// Per table file: each data block's byte range and its keys.
    table_blocks: BTreeMap<String, Vec<Span>>,
    /// The log's records: byte range and keys, in order.
    log_records: Vec<Span>,
    log_name: String,
}

/// 240 keys in tables over two levels, 60 more (in batches of 3) in the log; closed.
fn base() -> (MemEnv, BTreeMap<Vec<u8>, Vec<u8>>, Layout) {
    let env = MemEnv::new();
    let mut model = BTreeMap::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    for i in 0..240u32 {
        db.put(key(i * 2), value(i * 2)).unwrap();
        model.insert(key(i * 2), value(i * 2));
        if i == 120 {
            db.compact_range(None, None).unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    for b in 0..20u32 {
        let mut batch = WriteBatch::new();
        for j in 0..3 {
            let i = 1 + 2 * (b * 3 + j) * 3;
            batch.put(key(i), value(i));
            model.insert(key(i), value(i));
        }
        db.write_opt(batch, &WriteOptions { sync: true }).unwrap();
    }
    drop(db);
    let layout = layout(&env);
    (env, model, layout)
}

fn names(env: &MemEnv) -> Vec<String> {
    let mut names = env.children(Path::new(DIR)).unwrap();
    names.sort();
    names
}

fn layout(env: &MemEnv) -> Layout {
    let mut layout = Layout::default();
    for name in names(env) {
        let path = Path::new(DIR).join(&name);
        if name.ends_with(".ldb") {
            let size = env.file_size(&path).unwrap();
            let file = env.new_random_access_file(&path).unwrap();
            let table =
                Arc::new(Table::open(TableOptions::default(), file, &path, size, None).unwrap());
            let blocks = table
                .data_blocks()
                .unwrap()
                .into_iter()
                .map(|(h, keys)| {
                    let user_keys = keys
                        .iter()
                        .map(|k| ParsedInternalKey::parse(k).unwrap().user_key.to_vec())
                        .collect();
                    (h.offset, h.offset + h.size, user_keys)
                })
                .collect();
            layout.table_blocks.insert(name, blocks);
        } else if name.ends_with(".log") {
            let file = env.new_sequential_file(&path).unwrap();
            let mut reader = LogReader::new(file, &path, ReadMode::Strict);
            let mut records = Vec::new();
            while let Some(record) = reader.next_record().unwrap() {
                let keys = WriteBatch::decode(record)
                    .unwrap()
                    .iter()
                    .map(|op| op.key.to_vec())
                    .collect();
                records.push((
                    reader.last_record_offset(),
                    reader.end_of_last_record(),
                    keys,
                ));
            }
            if !records.is_empty() {
                layout.log_records = records;
                layout.log_name = name;
            }
        }
    }
    assert!(
        layout.table_blocks.len() >= 2,
        "tables: {:?}",
        layout.table_blocks.keys()
    );
    assert_eq!(layout.log_records.len(), 20);
    layout
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip(usize),
    ZeroSector(usize),
    Cut(usize),
    Append(usize, bool),
}

impl Damage {
    /// The first byte it changes.
    fn start(self, len: usize) -> usize {
        match self {
            Damage::Flip(at) | Damage::Cut(at) => at,
            Damage::ZeroSector(s) => s * 512,
            Damage::Append(..) => len,
        }
    }

    fn apply(self, bytes: &mut Vec<u8>) {
        match self {
            Damage::Flip(at) => bytes[at] ^= 1 << (at % 8),
            Damage::ZeroSector(s) => {
                let end = ((s + 1) * 512).min(bytes.len());
                bytes[s * 512..end].fill(0);
            }
            Damage::Cut(at) => bytes.truncate(at),
            Damage::Append(n, zeros) => bytes.extend((0..n).map(|j| {
                if zeros {
                    0
                } else {
                    (j as u8).wrapping_mul(167).wrapping_add(13)
                }
            })),
        }
    }

    /// Damage a crash can leave at the end of a log: it ends the log, it is not corruption.
    fn looks_torn(self) -> bool {
        !matches!(self, Damage::Flip(_))
    }
}

fn damages(len: usize) -> Vec<Damage> {
    let mut all: Vec<Damage> = (0..len).map(Damage::Flip).collect();
    all.extend((0..len.div_ceil(512)).map(Damage::ZeroSector));
    all.extend((0..len).map(Damage::Cut));
    for n in [1, 7, 100, 4096] {
        all.push(Damage::Append(n, false));
        all.push(Damage::Append(n, true));
    }
    all
}

/// Every file of the database but the info log, with its contents.
fn files(env: &MemEnv) -> BTreeMap<PathBuf, Vec<u8>> {
    names(env)
        .into_iter()
        .filter(|n| n != "LOG" && n != "LOG.old")
        .filter_map(|n| {
            let path = Path::new(DIR).join(&n);
            read_file_to_vec(env, &path).ok().map(|data| (path, data))
        })
        .collect()
}

/// An error must name the file, and for corruption the offset (any offset is a number).
fn names_a_file(e: &Error) -> bool {
    match e {
        Error::Corruption { file, .. } => !file.as_os_str().is_empty(),
        Error::Io { path, .. } => !path.as_os_str().is_empty(),
        _ => false,
    }
}

/// Keys the damage may take with it when the database is opened: for the log, the records at
/// or after the damage (a torn tail); nothing otherwise.
fn may_lose_on_open(file: &str, damage: Damage, len: usize, layout: &Layout) -> BTreeSet<Vec<u8>> {
    if file != layout.log_name || !damage.looks_torn() {
        return BTreeSet::new();
    }
    let start = damage.start(len) as u64;
    layout
        .log_records
        .iter()
        .filter(|(_, end, _)| *end > start)
        .flat_map(|(_, _, keys)| keys.iter().cloned())
        .collect()
}

/// Keys repair may lose: those in the damaged table block, or in log records overlapping the
/// damaged 32 KiB log block (and after a cut, every record past it).
fn may_lose_on_repair(
    file: &str,
    damage: Damage,
    len: usize,
    layout: &Layout,
) -> BTreeSet<Vec<u8>> {
    let start = damage.start(len) as u64;
    let end = match damage {
        Damage::Flip(at) => at as u64 + 1,
        Damage::ZeroSector(_) => start + 512,
        Damage::Cut(_) | Damage::Append(..) => u64::MAX,
    };
    if let Some(blocks) = layout.table_blocks.get(file) {
        return blocks
            .iter()
            .filter(|(b_start, b_end, _)| *b_start < end && start < *b_end + 5)
            .flat_map(|(_, _, keys)| keys.iter().cloned())
            .collect();
    }
    if file == layout.log_name {
        let block = BLOCK_SIZE as u64;
        let (first, last) = (
            start / block * block,
            end.saturating_add(block - 1) / block * block,
        );
        return layout
            .log_records
            .iter()
            .filter(|(r_start, r_end, _)| *r_start < last && first < *r_end)
            .flat_map(|(_, _, keys)| keys.iter().cloned())
            .collect();
    }
    BTreeSet::new()
}

/// Reads every key by `get` and by a scan; returns what is wrong.
fn read_all(
    db: &Db,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    may_lose: &BTreeSet<Vec<u8>>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut errors = 0;
    for (k, v) in model {
        match db.get(k) {
            Ok(Some(got)) if &got == v => {}
            Ok(Some(_)) => wrong.push(format!("get {}: a wrong value", String::from_utf8_lossy(k))),
            Ok(None) if may_lose.contains(k) => {}
            Ok(None) => wrong.push(format!(
                "get {}: silently missing",
                String::from_utf8_lossy(k)
            )),
            Err(e) if names_a_file(&e) => errors += 1,
            Err(e) => wrong.push(format!("get: an error naming no file: {e}")),
        }
    }
    let mut expected = model
        .iter()
        .filter(|(k, _)| !may_lose.contains(*k))
        .peekable();
    let scan = match db.scan() {
        Ok(scan) => scan,
        Err(e) => {
            if !names_a_file(&e) {
                wrong.push(format!("scan: an error naming no file: {e}"));
            }
            return wrong;
        }
    };
    let mut scan_failed = false;
    for item in scan {
        match item {
            Ok((k, v)) => {
                if model.get(&k) != Some(&v) {
                    wrong.push(format!(
                        "scan: a wrong entry for {}",
                        String::from_utf8_lossy(&k)
                    ));
                    break;
                }
                while expected.peek().is_some_and(|(ek, _)| **ek < k) {
                    let (ek, _) = expected.next().unwrap();
                    wrong.push(format!("scan: skipped {}", String::from_utf8_lossy(ek)));
                }
                if expected.peek().is_some_and(|(ek, _)| **ek == k) {
                    expected.next();
                }
            }
            Err(e) => {
                if !names_a_file(&e) {
                    wrong.push(format!("scan: an error naming no file: {e}"));
                }
                scan_failed = true;
                break;
            }
        }
    }
    if !scan_failed && errors == 0 {
        if let Some((k, _)) = expected.next() {
            wrong.push(format!(
                "scan: ended silently before {}",
                String::from_utf8_lossy(k)
            ));
        }
    }
    wrong
}

/// The sweep over one file; returns the mutations tried and what went wrong.
fn sweep_file(
    base: &MemEnv,
    name: &str,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    layout: &Layout,
) -> (u64, Vec<String>) {
    let path = Path::new(DIR).join(name);
    let original = read_file_to_vec(base, &path).unwrap();
    let mut tried = 0;
    let mut problems = Vec::new();
    for damage in damages(original.len()) {
        tried += 1;
        let env = base.snapshot();
        let mut bytes = original.clone();
        damage.apply(&mut bytes);
        write_file(&env, &path, &bytes, true).unwrap();
        let before = files(&env);
        let what = format!("{name} {damage:?}");
        let opened = Db::open(DIR, options(&env));
        let needs_repair = match opened {
            Err(e) => {
                if !names_a_file(&e) {
                    problems.push(format!("{what}: open failed naming no file: {e}"));
                }
                if files(&env) != before {
                    problems.push(format!("{what}: the failed open ({e}) changed files"));
                }
                true
            }
            Ok(db) => {
                let lose = may_lose_on_open(name, damage, original.len(), layout);
                let wrong = read_all(&db, model, &lose);
                problems.extend(wrong.into_iter().take(3).map(|w| format!("{what}: {w}")));
                false
            }
        };
        if needs_repair || damage_hits_data(name, layout) {
            if let Err(e) = strata::repair(DIR, &options(&env)) {
                problems.push(format!("{what}: repair failed: {e}"));
                continue;
            }
            match Db::open(DIR, options(&env)) {
                Ok(db) => {
                    let lose = may_lose_on_repair(name, damage, original.len(), layout);
                    let wrong = read_all(&db, model, &lose);
                    problems.extend(
                        wrong
                            .into_iter()
                            .take(3)
                            .map(|w| format!("{what}: after repair: {w}")),
                    );
                }
                Err(e) => problems.push(format!("{what}: open after repair: {e}")),
            }
        }
    }
    (tried, problems)
}

/// Repair is tried after every damage to a table or log, and after every refused open.
fn damage_hits_data(name: &str, layout: &Layout) -> bool {
    layout.table_blocks.contains_key(name) || name == layout.log_name
}

/// Sweeps the files whose index (in name order) `pick` takes. The files are split between two
/// tests so that they run on two threads.
fn sweep_files(pick: impl Fn(usize) -> bool) {
    common::count_panics();
    let (base, model, layout) = base();
    let mut total = 0;
    let mut problems = Vec::new();
    let files = names(&base)
        .into_iter()
        .filter(|name| name != "LOCK" && name != "LOG" && name != "LOG.old");
    for (i, name) in files.enumerate() {
        if !pick(i) {
            continue;
        }
        let (tried, found) = sweep_file(&base, &name, &model, &layout);
        eprintln!("{name}: {tried} damaged copies, {} problems", found.len());
        total += tried;
        problems.extend(found.into_iter().take(10));
    }
    eprintln!("damaged copies checked: {total}");
    assert!(total > 0, "no file was damaged");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(common::panics(), 0, "a thread panicked");
}

#[test]
fn every_damage_to_the_even_files_is_caught_and_repair_keeps_the_rest() {
    sweep_files(|i| i % 2 == 0);
}

#[test]
fn every_damage_to_the_odd_files_is_caught_and_repair_keeps_the_rest() {
    sweep_files(|i| i % 2 == 1);
}
