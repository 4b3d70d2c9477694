// SPDX-License-Identifier: MIT OR Apache-2.0
//! Numbered writes whose effect can be recognised after a crash: each write sets a few keys to
//! a value naming it, one of them `last`, so a recovered database shows which prefix of the
//! writes it holds, and an order-free hash of its contents shows whether it holds exactly that
//! prefix (no hole, no half batch).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use strata::{Db, WriteBatch};

/// Keys per key family.
pub const KEYS: u64 = 300;

/// The writes of a workload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Three keys and sometimes two deletions.
    Small,
    /// Every fifth value 40 KiB, so that log records span blocks.
    Big,
    /// Thirty more keys a write.
    Wide,
    /// Two more keys a write, and every eleventh write deletes a range of twenty of those
    /// keys (`delete_range`), some of them then set again by the same batch.
    Ranges,
}

/// Write `i`: three keys set to the same value (one of them `last`, naming `i`), and every
/// seventh write also deletes two keys; more per [`Shape`].
pub fn batch(i: u64, shape: Shape) -> WriteBatch {
    let mut b = WriteBatch::new();
    let len = if shape == Shape::Big && i.is_multiple_of(5) {
        40 << 10
    } else {
        (i % 61) as usize
    };
    let value = format!("{i:08}:{}", "v".repeat(len));
    b.put(format!("a{:04}", i % KEYS).as_bytes(), value.as_bytes());
    b.put(
        format!("b{:04}", (i * 7) % KEYS).as_bytes(),
        value.as_bytes(),
    );
    if i % 7 == 3 {
        b.delete(format!("a{:04}", (i * 3) % KEYS).as_bytes());
        b.delete(format!("b{:04}", (i * 5) % KEYS).as_bytes());
    }
    if shape == Shape::Wide {
        for j in 0..30 {
            b.put(
                format!("c{:04}", (i * 31 + j) % KEYS).as_bytes(),
                value.as_bytes(),
            );
        }
    }
    if shape == Shape::Ranges {
        if i % 11 == 5 {
            let from = (i * 13) % KEYS;
            b.delete_range(format!("c{from:04}"), format!("c{:04}", from + 20));
        }
        for j in 0..2 {
            b.put(format!("c{:04}", (i * 17 + j) % KEYS), value.as_bytes());
        }
    }
    b.put(b"last", value.as_bytes());
    b
}

pub fn entry_hash(key: &[u8], value: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    value.hash(&mut h);
    h.finish()
}

/// `fingerprints[k]`: an order-free hash of the contents after writes `0..k`.
pub fn fingerprints(n: u64, shape: Shape) -> Vec<u64> {
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut hash = 0u64;
    let mut out = vec![0];
    for i in 0..n {
        for op in batch(i, shape).iter() {
            if op.kind == strata::key::ValueKind::RangeDeletion {
                let doomed: Vec<Vec<u8>> = model
                    .range(op.key.to_vec()..op.value.to_vec())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in doomed {
                    let old = model.remove(&k).expect("listed");
                    hash ^= entry_hash(&k, &old);
                }
                continue;
            }
            if let Some(old) = model.remove(op.key) {
                hash ^= entry_hash(op.key, &old);
            }
            if op.kind == strata::key::ValueKind::Value {
                hash ^= entry_hash(op.key, op.value);
                model.insert(op.key.to_vec(), op.value.to_vec());
            }
        }
        out.push(hash);
    }
    out
}

/// Reads the whole database: the number of writes it holds (one past the write named by
/// `last`, 0 without it) and the hash of its contents, to compare with [`fingerprints`].
pub fn recovered_prefix(db: &Db) -> Result<(u64, u64), String> {
    let mut hash = 0u64;
    let mut last = None;
    for item in db.scan().map_err(|e| e.to_string())? {
        let (k, v) = item.map_err(|e| format!("scan: {e}"))?;
        hash ^= entry_hash(&k, &v);
        if k == b"last" {
            let n: u64 = std::str::from_utf8(&v[..8])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or("unreadable last")?;
            last = Some(n + 1);
        }
    }
    Ok((last.unwrap_or(0), hash))
}
