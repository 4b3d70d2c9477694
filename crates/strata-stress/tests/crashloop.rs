// SPDX-License-Identifier: MIT OR Apache-2.0
//! The kill -9 loop, bounded for CI: 200 cycles of a writing process killed with SIGKILL at a
//! random moment, each followed by a reopen that must hold every acknowledged write.
//! `STRATA_CRASHLOOP_CYCLES=N` changes the count; `crashloop --cycles N` runs it by hand.

use std::process::Command;

#[test]
fn two_hundred_kills_lose_no_acknowledged_write() {
    let cycles = std::env::var("STRATA_CRASHLOOP_CYCLES").unwrap_or_else(|_| "200".into());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_crashloop"))
        .args(["--cycles", &cycles, "--max-run-ms", "150", "--dir"])
        .arg(dir.path().join("db"))
        .output()
        .expect("run crashloop");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(out.status.success(), "crashloop failed: {stderr}");
    assert!(
        stdout.contains(&format!("crashloop: {cycles} cycles")),
        "{stdout}"
    );
}
