// SPDX-License-Identifier: MIT OR Apache-2.0
//! `Db::checkpoint`: a consistent copy of a live database in a new directory, made while the
//! database runs and takes writes.
//!
//! The design follows RocksDB's checkpoint: stop obsolete-file deletion, take a cut of the
//! database's files, hard-link the immutable ones (tables, blob files) where the file system
//! allows and copy them otherwise, then write the copy's own MANIFEST and `CURRENT`.
//!
//! 1. **The cut.** A writable database is flushed first (`flush_now`, through the writer queue,
//!    so every write acknowledged before the call is in the memtable it switches), and the cut
//!    is then the current version, read under the state mutex. A version always holds a prefix
//!    of the writes: memtables are flushed in order, each whole, and compaction only rewrites
//!    what tables hold. So the copy holds a prefix of the batches, each all or nothing; writes
//!    racing the checkpoint land in a later memtable, in the copy only if that memtable too
//!    was flushed before the cut. The copy has no log (its MANIFEST's log number is 0, as in a
//!    new LevelDB database). A read-only database cannot flush: its live logs, which no one
//!    writes while it holds the shared lock, are copied whole, with its every blob file (its
//!    logs may point into blob files its version does not list yet); the copy's MANIFEST keeps
//!    their log numbers.
//! 2. **The pin.** Under the same lock acquisition as the cut, `DbState::file_deletion_pins`
//!    is raised: obsolete-file deletion does nothing while it is above 0, so no file of the cut
//!    goes before it is linked. When the pin is released, the sweep that was held back runs.
//! 3. **The files**, linked or copied (`Env::link_file`); then a new MANIFEST holding the cut's
//!    version and counters (`VersionSet::checkpoint_manifest`), synced; then `CURRENT`, written
//!    to a temporary file, synced, renamed, and the directory synced (`set_current_file`); then
//!    the parent directory, if the checkpoint created the directory. Until `CURRENT` exists the
//!    directory is not a database; if any step fails, the files made so far are removed (and
//!    the directory, if the checkpoint created it), and the source database is untouched.
//!
//! Locking: the state mutex is held only to flush (inside `flush_now`), to take the cut and
//! the pin, and to release the pin; linking, copying and syncing run without a lock.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::flush::flush_now;
use super::obsolete::delete_obsolete_files;
use super::open::info;
use super::DbInner;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::log::LogWriter;
use crate::version::set::{log_is_live, set_current_file};

/// What a checkpoint copies, taken under the state mutex.
struct Cut {
    /// The number of the copy's MANIFEST.
    manifest_number: u64,
    /// The copy's MANIFEST records.
    manifest_records: Vec<Vec<u8>>,
    /// The numbers of the tables to link or copy.
    tables: BTreeSet<u64>,
    /// The numbers of the blob files to link or copy.
    blob_files: BTreeSet<u64>,
    /// The copy's log number and previous log number (0 and 0 for a writable database, whose
    /// copy has no log).
    log_numbers: (u64, u64),
    /// The database is read-only: its live logs are copied, and every blob file in the
    /// directory (see the module's notes).
    read_only: bool,
}

/// Holds back obsolete-file deletion while it lives (`DbState::file_deletion_pins`); dropping it
/// runs the deletion that was held back, once no other pin remains.
struct DeletionPin<'a> {
    inner: &'a DbInner,
}

impl Drop for DeletionPin<'_> {
    fn drop(&mut self) {
        let mut state = self.inner.lock_state();
        state.file_deletion_pins -= 1;
        if state.file_deletion_pins == 0 {
            delete_obsolete_files(self.inner, &mut state);
        }
    }
}

/// Makes a checkpoint of the database in `dest`: see [`Db::checkpoint`](crate::Db::checkpoint).
pub(crate) fn checkpoint(inner: &Arc<DbInner>, dest: &Path) -> Result<()> {
    let env = &*inner.env;
    let created_dir = prepare_directory(env, dest)?;
    let mut made = Vec::new();
    let result = take_cut(inner).and_then(|(cut, pin)| {
        let written = write_checkpoint(inner, &cut, dest, created_dir, &mut made);
        drop(pin);
        written
    });
    match &result {
        Ok(()) => info!(inner, "checkpoint made in {}", dest.display()),
        Err(e) => {
            info!(inner, "checkpoint in {} failed: {e}", dest.display());
            // The copy is not a database until CURRENT exists, so removing it in any order is
            // safe; what cannot be removed is left, and the error above says why.
            for path in made.iter().rev() {
                let _ = env.remove_file(path);
            }
            if created_dir {
                let _ = env.remove_dir(dest);
            }
        }
    }
    result
}

/// Checks that `dest` can take a checkpoint, creating it if it does not exist. Returns true if
/// it was created.
fn prepare_directory(env: &dyn Env, dest: &Path) -> Result<bool> {
    if env.exists(dest) {
        let entries = env.children(dest)?;
        if !entries.is_empty() {
            return Err(Error::invalid_argument(format!(
                "checkpoint directory {} is not empty ({} entries)",
                dest.display(),
                entries.len()
            )));
        }
        return Ok(false);
    }
    let parent = dest.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        if !env.exists(parent) {
            return Err(Error::invalid_argument(format!(
                "the parent of checkpoint directory {} does not exist",
                dest.display()
            )));
        }
    }
    env.create_dir_all(dest)?;
    Ok(true)
}

/// Flushes a writable database, then takes the cut and the deletion pin under one hold of the
/// state mutex.
fn take_cut(inner: &Arc<DbInner>) -> Result<(Cut, DeletionPin<'_>)> {
    if !inner.read_only {
        flush_now(inner)?;
    }
    let mut state = inner.lock_state();
    if let Some(e) = &state.bg_error {
        return Err(e.clone());
    }
    let versions = &state.versions;
    let (log_number, prev_log_number) = if inner.read_only {
        (versions.log_number, versions.prev_log_number)
    } else {
        (0, 0)
    };
    let (manifest_number, manifest_records) =
        versions.checkpoint_manifest(log_number, prev_log_number);
    let current = versions.current_ref();
    let tables = current
        .files
        .iter()
        .flat_map(|level| level.iter().map(|f| f.number))
        .collect();
    let blob_files = current.blob_files.keys().copied().collect();
    state.file_deletion_pins += 1;
    let cut = Cut {
        manifest_number,
        manifest_records,
        tables,
        blob_files,
        log_numbers: (log_number, prev_log_number),
        read_only: inner.read_only,
    };
    Ok((cut, DeletionPin { inner }))
}

/// Links or copies the cut's files into `dest`, then writes its MANIFEST and `CURRENT`, and
/// makes them durable. Every file made is pushed to `made` (for the caller to remove on error).
fn write_checkpoint(
    inner: &DbInner,
    cut: &Cut,
    dest: &Path,
    created_dir: bool,
    made: &mut Vec<PathBuf>,
) -> Result<()> {
    let env = &*inner.env;
    let (mut tables, mut blob_files) = (cut.tables.clone(), cut.blob_files.clone());
    let (log_number, prev_log_number) = cut.log_numbers;
    for name in env.children(&inner.dir)? {
        let Some((kind, n)) = filename::parse_file_name(&name) else {
            continue;
        };
        let (from, to) = (inner.dir.join(&name), dest.join(&name));
        let immutable = match kind {
            FileKind::Table => tables.remove(&n),
            FileKind::Blob => blob_files.remove(&n) || cut.read_only,
            _ => false,
        };
        if immutable {
            env.link_file(&from, &to)?;
            made.push(to);
        } else if kind == FileKind::Log
            && cut.read_only
            && log_is_live(n, log_number, prev_log_number)
        {
            // Pushed first: a failed copy may leave part of the file.
            made.push(to.clone());
            crate::env::copy_file(env, &from, &to)?;
        }
    }
    let missing = (tables.first().map(|&n| filename::table_file(&inner.dir, n))).or_else(|| {
        blob_files
            .first()
            .map(|&n| filename::blob_file(&inner.dir, n))
    });
    if let Some(path) = missing {
        return Err(Error::corruption(
            path,
            0,
            "a file the current version lists is missing: the checkpoint cannot copy it",
        ));
    }
    let manifest = filename::manifest_file(dest, cut.manifest_number);
    made.push(manifest.clone());
    let mut writer = LogWriter::new(env.new_writable_file(&manifest)?);
    for record in &cut.manifest_records {
        writer.add_record(record)?;
    }
    writer.sync()?;
    drop(writer);
    made.push(filename::temp_file(dest, cut.manifest_number));
    made.push(filename::current_file(dest));
    set_current_file(env, dest, cut.manifest_number)?;
    if created_dir {
        // The new directory's own entry; a relative name without a parent is in `.`.
        match dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => env.sync_dir(parent)?,
            None if dest.is_relative() => env.sync_dir(Path::new("."))?,
            None => {}
        }
    }
    Ok(())
}
