// SPDX-License-Identifier: MIT OR Apache-2.0
//! A loom model of how reads find data while the memtables and the version are switched.
//!
//! The database's read path (see the locking notes in `db/mod.rs`) loads `visible_seqno`, then
//! the [`ReadView`](super::ReadView), then searches the memtables and tables the view names,
//! with no lock. Writers insert into the memtable before raising `visible_seqno`; a memtable
//! switch makes the full memtable immutable and publishes a view holding both; a flush
//! publishes, in one view, the new table and the immutable memtable's departure. The claim: a
//! reader always finds every write at or below the seqno it loaded.
//!
//! The model runs that protocol with the real [`MemTable`] (its skiplist on loom's atomics)
//! and three threads: a writer making three writes with a memtable switch between the first and
//! second, a flush thread turning the immutable memtable into a table, and a reader. Two
//! stand-ins: the view cell is a loom `Mutex<Arc<View>>` (the `ArcSwap` it stands for is
//! linearizable, which a mutex models), and a table is a sorted `Vec`.
//!
//! The model can fail: each [`Mutation`] breaks one rule of the protocol, and a test asserts
//! that loom finds an execution where the reader misses a write.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p strata --release --lib loom_model
//! ```

use std::sync::Arc;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Condvar, Mutex};

use crate::comparator::bytewise;
use crate::iter::InternalIterator;
use crate::key::{InternalKeyComparator, ParsedInternalKey, SeqNo, ValueKind};
use crate::memtable::loom_model::{model, spawn, Outcomes};
use crate::memtable::{MemLookup, MemTable};

/// One rule of the protocol broken on purpose, or none.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mutation {
    None,
    /// The writer raises `visible_seqno` before inserting into the memtable.
    SeqnoBeforeInsert,
    /// The flush publishes a view without the immutable memtable, then one with its table.
    ImmLeavesBeforeItsTable,
    /// The reader loads the view before the seqno.
    ViewBeforeSeqno,
    /// `visible_seqno` is stored and loaded with `Relaxed`.
    RelaxedSeqno,
}

/// Where a read found its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Found {
    Mem,
    Imm,
    Table,
}

/// A flushed table: (user key, seqno, value), sorted.
type Table = Vec<(Vec<u8>, SeqNo, Vec<u8>)>;

struct View {
    mem: Arc<MemTable>,
    imm: Option<Arc<MemTable>>,
    tables: Vec<Arc<Table>>,
}

struct State {
    mem: Arc<MemTable>,
    imm: Option<Arc<MemTable>>,
    tables: Vec<Arc<Table>>,
}

struct Db {
    mutation: Mutation,
    visible_seqno: AtomicU64,
    view: Mutex<Arc<View>>,
    state: Mutex<State>,
    imm_ready: Condvar,
}

const WRITES: u64 = 3;

fn memtable() -> Arc<MemTable> {
    Arc::new(MemTable::new(InternalKeyComparator::new(bytewise())))
}

fn key(seqno: SeqNo) -> Vec<u8> {
    format!("k{seqno}").into_bytes()
}

fn value(seqno: SeqNo) -> Vec<u8> {
    format!("v{seqno}").into_bytes()
}

impl Db {
    fn new(mutation: Mutation) -> Self {
        let mem = memtable();
        Db {
            mutation,
            visible_seqno: AtomicU64::new(0),
            view: Mutex::new(Arc::new(View {
                mem: mem.clone(),
                imm: None,
                tables: Vec::new(),
            })),
            state: Mutex::new(State {
                mem,
                imm: None,
                tables: Vec::new(),
            }),
            imm_ready: Condvar::new(),
        }
    }

    fn seqno_ordering(&self, strong: Ordering) -> Ordering {
        if self.mutation == Mutation::RelaxedSeqno {
            Ordering::Relaxed
        } else {
            strong
        }
    }

    /// `DbInner::publish_view`: requires the state lock.
    fn publish(&self, state: &State) {
        *self.view.lock().unwrap() = Arc::new(View {
            mem: state.mem.clone(),
            imm: state.imm.clone(),
            tables: state.tables.clone(),
        });
    }

    /// The leader's write: take the memtable under the state lock, insert without it, then
    /// make the write visible under the lock. Before the second write, a memtable switch.
    fn writer(&self) {
        for seqno in 1..=WRITES {
            if seqno == 2 {
                let mut state = self.state.lock().unwrap();
                state.imm = Some(std::mem::replace(&mut state.mem, memtable()));
                self.publish(&state);
                self.imm_ready.notify_all();
            }
            let mem = self.state.lock().unwrap().mem.clone();
            let release = self.seqno_ordering(Ordering::Release);
            if self.mutation == Mutation::SeqnoBeforeInsert {
                self.visible_seqno.store(seqno, release);
            }
            mem.add(seqno, ValueKind::Value, &key(seqno), &value(seqno));
            let _state = self.state.lock().unwrap();
            self.visible_seqno.store(seqno, release);
        }
    }

    /// The background flush: wait for an immutable memtable, build its table without the state
    /// lock, install the table and drop the memtable in one view.
    fn flush(&self) {
        let imm = {
            let mut state = self.state.lock().unwrap();
            loop {
                if let Some(imm) = state.imm.clone() {
                    break imm;
                }
                state = self.imm_ready.wait(state).unwrap();
            }
        };
        let mut table = Table::new();
        let mut it = imm.iter();
        it.seek_to_first();
        while it.valid() {
            let k = ParsedInternalKey::parse(it.key()).unwrap();
            table.push((k.user_key.to_vec(), k.seqno, it.value().to_vec()));
            it.next();
        }
        let mut state = self.state.lock().unwrap();
        if self.mutation == Mutation::ImmLeavesBeforeItsTable {
            state.imm = None;
            self.publish(&state);
            drop(state);
            state = self.state.lock().unwrap();
        }
        state.tables.push(Arc::new(table));
        state.imm = None;
        self.publish(&state);
    }

    /// `Db::get`'s lock-free path: the seqno, then the view, then memtables before tables.
    /// Also says where the value was found.
    fn get(&self, view: &View, user_key: &[u8], snapshot: SeqNo) -> Option<(Vec<u8>, Found)> {
        let mems = [
            (Some(&view.mem), Found::Mem),
            (view.imm.as_ref(), Found::Imm),
        ];
        for (mem, found) in mems {
            match mem.and_then(|m| m.get(user_key, snapshot)) {
                // (The model writes no blob pointers; a pointer is a value to this model.)
                Some(MemLookup::Value(v) | MemLookup::BlobPointer(v)) => {
                    return Some((v.to_vec(), found))
                }
                Some(MemLookup::Deleted) => return None,
                None => {}
            }
        }
        view.tables.iter().rev().find_map(|t| {
            t.iter()
                .find(|(k, s, _)| k == user_key && *s <= snapshot)
                .map(|(_, _, v)| (v.clone(), Found::Table))
        })
    }

    /// A reader: every write at or below the seqno it loaded must be found. Returns that seqno
    /// and where the first write was found.
    fn reader(&self) -> (SeqNo, Option<Found>) {
        let acquire = self.seqno_ordering(Ordering::Acquire);
        let (snapshot, view) = if self.mutation == Mutation::ViewBeforeSeqno {
            let view = self.view.lock().unwrap().clone();
            (self.visible_seqno.load(acquire), view)
        } else {
            let snapshot = self.visible_seqno.load(acquire);
            (snapshot, self.view.lock().unwrap().clone())
        };
        let mut first = None;
        for seqno in 1..=snapshot {
            let found = self.get(&view, &key(seqno), snapshot);
            assert_eq!(
                found.as_ref().map(|(v, _)| v),
                Some(&value(seqno)),
                "a reader at seqno {snapshot} missed write {seqno}"
            );
            first = first.or(found.map(|(_, at)| at));
        }
        (snapshot, first)
    }
}

/// Runs the model; returns the executions explored and what the concurrent readers observed.
fn run(mutation: Mutation) -> (usize, Outcomes<(SeqNo, Option<Found>)>) {
    let outcomes = Outcomes::default();
    let recorded = outcomes.clone();
    let executions = model(move || {
        let db = Arc::new(Db::new(mutation));
        let writer = {
            let db = db.clone();
            spawn(move || db.writer())
        };
        let flusher = {
            let db = db.clone();
            spawn(move || db.flush())
        };
        recorded.record(db.reader());
        recorded.record(db.reader());
        writer.join().unwrap();
        flusher.join().unwrap();
        db.reader();
        assert_eq!(db.visible_seqno.load(Ordering::Acquire), WRITES);
    });
    (executions, outcomes)
}

#[test]
fn loom_model_readers_find_every_visible_write_across_switch_and_flush() {
    let (executions, outcomes) = run(Mutation::None);
    // Readers ran before any write, and after each; found the first write in the memtable,
    // in the immutable memtable and in the flushed table.
    outcomes.assert_all_seen([
        (0, None),
        (1, Some(Found::Mem)),
        (1, Some(Found::Imm)),
        (1, Some(Found::Table)),
        (2, Some(Found::Imm)),
        (2, Some(Found::Table)),
        (3, Some(Found::Imm)),
        (3, Some(Found::Table)),
    ]);
    assert!(executions > 1_000, "only {executions} executions explored");
}

#[test]
fn loom_model_catches_each_broken_rule() {
    for mutation in [
        Mutation::SeqnoBeforeInsert,
        Mutation::ImmLeavesBeforeItsTable,
        Mutation::ViewBeforeSeqno,
        Mutation::RelaxedSeqno,
    ] {
        let found = std::panic::catch_unwind(|| run(mutation)).is_err();
        assert!(found, "loom found no execution that breaks {mutation:?}");
    }
}
