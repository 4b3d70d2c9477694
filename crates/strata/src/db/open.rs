// SPDX-License-Identifier: MIT OR Apache-2.0
//! Opening a database: creating it, taking the lock, recovering the version set from the
//! MANIFEST, replaying the write-ahead logs (`recovery.rs`), and starting a new log and
//! MANIFEST.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};

use arc_swap::ArcSwap;

use crate::blob::BlobCache;

/// Blob files kept open for reads (each one descriptor).
const BLOB_FILES_OPEN: usize = 64;

use super::background;
use super::{DbInner, DbState, ReadView};
use crate::cache::row_cache::RowCache;
use crate::cache::{BlockCache, TableCache};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::info_log::InfoLog;
use crate::key::InternalKeyComparator;
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
    // Readers share the lock when they can; while a writer holds it, a reader takes none and
    // reads beside it (`read_only.rs`).
    let (lock, beside_writer) = if !read_only {
        (Some(env.lock_file(&lock_path)?), false)
    } else if env.exists(&lock_path) {
        match env.lock_file_shared(&lock_path) {
            Ok(lock) => (Some(lock), false),
            Err(Error::Locked { .. }) => (None, true),
            Err(e) => return Err(e),
        }
    } else {
        (None, false)
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
    // A read-only handle loads its state below (`read_only::load`), retrying beside a writer.
    if !read_only {
        versions.recover()?;
        check_tables_exist(&*env, dir, &versions)?;
        live_log_must_exist(&*env, dir, versions.log_number)?;
    }
    if options.paranoid_checks && !read_only {
        // Every table's footer, index and filter, checksums verified, before anything is written.
        for level in &versions.current().files {
            for file in level.iter() {
                table_cache.get(file.meta.number, file.meta.file_size)?;
            }
        }
    }

    let mem = Arc::new(MemTable::for_database(
        icmp.clone(),
        options.write_buffer_size,
    ));
    let view = ReadView {
        mem: mem.clone(),
        imm: None,
        version: versions.current(),
        fixed_seqno: None,
        _held: None,
        generation: 0,
    };
    let last_sequence = versions.last_sequence;
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        env: env.clone(),
        icmp,
        block_cache,
        table_cache,
        row_cache: (options.row_cache_capacity > 0 && !read_only)
            .then(|| RowCache::new(options.row_cache_capacity)),
        blob_cache: Arc::new(BlobCache::new(env.clone(), dir, BLOB_FILES_OPEN)),
        blob_writers: Mutex::new(Default::default()),
        blob_mem_bytes: AtomicU64::new(0),
        blob_appended_bytes: AtomicU64::new(0),
        blob_estimated_bytes: AtomicU64::new(0),
        blob_gc_behind: AtomicBool::new(false),
        snapshots: Arc::new(SnapshotList::default()),
        counters: Default::default(),
        view: ArcSwap::from_pointee(view),
        spare_cursor: Default::default(),
        view_generation: AtomicU64::new(0),
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
            range_marker_wanted: false,
            file_deletion_pins: 0,
            flushed_memtables: Vec::new(),
            compacting: false,
            blob_gc: Default::default(),
        }),
        bg_done: Condvar::new(),
        bg_work: Condvar::new(),
        log: Mutex::new(None),
        log_sync_debt: Mutex::default(),
        has_imm: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        read_only,
        beside_writer,
        info_log,
        bg_thread: Mutex::new(None),
        blob_gc_thread: Mutex::new(None),
        blob_gc_work: Condvar::new(),
        _lock: lock,
        options,
    });
    if read_only {
        super::read_only::load(&inner)?;
    } else {
        super::recovery::recover_logs(&inner, &mut inner.lock_state())?;
    }
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
pub(crate) fn check_tables_exist(env: &dyn Env, dir: &Path, versions: &VersionSet) -> Result<()> {
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
