// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Options`], [`ReadOptions`] and [`WriteOptions`]: LevelDB's knobs with LevelDB's defaults,
//! plus strata's own (checksums verified by default).

use std::fmt;
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::comparator::{BytewiseComparator, Comparator};
use crate::env::{Env, PosixEnv};
use crate::error::{Error, Result};
use crate::filter::{BloomFilterPolicy, FilterPolicy};
use crate::snapshot::Snapshot;
use crate::table::{Compression, TableOptions};
use crate::version::version::L0_COMPACTION_TRIGGER;

/// How a database is opened and how it writes its files.
///
/// Defaults are LevelDB 1.23's. Out-of-range sizes are clamped at open as LevelDB clamps them.
///
/// # Example
///
/// ```
/// use strata::{Compression, Options};
/// let options = Options {
///     create_if_missing: true,
///     compression: Compression::None,
///     ..Options::default()
/// }
/// .with_bloom_filter(10);
/// assert_eq!(options.write_buffer_size, 4 << 20);
/// ```
#[derive(Clone)]
pub struct Options {
    /// Create the database if it does not exist. Default: false.
    pub create_if_missing: bool,
    /// Fail if the database already exists. Default: false.
    pub error_if_exists: bool,
    /// Also open every table the MANIFEST lists when the database opens (reading its footer,
    /// index and filter, checksums verified), so that a damaged table fails the open rather
    /// than the first read of it. Default: false.
    ///
    /// Damage found while opening is always an error in strata, unlike LevelDB without this
    /// option: a damaged `CURRENT` or MANIFEST record, damage inside a log, a missing table.
    /// The one exception is a torn tail (a log or MANIFEST whose last write a crash cut short),
    /// which ends that file where the damage starts.
    pub paranoid_checks: bool,
    /// Bytes of writes buffered in memory before they are written to a level-0 table.
    /// Default: 4 MiB; clamped to [64 KiB, 1 GiB].
    pub write_buffer_size: usize,
    /// Files the database may keep open; the table cache gets all but 10. Default: 1000;
    /// clamped to [74, 50,000].
    pub max_open_files: usize,
    /// Capacity of the block cache created at open, when `block_cache` is not given. The cache
    /// holds blocks decompressed (or read into memory when the file is not mapped); a block
    /// stored uncompressed in a mapped table is read in place from the mapping and never
    /// cached.
    /// Default: 8 MiB.
    pub block_cache_capacity: usize,
    /// A block cache to share between databases; overrides `block_cache_capacity`.
    pub block_cache: Option<Arc<BlockCache>>,
    /// Bytes of a row cache: the answers of recent point lookups (`get`, `get_pinned`) of the
    /// newest state, keyed by user key, so that a key read again is answered without
    /// searching the memtables, the levels and the table blocks. Each write invalidates the
    /// keys it writes (a cost on every write while the cache is on); a range deletion empties
    /// it. Reads at a snapshot, through a read-only handle, and of values kept in blob files
    /// neither use nor fill it. Default: 0 (off), as in RocksDB.
    pub row_cache_capacity: usize,
    /// Uncompressed bytes per data block. Default: 4 KiB; clamped to [1 KiB, 4 MiB].
    pub block_size: usize,
    /// Keys between restart points in a block. Default: 16; at least 1.
    pub block_restart_interval: usize,
    /// Level-0 tables at which each write is delayed by about 1 ms (once per write), so that
    /// compaction catches up before writes must stop: LevelDB's slowdown. Default: 20, as in
    /// RocksDB (LevelDB's is a constant, 8).
    ///
    /// Higher values let a burst of writes run on while level 0 grows, and each compaction of
    /// level 0 then merges more tables at once, rewriting level 1 fewer times. Gets pay
    /// little for it: a get looks into every level-0 table whose range holds its key, but a
    /// level-0 table flushed since the database opened keeps its memtable's key filter in
    /// memory (with a bytewise comparator), so a table without the key costs one load, not a
    /// block read. Tables found at open, or flushed during recovery, have no such filter
    /// until compaction rewrites them. Cursors (scans and seeks) still merge every level-0
    /// table. Measured in docs/benchmarks.md, "A door keeper for the block cache, level-0 key
    /// filters, RocksDB's level-0 triggers": at 1,000,000 entries, fillrandom 1.37 and
    /// overwrite 1.3 times faster than at 8 and 12, readrandom 3-4% slower.
    pub l0_slowdown_writes_trigger: usize,
    /// Level-0 tables at which writes wait for a compaction of level 0. Default: 36, as in
    /// RocksDB (LevelDB's is 12). Must be more than 4, the count at which a compaction of
    /// level 0 starts; a `l0_slowdown_writes_trigger` above it is lowered to it (no slowdown
    /// phase).
    pub l0_stop_writes_trigger: usize,
    /// Bytes written to one table before a compaction starts the next. Default: 2 MiB; clamped
    /// to [1 MiB, 1 GiB].
    pub max_file_size: usize,
    /// Block compression. Default: Snappy.
    pub compression: Compression,
    /// Filter policy for new tables (and for reading tables' filters). Default: none.
    pub filter_policy: Option<Arc<dyn FilterPolicy>>,
    /// The key order. Default: [`BytewiseComparator`]. A database must always be opened with a
    /// comparator of the same name.
    pub comparator: Arc<dyn Comparator>,
    /// The file system. Default: [`PosixEnv`].
    pub env: Arc<dyn Env>,
    /// LevelDB's `reuse_logs`: at open, keep appending to the last log (and keep its entries in
    /// the memtable) instead of flushing them to a level-0 table and starting a new log, which
    /// makes opening a database with a small last log cheaper. The log is reused only if
    /// replaying it flushed nothing and it ends cleanly after its last record; otherwise the
    /// open proceeds as without the option. A new MANIFEST is still written at each open.
    /// Default: false.
    pub reuse_logs: bool,
    /// Key-value separation: a put whose value is at least this many bytes writes the value
    /// once to a blob file and keeps only a small pointer in the log and the tables (see
    /// `docs/blobs.md`). Large values then cost one write instead of one per level they pass
    /// through. A database that has used blob files can no longer be opened by LevelDB (it
    /// refuses it with an error). Default: `None`, every value in the tree, as LevelDB keeps it.
    pub blob_threshold: Option<usize>,
    /// The size at which a blob file is closed and the next one started. The memtable is
    /// switched (and flushed) after four files' worth of values, which bounds what opening
    /// after a crash has to check. Garbage collection rewrites whole files, so smaller files
    /// reclaim space sooner; writers of large values wait while more than one file's worth of
    /// garbage is left to reclaim. Default: 16 MiB; clamped to [1 MiB, 1 GiB].
    pub blob_file_size: usize,
    /// Compression of values in blob files (kept only when it saves more than 12.5%).
    /// Default: none, as large values are often compressed already.
    pub blob_compression: Compression,
    /// A blob file whose fraction of live values falls below this is rewritten in the
    /// background, its live values moved to a new file. Default: 0.75, which keeps blob files
    /// under about 1.33 times their live data; clamped to [0.05, 0.95].
    pub blob_gc_live_ratio: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: false,
            error_if_exists: false,
            paranoid_checks: false,
            write_buffer_size: 4 << 20,
            max_open_files: 1000,
            block_cache_capacity: 8 << 20,
            block_cache: None,
            row_cache_capacity: 0,
            block_size: 4096,
            block_restart_interval: 16,
            l0_slowdown_writes_trigger: 20,
            l0_stop_writes_trigger: 36,
            max_file_size: 2 << 20,
            compression: Compression::Snappy,
            filter_policy: None,
            comparator: Arc::new(BytewiseComparator),
            env: Arc::new(PosixEnv::new()),
            reuse_logs: false,
            blob_threshold: None,
            blob_file_size: 16 << 20,
            blob_compression: Compression::None,
            blob_gc_live_ratio: 0.75,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("paranoid_checks", &self.paranoid_checks)
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_open_files", &self.max_open_files)
            .field("block_cache_capacity", &self.block_cache_capacity)
            .field("row_cache_capacity", &self.row_cache_capacity)
            .field("block_size", &self.block_size)
            .field("block_restart_interval", &self.block_restart_interval)
            .field(
                "l0_slowdown_writes_trigger",
                &self.l0_slowdown_writes_trigger,
            )
            .field("l0_stop_writes_trigger", &self.l0_stop_writes_trigger)
            .field("max_file_size", &self.max_file_size)
            .field("compression", &self.compression)
            .field(
                "filter_policy",
                &self.filter_policy.as_ref().map(|p| p.name()),
            )
            .field("comparator", &self.comparator.name())
            .field("reuse_logs", &self.reuse_logs)
            .field("blob_threshold", &self.blob_threshold)
            .field("blob_file_size", &self.blob_file_size)
            .field("blob_compression", &self.blob_compression)
            .field("blob_gc_live_ratio", &self.blob_gc_live_ratio)
            .finish()
    }
}

impl Options {
    /// These options with LevelDB's bloom filter at `bits_per_key` (10 gives about 1% false
    /// positives).
    pub fn with_bloom_filter(mut self, bits_per_key: usize) -> Self {
        self.filter_policy = Some(Arc::new(BloomFilterPolicy::new(bits_per_key)));
        self
    }

    /// These options on another [`Env`].
    pub fn with_env(mut self, env: Arc<dyn Env>) -> Self {
        self.env = env;
        self
    }

    /// Clamps sizes into LevelDB's ranges and rejects settings that cannot work.
    pub(crate) fn sanitized(&self) -> Result<Options> {
        if self.l0_stop_writes_trigger <= L0_COMPACTION_TRIGGER {
            return Err(Error::invalid_argument(format!(
                "l0_stop_writes_trigger must be more than {L0_COMPACTION_TRIGGER} (the level-0 \
                 tables that start a compaction), not {}",
                self.l0_stop_writes_trigger
            )));
        }
        if self.block_restart_interval == 0 {
            return Err(Error::invalid_argument(
                "block_restart_interval must be at least 1",
            ));
        }
        let mut o = self.clone();
        // A stop below the slowdown leaves no slowdown phase: writes stop at the stop
        // trigger (so that lowering the stop trigger alone, under the default slowdown of
        // 20, works, as in RocksDB, which raises its stop to the slowdown instead).
        o.l0_slowdown_writes_trigger = o.l0_slowdown_writes_trigger.min(o.l0_stop_writes_trigger);
        o.write_buffer_size = o.write_buffer_size.clamp(64 << 10, 1 << 30);
        o.max_open_files = o.max_open_files.clamp(74, 50_000);
        o.block_size = o.block_size.clamp(1 << 10, 4 << 20);
        o.max_file_size = o.max_file_size.clamp(1 << 20, 1 << 30);
        o.blob_file_size = o.blob_file_size.clamp(1 << 20, 1 << 30);
        o.blob_gc_live_ratio = if o.blob_gc_live_ratio.is_nan() {
            0.75
        } else {
            o.blob_gc_live_ratio.clamp(0.05, 0.95)
        };
        Ok(o)
    }

    /// The options tables are written and read with.
    pub(crate) fn table_options(&self) -> TableOptions {
        TableOptions {
            comparator: self.comparator.clone(),
            block_size: self.block_size,
            block_restart_interval: self.block_restart_interval,
            compression: self.compression,
            filter_policy: self.filter_policy.clone(),
        }
    }
}

/// How one read behaves.
///
/// # Example
///
/// ```
/// use strata::ReadOptions;
/// let scan = ReadOptions { fill_cache: false, ..ReadOptions::default() };
/// assert!(scan.verify_checksums);
/// ```
#[derive(Clone, Copy)]
pub struct ReadOptions<'a> {
    /// Verify the checksum of every block read from disk. Default: **true** (LevelDB's default
    /// is false; strata never returns data it has not checked unless told to).
    ///
    /// A block verified once is trusted while it stays in memory strata reads from: the block
    /// cache, and for a compressed block of a mapped table (`PosixEnv` maps tables), the
    /// mapping, for as long as the table stays open. So a block is checked at its first read
    /// after open, not at every read; damage that appears on the disk later, in a page the
    /// kernel drops and reads again while the table is open, is not caught by reads (it is by
    /// compaction, which verifies every block it reads, and by `strata check`).
    pub verify_checksums: bool,
    /// Let blocks read for this read enter the block cache. Default: true. A block enters at
    /// its second read in a short while, not its first (the cache's door keeper, so that
    /// blocks read once do not evict the ones read often); with `false` a read neither
    /// enters a block nor counts towards its entry.
    pub fill_cache: bool,
    /// Read as of this snapshot instead of the latest state.
    pub snapshot: Option<&'a Snapshot>,
}

impl ReadOptions<'_> {
    /// The defaults: checksums verified, cache filled, latest state.
    pub fn new() -> Self {
        ReadOptions {
            verify_checksums: true,
            fill_cache: true,
            snapshot: None,
        }
    }
}

impl Default for ReadOptions<'_> {
    fn default() -> Self {
        ReadOptions::new()
    }
}

impl fmt::Debug for ReadOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadOptions")
            .field("verify_checksums", &self.verify_checksums)
            .field("fill_cache", &self.fill_cache)
            .field("snapshot", &self.snapshot.map(|s| s.seqno()))
            .finish()
    }
}

/// How one write behaves.
///
/// # Example
///
/// ```
/// use strata::WriteOptions;
/// let durable = WriteOptions { sync: true };
/// assert!(!WriteOptions::default().sync);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Sync the log before the write returns: the write then survives a power loss. Without
    /// it, a write survives a crash of the process but not of the machine.
    pub sync: bool,
}
