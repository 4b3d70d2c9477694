// SPDX-License-Identifier: MIT OR Apache-2.0
//! Many threads on one database: writers committing batches, readers checking that every view
//! they get is one consistent state, snapshot readers checking repeatable reads, an iterator
//! checking order and atomicity, and a thread forcing compactions. A watchdog fails the test if
//! it does not finish in time (a deadlock).
//!
//! Each writer's batch sets the three keys `w<t>/a`, `w<t>/b`, `w<t>/c` to the same counter
//! value, and a log key `w<t>/log/<counter>`. Any consistent state shows the three keys equal.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use strata::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

const WRITERS: u64 = 3;

fn triple(db: &Db, ro: &ReadOptions<'_>, t: u64) -> [Option<Vec<u8>>; 3] {
    ["a", "b", "c"].map(|k| db.get_opt(format!("w{t}/{k}").as_bytes(), ro).unwrap())
}

#[test]
fn concurrent_writers_readers_snapshots_iterators_and_compactions_stay_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 1 << 20,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = mpsc::channel::<&'static str>();
    let mut handles = Vec::new();

    for t in 0..WRITERS {
        let (db, stop, committed, done) =
            (db.clone(), stop.clone(), committed.clone(), done_tx.clone());
        handles.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let v = n.to_be_bytes();
                let mut b = WriteBatch::new();
                for k in ["a", "b", "c"] {
                    b.put(format!("w{t}/{k}").as_bytes(), v);
                }
                b.put(format!("w{t}/log/{n:08}").as_bytes(), [7u8; 200]);
                db.write_opt(
                    b,
                    &WriteOptions {
                        sync: n.is_multiple_of(50),
                    },
                )
                .unwrap();
                committed.fetch_add(1, Ordering::Relaxed);
            }
            done.send("writer").unwrap();
        }));
    }
    // Latest-state readers: the triple is equal at every read... within one snapshot.
    for _ in 0..2 {
        let (db, stop, done) = (db.clone(), stop.clone(), done_tx.clone());
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let snapshot = db.snapshot();
                let ro = ReadOptions {
                    snapshot: Some(&snapshot),
                    ..ReadOptions::default()
                };
                for t in 0..WRITERS {
                    let first = triple(&db, &ro, t);
                    assert!(
                        first[0] == first[1] && first[1] == first[2],
                        "torn batch {first:?}"
                    );
                    // Repeatable: the same snapshot gives the same answer later.
                    std::thread::yield_now();
                    assert_eq!(triple(&db, &ro, t), first, "snapshot read changed");
                }
            }
            done.send("reader").unwrap();
        }));
    }
    // An iterator: keys in order, and each writer's triple equal within the scan.
    {
        let (db, stop, done) = (db.clone(), stop.clone(), done_tx.clone());
        handles.push(std::thread::spawn(move || {
            let mut scans = 0;
            while !stop.load(Ordering::Relaxed) || scans < 3 {
                let mut previous: Option<Vec<u8>> = None;
                let mut triples = std::collections::HashMap::new();
                let mut logs = vec![0u64; WRITERS as usize];
                for item in db.scan().unwrap() {
                    let (k, v) = item.unwrap();
                    if let Some(p) = &previous {
                        assert!(p < &k, "scan out of order");
                    }
                    let s = String::from_utf8(k.clone()).unwrap();
                    let t: usize = s[1..2].parse().unwrap();
                    if s.contains("/log/") {
                        logs[t] += 1;
                    } else {
                        triples.entry(t).or_insert_with(Vec::new).push(v);
                    }
                    previous = Some(k);
                }
                for (t, vs) in triples {
                    assert!(vs.windows(2).all(|w| w[0] == w[1]), "torn batch in a scan");
                    // The counter equals the number of log keys the same scan saw.
                    let n = u64::from_be_bytes(vs[0].clone().try_into().unwrap());
                    assert_eq!(n, logs[t], "scan saw part of a batch");
                }
                scans += 1;
            }
            done.send("iterator").unwrap();
        }));
    }
    // Compactions, forced.
    {
        let (db, stop, done) = (db.clone(), stop.clone(), done_tx.clone());
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.compact_range(None, None).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
            done.send("compactor").unwrap();
        }));
    }
    drop(done_tx);

    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    // Watchdog: every thread must finish soon after being told to stop.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut finished = 0;
    while finished < handles.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(_) => finished += 1,
            Err(e) => panic!(
                "deadlock: only {finished} of {} threads finished ({e})",
                handles.len()
            ),
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    let total = committed.load(Ordering::Relaxed);
    assert!(total > 100, "only {total} batches committed");
    // Every committed batch is there.
    let logs = db
        .scan()
        .unwrap()
        .filter(|i| i.as_ref().unwrap().0.windows(5).any(|w| w == b"/log/"))
        .count() as u64;
    assert_eq!(logs, total);
}

/// With a row cache: every write is seen by the writer's next read of it (read-your-writes),
/// and no reader ever sees a key go back to an older value, while readers keep filling the
/// cache with the keys the writer overwrites and a thread forces compactions. Fails if a
/// write acknowledged before a read can leave a stale cached answer behind.
#[test]
fn row_cache_answers_follow_every_acknowledged_write() {
    const KEYS: u64 = 16;
    const WRITES: u64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        row_cache_capacity: 1 << 20,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let key = |k: u64| format!("key{k:02}").into_bytes();
    let decode = |v: &[u8]| u64::from_be_bytes(v[..8].try_into().unwrap());
    for k in 0..KEYS {
        db.put(key(k), 0u64.to_be_bytes()).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2 {
        let (db, stop) = (db.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut last = [0u64; KEYS as usize];
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for k in 0..KEYS {
                    let v = decode(&db.get(key(k)).unwrap().expect("a written key"));
                    assert!(
                        v >= last[k as usize],
                        "reader {r}: key {k} went back from {} to {v}",
                        last[k as usize]
                    );
                    last[k as usize] = v;
                    reads += 1;
                }
            }
            reads
        }));
    }
    let compactor = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.compact_range(None, None).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    for i in 1..=WRITES {
        let k = i % KEYS;
        let mut value = i.to_be_bytes().to_vec();
        value.resize(100, b'x');
        if i % 7 == 0 {
            let mut batch = WriteBatch::new();
            batch.put(key(k), &value);
            batch.put(key((k + 1) % KEYS), &value);
            db.write(batch).unwrap();
        } else {
            db.put(key(k), &value).unwrap();
        }
        let got = decode(&db.get(key(k)).unwrap().unwrap());
        assert_eq!(
            got, i,
            "the writer's read of key {k} right after writing it"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    compactor.join().unwrap();
    assert!(reads > 0);
    let rows = db.stats().row_cache.expect("the row cache is on");
    assert!(
        rows.hit_count > 0,
        "the row cache answered nothing: {rows:?}"
    );
}
