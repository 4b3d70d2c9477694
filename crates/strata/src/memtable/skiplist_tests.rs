// SPDX-License-Identifier: MIT OR Apache-2.0
//! Skiplist tests. Small enough to run under Miri (`cargo +nightly miri test memtable`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;
use crate::comparator::bytewise;
use crate::key::{pack_tag, ValueKind};

fn list() -> SkipList {
    SkipList::new(InternalKeyComparator::new(bytewise()))
}

fn ikey(user: &[u8], seqno: u64) -> Vec<u8> {
    let mut k = user.to_vec();
    k.extend_from_slice(&pack_tag(seqno, ValueKind::Value).to_le_bytes());
    k
}

/// A value derived from the key, so a reader can tell a torn or misplaced entry.
fn value_for(user: &[u8], seqno: u64) -> Vec<u8> {
    let mut v = user.to_vec();
    v.extend_from_slice(&seqno.to_be_bytes());
    v.reverse();
    v
}

fn scale(n: usize) -> usize {
    if cfg!(miri) {
        n / 20 + 1
    } else {
        n
    }
}

#[test]
fn empty_list_has_no_entries() {
    let l = list();
    let mut c = Cursor::new(&l);
    c.seek_to_first();
    assert!(!c.valid());
    c.seek_to_last();
    assert!(!c.valid());
    c.seek(&ikey(b"a", 1));
    assert!(!c.valid());
    assert_eq!(l.len(), 0);
}

#[test]
fn matches_a_sorted_model_in_every_direction() {
    let l = list();
    let mut model = BTreeSet::new();
    let mut x = 0x1234_5678_u32;
    for seqno in 1..=scale(2000) as u64 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let user = format!("k{:05}", x % 700).into_bytes();
        l.insert(
            &user,
            pack_tag(seqno, ValueKind::Value),
            &value_for(&user, seqno),
        );
        model.insert((user, std::cmp::Reverse(seqno)));
    }
    assert_eq!(l.len(), model.len());
    let expected: Vec<Vec<u8>> = model.iter().map(|(u, s)| ikey(u, s.0)).collect();

    let mut c = Cursor::new(&l);
    c.seek_to_first();
    let mut forward = Vec::new();
    while c.valid() {
        forward.push(c.key().to_vec());
        c.next();
    }
    assert_eq!(forward, expected);

    c.seek_to_last();
    let mut backward = Vec::new();
    while c.valid() {
        backward.push(c.key().to_vec());
        c.prev();
    }
    backward.reverse();
    assert_eq!(backward, expected);

    for (i, k) in expected.iter().enumerate().step_by(7) {
        c.seek(k);
        assert_eq!(c.key(), &k[..]);
        let parsed = crate::key::ParsedInternalKey::parse(k).unwrap();
        assert_eq!(c.value(), value_for(parsed.user_key, parsed.seqno));
        if i > 0 {
            c.prev();
            assert_eq!(c.key(), &expected[i - 1][..]);
        }
    }
    // A seek for the newest version of a user key finds the highest seqno.
    c.seek(&ikey(&expected[0][..6], crate::key::MAX_SEQNO));
    assert_eq!(c.key(), &expected[0][..]);
    c.seek(&ikey(b"zzzzzz", 1));
    assert!(!c.valid());
}

/// Steps back that keep their fingers land where a search from the head does, however the
/// cursor got to its node and whatever was inserted between the steps: before the node, after
/// it, and between it and the node before (which the next step back must then find).
#[test]
fn steps_back_agree_with_a_search_from_the_head_while_the_list_grows() {
    let l = list();
    let mut seqno = 0;
    let mut add = |user: &[u8]| {
        seqno += 1;
        l.insert(
            user,
            pack_tag(seqno, ValueKind::Value),
            &value_for(user, seqno),
        );
    };
    for i in 0..scale(3000) {
        add(format!("k{:06}", 10 * i).as_bytes());
    }
    let mut c = Cursor::new(&l);
    c.seek_to_last();
    let mut x = 0x9e37_79b9_u32;
    let mut steps = 0;
    while c.valid() {
        let here = c.key().to_vec();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let user = crate::key::ParsedInternalKey::parse(&here)
            .unwrap()
            .user_key
            .to_vec();
        let n: u32 = std::str::from_utf8(&user[1..]).unwrap().parse().unwrap();
        match x % 8 {
            // Just before the current key: the node the step must land on now.
            0 if n > 0 => add(format!("k{:06}", n - 1).as_bytes()),
            // Far before and after it.
            1 => add(format!("k{:06}", x % 30_000).as_bytes()),
            // Turn around: forward and back again (the fingers are then not for this node).
            2 => {
                c.next();
                if c.valid() {
                    c.prev();
                } else {
                    c.seek_to_last();
                }
                assert_eq!(c.key(), &here[..]);
            }
            _ => {}
        }
        let expected = l.find_less_than(&here);
        c.prev();
        if expected == l.head {
            assert!(!c.valid());
        } else {
            assert!(c.valid());
            assert_eq!(c.key(), l.key_of(expected), "after {steps} steps back");
        }
        steps += 1;
    }
    assert!(steps > scale(3000));
    check_levels(&l);
}

/// Walks every level of `l` and checks that each is in strictly ascending key order and that
/// every node linked at a level is also linked at each level below it.
fn check_levels(l: &SkipList) {
    let mut below: Option<BTreeSet<Vec<u8>>> = None;
    for level in (0..MAX_HEIGHT).rev() {
        let mut keys = BTreeSet::new();
        let mut last: Option<Vec<u8>> = None;
        let mut x = l.next(l.head, level);
        while !x.is_null() {
            let k = l.key_of(x).to_vec();
            if let Some(prev) = &last {
                assert_eq!(
                    l.comparator.compare(prev, &k),
                    CmpOrdering::Less,
                    "level {level} out of order"
                );
            }
            last = Some(k.clone());
            keys.insert(k);
            x = l.next(x, level);
        }
        if let Some(upper) = &below {
            assert!(
                upper.is_subset(&keys),
                "a node at level {} is missing from {level}",
                level + 1
            );
        }
        below = Some(keys);
    }
    assert_eq!(below.unwrap().len(), l.len());
}

#[test]
fn ascending_runs_and_random_inserts_interleave() {
    // Appends take the tail shortcut; inserts in the middle take the search. Mixing them must
    // keep every level linked in order.
    let l = list();
    let mut model = BTreeSet::new();
    let mut x = 0x9e37_79b9_u32;
    let mut seqno = 0;
    for round in 0..scale(40) as u32 {
        for i in 0..25 {
            seqno += 1;
            let user = format!("k{:05}", round * 25 + i).into_bytes();
            l.insert(&user, pack_tag(seqno, ValueKind::Value), b"v");
            model.insert((user, std::cmp::Reverse(seqno)));
        }
        for _ in 0..10 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            seqno += 1;
            let user = format!("k{:05}", x % (round * 25 + 40)).into_bytes();
            l.insert(&user, pack_tag(seqno, ValueKind::Value), b"v");
            model.insert((user, std::cmp::Reverse(seqno)));
        }
        check_levels(&l);
    }
    let expected: Vec<Vec<u8>> = model.iter().map(|(u, s)| ikey(u, s.0)).collect();
    let mut c = Cursor::new(&l);
    for k in &expected {
        c.seek(k);
        assert_eq!(c.key(), &k[..]);
    }
    c.seek_to_last();
    assert_eq!(c.key(), &expected.last().unwrap()[..]);
}

#[test]
fn empty_keys_and_values_and_large_values_are_kept() {
    let l = list();
    l.insert(b"", pack_tag(1, ValueKind::Value), b"");
    let big = vec![9u8; scale(100_000)];
    l.insert(b"big", pack_tag(2, ValueKind::Deletion), &big);
    let mut c = Cursor::new(&l);
    c.seek_to_first();
    assert_eq!(c.key(), &ikey(b"", 1)[..]);
    assert_eq!(c.value(), b"");
    c.next();
    assert_eq!(c.value(), &big[..]);
    assert!(l.memory_usage() > big.len());
}

#[test]
fn readers_see_a_consistent_sorted_list_while_a_writer_inserts() {
    let l = Arc::new(list());
    let done = Arc::new(AtomicBool::new(false));
    // Each reader rescans the whole list, so the work grows with the square of the inserts:
    // under Miri 200 inserts (about 5 s) keep it a CI-sized check; 1,000 took 88 s.
    let n = if cfg!(miri) { 200 } else { 20_000 };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let l = l.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut last_count = 0;
                let mut scans = 0;
                while !done.load(Ordering::Acquire) || scans < 2 {
                    let mut c = Cursor::new(&*l);
                    c.seek_to_first();
                    let mut count = 0;
                    let mut prev: Option<Vec<u8>> = None;
                    while c.valid() {
                        let k = c.key();
                        let p = crate::key::ParsedInternalKey::parse(k).expect("well-formed key");
                        assert_eq!(c.value(), value_for(p.user_key, p.seqno), "torn entry");
                        if let Some(prev) = &prev {
                            assert!(l.comparator.compare(prev, k).is_lt(), "out of order");
                        }
                        prev = Some(k.to_vec());
                        count += 1;
                        c.next();
                    }
                    assert!(count >= last_count, "entries disappeared");
                    last_count = count;
                    scans += 1;
                }
            })
        })
        .collect();
    let mut x = 77u64;
    for seqno in 1..=n {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let user = (x >> 40).to_be_bytes();
        l.insert(
            &user,
            pack_tag(seqno, ValueKind::Value),
            &value_for(&user, seqno),
        );
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(l.len() as u64, n);
}

#[test]
fn heights_follow_the_branching_factor() {
    let mut state = 99;
    let n = 100_000;
    let mut counts = [0usize; MAX_HEIGHT + 1];
    for _ in 0..n {
        counts[SkipList::random_height(&mut state)] += 1;
    }
    // About 3/4 of towers have height 1, 3/16 height 2.
    assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
    assert!((16_000..21_500).contains(&counts[2]), "{counts:?}");
    assert_eq!(counts[0], 0);
}
