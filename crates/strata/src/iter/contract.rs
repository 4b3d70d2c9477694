// SPDX-License-Identifier: MIT OR Apache-2.0
//! One contract suite for every [`InternalIterator`]: it is run against each cursor type with
//! the sorted entries the cursor should show, and against failing cursors to check that an
//! error surfaces through `status()` instead of ending a walk as if the entries ran out.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::comparator::Comparator;

type Entry = (Vec<u8>, Vec<u8>);

fn current(it: &dyn InternalIterator) -> Option<Entry> {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

/// Checks `it` against `model` (sorted under `cmp`, no duplicate keys): full scans both ways,
/// seeks to every key and between keys, and direction changes.
pub(crate) fn check_against_model(
    it: &mut dyn InternalIterator,
    model: &[Entry],
    cmp: &dyn Comparator,
    probes: &[Vec<u8>],
) {
    it.seek_to_first();
    let mut forward = Vec::new();
    while let Some(e) = current(it) {
        forward.push(e);
        it.next();
    }
    it.status().expect("forward scan");
    assert_eq!(forward.len(), model.len(), "forward scan length");
    assert!(forward == model, "forward scan differs");

    it.seek_to_last();
    let mut backward = Vec::new();
    while let Some(e) = current(it) {
        backward.push(e);
        it.prev();
    }
    it.status().expect("backward scan");
    backward.reverse();
    assert!(backward == model, "backward scan differs");

    for (i, (k, _)) in model.iter().enumerate() {
        it.seek(k);
        assert_eq!(
            current(it).as_ref(),
            Some(&model[i]),
            "seek to existing key {i}"
        );
        // Direction changes around every entry.
        if i > 0 {
            it.prev();
            assert_eq!(
                current(it).as_ref(),
                Some(&model[i - 1]),
                "prev after seek {i}"
            );
            it.next();
            assert_eq!(current(it).as_ref(), Some(&model[i]), "next after prev {i}");
        }
        if i + 1 < model.len() {
            it.next();
            assert_eq!(
                current(it).as_ref(),
                Some(&model[i + 1]),
                "next after seek {i}"
            );
            it.prev();
            assert_eq!(current(it).as_ref(), Some(&model[i]), "prev after next {i}");
        }
    }
    for probe in probes {
        it.seek(probe);
        let expected = model
            .iter()
            .find(|(k, _)| cmp.compare(k, probe) != Ordering::Less);
        assert_eq!(current(it).as_ref(), expected, "seek to probe {probe:?}");
    }
    it.status().expect("seeks");
}

/// Reads from the current position by repeated `step`, returning what was seen.
fn walk(it: &mut dyn InternalIterator, step: fn(&mut dyn InternalIterator)) -> Vec<Entry> {
    let mut seen = Vec::new();
    while let Some(e) = current(it) {
        seen.push(e);
        step(it);
    }
    seen
}

/// Checks contract item 5 on cursors that meet an error: `open` makes a fresh cursor over
/// `model` (sorted, no duplicate keys) that fails somewhere, and the caller arranges that a
/// full scan in either direction reaches the failure.
///
/// - A full scan forward (backward) shows a gapless run of `model` from its first (last) entry
///   and ends with an error status: the failure is neither skipped nor taken for the end.
/// - A seek to any model key, then a scan forward or backward, shows a gapless run of `model`
///   from that key; if the run stops before the model's end, the status is an error.
/// - The error stays: after it, seeks leave the cursor invalid and the status an error.
pub(crate) fn check_errors_surface<I: InternalIterator>(
    mut open: impl FnMut() -> I,
    model: &[Entry],
) {
    let mut it = open();
    it.seek_to_first();
    let forward = walk(&mut it, |it| it.next());
    assert!(
        model.starts_with(&forward),
        "forward scan skipped or changed entries"
    );
    assert!(
        it.status().is_err(),
        "forward scan ended Ok after {} entries",
        forward.len()
    );
    check_error_stays(&mut it, model);

    let mut it = open();
    it.seek_to_last();
    let backward = walk(&mut it, |it| it.prev());
    assert!(
        model
            .iter()
            .rev()
            .collect::<Vec<_>>()
            .starts_with(&backward.iter().collect::<Vec<_>>()),
        "backward scan skipped or changed entries"
    );
    assert!(
        it.status().is_err(),
        "backward scan ended Ok after {} entries",
        backward.len()
    );
    check_error_stays(&mut it, model);

    for (i, (k, _)) in model.iter().enumerate() {
        let mut it = open();
        it.seek(k);
        let seen = walk(&mut it, |it| it.next());
        assert!(
            model[i..].starts_with(&seen),
            "forward from key {i}: entries skipped"
        );
        if seen.len() < model.len() - i {
            assert!(it.status().is_err(), "forward from key {i}: ended Ok early");
        }
        let mut it = open();
        it.seek(k);
        let mut seen = walk(&mut it, |it| it.prev());
        seen.reverse();
        assert!(
            model[..=i].ends_with(&seen),
            "backward from key {i}: entries skipped"
        );
        if seen.len() < i + 1 {
            assert!(
                it.status().is_err(),
                "backward from key {i}: ended Ok early"
            );
        }
    }
}

/// Requires: `it.status()` is an error. Checks that seeks keep it so (contract item 5).
fn check_error_stays(it: &mut dyn InternalIterator, model: &[Entry]) {
    assert!(!it.valid(), "valid with an error status");
    it.seek_to_first();
    assert!(
        !it.valid() && it.status().is_err(),
        "seek_to_first cleared the error"
    );
    it.seek_to_last();
    assert!(
        !it.valid() && it.status().is_err(),
        "seek_to_last cleared the error"
    );
    if let Some((k, _)) = model.first() {
        it.seek(k);
        assert!(
            !it.valid() && it.status().is_err(),
            "seek cleared the error"
        );
    }
}
