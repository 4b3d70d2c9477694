// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`LruCache`]: a sharded least-recently-used cache, bounded by the total charge of its entries.
//!
//! Each shard is a hash map from key to a slot in a slab, and the slots form a doubly linked
//! list in recency order, linked by index (no `unsafe`, no per-hit allocation). A lookup locks
//! one shard, moves the entry to the front, and clones the value (an `Arc` in practice).
//!
//! Locking: each shard has its own mutex; no operation holds two.

use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxBuildHasher;

const NIL: u32 = u32::MAX;

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
    map: std::collections::HashMap<K, u32, FxBuildHasher>,
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
            map: Default::default(),
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
/// # Example
///
/// ```
/// use strata::cache::LruCache;
/// let cache: LruCache<u64, String> = LruCache::new(10, 1);
/// cache.insert(1, "one".to_string(), 6);
/// cache.insert(2, "two".to_string(), 6); // evicts 1: 12 > 10
/// assert_eq!(cache.get(&1), None);
/// assert_eq!(cache.get(&2).as_deref(), Some("two"));
/// ```
pub struct LruCache<K, V> {
    shards: Box<[Mutex<Shard<K, V>>]>,
    hasher: FxBuildHasher,
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
            hasher: FxBuildHasher,
            capacity,
        }
    }

    fn shard(&self, key: &K) -> MutexGuard<'_, Shard<K, V>> {
        let hash = self.hasher.hash_one(key);
        // The high bits: FxHash mixes them best.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn evicts_least_recently_used_first() {
        let c: LruCache<u32, u32> = LruCache::new(3, 1);
        c.insert(1, 10, 1);
        c.insert(2, 20, 1);
        c.insert(3, 30, 1);
        assert_eq!(c.get(&1), Some(10)); // 1 is now most recent
        c.insert(4, 40, 1); // evicts 2
        assert_eq!(c.get(&2), None);
        assert_eq!(c.get(&1), Some(10));
        assert_eq!(c.get(&3), Some(30));
        assert_eq!(c.get(&4), Some(40));
        assert_eq!(c.usage(), 3);
    }

    #[test]
    fn charge_bounds_usage_and_replacement_updates_it() {
        let c: LruCache<u32, u32> = LruCache::new(100, 1);
        for i in 0..50 {
            c.insert(i, i, 7);
            assert!(c.usage() <= 100);
        }
        c.insert(49, 0, 1);
        assert_eq!(c.get(&49), Some(0));
        assert!(c.usage() <= 100);
        assert_eq!(c.remove(&49), Some(0));
        assert_eq!(c.get(&49), None);
    }

    #[test]
    fn oversized_entry_is_not_kept() {
        let c: LruCache<u32, u32> = LruCache::new(10, 1);
        c.insert(1, 1, 5);
        c.insert(2, 2, 11);
        assert_eq!(c.get(&2), None);
        assert_eq!(c.usage(), 0);
    }

    #[test]
    fn matches_a_model_under_random_operations() {
        // A simple model: a Vec in recency order.
        let c: LruCache<u16, u16> = LruCache::new(40, 1);
        let mut model: Vec<(u16, u16, usize)> = Vec::new();
        let mut x = 12345u32;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let key = (x % 64) as u16;
            if x % 3 == 0 {
                let charge = (x as usize >> 8) % 5 + 1;
                c.insert(key, step as u16, charge);
                model.retain(|e| e.0 != key);
                model.insert(0, (key, step as u16, charge));
                while model.iter().map(|e| e.2).sum::<usize>() > 40 {
                    model.pop();
                }
            } else {
                let got = c.get(&key);
                let pos = model.iter().position(|e| e.0 == key);
                assert_eq!(got, pos.map(|p| model[p].1), "step {step}");
                if let Some(p) = pos {
                    let e = model.remove(p);
                    model.insert(0, e);
                }
            }
        }
    }

    #[test]
    fn many_threads_share_it() {
        let c: Arc<LruCache<u64, Arc<Vec<u8>>>> = Arc::new(LruCache::new(1 << 16, 16));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        let k = (i * 7 + t) % 500;
                        match c.get(&k) {
                            Some(v) => assert_eq!(v[0] as u64, k % 256),
                            None => c.insert(k, Arc::new(vec![(k % 256) as u8; 100]), 100),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(c.usage() <= 1 << 16);
    }
}
