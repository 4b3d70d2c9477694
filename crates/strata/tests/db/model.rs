// SPDX-License-Identifier: MIT OR Apache-2.0
//! The database against a model: random sequences of puts, deletes, range deletions, batches
//! (some holding a range deletion), snapshots, reads, scans in both directions, cursor walks
//! (stepped and visited),
//! compactions and reopens, applied to strata (on the
//! in-memory env) and to a `BTreeMap`; every read must agree.
//!
//! `PROPTEST_CASES` sets the number of cases (default 2000); failures are shrunk and saved by
//! proptest for replay.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use strata_testkit as common;

use proptest::prelude::*;
use strata::{Db, Env, MemEnv, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `delete_range(a, b)` with the bounds in order.
    DeleteRange(Vec<u8>, Vec<u8>),
    /// A batch: an optional range deletion first, then puts and deletes.
    Batch(Option<(Vec<u8>, Vec<u8>)>, Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>, Option<usize>),
    Scan {
        reverse: bool,
        snapshot: Option<usize>,
    },
    Walk {
        start: Vec<u8>,
        steps: Vec<bool>,
        snapshot: Option<usize>,
    },
    /// `walk_forward` or `walk_back` (`back`) from `start` (the last entry when `back` and
    /// `start` is empty), breaking on the entry after `stop_after` visits; then cursor steps
    /// (`true`: `next`) from where the walk left the cursor.
    Visit {
        start: Vec<u8>,
        back: bool,
        stop_after: usize,
        then: Vec<bool>,
        snapshot: Option<usize>,
    },
    Range(Vec<u8>, Vec<u8>, bool),
    TakeSnapshot,
    ReleaseSnapshot(usize),
    Compact(Option<Vec<u8>>, Option<Vec<u8>>),
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => (0u8..40).prop_map(|i| format!("k{i:02}").into_bytes()),
        1 => Just(Vec::new()),
        1 => proptest::collection::vec(any::<u8>(), 0..6),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        10 => proptest::collection::vec(any::<u8>(), 0..120),
        1 => (0usize..20_000).prop_map(|n| vec![(n % 251) as u8; n]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        6 => key().prop_map(Op::Delete),
        3 => (key(), key()).prop_map(|(a, b)| if a <= b { Op::DeleteRange(a, b) } else { Op::DeleteRange(b, a) }),
        4 => (proptest::option::weighted(0.25, (key(), key())), proptest::collection::vec((key(), proptest::option::of(value())), 0..12))
            .prop_map(|(range, ops)| Op::Batch(range.map(|(a, b)| if a <= b { (a, b) } else { (b, a) }), ops)),
        10 => (key(), proptest::option::of(0usize..4)).prop_map(|(k, s)| Op::Get(k, s)),
        3 => (any::<bool>(), proptest::option::of(0usize..4)).prop_map(|(reverse, snapshot)| Op::Scan { reverse, snapshot }),
        4 => (key(), proptest::collection::vec(any::<bool>(), 1..12), proptest::option::of(0usize..4))
            .prop_map(|(start, steps, snapshot)| Op::Walk { start, steps, snapshot }),
        4 => (key(), any::<bool>(), 0usize..60, proptest::collection::vec(any::<bool>(), 0..6), proptest::option::of(0usize..4))
            .prop_map(|(start, back, stop_after, then, snapshot)| Op::Visit { start, back, stop_after, then, snapshot }),
        2 => (key(), key(), any::<bool>()).prop_map(|(a, b, rev)| Op::Range(a, b, rev)),
        3 => Just(Op::TakeSnapshot),
        2 => (0usize..4).prop_map(Op::ReleaseSnapshot),
        2 => (proptest::option::of(key()), proptest::option::of(key())).prop_map(|(a, b)| Op::Compact(a, b)),
        2 => Just(Op::Reopen),
    ]
}

struct Harness {
    env: MemEnv,
    options: Options,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
}

impl Harness {
    fn new(options: Options) -> Self {
        let env = MemEnv::new();
        let options = Options {
            create_if_missing: true,
            ..options
        }
        .with_env(Arc::new(env.clone()));
        let db = Db::open("/db", options.clone()).unwrap();
        Harness {
            env,
            options,
            db: Some(db),
            model: Model::new(),
            snapshots: Vec::new(),
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn view(&self, snapshot: Option<usize>) -> (ReadOptions<'_>, &Model) {
        match snapshot.and_then(|i| self.snapshots.get(i)) {
            Some((s, m)) => (
                ReadOptions {
                    snapshot: Some(s),
                    ..ReadOptions::default()
                },
                m,
            ),
            None => (ReadOptions::default(), &self.model),
        }
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        let w = WriteOptions::default();
        match op {
            Op::Put(k, v) => {
                self.db().put_opt(&k, &v, &w).unwrap();
                self.model.insert(k, v);
            }
            Op::Delete(k) => {
                self.db().delete_opt(&k, &w).unwrap();
                self.model.remove(&k);
            }
            Op::DeleteRange(a, b) => {
                self.db().delete_range(&a, &b).unwrap();
                delete_model_range(&mut self.model, &a, &b);
            }
            Op::Batch(range, ops) => {
                let mut batch = WriteBatch::new();
                if let Some((a, b)) = &range {
                    batch.delete_range(a, b);
                    delete_model_range(&mut self.model, a, b);
                }
                for (k, v) in &ops {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    }
                }
                self.db()
                    .write_opt(batch, &WriteOptions { sync: true })
                    .unwrap();
                for (k, v) in ops {
                    match v {
                        Some(v) => self.model.insert(k, v),
                        None => self.model.remove(&k),
                    };
                }
            }
            Op::Get(k, s) => {
                let (ro, m) = self.view(s);
                // Three times: a row cache admits a key on its second miss and answers the
                // third from its copy.
                for _ in 0..3 {
                    let got = self.db().get_opt(&k, &ro).unwrap();
                    prop_assert_eq!(got.as_ref(), m.get(&k));
                }
            }
            Op::Scan { reverse, snapshot } => {
                let (ro, m) = self.view(snapshot);
                let range = self.db().scan_opt(&ro).unwrap();
                let got: Vec<(Vec<u8>, Vec<u8>)> = if reverse {
                    range.rev().map(Result::unwrap).collect()
                } else {
                    range.map(Result::unwrap).collect()
                };
                let mut want: Vec<(Vec<u8>, Vec<u8>)> =
                    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                if reverse {
                    want.reverse();
                }
                prop_assert!(got == want, "scan (reverse {}) differs", reverse);
            }
            Op::Walk {
                start,
                steps,
                snapshot,
            } => {
                let (ro, m) = self.view(snapshot);
                let keys: Vec<&Vec<u8>> = m.keys().collect();
                let mut it = self.db().iter_opt(&ro).unwrap();
                it.seek(&start);
                let mut pos = keys.partition_point(|k| k.as_slice() < start.as_slice());
                for forward in steps {
                    let expected = keys.get(pos);
                    prop_assert_eq!(it.valid(), expected.is_some());
                    let Some(expected) = expected else { break };
                    prop_assert_eq!(it.key(), expected.as_slice());
                    prop_assert_eq!(it.value(), m[*expected].as_slice());
                    if forward {
                        it.next();
                        pos += 1;
                    } else {
                        it.prev();
                        if pos == 0 {
                            prop_assert!(!it.valid());
                            break;
                        }
                        pos -= 1;
                    }
                }
                it.status().unwrap();
            }
            Op::Visit {
                start,
                back,
                stop_after,
                then,
                snapshot,
            } => {
                let (ro, m) = self.view(snapshot);
                let entries: Vec<(&Vec<u8>, &Vec<u8>)> = m.iter().collect();
                let mut it = self.db().iter_opt(&ro).unwrap();
                // `pos`: the model's index of the cursor's entry, `entries.len()` for none.
                let mut pos = entries.partition_point(|(k, _)| k.as_slice() < start.as_slice());
                if back && start.is_empty() {
                    it.seek_to_last();
                    pos = entries.len().checked_sub(1).unwrap_or(entries.len());
                } else {
                    it.seek(&start);
                }
                let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                let walk = |key: &[u8], value: &[u8]| {
                    if seen.len() == stop_after {
                        return std::ops::ControlFlow::Break(key.to_vec());
                    }
                    seen.push((key.to_vec(), value.to_vec()));
                    std::ops::ControlFlow::Continue(())
                };
                let flow = if back {
                    it.walk_back(walk)
                } else {
                    it.walk_forward(walk)
                };
                it.status().unwrap();
                let want: Vec<(Vec<u8>, Vec<u8>)> = if pos == entries.len() {
                    Vec::new()
                } else if back {
                    entries[..=pos]
                        .iter()
                        .rev()
                        .map(|(k, v)| ((*k).clone(), (*v).clone()))
                        .collect()
                } else {
                    entries[pos..]
                        .iter()
                        .map(|(k, v)| ((*k).clone(), (*v).clone()))
                        .collect()
                };
                let visited = want.len().min(stop_after);
                prop_assert!(
                    seen == want[..visited],
                    "walk (back {}) visited other entries",
                    back
                );
                match flow {
                    std::ops::ControlFlow::Break(key) => {
                        prop_assert!(visited < want.len());
                        prop_assert_eq!(&key, &want[visited].0);
                        prop_assert!(it.valid());
                        prop_assert_eq!(it.key(), want[visited].0.as_slice());
                        prop_assert_eq!(it.value(), want[visited].1.as_slice());
                    }
                    std::ops::ControlFlow::Continue(()) => {
                        prop_assert_eq!(visited, want.len());
                        prop_assert!(!it.valid());
                        return Ok(());
                    }
                }
                // Cursor steps on from the entry the walk broke on.
                let keys: Vec<&Vec<u8>> = entries.iter().map(|(k, _)| *k).collect();
                let mut pos = keys.partition_point(|k| k.as_slice() < it.key());
                for forward in then {
                    if forward {
                        it.next();
                        pos += 1;
                    } else {
                        it.prev();
                        if pos == 0 {
                            prop_assert!(!it.valid());
                            break;
                        }
                        pos -= 1;
                    }
                    let expected = keys.get(pos);
                    prop_assert_eq!(it.valid(), expected.is_some());
                    let Some(expected) = expected else { break };
                    prop_assert_eq!(it.key(), expected.as_slice());
                    prop_assert_eq!(it.value(), m[*expected].as_slice());
                }
                it.status().unwrap();
            }
            Op::Range(a, b, rev) => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let range = self.db().range(lo.as_slice()..hi.as_slice()).unwrap();
                let got: Vec<Vec<u8>> = if rev {
                    range.rev().map(|i| i.unwrap().0).collect()
                } else {
                    range.map(|i| i.unwrap().0).collect()
                };
                let mut want: Vec<Vec<u8>> = self
                    .model
                    .range(lo.clone()..hi.clone())
                    .map(|(k, _)| k.clone())
                    .collect();
                if rev {
                    want.reverse();
                }
                prop_assert_eq!(got, want);
            }
            Op::TakeSnapshot => {
                if self.snapshots.len() < 4 {
                    let s = self.db().snapshot();
                    self.snapshots.push((s, self.model.clone()));
                }
            }
            Op::ReleaseSnapshot(i) => {
                if i < self.snapshots.len() {
                    self.snapshots.remove(i);
                }
            }
            Op::Compact(a, b) => {
                self.db().compact_range(a.as_deref(), b.as_deref()).unwrap();
                self.db().wait_for_compactions().unwrap();
                self.check_only_live_tables()?;
            }
            Op::Reopen => {
                // Snapshots belong to the open database.
                self.snapshots.clear();
                self.db = None;
                self.db = Some(Db::open("/db", self.options.clone()).unwrap());
            }
        }
        Ok(())
    }

    /// With no cursor open and the background idle, the directory holds exactly the tables
    /// of the current version (`leveldb.sstables`): obsolete ones are deleted at once.
    fn check_only_live_tables(&self) -> Result<(), TestCaseError> {
        let live = common::version_tables(self.db());
        let on_disk =
            common::table_numbers(self.env.children(std::path::Path::new("/db")).unwrap());
        prop_assert_eq!(on_disk, live, "tables on disk and in the version differ");
        Ok(())
    }

    fn check_everything(&self) -> Result<(), TestCaseError> {
        let got: Model = self.db().scan().unwrap().map(Result::unwrap).collect();
        prop_assert!(got == self.model, "final contents differ");
        let _ = &self.env;
        Ok(())
    }
}

/// Removes the model's keys in `[a, b)`.
fn delete_model_range(model: &mut Model, a: &[u8], b: &[u8]) {
    let doomed: Vec<Vec<u8>> = model
        .range::<[u8], _>((Bound::Included(a), Bound::Excluded(b)))
        .map(|(k, _)| k.clone())
        .collect();
    for k in doomed {
        model.remove(&k);
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

fn option_sets() -> Vec<Options> {
    vec![
        // Small blocks, small files: many blocks, tables and levels for little data.
        Options {
            write_buffer_size: 64 << 10,
            block_size: 1024,
            block_restart_interval: 2,
            max_file_size: 1 << 20,
            ..Options::default()
        },
        // Bloom filters, no compression.
        Options {
            compression: strata::Compression::None,
            ..Options::default()
        }
        .with_bloom_filter(10),
        // A row cache small enough to evict: reads of the newest state answered from it
        // must follow every put, delete, batch and range deletion.
        Options {
            write_buffer_size: 64 << 10,
            block_size: 1024,
            row_cache_capacity: 8 << 10,
            ..Options::default()
        },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 2, ..ProptestConfig::default() })]

    #[test]
    fn database_matches_a_btreemap_with_small_blocks(ops in proptest::collection::vec(op(), 1..120)) {
        let mut h = Harness::new(option_sets()[0].clone());
        for op in ops {
            h.apply(op)?;
        }
        h.check_everything()?;
    }

    #[test]
    fn database_matches_a_btreemap_with_bloom_filters(ops in proptest::collection::vec(op(), 1..120)) {
        let mut h = Harness::new(option_sets()[1].clone());
        for op in ops {
            h.apply(op)?;
        }
        h.check_everything()?;
    }

    #[test]
    fn database_matches_a_btreemap_with_a_row_cache(ops in proptest::collection::vec(op(), 1..120)) {
        let mut h = Harness::new(option_sets()[2].clone());
        for op in ops {
            h.apply(op)?;
        }
        h.check_everything()?;
    }
}

/// The orders the custom-comparator model runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Descending bytewise, naming no prefix range: `prefix` scans and filters.
    Reverse,
    /// Descending bytewise, naming the range each prefix's keys lie in.
    ReverseWithPrefixRange,
    /// The first 4 bytes ascending, the rest descending (user ids, then times newest first).
    UserTime,
}

impl strata::Comparator for Order {
    fn name(&self) -> &str {
        match self {
            Order::Reverse => "test.Reverse",
            Order::ReverseWithPrefixRange => "test.ReverseWithPrefixRange",
            Order::UserTime => "test.UserTime",
        }
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        match self {
            Order::Reverse | Order::ReverseWithPrefixRange => b.cmp(a),
            Order::UserTime => {
                let (ua, ta) = a.split_at(a.len().min(4));
                let (ub, tb) = b.split_at(b.len().min(4));
                ua.cmp(ub).then_with(|| tb.cmp(ta))
            }
        }
    }

    fn find_shortest_separator(&self, _: &mut Vec<u8>, _: &[u8]) {}
    fn find_short_successor(&self, _: &mut Vec<u8>) {}

    fn prefix_range(&self, prefix: &[u8]) -> Option<strata::KeyRange> {
        if *self != Order::ReverseWithPrefixRange {
            return None;
        }
        let start = strata::BytewiseComparator::prefix_successor(prefix)
            .map_or(Bound::Unbounded, Bound::Excluded);
        Some((start, Bound::Included(prefix.to_vec())))
    }
}

/// A key in a model ordered by an [`Order`].
#[derive(Debug, Clone)]
struct OrderedKey(Order, Vec<u8>);

impl PartialEq for OrderedKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for OrderedKey {}
impl PartialOrd for OrderedKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        strata::Comparator::compare(&self.0, &self.1, &other.1)
    }
}

#[derive(Debug, Clone)]
enum ScanOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `delete_range(a, b)`, the bounds in the comparator's order.
    DeleteRange(Vec<u8>, Vec<u8>),
    /// A prefix scan; `None` walks it forward, `Some(ends)` takes each item from the front
    /// (`true`) or the back in turn.
    Prefix(Vec<u8>, Option<Vec<bool>>),
    Range(Vec<u8>, Vec<u8>, bool),
}

/// Keys over a few byte values, so that prefixes are shared, both sides of the 4-byte split.
fn scan_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(0xff)], 0..7)
}

fn scan_op() -> impl Strategy<Value = ScanOp> {
    prop_oneof![
        10 => (scan_key(), proptest::collection::vec(any::<u8>(), 0..8)).prop_map(|(k, v)| ScanOp::Put(k, v)),
        3 => scan_key().prop_map(ScanOp::Delete),
        2 => (scan_key(), scan_key()).prop_map(|(a, b)| ScanOp::DeleteRange(a, b)),
        4 => (proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0xff)], 0..5),
              proptest::option::of(proptest::collection::vec(any::<bool>(), 0..40)))
            .prop_map(|(p, ends)| ScanOp::Prefix(p, ends)),
        2 => (scan_key(), scan_key(), any::<bool>()).prop_map(|(a, b, rev)| ScanOp::Range(a, b, rev)),
    ]
}

fn keys_of(items: impl Iterator<Item = strata::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<Vec<u8>> {
    items.map(|i| i.unwrap().0).collect()
}

/// Applies `op` to `db` and to `model`, checking every scan against the model.
fn apply_scan_op(
    db: &Db,
    model: &mut BTreeMap<OrderedKey, Vec<u8>>,
    order: Order,
    op: ScanOp,
) -> Result<(), TestCaseError> {
    let ro = ReadOptions::default();
    match op {
        ScanOp::Put(k, v) => {
            db.put(&k, &v).unwrap();
            model.insert(OrderedKey(order, k), v);
        }
        ScanOp::Delete(k) => {
            db.delete(&k).unwrap();
            model.remove(&OrderedKey(order, k));
        }
        ScanOp::DeleteRange(a, b) => {
            let (a, b) = (OrderedKey(order, a), OrderedKey(order, b));
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            db.delete_range(&a.1, &b.1).unwrap();
            let doomed: Vec<OrderedKey> = model.range(a..b).map(|(k, _)| k.clone()).collect();
            for k in doomed {
                model.remove(&k);
            }
        }
        ScanOp::Prefix(prefix, ends) => {
            let want: Vec<Vec<u8>> = model
                .keys()
                .filter(|k| k.1.starts_with(&prefix))
                .map(|k| k.1.clone())
                .collect();
            prop_assert_eq!(&keys_of(db.prefix_opt(&prefix, &ro).unwrap()), &want);
            let mut backward = want.clone();
            backward.reverse();
            prop_assert_eq!(
                keys_of(db.prefix_opt(&prefix, &ro).unwrap().rev()),
                backward
            );
            if let Some(ends) = ends {
                // Alternating ends: the front's items then the back's, reversed, are all of
                // them, each once.
                let mut range = db.prefix_opt(&prefix, &ro).unwrap();
                let (mut front, mut back) = (Vec::new(), Vec::new());
                for from_front in ends.into_iter().chain(std::iter::repeat(true)) {
                    let item = if from_front {
                        range.next()
                    } else {
                        range.next_back()
                    };
                    let Some(item) = item else { break };
                    let key = item.unwrap().0;
                    if from_front {
                        front.push(key)
                    } else {
                        back.push(key)
                    }
                }
                front.extend(back.into_iter().rev());
                prop_assert_eq!(front, want);
            }
        }
        ScanOp::Range(a, b, rev) => {
            let (a, b) = (OrderedKey(order, a), OrderedKey(order, b));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let range = db.range_opt(lo.1.as_slice()..hi.1.as_slice(), &ro).unwrap();
            let got = if rev {
                keys_of(range.rev())
            } else {
                keys_of(range)
            };
            let mut want: Vec<Vec<u8>> = model.range(lo..hi).map(|(k, _)| k.1.clone()).collect();
            if rev {
                want.reverse();
            }
            prop_assert_eq!(got, want);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// Prefix and range scans, forward, backward and from both ends, under orders other than
    /// bytewise, against a `BTreeMap` in the same order: the first half of the operations
    /// reach tables (a full compaction follows them), the second half stay in the memtable.
    #[test]
    fn prefix_and_range_scans_match_a_model_under_custom_comparators(
        order in prop_oneof![Just(Order::Reverse), Just(Order::ReverseWithPrefixRange), Just(Order::UserTime)],
        ops in proptest::collection::vec(scan_op(), 1..80),
    ) {
        let env = MemEnv::new();
        let options = Options {
            create_if_missing: true,
            comparator: Arc::new(order),
            block_size: 256,
            block_restart_interval: 2,
            ..Options::default()
        }
        .with_env(Arc::new(env.clone()));
        let db = Db::open("/db", options).unwrap();
        let mut model = BTreeMap::new();
        let half = ops.len() / 2;
        for (i, op) in ops.into_iter().enumerate() {
            if i == half {
                db.compact_range(None, None).unwrap();
            }
            apply_scan_op(&db, &mut model, order, op)?;
        }
        let all: Vec<Vec<u8>> = model.keys().map(|k| k.1.clone()).collect();
        prop_assert_eq!(keys_of(db.scan().unwrap()), all);
    }
}
