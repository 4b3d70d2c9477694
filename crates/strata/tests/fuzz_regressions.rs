// SPDX-License-Identifier: MIT OR Apache-2.0
//! The fuzz targets' checks (`fuzz/checks.rs`), run by `cargo test`:
//! - on every input committed under `fuzz/regressions/<target>/` (inputs a fuzzer found, and
//!   seeds from the LevelDB fixtures);
//! - on a bounded number of inputs mutated from those with a seeded generator, so that every
//!   test run fuzzes a little too. `STRATA_FUZZ_CASES=N` sets how many per target.
//!
//! The coverage-guided runs are `fuzz/run.sh TARGET SECONDS` (nightly, cargo-fuzz).

#[path = "../../../fuzz/checks.rs"]
mod checks;

use std::fs;
use std::path::Path;

use strata_testkit::splitmix64;

type Check = fn(&[u8]);

fn inputs(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().map(|p| fs::read(p).unwrap()).collect();
    assert!(!inputs.is_empty(), "no inputs in {}", dir.display());
    inputs
}

/// A mutation of `input`: some bytes flipped or overwritten, maybe cut or extended.
fn mutate(input: &[u8], seed: u64) -> Vec<u8> {
    let mut out = input.to_vec();
    let mut x = seed;
    let edits = 1 + splitmix64(seed) % 4;
    for _ in 0..edits {
        x = splitmix64(x);
        if out.is_empty() {
            out.push(x as u8);
            continue;
        }
        let at = (x >> 8) as usize % out.len();
        match x % 4 {
            0 => out[at] ^= 1 << ((x >> 40) % 8),
            1 => out[at] = (x >> 32) as u8,
            2 => out.truncate(at),
            _ => out.extend((0..(x >> 48) % 16).map(|i| splitmix64(x ^ i) as u8)),
        }
    }
    out
}

/// The one input `STRATA_FUZZ_ONLY` names, if set.
fn only() -> Option<String> {
    std::env::var("STRATA_FUZZ_ONLY").ok()
}

/// Runs `check` on `input` (unless `STRATA_FUZZ_ONLY` names another); if it panics, names the
/// input (so that a failure can be rerun alone) and panics on. True if it ran.
fn check_named(check: Check, input: &[u8], name: &str) -> bool {
    if only().is_some_and(|only| only != name) {
        return false;
    }
    if let Err(panic) = std::panic::catch_unwind(|| check(input)) {
        eprintln!(
            "failed on {name} ({} bytes); rerun it alone with STRATA_FUZZ_ONLY=\"{name}\"",
            input.len()
        );
        std::panic::resume_unwind(panic);
    }
    true
}

fn run(target: &str, check: Check) {
    let cases: u64 = std::env::var("STRATA_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let inputs = inputs(target);
    let mut ran = 0;
    for (i, input) in inputs.iter().enumerate() {
        ran += usize::from(check_named(
            check,
            input,
            &format!("{target}: committed input {i}"),
        ));
    }
    for case in 0..cases {
        let input = &inputs[case as usize % inputs.len()];
        let name = format!("{target}: mutation {case}");
        ran += usize::from(check_named(check, &mutate(input, case), &name));
    }
    // A name of this target that matched nothing would pass without running anything.
    if let Some(only) = only().filter(|o| o.starts_with(&format!("{target}: "))) {
        assert!(
            ran == 1,
            "STRATA_FUZZ_ONLY={only:?} names no input of {target} (committed input 0..{}, \
             mutation 0..{cases})",
            inputs.len()
        );
    }
    eprintln!(
        "{target}: {} committed inputs and {cases} mutations",
        inputs.len()
    );
}

#[test]
fn log_reader_inputs() {
    run("log_reader", checks::log_reader);
}

#[test]
fn manifest_inputs() {
    run("manifest", checks::manifest);
}

#[test]
fn open_db_inputs() {
    run("open_db", checks::open_db);
}

#[test]
fn ops_model_inputs() {
    run("ops_model", checks::ops_model);
}
