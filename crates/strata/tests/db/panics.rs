// SPDX-License-Identifier: MIT OR Apache-2.0
//! A comparator and a filter policy that panic on a chosen key, armed during a write, a flush,
//! a compaction and a read. Whatever panics, nothing hangs (a watchdog fails the test): the
//! database is poisoned (writes fail with `Error::Poisoned`), reads answer, and dropping it
//! returns. A panic in a read poisons nothing.

use std::cmp::Ordering;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use strata_testkit as common;

use strata::filter::FilterPolicy;
use strata::{Comparator, Db, Error, Options};

/// The key whose comparison panics while armed.
const BOMB: &[u8] = b"key-bomb";
const WATCHDOG: Duration = Duration::from_secs(30);

/// Bytewise order; panics when armed and a key it is given contains `BOMB`.
#[derive(Default)]
struct Trap {
    armed: AtomicBool,
}

impl Trap {
    fn spring(&self, keys: &[&[u8]]) {
        if self.armed.load(SeqCst)
            && keys
                .iter()
                .any(|k| k.windows(BOMB.len()).any(|w| w == BOMB))
        {
            panic!("trap sprung");
        }
    }
}

struct TrapComparator(Arc<Trap>);

impl Comparator for TrapComparator {
    fn name(&self) -> &str {
        "leveldb.BytewiseComparator"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        self.0.spring(&[a, b]);
        a.cmp(b)
    }
    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        self.0.spring(&[start, limit]);
    }
    fn find_short_successor(&self, key: &mut Vec<u8>) {
        self.0.spring(&[key]);
    }
}

struct TrapFilter(Arc<Trap>);

impl FilterPolicy for TrapFilter {
    fn name(&self) -> &str {
        "strata.TrapFilter"
    }
    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        self.0.spring(keys);
        dst.push(0);
    }
    fn key_may_match(&self, _key: &[u8], _filter: &[u8]) -> bool {
        true
    }
}

#[derive(Clone, Copy, Debug)]
enum Trapped {
    Comparator,
    Filter,
}

fn open(dir: &std::path::Path, trap: &Arc<Trap>, trapped: Trapped) -> Db {
    let mut options = Options {
        create_if_missing: true,
        write_buffer_size: 32 << 10,
        ..Options::default()
    };
    match trapped {
        Trapped::Comparator => options.comparator = Arc::new(TrapComparator(trap.clone())),
        Trapped::Filter => options.filter_policy = Some(Arc::new(TrapFilter(trap.clone()))),
    }
    Db::open(dir, options).unwrap()
}

/// Runs `f` on another thread; fails the test if it does not finish in time.
fn watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    common::within(what, WATCHDOG, f).unwrap_or_else(|e| panic!("{e}"))
}

fn fill(db: &Db, from: u32, to: u32) {
    for i in from..to {
        db.put(format!("key-{i:06}").as_bytes(), [b'v'; 100])
            .unwrap();
    }
}

/// After a panic in work that writes: writes fail as poisoned, reads answer, drop returns.
fn poisoned_but_readable(db: Db, trap: &Trap) {
    trap.armed.store(false, SeqCst);
    let db = Arc::new(db);
    let reader = db.clone();
    let got = watchdog("a read after the panic", move || reader.get(b"key-000001"));
    assert_eq!(got.unwrap().as_deref(), Some(&[b'v'; 100][..]));
    let writer = db.clone();
    let e = watchdog("a write after the panic", move || {
        writer.put(b"after", b"panic")
    })
    .unwrap_err();
    assert!(e.is_poisoned(), "{e}");
    assert!(e.to_string().contains("panic"), "{e}");
    let compactor = db.clone();
    let e = watchdog("a compaction after the panic", move || {
        compactor.compact_range(None, None)
    })
    .unwrap_err();
    assert!(e.is_poisoned(), "{e}");
    watchdog("dropping the database", move || drop(db));
}

#[test]
fn a_panic_in_a_writers_memtable_insert_fails_the_writers_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let trap = Arc::new(Trap::default());
    let db = Arc::new(open(dir.path(), &trap, Trapped::Comparator));
    fill(&db, 0, 100);
    trap.armed.store(true, SeqCst);
    // Many writers at once, so that the panicking one may lead a group or wait in one.
    let mut outcomes = Vec::new();
    for t in 0..4u32 {
        let db = db.clone();
        outcomes.push(std::thread::spawn(move || {
            let mut results = Vec::new();
            for i in 0..200u32 {
                let key = if t == 0 && i == 50 {
                    BOMB.to_vec()
                } else {
                    format!("key-{t}-{i:04}").into_bytes()
                };
                let r = catch_unwind(AssertUnwindSafe(|| db.put(&key, b"x")));
                results.push(r.is_err() || r.as_ref().is_ok_and(|w| w.is_err()));
            }
            results
        }));
    }
    let failed = watchdog("writers racing a panicking one", move || {
        outcomes
            .into_iter()
            .map(|h| h.join().unwrap().into_iter().filter(|f| *f).count())
            .sum::<usize>()
    });
    assert!(failed > 0, "the bomb did not go off");
    let db = Arc::try_unwrap(db).unwrap();
    poisoned_but_readable(db, &trap);
}

fn panic_in_the_background(trapped: Trapped, compaction: bool) {
    let dir = tempfile::tempdir().unwrap();
    let trap = Arc::new(Trap::default());
    let db = open(dir.path(), &trap, trapped);
    fill(&db, 0, 100);
    db.put(BOMB, b"x").unwrap();
    if compaction {
        // The bomb is in a table; the compaction merging it panics.
        db.compact_range(None, Some(b"key-000050")).unwrap();
        fill(&db, 100, 200);
        db.compact_range(None, Some(b"key-000050")).unwrap();
    }
    trap.armed.store(true, SeqCst);
    let db = Arc::new(db);
    let compactor = db.clone();
    let result = watchdog("a flush or compaction that panics", move || {
        compactor.compact_range(None, None)
    });
    let e = result.unwrap_err();
    assert!(e.is_poisoned(), "{e}");
    // Writers that wait for room (the memtable is full and cannot be flushed) get the error.
    let writer = db.clone();
    let e = watchdog("writers filling the memtable", move || {
        (0..2000u32)
            .map(|i| writer.put(format!("w{i}").as_bytes(), [1; 100]))
            .find_map(Result::err)
    })
    .expect("writes fail");
    assert!(e.is_poisoned(), "{e}");
    poisoned_but_readable(Arc::try_unwrap(db).unwrap(), &trap);
}

#[test]
fn a_comparator_panicking_in_a_flush_poisons_and_nothing_hangs() {
    panic_in_the_background(Trapped::Comparator, false);
}

#[test]
fn a_filter_policy_panicking_in_a_flush_poisons_and_nothing_hangs() {
    panic_in_the_background(Trapped::Filter, false);
}

#[test]
fn a_comparator_panicking_in_a_compaction_poisons_and_nothing_hangs() {
    panic_in_the_background(Trapped::Comparator, true);
}

#[test]
fn a_panic_in_a_read_poisons_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let trap = Arc::new(Trap::default());
    let db = open(dir.path(), &trap, Trapped::Comparator);
    fill(&db, 0, 100);
    trap.armed.store(true, SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| db.get(BOMB)));
    assert!(r.is_err(), "the read's comparison did not panic");
    trap.armed.store(false, SeqCst);
    db.put(BOMB, b"fine").unwrap();
    assert_eq!(db.get(BOMB).unwrap().as_deref(), Some(&b"fine"[..]));
    watchdog("dropping the database", move || drop(db));
}

#[test]
fn a_poisoned_database_reopens_with_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let trap = Arc::new(Trap::default());
    let db = open(dir.path(), &trap, Trapped::Filter);
    fill(&db, 0, 300);
    db.put(BOMB, b"x").unwrap();
    trap.armed.store(true, SeqCst);
    let e = watchdog("a flush that panics", move || {
        let e = db.compact_range(None, None).unwrap_err();
        drop(db);
        e
    });
    assert!(matches!(e, Error::Poisoned(_)), "{e}");
    trap.armed.store(false, SeqCst);
    let db = open(dir.path(), &trap, Trapped::Filter);
    assert_eq!(db.scan().unwrap().count(), 301);
}

#[test]
fn close_of_a_poisoned_database_returns_poisoned_and_releases_it() {
    let dir = tempfile::tempdir().unwrap();
    let trap = Arc::new(Trap::default());
    let db = open(dir.path(), &trap, Trapped::Filter);
    fill(&db, 0, 300);
    db.put(BOMB, b"x").unwrap();
    trap.armed.store(true, SeqCst);
    let e = watchdog("a flush that panics, then close", move || {
        assert!(db.compact_range(None, None).is_err());
        db.close().unwrap_err()
    });
    assert!(matches!(e, Error::Poisoned(_)), "{e}");
    trap.armed.store(false, SeqCst);
    let db = open(dir.path(), &trap, Trapped::Filter);
    assert_eq!(db.get(BOMB).unwrap().as_deref(), Some(&b"x"[..]));
    db.close().unwrap();
}
