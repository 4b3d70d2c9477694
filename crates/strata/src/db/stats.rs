// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`DbStats`]: what [`Db::stats`](crate::Db::stats) returns, and the counters it is read
//! from (`Counters`). The text properties (`leveldb.stats`, `leveldb.num-files-at-levelN`,
//! `leveldb.approximate-memory-usage`) are printed from a `DbStats` (`properties.rs`), so the
//! struct is their one source.
//!
//! Where each figure comes from:
//! - files and bytes per level, memtable sizes: the current read view (an `ArcSwap` load, no
//!   lock);
//! - writes, log appends and syncs, flushes, compactions and stalls: `Counters`, relaxed
//!   atomics bumped where the work happens (the write leader, the background thread, a writer
//!   that waits for room). None is on the read path;
//! - block and table cache hits and misses: the caches' own per-shard counters (quick_cache's
//!   `stats`), bumped under the shard lock a lookup takes anyway;
//! - blob files (only when key-value separation is on or blob files exist): the same list as
//!   [`Db::blob_files`](crate::Db::blob_files), which takes the state mutex briefly.
//!
//! Locking: counters are independent relaxed atomics. A `DbStats` is not one atomic snapshot:
//! a flush finishing while it is read may show in one field and not yet in another.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::DbInner;
use crate::version::version::total_file_size;
use crate::version::NUM_LEVELS;

/// One level of the tree, as [`DbStats::levels`] describes it.
///
/// The compaction figures are LevelDB's (`leveldb.stats`): a flush that writes its table into
/// this level counts as one of its compactions (with no bytes read), as a compaction whose
/// outputs go to this level does; a compaction's bytes read are its inputs from both levels.
/// A trivial move (a table moved down a level without being rewritten) counts nowhere here.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put("k", "v")?;
/// db.compact_range(None, None)?;
/// let stats = db.stats();
/// let level = stats.levels.iter().find(|l| l.file_count > 0).unwrap();
/// assert_eq!(level.file_count, 1);
/// assert!(level.size_bytes > 0 && level.written_bytes > 0);
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Tables in the level now.
    pub file_count: u64,
    /// Their total size in bytes.
    pub size_bytes: u64,
    /// Bytes compactions into this level have read (their inputs, from both levels), since
    /// the database opened.
    pub read_bytes: u64,
    /// Bytes flushes and compactions have written into this level, since it opened.
    pub written_bytes: u64,
    /// Flushes and compactions that wrote into this level, since it opened.
    pub compaction_count: u64,
    /// The time they took.
    pub compaction_time: Duration,
}

/// Writes held up because the tree was behind: LevelDB's slowdown (each write delayed by
/// about 1 ms while level 0 has `Options::l0_slowdown_writes_trigger` files or more, 20 by
/// default) and its stops (writes wait for the background thread while level 0 has
/// `Options::l0_stop_writes_trigger` files, 36 by default, or while the memtable is full and
/// the previous one is still being flushed). Counted since the database opened.
///
/// A stop is counted once per write that waited, however many times it woke before it had
/// room; its time is all of that wait. The flush that [`Db::compact_range`] starts takes its
/// turn in the writers' queue, and counts as a write here when it waits.
///
/// [`Db::compact_range`]: crate::Db::compact_range
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put("k", "v")?;
/// let stalls = db.stats().stalls;
/// assert_eq!(stalls.l0_slowdown_count, 0); // one small write: no reason to wait
/// println!("{:?} stopped for a full memtable", stalls.memtable_stop_time);
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteStalls {
    /// Writes delayed because level 0 reached the slowdown trigger.
    pub l0_slowdown_count: u64,
    /// The time those delays took.
    pub l0_slowdown_time: Duration,
    /// Writes that waited because level 0 reached the stop trigger.
    pub l0_stop_count: u64,
    /// The time they waited.
    pub l0_stop_time: Duration,
    /// Writes that waited for the previous memtable's flush, the current one being full.
    pub memtable_stop_count: u64,
    /// The time they waited.
    pub memtable_stop_time: Duration,
}

/// The block cache's figures, as [`DbStats::block_cache`] reports them. A cache shared
/// between databases (`Options::block_cache`) reports the lookups of all of them.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put("k", "v".repeat(1000))?; // compresses: a block stored uncompressed is read in place
/// db.compact_range(None, None)?; // into a table
/// db.get("k")?; // the door keeper remembers the block
/// db.get("k")?; // read again: the block is cached now
/// db.get("k")?;
/// db.get("k")?; // the block's second hit: its search form replaces it
/// let cache = db.stats().block_cache;
/// assert!(cache.hit_count >= 2 && cache.insert_count >= 1, "{cache:?}");
/// assert_eq!(cache.search_form_count, 1, "{cache:?}");
/// assert!(cache.deferred_count >= 1, "{cache:?}");
/// assert!(cache.usage_bytes <= cache.capacity_bytes);
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockCacheStats {
    /// Lookups that found their block.
    pub hit_count: u64,
    /// Lookups that did not (the block was then read from its table).
    pub miss_count: u64,
    /// Blocks put in the cache.
    pub insert_count: u64,
    /// Blocks read at their first recent miss and not put in the cache: a block is cached
    /// when it misses again soon after (`BlockCache::offer`).
    pub deferred_count: u64,
    /// Cached blocks replaced, at their second hit, by their search form: every entry's key
    /// stored whole and a summary of the keys to search, so that a lookup decodes one entry
    /// instead of up to a restart interval's.
    pub search_form_count: u64,
    /// Bytes of blocks the cache holds now.
    pub usage_bytes: u64,
    /// The most bytes it holds.
    pub capacity_bytes: u64,
}

/// The row cache's figures (`Options::row_cache_capacity`), as [`DbStats::row_cache`]
/// reports them.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options { create_if_missing: true, row_cache_capacity: 1 << 20, ..Options::default() };
/// let db = Db::open(dir.path(), options)?;
/// db.put("k", "v")?;
/// for _ in 0..3 {
///     db.get("k")?; // the second miss caches the answer, the third read is a hit
/// }
/// let rows = db.stats().row_cache.expect("the row cache is on");
/// assert_eq!((rows.hit_count, rows.miss_count, rows.insert_count), (1, 2, 1));
/// assert!(rows.usage_bytes > 0 && rows.usage_bytes <= rows.capacity_bytes);
/// db.put("k", "w")?; // makes the cached answer stale
/// assert_eq!(db.get("k")?.as_deref(), Some(&b"w"[..]));
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowCacheStats {
    /// Lookups answered from the cache.
    pub hit_count: u64,
    /// Lookups that were not (no answer cached, or one a later write made stale).
    pub miss_count: u64,
    /// Answers put in the cache (a key's first miss only marks it as seen).
    pub insert_count: u64,
    /// Bytes of keys and values the cache holds now, with a per-entry overhead.
    pub usage_bytes: u64,
    /// The most bytes it holds.
    pub capacity_bytes: u64,
}

/// The table cache's figures (open tables, bounded by `Options::max_open_files`), as
/// [`DbStats::table_cache`] reports them.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put("k", "v")?;
/// db.compact_range(None, None)?;
/// db.get("k")?;
/// let tables = db.stats().table_cache;
/// assert!(tables.hit_count >= 1 && tables.open_count == 1, "{tables:?}");
/// assert_eq!(tables.pinned_count, 1); // the get pinned the table in the current state
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableCacheStats {
    /// Lookups of a table already open.
    pub hit_count: u64,
    /// Lookups that opened their table (failed opens included).
    pub miss_count: u64,
    /// Tables the cache holds open now.
    pub open_count: u64,
    /// Tables held open by the files of the current state (and of older states still held,
    /// by a cursor for example), pinned at their first point lookup while the budget allows:
    /// half the table cache's capacity (`max_open_files` - 10). A lookup in a pinned table
    /// skips the cache. Pinned tables stay in the cache, never evicted while pinned, so
    /// `open_count` includes them. A table two states' files pin (a file moved between
    /// levels) counts twice.
    pub pinned_count: u64,
}

/// The blob files of a database that separates large values (`Options::blob_threshold`), as
/// [`DbStats::blobs`] reports them: [`Db::blob_files`](crate::Db::blob_files), summed.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options { create_if_missing: true, blob_threshold: Some(1024), ..Options::default() };
/// let db = Db::open(dir.path(), options)?;
/// db.put("k", [7u8; 10_000])?;
/// let blobs = db.stats().blobs.unwrap();
/// assert_eq!((blobs.file_count, blobs.value_bytes), (1, 10_000));
/// assert_eq!(blobs.pending_file_count, 1); // its memtable is not flushed yet
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlobStats {
    /// Blob files, listed in the version or not yet.
    pub file_count: u64,
    /// Of those, the files whose memtable is not flushed yet (not in the version).
    pub pending_file_count: u64,
    /// Their total size in bytes.
    pub file_bytes: u64,
    /// The bytes of the values they hold, as stored.
    pub value_bytes: u64,
    /// The value bytes no entry reaches any more, as flushes have counted them.
    pub garbage_bytes: u64,
}

/// Statistics of an open database: [`Db::stats`](crate::Db::stats).
///
/// Sizes and counts of what the database holds are as of the call; the other figures count
/// from when this handle opened the database (they are not kept on disk). The struct is
/// `#[non_exhaustive]`: figures may be added.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put("apple", "red")?;
/// let stats = db.stats();
/// assert_eq!(stats.write_count, 1);
/// assert!(stats.wal_bytes_written > stats.user_bytes_written);
/// assert!(stats.memtable_bytes > 0);
/// db.compact_range(None, None)?;
/// let stats = db.stats();
/// assert_eq!(stats.flush_count, 1);
/// assert_eq!(stats.levels.iter().map(|l| l.file_count).sum::<u64>(), 1);
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DbStats {
    /// Each level of the tree, level 0 first.
    pub levels: [LevelStats; NUM_LEVELS],
    /// Batches written by callers (`put`, `delete`, `write`...), each counted once even when
    /// committed in a group with others.
    pub write_count: u64,
    /// The bytes of those batches as encoded: keys, values and a few bytes per entry for its
    /// kind and lengths (no batch header). Values kept in blob files count at their full size.
    pub user_bytes_written: u64,
    /// Bytes appended to the write-ahead log (records and their framing).
    pub wal_bytes_written: u64,
    /// Syncs of the write-ahead log (one per synced group of writes).
    pub wal_sync_count: u64,
    /// Memtables written to tables (at open, replaying the log, too).
    pub flush_count: u64,
    /// The bytes of the tables flushes wrote.
    pub flush_bytes_written: u64,
    /// Compactions that merged tables (flushes and trivial moves not included).
    pub compaction_count: u64,
    /// The bytes of the tables they read.
    pub compaction_input_bytes: u64,
    /// The bytes of the tables they wrote.
    pub compaction_output_bytes: u64,
    /// The time they took.
    pub compaction_time: Duration,
    /// Tables moved down a level whole, without being read or rewritten.
    pub trivial_move_count: u64,
    /// Writes held up by the tree falling behind.
    pub stalls: WriteStalls,
    /// The block cache.
    pub block_cache: BlockCacheStats,
    /// The cache of open tables.
    pub table_cache: TableCacheStats,
    /// The row cache, when `Options::row_cache_capacity` turned it on.
    pub row_cache: Option<RowCacheStats>,
    /// The memory the active memtable takes, in bytes.
    pub memtable_bytes: u64,
    /// The memory the memtable being flushed takes, in bytes (0 when there is none).
    pub immutable_memtable_bytes: u64,
    /// Snapshots not yet dropped.
    pub snapshot_count: u64,
    /// Blob files, when the database separates large values (`Options::blob_threshold` is
    /// set) or has blob files; `None` otherwise.
    pub blobs: Option<BlobStats>,
}

impl DbStats {
    /// The memory the memtables, the block cache and the row cache take, in bytes: LevelDB's
    /// `leveldb.approximate-memory-usage`.
    ///
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("k", "v")?;
    /// let stats = db.stats();
    /// assert!(stats.approximate_memory_usage_bytes() >= stats.memtable_bytes);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn approximate_memory_usage_bytes(&self) -> u64 {
        self.block_cache.usage_bytes
            + self.row_cache.as_ref().map_or(0, |rows| rows.usage_bytes)
            + self.memtable_bytes
            + self.immutable_memtable_bytes
    }
}

/// One level's running figures.
#[derive(Debug, Default)]
struct LevelCounters {
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    compaction_count: AtomicU64,
    compaction_micros: AtomicU64,
}

/// Which wait held a write up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stall {
    L0Slowdown,
    L0Stop,
    MemtableStop,
}

/// The database's running figures, bumped with relaxed atomics where the work happens; see
/// the module's notes for who bumps what.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    levels: [LevelCounters; NUM_LEVELS],
    write_count: AtomicU64,
    user_bytes_written: AtomicU64,
    wal_bytes_written: AtomicU64,
    wal_sync_count: AtomicU64,
    flush_count: AtomicU64,
    flush_bytes_written: AtomicU64,
    compaction_count: AtomicU64,
    compaction_input_bytes: AtomicU64,
    compaction_output_bytes: AtomicU64,
    compaction_micros: AtomicU64,
    trivial_move_count: AtomicU64,
    /// Count and micros of each kind of stall, indexed by `Stall as usize`.
    stall_counts: [AtomicU64; 3],
    stall_micros: [AtomicU64; 3],
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Counters {
    /// A caller's batch committed: `bytes` as `DbStats::user_bytes_written` counts them.
    pub(crate) fn record_write(&self, bytes: usize) {
        add(&self.write_count, 1);
        add(&self.user_bytes_written, bytes as u64);
    }

    /// `bytes` appended to the log (its file grew by that much).
    pub(crate) fn record_wal_append(&self, bytes: u64) {
        add(&self.wal_bytes_written, bytes);
    }

    pub(crate) fn record_wal_sync(&self) {
        add(&self.wal_sync_count, 1);
    }

    /// A memtable flushed to a table of `bytes` at `level` (`None` for a memtable that made no
    /// table), in `took`.
    pub(crate) fn record_flush(&self, level: usize, bytes: Option<u64>, took: Duration) {
        add(&self.flush_count, 1);
        let l = &self.levels[level];
        if let Some(bytes) = bytes {
            add(&self.flush_bytes_written, bytes);
            add(&l.written_bytes, bytes);
        }
        add(&l.compaction_count, 1);
        add(&l.compaction_micros, micros(took));
    }

    /// A compaction into `output_level` read `input_bytes` and wrote `output_bytes`, in `took`.
    pub(crate) fn record_compaction(
        &self,
        output_level: usize,
        input_bytes: u64,
        output_bytes: u64,
        took: Duration,
    ) {
        add(&self.compaction_count, 1);
        add(&self.compaction_input_bytes, input_bytes);
        add(&self.compaction_output_bytes, output_bytes);
        add(&self.compaction_micros, micros(took));
        let l = &self.levels[output_level];
        add(&l.read_bytes, input_bytes);
        add(&l.written_bytes, output_bytes);
        add(&l.compaction_count, 1);
        add(&l.compaction_micros, micros(took));
    }

    pub(crate) fn record_trivial_move(&self) {
        add(&self.trivial_move_count, 1);
    }

    /// A write held up by `stall` for `took`; `first` if this is the first wait of that kind
    /// for this write (only those are counted as stalls; every wait's time is).
    pub(crate) fn record_stall(&self, stall: Stall, took: Duration, first: bool) {
        if first {
            add(&self.stall_counts[stall as usize], 1);
        }
        add(&self.stall_micros[stall as usize], micros(took));
    }

    fn stall(&self, stall: Stall) -> (u64, Duration) {
        (
            get(&self.stall_counts[stall as usize]),
            Duration::from_micros(get(&self.stall_micros[stall as usize])),
        )
    }
}

/// Reads every figure of [`DbStats`]; see the module's notes for where each comes from.
pub(crate) fn collect(inner: &DbInner) -> DbStats {
    let view = inner.view.load();
    let c = &inner.counters;
    let levels = std::array::from_fn(|level| {
        let l = &c.levels[level];
        LevelStats {
            file_count: view.version.num_files(level) as u64,
            size_bytes: total_file_size(&view.version.files[level]),
            read_bytes: get(&l.read_bytes),
            written_bytes: get(&l.written_bytes),
            compaction_count: get(&l.compaction_count),
            compaction_time: Duration::from_micros(get(&l.compaction_micros)),
        }
    });
    let (l0_slowdown_count, l0_slowdown_time) = c.stall(Stall::L0Slowdown);
    let (l0_stop_count, l0_stop_time) = c.stall(Stall::L0Stop);
    let (memtable_stop_count, memtable_stop_time) = c.stall(Stall::MemtableStop);
    let block_cache = &inner.block_cache;
    let blobs = (inner.options.blob_threshold.is_some() || !view.version.blob_files.is_empty())
        .then(|| blob_stats(inner));
    DbStats {
        levels,
        write_count: get(&c.write_count),
        user_bytes_written: get(&c.user_bytes_written),
        wal_bytes_written: get(&c.wal_bytes_written),
        wal_sync_count: get(&c.wal_sync_count),
        flush_count: get(&c.flush_count),
        flush_bytes_written: get(&c.flush_bytes_written),
        compaction_count: get(&c.compaction_count),
        compaction_input_bytes: get(&c.compaction_input_bytes),
        compaction_output_bytes: get(&c.compaction_output_bytes),
        compaction_time: Duration::from_micros(get(&c.compaction_micros)),
        trivial_move_count: get(&c.trivial_move_count),
        stalls: WriteStalls {
            l0_slowdown_count,
            l0_slowdown_time,
            l0_stop_count,
            l0_stop_time,
            memtable_stop_count,
            memtable_stop_time,
        },
        block_cache: BlockCacheStats {
            hit_count: block_cache.hit_count(),
            miss_count: block_cache.miss_count(),
            insert_count: block_cache.insert_count(),
            deferred_count: block_cache.deferred_count(),
            search_form_count: block_cache.replace_count(),
            usage_bytes: block_cache.usage() as u64,
            capacity_bytes: block_cache.capacity() as u64,
        },
        table_cache: TableCacheStats {
            hit_count: inner.table_cache.hit_count(),
            miss_count: inner.table_cache.miss_count(),
            open_count: inner.table_cache.open_count() as u64,
            pinned_count: inner.table_cache.pinned_count() as u64,
        },
        row_cache: inner.row_cache.as_ref().map(|rows| RowCacheStats {
            hit_count: rows.hit_count(),
            miss_count: rows.miss_count(),
            insert_count: rows.insert_count(),
            usage_bytes: rows.usage(),
            capacity_bytes: rows.capacity(),
        }),
        memtable_bytes: view.mem.approximate_memory_usage() as u64,
        immutable_memtable_bytes: view
            .imm
            .as_ref()
            .map_or(0, |m| m.approximate_memory_usage() as u64),
        snapshot_count: inner.snapshots.count() as u64,
        blobs,
    }
}

fn blob_stats(inner: &DbInner) -> BlobStats {
    let mut out = BlobStats::default();
    for f in super::properties::blob_file_list(inner) {
        out.file_count += 1;
        out.file_bytes += f.file_size;
        out.value_bytes += f.value_bytes;
        match f.garbage_bytes {
            Some(g) => out.garbage_bytes += g,
            None => out.pending_file_count += 1,
        }
    }
    out
}
