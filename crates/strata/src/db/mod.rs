// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Db`]: the database handle.
//!
//! This file is over 700 lines because most of it is the public API's rustdoc, with a tested
//! example on every method; the machinery lives in the modules below it.
//!
//! # Locking
//!
//! - `DbInner::state` (the *state mutex*) guards [`DbState`]: the memtables, the version set and
//!   MANIFEST, the writer queue, background-work flags and the first background error.
//! - `DbInner::log` guards the write-ahead log. Only the writer at the front of the queue (the
//!   *leader*) writes to it, with the state mutex released; the memtable switch replaces it
//!   while holding the state mutex. Lock order: state, then log; never the other way.
//! - Reads take no lock: they load `visible_seqno` (an atomic), then the [`ReadView`] (an
//!   `ArcSwap`), and read the memtables and tables it names. A view is replaced, whole, whenever
//!   the memtables or the version change, in an order that never hides data from it: a
//!   memtable becomes immutable before it is flushed, and its table is in the version before
//!   the memtable leaves the view.
//! - The background thread (flushes and compactions) takes the state mutex to choose work and
//!   to install results, and releases it while it reads and writes tables.

mod background;
mod blob_gc;
mod blobs;
mod checkpoint;
mod destroy;
mod flush;
mod iter;
mod key_buf;
mod obsolete;
mod open;
mod pinned;
mod poison;
mod properties;
mod range_iter;
mod read_only;
mod recovery;
mod spare_cursor;
mod stats;
mod write;

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

use arc_swap::ArcSwap;

use crate::batch::WriteBatch;
use crate::blob::BlobCache;
use crate::cache::row_cache::RowCache;
use crate::cache::{BlockCache, TableCache};
use crate::env::{Env, FileLock};
use crate::error::{Error, Result};
use crate::info_log::InfoLog;
use crate::key::{InternalKeyComparator, SeqNo};
use crate::log::LogWriter;
use crate::memtable::{MemLookup, MemTable};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::table::BlockReadOptions;
use crate::version::set::VersionSet;
use crate::version::version::{TableLookup, Version};

pub use destroy::destroy;
pub use iter::DbIterator;
pub(crate) use open::live_log_must_exist;
pub use pinned::PinnedValue;
pub use range_iter::{IntoKeyRange, Keys, RangeIter};
pub use stats::{
    BlobStats, BlockCacheStats, DbStats, LevelStats, RowCacheStats, TableCacheStats, WriteStalls,
};
use write::PendingWrite;

/// What readers see: the memtables and the version, replaced whole.
pub(crate) struct ReadView {
    pub(crate) mem: Arc<MemTable>,
    pub(crate) imm: Option<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
    /// A read-only handle's view is a fixed state (`read_only.rs`): the seqno of its last
    /// write, which reads without a snapshot run at (taken from the view, never from
    /// `visible_seqno`, so that a read racing a `catch_up` cannot pair the old seqno with the
    /// new version). `None` for a writable handle.
    pub(crate) fixed_seqno: Option<SeqNo>,
    /// The files of this view a read-only handle beside a writer holds open (the writer may
    /// delete them); dropped with the last holder of the view.
    pub(crate) _held: Option<Arc<read_only::HeldFiles>>,
    /// The number of the `publish_view` that made this view: 0 for the view a database opens
    /// with and for a read-only handle's views.
    pub(crate) generation: u64,
}

impl ReadView {
    /// The seqno of the newest range deletion visible at `snapshot` that covers `key`, or 0:
    /// entries of `key` below it are deleted. One load per memtable when there is none.
    pub(crate) fn range_deletion_floor(&self, key: &[u8], snapshot: SeqNo) -> SeqNo {
        let mut floor = self
            .version
            .range_fragments
            .as_ref()
            .and_then(|f| f.covering(key, snapshot))
            .unwrap_or(0);
        for mem in std::iter::once(&self.mem).chain(&self.imm) {
            floor = floor.max(mem.range_deletion_over(key, snapshot).unwrap_or(0));
        }
        floor
    }

    /// Every set of range deletions in the view (the memtables' and the version's), for a
    /// cursor; empty when there is none.
    pub(crate) fn range_fragment_sets(&self) -> Vec<Arc<crate::range_del::Fragments>> {
        std::iter::once(&self.mem)
            .chain(&self.imm)
            .filter_map(|m| m.range_fragments())
            .chain(self.version.range_fragments.clone())
            .collect()
    }
}

/// Durability work a memtable switch leaves to the first sync write after it, so that the
/// switch itself (made with the state mutex held, by a writer) stays cheap. Until that write,
/// nothing on the new log was promised to survive a power loss.
#[derive(Default)]
pub(crate) struct LogSyncDebt {
    /// The log the immutable memtable was written to, while that memtable is not yet flushed:
    /// its tail is synced before any synced write to the new log, so that such a write never
    /// survives a power loss that an earlier write does not. The flush drops it unsynced: its
    /// contents are then in a synced table.
    pub(crate) retired_log: Option<LogWriter>,
    /// The directory entry of the new log is not yet synced.
    pub(crate) dir_entry: bool,
}

/// A manual compaction in progress: the level and the range still to compact.
pub(crate) struct ManualCompaction {
    pub(crate) level: usize,
    pub(crate) begin: Option<Vec<u8>>,
    pub(crate) end: Option<Vec<u8>>,
    pub(crate) done: bool,
}

/// Everything the state mutex guards.
pub(crate) struct DbState {
    pub(crate) mem: Arc<MemTable>,
    pub(crate) imm: Option<Arc<MemTable>>,
    /// The number of the log `DbInner::log` writes.
    pub(crate) log_number: u64,
    pub(crate) versions: VersionSet,
    /// The first background or log error; once set, every write fails with it (fail-stop).
    pub(crate) bg_error: Option<Error>,
    /// Writers waiting, the leader first.
    pub(crate) writers: VecDeque<Arc<PendingWrite>>,
    pub(crate) manual: Option<ManualCompaction>,
    /// Table numbers being written, which obsolete-file deletion must keep.
    pub(crate) pending_outputs: HashSet<u64>,
    /// A writer waits for the MANIFEST to be marked for range deletions (the background
    /// thread does it: `Work::MarkRangeDeletions`).
    pub(crate) range_marker_wanted: bool,
    /// Checkpoints linking the files of their cut: obsolete-file deletion does nothing while
    /// this is above 0 (`checkpoint::DeletionPin` raises and lowers it).
    pub(crate) file_deletion_pins: usize,
    /// Flushed memtables that held blob pointers, with the blob files those name. A cursor
    /// made before the flush holds the memtable and the version from before it, which does
    /// not list those files: they stay while the memtable lives (pruned by obsolete-file
    /// deletion).
    pub(crate) flushed_memtables: Vec<(Weak<MemTable>, Vec<u64>)>,
    /// True while a compaction merges tables (with the state mutex released).
    pub(crate) compacting: bool,
    /// Blob changes the garbage collector has queued for the background thread to log.
    pub(crate) blob_gc: blob_gc::BlobGcState,
}

pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    pub(crate) env: Arc<dyn Env>,
    pub(crate) icmp: InternalKeyComparator,
    pub(crate) block_cache: Arc<BlockCache>,
    pub(crate) table_cache: Arc<TableCache>,
    /// Answers of recent point lookups at the newest state (`Options::row_cache_capacity`);
    /// `None` when off and for read-only handles. Writes invalidate it (`write.rs`).
    pub(crate) row_cache: Option<RowCache>,
    /// Open blob files, for values kept apart from the tree.
    pub(crate) blob_cache: Arc<BlobCache>,
    /// The blob files being written; see `blobs.rs` for the locking.
    pub(crate) blob_writers: Mutex<blobs::BlobWriters>,
    /// Blob bytes appended since the last memtable switch, for the switch to read without a
    /// lock: a memtable holding `blobs::BLOB_FILES_PER_MEMTABLE` blob files' worth is full.
    pub(crate) blob_mem_bytes: AtomicU64,
    /// Blob bytes appended since the database opened (only grows): paces the collector's
    /// estimates of unflushed garbage.
    pub(crate) blob_appended_bytes: AtomicU64,
    /// `blob_appended_bytes` as of the collector's last estimate of unflushed garbage.
    pub(crate) blob_estimated_bytes: AtomicU64,
    /// True while the garbage blob collection has yet to reclaim is over its bound: writers of
    /// large values wait (see `blob_gc::reclaimable_garbage`). Set under the state mutex.
    pub(crate) blob_gc_behind: AtomicBool,
    pub(crate) snapshots: Arc<SnapshotList>,
    /// What [`Db::stats`] reports of writes, flushes, compactions and stalls: relaxed atomics,
    /// bumped where the work happens (see `stats.rs`).
    pub(crate) counters: stats::Counters,
    pub(crate) view: ArcSwap<ReadView>,
    /// The parts of the last cursor dropped on the current view, for the next cursor
    /// (`spare_cursor.rs`). Emptied by `publish_view`.
    pub(crate) spare_cursor: spare_cursor::SpareCursorSlot,
    /// The generation of the current view (`ReadView::generation`), stored by `publish_view`
    /// after the view: a cursor checks its view is current with one load.
    pub(crate) view_generation: AtomicU64,
    /// The seqno of the last write readers may see. Invariant: every entry with a seqno at or
    /// below it is in the memtables or tables of the current view.
    pub(crate) visible_seqno: AtomicU64,
    pub(crate) state: Mutex<DbState>,
    /// Signalled when background work finishes, to wake writers waiting for room and callers
    /// waiting for a manual compaction.
    pub(crate) bg_done: Condvar,
    /// Signalled to wake the background thread.
    pub(crate) bg_work: Condvar,
    /// The write-ahead log; see the module's locking notes.
    pub(crate) log: Mutex<Option<LogWriter>>,
    /// What the first sync write to the current log must make durable before the log itself.
    /// Lock order: `log`, then this.
    pub(crate) log_sync_debt: Mutex<LogSyncDebt>,
    /// True when the memtable switch made an immutable memtable, for the compaction loop to
    /// notice without the state mutex.
    pub(crate) has_imm: AtomicBool,
    pub(crate) shutting_down: AtomicBool,
    /// Set by the first close (`Db::close` or the drop): the second does nothing.
    pub(crate) closed: AtomicBool,
    pub(crate) read_only: bool,
    /// A read-only handle opened while a writer (in another process, or another handle of
    /// this one) held `LOCK`: it holds no lock, holds every file of its view open, and retries
    /// a load that met a file the writer replaced (`read_only.rs`).
    pub(crate) beside_writer: bool,
    pub(crate) info_log: InfoLog,
    pub(crate) bg_thread: Mutex<Option<JoinHandle<()>>>,
    /// The blob garbage collection thread, when the database may have blob files.
    pub(crate) blob_gc_thread: Mutex<Option<JoinHandle<()>>>,
    /// Signalled to wake the blob garbage collector (new garbage counted, shutdown).
    pub(crate) blob_gc_work: Condvar,
    /// Held for the life of the database; dropping it releases `LOCK`.
    pub(crate) _lock: Option<Box<dyn FileLock>>,
}

/// A blob file of a database, as [`Db::blob_files`] lists it.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options { create_if_missing: true, blob_threshold: Some(1024), ..Options::default() };
/// let db = Db::open(dir.path(), options)?;
/// db.put(b"k", &[7; 10_000])?;
/// let total: u64 = db.blob_files().iter().map(|f| f.value_bytes).sum();
/// assert_eq!(total, 10_000);
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileInfo {
    /// The file's number: it is `NNNNNN.blob` in the database's directory.
    pub number: u64,
    /// Its length in bytes (for a listed file, as far as the version counts it).
    pub file_size: u64,
    /// The bytes of the values it holds, as stored (compressed or not).
    pub value_bytes: u64,
    /// The value bytes no entry reaches any more, as flushes have counted them; `None` for a
    /// file whose memtable is not flushed yet.
    pub garbage_bytes: Option<u64>,
}

/// An open database.
///
/// `Db` is `Send + Sync`: share it between threads with `Arc` (or by reference in scoped
/// threads). Reads never wait for writes or background work; writes from many threads are
/// committed in groups, one log write (and one sync) per group.
///
/// # Example
///
/// ```
/// use strata::{Db, Options, WriteBatch, WriteOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put(b"apple", b"red")?;
/// let mut batch = WriteBatch::new();
/// batch.put(b"banana", b"yellow");
/// batch.delete(b"apple");
/// db.write_opt(batch, &WriteOptions { sync: true })?;
/// assert_eq!(db.get(b"apple")?, None);
/// assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
/// # Ok::<(), strata::Error>(())
/// ```
pub struct Db {
    inner: Arc<DbInner>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

/// The largest key strata accepts, in bytes. Keys and values are stored with 32-bit lengths;
/// keys are also copied while reading, so they are kept far smaller.
pub const MAX_KEY_SIZE: usize = 64 << 20;
/// The largest value strata accepts, in bytes (below 4 GiB, the format's limit, with room for
/// the batch around it).
pub const MAX_VALUE_SIZE: usize = (u32::MAX as usize) - (128 << 20);

impl Db {
    /// Opens (or, with `create_if_missing`, creates) the database in directory `path`.
    ///
    /// Opening replays the write-ahead log into a level-0 table, starts a new log and a new
    /// MANIFEST, deletes files no version needs, and starts the background thread.
    ///
    /// # Errors
    /// - [`Error::Locked`] if another handle, in this or another process, has it open;
    /// - [`Error::NoDatabase`] if the directory does not exist or has no `CURRENT` file and
    ///   `create_if_missing` is false; such a refusal creates no file (no `LOCK`, no `LOG`);
    /// - [`Error::InvalidArgument`] if it exists and `error_if_exists` is set, or if it was made
    ///   with another comparator;
    /// - [`Error::Corruption`] naming the file and offset if `CURRENT`, the MANIFEST or a log
    ///   is damaged anywhere but in a tail torn by a crash, if a table it lists is missing, or
    ///   (with `paranoid_checks`) if a table's footer, index or filter is damaged;
    /// - [`Error::Io`] for file-system failures.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put(b"k", b"v")?;
    /// drop(db);
    /// // Reopened, it holds what was written; a second handle at once is refused.
    /// let db = Db::open(dir.path(), Options::default())?;
    /// assert!(matches!(Db::open(dir.path(), Options::default()), Err(strata::Error::Locked { .. })));
    /// assert_eq!(db.get(b"k")?.as_deref(), Some(&b"v"[..]));
    /// // No database there, and none created: a typed error.
    /// let elsewhere = dir.path().join("elsewhere");
    /// let refused = Db::open(&elsewhere, Options::default());
    /// assert!(matches!(refused, Err(strata::Error::NoDatabase { .. })));
    /// assert!(!elsewhere.exists());
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        open::open(path.as_ref(), options, false).map(|inner| Db { inner })
    }

    /// Opens the database without writing anything: no new log or MANIFEST, no compaction, no
    /// info log. Writes fail with [`Error::NotSupported`]. The log's contents are replayed into
    /// memory, so reads see every write the database holds.
    ///
    /// It takes a shared lock on `LOCK` when it can: several read-only handles may be open at
    /// once, and a writer (strata's or LevelDB's) then cannot open. While a writer holds the
    /// database (strata's, in this process or another) it takes no lock and reads beside it:
    /// the state as of the open (the MANIFEST and the live logs up to their last whole
    /// record), with every table and blob file of that state held open, so that the writer's
    /// deletions do not reach it; [`catch_up`](Self::catch_up) moves it to the writer's newest
    /// state. It never writes, renames or deletes a file. What such a reader sees, and when:
    /// docs/durability.md.
    ///
    /// # Errors
    /// As [`open`](Self::open); a directory without a database is [`Error::NoDatabase`] (a
    /// read-only open never creates one).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put(b"k", b"v")?;
    /// drop(db);
    /// let reader = Db::open_read_only(dir.path(), Options::default())?;
    /// let another = Db::open_read_only(dir.path(), Options::default())?;
    /// assert_eq!(another.get(b"k")?.as_deref(), Some(&b"v"[..]));
    /// assert!(reader.put(b"k", b"w").is_err());
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        open::open(path.as_ref(), options, true).map(|inner| Db { inner })
    }

    /// Moves a read-only handle on to the database's newest state: reads `CURRENT`, the
    /// MANIFEST and the live logs again, as [`open_read_only`](Self::open_read_only) does, and
    /// makes that the state later reads see. Snapshots and cursors made before keep the state
    /// they were made in (and its files). On a failure the handle keeps its state. On a
    /// writable handle it does nothing: that handle always reads its newest state.
    ///
    /// # Errors
    /// As [`open_read_only`](Self::open_read_only): beside a writer, a state that kept
    /// changing under ten loads is the last load's error, naming the file it missed.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let writer = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// writer.put("k", "1")?;
    /// // The writer holds the database: the reader takes no lock and reads beside it.
    /// let reader = Db::open_read_only(dir.path(), Options::default())?;
    /// writer.put("k", "2")?;
    /// assert_eq!(reader.get("k")?.as_deref(), Some(&b"1"[..]));
    /// reader.catch_up()?;
    /// assert_eq!(reader.get("k")?.as_deref(), Some(&b"2"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn catch_up(&self) -> Result<()> {
        if !self.inner.read_only {
            return Ok(());
        }
        read_only::load(&self.inner)
    }

    /// The sequence number of the last write a read without a snapshot sees now, and whether
    /// this is a read-only handle reading beside a writer (which then reads the state as of
    /// its open or its last [`catch_up`](Self::catch_up)).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("k", "v")?;
    /// assert_eq!(db.read_state(), (1, false));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn read_state(&self) -> (u64, bool) {
        let seqno = match self.inner.view.load().fixed_seqno {
            Some(fixed) => fixed,
            None => self.inner.visible_seqno.load(Ordering::Acquire),
        };
        (seqno, self.inner.beside_writer)
    }

    /// Sets `key` to `value`, with the default [`WriteOptions`] (not synced: the write
    /// survives a crash of the process, not of the machine). Keys and values are any bytes:
    /// `&[u8]`, `&str`, `Vec<u8>`, `String`, `[u8; N]`...
    ///
    /// # Errors
    /// As [`write`](Self::write).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("apple", "red")?;
    /// db.put(b"pear", 7u32.to_be_bytes())?;
    /// assert_eq!(db.get("apple")?.as_deref(), Some(&b"red"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// [`put`](Self::put) with `options`: `WriteOptions { sync: true }` makes the write
    /// durable (it survives a power loss) before this returns.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, WriteOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put_opt("apple", "green", &WriteOptions { sync: true })?; // durable when it returns
    /// assert_eq!(db.get("apple")?.as_deref(), Some(&b"green"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        write::put(&self.inner, options, key.as_ref(), value.as_ref())
    }

    /// Deletes `key` (not an error if it is absent), with the default [`WriteOptions`].
    ///
    /// # Errors
    /// As [`write`](Self::write).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("apple", "red")?;
    /// db.delete("apple")?;
    /// db.delete("never written")?;
    /// assert_eq!(db.get("apple")?, None);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// [`delete`](Self::delete) with `options`.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, WriteOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("apple", "red")?;
    /// db.delete_opt("apple", &WriteOptions { sync: true })?;
    /// assert_eq!(db.get("apple")?, None);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, options: &WriteOptions) -> Result<()> {
        let key = key.as_ref();
        let mut batch = WriteBatch::with_capacity(key.len() + 6);
        batch.delete(key);
        self.write_opt(batch, options)
    }

    /// Deletes every key in `[start, end)` (in the database's key order), with the default
    /// [`WriteOptions`]: one write, whatever the range holds. Reads and cursors made after it
    /// no longer see those keys; a snapshot taken before it still does. Compaction later
    /// removes the deleted entries, and then the deletion itself.
    ///
    /// The first range deletion marks the database (its MANIFEST) so that LevelDB refuses to
    /// open it rather than show the deleted keys again; a database that never took one stays
    /// in LevelDB's format.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `end` is before `start` (equal bounds delete nothing);
    /// [`Error::NotSupported`] in a database with key-value separation
    /// (`Options::blob_threshold`, or blob files made before): blob garbage accounting does
    /// not know range deletions yet; otherwise as [`write`](Self::write).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for event in 0..200u32 {
    ///     db.put(format!("user:42:{event:05}"), "payload")?;
    /// }
    /// db.put("user:43:00000", "kept")?;
    /// db.delete_range("user:42:", "user:42;")?; // ';' follows ':'
    /// assert_eq!(db.prefix("user:42:")?.count(), 0);
    /// assert_eq!(db.get("user:43:00000")?.as_deref(), Some(&b"kept"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`delete_range`](Self::delete_range) with `options`.
    ///
    /// # Errors
    /// As [`delete_range`](Self::delete_range).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, WriteOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// db.delete_range_opt("a", "b", &WriteOptions { sync: true })?;
    /// assert_eq!(db.get("a")?, None);
    /// assert_eq!(db.get("b")?.as_deref(), Some(&b"2"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
        self.write_opt(batch, options)
    }

    /// Applies every operation of `batch`, atomically: after a crash, either all of it or none
    /// of it is in the database. With the default [`WriteOptions`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a key or value over the size limits (nothing is applied);
    /// the error of an earlier failed log write or background job (the database is then
    /// read-only until reopened); the log's write or sync error.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, WriteBatch};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("from", "10")?;
    /// // Move a balance in one atomic step.
    /// let mut batch = WriteBatch::new();
    /// batch.put("from", "0");
    /// batch.put("to", "10");
    /// db.write(batch)?;
    /// assert_eq!(db.get("to")?.as_deref(), Some(&b"10"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// [`write`](Self::write) with `options`.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, WriteBatch, WriteOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// let mut batch = WriteBatch::new();
    /// batch.put("a", "1");
    /// batch.delete("b");
    /// db.write_opt(batch, &WriteOptions { sync: true })?; // durable when it returns
    /// assert_eq!(db.get("a")?.as_deref(), Some(&b"1"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn write_opt(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        write::write(&self.inner, options, batch)
    }

    /// The value of `key` now, or `None` if it is absent (a copy: see
    /// [`get_pinned`](Self::get_pinned) for a read without one).
    ///
    /// # Errors
    /// [`Error::Corruption`] if a block it reads is damaged; [`Error::Io`] if reading fails.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("apple", "red")?;
    /// assert_eq!(db.get("apple")?, Some(b"red".to_vec()));
    /// assert_eq!(db.get(b"pear")?, None);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// [`get`](Self::get) with `options`: at a snapshot, or without checksums or caching.
    ///
    /// # Errors
    /// As [`get`](Self::get); [`Error::InvalidArgument`] for a snapshot of another database.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, ReadOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("k", "before")?;
    /// let snapshot = db.snapshot();
    /// db.put("k", "after")?;
    /// let at_snapshot = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
    /// assert_eq!(db.get_opt("k", &at_snapshot)?.as_deref(), Some(&b"before"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn get_opt(
        &self,
        key: impl AsRef<[u8]>,
        options: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self
            .get_pinned_opt(key, options)?
            .map(PinnedValue::into_vec))
    }

    /// The value of `key`, or `None` if it is absent, without copying it when it can: a value
    /// found in a table stays in its data block, and one found in a memtable in the memtable,
    /// which the [`PinnedValue`] keeps alive; it dereferences to the value. A value kept in a
    /// blob file is copied, as [`get`](Self::get) copies every value; so is one found in a
    /// block stored uncompressed, which is read in place from its table file (a value held
    /// for long must not keep a table file open after compaction deleted it), and one found in
    /// a compressed block the block cache does not take at this read (the first read of a
    /// block in a while, or a read with `fill_cache` off), which is decompressed only as far
    /// as the value, into a buffer the thread reuses.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("apple", "red".repeat(100))?; // compresses: its block is decompressed
    /// db.compact_range(None, None)?; // the value is now in a table
    /// // The block's first read decodes it as far as the value, which is copied; its second
    /// // puts the whole block in the cache, where the value stays.
    /// let first = db.get_pinned("apple")?.unwrap();
    /// assert!(!first.is_pinned_in_block());
    /// let value = db.get_pinned("apple")?.unwrap();
    /// assert_eq!(&*value, "red".repeat(100).as_bytes());
    /// assert!(value.is_pinned_in_block());
    /// assert!(db.get_pinned("pear")?.is_none());
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<PinnedValue>> {
        self.get_pinned_opt(key, &ReadOptions::default())
    }

    /// [`get_pinned`](Self::get_pinned) with `options`.
    ///
    /// # Errors
    /// As [`get_opt`](Self::get_opt).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, ReadOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("apple", "red")?;
    /// let uncached = ReadOptions { fill_cache: false, ..ReadOptions::default() };
    /// assert_eq!(db.get_pinned_opt("apple", &uncached)?.as_deref(), Some(&b"red"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn get_pinned_opt(
        &self,
        key: impl AsRef<[u8]>,
        options: &ReadOptions<'_>,
    ) -> Result<Option<PinnedValue>> {
        let key = key.as_ref();
        let inner = &self.inner;
        // The row cache answers reads of the newest state only. Its ticket is taken before
        // the seqno and the view are loaded (see `cache::row_cache`).
        let row_ticket = match (&inner.row_cache, options.snapshot) {
            (Some(rows), None) => match rows.lookup(key) {
                Ok(row) => return Ok(row.map(PinnedValue::shared)),
                Err(ticket) => options.fill_cache.then_some(ticket),
            },
            _ => None,
        };
        let remember = |value: Option<&[u8]>| {
            if let (Some(rows), Some(ticket)) = (&inner.row_cache, row_ticket) {
                rows.insert(ticket, key, value);
            }
        };
        let seqno = inner.read_seqno(options)?;
        let snapshot_view = options.snapshot.and_then(Snapshot::view);
        let current;
        let view: &ReadView = match snapshot_view {
            Some(view) => view,
            None => {
                current = inner.view.load();
                &current
            }
        };
        let seqno = match (options.snapshot, view.fixed_seqno) {
            (None, Some(fixed)) => fixed,
            _ => seqno,
        };
        let floor = view.range_deletion_floor(key, seqno);
        for mem in std::iter::once(&view.mem).chain(&view.imm) {
            match mem.get_above(key, seqno, floor) {
                Some(MemLookup::Value(v)) => {
                    remember(Some(v));
                    #[allow(unsafe_code)]
                    // SAFETY: `v` was found in `mem`, as `in_memtable` requires.
                    let pinned = unsafe { PinnedValue::in_memtable(mem, v) };
                    return Ok(Some(pinned));
                }
                Some(MemLookup::BlobPointer(p)) => {
                    return inner
                        .read_blob(key, p, options.verify_checksums)
                        .map(|v| Some(PinnedValue::owned(v)))
                }
                Some(MemLookup::Deleted) => {
                    remember(None);
                    return Ok(None);
                }
                None => {}
            }
        }
        let read = BlockReadOptions {
            verify_checksums: options.verify_checksums,
            trust_verified: true,
            fill_cache: options.fill_cache,
            release_behind: false,
        };
        // Written where the table finds the entry, not moved up through the lookup's layers.
        let mut found = TableLookup::Absent;
        let charge =
            view.version
                .get_into(&read, &inner.table_cache, key, seqno, floor, &mut found)?;
        if let Some(charge) = charge {
            if view.version.charge_seek(&charge) && !inner.read_only {
                inner.wake_background();
            }
        }
        Ok(match found {
            TableLookup::Value(v) => {
                remember(Some(&v));
                Some(PinnedValue::in_block(v))
            }
            TableLookup::CopiedValue(v) => {
                remember(Some(&v));
                Some(PinnedValue::owned(v))
            }
            TableLookup::BlobPointer(p) => Some(PinnedValue::owned(inner.read_blob(
                key,
                &p,
                options.verify_checksums,
            )?)),
            TableLookup::Deleted | TableLookup::Absent => {
                remember(None);
                None
            }
        })
    }

    /// A snapshot of the current state; reads given it see exactly the writes made before this
    /// call. Released when dropped.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, ReadOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put(b"k", b"before")?;
    /// let snapshot = db.snapshot();
    /// db.put(b"k", b"after")?;
    /// let at_snapshot = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
    /// assert_eq!(db.get_opt(b"k", &at_snapshot)?.as_deref(), Some(&b"before"[..]));
    /// assert_eq!(db.get(b"k")?.as_deref(), Some(&b"after"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        // Under the state mutex, so that a compaction starting now sees the snapshot.
        let _state = self.inner.lock_state();
        if self.inner.read_only {
            // A read-only handle's snapshot keeps its view: a later `catch_up` may bring a
            // version the writer compacted without knowing of this snapshot.
            let view = self.inner.view.load_full();
            let seqno = view.fixed_seqno.unwrap_or(0);
            return self.inner.snapshots.acquire_with_view(seqno, view);
        }
        let seqno = self.inner.visible_seqno.load(Ordering::Acquire);
        self.inner.snapshots.acquire(seqno)
    }

    /// A cursor over the database as it is now: seek, step both ways, and read keys and
    /// values where they lie (no copy). See [`DbIterator`]; [`range`](Self::range) and
    /// [`scan`](Self::scan) are the same as Rust iterators.
    ///
    /// # Errors
    /// None at present: the `Result` is kept for errors building a cursor may meet. A table
    /// that cannot be opened (missing, damaged: [`Error::Corruption`], [`Error::Io`]) is
    /// opened only when a move reaches it; the cursor is then invalid and its
    /// [`status`](DbIterator::status) returns the error.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for k in ["a", "b", "c"] {
    ///     db.put(k, "v")?;
    /// }
    /// let mut it = db.iter()?;
    /// it.seek_to_last();
    /// assert_eq!(it.key(), b"c");
    /// it.prev();
    /// assert_eq!(it.key(), b"b");
    /// it.status()?;
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn iter(&self) -> Result<DbIterator> {
        self.iter_opt(&ReadOptions::default())
    }

    /// [`iter`](Self::iter) with `options`: at `options.snapshot`, or without filling the
    /// block cache (for a long scan that should not evict the hot blocks).
    ///
    /// # Errors
    /// As [`iter`](Self::iter); [`Error::InvalidArgument`] for a snapshot of another database.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, ReadOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// let snapshot = db.snapshot();
    /// db.put("b", "2")?;
    /// let mut it = db.iter_opt(&ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() })?;
    /// it.seek_to_first();
    /// assert_eq!(it.key(), b"a");
    /// it.next();
    /// assert!(!it.valid()); // "b" came after the snapshot
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn iter_opt(&self, options: &ReadOptions<'_>) -> Result<DbIterator> {
        iter::new_iterator(&self.inner, options)
    }

    /// The entries with keys in `range`, in key order; `.rev()` for descending order. Any Rust
    /// range of byte-like keys: `..`, `"a".."m"`, `b"c".as_slice()..`, `..=key_vec`, or a
    /// `(Bound, Bound)` pair (see [`IntoKeyRange`]).
    ///
    /// Each item is a copy of the entry; [`RangeIter::next_borrowed`] reads without one, and
    /// [`RangeIter::keys`] copies only the keys.
    ///
    /// # Errors
    /// As [`iter`](Self::iter). An error met while scanning is the scan's last item.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v")?;
    /// }
    /// let keys = |r: strata::RangeIter| r.keys().collect::<Result<Vec<_>, _>>();
    /// assert_eq!(keys(db.range("b".."d")?)?, [b"b", b"c"]);
    /// assert_eq!(keys(db.range("c"..)?)?, [b"c", b"d"]);
    /// assert_eq!(db.range(..)?.count(), 4);
    /// let descending: Vec<_> = db.range(..="b")?.rev().collect::<Result<_, _>>()?;
    /// assert_eq!(descending[0].0, b"b");
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn range(&self, range: impl IntoKeyRange) -> Result<RangeIter> {
        self.range_opt(range, &ReadOptions::default())
    }

    /// [`range`](Self::range) with `options`.
    ///
    /// # Errors
    /// As [`iter_opt`](Self::iter_opt).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, ReadOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// let snapshot = db.snapshot();
    /// db.put("b", "2")?;
    /// let at = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
    /// assert_eq!(db.range_opt("a"..="z", &at)?.count(), 1);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn range_opt(
        &self,
        range: impl IntoKeyRange,
        options: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        let (start, end) = range.into_key_range();
        RangeIter::new(&self.inner, options, start, end)
    }

    /// Every entry, in key order; `.rev()` for descending order. The same as `range(..)`.
    ///
    /// # Errors
    /// As [`iter`](Self::iter).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// let all: Vec<(Vec<u8>, Vec<u8>)> = db.scan()?.collect::<Result<_, _>>()?;
    /// assert_eq!(all, [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn scan(&self) -> Result<RangeIter> {
        self.scan_opt(&ReadOptions::default())
    }

    /// [`scan`](Self::scan) with `options`.
    ///
    /// # Errors
    /// As [`iter_opt`](Self::iter_opt).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, ReadOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("a", "1")?;
    /// // A one-off export: leave the block cache to the hot keys.
    /// let export = ReadOptions { fill_cache: false, ..ReadOptions::default() };
    /// assert_eq!(db.scan_opt(&export)?.count(), 1);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn scan_opt(&self, options: &ReadOptions<'_>) -> Result<RangeIter> {
        use std::ops::Bound;
        RangeIter::new(&self.inner, options, Bound::Unbounded, Bound::Unbounded)
    }

    /// The entries whose keys start with the bytes `prefix`, in key order (the comparator's);
    /// `.rev()` for descending order.
    ///
    /// With the bytewise comparator (the default), the scan seeks to `prefix` and stops at the
    /// first key past it, reading only the keys it returns. With another comparator it reads
    /// only the range its [`Comparator::prefix_range`](crate::Comparator::prefix_range) names,
    /// skipping the keys there that do not start with `prefix`; a comparator that names no
    /// range (the trait's default) costs a scan of every key in the database, since in an
    /// arbitrary order the keys sharing a byte prefix need not be next to each other.
    ///
    /// # Errors
    /// As [`iter`](Self::iter).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for k in ["user:1", "user:2", "vendor:1"] {
    ///     db.put(k, "v")?;
    /// }
    /// assert_eq!(db.prefix("user:")?.count(), 2);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<RangeIter> {
        self.prefix_opt(prefix, &ReadOptions::default())
    }

    /// [`prefix`](Self::prefix) with `options`.
    ///
    /// # Errors
    /// As [`iter_opt`](Self::iter_opt).
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options, ReadOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("user:1", "v")?;
    /// let snapshot = db.snapshot();
    /// db.put("user:2", "v")?;
    /// let at = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
    /// assert_eq!(db.prefix_opt("user:", &at)?.count(), 1);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn prefix_opt(
        &self,
        prefix: impl AsRef<[u8]>,
        options: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        use std::ops::Bound;
        let prefix = prefix.as_ref();
        let (start, end) = self
            .inner
            .icmp
            .user_comparator()
            .prefix_range(prefix)
            .unwrap_or((Bound::Unbounded, Bound::Unbounded));
        RangeIter::with_prefix(&self.inner, options, start, end, prefix.to_vec())
    }

    /// Compacts the key range `[begin, end]` (open ends for `None`): flushes the memtable and
    /// merges every level's files in the range down to the deepest level holding any, dropping
    /// overwritten and deleted entries no snapshot needs.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for i in 0..1000u32 {
    ///     db.put(&i.to_be_bytes(), b"value")?;
    /// }
    /// db.compact_range(None, None)?; // everything, into one sorted level
    /// assert_eq!(db.property("leveldb.num-files-at-level0").as_deref(), Some("0"));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        background::compact_range(&self.inner, begin, end)
    }

    /// Waits until the background thread has nothing left to do: no memtable waiting to be
    /// flushed, no compaction running or due. Writes from other threads meanwhile may give it
    /// more work, and so make the wait longer. Then the directory holds only the files the
    /// database needs, and those that open cursors still read.
    ///
    /// A read-only database has no background work: it returns at once.
    ///
    /// # Errors
    /// The background error that stopped the database's writes, if there is one (returned at
    /// once); [`Error::Closed`] if the database is being closed meanwhile.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for i in 0..10_000u32 {
    ///     db.put(&i.to_be_bytes(), &[0; 100])?;
    /// }
    /// db.wait_for_compactions()?;
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn wait_for_compactions(&self) -> Result<()> {
        if self.inner.read_only {
            return Ok(());
        }
        background::wait_until_idle(&self.inner)
    }

    /// Rewrites now, in this thread, every blob file whose fraction of live values is below
    /// `Options::blob_gc_live_ratio` (as flushes have counted the garbage so far, with the
    /// collector's estimate for unflushed writes), as the background collector would, and waits
    /// until the rewritten files have left the version unless a snapshot older than the rewrite
    /// still reads them. Returns how many it rewrote. The old files are deleted once no cursor
    /// reads them either.
    ///
    /// # Errors
    /// An I/O error or corruption met reading or writing blob files; the database then
    /// refuses writes until it is reopened, as after any failed write.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = Options {
    ///     create_if_missing: true,
    ///     blob_threshold: Some(1024),
    ///     ..Options::default()
    /// };
    /// let db = Db::open(dir.path(), options)?;
    /// for round in 0..2u8 {
    ///     for i in 0..10u8 {
    ///         db.put(&[i], &[round; 10_000])?;
    ///     }
    ///     db.compact_range(None, None)?; // counts the overwritten values as garbage
    /// }
    /// assert!(db.collect_blob_garbage()? <= 1);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn collect_blob_garbage(&self) -> Result<usize> {
        if self.inner.read_only {
            return Err(Error::not_supported("the database was opened read-only"));
        }
        blob_gc::collect_now(&self.inner)
    }

    /// The value of a named property, or `None` for an unknown name. Understands LevelDB's
    /// `leveldb.num-files-at-level<N>`, `leveldb.stats`, `leveldb.sstables` and
    /// `leveldb.approximate-memory-usage`, and `strata.blob-files`: a line per blob file
    /// (`number size value_bytes garbage_bytes`, or `pending` in place of the garbage for a
    /// file whose memtable is not flushed yet), and `strata.range-deletions`: a line per range
    /// deletion not yet dropped by compaction (`seqno start end`, `pending` after those still
    /// in a memtable).
    ///
    /// `leveldb.stats`, `leveldb.num-files-at-level<N>` and `leveldb.approximate-memory-usage`
    /// print figures of [`stats`](Self::stats), in LevelDB's format; read the struct rather
    /// than parse them.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put(b"k", b"v")?;
    /// db.compact_range(None, None)?;
    /// let files: usize = (0..7)
    ///     .map(|level| db.property(&format!("leveldb.num-files-at-level{level}")).unwrap())
    ///     .map(|n| n.parse::<usize>().unwrap())
    ///     .sum();
    /// assert_eq!(files, 1);
    /// println!("{}", db.property("leveldb.stats").unwrap());
    /// assert_eq!(db.property("no.such.property"), None);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn property(&self, name: &str) -> Option<String> {
        properties::property(&self.inner, name)
    }

    /// The database's statistics: per level, its tables and what flushes and compactions
    /// read and wrote into it; totals of writes, log appends and syncs, flushes, compactions
    /// and write stalls; the caches' hits and misses; memtable sizes, live snapshots, blob
    /// files. See [`DbStats`] for each figure. `leveldb.stats` and the other LevelDB
    /// properties are printed from it.
    ///
    /// It does not wait for writes or background work: it reads atomic counters and the
    /// current read view, and takes the state mutex only briefly, and only to list blob files
    /// when the database has them. The figures are read one by one, not as one atomic
    /// snapshot.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for i in 0..1000u32 {
    ///     db.put(i.to_be_bytes(), [0u8; 100])?;
    /// }
    /// db.compact_range(None, None)?;
    /// let stats = db.stats();
    /// assert_eq!(stats.write_count, 1000);
    /// assert_eq!(stats.flush_count, 1);
    /// let tables: u64 = stats.levels.iter().map(|l| l.file_count).sum();
    /// let written: u64 = stats.levels.iter().map(|l| l.written_bytes).sum();
    /// assert!(tables >= 1 && written >= stats.flush_bytes_written);
    /// println!("{} write stalls", stats.stalls.l0_stop_count + stats.stalls.memtable_stop_count);
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn stats(&self) -> DbStats {
        stats::collect(&self.inner)
    }

    /// The database's blob files (key-value separation, `Options::blob_threshold`): those the
    /// current version lists, with the garbage counted in each so far, then those of memtables
    /// not flushed yet (`garbage_bytes` is `None`). Empty for a database without blob files.
    /// `strata.blob-files` is the same list as text.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = Options {
    ///     create_if_missing: true,
    ///     blob_threshold: Some(1024),
    ///     ..Options::default()
    /// };
    /// let db = Db::open(dir.path(), options)?;
    /// db.put(b"k", &[7; 10_000])?;
    /// let files = db.blob_files();
    /// assert_eq!(files.len(), 1);
    /// assert_eq!((files[0].value_bytes, files[0].garbage_bytes), (10_000, None));
    ///     ///
    /// db.put(b"k", b"small")?;
    /// db.compact_range(None, None)?; // the flush counts the overwritten value as garbage
    /// let listed: Vec<_> = db.blob_files().into_iter().filter(|f| f.garbage_bytes.is_some()).collect();
    /// assert!(listed.iter().all(|f| f.garbage_bytes == Some(f.value_bytes)), "{listed:?}");
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn blob_files(&self) -> Vec<BlobFileInfo> {
        properties::blob_file_list(&self.inner)
    }

    /// For each range `[start, end)`, the approximate bytes of table data the keys in it take.
    /// Data still in memtables is not counted.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for i in 0..10_000u32 {
    ///     db.put(format!("{i:05}").as_bytes(), &[i as u8; 100])?;
    /// }
    /// db.compact_range(None, None)?;
    /// let sizes = db.approximate_sizes(&[(b"00000", b"05000"), (b"x", b"y")]);
    /// assert!(sizes[0] > 50_000 && sizes[1] == 0, "{sizes:?}");
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn approximate_sizes(&self, ranges: &[(&[u8], &[u8])]) -> Vec<u64> {
        properties::approximate_sizes(&self.inner, ranges)
    }

    /// Makes a checkpoint: a consistent copy of the database, openable at once with
    /// [`Db::open`], in the directory `dir`, while this database stays open and goes on taking
    /// writes. Tables and blob files, which never change once written, are hard-linked into
    /// `dir` where the file system allows (same device), and copied otherwise, so a checkpoint
    /// costs little disk space until the database compacts those files away.
    ///
    /// `dir` must not exist, in which case it is created (its parent must exist), or be an
    /// empty directory.
    ///
    /// The copy holds every write acknowledged before the call, and a prefix of those made
    /// meanwhile by other threads, each batch all or nothing; writes acknowledged after the call
    /// returns are not in it. A writable database flushes its memtable first, and its copy has
    /// no log; a read-only one copies its live logs whole. Everything written is synced, and
    /// the directory too. A copy of a database that uses no blob files opens in LevelDB 1.23.
    /// Obsolete files are not deleted while the files are linked (the deletion runs after).
    ///
    /// # Errors
    /// - [`Error::InvalidArgument`] naming `dir` if it is not empty or its parent does not
    ///   exist; nothing is written then;
    /// - the database's background error, if its writes have stopped (the flush cannot run);
    /// - [`Error::Io`] naming the file if a link, copy, write or sync fails. The files the
    ///   checkpoint made are then removed (and `dir`, if it made it); the database itself is
    ///   unharmed.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # let (path, backup) = (tmp.path().join("db"), tmp.path().join("backup"));
    /// let db = Db::open(&path, Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("k", "before")?;
    /// db.checkpoint(&backup)?;
    /// db.put("k", "after")?; // not in the checkpoint
    ///
    /// let copy = Db::open(&backup, Options::default())?;
    /// assert_eq!(copy.get("k")?.as_deref(), Some(&b"before"[..]));
    /// assert_eq!(db.get("k")?.as_deref(), Some(&b"after"[..]));
    /// // A directory that holds anything is refused.
    /// assert!(matches!(db.checkpoint(&backup), Err(strata::Error::InvalidArgument(_))));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        checkpoint::checkpoint(&self.inner, dir.as_ref())
    }

    /// Closes the database and reports what went wrong, as dropping it cannot: waits for the
    /// flush or compaction in progress (a compaction stops between two entries; its work is
    /// redone later), stops the background threads, syncs the log (so every write made before
    /// the close survives a power loss, synced or not), and releases `LOCK`: the directory can
    /// be opened again at once. Dropping a `Db` closes it too, without the sync, and drops the
    /// errors this returns.
    ///
    /// Cursors and ranges made before the close are not closed: they keep reading the state
    /// they were made at (files deleted by a later opener of the database make them fail with
    /// [`Error::Io`] when they reach them, not return wrong data). A [`Snapshot`] of the closed
    /// database is refused by other handles ([`Error::InvalidArgument`]).
    ///
    /// # Errors
    /// - the background error that stopped the database's writes, if one was recorded: a failed
    ///   log write or sync, flush or compaction ([`Error::Io`], [`Error::Corruption`]), or a
    ///   panic ([`Error::Poisoned`]);
    /// - [`Error::Io`] if the log's sync, or the MANIFEST record of the blob collector's last
    ///   counts, fails.
    ///
    /// The database is closed in every case.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// db.put("k", "v")?;
    /// db.close()?;
    /// let db = Db::open(dir.path(), Options::default())?; // at once: the lock is released
    /// assert_eq!(db.get("k")?.as_deref(), Some(&b"v"[..]));
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn close(self) -> Result<()> {
        self.inner.shut_down(true)
    }

    /// The directory the database lives in.
    /// # Example
    ///
    /// ```
    /// use strata::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// assert_eq!(db.path(), dir.path());
    /// # Ok::<(), strata::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }
}

impl Drop for Db {
    /// Closes the database as [`Db::close`] does, but without syncing the log, and with its
    /// errors dropped (a close that has nowhere to report them).
    fn drop(&mut self) {
        let _ = self.inner.shut_down(false);
    }
}

#[cfg(test)]
thread_local! {
    /// In tests, the name of a thread whose spawning fails when this thread opens a database.
    static FAIL_SPAWN: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Starts a thread of the database in `dir`.
///
/// # Errors
/// [`Error::Io`] (op `"spawn thread"`, naming the directory) if the system refuses a thread.
pub(crate) fn spawn_thread(
    dir: &Path,
    name: &'static str,
    run: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>> {
    #[cfg(test)]
    if FAIL_SPAWN.get() == Some(name) {
        let refused = std::io::Error::from(std::io::ErrorKind::WouldBlock);
        return Err(Error::io(dir, "spawn thread", refused));
    }
    std::thread::Builder::new()
        .name(name.into())
        .spawn(run)
        .map_err(|e| Error::io(dir, "spawn thread", e))
}

impl DbInner {
    /// Locks the state mutex. If a thread panicked while holding it, the state may be half
    /// changed: the database is poisoned (every later write fails), and the guard is returned
    /// for reads and for shutting down.
    pub(crate) fn lock_state(&self) -> MutexGuard<'_, DbState> {
        match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => {
                let mut state = poisoned.into_inner();
                if state.bg_error.is_none() {
                    let e = Error::poisoned("in a thread that held the database's state lock");
                    self.set_error(&mut state, &e);
                }
                state
            }
        }
    }

    /// The seqno a read runs at.
    fn read_seqno(&self, options: &ReadOptions<'_>) -> Result<SeqNo> {
        match options.snapshot {
            Some(s) if !s.belongs_to(&self.snapshots) => Err(Error::invalid_argument(
                "the snapshot belongs to another database",
            )),
            Some(s) => Ok(s.seqno()),
            None => Ok(self.visible_seqno.load(Ordering::Acquire)),
        }
    }

    /// The value an encoded blob pointer (the value of the entry with user key `key`) points to.
    pub(crate) fn read_blob(&self, key: &[u8], encoded: &[u8], verify: bool) -> Result<Vec<u8>> {
        self.blob_cache.read_encoded(key, encoded, verify)
    }

    /// Publishes a new read view from the state. Requires: the state mutex is held (the
    /// caller passes its guard's contents).
    pub(crate) fn publish_view(&self, state: &DbState) {
        self.has_imm.store(state.imm.is_some(), Ordering::Release);
        // Publishes are serialized by the state mutex: this is the only writer.
        let generation = self.view_generation.load(Ordering::Relaxed) + 1;
        self.view.store(Arc::new(ReadView {
            mem: state.mem.clone(),
            imm: state.imm.clone(),
            version: state.versions.current(),
            fixed_seqno: None,
            _held: None,
            generation,
        }));
        self.view_generation.store(generation, Ordering::Release);
        // After the store (`spare_cursor.rs`): parts of the old view go now, before the flush
        // or compaction that published this view deletes the files it no longer lists.
        self.spare_cursor.clear();
        self.refresh_blob_gc_behind(state);
    }

    /// Keeps `e` as the database's error if it is the first (every later write fails with it),
    /// and wakes every thread waiting on background work, so that none waits for work that
    /// will not come. Requires the state mutex (the caller passes the state it guards).
    pub(crate) fn set_error(&self, state: &mut DbState, e: &Error) {
        state.bg_error.get_or_insert_with(|| e.clone());
        self.bg_done.notify_all();
    }

    /// Called by a reader (a cursor) that is done with `view`: if its version is no longer
    /// current, the reader may have been the last to need some of that version's files, which
    /// a flush or compaction has since made obsolete; they are deleted now, not at the next
    /// flush or compaction. `view` is left holding the current view. Requires: the caller
    /// holds no lock of the database.
    pub(crate) fn release_view(&self, view: &mut Arc<ReadView>) {
        let current = self.view.load_full();
        if Arc::ptr_eq(&view.version, &current.version) {
            return;
        }
        drop(std::mem::replace(view, current));
        let mut state = self.lock_state();
        obsolete::delete_obsolete_files(self, &mut state);
    }

    /// Tells the background and blob garbage collection threads to stop, and waits until
    /// they have (each holds the database, and with it `LOCK`, while it runs).
    pub(crate) fn stop_threads(&self) {
        self.shutting_down.store(true, Ordering::Release);
        {
            let _state = self.lock_state();
            self.bg_work.notify_all();
            self.blob_gc_work.notify_all();
        }
        for thread in [&self.blob_gc_thread, &self.bg_thread] {
            let handle = thread.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(handle) = handle {
                let _ = handle.join();
            }
        }
    }

    /// Closes the database, once (a second call returns `Ok` and does nothing): stops the
    /// background and blob garbage collection threads, each after the job it is running (a
    /// compaction stops between two entries and leaves its outputs for the next open to
    /// delete), then, unless the database has a background error, syncs the log if `sync_log`
    /// and logs the blob collector's counts ([`background::log_blob_changes_at_close`]).
    ///
    /// # Errors
    /// The database's background error (a failed write, flush or compaction, or a panic:
    /// [`Error::Poisoned`]), else the first error of the sync or the MANIFEST write.
    pub(crate) fn shut_down(&self, sync_log: bool) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.stop_threads();
        if let Some(e) = self.lock_state().bg_error.clone() {
            return Err(e);
        }
        if sync_log && !self.read_only && self.log.lock().is_ok_and(|log| log.is_some()) {
            if let Err(e) = write::sync_log(self) {
                // Fail-stop: the log's tail is now unknown; nothing is written after it.
                self.set_error(&mut self.lock_state(), &e);
                return Err(e);
            }
        }
        background::log_blob_changes_at_close(self)
    }

    /// Wakes the background thread (taking the state mutex briefly).
    pub(crate) fn wake_background(&self) {
        let _state = self.lock_state();
        self.bg_work.notify_all();
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, loom))]
#[path = "view_loom.rs"]
mod loom_model;
