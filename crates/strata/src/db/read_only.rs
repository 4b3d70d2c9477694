// SPDX-License-Identifier: MIT OR Apache-2.0
//! Read-only handles, and reading beside a writer: loading a consistent state (CURRENT → the
//! MANIFEST it names → the version, then the live logs into a memtable) without writing,
//! renaming or deleting a file, and loading it again (`Db::catch_up`).
//!
//! The lock: a read-only open takes a shared lock on `LOCK` when it can (no writer then can
//! open beside it, and its state never changes). When a writer holds `LOCK` (strata's, in this
//! process or another), it takes no lock at all and reads beside the writer. LevelDB is still
//! refused while strata writes: the writer's exclusive lock is untouched.
//!
//! Beside a writer, every step can meet a file the writer has just replaced: `CURRENT` names
//! a MANIFEST the writer deleted after switching to a new one, a table or log the MANIFEST
//! names is gone after a compaction or flush the reader did not read. Such a load is retried
//! from `CURRENT`, up to [`LOAD_TRIES`] times. A load that succeeds has opened (and mapped)
//! every table and blob file of its version and holds them in the view ([`HeldFiles`]): the
//! writer's deletions then only take the names, and the files stay readable until the last
//! view (a cursor, a snapshot, the current view) holding them is dropped. A log's torn tail
//! is where the writer is appending: the state ends at the last whole record.
//!
//! Ownership and locking: a load builds the new version set and memtable apart, then swaps
//! them into the state under the state mutex (restored if the replay fails) and publishes the
//! view; reads never wait for it, and cursors and snapshots keep the view they were made with.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{DbInner, ReadView};
use crate::blob::PinnedBlobFile;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::table::Table;
use crate::version::set::VersionSet;
use crate::version::version::Version;

/// How many times a load beside a writer starts again from `CURRENT` before it gives up.
pub(crate) const LOAD_TRIES: u32 = 10;

/// The tables and blob files of one view, open, held by a read-only handle beside a writer.
pub(crate) struct HeldFiles {
    _tables: Vec<Arc<Table>>,
    /// Blob files of the version, then those the replayed logs point into; a mutex only so
    /// that the second kind can be added once the logs are replayed (before the view is
    /// published, so no reader ever waits on it).
    blobs: Mutex<Vec<PinnedBlobFile>>,
}

impl HeldFiles {
    /// Opens (through the caches, pinned) every table and blob file of `version`.
    fn open(inner: &DbInner, version: &Version) -> Result<HeldFiles> {
        let mut tables = Vec::new();
        for level in &version.files {
            for file in level.iter() {
                tables.push(
                    inner
                        .table_cache
                        .pin(file.meta.number, file.meta.file_size)?,
                );
            }
        }
        let blobs = version
            .blob_files
            .keys()
            .map(|&n| inner.blob_cache.pin(n))
            .collect::<Result<_>>()?;
        Ok(HeldFiles {
            _tables: tables,
            blobs: Mutex::new(blobs),
        })
    }

    /// Also holds the blob files `numbers` (those the replayed logs point into).
    fn hold_blobs(&self, inner: &DbInner, numbers: &BTreeSet<u64>) -> Result<()> {
        let mut blobs = self.blobs.lock().unwrap_or_else(|e| e.into_inner());
        for &number in numbers {
            blobs.push(inner.blob_cache.pin(number)?);
        }
        Ok(())
    }
}

/// Loads the database's state into `inner`'s read view: at a read-only open and at each
/// `catch_up`. Beside a writer, a load that meets a file the writer replaced or deleted
/// starts again from `CURRENT`.
///
/// # Errors
/// As an open's; beside a writer, after [`LOAD_TRIES`] loads that each met a missing or
/// changing file, the last one's error (it names the file).
pub(crate) fn load(inner: &DbInner) -> Result<()> {
    debug_assert!(inner.read_only);
    let tries = if inner.beside_writer { LOAD_TRIES } else { 1 };
    let mut attempt = 0;
    loop {
        attempt += 1;
        match load_once(inner) {
            Ok(()) => return Ok(()),
            Err(e) if attempt < tries && may_be_the_writers_doing(&e) => {
                // The writer is between two steps (a MANIFEST switch, a compaction's
                // deletions): give it a moment.
                std::thread::sleep(Duration::from_millis(1 << attempt.min(6)));
            }
            Err(e) => return Err(e),
        }
    }
}

/// True for the errors a writer's changes cause to a reader beside it: a file gone (not
/// found), or a file named but not there or not what was expected (corruption: `CURRENT`
/// naming a MANIFEST just deleted, the live log or a table missing).
fn may_be_the_writers_doing(e: &Error) -> bool {
    e.is_not_found() || e.is_corruption()
}

/// One load: the version from the MANIFEST `CURRENT` names, its files opened, the live logs
/// replayed into a new memtable, published.
fn load_once(inner: &DbInner) -> Result<()> {
    let mut versions = VersionSet::new(&inner.dir, inner.env.clone(), inner.icmp.clone());
    versions.recover()?;
    super::open::check_tables_exist(&*inner.env, &inner.dir, &versions)?;
    super::open::live_log_must_exist(&*inner.env, &inner.dir, versions.log_number)?;
    let held = if inner.beside_writer {
        Some(Arc::new(HeldFiles::open(inner, versions.current_ref())?))
    } else {
        if inner.options.paranoid_checks {
            // Every table's footer, index and filter, checksums verified.
            for level in &versions.current_ref().files {
                for file in level.iter() {
                    inner
                        .table_cache
                        .get(file.meta.number, file.meta.file_size)?;
                }
            }
        }
        None
    };
    let mem = Arc::new(MemTable::for_database(
        inner.icmp.clone(),
        inner.options.write_buffer_size,
    ));
    let mut state = inner.lock_state();
    let old_versions = std::mem::replace(&mut state.versions, versions);
    let old_mem = std::mem::replace(&mut state.mem, mem);
    let replayed = super::recovery::recover_logs(inner, &mut state).and_then(|blobs| {
        // The blob files only the logs point into (written since the writer's last flush).
        match &held {
            Some(held) => held.hold_blobs(inner, &blobs),
            None => Ok(()),
        }
    });
    if let Err(e) = replayed {
        state.versions = old_versions;
        state.mem = old_mem;
        return Err(e);
    }
    let seqno = state.versions.last_sequence;
    // The seqno first, then the view (the order writable handles keep too); reads without a
    // snapshot take the view's own seqno.
    inner.visible_seqno.store(seqno, Ordering::Release);
    inner.has_imm.store(false, Ordering::Release);
    inner.view.store(Arc::new(ReadView {
        mem: state.mem.clone(),
        imm: None,
        version: state.versions.current(),
        fixed_seqno: Some(seqno),
        _held: held,
        generation: 0,
    }));
    Ok(())
}
