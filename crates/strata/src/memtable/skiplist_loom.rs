// SPDX-License-Identifier: MIT OR Apache-2.0
//! Loom models of the skiplist: one writer inserting while a reader scans and seeks, explored
//! over every interleaving of their atomic operations (within loom's preemption bound) and the
//! weak-memory outcomes loom models. They run the real `SkipList`, whose atomics and mutex come
//! from loom under `--cfg loom` (see `memtable::sync`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p strata --release --lib loom_model
//! ```
//!
//! What each model checks, in every explored execution: a reader never misses an entry that was
//! in the list before it started, never sees keys out of order, and never sees a key with
//! another key's value; after the writer is done, every entry is there.
//!
//! Each model also records what its reader observed across executions and asserts that every
//! kind of outcome came up (the reader before, during and after the inserts): proof that loom
//! really interleaved the threads, rather than running one schedule and passing. That matters:
//! loom 0.7's search skips schedules when a new thread starts with an atomic load (loom issue
//! #392), which [`spawn`] works around.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::*;
use crate::comparator::bytewise;
use crate::key::{pack_tag, ParsedInternalKey, ValueKind};

fn list() -> SkipList {
    SkipList::new(InternalKeyComparator::new(bytewise()))
}

fn value_for(user: &[u8]) -> Vec<u8> {
    user.iter().rev().map(|b| b ^ 0x5a).collect()
}

fn insert(l: &SkipList, user: &[u8], seqno: u64) {
    l.insert(user, pack_tag(seqno, ValueKind::Value), &value_for(user));
}

/// Makes the next insert build a tower of `height`: the height generator is a pure function of
/// its state, so search for a state that yields it.
fn next_height_will_be(l: &SkipList, height: usize) {
    let seed = (1u64..)
        .find(|&s| SkipList::random_height(&mut s.clone()) == height)
        .expect("some state yields every height");
    l.writer.lock().unwrap().rng = seed;
}

/// Scans the list from the front; checks order and values; returns the user keys seen.
fn scan(l: &SkipList) -> Vec<Vec<u8>> {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut c = Cursor::new(l);
    c.seek_to_first();
    while c.valid() {
        let k = ParsedInternalKey::parse(c.key()).expect("a published node is complete");
        assert_eq!(
            c.value(),
            value_for(k.user_key),
            "a key with another's value"
        );
        if let Some(prev) = seen.last() {
            assert!(prev.as_slice() < k.user_key, "keys out of order");
        }
        seen.push(k.user_key.to_vec());
        c.next();
    }
    seen
}

fn seek_user_key(l: &SkipList, user: &[u8]) -> Option<Vec<u8>> {
    let mut target = user.to_vec();
    target.extend_from_slice(&pack_tag(u64::MAX >> 8, ValueKind::FOR_SEEK).to_le_bytes());
    let mut c = Cursor::new(l);
    c.seek(&target);
    c.valid()
        .then(|| ParsedInternalKey::parse(c.key()).unwrap().user_key.to_vec())
}

/// `loom::thread::spawn`, with a race planted between the new thread's last step and the
/// spawner's next one. Without it, loom 0.7's search often runs the new thread only after the
/// spawner blocks, one execution in all (loom issues #166, #392: it mis-tracks threads whose
/// first operations are loads); the planted race makes it backtrack to the spawn and explore
/// from there. The models' outcome checks show the interleavings did happen.
pub(crate) fn spawn<T: 'static>(f: impl FnOnce() -> T + 'static) -> loom::thread::JoinHandle<T> {
    let finished = Arc::new(AtomicUsize::new(0));
    let handle = {
        let finished = finished.clone();
        loom::thread::spawn(move || {
            let result = f();
            finished.fetch_add(1, Ordering::Relaxed);
            result
        })
    };
    finished.load(Ordering::Relaxed);
    handle
}

/// Outcomes gathered across a model's executions.
#[derive(Clone, Default)]
pub(crate) struct Outcomes<T: Ord>(Arc<std::sync::Mutex<BTreeSet<T>>>);

impl<T: Ord + Clone + std::fmt::Debug> Outcomes<T> {
    pub(crate) fn record(&self, outcome: T) {
        self.0.lock().unwrap().insert(outcome);
    }

    pub(crate) fn seen(&self) -> BTreeSet<T> {
        self.0.lock().unwrap().clone()
    }

    /// Asserts that each of `expected` was observed in some execution.
    pub(crate) fn assert_all_seen(&self, expected: impl IntoIterator<Item = T>) {
        let seen = self.seen();
        for e in expected {
            assert!(
                seen.contains(&e),
                "no execution produced {e:?}; seen: {seen:?}"
            );
        }
    }
}

/// Runs `f` under loom, with at most 3 preemptions per execution unless `LOOM_MAX_PREEMPTIONS`
/// says otherwise, and returns how many executions loom explored.
pub(crate) fn model(f: impl Fn() + Send + Sync + 'static) -> usize {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(3));
    let executions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = executions.clone();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    let n = executions.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("loom explored {n} executions");
    n
}

#[test]
fn loom_model_a_reader_scans_while_a_writer_inserts_before_between_and_after() {
    let outcomes = Outcomes::default();
    let recorded = outcomes.clone();
    model(move || {
        let l = Arc::new(list());
        insert(&l, b"b", 1);
        insert(&l, b"d", 2);
        let writer = {
            let l = l.clone();
            spawn(move || {
                insert(&l, b"c", 3); // between: found by search
                insert(&l, b"e", 4); // after: appended through the tails
                insert(&l, b"a", 5); // before: linked from head
            })
        };
        let seen = scan(&l);
        for old in [&b"b"[..], b"d"] {
            assert!(
                seen.contains(&old.to_vec()),
                "a reader missed {old:?}: {seen:?}"
            );
        }
        recorded.record(seen.len() - 2);
        writer.join().unwrap();
        assert_eq!(scan(&l), [&b"a"[..], b"b", b"c", b"d", b"e"]);
        assert_eq!(l.len(), 5);
    });
    // The reader saw none, some and all of the new entries in different executions.
    outcomes.assert_all_seen([0, 1, 2, 3]);
}

#[test]
fn loom_model_seeks_race_a_tall_tower_raising_the_height() {
    let outcomes = Outcomes::default();
    let recorded = outcomes.clone();
    model(move || {
        let l = Arc::new(list());
        insert(&l, b"b", 1);
        insert(&l, b"f", 2);
        next_height_will_be(&l, 4);
        let writer = {
            let l = l.clone();
            spawn(move || insert(&l, b"d", 3))
        };
        // Seeks walk down from `max_height`, which the writer raises while linking.
        let raised = l.max_height.load(Ordering::Relaxed) > 1;
        assert_eq!(seek_user_key(&l, b"b").as_deref(), Some(&b"b"[..]));
        let at_c = seek_user_key(&l, b"c").expect("f is there");
        assert!(at_c == b"d" || at_c == b"f", "seek(c) found {at_c:?}");
        assert_eq!(seek_user_key(&l, b"e").as_deref(), Some(&b"f"[..]));
        recorded.record((raised, at_c == b"d"));
        writer.join().unwrap();
        assert_eq!(seek_user_key(&l, b"c").as_deref(), Some(&b"d"[..]));
        assert_eq!(scan(&l), [&b"b"[..], b"d", b"f"]);
    });
    // Seeks ran before the height rose, after it rose but before `d` was linked, and after.
    outcomes.assert_all_seen([(false, false), (true, false), (true, true)]);
}

/// A list of `a`, `c` and, when `from_e`, `e`; a writer inserts `b` while a cursor steps back
/// from the last key onto `c`, then once more: that step finds `b` or `a` (both seen), never
/// skips past both or fails. With `from_e` the step onto `c` leaves fingers, and the step after
/// starts from them; without, it is the first step back and searches from the head.
fn step_back_from_c_during_an_insert_of_b(from_e: bool) {
    let outcomes = Outcomes::default();
    let recorded = outcomes.clone();
    model(move || {
        let l = Arc::new(list());
        let mut keys: Vec<&[u8]> = vec![b"a", b"c"];
        if from_e {
            keys.push(b"e");
        }
        for (seqno, key) in (1..).zip(&keys) {
            insert(&l, key, seqno);
        }
        let writer = {
            let l = l.clone();
            let seqno = keys.len() as u64 + 1;
            spawn(move || insert(&l, b"b", seqno))
        };
        let mut c = Cursor::new(&*l);
        c.seek_to_last();
        if from_e {
            c.prev();
        }
        assert_eq!(ParsedInternalKey::parse(c.key()).unwrap().user_key, b"c");
        c.prev();
        let before_c = ParsedInternalKey::parse(c.key()).unwrap().user_key.to_vec();
        assert!(
            before_c == b"a" || before_c == b"b",
            "prev(c) = {before_c:?}"
        );
        recorded.record(before_c);
        writer.join().unwrap();
        keys.insert(1, b"b");
        assert_eq!(scan(&l), keys);
    });
    outcomes.assert_all_seen([b"a".to_vec(), b"b".to_vec()]);
}

/// The second step back, from the fingers the first one left.
#[test]
fn loom_model_steps_back_from_fingers_during_an_insert() {
    step_back_from_c_during_an_insert_of_b(true);
}

/// The first step back, a search from the head.
#[test]
fn loom_model_reverse_steps_during_an_insert() {
    step_back_from_c_during_an_insert_of_b(false);
}
