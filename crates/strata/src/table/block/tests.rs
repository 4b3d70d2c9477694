// SPDX-License-Identifier: MIT OR Apache-2.0

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::coding::put_fixed32;
use crate::comparator::bytewise;
use crate::iter::contract::check_against_model;
use crate::table::block_builder::BlockBuilder;

fn path() -> Arc<Path> {
    Arc::from(Path::new("/db/000009.ldb"))
}

fn build(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Vec<u8> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    b.finish().to_vec()
}

fn parse(data: Vec<u8>) -> Result<Arc<Block>> {
    Block::new(data, path(), 4096).map(Arc::new)
}

fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let key = format!("key{:06}", i * 3).into_bytes();
            let value = format!("value-{i}-{}", "x".repeat(i % 13)).into_bytes();
            (key, value)
        })
        .collect()
}

#[test]
fn bytes_match_the_format_vector() {
    let data = build(
        &[
            (b"abc".to_vec(), b"x".to_vec()),
            (b"abd".to_vec(), b"y".to_vec()),
        ],
        16,
    );
    assert_eq!(
        data,
        [0, 3, 1, b'a', b'b', b'c', b'x', 2, 1, 1, b'd', b'y', 0, 0, 0, 0, 1, 0, 0, 0]
    );
}

#[test]
fn empty_block_is_one_restart() {
    let data = build(&[], 16);
    assert_eq!(data, [0, 0, 0, 0, 1, 0, 0, 0]);
    let block = parse(data).unwrap();
    let mut it = block.iter(bytewise());
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek(b"a");
    assert!(!it.valid());
    assert!(it.status().is_ok());
}

#[test]
fn iterator_contract_holds_for_every_restart_interval() {
    let model = entries(200);
    let mut probes: Vec<Vec<u8>> = (0..610)
        .map(|i| format!("key{i:06}").into_bytes())
        .collect();
    probes.push(b"".to_vec());
    probes.push(b"zzz".to_vec());
    for interval in [1, 2, 3, 16, 500] {
        let block = parse(build(&model, interval)).unwrap();
        let mut it = block.iter(bytewise());
        check_against_model(&mut it, &model, &BytewiseComparatorRef, &probes);
    }
}

#[test]
fn single_entry_block_works_both_ways() {
    let model = vec![(b"only".to_vec(), b"one".to_vec())];
    let block = parse(build(&model, 16)).unwrap();
    let mut it = block.iter(bytewise());
    check_against_model(
        &mut it,
        &model,
        &BytewiseComparatorRef,
        &[b"a".to_vec(), b"z".to_vec()],
    );
}

struct BytewiseComparatorRef;
impl Comparator for BytewiseComparatorRef {
    fn name(&self) -> &str {
        "test"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
    fn find_shortest_separator(&self, _: &mut Vec<u8>, _: &[u8]) {}
    fn find_short_successor(&self, _: &mut Vec<u8>) {}
}

fn expect_corruption(result: Result<Arc<Block>>, reason: &str) {
    match result {
        Err(Error::Corruption {
            file,
            offset,
            reason: r,
        }) => {
            assert_eq!(file, Path::new("/db/000009.ldb"));
            assert_eq!(offset, 4096);
            assert!(r.contains(reason), "{r}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn block_shorter_than_its_restart_count_is_corruption() {
    expect_corruption(parse(vec![1, 0]), "too short");
}

#[test]
fn restart_array_larger_than_the_block_is_corruption() {
    let mut data = build(&entries(3), 16);
    let n = data.len();
    data[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
    expect_corruption(parse(data), "restart array is larger");
}

#[test]
fn restart_pointing_outside_the_entries_is_corruption() {
    let mut data = build(&entries(40), 16);
    let n = data.len();
    // Second of three restarts.
    data[n - 12..n - 8].copy_from_slice(&(n as u32).to_le_bytes());
    expect_corruption(parse(data), "points outside");
}

#[test]
fn first_entry_not_at_a_restart_is_corruption() {
    let mut data = build(&entries(3), 16);
    let n = data.len();
    data[n - 8..n - 4].copy_from_slice(&5u32.to_le_bytes());
    expect_corruption(parse(data), "first entry");
}

/// Runs every kind of cursor movement and returns the first error.
fn exercise(block: &Arc<Block>) -> Result<()> {
    let mut it = block.iter(bytewise());
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    it.status()?;
    it.seek_to_last();
    while it.valid() {
        it.prev();
    }
    it.status()?;
    it.seek(b"key000100");
    it.status()
}

#[test]
fn entry_running_past_the_block_is_corruption_not_a_panic() {
    let mut data = build(&entries(3), 16);
    data[2] = 0x7f; // value length of the first entry
    let block = parse(data).unwrap();
    let err = exercise(&block).unwrap_err();
    assert!(err.to_string().contains("bad entry"), "{err}");
    assert!(matches!(err, Error::Corruption { offset: 4096, .. }));
}

#[test]
fn varint_that_never_ends_is_corruption() {
    let mut data = vec![0xff; 10];
    put_fixed32(&mut data, 0);
    put_fixed32(&mut data, 1);
    let block = parse(data).unwrap();
    assert!(exercise(&block).unwrap_err().is_corruption());
}

#[test]
fn entry_sharing_more_than_the_previous_key_is_corruption() {
    let mut data = build(&entries(3), 16);
    // The second entry starts after the first; make it share 200 bytes.
    let first_len = 3 + entries(3)[0].0.len() + entries(3)[0].1.len();
    data[first_len] = 100;
    let block = parse(data).unwrap();
    let err = exercise(&block).unwrap_err();
    assert!(err.to_string().contains("shares more"), "{err}");
}

#[test]
fn every_single_byte_flip_is_handled_without_panic() {
    let original = build(&entries(40), 4);
    for i in 0..original.len() {
        for bit in [0x01u8, 0x80] {
            let mut data = original.clone();
            data[i] ^= bit;
            if let Ok(block) = parse(data) {
                let _ = exercise(&block);
            }
        }
    }
}

#[test]
fn every_truncation_is_handled_without_panic() {
    let original = build(&entries(40), 4);
    for len in 0..original.len() {
        if let Ok(block) = parse(original[..len].to_vec()) {
            let _ = exercise(&block);
        }
    }
}
