// SPDX-License-Identifier: MIT OR Apache-2.0
//! Deleting the files no version, pending output or live log needs.
//!
//! Runs under the state mutex, from the background thread after a flush, compaction or blob
//! change is installed (once the job has let go of the version it started from), from open,
//! and from a reader's thread when a cursor that held an old version is dropped
//! (`DbInner::release_view`). Nothing is deleted after a background error: what is live can
//! then not be known for sure; nor while a checkpoint is linking files
//! (`DbState::file_deletion_pins`): its release runs the deletion held back.

use std::collections::HashSet;

use super::open::info;
use super::{DbInner, DbState};
use crate::filename::{self, FileKind};

/// Deletes every file of the database that no version, pending output or live log needs.
/// Does nothing after a background error (what is live can then not be known for sure), nor
/// while a checkpoint pins the files (`DbState::file_deletion_pins`).
pub(crate) fn delete_obsolete_files(inner: &DbInner, state: &mut DbState) {
    if state.bg_error.is_some() || inner.read_only || state.file_deletion_pins > 0 {
        return;
    }
    let mut live: HashSet<u64> = state.pending_outputs.clone();
    state.versions.add_live_files(&mut live);
    state
        .flushed_memtables
        .retain(|(memtable, _)| memtable.strong_count() > 0);
    for (_, blob_files) in &state.flushed_memtables {
        live.extend(blob_files);
    }
    let manifest_number = state.versions.manifest_file_number;
    let Ok(names) = inner.env.children(&inner.dir) else {
        return;
    };
    for name in names {
        let keep = match filename::parse_file_name(&name) {
            None => true,
            Some((kind, n)) => match kind {
                FileKind::Log => state.versions.log_is_live(n),
                FileKind::Manifest => n >= manifest_number,
                FileKind::Table | FileKind::Temp => live.contains(&n),
                FileKind::Current | FileKind::Lock | FileKind::InfoLog => true,
                // Blob files of unflushed memtables and of garbage collection outputs are
                // pending outputs; the others are live while some live version lists them or
                // a flushed memtable a cursor still holds names them.
                FileKind::Blob => live.contains(&n),
            },
        };
        if keep {
            continue;
        }
        match filename::parse_file_name(&name) {
            Some((FileKind::Table, n)) => inner.table_cache.evict(n),
            Some((FileKind::Blob, n)) => inner.blob_cache.evict(n),
            _ => {}
        }
        match inner.env.remove_file(&inner.dir.join(&name)) {
            Ok(()) => info!(inner, "deleted obsolete file {name}"),
            Err(e) => info!(inner, "could not delete obsolete file {name}: {e}"),
        }
    }
}
