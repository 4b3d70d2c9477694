// SPDX-License-Identifier: MIT OR Apache-2.0
//! Crash-state enumeration on the in-memory env.
//!
//! Each workload runs once on a [`FaultEnv`] over a [`MemEnv`]. Before every file-system call
//! that changes something, the observer builds the states a crash at that moment could leave,
//! reopens each, and checks the contract:
//! - the database opens;
//! - it holds exactly the writes of a prefix of the issued order (each write is a batch that
//!   sets three keys, so a half-applied batch or a hole shows);
//! - the prefix holds every write acknowledged as synced, and, where the crash kept everything
//!   handed to the OS (a process kill), every write acknowledged at all.
//!
//! The crash states at each call:
//! - `kill`: everything handed to the env survives (the process died);
//! - `power`: only synced bytes and synced directory entries survive;
//! - `data-lost`: only synced bytes survive, directory changes all do;
//! - `partial`: each file keeps its synced bytes and a random part of the rest, directory
//!   changes undone or not (alternating);
//! - `torn`, `zeroed` and `garbled`, at an append: everything before it survives, and the
//!   append itself is cut short at any byte, or cut at a sector boundary with the rest of that
//!   512-byte sector zeros or stale garbage (disks write whole sectors).
//!
//! `STRATA_CRASH_SCALE=N` multiplies the length of every workload for long runs.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use strata::env::{FaultEnv, FileOp, OpKind};
use strata::{CrashMode, Db, Env, MemEnv, Options, WriteOptions};

use common::splitmix64;
use common::writes::{batch, fingerprints, recovered_prefix, Shape};
use strata_testkit as common;

const DIR: &str = "/db";

fn scale() -> u64 {
    std::env::var("STRATA_CRASH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// How far the workload got, as the observer reads it at a crash point.
#[derive(Default)]
struct Progress {
    /// Writes started: the recovered prefix is at most this long.
    issued: AtomicU64,
    /// Writes acknowledged.
    acked: AtomicU64,
    /// One past the last write acknowledged as synced.
    synced: AtomicU64,
}

#[derive(Clone, Copy)]
struct Workload {
    name: &'static str,
    writes: u64,
    shape: Shape,
    reuse_logs: bool,
    /// Builds the starting state (not watched), returning the writes it acknowledged (all
    /// synced).
    setup: fn(&Harness) -> u64,
    /// The watched part.
    run: fn(&Harness, u64),
    /// How an image is brought back: open, or repair then open.
    repair_first: bool,
    /// Key-value separation on: values of 40 bytes or more go to blob files.
    blobs: bool,
}

/// What a workload runs with.
struct Harness {
    env: FaultEnv<MemEnv>,
    mem: MemEnv,
    progress: Arc<Progress>,
    shape: Shape,
    reuse_logs: bool,
    blobs: bool,
}

fn options(env: Arc<dyn Env>, reuse_logs: bool, blobs: bool) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 64 << 10,
        block_size: 1024,
        reuse_logs,
        blob_threshold: blobs.then_some(40),
        blob_file_size: 1 << 20,
        ..Options::default()
    }
    .with_env(env)
}

impl Harness {
    fn options(&self) -> Options {
        options(Arc::new(self.env.clone()), self.reuse_logs, self.blobs)
    }

    fn open(&self) -> Db {
        Db::open(DIR, self.options()).expect("open the database under test")
    }

    /// Write `i`, synced or not, recording its progress.
    fn write(&self, db: &Db, i: u64, sync: bool) {
        self.progress.issued.store(i + 1, Ordering::SeqCst);
        db.write_opt(batch(i, self.shape), &WriteOptions { sync })
            .expect("write");
        self.progress.acked.store(i + 1, Ordering::SeqCst);
        if sync {
            self.progress.synced.store(i + 1, Ordering::SeqCst);
        }
    }
}

/// Opens the database and makes writes `0..n`, synced where `sync(i)`.
fn writes(h: &Harness, n: u64, sync: fn(u64) -> bool) {
    let db = h.open();
    for i in 0..n {
        h.write(&db, i, sync(i));
    }
}

fn no_setup(_: &Harness) -> u64 {
    0
}

/// Writes `0..n` synced, with the observer off, and closes the database.
fn synced_setup(h: &Harness, n: u64) -> u64 {
    let db = h.open();
    for i in 0..n {
        h.write(&db, i, true);
    }
    n
}

fn workloads() -> Vec<Workload> {
    let s = scale();
    vec![
        Workload {
            name: "put with sync",
            writes: 200 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| writes(h, n, |_| true),
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "unsynced puts, every tenth synced",
            writes: 400 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| writes(h, n, |i| i % 10 == 9),
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "large batches spanning log blocks",
            writes: 60 * s,
            shape: Shape::Big,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| writes(h, n, |i| i % 4 == 0),
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "memtable flushes and log rotation",
            writes: 700 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| writes(h, n, |i| i % 50 == 0),
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "range deletions across flushes and compactions",
            writes: 500 * s,
            shape: Shape::Ranges,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| {
                let db = h.open();
                for i in 0..n {
                    h.write(&db, i, i % 25 == 0);
                    if i % 200 == 199 {
                        db.compact_range(None, None).expect("compact");
                    }
                }
            },
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "compaction and file deletion",
            writes: 400 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: |h| synced_setup(h, 400 * scale()),
            run: |h, start| {
                let db = h.open();
                db.compact_range(None, None).expect("compact");
                for i in start..start + 50 {
                    h.write(&db, i, i % 10 == 0);
                }
                db.compact_range(None, None).expect("compact");
            },
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "reopen: MANIFEST rollover and CURRENT switch",
            writes: 90 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| {
                for round in 0..3 {
                    let db = h.open();
                    for i in round * n / 3..(round + 1) * n / 3 {
                        h.write(&db, i, i % 3 == 0);
                    }
                }
                drop(h.open());
            },
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "reopen with reuse_logs",
            writes: 90 * s,
            shape: Shape::Small,
            reuse_logs: true,
            setup: no_setup,
            run: |h, n| {
                for round in 0..3 {
                    let db = h.open();
                    for i in round * n / 3..(round + 1) * n / 3 {
                        h.write(&db, i, i % 4 == 0);
                    }
                }
                drop(h.open());
            },
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "recovery itself: replaying logs into tables",
            writes: 500 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: |h| synced_setup(h, 500 * scale()),
            run: |h, start| {
                let db = h.open();
                for i in start..start + 10 {
                    h.write(&db, i, i % 2 == 0);
                }
            },
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "write batches of 34 operations",
            writes: 200 * s,
            shape: Shape::Wide,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| writes(h, n, |i| i % 5 == 0),
            repair_first: false,
            blobs: false,
        },
        Workload {
            name: "repair after a MANIFEST record is damaged",
            writes: 300 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: |h| {
                let n = synced_setup(h, 300 * scale());
                let manifest = h
                    .mem
                    .children(Path::new(DIR))
                    .unwrap()
                    .into_iter()
                    .find(|name| name.starts_with("MANIFEST-"))
                    .unwrap();
                let path = Path::new(DIR).join(manifest);
                let mut bytes = strata::env::read_file_to_vec(&h.mem, &path).unwrap();
                bytes[20] ^= 0x10;
                strata::env::write_file(&h.mem, &path, &bytes, true).unwrap();
                n
            },
            run: |h, _| {
                strata::repair(DIR, &h.options()).expect("repair");
            },
            repair_first: true,
            blobs: false,
        },
        Workload {
            name: "repair after CURRENT is lost",
            writes: 400 * s,
            shape: Shape::Small,
            reuse_logs: false,
            setup: |h| {
                let n = synced_setup(h, 400 * scale());
                h.mem.remove_file(Path::new("/db/CURRENT")).unwrap();
                n
            },
            run: |h, _| {
                strata::repair(DIR, &h.options()).expect("repair");
            },
            repair_first: true,
            blobs: false,
        },
        // Key-value separation: values of 40 bytes and more (a third of the small ones, and
        // every fifth write's 40 KiB) go to blob files. Crashes fall between a value's append
        // and its pointer's log record, and tear appended values and pointers.
        Workload {
            name: "blobs: synced and unsynced values in blob files",
            writes: 80 * s,
            shape: Shape::Big,
            reuse_logs: false,
            setup: no_setup,
            run: |h, n| writes(h, n, |i| i % 4 == 0),
            repair_first: false,
            blobs: true,
        },
        Workload {
            name: "blobs: blob file switches, flushes and compaction",
            writes: 60 * s,
            shape: Shape::Big,
            reuse_logs: false,
            setup: |h| synced_setup(h, 100 * scale()),
            run: |h, start| {
                let db = h.open();
                for i in start..start + 60 * scale() {
                    h.write(&db, i, i % 25 == 0);
                }
                db.compact_range(None, None).expect("compact");
            },
            repair_first: false,
            blobs: true,
        },
        Workload {
            name: "blobs: a blob file rewritten by garbage collection",
            writes: 40 * s,
            shape: Shape::Big,
            reuse_logs: false,
            setup: |h| synced_setup(h, 100 * scale()),
            // Every fifth write sets `last` to 40 KiB: once compacted, all but the newest are
            // garbage, and their blob files are rewritten (by this call or the collector).
            run: |h, start| {
                let db = h.open();
                for i in start..start + 40 * scale() {
                    h.write(&db, i, i % 10 == 0);
                }
                db.compact_range(None, None).expect("compact");
                let listed = blob_file_numbers(&db);
                db.collect_blob_garbage().expect("collect blob garbage");
                let started = std::time::Instant::now();
                // A rewritten file leaves the version (no snapshot holds it).
                while listed.iter().all(|n| blob_file_numbers(&db).contains(n)) {
                    assert!(
                        started.elapsed().as_secs() < 10,
                        "no blob file was rewritten: {listed:?}"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            },
            repair_first: false,
            blobs: true,
        },
    ]
}

/// The blob files the database's current version lists.
fn blob_file_numbers(db: &Db) -> Vec<u64> {
    db.blob_files()
        .into_iter()
        .filter(|f| f.garbage_bytes.is_some())
        .map(|f| f.number)
        .collect()
}

/// One crash state to check: the image, and the least prefix it must hold.
struct CrashState {
    mode: &'static str,
    image: MemEnv,
    must_hold: u64,
}

fn crash_states(mem: &MemEnv, op: &FileOp<'_>, progress: &Progress) -> Vec<CrashState> {
    let acked = progress.acked.load(Ordering::SeqCst);
    let synced = progress.synced.load(Ordering::SeqCst);
    let seed = splitmix64(op.index);
    let mut states = vec![
        CrashState {
            mode: "kill",
            image: mem.crash_clone(CrashMode::PROCESS_KILL),
            must_hold: acked,
        },
        CrashState {
            mode: "power",
            image: mem.crash_clone(CrashMode::POWER_LOSS),
            must_hold: synced,
        },
        CrashState {
            mode: "data-lost",
            image: mem.crash_clone(CrashMode {
                drop_unsynced_data: true,
                undo_unsynced_dir_ops: false,
            }),
            must_hold: synced,
        },
    ];
    let mut n = 0u64;
    let partial = mem.crash_clone_with(seed.is_multiple_of(2), &mut |_, bytes, synced_len| {
        n += 1;
        let unsynced = (bytes.len() - synced_len) as u64;
        let keep = synced_len + (splitmix64(seed ^ n) % (unsynced + 1)) as usize;
        bytes[..keep].to_vec()
    });
    states.push(CrashState {
        mode: "partial",
        image: partial,
        must_hold: synced,
    });
    if let (OpKind::Append, Some(data)) = (op.kind, op.data) {
        if data.len() > 1 {
            // A write cut short at any byte.
            let cut = 1 + (seed % (data.len() as u64 - 1)) as usize;
            states.push(CrashState {
                mode: "torn",
                image: appended(mem, op.path, &data[..cut]),
                must_hold: acked,
            });
        }
        // A write cut at a sector boundary, the rest of that sector stale: zeros or garbage.
        let base = mem.file_size(op.path).unwrap_or(0);
        let end = base + data.len() as u64;
        let first_boundary = (base / SECTOR + 1) * SECTOR;
        if first_boundary < end {
            let boundaries = (end - 1 - first_boundary) / SECTOR + 1;
            let boundary = first_boundary + (seed % boundaries) * SECTOR;
            let mut bytes = data[..(boundary - base) as usize].to_vec();
            let zeros = seed.is_multiple_of(3);
            bytes.extend((0..SECTOR).map(|j| if zeros { 0 } else { splitmix64(seed ^ j) as u8 }));
            states.push(CrashState {
                mode: if zeros { "zeroed" } else { "garbled" },
                image: appended(mem, op.path, &bytes),
                must_hold: acked,
            });
        }
    }
    states
}

/// The unit a disk writes whole.
const SECTOR: u64 = 512;

/// A process-kill image of `mem` with `tail` appended to `path`.
fn appended(mem: &MemEnv, path: &Path, tail: &[u8]) -> MemEnv {
    let image = mem.crash_clone(CrashMode::PROCESS_KILL);
    let mut file = image.new_appendable_file(path).unwrap();
    file.append(tail).unwrap();
    file.sync().unwrap();
    image
}

/// Reopens `state` and checks the contract; `Err` describes a breach.
fn check_state(
    state: &CrashState,
    workload: &Workload,
    issued: u64,
    prints: &[u64],
) -> Result<(), String> {
    let env: Arc<dyn Env> = Arc::new(state.image.clone());
    let opts = options(env, workload.reuse_logs, workload.blobs);
    let db = match Db::open(DIR, opts.clone()) {
        Ok(db) => db,
        Err(e) if workload.repair_first => {
            strata::repair(DIR, &opts)
                .map_err(|r| format!("open failed ({e}); repair too: {r}"))?;
            Db::open(DIR, opts).map_err(|e| format!("open after repair: {e}"))?
        }
        Err(e) => return Err(format!("open failed: {e}")),
    };
    let (k, hash) = recovered_prefix(&db)?;
    if k < state.must_hold {
        return Err(format!(
            "holds writes 0..{k}, but 0..{} were acknowledged{}",
            state.must_hold,
            if ["kill", "torn", "zeroed", "garbled"].contains(&state.mode) {
                ""
            } else {
                " as synced"
            }
        ));
    }
    if k > issued {
        return Err(format!(
            "holds writes 0..{k}, but only {issued} were issued"
        ));
    }
    if prints[k as usize] != hash {
        return Err(format!(
            "holds write {} as the last, but not exactly writes 0..{k}: a hole or half a batch",
            k.saturating_sub(1)
        ));
    }
    Ok(())
}

/// Runs one workload with the observer on; returns the crash states checked and the breaches.
fn enumerate(workload: &Workload) -> (u64, Vec<String>) {
    let mem = MemEnv::new();
    let harness = Harness {
        env: FaultEnv::new(mem.clone()),
        mem: mem.clone(),
        progress: Arc::new(Progress::default()),
        shape: workload.shape,
        reuse_logs: workload.reuse_logs,
        blobs: workload.blobs,
    };
    let start = (workload.setup)(&harness);
    let total = start + workload.writes + 100;
    let prints = Arc::new(fingerprints(total, workload.shape));
    let checked = Arc::new(AtomicU64::new(0));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let (progress, checked, failures, prints) = (
            harness.progress.clone(),
            checked.clone(),
            failures.clone(),
            prints.clone(),
        );
        let workload_copy = *workload;
        harness
            .env
            .set_observer(Some(Arc::new(move |op: &FileOp<'_>| {
                let issued = progress.issued.load(Ordering::SeqCst).max(start);
                for state in crash_states(&mem, op, &progress) {
                    checked.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = check_state(&state, &workload_copy, issued, &prints) {
                        let mut f = failures.lock().unwrap();
                        if f.len() < 20 {
                            f.push(format!(
                                "{}: crash at call {} ({:?} {}), {}: {e}",
                                workload_copy.name,
                                op.index,
                                op.kind,
                                op.path.display(),
                                state.mode
                            ));
                        }
                    }
                }
            })));
    }
    let written = if start > 0 { start } else { workload.writes };
    (workload.run)(&harness, written);
    harness.env.set_observer(None);
    let failures = failures.lock().unwrap().clone();
    (checked.load(Ordering::Relaxed), failures)
}

/// Runs the workloads whose index `pick` takes; returns the crash states checked. The
/// workloads are split between two tests so that they run on two threads.
fn check_workloads(pick: impl Fn(usize) -> bool) -> u64 {
    let mut total = 0;
    let mut failures = Vec::new();
    for (i, workload) in workloads().into_iter().enumerate() {
        if !pick(i) {
            continue;
        }
        let started = std::time::Instant::now();
        let (states, broken) = enumerate(&workload);
        eprintln!(
            "{}: {states} crash states checked in {:.1} s",
            workload.name,
            started.elapsed().as_secs_f64()
        );
        total += states;
        failures.extend(broken);
    }
    eprintln!("crash states checked: {total}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    total
}

#[test]
fn every_crash_state_of_the_even_workloads_keeps_the_contract() {
    let total = check_workloads(|i| i % 2 == 0);
    assert!(total >= 15_000 * scale(), "only {total} crash states");
}

#[test]
fn every_crash_state_of_the_odd_workloads_keeps_the_contract() {
    let total = check_workloads(|i| i % 2 == 1);
    assert!(total >= 15_000 * scale(), "only {total} crash states");
}
