// SPDX-License-Identifier: MIT OR Apache-2.0
//! Opening a database: creating it, taking the lock, recovering the version set from the
//! MANIFEST, replaying the write-ahead logs, and starting a new log and MANIFEST.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};

use arc_swap::ArcSwap;

use super::blobs::ReplayedBlobs;
use crate::blob::BlobCache;

/// Blob files kept open for reads (each one descriptor).
const BLOB_FILES_OPEN: usize = 64;

use super::background;
use super::flush::write_level0_table;
use super::{DbInner, DbState, LevelStats, ReadView};
use crate::batch::WriteBatch;
use crate::cache::{BlockCache, TableCache};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::info_log::InfoLog;
use crate::key::{InternalKeyComparator, SeqNo};
use crate::log::{LogReader, LogWriter, ReadMode};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::snapshot::SnapshotList;
use crate::version::set::{current_names, set_current_file, VersionSet};
use crate::version::VersionEdit;

macro_rules! info {
    ($inner:expr, $($arg:tt)*) => { $inner.info_log.log(format_args!($($arg)*)) };
}
pub(crate) use info;

/// Opens the database in `dir`.
pub(crate) fn open(dir: &Path, options: Options, read_only: bool) -> Result<Arc<DbInner>> {
    let options = options.sanitized()?;
    let env = options.env.clone();
    let create = !read_only && options.create_if_missing;
    // Every refusal that needs no lock comes before the lock and the info log: a refused open
    // leaves no LOCK or LOG behind in a directory that holds no database.
    refuse_before_locking(&*env, dir, &options, read_only)?;
    if create {
        env.create_dir_all(dir)?;
    }
    let lock_path = filename::lock_file(dir);
    let lock = if !read_only {
        Some(env.lock_file(&lock_path)?)
    } else if env.exists(&lock_path) {
        // Readers share the lock; a writer (strata's or LevelDB's) excludes them.
        Some(env.lock_file_shared(&lock_path)?)
    } else {
        None
    };
    let info_log = if read_only {
        InfoLog::disabled()
    } else {
        InfoLog::open(&*env, dir)
    };

    // Decided again under the lock: another process may have created or destroyed the
    // database since the test above.
    let current_exists = env.exists(&filename::current_file(dir));
    if !current_exists {
        if !create {
            return Err(no_current(dir, read_only));
        }
        refuse_to_create_over_files(&*env, dir)?;
        new_db(&*env, dir, &options)?;
        info_log.log(format_args!("created a new database"));
    } else if options.error_if_exists {
        return Err(exists_already(dir));
    }

    let icmp = InternalKeyComparator::new(options.comparator.clone());
    let block_cache = options
        .block_cache
        .clone()
        .unwrap_or_else(|| Arc::new(BlockCache::new(options.block_cache_capacity)));
    let table_cache = Arc::new(TableCache::new(
        env.clone(),
        dir,
        options.table_options(),
        Some(block_cache.clone()),
        // Within the process's limit too: past it, opening a table would fail (EMFILE).
        env.open_files_limit()
            .map_or(options.max_open_files, |limit| {
                options.max_open_files.min(limit.max(20))
            }),
    ));
    let mut versions = VersionSet::new(dir, env.clone(), icmp.clone());
    versions.recover()?;
    check_tables_exist(&*env, dir, &versions)?;
    live_log_must_exist(&*env, dir, versions.log_number)?;
    if options.paranoid_checks {
        // Every table's footer, index and filter, checksums verified, before anything is written.
        for level in &versions.current().files {
            for file in level {
                table_cache.get(file.meta.number, file.meta.file_size)?;
            }
        }
    }

    let mem = Arc::new(MemTable::new(icmp.clone()));
    let view = ReadView {
        mem: mem.clone(),
        imm: None,
        version: versions.current(),
    };
    let last_sequence = versions.last_sequence;
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        env: env.clone(),
        icmp,
        block_cache,
        table_cache,
        blob_cache: Arc::new(BlobCache::new(env.clone(), dir, BLOB_FILES_OPEN)),
        blob_writers: Mutex::new(Default::default()),
        blob_mem_bytes: AtomicU64::new(0),
        blob_appended_bytes: AtomicU64::new(0),
        blob_estimated_bytes: AtomicU64::new(0),
        blob_gc_behind: AtomicBool::new(false),
        snapshots: Arc::new(SnapshotList::default()),
        view: ArcSwap::from_pointee(view),
        visible_seqno: AtomicU64::new(last_sequence),
        state: Mutex::new(DbState {
            mem,
            imm: None,
            log_number: 0,
            versions,
            bg_error: None,
            writers: Default::default(),
            manual: None,
            pending_outputs: HashSet::new(),
            compacting: false,
            stats: [LevelStats::default(); crate::version::NUM_LEVELS],
            blob_gc: Default::default(),
        }),
        bg_done: Condvar::new(),
        bg_work: Condvar::new(),
        log: Mutex::new(None),
        log_sync_debt: Mutex::default(),
        has_imm: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        read_only,
        info_log,
        bg_thread: Mutex::new(None),
        blob_gc_thread: Mutex::new(None),
        blob_gc_work: Condvar::new(),
        _lock: lock,
        options,
    });
    recover_logs(&inner)?;
    if !read_only {
        if let Err(e) = start_threads(&inner) {
            // The threads started hold the database (and `LOCK`): stop them, so that the
            // failed open leaves nothing running and the lock is released with `inner`.
            inner.stop_threads();
            return Err(e);
        }
    }
    Ok(inner)
}

/// The refusals `open` can make before it takes the lock: a missing directory or `CURRENT`
/// without `create_if_missing`, a database over stray files, an existing database with
/// `error_if_exists`.
fn refuse_before_locking(
    env: &dyn Env,
    dir: &Path,
    options: &Options,
    read_only: bool,
) -> Result<()> {
    let create = !read_only && options.create_if_missing;
    if !create && !env.exists(dir) {
        let reason = if read_only {
            "the directory does not exist"
        } else {
            "the directory does not exist (create_if_missing is not set)"
        };
        return Err(Error::no_database(dir, reason));
    }
    if env.exists(&filename::current_file(dir)) {
        if options.error_if_exists {
            return Err(exists_already(dir));
        }
    } else if !create {
        return Err(no_current(dir, read_only));
    } else if env.exists(dir) {
        refuse_to_create_over_files(env, dir)?;
    }
    Ok(())
}

/// Starts the background thread, and the blob garbage collector if the database may have blob
/// files. On an error, the threads already started are left running (the caller stops them).
fn start_threads(inner: &Arc<DbInner>) -> Result<()> {
    background::start(inner)?;
    let has_blobs = !inner
        .lock_state()
        .versions
        .current_ref()
        .blob_files
        .is_empty();
    if has_blobs || inner.options.blob_threshold.is_some() {
        let handle = super::blob_gc::start(inner)?;
        *inner
            .blob_gc_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }
    Ok(())
}

/// The error for a directory without `CURRENT` that is not to be created.
fn no_current(dir: &Path, read_only: bool) -> Error {
    let reason = if read_only {
        "it has no CURRENT file"
    } else {
        "it has no CURRENT file (create_if_missing is not set)"
    };
    Error::no_database(dir, reason)
}

fn exists_already(dir: &Path) -> Error {
    Error::invalid_argument(format!(
        "{} already exists (error_if_exists is set)",
        dir.display()
    ))
}

/// A directory with database files but no `CURRENT` is a damaged database: creating a new one
/// there would make its tables obsolete and delete them.
fn refuse_to_create_over_files(env: &dyn Env, dir: &Path) -> Result<()> {
    let stray: Vec<(String, FileKind)> = env
        .children(dir)?
        .into_iter()
        .filter_map(|name| match filename::parse_file_name(&name) {
            Some((kind @ (FileKind::Log | FileKind::Table | FileKind::Manifest), _)) => {
                Some((name, kind))
            }
            _ => None,
        })
        .collect();
    // A crash while a database was being created leaves a MANIFEST of an empty database and
    // no CURRENT: nothing was ever written to it, so creating it again loses nothing.
    let only_empty_manifests = stray.iter().all(|(name, kind)| {
        *kind == FileKind::Manifest && manifest_describes_empty_database(env, &dir.join(name))
    });
    if only_empty_manifests {
        return Ok(());
    }
    let names: Vec<&str> = stray.iter().map(|(name, _)| name.as_str()).collect();
    Err(Error::corruption(
        filename::current_file(dir),
        0,
        format!(
            "CURRENT is missing but the directory holds database files ({}); refusing to create a new database over them (repair it instead)",
            names.join(", ")
        ),
    ))
}

/// True if every record of the MANIFEST at `path` that can be read lists no table and no
/// sequence number above 0: the state of a database nothing was written to.
fn manifest_describes_empty_database(env: &dyn Env, path: &Path) -> bool {
    let Ok(file) = env.new_sequential_file(path) else {
        return false;
    };
    let mut reader = LogReader::new(file, path, ReadMode::Tolerant);
    loop {
        match reader.next_record() {
            Ok(Some(record)) => match VersionEdit::decode(record) {
                Ok(edit) if edit.new_files.is_empty() && edit.last_sequence.unwrap_or(0) == 0 => {}
                _ => return false,
            },
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// Writes the first MANIFEST of a new database and points `CURRENT` at it.
fn new_db(env: &dyn Env, dir: &Path, options: &Options) -> Result<()> {
    let edit = VersionEdit {
        comparator: Some(options.comparator.name().to_owned()),
        log_number: Some(0),
        next_file_number: Some(2),
        last_sequence: Some(0),
        ..VersionEdit::default()
    };
    let path = filename::manifest_file(dir, 1);
    let result = (|| {
        let mut writer = LogWriter::new(env.new_writable_file(&path)?);
        let mut record = Vec::new();
        edit.encode_into(&mut record);
        writer.add_record(&record)?;
        writer.sync()?;
        set_current_file(env, dir, 1)
    })();
    if result.is_err() && !current_names(env, dir, 1) {
        let _ = env.remove_file(&path);
    }
    result
}

/// Fails if the log the MANIFEST names as live is missing. A database always has it: the edit
/// that makes a log live is written after the log's name is durable, and older logs are
/// deleted only after that edit is. A missing live log means the MANIFEST lost records (its
/// tail truncated or damaged) whose effects, older logs deleted, already happened.
/// [`check`](crate::check) reports the same error as damage.
pub(crate) fn live_log_must_exist(env: &dyn Env, dir: &Path, number: u64) -> Result<()> {
    let path = filename::log_file(dir, number);
    if number == 0 || env.exists(&path) {
        return Ok(());
    }
    Err(Error::corruption(
        path,
        0,
        "the log the MANIFEST names as live is missing: the MANIFEST has lost records, or the \
         log was deleted (repair the database)",
    ))
}

/// Fails if a table or blob file the current version lists is missing from the directory.
fn check_tables_exist(env: &dyn Env, dir: &Path, versions: &VersionSet) -> Result<()> {
    let mut expected: HashSet<u64> = versions
        .live_file_list()
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    let mut expected_blobs: HashSet<u64> =
        versions.current_ref().blob_files.keys().copied().collect();
    for name in env.children(dir)? {
        match filename::parse_file_name(&name) {
            Some((FileKind::Table, n)) => {
                expected.remove(&n);
            }
            Some((FileKind::Blob, n)) => {
                expected_blobs.remove(&n);
            }
            _ => {}
        }
    }
    if let Some(&first) = expected_blobs.iter().min() {
        return Err(Error::corruption(
            filename::blob_file(dir, first),
            0,
            format!(
                "{} blob file(s) the MANIFEST lists are missing",
                expected_blobs.len()
            ),
        ));
    }
    if expected.is_empty() {
        return Ok(());
    }
    let mut missing: Vec<u64> = expected.into_iter().collect();
    missing.sort();
    let first = filename::table_file(dir, missing[0]);
    Err(Error::corruption(
        first,
        0,
        format!(
            "{} table file(s) the MANIFEST lists are missing: {missing:?}",
            missing.len()
        ),
    ))
}

/// What replaying the logs accumulates, from the first log to the last.
///
/// `recover_logs` owns it for the whole replay and holds the state lock throughout: `state` is
/// borrowed from that guard, so nothing else sees the memtable or the version set until the
/// replay is recorded in the MANIFEST (or, read-only, published).
struct Recovery<'s> {
    /// The locked state; replayed writes go into `state.mem`.
    state: &'s mut DbState,
    /// The level-0 tables the replay wrote, and the blob garbage they make; recorded in the
    /// MANIFEST with the new log number once every log is replayed.
    edit: VersionEdit,
    /// The highest seqno replayed so far (at least the MANIFEST's last seqno).
    max_sequence: SeqNo,
    /// The seqno the next replayed write must start at, once one log record has been
    /// replayed: a later write starting after it follows a gap.
    next_sequence: Option<SeqNo>,
    /// The blob files replayed pointers reach.
    blobs: ReplayedBlobs,
}

impl<'s> Recovery<'s> {
    fn new(state: &'s mut DbState) -> Self {
        let max_sequence = state.versions.last_sequence;
        Recovery {
            state,
            edit: VersionEdit::default(),
            max_sequence,
            next_sequence: None,
            blobs: ReplayedBlobs::default(),
        }
    }

    /// How many level-0 tables the replay has written so far.
    fn tables_written(&self) -> usize {
        self.edit.new_files.len()
    }

    /// Writes the memtable to a level-0 table (added to the edit) and starts an empty one.
    fn flush_memtable(&mut self, inner: &DbInner) -> Result<()> {
        let mem = std::mem::replace(
            &mut self.state.mem,
            Arc::new(MemTable::new(inner.icmp.clone())),
        );
        write_level0_table(inner, self.state, &mem, &mut self.edit)
    }

    /// Whether `batch`, the first write of a log, starts after a gap: the writes before it
    /// that the previous log should end with were lost.
    fn starts_after_gap(&self, batch: &WriteBatch) -> bool {
        self.next_sequence.is_some_and(|next| batch.seqno() > next)
    }

    /// Inserts `batch` into the memtable and advances the seqnos; a memtable over the write
    /// buffer size becomes a level-0 table (not in a read-only open, which writes nothing).
    fn apply(&mut self, inner: &DbInner, batch: &WriteBatch) -> Result<()> {
        self.next_sequence = Some(batch.seqno() + u64::from(batch.count()));
        insert_batch(&self.state.mem, batch)?;
        let last = batch.seqno() + u64::from(batch.count()).saturating_sub(1);
        self.max_sequence = self.max_sequence.max(last);
        if !inner.read_only
            && self.state.mem.approximate_memory_usage() > inner.options.write_buffer_size
        {
            self.flush_memtable(inner)?;
        }
        Ok(())
    }
}

/// Replays the logs the MANIFEST does not cover, starts a new log, and records the new state.
fn recover_logs(inner: &Arc<DbInner>) -> Result<()> {
    let mut state = inner.lock_state();
    let names = inner.env.children(&inner.dir)?;
    let mut logs: Vec<u64> = names
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some((FileKind::Log, n)) if state.versions.log_is_live(n) => Some(n),
            _ => None,
        })
        .collect();
    logs.sort();
    // A blob file the MANIFEST does not list yet (its memtable was not flushed) keeps its
    // number: a new file must never take it.
    for name in &names {
        if let Some((FileKind::Blob, n)) = filename::parse_file_name(name) {
            state.versions.mark_file_number_used(n);
        }
    }
    let mut recovery = Recovery::new(&mut state);
    let mut reusable = None;
    for (i, &number) in logs.iter().enumerate() {
        let last = i + 1 == logs.len();
        let reuse = last && inner.options.reuse_logs && !inner.read_only;
        if reuse && !recovery.state.mem.is_empty() {
            // The reused log's memtable must hold that log's entries only: the earlier logs
            // become obsolete below, so their entries go to a table first.
            recovery.flush_memtable(inner)?;
        }
        let tables_before = recovery.tables_written();
        let replayed = replay_log(inner, &mut recovery, number)?;
        recovery.state.versions.mark_file_number_used(number);
        // Writes after a torn write, or after writes a crash lost, were never synced (a sync
        // write first syncs every older log), and replaying them would leave a hole: the
        // database ends where the loss starts. The logs not replayed are kept in lost/.
        if replayed.gap {
            set_aside_logs(inner, &logs[i..])?;
            break;
        }
        if replayed.torn && !last {
            set_aside_logs(inner, &logs[i + 1..])?;
            break;
        }
        // LevelDB's reuse_logs: keep appending to the last log, with its memtable, if its
        // replay flushed nothing and it ends cleanly after its last record (appending after a
        // torn or damaged tail would put damage in the middle of the log).
        if reuse && recovery.tables_written() == tables_before {
            match replayed.clean_end {
                Some(end)
                    if end
                        == inner
                            .env
                            .file_size(&filename::log_file(&inner.dir, number))? =>
                {
                    reusable = Some((number, end));
                }
                _ => info!(inner, "log {number} does not end cleanly; not reusing it"),
            }
        }
    }
    let versions = &mut recovery.state.versions;
    versions.last_sequence = versions.last_sequence.max(recovery.max_sequence);
    inner
        .visible_seqno
        .store(versions.last_sequence, std::sync::atomic::Ordering::Release);

    if inner.read_only {
        // Replayed data stays in the memtable; nothing is written.
        inner.publish_view(recovery.state);
        return Ok(());
    }
    let (log_number, log_writer) = match reusable {
        Some((number, len)) => {
            let path = filename::log_file(&inner.dir, number);
            let file = inner.env.new_appendable_file(&path)?;
            info!(inner, "reusing log {number} ({len} bytes) and its memtable");
            (number, LogWriter::with_existing_len(file, len))
        }
        None => {
            // Flush what the last log left in the memtable, so the MANIFEST covers every log.
            if !recovery.state.mem.is_empty() {
                recovery.flush_memtable(inner)?;
            }
            let new_log = recovery.state.versions.new_file_number();
            let file = inner
                .env
                .new_writable_file(&filename::log_file(&inner.dir, new_log))?;
            // The MANIFEST switch below syncs the directory, making the new log's name durable.
            (new_log, LogWriter::new(file))
        }
    };
    let Recovery {
        mut edit, blobs, ..
    } = recovery;
    *inner.log.lock().unwrap_or_else(|e| e.into_inner()) = Some(log_writer);
    state.log_number = log_number;
    let current = state.versions.current();
    edit.new_blob_files = blobs.files_to_add(inner, &|n| current.blob_files.contains_key(&n))?;
    edit.log_number = Some(log_number);
    edit.prev_log_number = Some(0);
    state.versions.log_and_apply(&mut edit)?;
    inner.publish_view(&state);
    info!(inner, "recovered {} log(s); log {log_number}", logs.len());
    super::obsolete::delete_obsolete_files(inner, &mut state);
    Ok(())
}

/// How replaying one log ended.
struct Replayed {
    /// Where a writer continuing the log would append, if the log ends exactly after its last
    /// record.
    clean_end: Option<u64>,
    /// The log ends in a torn tail: a crash cut its last write short.
    torn: bool,
    /// The log's first write does not follow the previous log's last one: that log lost its
    /// last writes in a crash, and this one was not replayed.
    gap: bool,
}

/// Replays log `number` into the memtable, flushing it to level-0 tables as it fills.
///
/// Damage inside the log is an error: it would leave a hole. Damage that runs to the end of the
/// log is a torn tail, the normal result of a crash while appending, and the log ends before it.
fn replay_log(inner: &DbInner, recovery: &mut Recovery<'_>, number: u64) -> Result<Replayed> {
    let path = filename::log_file(&inner.dir, number);
    let file = inner.env.new_sequential_file(&path)?;
    let mut reader = LogReader::new(file, &path, ReadMode::Recovery);
    let mut first = true;
    while let Some(record) = reader.next_record()? {
        let batch = WriteBatch::decode(record).map_err(|e| match e {
            Error::Corruption {
                offset: at, reason, ..
            } => Error::corruption(&path, reader.last_record_offset() + at, reason),
            other => other,
        })?;
        if first {
            first = false;
            if recovery.starts_after_gap(&batch) {
                info!(
                    inner,
                    "{}: starts at sequence {}, after a gap from {}: the previous log lost its \
                     last writes",
                    path.display(),
                    batch.seqno(),
                    recovery.next_sequence.unwrap_or_default()
                );
                return Ok(Replayed {
                    clean_end: None,
                    torn: false,
                    gap: true,
                });
            }
        }
        if batch.has_blob_pointers()
            && !recovery.blobs.check_batch(
                inner,
                &batch,
                &recovery.state.versions.current_ref().blob_tombstones,
            )?
        {
            // A value this write points to never reached the disk whole (a power loss before
            // anything was synced): the log's good prefix ends before the write.
            info!(
                inner,
                "{}: the write at offset {} points to a blob value that is missing or damaged; \
                 the log ends before it",
                path.display(),
                reader.last_record_offset()
            );
            return Ok(Replayed {
                clean_end: None,
                torn: true,
                gap: false,
            });
        }
        recovery.apply(inner, &batch)?;
    }
    let torn = reader.torn_tail();
    if torn {
        info!(
            inner,
            "{}: torn tail after offset {}, dropped",
            path.display(),
            reader.end_of_last_record()
        );
    }
    Ok(Replayed {
        clean_end: (!torn).then(|| reader.end_of_last_record()),
        torn,
        gap: false,
    })
}

/// Moves logs that follow a torn log into `lost/` (a read-only open only skips them), and
/// records the ones moved in the info log.
fn set_aside_logs(inner: &DbInner, numbers: &[u64]) -> Result<()> {
    for &number in numbers {
        let path = filename::log_file(&inner.dir, number);
        if inner.read_only {
            info!(inner, "{}: after a torn log; not replayed", path.display());
            continue;
        }
        let lost = inner.dir.join("lost");
        inner.env.create_dir_all(&lost)?;
        let name = path.file_name().expect("a log has a file name");
        inner.env.rename(&path, &lost.join(name))?;
        info!(
            inner,
            "{}: after a torn log; not replayed, moved to lost/",
            path.display()
        );
    }
    Ok(())
}

/// Inserts every operation of `batch` into `mem` at its seqnos.
pub(crate) fn insert_batch(mem: &MemTable, batch: &WriteBatch) -> Result<()> {
    mem.add_batch(batch);
    Ok(())
}

/// Deletes the database in `path`: every file of its own (the names [`FileKind`] covers: logs,
/// tables, MANIFESTs, `CURRENT`, `LOCK`, the info log, temporary and blob files), then the
/// directory if nothing else is left in it. Files and directories that are not the
/// database's (`notes.txt`, `lost/`) are left alone, and so is the directory that holds them.
///
/// Only a database is destroyed: `CURRENT` must name a MANIFEST that exists and reads whole
/// (a torn tail aside), as opening would read it; the comparator it records does not matter.
/// Anything else, a directory of other files or the remains of a damaged database, is
/// refused before anything is deleted or created. A directory that does not exist is not an
/// error: there is nothing to destroy (LevelDB's `DestroyDB` answers the same).
///
/// # Errors
/// - [`Error::NoDatabase`] if `path` holds no database by the rule above; nothing changed;
/// - [`Error::Locked`] if the database is open;
/// - I/O errors (the first one; the other files are still deleted). `CURRENT` and the
///   MANIFESTs are deleted last, so a destroy stopped by an error can be run again.
///
/// # Example
///
/// ```
/// use strata::{Db, Options, WriteOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("scratch");
/// let db = Db::open(&path, Options { create_if_missing: true, ..Options::default() })?;
/// db.put(&WriteOptions::default(), b"k", b"v")?;
/// assert!(strata::destroy(&path, &Options::default()).is_err()); // still open
/// drop(db);
/// strata::destroy(&path, &Options::default())?;
/// assert!(!path.exists());
/// strata::destroy(&path, &Options::default())?; // nothing left to destroy
///
/// // A directory that is not a database is refused, and keeps its files.
/// std::fs::write(dir.path().join("000001.log"), b"not a log of mine")?;
/// let refused = strata::destroy(dir.path(), &Options::default());
/// assert!(matches!(refused, Err(strata::Error::NoDatabase { .. })));
/// assert!(dir.path().join("000001.log").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
    let dir = path.as_ref();
    let env = &*options.env;
    let names = match env.children(dir) {
        Ok(names) => names,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(e),
    };
    refuse_unless_database(env, dir, options)?;
    let lock_path = filename::lock_file(dir);
    let lock = env.lock_file(&lock_path)?;
    let mut own: Vec<(FileKind, String)> = names
        .into_iter()
        .filter_map(|name| match filename::parse_file_name(&name) {
            Some((FileKind::Lock, _)) | None => None,
            Some((kind, _)) => Some((kind, name)),
        })
        .collect();
    // While CURRENT names a MANIFEST that reads, the directory is still a database to the
    // rule above: deleting them last lets a destroy stopped by an error be run again.
    own.sort_by_key(|(kind, _)| match kind {
        FileKind::Current => 2,
        FileKind::Manifest => 1,
        _ => 0,
    });
    let mut first_error = None;
    for (_, name) in own {
        if let Err(e) = env.remove_file(&dir.join(&name)) {
            first_error.get_or_insert(e);
        }
    }
    drop(lock);
    let _ = env.remove_file(&lock_path);
    // Fails, and keeps the directory, while it holds anything that is not the database's.
    let _ = env.remove_dir(dir);
    first_error.map_or(Ok(()), Err)
}

/// `Ok` if `dir` holds a database by [`destroy`]'s rule: `CURRENT` names a MANIFEST that
/// exists and reads. Otherwise [`Error::NoDatabase`] saying why (or the I/O error that kept
/// it from knowing).
fn refuse_unless_database(env: &dyn Env, dir: &Path, options: &Options) -> Result<()> {
    if !env.exists(&filename::current_file(dir)) {
        return Err(Error::no_database(
            dir,
            "it has no CURRENT file; nothing deleted",
        ));
    }
    let icmp = InternalKeyComparator::new(options.comparator.clone());
    match crate::version::set::replay_manifest(env, dir, &icmp) {
        // Another comparator: a database all the same.
        Ok(_) | Err(Error::InvalidArgument(_)) => Ok(()),
        Err(e @ Error::Corruption { .. }) => Err(Error::no_database(
            dir,
            format!("its CURRENT does not name a MANIFEST that reads ({e}); nothing deleted"),
        )),
        Err(e) => Err(e),
    }
}
