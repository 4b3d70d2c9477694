// SPDX-License-Identifier: MIT OR Apache-2.0
//! The write side of key-value separation: turning large values into blob pointers, the blob
//! files of the memtables not yet flushed, and checking pointers replayed from logs.
//!
//! # Locking
//!
//! `DbInner::blob_writers` guards [`BlobWriters`]. Writers' own threads take it alone, to
//! append their large values before they join the writer queue. The memtable switch takes it
//! under the state mutex and the log mutex, the leader of a synced group under the log mutex,
//! and a flush alone. Lock order: state, then log, then blob writers; a thread holding the blob
//! writers takes no other lock.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use super::DbInner;
use crate::batch::WriteBatch;
use crate::blob::{read_value, BlobFileWriter, BlobPointer, BLOB_HEADER_LEN};
use crate::error::{Error, Result};
use crate::filename;
use crate::key::ValueKind;
use crate::version::BlobFileMeta;

/// The blob files of the memtables not yet flushed.
#[derive(Debug, Default)]
pub(crate) struct BlobWriters {
    /// The file the current memtable's large values go to; created on first use.
    pub(crate) active: Option<BlobFileWriter>,
    /// A file number set aside for the next active file.
    reserved: Option<u64>,
    /// Files closed by memtable switches, whose memtables are not flushed yet. The flush syncs
    /// them and adds them to the version.
    pub(crate) sealed: Vec<BlobFileWriter>,
    /// A blob file was created since the directory was last synced: its name would not
    /// survive a power loss yet.
    dir_entry_unsynced: bool,
}

impl BlobWriters {
    /// Syncs every file not synced yet, and the directory if a file's name is new: what a
    /// synced write does before syncing the log, so that no synced pointer outlives its value.
    pub(crate) fn sync_all(&mut self, inner: &DbInner) -> Result<()> {
        for w in self.sealed.iter_mut().chain(self.active.as_mut()) {
            w.sync()?;
        }
        if self.dir_entry_unsynced {
            inner.env.sync_dir(&inner.dir)?;
            self.dir_entry_unsynced = false;
        }
        Ok(())
    }
}

impl DbInner {
    fn lock_blob_writers(&self) -> MutexGuard<'_, BlobWriters> {
        self.blob_writers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The blob writers, with an active file open. Takes a file number under the state mutex
    /// if one is needed (not while holding the blob writers: see the lock order).
    fn blob_writers_with_active(&self) -> Result<MutexGuard<'_, BlobWriters>> {
        loop {
            let mut blobs = self.lock_blob_writers();
            if blobs.active.is_some() {
                return Ok(blobs);
            }
            if let Some(number) = blobs.reserved.take() {
                let writer = BlobFileWriter::create(&*self.env, &self.dir, number)?;
                blobs.active = Some(writer);
                blobs.dir_entry_unsynced = true;
                return Ok(blobs);
            }
            drop(blobs);
            let number = {
                let mut state = self.lock_state();
                if let Some(e) = &state.bg_error {
                    return Err(e.clone());
                }
                let n = state.versions.new_file_number();
                state.pending_outputs.insert(n);
                n
            };
            let mut blobs = self.lock_blob_writers();
            if blobs.active.is_none() && blobs.reserved.is_none() {
                blobs.reserved = Some(number);
            }
        }
    }

    /// Records a failed blob write: like a failed log write, it stops every later write.
    fn blob_write_failed(&self, e: &Error) {
        let mut state = self.lock_state();
        self.set_error(&mut state, e);
    }

    /// `batch` with every value of at least `Options::blob_threshold` bytes appended to the
    /// active blob file and replaced by its pointer; `batch` itself when there is none. The
    /// appended bytes are handed to the file system before this returns, so that a process
    /// kill after the log write cannot lose them.
    pub(crate) fn separate_values(&self, batch: WriteBatch) -> Result<WriteBatch> {
        let Some(threshold) = self.options.blob_threshold else {
            return Ok(batch);
        };
        let large = |op: &crate::batch::BatchOp<'_>| {
            op.kind == ValueKind::Value && op.value.len() >= threshold
        };
        if !batch.iter().any(|op| op.is_ok_and(|op| large(&op))) {
            return Ok(batch);
        }
        // A blob file that cannot be created stops writes too, as a log that cannot be.
        let mut blobs = self
            .blob_writers_with_active()
            .inspect_err(|e| self.blob_write_failed(e))?;
        let writer = blobs.active.as_mut().expect("opened above");
        let mut out = WriteBatch::with_capacity(batch.count() as usize * 48);
        let appended = (|| {
            for op in batch.iter() {
                let op = op?;
                if large(&op) {
                    let pointer = writer.add(op.key, op.value, self.options.blob_compression)?;
                    out.put_blob_pointer(op.key, &pointer);
                } else if op.kind == ValueKind::Deletion {
                    out.delete(op.key);
                } else {
                    out.put(op.key, op.value);
                }
            }
            writer.flush()
        })();
        self.blob_active_bytes
            .store(writer.len(), Ordering::Relaxed);
        drop(blobs);
        if let Err(e) = appended {
            self.blob_write_failed(&e);
            return Err(e);
        }
        Ok(out)
    }

    /// Closes the active blob file at a memtable switch: it belongs to the memtable becoming
    /// immutable. Requires the state and log mutexes (lock order).
    pub(crate) fn seal_active_blob_file(&self) {
        let mut blobs = self.lock_blob_writers();
        if let Some(w) = blobs.active.take() {
            blobs.sealed.push(w);
        }
        self.blob_active_bytes.store(0, Ordering::Relaxed);
    }

    /// Syncs every sealed blob file (those of the memtable being flushed, and of none newer,
    /// as only one memtable is immutable at a time) and hands back their descriptions for the
    /// flush's version edit. The files stay in `sealed` until the edit is applied, so that a
    /// synced write meanwhile still finds them synced.
    pub(crate) fn sync_sealed_blob_files(&self) -> Result<Vec<BlobFileMeta>> {
        // Write the sealed files' data back first without the lock, through handles of our
        // own (a sync covers the whole file, whichever handle asks), so that writers appending
        // to the active file are not held up by a long sync; the syncs under the lock below
        // then find little or nothing left to write.
        let sealed: Vec<u64> = self
            .lock_blob_writers()
            .sealed
            .iter()
            .filter(|w| !w.is_synced())
            .map(BlobFileWriter::number)
            .collect();
        for number in sealed {
            let path = filename::blob_file(&self.dir, number);
            self.env.new_appendable_file(&path)?.sync()?;
        }
        let mut blobs = self.lock_blob_writers();
        let mut metas = Vec::new();
        // (The flush's MANIFEST write syncs the directory, making the files' names durable.)
        for w in &mut blobs.sealed {
            w.sync()?;
            metas.push(BlobFileMeta {
                number: w.number(),
                file_size: w.len(),
                value_bytes: w.value_bytes(),
            });
        }
        Ok(metas)
    }

    /// Forgets sealed blob files once a flush added them to the version.
    pub(crate) fn release_sealed_blob_files(&self, numbers: &[u64]) {
        self.lock_blob_writers()
            .sealed
            .retain(|w| !numbers.contains(&w.number()));
    }
}

/// What replaying logs learned about blob files: the files pointers reach, and their sizes.
#[derive(Debug, Default)]
pub(crate) struct ReplayedBlobs {
    sizes: HashMap<u64, Option<u64>>,
    /// Every blob file a replayed pointer reaches.
    pub(crate) referenced: BTreeSet<u64>,
}

impl ReplayedBlobs {
    /// Checks every pointer of `batch`: its value must be in its file, whole, with the
    /// pointer's checksum. `Ok(false)` if one is not: after a power loss a log may hold
    /// pointers whose values never reached the disk, and the log's good prefix ends there.
    ///
    /// # Errors
    /// An I/O error reading a blob file (other than its being too short).
    pub(crate) fn check_batch(&mut self, inner: &DbInner, batch: &WriteBatch) -> Result<bool> {
        for op in batch.iter() {
            let op = op?;
            if op.kind != ValueKind::BlobPointer {
                continue;
            }
            let pointer =
                BlobPointer::decode(op.value).expect("WriteBatch::decode checked every pointer");
            let path = filename::blob_file(&inner.dir, pointer.file);
            let size = *self
                .sizes
                .entry(pointer.file)
                .or_insert_with(|| inner.env.file_size(&path).ok());
            if !size.is_some_and(|len| pointer.fits_in(len)) {
                return Ok(false);
            }
            let file = inner.blob_cache.file(pointer.file)?;
            match read_value(&*file, &path, &pointer, true) {
                Ok(_) => {}
                Err(e) if e.is_corruption() => return Ok(false),
                Err(e) => return Err(e),
            }
            self.referenced.insert(pointer.file);
        }
        Ok(true)
    }

    /// Syncs the blob files that replayed pointers reach and the version does not list yet,
    /// and describes them for the recovery's version edit. (Their value bytes are taken as
    /// their size less the header: close enough for garbage accounting.)
    pub(crate) fn files_to_add(
        &self,
        inner: &DbInner,
        listed: &dyn Fn(u64) -> bool,
    ) -> Result<Vec<BlobFileMeta>> {
        let mut metas = Vec::new();
        for &number in &self.referenced {
            if listed(number) {
                continue;
            }
            let path = filename::blob_file(&inner.dir, number);
            inner.env.new_appendable_file(&path)?.sync()?;
            let file_size = inner.env.file_size(&path)?;
            metas.push(BlobFileMeta {
                number,
                file_size,
                value_bytes: file_size.saturating_sub(BLOB_HEADER_LEN),
            });
        }
        Ok(metas)
    }
}
