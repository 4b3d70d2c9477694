// SPDX-License-Identifier: MIT OR Apache-2.0
//! One contract suite for every [`InternalIterator`]: it is run against each cursor type with
//! the sorted entries the cursor should show.

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
