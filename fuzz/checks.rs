// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the fuzz targets check, shared with `cargo test`: each fuzz target calls one function
//! here, and `crates/strata/tests/fuzz_regressions.rs` calls the same function on every input
//! committed under `fuzz/regressions/<target>/`, so an input a fuzzer once found is checked by
//! every test run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use strata::env::{read_file_to_vec, write_file, FaultEnv, FaultKind, FaultPlan};
use strata::log::{LogReader, ReadMode};
use strata::{Db, Env, MemEnv, Options, ReadOptions, WriteBatch, WriteOptions};

fn read_all(env: &MemEnv, mode: ReadMode) -> Vec<Vec<u8>> {
    let path = Path::new("/f.log");
    let file = env.new_sequential_file(path).unwrap();
    let mut reader = LogReader::new(file, path, mode);
    let mut out = Vec::new();
    while let Ok(Some(record)) = reader.next_record() {
        // Every record also goes through the write-batch decoder, as recovery does.
        let _ = WriteBatch::decode(record);
        out.push(record.to_vec());
    }
    out
}

/// `data` as a log file, read in every mode: never a panic; strict mode's records are a prefix
/// of tolerant mode's; recovery mode returns exactly strict mode's records (both stop at the
/// first damage, recovery mode only forgives it when nothing readable follows).
pub fn log_reader(data: &[u8]) {
    let env = MemEnv::new();
    write_file(&env, Path::new("/f.log"), data, false).unwrap();
    let strict = read_all(&env, ReadMode::Strict);
    let tolerant = read_all(&env, ReadMode::Tolerant);
    let recovery = read_all(&env, ReadMode::Recovery);
    assert!(tolerant.len() >= strict.len());
    assert_eq!(&tolerant[..strict.len()], &strict[..]);
    assert_eq!(recovery, strict);
}

/// `data` as the MANIFEST of a database (CURRENT names it), opened read-only and read whole:
/// never a panic; an open either fails or gives a database whose reads fail or succeed cleanly.
pub fn manifest(data: &[u8]) {
    let env = MemEnv::new();
    env.create_dir_all(Path::new("/db")).unwrap();
    write_file(&env, Path::new("/db/MANIFEST-000002"), data, false).unwrap();
    write_file(&env, Path::new("/db/CURRENT"), b"MANIFEST-000002\n", false).unwrap();
    let options = Options::default().with_env(Arc::new(env));
    if let Ok(db) = Db::open_read_only("/db", options) {
        if let Ok(scan) = db.scan() {
            for item in scan {
                if item.is_err() {
                    break;
                }
            }
        }
        let _ = db.get(b"key");
    }
}

/// A small database: its files, and its contents.
struct Base {
    env: MemEnv,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
    files: Vec<String>,
}

fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let env = MemEnv::new();
        let options = Options {
            create_if_missing: true,
            block_size: 256,
            ..Options::default()
        }
        .with_env(Arc::new(env.clone()));
        let db = Db::open("/db", options).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..200u32 {
            let (k, v) = (
                format!("k{i:04}"),
                format!("value {i} {}", "x".repeat((i % 30) as usize)),
            );
            db.put(k.as_bytes(), v.as_bytes()).unwrap();
            model.insert(k.into_bytes(), v.into_bytes());
            if i == 150 {
                db.compact_range(None, None).unwrap();
            }
        }
        drop(db);
        let mut files = env.children(Path::new("/db")).unwrap();
        files.retain(|n| n != "LOCK" && n != "LOG" && n != "LOG.old");
        files.sort();
        Base { env, model, files }
    })
}

/// `data` mutates one file of a small database: byte 0 picks the file, then each following
/// triple (offset high, offset low, xor mask) flips bits, and a last lone byte, if any, cuts
/// the file to that fraction of its length. The database is opened and every key read: never a
/// panic, and never a wrong value (a key may be missing only if the log was damaged: a torn
/// tail ends the log).
pub fn open_db(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let base = base();
    let env = base.env.snapshot();
    let name = &base.files[pick as usize % base.files.len()];
    let path = Path::new("/db").join(name);
    let mut bytes = read_file_to_vec(&env, &path).unwrap();
    let mut chunks = rest.chunks_exact(3);
    for c in &mut chunks {
        if !bytes.is_empty() {
            let at = (usize::from(c[0]) << 8 | usize::from(c[1])) % bytes.len();
            bytes[at] ^= c[2];
        }
    }
    if let [cut] = chunks.remainder() {
        let len = bytes.len() * usize::from(*cut) / 256;
        bytes.truncate(len);
    }
    write_file(&env, &path, &bytes, false).unwrap();
    let options = Options::default().with_env(Arc::new(env));
    let Ok(db) = Db::open("/db", options) else {
        return;
    };
    let log_damaged = name.ends_with(".log");
    for (k, v) in &base.model {
        match db.get(k) {
            Ok(Some(got)) => assert_eq!(&got, v, "a wrong value for {k:?} after damage to {name}"),
            Ok(None) => assert!(log_damaged, "{k:?} silently missing after damage to {name}"),
            Err(_) => {}
        }
    }
    if let Ok(scan) = db.scan() {
        for item in scan {
            match item {
                Ok((k, v)) => assert_eq!(base.model.get(&k), Some(&v), "a wrong entry in a scan"),
                Err(_) => break,
            }
        }
    }
}

/// The bytes of an `ops_model` input, read one at a time; zero once they run out.
struct Input<'a> {
    bytes: &'a [u8],
}

impl Input<'_> {
    fn next(&mut self) -> u8 {
        let (&b, rest) = self.bytes.split_first().unwrap_or((&0, &[]));
        self.bytes = rest;
        b
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One operation of a write batch.
#[derive(Debug, Clone)]
enum Edit {
    /// A key and its new value, `None` for a deletion.
    Set(Vec<u8>, Option<Vec<u8>>),
    /// `delete_range(start, end)`, start not after end.
    DeleteRange(Vec<u8>, Vec<u8>),
}

fn apply(model: &mut Model, batch: &[Edit]) {
    for edit in batch {
        match edit {
            Edit::Set(k, Some(v)) => {
                model.insert(k.clone(), v.clone());
            }
            Edit::Set(k, None) => {
                model.remove(k);
            }
            Edit::DeleteRange(a, b) => model.retain(|k, _| k < a || k >= b),
        }
    }
}

/// How a database is closed before it is opened again.
#[derive(Debug, Clone, Copy)]
enum Close {
    /// Dropped: a clean close.
    Drop,
    /// The process is killed: the file system keeps everything written to it.
    Kill,
    /// Power is lost: only synced data and synced directory entries survive.
    PowerLoss,
}

/// A database under `ops_model`, with what it must hold.
struct Harness {
    mem: MemEnv,
    faults: FaultEnv<MemEnv>,
    db: Option<Db>,
    /// Every acknowledged write applied.
    model: Model,
    /// The state at the last open, and the writes acknowledged since, in order: `model` is
    /// `base` with `history` applied.
    base: Model,
    history: Vec<Vec<Edit>>,
    /// How many of `history` a power loss must keep: up to the last synced write.
    synced: usize,
    /// The first write that failed since the last open: it may or may not be there after a
    /// reopen (its log record may be whole), but nothing after it may be.
    uncertain: Option<Vec<Edit>>,
    /// True once a write failed: every later write must fail too, until a reopen.
    write_failed: bool,
    snapshot: Option<(strata::Snapshot, Model)>,
    values_written: u64,
    blobs: bool,
}

const OPS_KEYS: u8 = 24;

fn ops_options(env: &FaultEnv<MemEnv>, blobs: bool) -> Options {
    Options {
        create_if_missing: true,
        block_size: 512,
        // Key-value separation for half the inputs: values of 100 bytes and more in blob files.
        blob_threshold: blobs.then_some(100),
        blob_file_size: 1 << 20,
        ..Options::default()
    }
    .with_env(Arc::new(env.clone()))
}

impl Harness {
    fn new(blobs: bool) -> Self {
        let mem = MemEnv::new();
        let faults = FaultEnv::new(mem.clone());
        let db = Db::open("/db", ops_options(&faults, blobs)).expect("a new database opens");
        Harness {
            mem,
            faults,
            db: Some(db),
            model: Model::new(),
            base: Model::new(),
            history: Vec::new(),
            synced: 0,
            uncertain: None,
            write_failed: false,
            snapshot: None,
            values_written: 0,
            blobs,
        }
    }

    fn db(&self) -> &Db {
        self.db
            .as_ref()
            .expect("the harness keeps a database open between operations")
    }

    /// True if a fault was injected since the database was last opened (each open gets a new
    /// `FaultEnv`), including while it opened: until then, every operation must succeed.
    fn faults_injected(&self) -> bool {
        self.faults.injected() > 0
    }

    /// Blob garbage is never over-counted: in every blob file the bytes not counted as
    /// garbage are at least the bytes of the newest values it holds, and together they hold at
    /// least every large value of the model. (Under-counting is possible: a value appended
    /// whose write then failed or was lost in a crash is never anyone's, nor counted.)
    fn check_blob_accounting(&self) {
        if !self.blobs || self.uncertain.is_some() {
            return;
        }
        let files = self.db().blob_files();
        let mut not_garbage = 0u64;
        for f in &files {
            let garbage = f.garbage_bytes.unwrap_or(0);
            assert!(
                garbage <= f.value_bytes,
                "blob file {} counts {garbage} bytes of garbage of {}",
                f.number,
                f.value_bytes
            );
            not_garbage += f.value_bytes - garbage;
        }
        let live: u64 = self
            .model
            .values()
            .filter(|v| v.len() >= 100)
            .map(|v| v.len() as u64)
            .sum();
        assert!(
            not_garbage >= live,
            "blob files hold {not_garbage} bytes not counted as garbage, but {live} bytes of \
             large values are live:\n{files:?}"
        );
    }

    fn key(input: &mut Input<'_>) -> Vec<u8> {
        format!("key{:02}", input.next() % OPS_KEYS).into_bytes()
    }

    /// A value of a length the input picks (now and then one large enough to fill a good part
    /// of a memtable), its bytes unique to this write.
    fn value(&mut self, input: &mut Input<'_>) -> Vec<u8> {
        self.values_written += 1;
        let b = input.next();
        let len = if b >= 0xf0 {
            12_000 + usize::from(b)
        } else {
            usize::from(b)
        };
        let stamp = format!("v{}:", self.values_written);
        stamp
            .bytes()
            .chain((0..).map(|i: u32| b'a' + (i % 26) as u8))
            .take(len.max(stamp.len()))
            .collect()
    }

    fn write(&mut self, batch: Vec<Edit>, sync: bool) {
        let mut wb = WriteBatch::new();
        for edit in &batch {
            match edit {
                Edit::Set(k, Some(v)) => wb.put(k, v),
                Edit::Set(k, None) => wb.delete(k),
                Edit::DeleteRange(a, b) => wb.delete_range(a, b),
            }
        }
        match self.db().write_opt(wb, &WriteOptions { sync }) {
            Ok(()) => {
                assert!(
                    !self.write_failed,
                    "a write succeeded after an earlier write failed"
                );
                apply(&mut self.model, &batch);
                self.history.push(batch);
                if sync {
                    self.synced = self.history.len();
                }
            }
            Err(e) => {
                assert!(
                    self.faults_injected(),
                    "a write failed with no fault injected: {e}"
                );
                if !self.write_failed {
                    self.uncertain = Some(batch);
                }
                self.write_failed = true;
            }
        }
    }

    /// Reads must be right whatever happened to writes: the model, or the snapshot's model.
    fn check_get(&self, key: &[u8]) {
        let got = self.db().get(key).expect("reads do not fail");
        assert_eq!(got.as_ref(), self.model.get(key), "get({key:?})");
        if let Some((snapshot, model)) = &self.snapshot {
            let at = ReadOptions {
                snapshot: Some(snapshot),
                ..ReadOptions::default()
            };
            let got = self.db().get_opt(key, &at).expect("reads do not fail");
            assert_eq!(got.as_ref(), model.get(key), "get({key:?}) at a snapshot");
        }
    }

    fn scan(db: &Db, options: &ReadOptions<'_>) -> Model {
        db.scan_opt(options)
            .expect("a scan starts")
            .map(|item| item.expect("a scan does not fail"))
            .collect()
    }

    fn check_scan(&self) {
        assert!(
            Self::scan(self.db(), &ReadOptions::default()) == self.model,
            "a scan differs"
        );
        if let Some((snapshot, model)) = &self.snapshot {
            let at = ReadOptions {
                snapshot: Some(snapshot),
                ..ReadOptions::default()
            };
            assert!(
                Self::scan(self.db(), &at) == *model,
                "a scan at a snapshot differs"
            );
        }
    }

    /// Seeks to `key` and steps back: the entry before it, as the model has it.
    fn check_seek_prev(&self, key: &[u8]) {
        let mut it = self.db().iter().expect("an iterator opens");
        it.seek(key);
        let at = self.model.range(key.to_vec()..).next();
        assert_eq!(
            it.valid().then(|| (it.key(), it.value())),
            at.map(|(k, v)| (&k[..], &v[..]))
        );
        if it.valid() {
            it.prev();
        } else {
            it.seek_to_last();
        }
        let before = self.model.range(..key.to_vec()).next_back();
        assert_eq!(
            it.valid().then(|| (it.key().to_vec(), it.value().to_vec())),
            before.map(|(k, v)| (k.clone(), v.clone())),
            "prev from seek({key:?})"
        );
        it.status().expect("an iterator does not fail");
    }

    /// Closes the database as `how` says, opens it again (perhaps with a fault injected while
    /// it recovers, then again without), and checks what it holds.
    fn reopen(&mut self, how: Close, fault_in_open: Option<FaultPlan>) {
        self.snapshot = None;
        let image = match how {
            Close::Drop => {
                self.db = None;
                self.mem.clone()
            }
            Close::Kill => self.mem.crash_clone(strata::CrashMode::PROCESS_KILL),
            Close::PowerLoss => self.mem.crash_clone(strata::CrashMode::POWER_LOSS),
        };
        self.db = None;
        self.mem = image;
        self.faults = FaultEnv::new(self.mem.clone());
        self.faults.set_plan(fault_in_open);
        let db = match Db::open("/db", ops_options(&self.faults, self.blobs)) {
            Ok(db) => db,
            Err(e) => {
                assert!(
                    self.faults.injected() > 0,
                    "open failed with no fault injected: {e}"
                );
                self.faults.set_plan(None);
                Db::open("/db", ops_options(&self.faults, self.blobs))
                    .unwrap_or_else(|e| panic!("open after a failed open: {e}"))
            }
        };
        self.faults.set_plan(None);
        let state = Self::scan(&db, &ReadOptions::default());
        let with_uncertain = |mut m: Model| {
            if let Some(b) = &self.uncertain {
                apply(&mut m, b);
            }
            m
        };
        let ok = match how {
            Close::Drop | Close::Kill => {
                state == self.model
                    || (self.uncertain.is_some() && state == with_uncertain(self.model.clone()))
            }
            Close::PowerLoss => {
                let mut prefix = self.base.clone();
                let mut found = self.synced == 0 && state == prefix;
                for (i, batch) in self.history.iter().enumerate() {
                    apply(&mut prefix, batch);
                    found |= i + 1 >= self.synced && state == prefix;
                }
                found || (self.uncertain.is_some() && state == with_uncertain(prefix))
            }
        };
        assert!(
            ok,
            "after {how:?}: {} keys recovered, {} acknowledged ({} writes since the last open, \
             {} synced)",
            state.len(),
            self.model.len(),
            self.history.len(),
            self.synced
        );
        self.db = Some(db);
        self.model = state.clone();
        self.base = state;
        self.history.clear();
        self.synced = 0;
        self.uncertain = None;
        self.write_failed = false;
    }

    fn fault_plan(input: &mut Input<'_>, after: u64) -> FaultPlan {
        let kinds = [
            FaultKind::Io,
            FaultKind::NoSpace,
            FaultKind::ShortWrite,
            FaultKind::FailedSync,
        ];
        let b = input.next();
        FaultPlan {
            at: after + u64::from(input.next() % 64),
            kind: kinds[usize::from(b % 4)],
            persistent: b & 4 != 0,
        }
    }

    fn step(&mut self, input: &mut Input<'_>) {
        match input.next() % 13 {
            0 | 1 => {
                let key = Self::key(input);
                let value = self.value(input);
                let sync = input.next() & 1 == 1;
                self.write(vec![Edit::Set(key, Some(value))], sync);
            }
            2 => {
                let key = Self::key(input);
                // Range deletions are refused with blob files (see `Db::delete_range`).
                let edit = if input.next().is_multiple_of(4) && !self.blobs {
                    let other = Self::key(input);
                    Edit::DeleteRange(key.clone().min(other.clone()), key.max(other))
                } else {
                    Edit::Set(key, None)
                };
                let sync = input.next() & 1 == 1;
                self.write(vec![edit], sync);
            }
            3 => {
                let n = 1 + input.next() % 5;
                let batch = (0..n)
                    .map(|_| {
                        let delete = input.next() & 1 == 1;
                        let key = Self::key(input);
                        Edit::Set(key, (!delete).then(|| self.value(input)))
                    })
                    .collect();
                let sync = input.next() & 1 == 1;
                self.write(batch, sync);
            }
            4 => self.check_get(&Self::key(input)),
            5 => self.check_scan(),
            6 => self.check_seek_prev(&Self::key(input)),
            7 => {
                let snapshot = self.db().snapshot();
                self.snapshot = Some((snapshot, self.model.clone()));
            }
            8 => {
                if let Err(e) = self.db().compact_range(None, None) {
                    assert!(
                        self.faults_injected(),
                        "a compaction failed with no fault injected: {e}"
                    );
                }
                if let Err(e) = self.db().collect_blob_garbage() {
                    assert!(
                        self.faults_injected(),
                        "a blob collection failed with no fault injected: {e}"
                    );
                }
                self.check_blob_accounting();
            }
            9 => {
                let how =
                    [Close::Drop, Close::Kill, Close::PowerLoss][usize::from(input.next() % 3)];
                let fault = (input.next() & 1 == 1).then(|| Self::fault_plan(input, 0));
                self.reopen(how, fault);
            }
            10 | 11 => {
                let plan = Self::fault_plan(input, self.faults.ops());
                self.faults.set_plan(Some(plan));
            }
            _ => self.faults.set_plan(None),
        }
    }
}

/// Random operations against a model of what the database must hold, with I/O faults injected
/// where the input says: puts, deletes, range deletions and batches (synced or not), gets, scans, seeks with a
/// step back, snapshots, compactions, faults (EIO, ENOSPC, a short write, a failed sync; once or
/// for good), and reopens after a clean close, a process kill or a power loss, with or without
/// a fault while recovering. Inputs of odd length run with key-value separation (values of 100
/// bytes and more in blob files, and garbage collection on request).
///
/// Checked at every step: reads are always right (faults hit writes only); while no fault has
/// been injected everything succeeds; once a write fails every later one fails until a reopen;
/// a reopen after a close or a kill holds every acknowledged write, and after a power loss a
/// prefix of them that includes every synced one; the first failed write is there whole or
/// not at all; an open that fails under a fault succeeds once the fault is gone.
pub fn ops_model(data: &[u8]) {
    let mut input = Input { bytes: data };
    let mut harness = Harness::new(data.len() % 2 == 1);
    let mut steps = 0;
    while !input.is_empty() && steps < 400 {
        harness.step(&mut input);
        steps += 1;
    }
    harness.reopen(Close::Kill, None);
    harness.check_scan();
}
