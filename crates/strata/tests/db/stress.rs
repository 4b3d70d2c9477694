// SPDX-License-Identifier: MIT OR Apache-2.0
//! A concurrency stress test: many threads on one [`Db`] on the real file system, with buffers
//! small enough that memtable switches, flushes and compactions happen all the time, checking
//! the guarantees a user relies on:
//!
//! - **Writers** each own a disjoint key space. A batch sets every key of one to three
//!   *groups* to the same value, `(writer, counter)` (each key's value also carries its own
//!   incompressible filler, checked byte for byte), or deletes every key of a group; and it
//!   sets the writer's *head* key to the batch's counter. Before writing a batch, the writer
//!   appends it to a shared per-group history; after `write` returns, it publishes the counter
//!   as acknowledged.
//! - **Snapshot readers** read groups twice through one snapshot (repeatable reads), check that
//!   every group is whole (all its keys set by one batch, or none), and that the groups are
//!   exactly what the history says they were at the head counter the snapshot shows; sometimes
//!   they scan the snapshot too and compare it with the gets.
//! - **An iterator checker** walks cursors and range iterators forward, backward, with seeks
//!   and direction changes: keys strictly ordered, within bounds, and each view one consistent
//!   state (the history at the view's head counters, taken when the iterator was created).
//! - **A monotonic reader** reads single keys without a snapshot: it must see at least what was
//!   acknowledged before the read, and never an older state of a group after a newer one.
//! - **A compactor** compacts everything or random ranges, and reads `leveldb.stats`.
//! - **A watchdog** (the test's thread) fails the test if any thread makes no progress for
//!   [`STALL_LIMIT`] (a deadlock fails rather than hangs CI), if one `compact_range` call runs
//!   longer than [`OP_LIMIT`], or as soon as a thread fails.
//!
//! At the end, every acknowledged write must be readable, before and after reopening (and
//! `strata::check` must find the closed database sound).
//!
//! (`Options::max_file_size` is clamped to at least 1 MiB, as in LevelDB, so the 256 KiB asked
//! for below means 1 MiB tables.)
//!
//! `STRATA_STRESS_SECS=N` runs the stress for N seconds (default 10); `STRATA_STRESS_SEED=S`
//! fixes the seed the threads' random choices derive from (thread scheduling still varies).
//! Without it the seed is [`CI_SEED`] in CI (`CI` set), so that a CI failure replays from the
//! same seed, and a fresh one elsewhere; the seed used is printed either way.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

use common::splitmix64;
use strata_testkit as common;

const WRITERS: usize = 3;
/// Groups per writer.
const GROUPS: usize = 200;
/// Keys per group; a batch writes or deletes all of them together.
const KEYS_PER_GROUP: usize = 4;
/// Batch entries kept per group in the history (older ones are forgotten).
const HISTORY: usize = 256;
/// A thread that makes no progress for this long fails the test.
const STALL_LIMIT: Duration = Duration::from_secs(20);
/// A single `compact_range` call that takes longer than this fails the test. With this little
/// data (about 1 MB live), one takes well under a second; one that runs for the whole stress is
/// a manual compaction that never ends while writes continue.
const OP_LIMIT: Duration = Duration::from_secs(8);
const DEFAULT_SECS: u64 = 10;
/// The seed in CI when `STRATA_STRESS_SEED` is not set.
const CI_SEED: u64 = 0x5742_a7a5_eed0_0001;

/// With `blobs`, values of 600 bytes and more (about half) go to blob files of 1 MiB (the
/// least allowed), and overwrites keep the blob collector rewriting them.
fn options(blobs: bool) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 256 << 10,
        blob_threshold: blobs.then_some(600),
        blob_file_size: 1 << 20,
        ..Options::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Keys and values

fn group_key(w: usize, g: usize, k: usize) -> Vec<u8> {
    format!("w{w}/g{g:03}/k{k}").into_bytes()
}

fn head_key(w: usize) -> Vec<u8> {
    format!("w{w}/head").into_bytes()
}

/// The key just before every key of group `g` (a bound that covers the whole group).
fn group_prefix(w: usize, g: usize) -> Vec<u8> {
    format!("w{w}/g{g:03}/").into_bytes()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParsedKey {
    Group { w: usize, g: usize, k: usize },
    Head { w: usize },
}

fn parse_key(key: &[u8]) -> Result<ParsedKey, String> {
    let bad = || format!("unexpected key {:?}", String::from_utf8_lossy(key));
    let s = std::str::from_utf8(key).map_err(|_| bad())?;
    let rest = s.strip_prefix('w').ok_or_else(bad)?;
    let (w, rest) = rest.split_once('/').ok_or_else(bad)?;
    let w: usize = w.parse().map_err(|_| bad())?;
    if w >= WRITERS {
        return Err(bad());
    }
    if rest == "head" {
        return Ok(ParsedKey::Head { w });
    }
    let rest = rest.strip_prefix('g').ok_or_else(bad)?;
    let (g, k) = rest.split_once("/k").ok_or_else(bad)?;
    let (g, k): (usize, usize) = (g.parse().map_err(|_| bad())?, k.parse().map_err(|_| bad())?);
    if g >= GROUPS || k >= KEYS_PER_GROUP || key != group_key(w, g, k).as_slice() {
        return Err(bad());
    }
    Ok(ParsedKey::Group { w, g, k })
}

/// The value batch `counter` of writer `w` gives key `k` of group `g`: a header naming all
/// four (so a group's keys share writer and counter), then 16 to 1,215 bytes of incompressible
/// filler derived from them.
fn key_value(w: usize, g: usize, k: usize, counter: u64) -> Vec<u8> {
    let mut h = splitmix64(((w as u64) << 56) ^ ((g as u64) << 40) ^ ((k as u64) << 32) ^ counter);
    let len = 12 + 16 + (h % 1200) as usize;
    let mut v = Vec::with_capacity(len + 8);
    v.push(w as u8);
    v.extend_from_slice(&(g as u16).to_be_bytes());
    v.push(k as u8);
    v.extend_from_slice(&counter.to_be_bytes());
    while v.len() < len {
        h = splitmix64(h);
        v.extend_from_slice(&h.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// The counter of a value read from key `k` of group `g` of writer `w`, checking every byte.
fn decode_value(w: usize, g: usize, k: usize, v: &[u8]) -> Result<u64, String> {
    if v.len() < 12 {
        return Err(format!(
            "w{w}/g{g:03}/k{k}: value of {} bytes is too short",
            v.len()
        ));
    }
    let counter = u64::from_be_bytes(v[4..12].try_into().unwrap());
    if v != key_value(w, g, k, counter).as_slice() {
        return Err(format!(
            "w{w}/g{g:03}/k{k}: damaged value (header says writer {}, group {}, key {}, counter \
             {counter}; {} bytes)",
            v[0],
            u16::from_be_bytes([v[1], v[2]]),
            v[3],
            v.len()
        ));
    }
    Ok(counter)
}

fn decode_head(w: usize, v: &[u8]) -> Result<u64, String> {
    let bytes: [u8; 8] = v
        .try_into()
        .map_err(|_| format!("w{w}/head: value of {} bytes, not 8", v.len()))?;
    Ok(u64::from_be_bytes(bytes))
}

/// A group's state: absent (never written, or deleted), or set by batch `counter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupState {
    Absent,
    Set(u64),
}

/// The state of a whole group from the values read for its keys (`None`: absent): all absent,
/// or all set by the same batch.
fn group_state(w: usize, g: usize, values: &[Option<Vec<u8>>]) -> Result<GroupState, String> {
    let mut counters = Vec::with_capacity(values.len());
    for (k, v) in values.iter().enumerate() {
        counters.push(v.as_deref().map(|v| decode_value(w, g, k, v)).transpose()?);
    }
    if counters.iter().any(|c| *c != counters[0]) {
        return Err(format!(
            "w{w}/g{g:03}: torn batch, the group's keys differ (counters {counters:?})"
        ));
    }
    Ok(counters[0].map_or(GroupState::Absent, GroupState::Set))
}

// ---------------------------------------------------------------------------------------------
// Shared state

/// The batches that wrote one group: `(counter, deleted)`, in counter order.
#[derive(Default)]
struct GroupHistory {
    entries: VecDeque<(u64, bool)>,
    /// True once entries were forgotten: states before the first entry are then unknown.
    truncated: bool,
}

impl GroupHistory {
    fn push(&mut self, counter: u64, deleted: bool) {
        self.entries.push_back((counter, deleted));
        if self.entries.len() > HISTORY {
            self.entries.pop_front();
            self.truncated = true;
        }
    }

    /// The group's state once batches `1..=at` are applied; `None` if forgotten.
    fn state_at(&self, at: u64) -> Option<GroupState> {
        let i = self.entries.partition_point(|&(c, _)| c <= at);
        if i == 0 {
            return (!self.truncated).then_some(GroupState::Absent);
        }
        let (c, deleted) = self.entries[i - 1];
        Some(if deleted {
            GroupState::Absent
        } else {
            GroupState::Set(c)
        })
    }

    fn last(&self) -> GroupState {
        match self.entries.back() {
            None | Some((_, true)) => GroupState::Absent,
            Some(&(c, false)) => GroupState::Set(c),
        }
    }
}

/// What one writer shares with the checkers.
struct WriterShared {
    history: Mutex<Vec<GroupHistory>>,
    /// The counter of the last batch handed to `Db::write` (its history is recorded first).
    issued: AtomicU64,
    /// The counter of the last batch `Db::write` acknowledged.
    acked: AtomicU64,
    /// Per group, the counter of the last acknowledged batch that wrote it (0: none).
    group_acked: Vec<AtomicU64>,
}

impl WriterShared {
    fn new() -> Self {
        WriterShared {
            history: Mutex::new((0..GROUPS).map(|_| GroupHistory::default()).collect()),
            issued: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            group_acked: (0..GROUPS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn history(&self) -> MutexGuard<'_, Vec<GroupHistory>> {
        lock(&self.history)
    }
}

#[derive(Default)]
struct Stats {
    batches: AtomicU64,
    sync_batches: AtomicU64,
    key_puts: AtomicU64,
    group_deletes: AtomicU64,
    snapshot_checks: AtomicU64,
    snapshot_scans: AtomicU64,
    iter_forward: AtomicU64,
    iter_backward: AtomicU64,
    iter_cursor_seeks: AtomicU64,
    iter_ranges: AtomicU64,
    gets: AtomicU64,
    compactions_full: AtomicU64,
    compactions_range: AtomicU64,
    stats_reads: AtomicU64,
    /// Blob files `collect_blob_garbage` rewrote (the collector's thread rewrites more).
    blob_rewrites: AtomicU64,
    slowest_compaction_ms: AtomicU64,
    /// Checks skipped because the history had forgotten the state they needed.
    history_misses: AtomicU64,
}

impl Stats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn report(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "batches {} ({} synced; {} key puts, {} group deletes), snapshot checks {} \
             ({} with a scan), iterator passes: {} forward, {} backward, {} cursor seeks, \
             {} ranges; monotonic gets {}, compactions {} full + {} ranges (the slowest took \
             {} ms), stats reads {}, blob files rewritten on request {}, history misses {}",
            g(&self.batches),
            g(&self.sync_batches),
            g(&self.key_puts),
            g(&self.group_deletes),
            g(&self.snapshot_checks),
            g(&self.snapshot_scans),
            g(&self.iter_forward),
            g(&self.iter_backward),
            g(&self.iter_cursor_seeks),
            g(&self.iter_ranges),
            g(&self.gets),
            g(&self.compactions_full),
            g(&self.compactions_range),
            g(&self.slowest_compaction_ms),
            g(&self.stats_reads),
            g(&self.blob_rewrites),
            g(&self.history_misses),
        )
    }
}

struct World {
    /// Key-value separation is on (see [`options`]).
    blobs: bool,
    writers: Vec<WriterShared>,
    stop: AtomicBool,
    failed: AtomicBool,
    stats: Stats,
}

impl World {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::SeqCst)
    }
}

/// Sets `failed` and `stop` if the thread panics, so that the others stop at once.
struct PanicFlag(Arc<World>);

impl Drop for PanicFlag {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.failed.store(true, Ordering::SeqCst);
            self.0.stop.store(true, Ordering::SeqCst);
        }
    }
}

trait Context<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, String>;
}

impl<T> Context<T> for strata::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, String> {
        self.map_err(|e| format!("{}: {e}", what()))
    }
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;
/// What a snapshot reader read: the head, and per group the value of every key.
type SnapshotRead = (Option<Vec<u8>>, Vec<Vec<Option<Vec<u8>>>>);

// ---------------------------------------------------------------------------------------------
// Views: what a scan showed, checked against the history

/// What a view showed of one writer's keys.
#[derive(Default)]
struct WriterView {
    head: Option<u64>,
    groups: BTreeMap<usize, [Option<Vec<u8>>; KEYS_PER_GROUP]>,
}

/// Splits entries (in strictly increasing key order, checked) by writer.
fn split_view(entries: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<WriterView>, String> {
    let mut views: Vec<WriterView> = (0..WRITERS).map(|_| WriterView::default()).collect();
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 && entries[i - 1].0 >= *key {
            return Err(format!(
                "keys out of order: {:?} then {:?}",
                String::from_utf8_lossy(&entries[i - 1].0),
                String::from_utf8_lossy(key)
            ));
        }
        match parse_key(key)? {
            ParsedKey::Head { w } => views[w].head = Some(decode_head(w, value)?),
            ParsedKey::Group { w, g, k } => {
                views[w].groups.entry(g).or_default()[k] = Some(value.clone());
            }
        }
    }
    Ok(views)
}

/// Checks one writer's part of a consistent view, which covers the groups `covered` (sorted)
/// and the head if `head_covered`: every group whole, and, knowing the head, exactly the
/// history's state at the head. `acked_before` was loaded before the view was taken,
/// `issued_after` after.
fn check_writer_view(
    world: &World,
    w: usize,
    view: &WriterView,
    covered: &[usize],
    head_covered: bool,
    acked_before: u64,
    issued_after: u64,
) -> Result<(), String> {
    let mut states = BTreeMap::new();
    for (&g, values) in &view.groups {
        if covered.binary_search(&g).is_err() {
            return Err(format!("w{w}/g{g:03} is outside the view's range"));
        }
        states.insert(g, group_state(w, g, values)?);
    }
    if !head_covered {
        return Ok(());
    }
    let head = view.head.unwrap_or(0);
    if head < acked_before {
        return Err(format!(
            "w{w}: the view shows head {head}, but batch {acked_before} was acknowledged before \
             the view was taken"
        ));
    }
    if head > issued_after {
        return Err(format!(
            "w{w}: the view shows head {head}, but only batch {issued_after} was issued when it \
             was taken"
        ));
    }
    let history = world.writers[w].history();
    for &g in covered {
        let seen = states.get(&g).copied().unwrap_or(GroupState::Absent);
        match history[g].state_at(head) {
            None => Stats::add(&world.stats.history_misses, 1),
            Some(expected) if expected == seen => {}
            Some(expected) => {
                return Err(format!(
                    "w{w}/g{g:03}: the view at head {head} shows {seen:?}, but the history says \
                     {expected:?} (history tail {:?})",
                    history[g].entries.iter().rev().take(6).collect::<Vec<_>>()
                ))
            }
        }
    }
    Ok(())
}

fn load_all(world: &World, f: impl Fn(&WriterShared) -> &AtomicU64) -> Vec<u64> {
    world
        .writers
        .iter()
        .map(|s| f(s).load(Ordering::SeqCst))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The threads

/// A running thread's handle, for its progress counter.
struct Worker {
    progress: Arc<AtomicU64>,
    op: Arc<Mutex<Option<Op>>>,
}

/// A call the watchdog times: what it is, when it started, and the batches committed by then.
type Op = (String, Instant, u64);

impl Worker {
    fn tick(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs `f` as an operation the watchdog fails if it takes longer than [`OP_LIMIT`].
    fn timed<T>(&self, world: &World, what: &str, f: impl FnOnce() -> T) -> T {
        let batches = world.stats.batches.load(Ordering::Relaxed);
        *lock(&self.op) = Some((what.to_string(), Instant::now(), batches));
        let result = f();
        *lock(&self.op) = None;
        result
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn writer(db: &Db, world: &World, me: &Worker, rng: &mut StdRng, w: usize) -> Result<(), String> {
    let shared = &world.writers[w];
    let mut counter = 0u64;
    while world.running() {
        counter += 1;
        let n = rng.gen_range(1..=3);
        let mut groups: Vec<(usize, bool)> = Vec::with_capacity(n);
        while groups.len() < n {
            let g = rng.gen_range(0..GROUPS);
            if groups.iter().all(|&(h, _)| h != g) {
                groups.push((g, rng.gen_ratio(1, 6)));
            }
        }
        let mut batch = WriteBatch::new();
        for &(g, delete) in &groups {
            for k in 0..KEYS_PER_GROUP {
                if delete {
                    batch.delete(group_key(w, g, k));
                } else {
                    batch.put(group_key(w, g, k), key_value(w, g, k, counter));
                }
            }
        }
        batch.put(head_key(w), counter.to_be_bytes());
        {
            let mut history = shared.history();
            for &(g, delete) in &groups {
                history[g].push(counter, delete);
            }
        }
        shared.issued.store(counter, Ordering::SeqCst);
        let sync = rng.gen_ratio(1, 20);
        db.write_opt(batch, &WriteOptions { sync })
            .ctx(|| format!("w{w}: writing batch {counter}"))?;
        for &(g, _) in &groups {
            shared.group_acked[g].store(counter, Ordering::SeqCst);
        }
        shared.acked.store(counter, Ordering::SeqCst);

        let stats = &world.stats;
        Stats::add(&stats.batches, 1);
        Stats::add(&stats.sync_batches, u64::from(sync));
        let deletes = groups.iter().filter(|&&(_, d)| d).count() as u64;
        Stats::add(&stats.group_deletes, deletes);
        Stats::add(
            &stats.key_puts,
            (n as u64 - deletes) * KEYS_PER_GROUP as u64,
        );
        me.tick();
    }
    Ok(())
}

fn pause(rng: &mut StdRng) {
    match rng.gen_range(0..10) {
        0..=3 => {}
        4..=6 => std::thread::yield_now(),
        7 | 8 => std::thread::sleep(Duration::from_micros(rng.gen_range(100..3000))),
        // Long enough for flushes and compactions to run under the snapshot.
        _ => std::thread::sleep(Duration::from_millis(rng.gen_range(5..40))),
    }
}

fn snapshot_reader(db: &Db, world: &World, me: &Worker, rng: &mut StdRng) -> Result<(), String> {
    while world.running() {
        let w = rng.gen_range(0..WRITERS);
        let shared = &world.writers[w];
        let acked_before = shared.acked.load(Ordering::SeqCst);
        let snapshot = db.snapshot();
        let issued_after = shared.issued.load(Ordering::SeqCst);
        let ro = ReadOptions {
            snapshot: Some(&snapshot),
            ..ReadOptions::default()
        };
        let mut groups: Vec<usize> = if rng.gen_ratio(1, 10) {
            (0..GROUPS).collect()
        } else {
            (0..rng.gen_range(1..=8))
                .map(|_| rng.gen_range(0..GROUPS))
                .collect()
        };
        groups.sort_unstable();
        groups.dedup();
        let read = |db: &Db| -> Result<SnapshotRead, String> {
            let head = db
                .get_opt(head_key(w), &ro)
                .ctx(|| format!("w{w}: get head"))?;
            let mut values = Vec::with_capacity(groups.len());
            for &g in &groups {
                let mut group = Vec::with_capacity(KEYS_PER_GROUP);
                for k in 0..KEYS_PER_GROUP {
                    let key = group_key(w, g, k);
                    group.push(
                        db.get_opt(&key, &ro)
                            .ctx(|| format!("get w{w}/g{g:03}/k{k}"))?,
                    );
                }
                values.push(group);
            }
            Ok((head, values))
        };
        let first = read(db)?;
        me.tick();
        pause(rng);
        let second = read(db)?;
        if first != second {
            let diff: Vec<usize> = (0..groups.len())
                .filter(|&i| first.1[i] != second.1[i])
                .map(|i| groups[i])
                .collect();
            return Err(format!(
                "w{w}: a repeated read through snapshot {} changed (head {:?} then {:?}; groups \
                 that differ: {diff:?})",
                snapshot.seqno(),
                first.0.as_deref().map(|v| decode_head(w, v)),
                second.0.as_deref().map(|v| decode_head(w, v)),
            ));
        }
        let mut view = WriterView {
            head: first.0.as_deref().map(|v| decode_head(w, v)).transpose()?,
            ..WriterView::default()
        };
        for (i, &g) in groups.iter().enumerate() {
            let values: [Option<Vec<u8>>; KEYS_PER_GROUP] = first.1[i].clone().try_into().unwrap();
            if values.iter().any(Option::is_some) {
                view.groups.insert(g, values);
            }
        }
        check_writer_view(world, w, &view, &groups, true, acked_before, issued_after)
            .map_err(|e| format!("snapshot {}: {e}", snapshot.seqno()))?;
        Stats::add(&world.stats.snapshot_checks, 1);

        // Sometimes, scan the snapshot too: it must agree with the gets, and be whole.
        if rng.gen_ratio(1, 4) {
            let prefix = format!("w{w}/").into_bytes();
            let entries: Entries = db
                .prefix_opt(&prefix, &ro)
                .ctx(|| format!("w{w}: prefix scan at a snapshot"))?
                .collect::<strata::Result<_>>()
                .ctx(|| format!("w{w}: prefix scan at a snapshot"))?;
            let views = split_view(&entries)?;
            let scanned = &views[w];
            let all: Vec<usize> = (0..GROUPS).collect();
            check_writer_view(world, w, scanned, &all, true, acked_before, issued_after)
                .map_err(|e| format!("scan at snapshot {}: {e}", snapshot.seqno()))?;
            if scanned.head != view.head {
                return Err(format!(
                    "w{w}: at one snapshot, get shows head {:?} and a scan {:?}",
                    view.head, scanned.head
                ));
            }
            let none: [Option<Vec<u8>>; KEYS_PER_GROUP] = Default::default();
            for &g in &groups {
                let values = view.groups.get(&g).unwrap_or(&none);
                let in_scan = scanned.groups.get(&g).unwrap_or(&none);
                if in_scan != values {
                    return Err(format!(
                        "w{w}/g{g:03}: at one snapshot, get and scan disagree ({:?} vs {:?})",
                        group_state(w, g, values),
                        group_state(w, g, in_scan)
                    ));
                }
            }
            Stats::add(&world.stats.snapshot_scans, 1);
        }
        drop(snapshot);
        me.tick();
    }
    Ok(())
}

/// Walks a cursor: forward, backward on the same cursor, and random seeks with steps both ways;
/// every walk must show exactly the same entries.
fn cursor_pass(
    mut it: strata::DbIterator,
    world: &World,
    rng: &mut StdRng,
) -> Result<Entries, String> {
    let mut forward = Vec::new();
    it.seek_to_first();
    while it.valid() {
        forward.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status()
        .ctx(|| "cursor status after a forward walk".into())?;
    Stats::add(&world.stats.iter_forward, 1);

    if rng.gen_bool(0.5) {
        let mut backward = Vec::new();
        it.seek_to_last();
        while it.valid() {
            backward.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        it.status()
            .ctx(|| "cursor status after a backward walk".into())?;
        backward.reverse();
        if backward != forward {
            return Err(format!(
                "one cursor walked forward shows {} entries, backward {} (first difference at \
                 {:?})",
                forward.len(),
                backward.len(),
                forward
                    .iter()
                    .zip(&backward)
                    .position(|(a, b)| a != b)
                    .map(|i| String::from_utf8_lossy(&forward[i].0).into_owned())
            ));
        }
        Stats::add(&world.stats.iter_backward, 1);
    }

    for _ in 0..rng.gen_range(1..=8) {
        let w = rng.gen_range(0..WRITERS);
        let g = rng.gen_range(0..GROUPS);
        let target = match rng.gen_range(0..5) {
            0 => group_key(w, g, rng.gen_range(0..KEYS_PER_GROUP)),
            1 => group_prefix(w, g),
            2 => head_key(w),
            3 if !forward.is_empty() => forward[rng.gen_range(0..forward.len())].0.clone(),
            _ => vec![b'w', rng.gen()],
        };
        let mut at = forward.partition_point(|(k, _)| *k < target);
        it.seek(&target);
        for step in 0..rng.gen_range(0..12) {
            let expected = forward.get(at);
            let got = it.valid().then(|| (it.key(), it.value()));
            if got != expected.map(|(k, v)| (k.as_slice(), v.as_slice())) {
                return Err(format!(
                    "cursor after seek({:?}) and {step} steps: at {:?}, expected {:?}",
                    String::from_utf8_lossy(&target),
                    got.map(|(k, _)| String::from_utf8_lossy(k).into_owned()),
                    expected.map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                ));
            }
            if !it.valid() {
                break;
            }
            if rng.gen_bool(0.5) {
                it.next();
                at += 1;
            } else {
                it.prev();
                if at == 0 {
                    at = forward.len(); // invalid
                } else {
                    at -= 1;
                }
            }
        }
        it.status().ctx(|| "cursor status after seeks".into())?;
        Stats::add(&world.stats.iter_cursor_seeks, 1);
    }
    Ok(forward)
}

/// A range of one writer's keys, consumed from both ends in random turns.
/// What a range pass saw: the entries, the groups it covers and whether it covers the head,
/// and the writers' `issued` counters loaded right after the iterator was created.
type RangeSeen = (Entries, Vec<usize>, bool, Vec<u64>);

fn range_pass(db: &Db, world: &World, rng: &mut StdRng, w: usize) -> Result<RangeSeen, String> {
    let a = rng.gen_range(0..GROUPS);
    let start: Bound<Vec<u8>> = match rng.gen_range(0..3) {
        0 => Bound::Included(group_key(w, a, 0)),
        1 => Bound::Excluded(group_prefix(w, a)),
        _ => Bound::Included(format!("w{w}/g{a:03}").into_bytes()),
    };
    let (end, covered, head_covered): (Bound<Vec<u8>>, _, _) = match rng.gen_range(0..4) {
        0 => (Bound::Included(head_key(w)), a..GROUPS, true),
        1 => (
            Bound::Excluded(format!("w{w}/i").into_bytes()),
            a..GROUPS,
            true,
        ),
        _ => {
            let b = rng.gen_range(a..=GROUPS);
            let end = if rng.gen_bool(0.5) {
                Bound::Excluded(group_prefix(w, b))
            } else {
                Bound::Excluded(format!("w{w}/g{b:03}").into_bytes())
            };
            (end, a..b, false)
        }
    };
    let range = (start.clone(), end.clone());
    let mut iter = db.range(range).ctx(|| "creating a range iterator".into())?;
    let issued_after = load_all(world, |s| &s.issued);
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        let item = if rng.gen_bool(0.5) {
            iter.next().map(|i| (i, &mut front))
        } else {
            iter.next_back().map(|i| (i, &mut back))
        };
        let Some((item, side)) = item else { break };
        side.push(item.ctx(|| "range iterator".into())?);
    }
    if iter.next().is_some() || iter.next_back().is_some() {
        return Err("a range iterator resumed after it ended".into());
    }
    back.reverse();
    front.extend(back);
    let inside = |k: &[u8]| {
        let after_start = match &start {
            Bound::Included(s) => k >= s.as_slice(),
            Bound::Excluded(s) => k > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = match &end {
            Bound::Included(e) => k <= e.as_slice(),
            Bound::Excluded(e) => k < e.as_slice(),
            Bound::Unbounded => true,
        };
        after_start && before_end
    };
    if let Some((k, _)) = front.iter().find(|(k, _)| !inside(k)) {
        return Err(format!(
            "range {start:?}..{end:?} returned {:?}",
            String::from_utf8_lossy(k)
        ));
    }
    Stats::add(&world.stats.iter_ranges, 1);
    Ok((front, covered.collect(), head_covered, issued_after))
}

fn iterator_checker(db: &Db, world: &World, me: &Worker, rng: &mut StdRng) -> Result<(), String> {
    while world.running() {
        let acked_before = load_all(world, |s| &s.acked);
        let mode = rng.gen_range(0..4);
        // `issued` is loaded right after each iterator is created: its view cannot be newer.
        let (entries, issued_after, w_range) = match mode {
            0 => {
                let it = db.iter().ctx(|| "creating a cursor".into())?;
                let issued = load_all(world, |s| &s.issued);
                (cursor_pass(it, world, rng)?, issued, None)
            }
            1 | 2 => {
                let iter = db.scan().ctx(|| "creating a scan".into())?;
                let issued = load_all(world, |s| &s.issued);
                let entries: Entries = if mode == 1 {
                    Stats::add(&world.stats.iter_forward, 1);
                    iter.collect::<strata::Result<_>>()
                        .ctx(|| "forward scan".into())?
                } else {
                    Stats::add(&world.stats.iter_backward, 1);
                    let mut e: Entries = iter
                        .rev()
                        .collect::<strata::Result<_>>()
                        .ctx(|| "backward scan".into())?;
                    if e.windows(2).any(|p| p[0].0 <= p[1].0) {
                        return Err("a backward scan's keys do not strictly decrease".into());
                    }
                    e.reverse();
                    e
                };
                (entries, issued, None)
            }
            _ => {
                let w = rng.gen_range(0..WRITERS);
                let (entries, covered, head_covered, issued) = range_pass(db, world, rng, w)?;
                (entries, issued, Some((w, covered, head_covered)))
            }
        };
        let views = split_view(&entries)?;
        let all: Vec<usize> = (0..GROUPS).collect();
        for (w, view) in views.iter().enumerate() {
            let (covered, head_covered) = match &w_range {
                None => (all.as_slice(), true),
                Some((rw, covered, head_covered)) if *rw == w => {
                    (covered.as_slice(), *head_covered)
                }
                Some((rw, _, _)) => {
                    if view.head.is_some() || !view.groups.is_empty() {
                        return Err(format!(
                            "a range over writer {rw}'s keys shows writer {w}'s"
                        ));
                    }
                    continue;
                }
            };
            check_writer_view(
                world,
                w,
                view,
                covered,
                head_covered,
                acked_before[w],
                issued_after[w],
            )
            .map_err(|e| format!("iterator pass (mode {mode}): {e}"))?;
        }
        me.tick();
    }
    Ok(())
}

fn monotonic_reader(db: &Db, world: &World, me: &Worker, rng: &mut StdRng) -> Result<(), String> {
    // Per writer and group: the oldest batch the group's visible state may still come from.
    let mut floor = vec![vec![0u64; GROUPS]; WRITERS];
    let mut head_floor = [0u64; WRITERS];
    let ro = ReadOptions::default();
    while world.running() {
        for _ in 0..64 {
            let w = rng.gen_range(0..WRITERS);
            let shared = &world.writers[w];
            if rng.gen_ratio(1, 8) {
                let acked = shared.acked.load(Ordering::SeqCst);
                let v = db
                    .get_opt(head_key(w), &ro)
                    .ctx(|| format!("w{w}: get head"))?;
                let issued = shared.issued.load(Ordering::SeqCst);
                let head = v.map_or(Ok(0), |v| decode_head(w, &v))?;
                let lowest = acked.max(head_floor[w]);
                if head < lowest || head > issued {
                    return Err(format!(
                        "w{w}: get(head) = {head}, expected between {lowest} (acknowledged \
                         {acked}, seen before {}) and {issued} (issued)",
                        head_floor[w]
                    ));
                }
                head_floor[w] = head;
                continue;
            }
            let g = rng.gen_range(0..GROUPS);
            let k = rng.gen_range(0..KEYS_PER_GROUP);
            let acked = shared.group_acked[g].load(Ordering::SeqCst);
            let v = db
                .get_opt(group_key(w, g, k), &ro)
                .ctx(|| format!("get w{w}/g{g:03}/k{k}"))?;
            let seen = match v {
                None => GroupState::Absent,
                Some(v) => GroupState::Set(decode_value(w, g, k, &v)?),
            };
            Stats::add(&world.stats.gets, 1);
            let lowest = acked.max(floor[w][g]);
            let history = shared.history();
            let h = &history[g];
            let oldest = h.entries.front().map_or(0, |&(c, _)| c);
            if h.truncated && lowest < oldest {
                Stats::add(&world.stats.history_misses, 1);
                continue;
            }
            // The batch the visible state comes from: the state at `lowest` or a later one.
            let found = match seen {
                GroupState::Set(c) => h.entries.iter().find(|&&e| e == (c, false)).map(|e| e.0),
                GroupState::Absent if lowest == 0 => Some(0),
                GroupState::Absent => h
                    .entries
                    .iter()
                    .find(|&&(c, deleted)| deleted && c >= lowest)
                    .map(|e| e.0),
            };
            match found {
                Some(c) if c >= lowest => floor[w][g] = c,
                _ => {
                    return Err(format!(
                        "w{w}/g{g:03}/k{k}: get shows {seen:?}, but batch {lowest} or a later \
                         one must be visible (acknowledged before the read: {acked}, seen \
                         before: {}); group history tail {:?}",
                        floor[w][g],
                        h.entries.iter().rev().take(6).collect::<Vec<_>>()
                    ))
                }
            }
        }
        me.tick();
    }
    Ok(())
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    let w = rng.gen_range(0..WRITERS);
    match rng.gen_range(0..4) {
        0 => head_key(w),
        1 => group_prefix(w, rng.gen_range(0..GROUPS)),
        _ => group_key(
            w,
            rng.gen_range(0..GROUPS),
            rng.gen_range(0..KEYS_PER_GROUP),
        ),
    }
}

fn compactor(db: &Db, world: &World, me: &Worker, rng: &mut StdRng) -> Result<(), String> {
    while world.running() {
        let started = Instant::now();
        let what = match rng.gen_range(0..10) {
            0 | 1 => {
                let what = "compact_range(None, None)".to_string();
                me.timed(world, &what, || db.compact_range(None, None))
                    .ctx(|| what.clone())?;
                Stats::add(&world.stats.compactions_full, 1);
                what
            }
            2..=7 => {
                let (mut a, mut b) = (random_key(rng), random_key(rng));
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                let begin = (!rng.gen_ratio(1, 8)).then_some(a);
                let end = (!rng.gen_ratio(1, 8)).then_some(b);
                let what = format!(
                    "compact_range({:?}, {:?})",
                    begin.as_deref().map(String::from_utf8_lossy),
                    end.as_deref().map(String::from_utf8_lossy)
                );
                me.timed(world, &what, || {
                    db.compact_range(begin.as_deref(), end.as_deref())
                })
                .ctx(|| what.clone())?;
                Stats::add(&world.stats.compactions_range, 1);
                what
            }
            8 if world.blobs => {
                let what = "collect_blob_garbage()".to_string();
                let n = me
                    .timed(world, &what, || db.collect_blob_garbage())
                    .ctx(|| what.clone())?;
                Stats::add(&world.stats.blob_rewrites, n as u64);
                what
            }
            _ => {
                let stats = db.property("leveldb.stats");
                if !stats.as_deref().is_some_and(|s| s.contains("Level")) {
                    return Err(format!("property(leveldb.stats) = {stats:?}"));
                }
                for level in 0..7 {
                    let name = format!("leveldb.num-files-at-level{level}");
                    let n = db.property(&name);
                    if n.as_deref().and_then(|n| n.parse::<u64>().ok()).is_none() {
                        return Err(format!("property({name}) = {n:?}"));
                    }
                }
                Stats::add(&world.stats.stats_reads, 1);
                "reading properties".to_string()
            }
        };
        let took = started.elapsed();
        world
            .stats
            .slowest_compaction_ms
            .fetch_max(took.as_millis() as u64, Ordering::Relaxed);
        if took > Duration::from_secs(1) {
            eprintln!("db_stress: compactor: {what} took {took:.1?}");
        }
        me.tick();
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..20)));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The end: everything acknowledged is there

/// Every writer's last acknowledged state, through gets and through a full scan.
fn verify_final(db: &Db, world: &World, when: &str) -> Result<(), String> {
    let ro = ReadOptions::default();
    let mut expected: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (w, shared) in world.writers.iter().enumerate() {
        let acked = shared.acked.load(Ordering::SeqCst);
        let issued = shared.issued.load(Ordering::SeqCst);
        if acked != issued {
            return Err(format!(
                "{when}: w{w} issued batch {issued} but acknowledged {acked}"
            ));
        }
        let head = db
            .get_opt(head_key(w), &ro)
            .ctx(|| format!("{when}: get w{w}/head"))?;
        let head = head.map_or(Ok(0), |v| decode_head(w, &v))?;
        if head != acked {
            return Err(format!(
                "{when}: w{w}/head is {head}, but {acked} was acknowledged"
            ));
        }
        if acked > 0 {
            expected.insert(head_key(w), acked.to_be_bytes().to_vec());
        }
        let history = shared.history();
        for (g, h) in history.iter().enumerate() {
            let state = h.last();
            let group_acked = shared.group_acked[g].load(Ordering::SeqCst);
            if h.entries.back().map_or(0, |e| e.0) != group_acked {
                return Err(format!(
                    "{when}: w{w}/g{g:03}: history and acknowledgment differ"
                ));
            }
            for k in 0..KEYS_PER_GROUP {
                let key = group_key(w, g, k);
                let value = match state {
                    GroupState::Absent => None,
                    GroupState::Set(c) => Some(key_value(w, g, k, c)),
                };
                let got = db
                    .get_opt(&key, &ro)
                    .ctx(|| format!("{when}: get w{w}/g{g:03}/k{k}"))?;
                if got != value {
                    return Err(format!(
                        "{when}: w{w}/g{g:03}/k{k} holds {:?}, but the last acknowledged batch \
                         left {state:?}",
                        got.map(|v| decode_value(w, g, k, &v))
                    ));
                }
                if let Some(v) = &value {
                    expected.insert(key, v.clone());
                }
            }
        }
    }
    let scanned: Entries = db
        .scan_opt(&ro)
        .ctx(|| format!("{when}: scan"))?
        .collect::<strata::Result<_>>()
        .ctx(|| format!("{when}: scan"))?;
    let expected: Entries = expected.into_iter().collect();
    if scanned != expected {
        let first = scanned
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(scanned.len().min(expected.len()));
        return Err(format!(
            "{when}: a full scan shows {} entries, {} expected; first difference at index \
             {first}: {:?} vs {:?}",
            scanned.len(),
            expected.len(),
            scanned
                .get(first)
                .map(|e| String::from_utf8_lossy(&e.0).into_owned()),
            expected
                .get(first)
                .map(|e| String::from_utf8_lossy(&e.0).into_owned()),
        ));
    }
    Ok(())
}

/// With every cursor dropped and the background idle, the directory holds exactly the tables
/// of the current version: the flushes and compactions of the run left no obsolete one.
fn only_live_tables(db: &Db, dir: &std::path::Path, when: &str) -> Result<(), String> {
    db.wait_for_compactions()
        .ctx(|| format!("waiting for compactions {when}"))?;
    let live = common::version_tables(db);
    let names = std::fs::read_dir(dir)
        .map_err(|e| format!("listing {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok());
    let on_disk = common::table_numbers(names);
    if on_disk != live {
        return Err(format!(
            "{when}: tables on disk {on_disk:?}, in the version {live:?}"
        ));
    }
    Ok(())
}

fn final_phase(db: Db, world: &World, dir: &std::path::Path) -> Result<String, String> {
    only_live_tables(&db, dir, "after the run")?;
    verify_final(&db, world, "before reopening")?;
    drop(db);
    let db = Db::open(dir, options(world.blobs)).ctx(|| "reopening".into())?;
    verify_final(&db, world, "after reopening")?;
    db.compact_range(None, None)
        .ctx(|| "compacting after reopening".into())?;
    only_live_tables(&db, dir, "after the final compaction")?;
    verify_final(&db, world, "after reopening and compacting")?;
    let levels: Vec<String> = (0..7)
        .map(|l| {
            db.property(&format!("leveldb.num-files-at-level{l}"))
                .unwrap_or_default()
        })
        .collect();
    drop(db);
    let report = strata::check(dir, &options(world.blobs)).ctx(|| "strata::check".into())?;
    if !report.is_sound() {
        return Err(format!("strata::check found damage: {:?}", report.damage));
    }
    Ok(format!(
        "files per level after the final compaction: {}",
        levels.join(" ")
    ))
}

// ---------------------------------------------------------------------------------------------
// The test and its watchdog

struct Thread {
    name: String,
    seed: u64,
    progress: Arc<AtomicU64>,
    op: Arc<Mutex<Option<Op>>>,
    last_progress: u64,
    last_change: Instant,
    handle: JoinHandle<()>,
}

fn spawn(
    name: String,
    seed: u64,
    world: &Arc<World>,
    body: impl FnOnce(&Worker, &mut StdRng) -> Result<(), String> + Send + 'static,
) -> Thread {
    let progress = Arc::new(AtomicU64::new(0));
    let op = Arc::new(Mutex::new(None));
    let me = Worker {
        progress: progress.clone(),
        op: op.clone(),
    };
    let flag = PanicFlag(world.clone());
    let thread_name = name.clone();
    let handle = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _flag = flag;
            let mut rng = StdRng::seed_from_u64(seed);
            if let Err(message) = body(&me, &mut rng) {
                panic!("{thread_name} (thread seed {seed:#x}): {message}");
            }
        })
        .expect("spawning a thread");
    Thread {
        name,
        seed,
        progress,
        op,
        last_progress: 0,
        last_change: Instant::now(),
        handle,
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "(a panic without a message)".into()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

/// The seed asked for, else [`CI_SEED`] in CI, else a fresh one.
fn stress_seed(asked: Option<u64>, in_ci: bool, fresh: impl FnOnce() -> u64) -> u64 {
    match asked {
        Some(seed) => seed,
        None if in_ci => CI_SEED,
        None => fresh(),
    }
}

#[test]
fn the_stress_seed_is_the_one_asked_for_else_fixed_in_ci_else_fresh() {
    let fresh = || 7;
    assert_eq!(stress_seed(Some(3), true, fresh), 3);
    assert_eq!(stress_seed(Some(3), false, fresh), 3);
    assert_eq!(stress_seed(None, true, fresh), CI_SEED);
    assert_eq!(stress_seed(None, false, fresh), 7);
}

#[test]
fn stress_writers_snapshots_iterators_and_compactions() {
    stress(false);
}

/// The same with key-value separation: blob files rewritten by the collector (and on request)
/// under snapshot readers, iterators and monotonic readers.
#[test]
fn stress_with_blob_files_rewritten_under_readers() {
    stress(true);
}

fn stress(blobs: bool) {
    let secs = env_u64("STRATA_STRESS_SECS").unwrap_or(DEFAULT_SECS);
    let seed = stress_seed(
        env_u64("STRATA_STRESS_SEED"),
        std::env::var_os("CI").is_some(),
        rand::random,
    );
    eprintln!("db_stress: {secs} s of stress, seed {seed:#x} (STRATA_STRESS_SEED={seed:#x})");
    let rerun = format!("seed {seed:#x}; rerun with STRATA_STRESS_SEED={seed:#x}");

    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(blobs)).unwrap());
    let world = Arc::new(World {
        blobs,
        writers: (0..WRITERS).map(|_| WriterShared::new()).collect(),
        stop: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        stats: Stats::default(),
    });

    let mut threads = Vec::new();
    let mut next_seed = {
        let mut i = 0u64;
        move || {
            i += 1;
            splitmix64(seed ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d))
        }
    };
    for w in 0..WRITERS {
        let (db, world2) = (db.clone(), world.clone());
        threads.push(spawn(
            format!("writer-{w}"),
            next_seed(),
            &world,
            move |me, rng| writer(&db, &world2, me, rng, w),
        ));
    }
    for r in 0..2 {
        let (db, world2) = (db.clone(), world.clone());
        threads.push(spawn(
            format!("snapshot-reader-{r}"),
            next_seed(),
            &world,
            move |me, rng| snapshot_reader(&db, &world2, me, rng),
        ));
    }
    type Body = fn(&Db, &World, &Worker, &mut StdRng) -> Result<(), String>;
    let others: [(&str, Body); 3] = [
        ("iterator-checker", iterator_checker),
        ("monotonic-reader", monotonic_reader),
        ("compactor", compactor),
    ];
    for (name, body) in others {
        let (db, world2) = (db.clone(), world.clone());
        threads.push(spawn(
            name.to_string(),
            next_seed(),
            &world,
            move |me, rng| body(&db, &world2, me, rng),
        ));
    }

    // The watchdog: stop at the deadline, or when a thread fails; fail on a stall.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut stopping_since: Option<Instant> = None;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        for t in &mut threads {
            let p = t.progress.load(Ordering::Relaxed);
            if p != t.last_progress {
                t.last_progress = p;
                t.last_change = now;
            }
        }
        if threads.iter().all(|t| t.handle.is_finished()) {
            break;
        }
        if stopping_since.is_none()
            && (now >= deadline
                || world.failed.load(Ordering::SeqCst)
                || threads.iter().any(|t| t.handle.is_finished()))
        {
            world.stop.store(true, Ordering::SeqCst);
            stopping_since = Some(now);
        }
        let stalled: Vec<String> = threads
            .iter()
            .filter(|t| !t.handle.is_finished())
            .filter(|t| {
                now - t.last_change > STALL_LIMIT
                    || stopping_since.is_some_and(|s| now - s > STALL_LIMIT)
            })
            .map(|t| {
                format!(
                    "{} (thread seed {:#x}; {} steps, the last {:.1?} ago)",
                    t.name,
                    t.seed,
                    t.last_progress,
                    now - t.last_change
                )
            })
            .collect();
        let slow: Vec<String> = threads
            .iter()
            .filter_map(|t| {
                let op = lock(&t.op);
                let (what, since, batches) = op.as_ref()?;
                let took = now - *since;
                let written = world.stats.batches.load(Ordering::Relaxed) - batches;
                (took > OP_LIMIT).then(|| {
                    format!(
                        "{}: {what} has not returned after {took:.1?}, while the writers \
                         committed {written} batches (a manual compaction that never ends while \
                         writes continue?)",
                        t.name
                    )
                })
            })
            .collect();
        if !slow.is_empty() {
            world.stop.store(true, Ordering::SeqCst);
            eprintln!("db_stress: {}", world.stats.report());
            panic!("too slow: {} ({rerun})", slow.join("; "));
        }
        if !stalled.is_empty() {
            world.stop.store(true, Ordering::SeqCst);
            eprintln!("db_stress: {}", world.stats.report());
            eprintln!(
                "db_stress: STALLED for {STALL_LIMIT:?}: {}",
                stalled.join(", ")
            );
            // The stalled threads hold the database; the harness ends the process after this.
            panic!(
                "no progress for {STALL_LIMIT:?} (a deadlock?) in: {} ({rerun})",
                stalled.join(", ")
            );
        }
    }
    let elapsed = started.elapsed();
    let mut failures = Vec::new();
    for t in threads {
        if let Err(payload) = t.handle.join() {
            let message = panic_message(&*payload);
            if message.starts_with(&t.name) {
                failures.push(message);
            } else {
                failures.push(format!("{}: {message}", t.name));
            }
        }
    }
    eprintln!(
        "db_stress: {:.1?} of stress: {}",
        elapsed,
        world.stats.report()
    );
    if !failures.is_empty() {
        panic!("stress check failed ({rerun}):\n{}", failures.join("\n"));
    }
    let stats = &world.stats;
    for (what, counter) in [
        ("batches", &stats.batches),
        ("snapshot checks", &stats.snapshot_checks),
        ("forward iterator passes", &stats.iter_forward),
        ("monotonic gets", &stats.gets),
    ] {
        assert!(
            counter.load(Ordering::Relaxed) > 0,
            "no {what} were done ({rerun})"
        );
    }

    let compactions = stats.compactions_full.load(Ordering::Relaxed)
        + stats.compactions_range.load(Ordering::Relaxed);
    assert!(
        compactions > 0,
        "no compact_range call returned during the run ({rerun})"
    );
    if blobs {
        // The collector's own rewrites are in the info log (the requested ones too).
        let log = std::fs::read_to_string(dir.path().join("LOG")).unwrap_or_default();
        let rewrites = log.matches("rewrote blob files").count();
        eprintln!(
            "db_stress: {rewrites} blob rewrites logged, {} files rewritten on request",
            stats.blob_rewrites.load(Ordering::Relaxed)
        );
        assert!(rewrites > 0, "no blob file was rewritten ({rerun})");
    }

    // Everything acknowledged is there, before and after reopening; under the watchdog too.
    let db = Arc::try_unwrap(db).expect("every thread has ended");
    let path = dir.path().to_path_buf();
    let world2 = world.clone();
    let last = std::thread::spawn(move || final_phase(db, &world2, &path));
    let until = Instant::now() + STALL_LIMIT * 3;
    while !last.is_finished() {
        assert!(
            Instant::now() < until,
            "the final checks (reopen) did not finish in {:?} ({rerun})",
            STALL_LIMIT * 3
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    match last.join() {
        Ok(Ok(summary)) => eprintln!("db_stress: final checks passed; {summary}"),
        Ok(Err(message)) => panic!("final check failed ({rerun}): {message}"),
        Err(payload) => panic!(
            "final check panicked ({rerun}): {}",
            panic_message(&*payload)
        ),
    }
}
