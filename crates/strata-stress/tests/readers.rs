// SPDX-License-Identifier: MIT OR Apache-2.0
//! Reader processes beside a writer process: this test's process writes numbered batches
//! (`strata_testkit::writes`) with small memtables, so that flushes and compactions delete
//! files throughout, while three child processes (this test binary again) open the database
//! read-only and `catch_up` in a loop. Every state a reader sees must be exactly a prefix of
//! the writes (its contents' hash is the model's after that many writes), never shorter than
//! the one before, and no read may fail for a file the writer deleted.
//!
//! Short mode: 3 s in `cargo test`. Long mode: `STRATA_READERS_SECS=N`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use strata::{Db, Options};
use strata_testkit::writes::{batch, fingerprints, recovered_prefix, Shape};

/// Set in a child: `SECS:INDEX:DIR`, how long it reads, which reader it is, the database.
const CHILD_ENV: &str = "STRATA_TEST_READER_CHILD";

/// The most writes the writer makes in a run of `secs` (the readers' model covers them; the
/// writer makes about 30,000 a second in a debug build here): once there, the readers go on
/// reading the last state.
fn max_writes(secs: u64) -> u64 {
    40_000 * (secs + 1)
}
const READERS: usize = 3;

fn seconds() -> u64 {
    std::env::var("STRATA_READERS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

/// A reader: opens the database and catches up until `secs` have passed; the first reader
/// also runs `strata::check` beside the writer now and then, which must find the database
/// sound. Prints `views N entries M opens K checks C last L` on success.
fn reader(dir: &Path, secs: u64, index: usize) {
    let model = fingerprints(max_writes(secs), Shape::Small);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut views, mut entries, mut opens, mut previous) = (0u64, 0u64, 0u64, 0u64);
    let mut checks = 0u64;
    while Instant::now() < deadline {
        let db = Db::open_read_only(dir, Options::default())
            .unwrap_or_else(|e| panic!("read-only open failed: {e}"));
        opens += 1;
        for _ in 0..5 {
            let (n, hash) = recovered_prefix(&db).unwrap_or_else(|e| panic!("read failed: {e}"));
            assert!(
                n >= previous,
                "the state went back from {previous} writes to {n}"
            );
            assert_eq!(
                hash, model[n as usize],
                "the state is not exactly writes 0..{n}"
            );
            let (seqno, _) = db.read_state();
            assert!(seqno > 0 || n == 0);
            previous = n;
            views += 1;
            entries += db.scan().unwrap().count() as u64;
            db.catch_up()
                .unwrap_or_else(|e| panic!("catch_up failed: {e}"));
            if index == 0 && views % 10 == 0 {
                let report = strata::check(dir, &Options::default())
                    .unwrap_or_else(|e| panic!("check failed: {e}"));
                assert!(report.checks_beside_writer > 0);
                assert!(
                    report.is_sound(),
                    "check beside the writer: {:?}",
                    report.damage
                );
                checks += 1;
            }
        }
    }
    println!("views {views} entries {entries} opens {opens} checks {checks} last {previous}");
}

#[test]
fn readers_beside_a_writer_see_prefixes_that_only_grow() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let mut parts = spec.splitn(3, ':');
        let (secs, index, dir) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        reader(
            Path::new(dir),
            secs.parse().unwrap(),
            index.parse().unwrap(),
        );
        return;
    }
    let secs = seconds();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let writer = Db::open(
        &dir,
        Options {
            create_if_missing: true,
            write_buffer_size: 16 << 10,
            max_file_size: 1 << 20,
            block_size: 1024,
            ..Options::default()
        },
    )
    .unwrap();
    writer.write(batch(0, Shape::Small)).unwrap();
    let started = Instant::now();
    let children: Vec<_> = (0..READERS)
        .map(|index| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "readers_beside_a_writer_see_prefixes_that_only_grow",
                    "--nocapture",
                ])
                .env(CHILD_ENV, format!("{secs}:{index}:{}", dir.display()))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // The writer writes while any reader reads (bounded, should one hang).
    let mut children = children;
    let give_up = Duration::from_secs(secs * 5 + 30);
    let mut written = 1;
    while written < max_writes(secs) && started.elapsed() < give_up {
        writer.write(batch(written, Shape::Small)).unwrap();
        written += 1;
        if written % 64 == 0 && children.iter_mut().all(|c| c.try_wait().unwrap().is_some()) {
            break;
        }
    }
    let stats = writer.stats();
    let mut views = 0u64;
    let mut entries = 0u64;
    let mut checks = 0u64;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a reader failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find(|l| l.starts_with("views "))
            .expect("the reader's figures");
        let figures: Vec<u64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
        views += figures[0];
        entries += figures[1];
        checks += figures[3];
        assert!(figures[0] > 0, "{line}");
    }
    eprintln!(
        "{written} writes, {} flushes, {} compactions; {READERS} readers checked {views} views \
         ({entries} entries scanned) and ran {checks} checks in {:.1} s",
        stats.flush_count,
        stats.compaction_count,
        started.elapsed().as_secs_f64()
    );
    assert!(stats.flush_count > 0 && stats.compaction_count > 0);
    assert!(checks > 0);
}
