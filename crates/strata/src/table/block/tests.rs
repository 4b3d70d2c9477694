// SPDX-License-Identifier: MIT OR Apache-2.0

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::coding::put_fixed32;
use crate::comparator::{bytewise, BytewiseComparator};
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

/// The cursor rebuilds keys on the stack until one is too long, then on the heap: keys
/// that cross that length in both directions, shared prefixes included, read back exactly.
#[test]
fn iterator_contract_holds_for_keys_on_both_sides_of_the_stack_length() {
    let model: Vec<(Vec<u8>, Vec<u8>)> = (0..120usize)
        .map(|i| {
            // Lengths cycle through short, just fitting, just over and far over the stack.
            let pad = [0, STACK_KEY_BYTES - 12, STACK_KEY_BYTES - 11, 3 * STACK_KEY_BYTES][i % 4];
            let key = format!("k{:04}{}", i / 4, "q".repeat(pad)).into_bytes();
            (key, format!("v{i}").into_bytes())
        })
        .collect();
    let mut sorted = model.clone();
    sorted.sort();
    assert_eq!(sorted, model, "the model must be in key order");
    let mut probes: Vec<Vec<u8>> = model.iter().map(|(k, _)| k.clone()).collect();
    probes.extend(model.iter().map(|(k, _)| [k.as_slice(), b"!"].concat()));
    probes.push(b"".to_vec());
    probes.push(b"zzz".to_vec());
    for interval in [1, 3, 16] {
        let block = parse(build(&model, interval)).unwrap();
        let mut it = block.iter(bytewise());
        check_against_model(&mut it, &model, &BytewiseComparatorRef, &probes);
    }
}

/// A cursor pointed at another block (as a table cursor does when it crosses blocks) reads it
/// exactly as a new cursor would: whatever it was doing before, a backward walk with its cached
/// run, a long key on the heap, or a corruption error.
#[test]
fn a_retargeted_cursor_reads_its_new_block_as_a_new_cursor_does() {
    let long = "L".repeat(2 * STACK_KEY_BYTES);
    // Few enough entries that the old position lies inside the new block's entries.
    let first: Vec<(Vec<u8>, Vec<u8>)> = (0..6)
        .map(|i| (format!("a{i:04}{long}").into_bytes(), b"old".to_vec()))
        .collect();
    let second = entries(150);
    let mut probes: Vec<Vec<u8>> = (0..460).map(|i| format!("key{i:06}").into_bytes()).collect();
    probes.push(b"".to_vec());
    probes.push(b"zzz".to_vec());
    let mut damaged = build(&entries(3), 16);
    damaged[2] = 0x7f;
    for restart_interval in [1, 4, 16] {
        let target = parse(build(&second, restart_interval)).unwrap();
        // Mid-way through a backward walk over long keys: the run cache and the heap key are
        // in use.
        let mut it = parse(build(&first, 16)).unwrap().iter(bytewise());
        it.seek_to_last();
        for _ in 0..3 {
            it.prev();
        }
        assert!(it.valid() && it.key().len() > STACK_KEY_BYTES);
        it.retarget(target.clone());
        assert!(!it.valid(), "unpositioned after retarget");
        check_against_model(&mut it, &second, &BytewiseComparatorRef, &probes);
        // After a corruption error: the error belonged to the old block.
        let mut it = parse(damaged.clone()).unwrap().iter(bytewise());
        it.seek_to_first();
        assert!(it.status().is_err());
        it.retarget(target);
        assert!(it.status().is_ok());
        check_against_model(&mut it, &second, &BytewiseComparatorRef, &probes);
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

/// A block of three entries whose second shares 100 bytes with a first key of 9, and where
/// that second entry starts.
fn block_sharing_more_than_the_key_before() -> (Arc<Block>, usize) {
    let mut data = build(&entries(3), 16);
    let first_len = 3 + entries(3)[0].0.len() + entries(3)[0].1.len();
    data[first_len] = 100;
    (parse(data).unwrap(), first_len)
}

#[test]
fn entry_sharing_more_than_the_previous_key_is_corruption() {
    let (block, _) = block_sharing_more_than_the_key_before();
    let err = exercise(&block).unwrap_err();
    assert!(err.to_string().contains("shares more"), "{err}");
}

#[test]
fn entry_sharing_more_than_the_previous_key_is_corruption_on_a_backward_walk() {
    let (block, second) = block_sharing_more_than_the_key_before();
    // Straight to the end: the run is decoded for a backward step, never stepped forward.
    let mut it = block.iter(bytewise());
    it.seek_to_last();
    assert!(!it.valid());
    let err = it.status().unwrap_err();
    assert!(err.to_string().contains("shares more"), "{err}");
    assert!(matches!(err, Error::Corruption { offset, .. } if offset == 4096 + second as u64));
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Scans `block` forwards and backwards. Returns what the forward scan yielded and the first
/// error, after checking that the two directions agree and that an error is corruption at an
/// offset inside the block.
fn scan_both_ways(block: &Arc<Block>) -> (Entries, Result<()>) {
    let mut it = block.iter(bytewise());
    let mut forward = Vec::new();
    it.seek_to_first();
    while it.valid() {
        forward.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    let mut status = it.status();
    if status.is_ok() {
        let mut backward = Vec::new();
        it.seek_to_last();
        while it.valid() {
            backward.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        status = it.status();
        if status.is_ok() {
            backward.reverse();
            assert_eq!(backward, forward, "the two directions disagree");
        }
    }
    if let Err(e) = &status {
        expect_corruption_inside(e, block.size());
    }
    (forward, status)
}

fn expect_corruption_inside(err: &Error, block_len: usize) {
    match err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, Path::new("/db/000009.ldb"));
            assert!((4096..4096 + block_len as u64).contains(offset), "{err}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn every_single_bit_flip_is_corruption_or_a_consistent_block() {
    let original = build(&entries(40), 4);
    let mut caught = 0;
    for i in 0..original.len() {
        for bit in [0x01u8, 0x80] {
            let mut data = original.clone();
            data[i] ^= bit;
            match parse(data) {
                Ok(block) => caught += usize::from(scan_both_ways(&block).1.is_err()),
                Err(e) => {
                    expect_corruption_inside(&e, original.len());
                    caught += 1;
                }
            }
        }
    }
    // Flips in entry headers and restart points cannot all pass unnoticed.
    assert!(
        caught > original.len() / 10,
        "only {caught} flips were caught"
    );
}

#[test]
fn every_truncation_is_corruption_or_a_consistent_block() {
    let original = build(&entries(40), 4);
    for len in 0..original.len() {
        match parse(original[..len].to_vec()) {
            Ok(block) => _ = scan_both_ways(&block),
            Err(e) => expect_corruption_inside(&e, original.len()),
        }
    }
}

/// Entries cut off at any byte, under an intact restart array for what is left: the block
/// yields the whole entries before the cut, and an entry cut short is corruption.
#[test]
fn entries_cut_short_yield_the_whole_entries_before_the_cut() {
    let model = entries(40);
    let entries_len = |data: &[u8]| {
        let n = data.len();
        let restarts = u32::from_le_bytes(data[n - 4..].try_into().unwrap()) as usize;
        n - 4 - 4 * restarts
    };
    let ends: Vec<usize> = (0..=model.len())
        .map(|k| entries_len(&build(&model[..k], 4)))
        .collect();
    let original = build(&model, 4);
    let restarts: Vec<u32> = original[entries_len(&original)..original.len() - 4]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for cut in 0..=ends[model.len()] {
        let mut data = original[..cut].to_vec();
        let kept: Vec<u32> = restarts
            .iter()
            .copied()
            .filter(|&r| r == 0 || (r as usize) < cut)
            .collect();
        for r in &kept {
            put_fixed32(&mut data, *r);
        }
        put_fixed32(&mut data, kept.len() as u32);
        let block = parse(data).unwrap();
        let (yielded, status) = scan_both_ways(&block);
        let whole = ends.iter().rposition(|&end| end <= cut).unwrap();
        assert_eq!(yielded, model[..whole], "cut at {cut}");
        assert_eq!(
            status.is_err(),
            ends[whole] != cut,
            "cut at {cut}: {status:?}"
        );
    }
}

/// What a cursor's seek gives: the entry at or after `target`, or its error.
fn seek_with_cursor(block: &Arc<Block>, target: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut it = block.iter(bytewise());
    it.seek(target);
    if it.valid() {
        return Ok(Some((it.key().to_vec(), it.value().to_vec())));
    }
    it.status().map(|()| None)
}

fn find(block: &Block, target: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    block.find(&BytewiseComparator, target, |k, v| (k.to_vec(), v.to_vec()))
}

/// `Block::find` (point lookups) answers exactly as a cursor's seek: every probe, under every
/// restart interval, with keys that fit the stack and keys that do not.
#[test]
fn find_answers_as_a_cursor_seek_does() {
    let long_prefix = "p".repeat(STACK_KEY_BYTES - 4);
    for long in [false, true] {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = entries(100)
            .into_iter()
            .map(|(k, v)| {
                let k = if long {
                    [long_prefix.as_bytes(), &k].concat()
                } else {
                    k
                };
                (k, v)
            })
            .collect();
        for restart_interval in [1, 2, 16, 1000] {
            let block = parse(build(&entries, restart_interval)).unwrap();
            let prefix = if long { long_prefix.as_str() } else { "" };
            let probes = (0..310)
                .map(|i| format!("{prefix}key{i:06}").into_bytes())
                .chain([Vec::new(), b"zzz".to_vec(), prefix.as_bytes().to_vec()]);
            for probe in probes {
                assert_eq!(
                    find(&block, &probe).unwrap(),
                    seek_with_cursor(&block, &probe).unwrap(),
                    "{:?} (restart interval {restart_interval})",
                    String::from_utf8_lossy(&probe)
                );
            }
        }
    }
    let empty = parse(build(&[], 16)).unwrap();
    assert_eq!(find(&empty, b"k").unwrap(), None);
}

/// On a damaged block `find` fails where a cursor's seek fails, with the same error.
#[test]
fn find_refuses_damage_as_a_cursor_seek_does() {
    let original = build(&entries(40), 4);
    let probes: Vec<Vec<u8>> = (0..130)
        .step_by(7)
        .map(|i| format!("key{i:06}").into_bytes())
        .collect();
    let mut errors = 0;
    for i in 0..original.len() {
        let mut data = original.clone();
        data[i] ^= 0x80;
        let Ok(block) = parse(data) else { continue };
        for probe in &probes {
            let (by_find, by_seek) = (find(&block, probe), seek_with_cursor(&block, probe));
            match (&by_find, &by_seek) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => {
                    assert_eq!(a.to_string(), b.to_string());
                    errors += 1;
                }
                _ => panic!("flip at {i}, probe {probe:?}: {by_find:?} vs {by_seek:?}"),
            }
        }
    }
    assert!(errors > 0, "some flips must be refused");
}

#[test]
fn slice_keeps_what_find_hands_out_and_refuses_other_bytes() {
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..100u32)
        .map(|i| {
            (
                format!("key{i:03}").into_bytes(),
                format!("v{i}").into_bytes(),
            )
        })
        .collect();
    let block = parse(build(&entries, 4)).unwrap();
    let slice = block
        .find(&BytewiseComparator, b"key042", |_, v| block.slice(v))
        .unwrap()
        .flatten()
        .unwrap();
    drop(block);
    assert_eq!(&*slice, b"v42");
    let other = parse(build(&entries, 4)).unwrap();
    let outside = b"v42".to_vec();
    assert!(other.slice(&outside).is_none());
}

/// An internal key: `user`, then a tag.
fn ikey(user: &[u8], seqno: u64) -> Vec<u8> {
    let mut k = Vec::new();
    crate::key::append_internal_key(&mut k, user, seqno, crate::key::ValueKind::Value);
    k
}

/// Index-like blocks whose user keys share prefixes of every length, repeat (one user key
/// across blocks, different sequence numbers), end in a short successor (`"1"` after
/// `"0…"`), or are empty.
fn fenced_cases() -> Vec<Vec<Vec<u8>>> {
    let mut cases: Vec<Vec<Vec<u8>>> = Vec::new();
    let decimal: Vec<Vec<u8>> = (0..300u32)
        .map(|i| format!("{:016}", i * 37).into_bytes())
        .collect();
    cases.push(decimal.clone());
    let mut successor = decimal.clone();
    successor.push(b"1".to_vec());
    cases.push(successor);
    // Windows that tie: keys differing only after the eighth byte past the prefix.
    cases.push(
        (0..50u32)
            .map(|i| format!("pp{:02}xxxxxxxxxx{:03}", i / 10, i).into_bytes())
            .collect(),
    );
    // Keys that are prefixes of one another, and the empty key.
    cases.push(vec![
        b"".to_vec(),
        b"a".to_vec(),
        b"ab".to_vec(),
        b"ab\0".to_vec(),
        b"ab\0\0".to_vec(),
        b"abc".to_vec(),
        b"abcdefghijk".to_vec(),
        b"abcdefghijkl".to_vec(),
        b"b".to_vec(),
    ]);
    cases.push(vec![b"only".to_vec()]);
    // Two blocks ending on the same user key, and a last key after a long shared run.
    cases.push(vec![
        b"k1".to_vec(),
        b"k2".to_vec(),
        b"k2".to_vec(),
        b"k2".to_vec(),
        b"k3".to_vec(),
    ]);
    cases
}

/// The fences only narrow the search: a fenced index block answers every probe as the same
/// block without fences does, under every restart interval the fences may meet.
#[test]
fn fenced_searches_answer_as_unfenced_ones() {
    let cmp = crate::key::InternalKeyComparator::new(bytewise());
    for users in fenced_cases() {
        // Sequence numbers fall along repeated user keys, as in a table.
        let keys: Vec<Vec<u8>> = users
            .iter()
            .enumerate()
            .map(|(i, u)| ikey(u, 1_000 - i as u64))
            .collect();
        let entries: Vec<(Vec<u8>, Vec<u8>)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), format!("h{i}").into_bytes()))
            .collect();
        let mut probes: Vec<Vec<u8>> = Vec::new();
        for u in users.iter().chain([&b"".to_vec(), &b"0".to_vec(), &b"zzz".to_vec()]) {
            for seqno in [0, 500, 999, 1_000, 2_000] {
                probes.push(ikey(u, seqno));
                probes.push(ikey(&[u.as_slice(), b"\0"].concat(), seqno));
                probes.push(ikey(&[u.as_slice(), b"5"].concat(), seqno));
                if let Some((_, shorter)) = u.split_last() {
                    probes.push(ikey(shorter, seqno));
                }
            }
            // A byte one up or one down at each place: probes that leave the fences' prefix in
            // each of its words, before and after it.
            for pos in 0..u.len() {
                for delta in [1u8, 255] {
                    let mut near = u.clone();
                    near[pos] = near[pos].wrapping_add(delta);
                    probes.push(ikey(&near, 500));
                }
            }
        }
        for interval in [1, 2, 16] {
            let plain = parse(build(&entries, interval)).unwrap();
            let fenced =
                Arc::new(Block::new(build(&entries, interval), path(), 4096).unwrap().with_fences());
            assert!(fenced.fences.is_some(), "{users:?}");
            for probe in &probes {
                let (a, b) = (
                    plain.find(&cmp, probe, |k, v| (k.to_vec(), v.to_vec())),
                    fenced.find(&cmp, probe, |k, v| (k.to_vec(), v.to_vec())),
                );
                assert_eq!(a.unwrap(), b.unwrap(), "probe {probe:?}, interval {interval}");
                let (mut a, mut b) = (plain.iter(cmp_dyn()), fenced.iter(cmp_dyn()));
                a.seek(probe);
                b.seek(probe);
                assert_eq!(a.valid(), b.valid());
                if a.valid() {
                    assert_eq!((a.key(), a.value()), (b.key(), b.value()));
                }
            }
        }
    }
}

fn cmp_dyn() -> Arc<dyn Comparator> {
    Arc::new(crate::key::InternalKeyComparator::new(bytewise()))
}

/// Blocks whose keys cannot be fenced get none, and are searched as before: entries too short
/// to be internal keys, and an empty block.
#[test]
fn blocks_that_cannot_be_fenced_get_no_fences() {
    let short = vec![(b"abc".to_vec(), b"v".to_vec())];
    let block = Block::new(build(&short, 16), path(), 0).unwrap().with_fences();
    assert!(block.fences.is_none());
    let empty = Block::new(build(&[], 16), path(), 0).unwrap().with_fences();
    assert!(empty.fences.is_none());
}

/// The user keys and entries of a table-shaped index block: `count` 16-digit decimal keys
/// from `first`, `step` apart, then LevelDB's short successor `"1"` as the last key; each
/// entry's internal key at `seqno`, its value `handle` (a stand-in).
#[allow(clippy::type_complexity)]
fn index_shaped(
    count: u32,
    first: u32,
    step: u32,
    seqno: u64,
    handle: &[u8],
) -> (Vec<Vec<u8>>, Vec<(Vec<u8>, Vec<u8>)>) {
    let mut users: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("{:016}", first + i * step).into_bytes())
        .collect();
    users.push(b"1".to_vec());
    let entries = users
        .iter()
        .map(|u| (ikey(u, seqno), handle.to_vec()))
        .collect();
    (users, entries)
}

/// On a table's index (decimal keys, a short successor last) the fences leave at most two
/// restarts to compare whole, and the answer among them.
#[test]
fn fences_narrow_a_table_index_to_a_restart_or_two() {
    let cmp = crate::key::InternalKeyComparator::new(bytewise());
    let (users, entries) = index_shaped(500, 32_329, 65, 7, b"handle");
    let block = Block::new(build(&entries, 1), path(), 0)
        .unwrap()
        .with_fences();
    let fences = block.fences.as_ref().expect("fenced");
    let probes = users
        .iter()
        .flat_map(|u| [ikey(u, 9), ikey(u, 3), ikey(&[u.as_slice(), b"0"].concat(), 9)])
        .chain([ikey(b"", 0), ikey(b"0", 0), ikey(b"2", 0)]);
    for probe in probes {
        let (left, right) = fences.narrow(&probe);
        let plain = Block::new(build(&entries, 1), path(), 0).unwrap();
        let exact = plain.last_restart_before(&cmp, &probe).unwrap();
        assert!(left <= exact && exact <= right, "{probe:?}: {exact} not in {left}..={right}");
        assert!(right - left <= 1, "{probe:?}: {left}..={right}");
    }
}

/// Fences built over a damaged index block (every single bit flipped, the checksum that would
/// catch it bypassed) never panic, and the fenced block answers every probe exactly as the
/// unfenced one does: the same entry, or the same error.
#[test]
fn fences_over_damaged_blocks_answer_as_unfenced_ones() {
    let cmp = crate::key::InternalKeyComparator::new(bytewise());
    let (users, entries) = index_shaped(24, 100, 7, 5, b"hv");
    let probes: Vec<Vec<u8>> = users
        .iter()
        .step_by(3)
        .flat_map(|u| [ikey(u, 9), ikey(&[u.as_slice(), b"5"].concat(), 9)])
        .chain([ikey(b"", 0), ikey(b"2", 0)])
        .collect();
    for interval in [1, 4] {
        let original = build(&entries, interval);
        let mut fenced_count = 0;
        for bit in 0..original.len() * 8 {
            let mut data = original.clone();
            data[bit / 8] ^= 1 << (bit % 8);
            let (Ok(plain), Ok(fenced)) = (
                Block::new(data.clone(), path(), 0),
                Block::new(data, path(), 0).map(Block::with_fences),
            ) else {
                continue;
            };
            fenced_count += usize::from(fenced.fences.is_some());
            for probe in &probes {
                let answer = |b: &Block| {
                    b.find(&cmp, probe, |k, v| (k.to_vec(), v.to_vec()))
                        .map_err(|e| e.to_string())
                };
                assert_eq!(answer(&plain), answer(&fenced), "bit {bit}, probe {probe:?}");
            }
        }
        assert!(fenced_count > 0, "some damaged blocks must still get fences");
    }
}

/// Every entry of a block, by a forward scan, or its error.
fn scan(block: &Arc<Block>, cmp: Arc<dyn Comparator>) -> Result<Entries> {
    let mut it = block.iter(cmp);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().map(|()| out)
}

/// A block's search form holds the same entries, every one a restart, and answers every point
/// lookup and cursor seek as the stored block does, with fences (bytewise) or without.
#[test]
fn a_search_form_answers_as_the_stored_block() {
    let cmp = crate::key::InternalKeyComparator::new(bytewise());
    for users in fenced_cases() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = users
            .iter()
            .enumerate()
            .map(|(i, u)| (ikey(u, 1_000 - i as u64), format!("v{i}").into_bytes()))
            .collect();
        let mut probes: Vec<Vec<u8>> = Vec::new();
        for u in users.iter().chain([&b"".to_vec(), &b"zzz".to_vec()]) {
            for seqno in [0, 999, 2_000] {
                probes.push(ikey(u, seqno));
                probes.push(ikey(&[u.as_slice(), b"5"].concat(), seqno));
            }
        }
        for interval in [1, 2, 16] {
            let stored = parse(build(&entries, interval)).unwrap();
            for bytewise_order in [true, false] {
                let Some(form) = stored.searchable(bytewise_order) else {
                    // Nothing to gain: already a restart at every entry, and no fences.
                    assert!(
                        !bytewise_order && stored.num_restarts == entries.len(),
                        "{users:?} at {interval}"
                    );
                    continue;
                };
                let form = Arc::new(form);
                assert_eq!(form.num_restarts, entries.len());
                let fences = form.fences.as_ref();
                assert_eq!(fences.is_some(), bytewise_order, "{users:?}");
                assert!(fences.is_none_or(RestartFences::every_entry));
                assert!(form.charge() >= form.size());
                assert_eq!(scan(&form, cmp_dyn()).unwrap(), entries);
                for probe in &probes {
                    let answer =
                        |b: &Block| b.find(&cmp, probe, |k, v| (k.to_vec(), v.to_vec())).unwrap();
                    assert_eq!(answer(&stored), answer(&form), "probe {probe:?}");
                    let (mut a, mut b) = (stored.iter(cmp_dyn()), form.iter(cmp_dyn()));
                    a.seek(probe);
                    b.seek(probe);
                    assert_eq!(a.valid(), b.valid());
                    if a.valid() {
                        assert_eq!((a.key(), a.value()), (b.key(), b.value()));
                    }
                }
            }
        }
    }
}

/// The fences know whether every entry is a restart: an index block's (interval 1) are,
/// a data block's with a longer interval are not.
#[test]
fn fences_tell_whether_every_entry_is_a_restart() {
    let (_, entries) = index_shaped(40, 100, 7, 5, b"hv");
    for (interval, every) in [(1, true), (2, false), (16, false)] {
        let block = Block::new(build(&entries, interval), path(), 0)
            .unwrap()
            .with_fences();
        assert_eq!(block.fences.unwrap().every_entry(), every, "interval {interval}");
    }
}

/// A damaged block (every single bit flipped) either has no search form, or one holding
/// exactly the entries a scan of the stored block reads whole, and answering every probe as
/// the stored block does when its fences were built: a search form never hides damage a
/// search of the stored block would report.
#[test]
fn a_damaged_block_has_no_search_form_or_a_faithful_one() {
    let cmp = crate::key::InternalKeyComparator::new(bytewise());
    let (users, entries) = index_shaped(30, 100, 7, 5, b"value");
    let probes: Vec<Vec<u8>> = users
        .iter()
        .flat_map(|u| [ikey(u, 9), ikey(u, 2), ikey(&[u.as_slice(), b"5"].concat(), 9)])
        .chain([ikey(b"", 0), ikey(b"2", 0)])
        .collect();
    let original = build(&entries, 4);
    let (mut made, mut refused) = (0, 0);
    for bit in 0..original.len() * 8 {
        let mut data = original.clone();
        data[bit / 8] ^= 1 << (bit % 8);
        let Ok(stored) = parse(data) else { continue };
        match stored.searchable(true) {
            None => refused += 1,
            Some(form) => {
                made += 1;
                let form = Arc::new(form);
                assert_eq!(
                    scan(&form, cmp_dyn()).ok(),
                    scan(&stored, cmp_dyn()).ok(),
                    "bit {bit}"
                );
                for probe in &probes {
                    let answer = |b: &Block| {
                        b.find(&cmp, probe, |k, v| (k.to_vec(), v.to_vec()))
                            .map_err(|e| e.to_string())
                    };
                    let by_stored = answer(&stored);
                    assert!(by_stored.is_ok(), "bit {bit}, probe {probe:?}: {by_stored:?}");
                    // Fences are built only over keys in order, where both searches agree.
                    if form.fences.is_some() {
                        assert_eq!(by_stored, answer(&form), "bit {bit}, probe {probe:?}");
                    }
                }
            }
        }
    }
    assert!(made > 0 && refused > 0, "made {made}, refused {refused}");
}

/// A restart entry that shares a prefix with the entry before it (damage the stored block's
/// searches report) leaves the block without a search form.
#[test]
fn a_restart_that_shares_a_prefix_has_no_search_form() {
    let (_, entries) = index_shaped(30, 100, 7, 5, b"value");
    let mut data = build(&entries, 16);
    let stored = parse(data.clone()).unwrap();
    let restart = stored.restart_point(1);
    assert_eq!(data[restart], 0, "a restart stores its whole key");
    data[restart] = 1;
    let damaged = parse(data).unwrap();
    assert!(damaged.searchable(true).is_none());
    assert!(damaged.searchable(false).is_none());
    assert!(stored.searchable(true).is_some());
}

/// Along one user key, restart keys whose tags do not fall (damage: newer entries after older
/// ones) get no fences, so a fenced search never relies on their order.
#[test]
fn restart_keys_out_of_order_by_tag_get_no_fences() {
    let block_of = |seqnos: [u64; 5]| {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = seqnos
            .iter()
            .map(|&seqno| (ikey(b"a", seqno), format!("v{seqno}").into_bytes()))
            .collect();
        Block::new(build(&entries, 1), path(), 0)
            .unwrap()
            .with_fences()
    };
    assert!(block_of([10, 9, 8, 7, 14]).fences.is_none());
    assert!(block_of([14, 10, 9, 8, 7]).fences.is_some());
}

/// `find_while_decoding` over every block `find` searches: the same answer for every key of
/// the block, keys between and around them, decoding only part of the block for early keys.
#[test]
fn finding_while_decoding_agrees_with_find() {
    use crate::key::{append_internal_key, InternalKeyComparator, ValueKind};
    use crate::table::snappy::SnappyReader;
    let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
    let ikey = |user: &[u8], seqno| {
        let mut k = Vec::new();
        append_internal_key(&mut k, user, seqno, ValueKind::Value);
        k
    };
    for restart_interval in [1, 4, 16] {
        let entries: Vec<_> = (0..60)
            .map(|i| {
                let user = format!("user{:04}", i * 2);
                (ikey(user.as_bytes(), 100), format!("v{i}").repeat(i % 9).into_bytes())
            })
            .collect();
        let data = build(&entries, restart_interval);
        let compressed = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let block = parse(data.clone()).unwrap();
        for i in 0..125 {
            let target = ikey(format!("user{i:04}").as_bytes(), 100);
            let expected = block
                .find(&icmp, &target, |k, v| (k.to_vec(), v.to_vec()))
                .unwrap();
            let mut reader = SnappyReader::new(&compressed, Vec::new()).unwrap();
            let got = find_while_decoding(&mut reader, 0, &icmp, &target, |k, v| {
                (k.to_vec(), v.to_vec())
            })
            .unwrap();
            // Past the last key the scan reaches the restart array and defers to `find`.
            assert_eq!(got, expected, "target {i}, restart interval {restart_interval}");
            if i < 20 {
                assert!(reader.decoded().len() < data.len() / 2, "target {i}");
            }
        }
    }
}

/// `find_while_decoding` from the chunk [`reader_at_chunk`] picks, in blocks compressed in
/// chunks (`table::chunks`): the same answer as `find` for every key, keys between and
/// around them; the scan starts at the last chunk whose first key is before the target.
/// With a chunk map that does not fit the block (a start moved by a byte or swapped with
/// another block's), a lookup fails or gives `find`'s answer, never another.
#[test]
fn finding_from_a_chunk_agrees_with_find() {
    use crate::key::{append_internal_key, InternalKeyComparator, ValueKind};
    use crate::table::chunks::{compress_at_cuts, compress_in_chunks, ChunkStart};
    let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
    let ikey = |user: &[u8], seqno| {
        let mut k = Vec::new();
        append_internal_key(&mut k, user, seqno, ValueKind::Value);
        k
    };
    for (restart_interval, three_cuts) in [(1, false), (4, false), (16, false), (1, true), (4, true), (16, true)] {
        let entries: Vec<_> = (0..200)
            .map(|i| {
                let user = format!("user{:04}", i * 2);
                let value = format!("value {i} {}", "ab".repeat(i % 23));
                (ikey(user.as_bytes(), 100), value.into_bytes())
            })
            .collect();
        let data = build(&entries, restart_interval);
        let block = parse(data.clone()).unwrap();
        let restarts: Vec<u32> = (0..block.num_restarts).map(|i| block.restart_point(i) as u32).collect();
        let mut out = Vec::new();
        let mut encoder = snap::raw::Encoder::new();
        // The builder's one cut, or three (as many as a map holds).
        let (len, chunks) = if three_cuts {
            let n = restarts.len();
            let cuts = [restarts[n / 4], restarts[n / 2], restarts[3 * n / 4]];
            compress_at_cuts(&mut encoder, &data, &cuts, &mut out).unwrap()
        } else {
            compress_in_chunks(&mut encoder, &data, &restarts, block.restarts_offset, &mut out)
                .unwrap()
        };
        let stored = &out[..len];
        let want = if three_cuts { 3 } else { 1 };
        assert_eq!(chunks.as_slice().len(), want, "restart interval {restart_interval}");
        // Each chunk's first key, for the start the scan should pick.
        let first_keys: Vec<Vec<u8>> = chunks
            .as_slice()
            .iter()
            .map(|s| {
                let mut it = block.iter(Arc::new(icmp.clone()));
                it.seek_to_first();
                while it.current != s.output as usize {
                    it.next();
                }
                it.key().to_vec()
            })
            .collect();
        let find = |chunks: &ChunkStarts, target: &[u8]| {
            let (mut reader, start) =
                reader_at_chunk(stored, chunks, &icmp, target, |_| Vec::new())?;
            let got = find_while_decoding(&mut reader, start, &icmp, target, |k, v| {
                (k.to_vec(), v.to_vec())
            })?;
            Ok::<_, &str>((got, start))
        };
        let mut wrong_maps = Vec::new();
        for (i, s) in chunks.as_slice().iter().enumerate() {
            for (dout, din) in [(1i64, 0i64), (-1, 0), (0, 1), (0, -1), (3, 2)] {
                let mut map = chunks;
                let moved = ChunkStart {
                    output: (i64::from(s.output) + dout) as u32,
                    input: (i64::from(s.input) + din) as u32,
                };
                map.set(i, moved);
                wrong_maps.push(map);
            }
        }
        for i in 0..405 {
            let target = ikey(format!("user{i:04}").as_bytes(), 100);
            let expected = block
                .find(&icmp, &target, |k, v| (k.to_vec(), v.to_vec()))
                .unwrap();
            let (got, start) = find(&chunks, &target).unwrap();
            // Past the last key the scan reaches the restart array and defers to `find`.
            if got.is_some() {
                assert_eq!(got, expected, "target {i}, restart interval {restart_interval}");
            } else {
                assert!(expected.is_none(), "target {i}");
            }
            let chunk = first_keys.iter().rposition(|k| icmp.compare(k, &target).is_lt());
            let want_start = chunk.map_or(0, |c| chunks.as_slice()[c].output as usize);
            assert_eq!(start, want_start, "target {i}, restart interval {restart_interval}");
            for map in &wrong_maps {
                if let Ok((Some(got), _)) = find(map, &target) {
                    assert_eq!(Some(got), expected, "target {i}, map {map:?}");
                }
            }
        }
    }
}

/// The scan stops at the restart array even where its bytes, read on, would look like an
/// entry: the first restart's four zero bytes read as an entry with no key, which a block of
/// internal keys never holds. (Here the next restarts are bytes that decode as a key after
/// the target; the block is damaged, and `find_while_decoding` leaves it to the whole block's
/// parse, which refuses it.)
#[test]
fn finding_while_decoding_stops_at_the_restart_array() {
    use crate::key::{append_internal_key, InternalKeyComparator, ValueKind};
    use crate::table::snappy::SnappyReader;
    let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
    let mut key = Vec::new();
    append_internal_key(&mut key, b"a", 1, ValueKind::Value);
    let mut target = Vec::new();
    append_internal_key(&mut target, b"b", 1, ValueKind::Value);
    let mut data = vec![0, key.len() as u8, 1];
    data.extend_from_slice(&key);
    data.push(b'x');
    // Restarts 0, then bytes [9, 0, 'z', 'z'] and ['z'; 4], then the count.
    data.extend_from_slice(&[0, 0, 0, 0, 9, 0, b'z', b'z', b'z', b'z', b'z', b'z', 3, 0, 0, 0]);
    let compressed = snap::raw::Encoder::new().compress_vec(&data).unwrap();
    let mut reader = SnappyReader::new(&compressed, Vec::new()).unwrap();
    let got = find_while_decoding(&mut reader, 0, &icmp, &target, |k, _| k.to_vec()).unwrap();
    assert_eq!(got, None);
    assert!(parse(data).is_err());
}

/// A block read after another's drop on the same thread, whose length the dropped block's
/// buffer fits, is decompressed into that buffer; its bytes are exactly its own, whatever the
/// buffer held.
#[test]
fn a_dropped_blocks_buffer_carries_the_next_block_it_fits() {
    let first = build(&entries(200), 16);
    let second_raw = build(&entries(190), 16);
    let slack = first.len() - second_raw.len();
    assert!(slack <= second_raw.len() / 8, "the first block's buffer fits the second");
    let block = parse(first).unwrap();
    let address = block.data.as_ptr();
    drop(block);

    // The second block stored as a table stores it: Snappy, then the type and checksum.
    let mut stored = snap::raw::Encoder::new().compress_vec(&second_raw).unwrap();
    let kind = crate::table::format::Compression::Snappy as u8;
    let crc = crate::coding::mask_crc(crate::table::format::block_crc(&stored, kind));
    stored.push(kind);
    stored.extend_from_slice(&crc.to_le_bytes());
    let expanded = crate::table::format::expand_stored_block(&stored, true).unwrap();
    assert_eq!(expanded.as_ptr(), address, "the spare buffer is reused");
    assert_eq!(expanded, second_raw, "every byte is the block's own");
    let block = parse(expanded).unwrap();
    assert!(block.charge() >= block.size());
    assert_eq!(block.charge(), block.data.held());
}

/// A spare buffer much larger than the block asked for is not used (the block would be
/// charged far more than its bytes) and stays the spare; one too small is not used either.
#[test]
fn a_spare_buffer_is_used_only_for_a_block_of_about_its_size() {
    let block = parse(build(&entries(400), 16)).unwrap();
    let len = block.size();
    let address = block.data.as_ptr();
    drop(block);
    let small = block_buffer(len / 2);
    assert_ne!(small.as_ptr(), address, "far smaller: a new buffer");
    assert_eq!(small.len(), len / 2);
    let large = block_buffer(len + 1);
    assert_ne!(large.as_ptr(), address, "larger: a new buffer");
    let fits = block_buffer(len - len / 16);
    assert_eq!(fits.as_ptr(), address, "the spare was kept for a block it fits");
    assert_eq!(fits.len(), len - len / 16);
}

/// The block cache's copy of a stored block reads as the block does and holds (and is charged)
/// exactly what the block's search form will, so that the form takes the copy's place in the
/// allocator's heap; a form, and a block in a mapping, are not copied.
#[test]
fn a_cache_copy_holds_its_search_forms_size() {
    let cmp = crate::key::InternalKeyComparator::new(bytewise());
    let users: Vec<Vec<u8>> = (0..300u32).map(|i| format!("{:016}", i * 7).into_bytes()).collect();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = users
        .iter()
        .enumerate()
        .map(|(i, u)| (ikey(u, 1_000 - i as u64), vec![b'v'; i % 120]))
        .collect();
    for interval in [1, 2, 16] {
        let stored = parse(build(&entries, interval)).unwrap();
        let copy = Arc::new(stored.cache_copy().expect("a stored block in the heap"));
        assert_ne!(copy.data.as_ptr(), stored.data.as_ptr());
        assert_eq!(&*copy.data, &*stored.data);
        assert_eq!(scan(&copy, cmp_dyn()).unwrap(), entries);
        let probe = ikey(&users[150], 2_000);
        let answer = |b: &Block| b.find(&cmp, &probe, |k, v| (k.to_vec(), v.to_vec())).unwrap();
        assert_eq!(answer(&copy), answer(&stored));
        let form = stored.searchable(true).expect("fences at least");
        assert_eq!(copy.data.held(), form.data.held(), "restart interval {interval}");
        assert_eq!(copy.charge(), form.data.held());
        assert!(form.cache_copy().is_none(), "a search form is cached as it is");
    }
    let data = build(&entries, 16);
    let len = data.len();
    let file: Arc<dyn RandomAccessFile> = Arc::new(MappedBytes(data));
    let mapped = Block::in_mapping(file, 0, len, len, path(), |_| Ok(true)).unwrap().unwrap();
    assert!(mapped.is_mapped());
    assert!(mapped.cache_copy().is_none(), "a block in a mapping is never cached");
}

/// A block whose restart array parses but whose entries do not decode whole is not copied
/// for the cache (it is cached as it is, and its readers report the damage), and nothing
/// panics.
#[test]
fn a_block_whose_entries_do_not_decode_is_not_copied() {
    let mut data = build(&entries(40), 16);
    // The first entry's value length, as a varint that never ends within the block.
    data[2] = 0xff;
    data[3] = 0xff;
    let block = parse(data).unwrap();
    assert!(block.cache_copy().is_none());
}

/// A file whose bytes are all "mapped": what a table's mapping is to a cursor.
struct MappedBytes(Vec<u8>);

impl RandomAccessFile for MappedBytes {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let at = offset as usize;
        buf.copy_from_slice(&self.0[at..at + buf.len()]);
        Ok(())
    }

    fn mapped(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.0.get(offset as usize..offset as usize + len)
    }
}

/// `data` stored as a table stores a Snappy block: compressed, then the type byte and a
/// checksum (not checked by the cursor's seek: the table checks it first). `damage` edits
/// the compressed bytes.
fn stored_snappy(data: &[u8], damage: impl FnOnce(&mut Vec<u8>)) -> Arc<dyn RandomAccessFile> {
    let mut stored = snap::raw::Encoder::new().compress_vec(data).unwrap();
    damage(&mut stored);
    mapped_snappy_block(stored)
}

/// `stored` (Snappy data) with a table's trailer (type byte and checksum), as a mapped file.
fn mapped_snappy_block(mut stored: Vec<u8>) -> Arc<dyn RandomAccessFile> {
    let kind = crate::table::format::Compression::Snappy as u8;
    let crc = crate::coding::mask_crc(crate::table::format::block_crc(&stored, kind));
    stored.push(kind);
    stored.extend_from_slice(&crc.to_le_bytes());
    Arc::new(MappedBytes(stored))
}

/// `data` (a block [`build`] made) stored as strata's table builder stores it with Snappy:
/// compressed in chunks that decode alone, with where they start (none if it has no cut).
fn stored_snappy_in_chunks(data: &[u8]) -> (Arc<dyn RandomAccessFile>, ChunkStarts) {
    let n = data.len();
    let count = u32::from_le_bytes(data[n - 4..].try_into().unwrap()) as usize;
    let entries_end = n - 4 - 4 * count;
    let restarts: Vec<u32> = data[entries_end..n - 4]
        .chunks(4)
        .map(|r| u32::from_le_bytes(r.try_into().unwrap()))
        .collect();
    let mut out = Vec::new();
    let mut encoder = snap::raw::Encoder::new();
    let (len, chunks) =
        crate::table::chunks::compress_in_chunks(&mut encoder, data, &restarts, entries_end, &mut out)
            .expect("a block with a cut");
    out.truncate(len);
    (mapped_snappy_block(out), chunks)
}

/// [`BlockIter::seek_while_decoding`] of the block `file` holds whole at offset 0.
fn seek_streamed(
    slot: &mut Option<BlockIter>,
    file: &Arc<dyn RandomAccessFile>,
    target: &[u8],
) -> Result<()> {
    seek_streamed_in_chunks(slot, file, &ChunkStarts::default(), target)
}

/// [`seek_streamed`] in a block compressed in the chunks `chunks` places.
fn seek_streamed_in_chunks(
    slot: &mut Option<BlockIter>,
    file: &Arc<dyn RandomAccessFile>,
    chunks: &ChunkStarts,
    target: &[u8],
) -> Result<()> {
    let len = (1..=1 << 16)
        .find(|&n| file.mapped(0, n + 1).is_none())
        .expect("a block under 64 KiB");
    let stored = file.mapped(0, len).unwrap();
    BlockIter::seek_while_decoding(
        slot,
        &bytewise(),
        &BytewiseComparator,
        target,
        stored,
        chunks,
        file,
        &path(),
        0,
    )
}

fn at(it: &BlockIter) -> Option<(Vec<u8>, Vec<u8>)> {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

/// A seek that decodes its block only as far as the entry it finds lands where a seek in the
/// whole block does, and every move after it (a step either way, a walk to either end,
/// another seek, a jump to either end) reads what the whole block holds: the rest is decoded
/// when needed, from where the seek stopped. The cursor is reused from probe to probe, as a
/// table's cursor is from block to block.
#[test]
fn a_seek_that_decodes_part_way_reads_what_the_whole_block_holds() {
    seeks_part_way_read_what_the_whole_block_holds(false);
}

/// The same when the block is compressed in chunks (`table::chunks`) and the seek decodes
/// from the chunk that holds its entry: every move after it reads the whole block's entries
/// (decoded again from the block's start when the cursor needs them).
#[test]
fn a_seek_from_a_chunk_reads_what_the_whole_block_holds() {
    seeks_part_way_read_what_the_whole_block_holds(true);
}

fn seeks_part_way_read_what_the_whole_block_holds(chunked: bool) {
    let model = entries(150);
    let mut probes: Vec<Vec<u8>> = model.iter().map(|(k, _)| k.clone()).collect();
    probes.extend(model.iter().map(|(k, _)| [&k[..], b"\0"].concat()));
    probes.extend([b"a".to_vec(), b"key".to_vec(), b"zzzzzzzzzz".to_vec()]);
    for restart in [1, 4, 16] {
        let data = build(&model, restart);
        let (file, chunks) = if chunked {
            stored_snappy_in_chunks(&data)
        } else {
            (stored_snappy(&data, |_| {}), ChunkStarts::default())
        };
        assert_eq!(chunks.is_empty(), !chunked, "restart interval {restart}");
        let mut slot = None;
        for (n, probe) in probes.iter().enumerate() {
            let first = model.iter().position(|(k, _)| k.as_slice() >= probe.as_slice());
            seek_streamed_in_chunks(&mut slot, &file, &chunks, probe).unwrap();
            let it = slot.as_mut().unwrap();
            assert_eq!(at(it), first.map(|i| model[i].clone()), "seek to {probe:?}");
            let Some(i) = first else {
                it.status().unwrap();
                continue;
            };
            match n % 5 {
                0 => {
                    let mut seen = Vec::new();
                    while let Some(e) = at(it) {
                        seen.push(e);
                        it.next();
                    }
                    assert_eq!(seen, model[i..], "forward from {probe:?}");
                }
                1 => {
                    let mut seen = Vec::new();
                    while let Some(e) = at(it) {
                        seen.push(e);
                        it.prev();
                    }
                    seen.reverse();
                    assert_eq!(seen, model[..=i], "backward from {probe:?}");
                }
                2 => {
                    it.seek_to_first();
                    assert_eq!(at(it), Some(model[0].clone()));
                    it.next();
                    assert_eq!(at(it), Some(model[1].clone()));
                }
                3 => {
                    it.seek_to_last();
                    assert_eq!(at(it), model.last().cloned());
                    it.prev();
                    assert_eq!(at(it), Some(model[model.len() - 2].clone()));
                }
                _ => {
                    let back = &model[i / 2].0;
                    it.seek(back);
                    assert_eq!(at(it), Some(model[i / 2].clone()), "seek back to {back:?}");
                    it.next();
                    assert_eq!(at(it), Some(model[i / 2 + 1].clone()));
                }
            }
            it.status().unwrap();
        }
    }
}

/// A value handed out of a partly decoded block (pinning it) stays what it was while the
/// cursor goes on, which then decodes the block again from its start into a buffer of its
/// own; the entries it reads are the block's.
#[test]
fn a_partial_block_someone_holds_is_decoded_anew_not_changed() {
    let model = entries(150);
    let file = stored_snappy(&build(&model, 16), |_| {});
    let mut slot = None;
    seek_streamed(&mut slot, &file, &model[40].0).unwrap();
    let it = slot.as_mut().unwrap();
    assert!(it.pending.is_some(), "the seek decoded part way");
    let pinned = it.block.slice(it.value()).expect("the value lies in the block");
    let partial = Arc::as_ptr(&it.block);
    let mut seen = Vec::new();
    while let Some(e) = at(it) {
        seen.push(e);
        it.next();
    }
    it.status().unwrap();
    assert_eq!(seen, model[40..]);
    assert_ne!(Arc::as_ptr(&it.block), partial, "the held block was not reused");
    assert_eq!(&*pinned, &model[40].1[..]);
}

/// Damage in the part of the block a seek did not decode is found when the cursor decodes
/// it: the cursor stops with a corruption error naming the file and the block's offset,
/// after the entries before the damage, and the error stays.
#[test]
fn damage_past_a_seeks_entry_stops_the_cursor_with_an_error() {
    let model = entries(150);
    let data = build(&model, 16);
    type Damage = fn(&mut Vec<u8>);
    let cases: [(&str, Damage); 2] = [
        ("cut short", |s| s.truncate(s.len() - 3)),
        ("trailing bytes", |s| s.push(0)),
    ];
    for (what, damage) in cases {
        let file = stored_snappy(&data, damage);
        for step in [InternalIterator::next, InternalIterator::prev] {
            let mut slot = None;
            seek_streamed(&mut slot, &file, &model[3].0).unwrap();
            let it = slot.as_mut().unwrap();
            assert_eq!(at(it), Some(model[3].clone()), "{what}");
            let mut steps = 0;
            while it.valid() {
                step(it);
                steps += 1;
                assert!(steps <= model.len(), "{what}: the cursor never stopped");
            }
            let err = it.status().expect_err(what);
            assert!(err.is_corruption(), "{what}: {err}");
            assert!(err.to_string().contains("000009.ldb"), "{what}: {err}");
            it.seek(&model[0].0);
            assert!(!it.valid() && it.status().is_err(), "{what}: the error stays");
        }
    }
}

/// A file whose mapping is gone: what a partial block meets if the bytes it borrows again
/// to finish can no longer be had.
struct MappingGone(MappedBytes);

impl RandomAccessFile for MappingGone {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.0.read_exact_at(offset, buf)
    }
}

/// A partial block whose stored bytes can no longer be borrowed when the cursor steps on
/// stops the cursor with a corruption error naming the file, rather than a panic or a
/// silent end.
#[test]
fn a_partial_block_whose_mapping_is_gone_stops_with_an_error() {
    let model = entries(150);
    let data = build(&model, 16);
    let mut stored = snap::raw::Encoder::new().compress_vec(&data).unwrap();
    stored.extend_from_slice(&[crate::table::format::Compression::Snappy as u8, 0, 0, 0, 0]);
    let len = stored.len();
    let bytes = MappedBytes(stored.clone());
    // The seek reads the bytes it is handed; finishing the block asks the file again.
    let file: Arc<dyn RandomAccessFile> = Arc::new(MappingGone(MappedBytes(stored)));
    let mut slot = None;
    BlockIter::seek_while_decoding(
        &mut slot,
        &bytewise(),
        &BytewiseComparator,
        &model[5].0,
        bytes.mapped(0, len).unwrap(),
        &ChunkStarts::default(),
        &file,
        &path(),
        0,
    )
    .unwrap();
    let it = slot.as_mut().unwrap();
    assert_eq!(at(it), Some(model[5].clone()));
    it.next();
    assert!(!it.valid());
    let err = it.status().expect_err("the rest of the block could not be read");
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("000009.ldb"), "{err}");
}

/// A table's count of live search forms says "maybe" for an offset while a form of a block in
/// its bucket lives, and "no" once every such form is dropped.
#[test]
fn hot_forms_count_the_forms_alive() {
    let forms = Arc::new(HotForms::new());
    assert!(!forms.may_hold(4096));
    let block = parse(build(&entries(20), 16)).unwrap();
    let form = block.searchable(true).unwrap().marked(forms.mark(4096));
    let another = forms.mark(4096);
    assert!(forms.may_hold(4096));
    drop(form);
    assert!(forms.may_hold(4096), "one form of the bucket is left");
    drop(another);
    assert!(!forms.may_hold(4096));
    // Offsets spread over the buckets: a form of one block leaves most others' unmarked.
    let mark = forms.mark(0);
    let marked = (0..1000u64).filter(|i| forms.may_hold(i * 4096)).count();
    assert!(marked < 100, "{marked} of 1000 offsets share the form's bucket");
    drop(mark);
}

/// `next_plain` steps exactly onto the entries a forward scan at a sequence number takes
/// without a second look (a visible value of a greater user key), whatever the restart
/// interval, lands where `next` does, and moves nothing otherwise.
#[test]
fn plain_steps_take_only_visible_values_of_new_user_keys() {
    use crate::key::{pack_tag, ValueKind};
    let ikey = |user: &str, seqno: u64, kind: ValueKind| {
        let mut k = user.as_bytes().to_vec();
        k.extend_from_slice(&pack_tag(seqno, kind).to_le_bytes());
        k
    };
    // (entry, whether a scan at seqno 50 takes it without a second look)
    let entries = [
        (ikey("a", 10, ValueKind::Value), false),
        (ikey("ab", 10, ValueKind::Value), true), // extends "a"
        (ikey("b", 10, ValueKind::Value), true),
        (ikey("c", 60, ValueKind::Value), false), // newer than the reader
        (ikey("c", 40, ValueKind::Value), false), // the user key of the entry before
        (ikey("d", 10, ValueKind::Deletion), false),
        (ikey("e", 10, ValueKind::BlobPointer), false),
        (ikey("f", 50, ValueKind::Value), true),
        (ikey("g", 10, ValueKind::Value), true),
        (ikey("gh", 10, ValueKind::Value), true),
        (ikey("long-key-past-sixteen-bytes-1", 9, ValueKind::Value), true),
        (ikey("long-key-past-sixteen-bytes-2", 9, ValueKind::Value), true),
    ];
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k.clone(), format!("v{i}").into_bytes()))
        .collect();
    for interval in [1, 2, 16] {
        let block = parse(build(&pairs, interval)).unwrap();
        let icmp = || Arc::new(crate::key::InternalKeyComparator::new(bytewise()));
        let (mut plain, mut reference) = (block.iter(icmp()), block.iter(icmp()));
        plain.seek_to_first();
        reference.seek_to_first();
        let mut taken = 0;
        for (i, (_, eligible)) in entries.iter().enumerate().skip(1) {
            let at = plain.key().to_vec();
            match plain.next_plain(50) {
                Some((key, value, bytes)) => {
                    assert!(eligible, "interval {interval}: stepped onto entry {i}");
                    assert_eq!((key, value), (&pairs[i].0[..], &pairs[i].1[..]));
                    assert_eq!(bytes, pairs[i].0.len() - 8 + pairs[i].1.len());
                    taken += 1;
                }
                None => {
                    assert!(!eligible, "interval {interval}: no step onto entry {i}");
                    assert_eq!(plain.key(), &at[..], "moved without stepping");
                    plain.next();
                }
            }
            reference.next();
            assert_eq!((plain.key(), plain.value()), (reference.key(), reference.value()));
        }
        assert_eq!(taken, 7, "interval {interval}");
        // At the block's last entry there is no step to take.
        assert!(plain.next_plain(u64::MAX >> 8).is_none());
        assert!(plain.valid());
        // Nor from a backward run: its key is not the scratch key a plain step decodes against.
        plain.prev();
        assert!(plain.next_plain(u64::MAX >> 8).is_none());
        plain.next();
        assert_eq!(plain.key(), &pairs[pairs.len() - 1].0[..]);
    }
}

/// On a damaged block `next_plain` never panics, and never steps where `next` would not: each
/// byte of the entries is set to a few values in turn, and every step it takes is checked
/// against a plain cursor's.
#[test]
fn plain_steps_on_damaged_blocks_do_not_panic_or_disagree() {
    use crate::key::{pack_tag, ValueKind};
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..12u64)
        .map(|i| {
            let mut k = format!("key{:03}", i * 7).into_bytes();
            k.extend_from_slice(&pack_tag(5, ValueKind::Value).to_le_bytes());
            (k, vec![b'v'; 3])
        })
        .collect();
    let good = build(&pairs, 4);
    let entries_end = good.len() - 4 * (1 + pairs.len().div_ceil(4));
    let icmp = || Arc::new(crate::key::InternalKeyComparator::new(bytewise()));
    for at in 0..entries_end {
        for byte in [0u8, 1, 0x7f, 0x80, 0xff] {
            let mut data = good.clone();
            data[at] = byte;
            let Ok(block) = parse(data) else { continue };
            let (mut plain, mut reference) = (block.iter(icmp()), block.iter(icmp()));
            plain.seek_to_first();
            reference.seek_to_first();
            while plain.valid() && reference.valid() {
                match plain.next_plain(u64::MAX >> 8) {
                    Some((key, value, _)) => {
                        reference.next();
                        assert!(reference.valid(), "byte {at} = {byte}");
                        assert_eq!((key, value), (reference.key(), reference.value()));
                    }
                    None => {
                        plain.next();
                        reference.next();
                    }
                }
                assert_eq!(plain.valid(), reference.valid(), "byte {at} = {byte}");
            }
        }
    }
}

#[test]
fn suffix_greater_is_bytewise_greater_for_every_pair_of_short_slices() {
    // Every slice of up to three bytes from {0, 1, 0x7f, 0xff}: empty ones, prefixes of each
    // other, equal first bytes and differing ones.
    let alphabet = [0u8, 1, 0x7f, 0xff];
    let mut slices: Vec<Vec<u8>> = vec![Vec::new()];
    let mut longest = slices.clone();
    for _ in 0..3 {
        longest = longest
            .iter()
            .flat_map(|s| alphabet.iter().map(move |&b| [s.as_slice(), &[b]].concat()))
            .collect();
        slices.extend(longest.iter().cloned());
    }
    assert_eq!(slices.len(), 1 + 4 + 16 + 64);
    for a in &slices {
        for b in &slices {
            assert_eq!(suffix_greater(a, b), a > b, "{a:?} against {b:?}");
        }
    }
}
