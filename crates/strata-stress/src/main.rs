// SPDX-License-Identifier: MIT OR Apache-2.0
//! `crashloop`: kills a process that writes to a strata database with SIGKILL at random
//! moments, again and again, and checks after each kill that the database opens and holds
//! every write the process acknowledged.
//!
//! ```text
//! crashloop [--cycles N] [--dir DIR] [--seed S] [--max-run-ms MS]
//! ```
//!
//! Each cycle starts a child (this binary, `crashloop child ...`) on the same database. The
//! child runs three writers, each on its own keys, and prints a line for every write once the
//! write call has returned (its acknowledgement); the parent reads these lines as they come:
//! - writer 0: single puts, every one with `sync`;
//! - writer 1: batches of two keys set to the same value, without `sync`;
//! - writer 2: puts without `sync`, one in ten with it, one in fifty of 20 KiB;
//!
//! and, beside them, a reader, an iterator walking the whole database, and a snapshot holder
//! reading keys twice through an old snapshot: each checks what it sees and makes the child
//! exit with status 2 if anything is wrong. After a random time the parent kills the child,
//! reopens the database itself and checks every writer: writes are numbered, and write `n`
//! sets key slot `n % SLOTS` to `n`, so the database must hold every write up to the last one
//! acknowledged (a process kill loses nothing the process was told was written; at most the
//! one write in flight may be there too), with no hole: every slot holds the newest write
//! number that maps to it.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use strata::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
// splitmix64, the one strata's tests use.
use strata_testkit::splitmix64 as mix;

/// Key slots per writer: write `n` overwrites slot `n % SLOTS`.
const SLOTS: u64 = 500;
const WRITERS: usize = 3;

fn options() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 256 << 10,
        max_file_size: 512 << 10,
        ..Options::default()
    }
}

fn slot_key(writer: usize, slot: u64, part: &str) -> Vec<u8> {
    format!("w{writer}/{slot:04}{part}").into_bytes()
}

fn value(n: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{n}:").into_bytes();
    v.resize(v.len() + len, b'.');
    v
}

fn parse_value(v: &[u8]) -> Option<u64> {
    let colon = v.iter().position(|&b| b == b':')?;
    std::str::from_utf8(&v[..colon]).ok()?.parse().ok()
}

/// The keys write `n` of `writer` sets.
fn keys_of(writer: usize, n: u64) -> Vec<Vec<u8>> {
    let slot = n % SLOTS;
    if writer == 1 {
        vec![slot_key(1, slot, "a"), slot_key(1, slot, "b")]
    } else {
        vec![slot_key(writer, slot, "")]
    }
}

/// Performs write `n` of `writer`.
fn write(db: &Db, writer: usize, n: u64) -> strata::Result<()> {
    match writer {
        0 => db.put_opt(
            &keys_of(0, n)[0],
            value(n, 16),
            &WriteOptions { sync: true },
        ),
        1 => {
            let mut batch = WriteBatch::new();
            for key in keys_of(1, n) {
                batch.put(&key, value(n, 32));
            }
            db.write(batch)
        }
        _ => {
            let len = if n.is_multiple_of(50) { 20 << 10 } else { 64 };
            let sync = n.is_multiple_of(10);
            db.put_opt(&keys_of(2, n)[0], value(n, len), &WriteOptions { sync })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The child.

fn violation(what: String) -> ! {
    eprintln!("crashloop child: VIOLATION: {what}");
    std::process::exit(2);
}

fn child(dir: &Path, seed: u64, starts: &[u64]) -> ExitCode {
    let db = match Db::open(dir, options()) {
        Ok(db) => Arc::new(db),
        Err(e) => {
            eprintln!("crashloop child: open failed: {e}");
            return ExitCode::from(3);
        }
    };
    let acked: Arc<Vec<AtomicU64>> = Arc::new(starts.iter().map(|&s| AtomicU64::new(s)).collect());
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let mut handles = Vec::new();
    for (writer, &start) in starts.iter().enumerate() {
        let (db, out, acked) = (db.clone(), out.clone(), acked.clone());
        handles.push(thread::spawn(move || {
            for n in start.. {
                if let Err(e) = write(&db, writer, n) {
                    violation(format!("writer {writer}: write {n} failed: {e}"));
                }
                acked[writer].store(n + 1, Ordering::SeqCst);
                let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                if writeln!(out, "{writer} {n}")
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    return;
                }
            }
        }));
    }
    // A reader: a slot never goes back to an older write.
    {
        let (db, acked) = (db.clone(), acked.clone());
        handles.push(thread::spawn(move || {
            let mut seen = vec![0u64; WRITERS * SLOTS as usize];
            let mut x = seed;
            loop {
                x = mix(x);
                let writer = (x % WRITERS as u64) as usize;
                let slot = (x >> 8) % SLOTS;
                let floor = acked[writer].load(Ordering::SeqCst);
                let key = &keys_of(writer, slot)[0];
                match db.get(key) {
                    Ok(Some(v)) => {
                        let n = parse_value(&v).unwrap_or_else(|| violation("a bad value".into()));
                        let last = &mut seen[writer * SLOTS as usize + slot as usize];
                        if n < *last {
                            violation(format!("{key:?} went back from {last} to {n}"));
                        }
                        *last = n;
                        // The newest write acknowledged to this slot before the read began.
                        if floor > slot {
                            let newest = floor - 1 - ((floor - 1 - slot) % SLOTS);
                            if n < newest {
                                violation(format!("{key:?} holds {n}, {newest} was acknowledged"));
                            }
                        }
                    }
                    Ok(None) if floor > slot => {
                        violation(format!("{key:?} missing after {floor} writes"))
                    }
                    Ok(None) => {}
                    Err(e) => violation(format!("get failed: {e}")),
                }
            }
        }));
    }
    // An iterator over the whole database: keys ascend, batches are whole.
    {
        let db = db.clone();
        handles.push(thread::spawn(move || loop {
            let mut previous: Option<Vec<u8>> = None;
            let mut pair: Option<(Vec<u8>, u64)> = None;
            let scan = db
                .scan()
                .unwrap_or_else(|e| violation(format!("scan: {e}")));
            for item in scan {
                let (k, v) = item.unwrap_or_else(|e| violation(format!("scan: {e}")));
                if previous.as_ref().is_some_and(|p| *p >= k) {
                    violation(format!("scan order broken at {k:?}"));
                }
                if k.starts_with(b"w1/") {
                    let n = parse_value(&v).unwrap_or_else(|| violation("a bad value".into()));
                    let stem = k[..k.len() - 1].to_vec();
                    match pair.take() {
                        Some((s, m)) if s == stem && m != n => {
                            violation(format!("half a batch: {stem:?} holds {m} and {n}"))
                        }
                        Some((s, _)) if s == stem => {}
                        _ => pair = Some((stem, n)),
                    }
                }
                previous = Some(k);
            }
        }));
    }
    // A snapshot holder: reads through an old snapshot repeat.
    {
        let db = db.clone();
        handles.push(thread::spawn(move || loop {
            let snapshot = db.snapshot();
            let read = ReadOptions {
                snapshot: Some(&snapshot),
                ..ReadOptions::default()
            };
            let keys: Vec<Vec<u8>> = (0..20).map(|s| keys_of(2, s * 7)[0].clone()).collect();
            let first: Vec<_> = keys
                .iter()
                .map(|k| db.get_opt(k, &read).ok().flatten())
                .collect();
            thread::sleep(Duration::from_millis(5));
            let second: Vec<_> = keys
                .iter()
                .map(|k| db.get_opt(k, &read).ok().flatten())
                .collect();
            if first != second {
                violation("a read through a snapshot changed".into());
            }
        }));
    }
    for h in handles {
        let _ = h.join();
    }
    ExitCode::SUCCESS
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// Checks one writer's keys after a kill; returns how many of its writes the database holds.
fn check_writer(db: &Db, writer: usize, acked: u64) -> Result<u64, String> {
    let mut newest = 0u64;
    let mut values = vec![None; SLOTS as usize];
    for slot in 0..SLOTS {
        let mut found = None;
        for key in keys_of(writer, slot) {
            let got = db
                .get(&key)
                .map_err(|e| format!("get {key:?}: {e}"))?
                .map(|v| parse_value(&v).ok_or(format!("bad value under {key:?}")))
                .transpose()?;
            match (found, got) {
                (None, g) => found = Some(g),
                (Some(f), g) if f != g => {
                    return Err(format!(
                        "writer {writer} slot {slot}: half a batch ({f:?}, {g:?})"
                    ))
                }
                _ => {}
            }
        }
        let got = found.flatten();
        if let Some(n) = got {
            newest = newest.max(n + 1);
        }
        values[slot as usize] = got;
    }
    let held = newest;
    if held < acked || held > acked + 1 {
        return Err(format!(
            "writer {writer}: holds writes 0..{held}, but 0..{acked} were acknowledged"
        ));
    }
    for slot in 0..SLOTS {
        let expected = (held > slot).then(|| held - 1 - ((held - 1 - slot) % SLOTS));
        if values[slot as usize] != expected {
            return Err(format!(
                "writer {writer} slot {slot}: holds {:?}, expected {expected:?} (a hole)",
                values[slot as usize]
            ));
        }
    }
    Ok(held)
}

struct Args {
    cycles: u64,
    dir: Option<PathBuf>,
    seed: u64,
    max_run_ms: u64,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        cycles: 200,
        dir: None,
        seed: 1,
        max_run_ms: 300,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--cycles" => {
                parsed.cycles = value("--cycles")?
                    .parse()
                    .map_err(|e| format!("--cycles: {e}"))?
            }
            "--dir" => parsed.dir = Some(PathBuf::from(value("--dir")?)),
            "--seed" => {
                parsed.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--max-run-ms" => {
                parsed.max_run_ms = value("--max-run-ms")?
                    .parse()
                    .map_err(|e| format!("--max-run-ms: {e}"))?
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(parsed)
}

fn parent(args: Args) -> Result<(), String> {
    let temp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            temp = std::env::temp_dir().join(format!("crashloop-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&temp);
            temp.clone()
        }
    };
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut held = [0u64; WRITERS];
    let (mut total_acked, mut total_synced_writes) = (0u64, 0u64);
    let started = Instant::now();
    for cycle in 0..args.cycles {
        let seed = mix(args.seed ^ cycle);
        let starts = held.map(|h| h.to_string()).join(",");
        let mut child = Command::new(&exe)
            .args(["child", "--dir"])
            .arg(&dir)
            .args(["--seed", &seed.to_string(), "--start", &starts])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let acked = Arc::new(Mutex::new(held));
        let reader = {
            let acked = acked.clone();
            thread::spawn(move || {
                let mut lines = 0u64;
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let mut parts = line.split(' ');
                    let (Some(w), Some(n)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    if let (Ok(w), Ok(n)) = (w.parse::<usize>(), n.parse::<u64>()) {
                        let mut a = acked.lock().unwrap_or_else(|e| e.into_inner());
                        a[w] = a[w].max(n + 1);
                        lines += 1;
                    }
                }
                lines
            })
        };
        let run = Duration::from_millis(10 + mix(seed) % args.max_run_ms.max(1));
        thread::sleep(run);
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "cycle {cycle}: the child ended by itself ({status})"
            ));
        }
        child.kill().map_err(|e| format!("kill: {e}"))?;
        let _ = child.wait();
        let lines = reader.join().unwrap_or(0);
        total_acked += lines;
        let acked = *acked.lock().unwrap_or_else(|e| e.into_inner());
        total_synced_writes += acked[0] - held[0];

        let db = Db::open(&dir, options())
            .map_err(|e| format!("cycle {cycle}: the database does not open after a kill: {e}"))?;
        for writer in 0..WRITERS {
            held[writer] = check_writer(&db, writer, acked[writer])
                .map_err(|e| format!("cycle {cycle} (seed {seed}): {e}"))?;
        }
    }
    println!(
        "crashloop: {} cycles, {total_acked} acknowledged writes ({total_synced_writes} synced by \
         writer 0) checked after SIGKILL, {:.0} s; writers reached {held:?}",
        args.cycles,
        started.elapsed().as_secs_f64()
    );
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// `crashloop readall DIR`: opens the database and reads every entry, by a scan and by `get`s
/// in a random order, printing the count. The environment tests run it under a low open-file
/// limit.
fn readall(dir: &Path) -> ExitCode {
    let result = (|| -> strata::Result<u64> {
        let db = Db::open(dir, Options::default())?;
        let mut entries = Vec::new();
        for item in db.scan()? {
            entries.push(item?);
        }
        // Then every key twice, in a random order: lookups all over the tables, which would
        // keep every table open if nothing bounded them.
        let mut order: Vec<usize> = (0..entries.len()).collect();
        let mut x = 0x9e37_79b9_u64;
        for i in (1..order.len()).rev() {
            x = mix(x);
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for _ in 0..2 {
            for &i in &order {
                let (k, v) = &entries[i];
                if db.get(k)?.as_deref() != Some(&v[..]) {
                    return Err(strata::Error::corruption(dir, 0, "get disagrees with scan"));
                }
            }
        }
        Ok(entries.len() as u64)
    })();
    match result {
        Ok(count) => {
            println!("{count}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crashloop readall: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("readall") {
        return match args.get(1) {
            Some(dir) => readall(Path::new(dir)),
            None => ExitCode::from(2),
        };
    }
    if args.first().map(String::as_str) == Some("child") {
        let mut dir = None;
        let mut seed = 0;
        let mut starts = vec![0u64; WRITERS];
        let mut it = args[1..].iter();
        while let Some(a) = it.next() {
            match (a.as_str(), it.next()) {
                ("--dir", Some(d)) => dir = Some(PathBuf::from(d)),
                ("--seed", Some(s)) => seed = s.parse().unwrap_or(0),
                ("--start", Some(s)) => {
                    starts = s.split(',').map(|x| x.parse().unwrap_or(0)).collect();
                }
                _ => return ExitCode::from(2),
            }
        }
        let Some(dir) = dir else {
            return ExitCode::from(2);
        };
        return child(&dir, seed, &starts);
    }
    match parse_args(&args).and_then(parent) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crashloop: {e}");
            ExitCode::from(1)
        }
    }
}
