// SPDX-License-Identifier: MIT OR Apache-2.0
//! I/O errors injected at every mutating file-system call of a workload, in each way a disk
//! fails (`EIO`, `ENOSPC`, a short write, a failed sync), once and from then on.
//!
//! The workload opens a database, writes numbered batches (every fifth synced) with a
//! compaction in the middle, closes it, reopens it and writes more. For every call index and
//! fault, a fresh run checks the contract:
//! - every failure is an error returned to the caller, never a panic (in any thread);
//! - once a write has failed, the handle accepts no more writes (reads go on);
//! - a failed log is never appended to again, and a failed sync is never retried
//!   ([`FaultEnv::violations`]);
//! - the database then opens on the same files without faults, and holds exactly a prefix of
//!   the writes that includes every acknowledged one; after a power loss, every one
//!   acknowledged as synced.
//!
//! `STRATA_FAULT_STRIDE=N` tries every Nth call only (default 1: every call).

use strata_testkit as common;

use std::sync::Arc;

use common::writes::{batch, fingerprints, recovered_prefix, Shape};
use strata::env::{FaultEnv, FaultKind, FaultPlan};
use strata::{CrashMode, Db, Env, Error, MemEnv, Options, WriteOptions};

const DIR: &str = "/db";
const ROUNDS: u64 = 2;
const WRITES_PER_ROUND: u64 = 40;

fn options(env: Arc<dyn Env>) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 64 << 10,
        block_size: 1024,
        ..Options::default()
    }
    .with_env(env)
}

/// What one run of the workload saw.
#[derive(Default, Debug)]
struct Outcome {
    issued: u64,
    acked: u64,
    synced: u64,
    errors: u64,
    breaches: Vec<String>,
}

fn run_workload(env: &FaultEnv<MemEnv>) -> Outcome {
    let mut out = Outcome::default();
    for _round in 0..ROUNDS {
        let db = match Db::open(DIR, options(Arc::new(env.clone()))) {
            Ok(db) => db,
            Err(e) => {
                out.errors += 1;
                check_error(&e, &mut out);
                continue;
            }
        };
        let mut failed = false;
        for j in 0..WRITES_PER_ROUND {
            // A failed write is written again after the reopen: whether or not it reached the
            // log, the database then holds a prefix of the numbered writes.
            let i = out.acked;
            let sync = i % 5 == 0;
            out.issued = out.issued.max(i + 1);
            match db.write_opt(batch(i, Shape::Small), &WriteOptions { sync }) {
                Ok(()) if failed => {
                    out.breaches
                        .push(format!("write {i} accepted after a failed write"));
                }
                Ok(()) => {
                    out.acked = i + 1;
                    if sync {
                        out.synced = i + 1;
                    }
                }
                Err(e) => {
                    if std::env::var("STRATA_FAULT_AT").is_ok() {
                        eprintln!("write {i}: {e}");
                    }
                    failed = true;
                    out.errors += 1;
                    check_error(&e, &mut out);
                    // Nothing later in this round can be acknowledged: stop issuing.
                    break;
                }
            }
            if j == WRITES_PER_ROUND / 2 {
                if let Err(e) = db.compact_range(None, None) {
                    if std::env::var("STRATA_FAULT_AT").is_ok() {
                        eprintln!("compact_range after write {i}: {e}");
                    }
                    out.errors += 1;
                    check_error(&e, &mut out);
                }
            }
        }
        if failed {
            // Reads go on after a failed write.
            if let Err(e) = db.get(b"last") {
                out.breaches
                    .push(format!("a read failed after a failed write: {e}"));
            }
            let mut b = strata::WriteBatch::new();
            b.put(b"after", b"failure");
            if db.write(b).is_ok() {
                out.breaches
                    .push("a write was accepted after a failed write".into());
            }
        }
    }
    out
}

/// An injected failure must come back as an I/O error naming a file.
fn check_error(e: &Error, out: &mut Outcome) {
    match e {
        Error::Io { path, .. } if !path.as_os_str().is_empty() => {}
        other => out.breaches.push(format!("unexpected error: {other}")),
    }
}

/// Opens `image` without faults and checks that it holds a prefix of at least `least` writes
/// and at most `most`.
fn check_reopen(image: MemEnv, least: u64, most: u64, prints: &[u64]) -> Result<(), String> {
    let db = Db::open(DIR, options(Arc::new(image))).map_err(|e| format!("reopen: {e}"))?;
    let (k, hash) = recovered_prefix(&db)?;
    if k < least || k > most {
        return Err(format!(
            "holds writes 0..{k}, expected between {least} and {most}"
        ));
    }
    if prints[k as usize] != hash {
        return Err(format!("does not hold exactly writes 0..{k}"));
    }
    Ok(())
}

#[test]
fn every_fault_at_every_call_is_an_error_and_loses_nothing_acknowledged() {
    common::count_panics();
    let stride: u64 = std::env::var("STRATA_FAULT_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let prints = fingerprints(ROUNDS * WRITES_PER_ROUND + 1, Shape::Small);

    // The calls of a run without faults.
    let clean = FaultEnv::new(MemEnv::new());
    let outcome = run_workload(&clean);
    assert_eq!(outcome.errors, 0, "{outcome:?}");
    let calls = clean.ops();
    assert!(calls > 200, "only {calls} calls");

    let mut runs = 0u64;
    let mut failures = Vec::new();
    let kinds = [
        FaultKind::Io,
        FaultKind::NoSpace,
        FaultKind::ShortWrite,
        FaultKind::FailedSync,
    ];
    let only: Option<u64> = std::env::var("STRATA_FAULT_AT")
        .ok()
        .and_then(|s| s.parse().ok());
    for at in (0..calls).step_by(stride as usize) {
        if only.is_some_and(|o| o != at) {
            continue;
        }
        for kind in kinds {
            for persistent in [false, true] {
                let mem = MemEnv::new();
                let env = FaultEnv::new(mem.clone());
                env.set_plan(Some(FaultPlan {
                    at,
                    kind,
                    persistent,
                }));
                let out = run_workload(&env);
                runs += 1;
                if only.is_some() {
                    eprintln!("{kind:?} persistent={persistent}: {out:?}");
                }
                let what = format!(
                    "{kind:?} at call {at}{}",
                    if persistent { ", persistent" } else { "" }
                );
                let mut problems = out.breaches.clone();
                problems.extend(env.violations());
                env.set_plan(None);
                if let Err(e) = check_reopen(
                    mem.crash_clone(CrashMode::PROCESS_KILL),
                    out.acked,
                    out.issued,
                    &prints,
                ) {
                    problems.push(format!("after the run: {e}"));
                }
                if let Err(e) = check_reopen(
                    mem.crash_clone(CrashMode::POWER_LOSS),
                    out.synced,
                    out.issued,
                    &prints,
                ) {
                    problems.push(format!("after a power loss: {e}"));
                }
                for p in problems {
                    if failures.len() < 30 {
                        failures.push(format!("{what}: {p}"));
                    }
                }
            }
        }
    }
    eprintln!("fault runs: {runs} ({calls} calls x 4 faults x once/persistent, stride {stride})");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(common::panics(), 0, "a thread panicked");
}

/// A database of `n` synced writes whose `CURRENT` is gone, so that only repair opens it.
fn needs_repair(n: u64) -> MemEnv {
    let mem = MemEnv::new();
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    for i in 0..n {
        db.write_opt(batch(i, Shape::Small), &WriteOptions { sync: true })
            .unwrap();
        if i == n / 2 {
            db.compact_range(None, None).unwrap();
        }
    }
    drop(db);
    mem.remove_file(std::path::Path::new("/db/CURRENT"))
        .unwrap();
    mem
}

#[test]
fn a_repair_that_fails_at_any_call_can_be_run_again_and_loses_nothing() {
    common::count_panics();
    const WRITES: u64 = 300;
    let prints = fingerprints(WRITES + 1, Shape::Small);
    let clean = FaultEnv::new(needs_repair(WRITES));
    strata::repair(DIR, &options(Arc::new(clean.clone()))).unwrap();
    let calls = clean.ops();
    assert!(calls > 20, "only {calls} calls");
    let mut failures = Vec::new();
    let mut runs = 0;
    for at in 0..calls {
        for kind in [FaultKind::Io, FaultKind::ShortWrite, FaultKind::FailedSync] {
            for persistent in [false, true] {
                let mem = needs_repair(WRITES);
                let env = FaultEnv::new(mem.clone());
                env.set_plan(Some(FaultPlan {
                    at,
                    kind,
                    persistent,
                }));
                let first = strata::repair(DIR, &options(Arc::new(env.clone())));
                runs += 1;
                let what = format!("{kind:?} at call {at}, persistent {persistent}");
                if let Err(e) = &first {
                    if !matches!(e, Error::Io { .. }) {
                        failures.push(format!("{what}: unexpected error {e}"));
                    }
                }
                failures.extend(env.violations().into_iter().map(|v| format!("{what}: {v}")));
                // Whatever the failed repair left, a repair without faults finishes the job.
                let opts = options(Arc::new(mem.clone()));
                let result = Db::open(DIR, opts.clone())
                    .or_else(|_| strata::repair(DIR, &opts).and_then(|_| Db::open(DIR, opts)))
                    .map_err(|e| e.to_string())
                    .and_then(|db| recovered_prefix(&db));
                match result {
                    Ok((k, hash)) if k == WRITES && hash == prints[k as usize] => {}
                    Ok((k, _)) => {
                        failures.push(format!("{what}: holds {k} writes, not all {WRITES}"))
                    }
                    Err(e) => failures.push(format!("{what}: {e}")),
                }
            }
        }
    }
    eprintln!("repair fault runs: {runs} ({calls} calls x 3 faults x once/persistent)");
    failures.truncate(30);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(common::panics(), 0, "a thread panicked");
}
