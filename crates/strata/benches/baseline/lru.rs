// SPDX-License-Identifier: MIT OR Apache-2.0
//! The hand-written sharded LRU that `benches/cache.rs` measures `quick_cache` against.
//!
//! It was strata's first block cache; quick_cache won the comparison (docs/benchmarks.md), so the
//! library uses quick_cache and this stays here as the baseline that keeps the comparison
//! reproducible.
//!
//! A sharded least-recently-used cache, bounded by the total charge of its entries.
//!
//! Each shard is a hash map from key to a slot in a slab, and the slots form a doubly linked
//! list in recency order, linked by index (no `unsafe`, no per-hit allocation). A lookup locks
//! one shard, moves the entry to the front, and clones the value (an `Arc` in practice).
//!
//! Locking: each shard has its own mutex; no operation holds two.

use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};

use foldhash::fast::FixedState;

const NIL: u32 = u32::MAX;

/// A fixed seed: the cache's layout need not be unpredictable (keys are not chosen by an
/// adversary), and a fixed seed keeps benchmarks repeatable.
const HASH_SEED: u64 = 0x5eed_cac4e;

struct Slot<K, V> {
    key: K,
    value: V,
    charge: usize,
    prev: u32,
    next: u32,
}

/// One shard.
///
/// Invariants:
/// 1. `map` holds exactly the keys of the slots on the list from `head` to `tail`.
/// 2. `usage` is the sum of those slots' charges.
/// 3. Slots not on the list are in `free` (their contents are stale and unused).
struct Shard<K, V> {
    map: std::collections::HashMap<K, u32, FixedState>,
    slots: Vec<Option<Slot<K, V>>>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
    usage: usize,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Shard<K, V> {
    fn new(capacity: usize) -> Self {
        Shard {
            map: std::collections::HashMap::with_hasher(FixedState::with_seed(HASH_SEED)),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            usage: 0,
            capacity,
        }
    }

    fn slot(&mut self, i: u32) -> &mut Slot<K, V> {
        self.slots[i as usize]
            .as_mut()
            .expect("invariant 3: linked slots are full")
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let s = self.slot(i);
            (s.prev, s.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.slot(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slot(next).prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let head = self.head;
        {
            let s = self.slot(i);
            s.prev = NIL;
            s.next = head;
        }
        if head == NIL {
            self.tail = i;
        } else {
            self.slot(head).prev = i;
        }
        self.head = i;
    }

    fn get(&mut self, key: &K) -> Option<V> {
        let i = *self.map.get(key)?;
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        Some(self.slot(i).value.clone())
    }

    fn remove_slot(&mut self, i: u32) -> Slot<K, V> {
        self.unlink(i);
        let slot = self.slots[i as usize].take().expect("invariant 3");
        self.free.push(i);
        self.usage -= slot.charge;
        slot
    }

    fn insert(&mut self, key: K, value: V, charge: usize) {
        if let Some(&old) = self.map.get(&key) {
            self.remove_slot(old);
        }
        let slot = Slot {
            key: key.clone(),
            value,
            charge,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        };
        self.map.insert(key, i);
        self.push_front(i);
        self.usage += charge;
        while self.usage > self.capacity && self.tail != NIL {
            let victim = self.remove_slot(self.tail);
            self.map.remove(&victim.key);
        }
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.map.remove(key)?;
        Some(self.remove_slot(i).value)
    }
}

/// A sharded LRU cache holding at most `capacity` in total charge.
///
/// An entry larger than its shard's share of the capacity is not kept.
///
pub struct LruCache<K, V> {
    shards: Box<[Mutex<Shard<K, V>>]>,
    hasher: FixedState,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> LruCache<K, V> {
    /// A cache of total `capacity` split over `shards` shards (rounded up to a power of two).
    pub fn new(capacity: usize, shards: usize) -> Self {
        let shards = shards.max(1).next_power_of_two();
        let per_shard = capacity.div_ceil(shards);
        LruCache {
            shards: (0..shards)
                .map(|_| Mutex::new(Shard::new(per_shard)))
                .collect(),
            hasher: FixedState::with_seed(HASH_SEED),
            capacity,
        }
    }

    fn shard(&self, key: &K) -> MutexGuard<'_, Shard<K, V>> {
        let hash = self.hasher.hash_one(key);
        // The shard comes from the high half, the shard's map uses the whole hash.
        let index = (hash >> 32) as usize & (self.shards.len() - 1);
        self.shards[index].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value for `key`, marking it most recently used.
    pub fn get(&self, key: &K) -> Option<V> {
        self.shard(key).get(key)
    }

    /// Inserts `value` with its `charge`, replacing any value for `key` and evicting the least
    /// recently used entries of its shard while the shard is over capacity.
    pub fn insert(&self, key: K, value: V, charge: usize) {
        self.shard(&key).insert(key, value, charge);
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &K) -> Option<V> {
        self.shard(key).remove(key)
    }

    /// The total charge of the entries held.
    pub fn usage(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).usage)
            .sum()
    }

    /// The capacity given at creation.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
