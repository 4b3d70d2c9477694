// SPDX-License-Identifier: MIT OR Apache-2.0
//! `RowCache`: the answers of recent point lookups at the newest state, keyed by user key,
//! bounded in bytes. A hit answers a `get` without searching the memtables, the levels' file
//! lists, the index and data blocks (`Options::row_cache_capacity`; off by default).
//!
//! Invariant: a cached answer is served only while it is the answer a `get` of its key at
//! the newest sequence number would give now.
//!
//! How: keys map by hash to `STRIPES` stripes, each with a generation that only grows. A
//! write, once visible and before it is acknowledged, bumps the generation of the stripe of
//! every key it wrote ([`RowCache::invalidate`]: one hash and one atomic add per key, no lock);
//! a range deletion bumps them all. A reader takes its key's stripe generation before it loads
//! the seqno and the view ([`RowCache::lookup`]) and tags its answer with it; a hit is served only
//! if its tag equals the stripe's generation loaded before the entry was read. An answer computed before a write's
//! visibility therefore carries an older tag than the write's bump left, and a reader that
//! loads a bumped generation (acquire, against the writer's release) also sees the write. A
//! write to one key makes the cached answers of its stripe's other keys stale too: they are
//! misses until read again, which is the price of a write path without locks.
//!
//! Hits take no lock of ours: `quick_cache` takes a shard's read lock for the lookup.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Stripes of invalidation; a power of two. More stripes make a write spoil fewer other
/// keys' answers; 4096 generations take 32 KiB.
const STRIPES: usize = 4096;

/// What a cached lookup found: the value, or that the key has none.
pub(crate) type Row = Option<Arc<[u8]>>;

/// A cached answer and the generation of its stripe when its reader began.
type Tagged = (u64, Row);

/// Bytes charged to an entry beyond its key and value: the cache's slot, the `Arc`'s
/// counters and both allocations' headers, roughly.
const ENTRY_OVERHEAD: u64 = 64;

#[derive(Debug, Clone, Copy)]
struct RowWeighter;

impl quick_cache::Weighter<Box<[u8]>, Tagged> for RowWeighter {
    fn weight(&self, key: &Box<[u8]>, (_, row): &Tagged) -> u64 {
        key.len() as u64 + row.as_ref().map_or(0, |v| v.len() as u64) + ENTRY_OVERHEAD
    }
}

/// The typical entry, for sizing the cache's index.
const TYPICAL_ENTRY_BYTES: usize = 192;

/// A reader's ticket: its key's hash, and the generation of the key's stripe before it read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowTicket {
    hash: u64,
    generation: u64,
}



/// The row cache of one database. See the module documentation for its invariant.
pub(crate) struct RowCache {
    cache: quick_cache::sync::Cache<Box<[u8]>, Tagged, RowWeighter>,
    /// Each stripe's generation, bumped (release) by every write of one of its keys.
    generations: Box<[AtomicU64]>,
    hasher: foldhash::fast::FixedState,
    /// The admission filter ("doorkeeper"): two bits per key looked up and missed, in one
    /// word. A missed key is cached only when both its bits were set already, that is on its
    /// second miss (or by a false positive), so that a scan or a uniform random read over
    /// more keys than fit does not pay to copy and insert every answer only to evict it.
    /// Emptied after an eighth as many marks as it has bits (a quarter of its bits set at
    /// most), so that a key never seen passes by chance about 2% of the time at most (both
    /// bits set by others). Racy by design: a lost update only
    /// admits or refuses one key more.
    seen: Box<[AtomicU64]>,
    seen_marks: AtomicU64,
    /// Lookups that found a stale answer (counted as misses), and answers inserted: relaxed
    /// counters, off the hit path.
    stale: AtomicU64,
    inserts: AtomicU64,
}

impl std::fmt::Debug for RowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowCache")
            .field("capacity", &self.cache.capacity())
            .field("usage", &self.cache.weight())
            .finish()
    }
}

impl RowCache {
    /// A cache holding at most `capacity_bytes` of keys and values (with their overhead).
    pub(crate) fn new(capacity_bytes: usize) -> Self {
        let items = (capacity_bytes / TYPICAL_ENTRY_BYTES).max(1);
        RowCache {
            cache: quick_cache::sync::Cache::with_weighter(
                items,
                capacity_bytes as u64,
                RowWeighter,
            ),
            generations: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            hasher: foldhash::fast::FixedState::with_seed(0x5354_5241_5441),
            // About 16 bits per entry the cache holds, 8 MiB at most.
            seen: (0..(items / 4).next_power_of_two().clamp(64, 1 << 20))
                .map(|_| AtomicU64::new(0))
                .collect(),
            seen_marks: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Marks the key of `hash` as seen; true if it was seen before.
    fn admit(&self, hash: u64) -> bool {
        let word = &self.seen[(hash >> 32) as usize & (self.seen.len() - 1)];
        let bits = (1u64 << ((hash >> 20) & 63)) | (1u64 << ((hash >> 26) & 63));
        if word.load(Ordering::Relaxed) & bits == bits {
            return true;
        }
        word.fetch_or(bits, Ordering::Relaxed);
        let marks = self.seen_marks.fetch_add(1, Ordering::Relaxed) + 1;
        if marks >= self.seen.len() as u64 * 8 {
            self.seen_marks.store(0, Ordering::Relaxed);
            for w in self.seen.iter() {
                w.store(0, Ordering::Relaxed);
            }
        }
        false
    }

    fn generation(&self, hash: u64) -> &AtomicU64 {
        &self.generations[(hash as usize) & (STRIPES - 1)]
    }

    /// The cached answer for `key` if there is one still valid; otherwise the ticket to pass
    /// to [`RowCache::insert`]. Call it before loading the seqno and the view a lookup of
    /// `key` will read. The key is hashed once for both.
    pub(crate) fn lookup(&self, key: &[u8]) -> Result<Row, RowTicket> {
        let hash = self.hash(key);
        let generation = self.generation(hash).load(Ordering::Acquire);
        if let Some((tag, row)) = self.cache.get(key) {
            if tag == generation {
                return Ok(row);
            }
            self.stale.fetch_add(1, Ordering::Relaxed);
        }
        Err(RowTicket { hash, generation })
    }

    /// The valid cached answer for `key`, if any (tests).
    #[cfg(test)]
    fn get(&self, key: &[u8]) -> Option<Row> {
        self.lookup(key).ok()
    }

    /// A ticket for `key` whether or not an answer is cached (tests).
    #[cfg(test)]
    fn begin(&self, key: &[u8]) -> RowTicket {
        let hash = self.hash(key);
        RowTicket {
            hash,
            generation: self.generation(hash).load(Ordering::Acquire),
        }
    }

    /// Caches `value` (`None`: the key has none) as the answer for `key`, tagged with the
    /// ticket's generation, unless this is the key's first miss (see `seen`) or a write of
    /// its stripe came since the ticket (then the answer would never be served). Returns
    /// whether it was cached.
    pub(crate) fn insert(&self, ticket: RowTicket, key: &[u8], value: Option<&[u8]>) -> bool {
        if !self.admit(ticket.hash)
            || self.generation(ticket.hash).load(Ordering::Relaxed) != ticket.generation
        {
            return false;
        }
        self.cache
            .insert(key.into(), (ticket.generation, value.map(Arc::from)));
        self.inserts.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Makes the cached answer for `key` stale: called by a write of it after the write is
    /// visible, before it is acknowledged.
    pub(crate) fn invalidate(&self, key: &[u8]) {
        self.generation(self.hash(key))
            .fetch_add(1, Ordering::Release);
    }

    /// Makes every cached answer stale and frees them: called by a range deletion after it is
    /// visible.
    pub(crate) fn invalidate_all(&self) {
        for generation in self.generations.iter() {
            generation.fetch_add(1, Ordering::Release);
        }
        self.cache.clear();
    }

    /// Lookups answered from the cache.
    pub(crate) fn hit_count(&self) -> u64 {
        self.cache
            .hits()
            .saturating_sub(self.stale.load(Ordering::Relaxed))
    }

    /// Lookups that found no answer, or a stale one.
    pub(crate) fn miss_count(&self) -> u64 {
        self.cache.misses() + self.stale.load(Ordering::Relaxed)
    }

    /// Answers put in the cache.
    pub(crate) fn insert_count(&self) -> u64 {
        self.inserts.load(Ordering::Relaxed)
    }

    /// Bytes charged to the cached entries.
    pub(crate) fn usage(&self) -> u64 {
        self.cache.weight()
    }

    /// The capacity in bytes.
    pub(crate) fn capacity(&self) -> u64 {
        self.cache.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: &[u8]) -> Row {
        Some(Arc::from(v))
    }

    /// Inserts as a key's second miss does (the first only marks it seen).
    fn insert_twice(cache: &RowCache, key: &[u8], v: Option<&[u8]>) -> bool {
        let first = cache.insert(cache.begin(key), key, v);
        first || cache.insert(cache.begin(key), key, v)
    }

    #[test]
    fn caches_values_and_absences() {
        let cache = RowCache::new(1 << 20);
        assert!(cache.get(b"a").is_none());
        assert!(!cache.insert(cache.begin(b"a"), b"a", Some(b"1")));
        assert!(cache.get(b"a").is_none(), "a key's first miss only marks it seen");
        assert!(cache.insert(cache.begin(b"a"), b"a", Some(b"1")));
        assert!(insert_twice(&cache, b"b", None));
        assert_eq!(cache.get(b"a"), Some(value(b"1")));
        assert_eq!(cache.get(b"b"), Some(None));
        assert!(cache.get(b"c").is_none());
    }

    #[test]
    fn an_insert_begun_before_an_invalidation_is_refused() {
        let cache = RowCache::new(1 << 20);
        assert!(!cache.insert(cache.begin(b"k"), b"k", Some(b"seen")));
        let ticket = cache.begin(b"k");
        cache.invalidate(b"k");
        assert!(!cache.insert(ticket, b"k", Some(b"stale")));
        assert!(cache.get(b"k").is_none());
        // A ticket taken after the invalidation inserts.
        assert!(cache.insert(cache.begin(b"k"), b"k", Some(b"fresh")));
        assert_eq!(cache.get(b"k"), Some(value(b"fresh")));
    }

    #[test]
    fn an_invalidation_after_an_insert_makes_it_stale() {
        let cache = RowCache::new(1 << 20);
        assert!(insert_twice(&cache, b"k", Some(b"old")));
        cache.invalidate(b"k");
        assert!(cache.get(b"k").is_none());
        // Another key of the same stripe is spoiled too; one of another stripe is not.
        let other = (0u32..)
            .map(|i| i.to_be_bytes())
            .find(|k| {
                (cache.hash(k) as usize & (STRIPES - 1))
                    == (cache.hash(b"x") as usize & (STRIPES - 1))
            })
            .unwrap();
        assert!(insert_twice(&cache, b"x", Some(b"1")));
        assert!(insert_twice(&cache, b"y", Some(b"2")));
        cache.invalidate(&other);
        assert!(cache.get(b"x").is_none());
        if cache.hash(b"y") as usize & (STRIPES - 1) != cache.hash(b"x") as usize & (STRIPES - 1) {
            assert_eq!(cache.get(b"y"), Some(value(b"2")));
        }
    }

    #[test]
    fn invalidate_all_empties_and_refuses_earlier_tickets() {
        let cache = RowCache::new(1 << 20);
        let keys: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
        for k in &keys {
            assert!(insert_twice(&cache, k, Some(k)));
        }
        let tickets: Vec<_> = keys.iter().map(|k| cache.begin(k)).collect();
        cache.invalidate_all();
        assert_eq!(cache.usage(), 0);
        for (k, t) in keys.iter().zip(tickets) {
            assert!(cache.get(k).is_none());
            assert!(!cache.insert(t, k, Some(b"stale")));
        }
    }

    #[test]
    fn stays_within_its_capacity() {
        let cache = RowCache::new(64 << 10);
        for i in 0..10_000u32 {
            let k = i.to_be_bytes();
            insert_twice(&cache, &k, Some(&[7u8; 100]));
        }
        assert!(cache.usage() <= cache.capacity(), "{:?}", cache);
        assert!(cache.usage() > 0);
    }

    #[test]
    fn keys_missed_once_are_mostly_not_admitted() {
        // A uniform read over many more keys than fit: most keys miss once and are not
        // copied into the cache; the doorkeeper empties itself and keeps refusing.
        let cache = RowCache::new(64 << 10);
        let admitted = (0..200_000u32)
            .filter(|i| {
                let k = i.to_be_bytes();
                cache.insert(cache.begin(&k), &k, Some(&[1u8; 100]))
            })
            .count();
        assert!(admitted < 200_000 / 10, "admitted {admitted} of 200000");
    }
}
