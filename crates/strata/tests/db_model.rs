// SPDX-License-Identifier: MIT OR Apache-2.0
//! The database against a model: random sequences of puts, deletes, batches, snapshots, reads,
//! scans in both directions, cursor walks, compactions and reopens, applied to strata (on the
//! in-memory env) and to a `BTreeMap`; every read must agree.
//!
//! `PROPTEST_CASES` sets the number of cases (default 2000); failures are shrunk and saved by
//! proptest for replay.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use strata::{Db, Env, MemEnv, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
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
        4 => proptest::collection::vec((key(), proptest::option::of(value())), 0..12).prop_map(Op::Batch),
        10 => (key(), proptest::option::of(0usize..4)).prop_map(|(k, s)| Op::Get(k, s)),
        3 => (any::<bool>(), proptest::option::of(0usize..4)).prop_map(|(reverse, snapshot)| Op::Scan { reverse, snapshot }),
        4 => (key(), proptest::collection::vec(any::<bool>(), 1..12), proptest::option::of(0usize..4))
            .prop_map(|(start, steps, snapshot)| Op::Walk { start, steps, snapshot }),
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
                self.db().put(&w, &k, &v).unwrap();
                self.model.insert(k, v);
            }
            Op::Delete(k) => {
                self.db().delete(&w, &k).unwrap();
                self.model.remove(&k);
            }
            Op::Batch(ops) => {
                let mut batch = WriteBatch::new();
                for (k, v) in &ops {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    }
                }
                self.db()
                    .write(&WriteOptions { sync: true }, batch)
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
                let got = self.db().get(&ro, &k).unwrap();
                prop_assert_eq!(got.as_ref(), m.get(&k));
            }
            Op::Scan { reverse, snapshot } => {
                let (ro, m) = self.view(snapshot);
                let range = self.db().scan(&ro).unwrap();
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
                let mut it = self.db().iter(&ro).unwrap();
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
            Op::Range(a, b, rev) => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let range = self
                    .db()
                    .range(&ReadOptions::default(), lo.as_slice()..hi.as_slice())
                    .unwrap();
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
        let listed = self.db().property("leveldb.sstables").unwrap();
        let mut live: Vec<u64> = listed
            .lines()
            .filter_map(|line| line.trim_start().split(':').next()?.parse().ok())
            .collect();
        live.sort_unstable();
        let mut on_disk: Vec<u64> = self
            .env
            .children(std::path::Path::new("/db"))
            .unwrap()
            .iter()
            .filter_map(|name| name.strip_suffix(".ldb")?.parse().ok())
            .collect();
        on_disk.sort_unstable();
        prop_assert_eq!(on_disk, live, "tables on disk and in the version differ");
        Ok(())
    }

    fn check_everything(&self) -> Result<(), TestCaseError> {
        let got: Model = self
            .db()
            .scan(&ReadOptions::default())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        prop_assert!(got == self.model, "final contents differ");
        let _ = &self.env;
        Ok(())
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
}
