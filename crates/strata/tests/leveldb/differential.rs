// SPDX-License-Identifier: MIT OR Apache-2.0
//! Differential test against LevelDB 1.23 (Debian's libleveldb, through its C API): the same
//! random operations go to a strata database and to a LevelDB database, and every read must
//! give the same answer on both.
//!
//! The operations, drawn from a seeded PRNG: puts, deletes, range deletions (strata's
//! `delete_range`; on LevelDB, which has none, one batch deleting every key the model holds in
//! the range), write batches mixing puts and deletes (with repeated keys), point lookups, full scans forward and backward (strata's `scan`, its `.rev()`,
//! both ends consumed in turn, and its cursor), bounded range scans, seeks followed by a few
//! `next`/`prev` steps, snapshots (lookups, scans and seeks through older ones), a cursor kept
//! open across later writes and compactions, `compact_range` over random ranges and over
//! everything, and close + reopen of both databases. Keys come from a small alphabet so that
//! overwrites and deletes of live keys are frequent (with the empty key and 0x00/0xff bytes now
//! and then); values run from empty to 100 KiB. Both sides use 64 KiB write buffers and 1 MiB
//! tables, so flushes and compactions run throughout. Even seeds use no filter, odd seeds a
//! 10-bit bloom filter on both sides; seeds 2 and 3 (mod 4) store blocks uncompressed.
//!
//! A mismatch fails with the seed, the step, the operation, both answers, the answer a model of
//! the writes (a `BTreeMap`, kept beside both databases) implies, and the operations before it.
//!
//! One exception: when LevelDB alone is wrong (strata agrees with the model), the seed stops
//! there with a report on stderr, and the test fails only if that happens in more than a quarter
//! of the seeds (or with `STRATA_DIFF_STRICT=1`). LevelDB 1.23 has at least one such bug: a
//! compaction from level L to L+1 that takes a level-(L+1) table ending in a key's newer
//! entries (a deletion) but not the next table, which starts with an older entry of the same
//! key (a user key split across two tables while a snapshot kept every version), drops the
//! deletion, and the older value comes back (upstream LevelDB now also calls
//! `AddBoundaryInputs` on the level-(L+1) inputs). Seed 1022 (3000 operations) meets it at step
//! 672 and shows it at step 725.
//!
//! Environment:
//! - `STRATA_DIFF_OPS=N`: operations per seed (default 3000);
//! - `STRATA_DIFF_SEEDS=N`: how many seeds (default 4);
//! - `STRATA_DIFF_SEED=N`: the first seed (default 0; alone, runs only that seed);
//! - `STRATA_DIFF_TRACE=1`: print every operation to stderr (and the tables per level);
//! - `STRATA_DIFF_STRICT=1`: fail also when LevelDB alone is wrong.
//!
//! Run with `cargo test -p strata --features leveldb-interop --test leveldb differential::`.

#![cfg(feature = "leveldb-interop")]

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;
use std::ops::Bound;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::filter::BloomFilterPolicy;
use strata::{Compression, DbIterator, ReadOptions, WriteBatch, WriteOptions};
use strata_testkit::leveldb::{self, Iter as LevelIter, Snapshot as LevelSnapshot};

const DEFAULT_OPS: usize = 3000;
const DEFAULT_SEEDS: u64 = 4;
const WRITE_BUFFER_SIZE: usize = 64 << 10;
const MAX_FILE_SIZE: usize = 1 << 20;
const BLOCK_SIZE: usize = 1 << 10;
const MAX_SNAPSHOTS: usize = 4;
/// Operations kept for the failure message.
const RECENT_OPS: usize = 20;

type Entry = (Vec<u8>, Vec<u8>);
/// A cursor's position: the entry it stands on, or `None` when it is not valid.
type Pos = Option<Entry>;

// ---- LevelDB, as this test opens it (strata-testkit's safe wrapper of its C API). ----

/// A LevelDB database. Its snapshots and iterators keep it open until they are dropped.
struct LevelDb(leveldb::LevelDb);

impl std::ops::Deref for LevelDb {
    type Target = leveldb::LevelDb;
    fn deref(&self) -> &leveldb::LevelDb {
        &self.0
    }
}

impl LevelDb {
    fn open(dir: &Path, bloom: bool, compression: Compression) -> Result<LevelDb, String> {
        let options = leveldb::Options {
            create_if_missing: true,
            paranoid_checks: true,
            write_buffer_size: Some(WRITE_BUFFER_SIZE),
            max_file_size: Some(MAX_FILE_SIZE),
            block_size: Some(BLOCK_SIZE),
            compression: Some(compression as i32),
            bloom_bits: bloom.then_some(10),
            verify_checksums: true,
            cache_size: None,
        };
        leveldb::LevelDb::open(dir, &options).map(LevelDb)
    }

    /// Applies `ops` (a put for `Some(value)`, a delete for `None`) as one batch.
    fn write(&self, ops: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<(), String> {
        let mut batch = leveldb::WriteBatch::new();
        for (k, v) in ops {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            }
        }
        self.0.write(&batch, false)
    }
}

/// A LevelDB iterator's position.
trait Position {
    fn pos(&self) -> Pos;
}

impl Position for LevelIter {
    fn pos(&self) -> Pos {
        self.valid()
            .then(|| (self.key().to_vec(), self.value().to_vec()))
    }
}

// ---- The operations. ----

#[derive(Clone, Copy, Debug)]
enum Step {
    Next,
    Prev,
}

#[derive(Clone, Debug)]
enum Target {
    First,
    Last,
    Key(Vec<u8>),
}

/// How a full scan reads strata (LevelDB always uses its iterator).
#[derive(Clone, Copy, Debug)]
enum ScanKind {
    /// `Db::scan`.
    Forward,
    /// `Db::scan(..).rev()`.
    Backward,
    /// `Db::scan`, taking from both ends in turn (the pattern from this seed); compared, in
    /// key order, with LevelDB's forward scan.
    BothEnds(u64),
    /// A `DbIterator` from `seek_to_first`.
    CursorForward,
    /// A `DbIterator` from `seek_to_last`.
    CursorBackward,
}

enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `[start, end)`, start not after end.
    DeleteRange(Vec<u8>, Vec<u8>),
    /// A put for `Some(value)`, a delete for `None`.
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    /// Through the snapshot of this index, if any.
    Get(Vec<u8>, Option<usize>),
    Scan(ScanKind, Option<usize>),
    /// `Db::range` (backward if `reverse`) against LevelDB's iterator bounded by hand.
    Range {
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
    },
    Seek(Target, Vec<Step>, Option<usize>),
    TakeSnapshot,
    ReleaseSnapshot(usize),
    /// Opens the long-lived cursor pair (replacing any) and positions it.
    OpenCursor(Target),
    /// Moves the long-lived cursor pair: seeks if a target is given, then steps.
    MoveCursor(Option<Target>, Vec<Step>),
    CompactRange(Option<Vec<u8>>, Option<Vec<u8>>),
    Reopen,
}

/// Bytes for a message: short ones escaped in full, long ones as a prefix, length and hash.
struct Show<'a>(&'a [u8]);

impl fmt::Display for Show<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        let escaped = |b: &[u8]| -> String { b.escape_ascii().to_string() };
        if b.len() <= 32 {
            write!(f, "\"{}\"", escaped(b))
        } else {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for &x in b {
                h = (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3);
            }
            write!(
                f,
                "\"{}\"... ({} bytes, fnv {h:016x})",
                escaped(&b[..16]),
                b.len()
            )
        }
    }
}

fn show_opt(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(v) => format!("Some({})", Show(v)),
        None => "None".into(),
    }
}

fn show_pos(p: &Pos) -> String {
    match p {
        Some((k, v)) => format!("{} => {}", Show(k), Show(v)),
        None => "(not valid)".into(),
    }
}

fn show_bound(b: &Bound<Vec<u8>>) -> String {
    match b {
        Bound::Included(k) => format!("Included({})", Show(k)),
        Bound::Excluded(k) => format!("Excluded({})", Show(k)),
        Bound::Unbounded => "Unbounded".into(),
    }
}

fn show_target(t: &Target) -> String {
    match t {
        Target::First => "first".into(),
        Target::Last => "last".into(),
        Target::Key(k) => Show(k).to_string(),
    }
}

fn show_snap(s: &Option<usize>) -> String {
    s.map_or(String::new(), |i| format!(" at snapshot #{i}"))
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Put(k, v) => write!(f, "put {} = {}", Show(k), Show(v)),
            Op::Delete(k) => write!(f, "delete {}", Show(k)),
            Op::DeleteRange(a, b) => write!(f, "delete range {} .. {}", Show(a), Show(b)),
            Op::Batch(ops) => {
                write!(f, "batch [")?;
                for (i, (k, v)) in ops.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    match v {
                        Some(v) => write!(f, "{sep}put {} = {}", Show(k), Show(v))?,
                        None => write!(f, "{sep}delete {}", Show(k))?,
                    }
                }
                write!(f, "]")
            }
            Op::Get(k, s) => write!(f, "get {}{}", Show(k), show_snap(s)),
            Op::Scan(kind, s) => write!(f, "scan {kind:?}{}", show_snap(s)),
            Op::Range {
                start,
                end,
                reverse,
            } => write!(
                f,
                "range {}..{}{}",
                show_bound(start),
                show_bound(end),
                if *reverse { " reversed" } else { "" }
            ),
            Op::Seek(t, steps, s) => {
                write!(f, "seek {} then {steps:?}{}", show_target(t), show_snap(s))
            }
            Op::TakeSnapshot => write!(f, "take a snapshot"),
            Op::ReleaseSnapshot(i) => write!(f, "release snapshot #{i}"),
            Op::OpenCursor(t) => write!(f, "open the long-lived cursor at {}", show_target(t)),
            Op::MoveCursor(t, steps) => write!(
                f,
                "move the long-lived cursor: {}{steps:?}",
                t.as_ref()
                    .map_or(String::new(), |t| format!("seek {} then ", show_target(t)))
            ),
            Op::CompactRange(b, e) => {
                write!(f, "compact_range({}, {})", show_opt(b), show_opt(e))
            }
            Op::Reopen => write!(f, "close and reopen both"),
        }
    }
}

// ---- The model: the referee when strata and LevelDB disagree. ----

/// What the writes so far imply.
type Model = BTreeMap<Vec<u8>, Rc<Vec<u8>>>;

fn model_entries(model: &Model) -> Vec<Entry> {
    model.iter().map(|(k, v)| (k.clone(), v.to_vec())).collect()
}

/// The key a cursor over `model` stands on after seeking to `target`.
fn model_seek(model: &Model, target: &Target) -> Option<Vec<u8>> {
    match target {
        Target::First => model.keys().next().cloned(),
        Target::Last => model.keys().next_back().cloned(),
        Target::Key(k) => model
            .range::<[u8], _>((Bound::Included(k.as_slice()), Bound::Unbounded))
            .next()
            .map(|(k, _)| k.clone()),
    }
}

/// The key a cursor over `model` stands on after `step` from `at`.
fn model_step(model: &Model, at: &[u8], step: Step) -> Option<Vec<u8>> {
    let bounds = match step {
        Step::Next => (Bound::Excluded(at), Bound::Unbounded),
        Step::Prev => (Bound::Unbounded, Bound::Excluded(at)),
    };
    let mut range = model.range::<[u8], _>(bounds);
    let found = match step {
        Step::Next => range.next(),
        Step::Prev => range.next_back(),
    };
    found.map(|(k, _)| k.clone())
}

fn model_pos(model: &Model, at: &Option<Vec<u8>>) -> Pos {
    at.as_ref().map(|k| (k.clone(), model[k].to_vec()))
}

// ---- The run. ----

#[derive(Default)]
struct Stats {
    ops: u64,
    /// Answers compared: lookups, scans, cursor positions.
    comparisons: u64,
    /// Entries in the scans compared.
    entries: u64,
}

/// What a failure message names, and how a seed ends.
struct Ctx {
    seed: u64,
    step: usize,
    recent: VecDeque<String>,
    stats: Stats,
    /// Fail also when LevelDB alone is wrong.
    strict: bool,
    /// Set when LevelDB alone gave a wrong answer (strata gave what the writes imply): LevelDB's
    /// database no longer holds what the writes imply, so the seed stops there.
    leveldb_wrong: Option<String>,
}

impl Ctx {
    fn message(&self, op: &Op, what: &str, answers: &[String; 3], verdict: &str) -> String {
        let mut recent = String::new();
        for line in &self.recent {
            recent.push_str("\n    ");
            recent.push_str(line);
        }
        let [strata, leveldb, model] = answers;
        format!(
            "strata and LevelDB differ: seed {}, step {}: {op}\n  {what}\n  strata:  {strata}\n  \
             leveldb: {leveldb}\n  model:   {model}\n  {verdict}\n  the operations before it \
             (rerun with STRATA_DIFF_SEED={} STRATA_DIFF_TRACE=1 for all):{recent}",
            self.seed, self.step, self.seed
        )
    }

    fn ok<T, E: fmt::Display>(&self, op: &Op, side: &str, r: Result<T, E>) -> T {
        r.unwrap_or_else(|e| {
            let what = format!("{side} failed: {e}");
            panic!("{}", self.message(op, &what, &Default::default(), ""))
        })
    }

    /// True once the seed has stopped (LevelDB was wrong): nothing more is compared.
    fn stopped(&self) -> bool {
        self.leveldb_wrong.is_some()
    }

    /// Reports a difference: fails, unless LevelDB alone is wrong (and not `strict`), which
    /// stops the seed.
    fn mismatch(
        &mut self,
        op: &Op,
        what: &str,
        answers: [String; 3],
        strata_right: bool,
        leveldb_right: bool,
    ) {
        let verdict = match (strata_right, leveldb_right) {
            (true, _) => "LevelDB is wrong: strata gives what the writes imply",
            (false, true) => "strata is wrong: LevelDB gives what the writes imply",
            (false, false) => "neither gives what the writes imply",
        };
        let message = self.message(op, what, &answers, verdict);
        if strata_right && !self.strict {
            self.leveldb_wrong = Some(message);
        } else {
            panic!("{message}");
        }
    }

    fn check_get(
        &mut self,
        op: &Op,
        s: &Option<Vec<u8>>,
        l: &Option<Vec<u8>>,
        m: Option<&Rc<Vec<u8>>>,
    ) {
        self.stats.comparisons += 1;
        if s != l {
            let m = m.map(|v| v.to_vec());
            let answers = [show_opt(s), show_opt(l), show_opt(&m)];
            self.mismatch(op, "get", answers, *s == m, *l == m);
        }
    }

    fn check_pos(&mut self, op: &Op, what: &str, s: &Pos, l: &Pos, m: &Pos) {
        self.stats.comparisons += 1;
        if s != l {
            let answers = [show_pos(s), show_pos(l), show_pos(m)];
            self.mismatch(op, what, answers, s == m, l == m);
        }
    }

    fn check_list(
        &mut self,
        op: &Op,
        what: &str,
        s: &[Entry],
        l: &[Entry],
        m: impl FnOnce() -> Vec<Entry>,
    ) {
        self.stats.comparisons += 1;
        self.stats.entries += s.len() as u64;
        if s == l {
            return;
        }
        let m = m();
        let i = s.iter().zip(l).take_while(|(a, b)| a == b).count();
        let at = |list: &[Entry]| {
            let before = match i.checked_sub(1) {
                Some(j) if j < list.len() => format!("after {}, ", Show(&list[j].0)),
                _ => String::new(),
            };
            let here = list.get(i).map_or("the end".into(), |(k, v)| {
                format!("{} => {}", Show(k), Show(v))
            });
            format!("{} entries; {before}entry {i} is {here}", list.len())
        };
        let answers = [at(s), at(l), at(&m)];
        self.mismatch(op, what, answers, s == m, l == m);
    }
}

/// strata's cursor position.
fn pos(it: &DbIterator) -> Pos {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

/// A snapshot of both databases and of the model.
struct SnapshotPair {
    strata: strata::Snapshot,
    leveldb: LevelSnapshot,
    model: Rc<Model>,
}

/// A cursor on both databases, and where a cursor on the model they had stands.
struct Cursor {
    strata: DbIterator,
    leveldb: LevelIter,
    model: Rc<Model>,
    at: Option<Vec<u8>>,
}

/// What reads through snapshot `snap` (or the latest state) use on each side.
fn view<'a>(
    snapshots: &'a [SnapshotPair],
    model: &'a Model,
    snap: Option<usize>,
) -> (ReadOptions<'a>, Option<&'a LevelSnapshot>, &'a Model) {
    match snap {
        Some(i) => {
            let pair = &snapshots[i];
            let ro = ReadOptions {
                snapshot: Some(&pair.strata),
                ..ReadOptions::default()
            };
            (ro, Some(&pair.leveldb), &pair.model)
        }
        None => (ReadOptions::default(), None, model),
    }
}

struct Run {
    ctx: Ctx,
    rng: StdRng,
    /// Keys written so far, for picking live keys.
    known: Vec<Vec<u8>>,
    known_set: HashSet<Vec<u8>>,
    bloom: bool,
    compression: Compression,
    model: Model,
    // Dropped before the databases they read.
    snapshots: Vec<SnapshotPair>,
    cursor: Option<Cursor>,
    strata: Option<strata::Db>,
    leveldb: Option<LevelDb>,
    dir: tempfile::TempDir,
}

impl Run {
    fn new(seed: u64, strict: bool) -> Run {
        let mut run = Run {
            ctx: Ctx {
                seed,
                step: 0,
                recent: VecDeque::new(),
                stats: Stats::default(),
                strict,
                leveldb_wrong: None,
            },
            rng: StdRng::seed_from_u64(seed),
            known: Vec::new(),
            known_set: HashSet::new(),
            bloom: seed % 2 == 1,
            compression: if seed % 4 >= 2 {
                Compression::None
            } else {
                Compression::Snappy
            },
            model: Model::new(),
            snapshots: Vec::new(),
            cursor: None,
            strata: None,
            leveldb: None,
            dir: tempfile::tempdir().unwrap(),
        };
        run.open();
        run
    }

    fn open(&mut self) {
        let options = strata::Options {
            create_if_missing: true,
            write_buffer_size: WRITE_BUFFER_SIZE,
            max_file_size: MAX_FILE_SIZE,
            block_size: BLOCK_SIZE,
            compression: self.compression,
            filter_policy: self
                .bloom
                .then(|| Arc::new(BloomFilterPolicy::new(10)) as _),
            ..strata::Options::default()
        };
        let db = strata::Db::open(self.dir.path().join("strata"), options);
        self.strata = Some(self.ctx.ok(&Op::Reopen, "strata's open", db));
        let db = LevelDb::open(
            &self.dir.path().join("leveldb"),
            self.bloom,
            self.compression,
        );
        self.leveldb = Some(self.ctx.ok(&Op::Reopen, "LevelDB's open", db));
    }

    fn close(&mut self) {
        self.cursor = None;
        self.snapshots.clear();
        self.strata = None;
        let leveldb = self.leveldb.take().unwrap();
        assert_eq!(leveldb.handles(), 1, "LevelDB is still in use");
    }

    /// Tables per level in strata and in LevelDB, e.g. `"2 3 1 0 0 0 0"`.
    fn levels(&self) -> (String, String) {
        let s = self.strata.as_ref().unwrap();
        let l = self.leveldb.as_ref().unwrap();
        let name = |level| format!("leveldb.num-files-at-level{level}");
        let row = |f: &dyn Fn(&str) -> Option<String>| {
            (0..7)
                .map(|level| f(&name(level)).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(" ")
        };
        (row(&|n| s.property(n)), row(&|n| l.property(n)))
    }

    // -- Generation. --

    fn gen_key(&mut self) -> Vec<u8> {
        let rng = &mut self.rng;
        if !self.known.is_empty() && rng.gen_bool(0.4) {
            return self.known[rng.gen_range(0..self.known.len())].clone();
        }
        if rng.gen_ratio(1, 80) {
            return Vec::new();
        }
        let len = match rng.gen_range(0..10) {
            0..=2 => rng.gen_range(1..=3),
            3..=6 => rng.gen_range(4..=5),
            _ => rng.gen_range(6..=8),
        };
        let mut key: Vec<u8> = (0..len).map(|_| b"abcd"[rng.gen_range(0..4)]).collect();
        if rng.gen_ratio(1, 15) {
            let i = rng.gen_range(0..len);
            key[i] = if rng.gen_bool(0.5) { 0x00 } else { 0xff };
        }
        key
    }

    /// A key likely to be live (one written before), else any key.
    fn gen_live_key(&mut self) -> Vec<u8> {
        if !self.known.is_empty() && self.rng.gen_bool(0.7) {
            return self.known[self.rng.gen_range(0..self.known.len())].clone();
        }
        self.gen_key()
    }

    fn gen_value(&mut self) -> Vec<u8> {
        let rng = &mut self.rng;
        let len = match rng.gen_range(0..100) {
            0..=2 => 0,
            3..=79 => rng.gen_range(1..=200),
            80..=89 => rng.gen_range(201..4096),
            90..=98 => rng.gen_range(4096..=32 << 10),
            _ => rng.gen_range((96 << 10)..=(100 << 10)),
        };
        let mut v = vec![0u8; len];
        if rng.gen_bool(0.5) {
            rng.fill(&mut v[..]);
        } else {
            // Compressible: a random prefix, then a repeated byte.
            let random = len.min(rng.gen_range(0..=64));
            rng.fill(&mut v[..random]);
            v[random..].fill(rng.gen());
        }
        v
    }

    fn remember(&mut self, key: &[u8]) {
        if self.known_set.insert(key.to_vec()) {
            self.known.push(key.to_vec());
        }
    }

    fn gen_target(&mut self) -> Target {
        match self.rng.gen_range(0..10) {
            0 => Target::First,
            1 => Target::Last,
            _ => Target::Key(self.gen_key()),
        }
    }

    fn gen_steps(&mut self) -> Vec<Step> {
        let n = self.rng.gen_range(0..=6);
        (0..n)
            .map(|_| {
                if self.rng.gen_bool(0.5) {
                    Step::Next
                } else {
                    Step::Prev
                }
            })
            .collect()
    }

    fn gen_bound(&mut self) -> Bound<Vec<u8>> {
        match self.rng.gen_range(0..10) {
            0 => Bound::Unbounded,
            1..=5 => Bound::Included(self.gen_key()),
            _ => Bound::Excluded(self.gen_key()),
        }
    }

    /// A snapshot index, if there is a snapshot (and always one when `need`).
    fn gen_snapshot(&mut self, need: bool) -> Option<usize> {
        if self.snapshots.is_empty() || (!need && self.rng.gen_bool(0.8)) {
            None
        } else {
            Some(self.rng.gen_range(0..self.snapshots.len()))
        }
    }

    fn gen_op(&mut self) -> Op {
        match self.rng.gen_range(0..1000) {
            0..=249 => {
                let k = self.gen_key();
                Op::Put(k, self.gen_value())
            }
            250..=309 => Op::Delete(self.gen_live_key()),
            310..=329 => {
                let (a, b) = (self.gen_live_key(), self.gen_key());
                if a <= b {
                    Op::DeleteRange(a, b)
                } else {
                    Op::DeleteRange(b, a)
                }
            }
            330..=409 => {
                let n = self.rng.gen_range(1..=12);
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    if !ops.is_empty() && self.rng.gen_ratio(1, 8) {
                        // The same key again in the batch: the later operation wins.
                        let (k, _): &(Vec<u8>, _) = &ops[self.rng.gen_range(0..ops.len())];
                        let k = k.clone();
                        let v = self.rng.gen_bool(0.5).then(|| self.gen_value());
                        ops.push((k, v));
                    } else if self.rng.gen_bool(0.3) {
                        ops.push((self.gen_live_key(), None));
                    } else {
                        let k = self.gen_key();
                        ops.push((k, Some(self.gen_value())));
                    }
                }
                Op::Batch(ops)
            }
            410..=589 => Op::Get(self.gen_live_key(), None),
            590..=629 => {
                let kind = match self.rng.gen_range(0..5) {
                    0 => ScanKind::Forward,
                    1 => ScanKind::Backward,
                    2 => ScanKind::BothEnds(self.rng.gen()),
                    3 => ScanKind::CursorForward,
                    _ => ScanKind::CursorBackward,
                };
                Op::Scan(kind, self.gen_snapshot(false))
            }
            630..=669 => {
                let mut start = self.gen_bound();
                let mut end = self.gen_bound();
                let key = |b: &Bound<Vec<u8>>| match b {
                    Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
                    Bound::Unbounded => None,
                };
                if let (Some(s), Some(e)) = (key(&start), key(&end)) {
                    // Mostly in order; sometimes inverted (an empty range).
                    if s > e && self.rng.gen_ratio(9, 10) {
                        std::mem::swap(&mut start, &mut end);
                    }
                }
                Op::Range {
                    start,
                    end,
                    reverse: self.rng.gen_bool(0.5),
                }
            }
            670..=789 => {
                let target = self.gen_target();
                let steps = self.gen_steps();
                Op::Seek(target, steps, self.gen_snapshot(false))
            }
            790..=809 => {
                if self.snapshots.len() >= MAX_SNAPSHOTS {
                    Op::ReleaseSnapshot(self.rng.gen_range(0..self.snapshots.len()))
                } else {
                    Op::TakeSnapshot
                }
            }
            810..=819 if !self.snapshots.is_empty() => {
                Op::ReleaseSnapshot(self.rng.gen_range(0..self.snapshots.len()))
            }
            820..=869 if !self.snapshots.is_empty() => {
                let k = self.gen_live_key();
                Op::Get(k, self.gen_snapshot(true))
            }
            870..=889 if !self.snapshots.is_empty() => {
                let target = self.gen_target();
                let steps = self.gen_steps();
                Op::Seek(target, steps, self.gen_snapshot(true))
            }
            810..=889 => Op::TakeSnapshot,
            890..=899 => Op::Scan(ScanKind::Forward, self.gen_snapshot(true)),
            900..=914 => Op::OpenCursor(self.gen_target()),
            915..=954 if self.cursor.is_some() => {
                let target = self.rng.gen_bool(0.3).then(|| self.gen_target());
                Op::MoveCursor(target, self.gen_steps())
            }
            915..=954 => Op::OpenCursor(self.gen_target()),
            955..=974 => {
                let mut begin = self.rng.gen_ratio(4, 5).then(|| self.gen_key());
                let mut end = self.rng.gen_ratio(4, 5).then(|| self.gen_key());
                if let (Some(b), Some(e)) = (&begin, &end) {
                    if b > e {
                        std::mem::swap(&mut begin, &mut end);
                    }
                }
                Op::CompactRange(begin, end)
            }
            975..=977 => Op::CompactRange(None, None),
            978..=992 => Op::Get(self.gen_key(), None),
            _ => Op::Reopen,
        }
    }

    // -- Application. --

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Put(k, _) => self.remember(k),
            Op::Batch(ops) => {
                for (k, v) in ops {
                    if v.is_some() {
                        self.remember(k);
                    }
                }
            }
            _ => {}
        }
        let wo = WriteOptions::default();
        let s = self.strata.as_ref().unwrap();
        let l = self.leveldb.as_ref().unwrap();
        match op {
            Op::Put(k, v) => {
                self.ctx.ok(op, "strata's put", s.put_opt(k, v, &wo));
                self.ctx.ok(op, "LevelDB's put", l.put(k, v));
                self.model.insert(k.clone(), Rc::new(v.clone()));
            }
            Op::Delete(k) => {
                self.ctx.ok(op, "strata's delete", s.delete_opt(k, &wo));
                self.ctx.ok(op, "LevelDB's delete", l.delete(k));
                self.model.remove(k);
            }
            Op::DeleteRange(a, b) => {
                self.ctx
                    .ok(op, "strata's delete_range", s.delete_range_opt(a, b, &wo));
                let doomed: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
                    .model
                    .range::<Vec<u8>, _>(a..b)
                    .map(|(k, _)| (k.clone(), None))
                    .collect();
                self.ctx.ok(op, "LevelDB's deletes", l.write(&doomed));
                for (k, _) in &doomed {
                    self.model.remove(k);
                }
            }
            Op::Batch(ops) => {
                let mut batch = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => {
                            batch.put(k, v);
                            self.model.insert(k.clone(), Rc::new(v.clone()));
                        }
                        None => {
                            batch.delete(k);
                            self.model.remove(k);
                        }
                    }
                }
                self.ctx.ok(op, "strata's write", s.write_opt(batch, &wo));
                self.ctx.ok(op, "LevelDB's write", l.write(ops));
            }
            Op::Get(k, snap) => {
                let (ro, ls, m) = view(&self.snapshots, &self.model, *snap);
                let sv = self.ctx.ok(op, "strata's get", s.get_opt(k, &ro));
                let lv = self.ctx.ok(op, "LevelDB's get", l.get(k, ls));
                self.ctx.check_get(op, &sv, &lv, m.get(k));
            }
            Op::Scan(kind, snap) => self.scan(op, *kind, *snap),
            Op::Range {
                start,
                end,
                reverse,
            } => self.range(op, start, end, *reverse),
            Op::Seek(target, steps, snap) => {
                let (ro, ls, m) = view(&self.snapshots, &self.model, *snap);
                let mut si = self.ctx.ok(op, "strata's iter", s.iter_opt(&ro));
                let mut li = l.iter(ls);
                let mut at = None;
                let cursors = (&mut si, &mut li, &mut at);
                move_cursors(&mut self.ctx, op, cursors, m, Some(target), steps);
            }
            Op::TakeSnapshot => {
                let pair = SnapshotPair {
                    strata: s.snapshot(),
                    leveldb: l.snapshot(),
                    model: Rc::new(self.model.clone()),
                };
                self.snapshots.push(pair);
            }
            Op::ReleaseSnapshot(i) => {
                self.snapshots.remove(*i);
            }
            Op::OpenCursor(target) => {
                let mut cursor = Cursor {
                    strata: self.ctx.ok(op, "strata's iter", s.iter()),
                    leveldb: l.iter(None),
                    model: Rc::new(self.model.clone()),
                    at: None,
                };
                let c = &mut cursor;
                let cursors = (&mut c.strata, &mut c.leveldb, &mut c.at);
                move_cursors(&mut self.ctx, op, cursors, &c.model, Some(target), &[]);
                self.cursor = Some(cursor);
            }
            Op::MoveCursor(target, steps) => {
                let c = self.cursor.as_mut().unwrap();
                let cursors = (&mut c.strata, &mut c.leveldb, &mut c.at);
                move_cursors(&mut self.ctx, op, cursors, &c.model, target.as_ref(), steps);
            }
            Op::CompactRange(b, e) => {
                let r = s.compact_range(b.as_deref(), e.as_deref());
                self.ctx.ok(op, "strata's compact_range", r);
                l.compact_range(b.as_deref(), e.as_deref());
            }
            Op::Reopen => {
                self.close();
                self.open();
            }
        }
    }

    fn scan(&mut self, op: &Op, kind: ScanKind, snap: Option<usize>) {
        let s = self.strata.as_ref().unwrap();
        let l = self.leveldb.as_ref().unwrap();
        let (ro, ls, m) = view(&self.snapshots, &self.model, snap);
        let backward = matches!(kind, ScanKind::Backward | ScanKind::CursorBackward);
        let ctx = &mut self.ctx;
        let strata_entries: Vec<Entry> = match kind {
            ScanKind::Forward => ctx.ok(
                op,
                "strata's scan",
                s.scan_opt(&ro).and_then(Iterator::collect),
            ),
            ScanKind::Backward => ctx.ok(
                op,
                "strata's scan",
                s.scan_opt(&ro).and_then(|r| r.rev().collect()),
            ),
            ScanKind::BothEnds(pattern) => {
                let mut it = ctx.ok(op, "strata's scan", s.scan_opt(&ro));
                let mut rng = StdRng::seed_from_u64(pattern);
                let (mut front, mut back) = (Vec::new(), Vec::new());
                loop {
                    let item = if rng.gen_bool(0.5) {
                        it.next().map(|e| (e, &mut front))
                    } else {
                        it.next_back().map(|e| (e, &mut back))
                    };
                    let Some((e, side)) = item else { break };
                    side.push(ctx.ok(op, "strata's scan", e));
                }
                back.reverse();
                front.extend(back);
                front
            }
            ScanKind::CursorForward | ScanKind::CursorBackward => {
                let mut it = ctx.ok(op, "strata's iter", s.iter_opt(&ro));
                let mut out = Vec::new();
                if backward {
                    it.seek_to_last();
                } else {
                    it.seek_to_first();
                }
                while let Some(e) = pos(&it) {
                    out.push(e);
                    if backward {
                        it.prev();
                    } else {
                        it.next();
                    }
                }
                ctx.ok(op, "strata's cursor", it.status());
                out
            }
        };
        let mut li = l.iter(ls);
        let mut leveldb_entries = Vec::new();
        if backward {
            li.seek_to_last();
        } else {
            li.seek_to_first();
        }
        while let Some(e) = li.pos() {
            leveldb_entries.push(e);
            if backward {
                li.prev();
            } else {
                li.next();
            }
        }
        ctx.ok(op, "LevelDB's iterator", li.status());
        let model = || {
            let mut entries = model_entries(m);
            if backward {
                entries.reverse();
            }
            entries
        };
        ctx.check_list(
            op,
            "the entries scanned",
            &strata_entries,
            &leveldb_entries,
            model,
        );
    }

    fn range(&mut self, op: &Op, start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>, reverse: bool) {
        let s = self.strata.as_ref().unwrap();
        let l = self.leveldb.as_ref().unwrap();
        let ctx = &mut self.ctx;
        let ro = ReadOptions::default();
        let bounds = (start.clone(), end.clone());
        let strata_entries: Vec<Entry> = ctx.ok(
            op,
            "strata's range",
            s.range_opt(bounds, &ro).and_then(|r| {
                if reverse {
                    r.rev().collect()
                } else {
                    r.collect()
                }
            }),
        );
        // LevelDB has no bounded iterator: seek to one end and stop past the other.
        let after_start = |k: &[u8]| match start {
            Bound::Included(s) => k >= s.as_slice(),
            Bound::Excluded(s) => k > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = |k: &[u8]| match end {
            Bound::Included(e) => k <= e.as_slice(),
            Bound::Excluded(e) => k < e.as_slice(),
            Bound::Unbounded => true,
        };
        let mut li = l.iter(None);
        let mut leveldb_entries = Vec::new();
        if reverse {
            match end {
                Bound::Unbounded => li.seek_to_last(),
                Bound::Included(e) | Bound::Excluded(e) => {
                    li.seek(e);
                    if !li.valid() {
                        li.seek_to_last();
                    }
                    if li.valid() && !before_end(li.key()) {
                        li.prev();
                    }
                }
            }
            while li.valid() && after_start(li.key()) {
                leveldb_entries.push(li.pos().unwrap());
                li.prev();
            }
        } else {
            match start {
                Bound::Unbounded => li.seek_to_first(),
                Bound::Included(s) | Bound::Excluded(s) => {
                    li.seek(s);
                    if li.valid() && !after_start(li.key()) {
                        li.next();
                    }
                }
            }
            while li.valid() && before_end(li.key()) {
                leveldb_entries.push(li.pos().unwrap());
                li.next();
            }
        }
        ctx.ok(op, "LevelDB's iterator", li.status());
        let model = || {
            let mut entries: Vec<Entry> = model_entries(&self.model)
                .into_iter()
                .filter(|(k, _)| after_start(k) && before_end(k))
                .collect();
            if reverse {
                entries.reverse();
            }
            entries
        };
        ctx.check_list(
            op,
            "the entries in the range",
            &strata_entries,
            &leveldb_entries,
            model,
        );
    }
}

/// Seeks strata's and LevelDB's cursors to `target` (if given), then takes `steps` while they
/// are valid, comparing their positions after every move. `at` is where a cursor over `model`
/// (the state they read) stands, moved alongside.
fn move_cursors(
    ctx: &mut Ctx,
    op: &Op,
    (si, li, at): (&mut DbIterator, &mut LevelIter, &mut Option<Vec<u8>>),
    model: &Model,
    target: Option<&Target>,
    steps: &[Step],
) {
    if let Some(target) = target {
        match target {
            Target::First => {
                si.seek_to_first();
                li.seek_to_first();
            }
            Target::Last => {
                si.seek_to_last();
                li.seek_to_last();
            }
            Target::Key(k) => {
                si.seek(k);
                li.seek(k);
            }
        }
        *at = model_seek(model, target);
        let m = model_pos(model, at);
        ctx.check_pos(op, "position after the seek", &pos(si), &li.pos(), &m);
    }
    for (i, &step) in steps.iter().enumerate() {
        if !si.valid() || ctx.stopped() {
            break;
        }
        match step {
            Step::Next => {
                si.next();
                li.next();
            }
            Step::Prev => {
                si.prev();
                li.prev();
            }
        }
        *at = at.as_deref().and_then(|k| model_step(model, k, step));
        let what = format!("position after step {} ({step:?})", i + 1);
        let m = model_pos(model, at);
        ctx.check_pos(op, &what, &pos(si), &li.pos(), &m);
    }
    ctx.ok(op, "strata's cursor", si.status());
    ctx.ok(op, "LevelDB's iterator", li.status());
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

/// Runs one seed; returns its counts and, if LevelDB alone went wrong, the report of that.
fn run_seed(seed: u64, ops: usize, trace: bool, strict: bool) -> (Stats, Option<String>) {
    let mut run = Run::new(seed, strict);
    for step in 0..ops {
        let op = run.gen_op();
        run.ctx.step = step;
        let line = format!("{step}: {op}");
        if trace {
            eprintln!("seed {seed}, {line}");
        }
        run.apply(&op);
        if trace && step % 250 == 0 {
            let (strata_levels, leveldb_levels) = run.levels();
            eprintln!("tables per level: strata {strata_levels}, LevelDB {leveldb_levels}");
        }
        if run.ctx.recent.len() == RECENT_OPS {
            run.ctx.recent.pop_front();
        }
        run.ctx.recent.push_back(line);
        run.ctx.stats.ops += 1;
        if run.ctx.stopped() {
            break;
        }
    }
    if !run.ctx.stopped() {
        let (strata_levels, leveldb_levels) = run.levels();
        eprintln!(
            "seed {seed}: tables per level: strata {strata_levels}, LevelDB {leveldb_levels}"
        );
        // The end state, read live, after compacting everything and after reopening.
        run.ctx.step = ops;
        let end = Op::Scan(ScanKind::Forward, None);
        run.scan(&end, ScanKind::Forward, None);
        run.apply(&Op::CompactRange(None, None));
        run.scan(&end, ScanKind::Forward, None);
        run.apply(&Op::Reopen);
        run.scan(&end, ScanKind::Forward, None);
    }
    run.close();
    let stats = std::mem::take(&mut run.ctx.stats);
    (stats, run.ctx.leveldb_wrong.take())
}

#[test]
fn random_operations_read_the_same_in_strata_and_leveldb() {
    let ops = env_number("STRATA_DIFF_OPS").map_or(DEFAULT_OPS, |n| n as usize);
    let first = env_number("STRATA_DIFF_SEED");
    let seeds =
        env_number("STRATA_DIFF_SEEDS").unwrap_or(if first.is_some() { 1 } else { DEFAULT_SEEDS });
    let first = first.unwrap_or(0);
    let trace = std::env::var_os("STRATA_DIFF_TRACE").is_some();
    let strict = std::env::var_os("STRATA_DIFF_STRICT").is_some();
    let started = Instant::now();
    let mut total = Stats::default();
    let mut leveldb_wrong = Vec::new();
    for seed in first..first + seeds {
        let t = Instant::now();
        let (stats, wrong) = run_seed(seed, ops, trace, strict);
        eprintln!(
            "seed {seed}: {} operations, {} answers compared ({} scanned entries) in {:.1?}",
            stats.ops,
            stats.comparisons,
            stats.entries,
            t.elapsed()
        );
        if let Some(report) = wrong {
            eprintln!("seed {seed} stopped early: LevelDB went wrong.\n{report}");
            leveldb_wrong.push(seed);
        }
        total.ops += stats.ops;
        total.comparisons += stats.comparisons;
        total.entries += stats.entries;
    }
    eprintln!(
        "{seeds} seeds: {} operations, {} answers compared ({} scanned entries) in {:.1?}",
        total.ops,
        total.comparisons,
        total.entries,
        started.elapsed()
    );
    if !leveldb_wrong.is_empty() {
        eprintln!(
            "seeds stopped early because LevelDB alone was wrong (strata agreed with the model; \
             STRATA_DIFF_STRICT=1 fails on these): {leveldb_wrong:?}"
        );
    }
    assert!(total.comparisons > total.ops / 2, "too few comparisons");
    // LevelDB's own bugs are rare (one seed in tens, see the module's docs): LevelDB going
    // wrong in many seeds points at this harness instead.
    assert!(
        leveldb_wrong.len() * 4 <= seeds as usize,
        "LevelDB alone went wrong in {} of {seeds} seeds (reports above): its bugs are rare, so \
         this many points at the LevelDB wrapper, unless these seeds were picked for them",
        leveldb_wrong.len()
    );
}
