// SPDX-License-Identifier: MIT OR Apache-2.0
//! The write side of key-value separation: turning large values into blob pointers, the blob
//! files of the memtables not yet flushed, and checking pointers replayed from logs.
//!
//! # Locking
//!
//! `DbInner::blob_writers` guards [`BlobWriters`]. Who takes it:
//! - a writer's own thread, alone, to append its large values before it joins the writer
//!   queue (a new file's number is taken under the state mutex first, with the blob writers
//!   released);
//! - the memtable switch, under the state mutex and the log mutex (sealing the active file);
//! - the leader of a synced group, or the blob collector syncing the log, under the log mutex
//!   (values are synced before the pointers to them);
//! - a flush: alone to sync the sealed files, then under the state mutex to release them once
//!   the table is installed;
//! - the blob collector (files being written) and `Db::blob_files`, alone.
//!
//! Lock order: state, then log, then blob writers; a thread holding the blob writers takes no
//! other lock (a failed append drops them before it records the error under the state mutex).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::RangeInclusive;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use super::DbInner;
use crate::batch::{BatchOp, WriteBatch};
use crate::blob::{read_value, BlobFileWriter, BlobPointer, BlobScanner};
use crate::error::{Error, Result};
use crate::filename;
use crate::iter::InternalIterator;
use crate::key::{
    append_internal_key, user_key, InternalKeyComparator, ParsedInternalKey, SeqNo, ValueKind,
    MAX_SEQNO,
};
use crate::memtable::{MemLookup, MemTable};
use crate::table::BlockReadOptions;
use crate::version::version::{lookup_in_table, TableLookup, Version};
use crate::version::{BlobFileMeta, FileMetaData};

/// How many blob files' worth of values a memtable takes before it is switched. More files
/// per memtable mean fewer flushes (each syncs a table, the blob files and the MANIFEST);
/// files smaller than a memtable's share keep garbage collection fine-grained.
pub(crate) const BLOB_FILES_PER_MEMTABLE: u64 = 4;

/// The blob files of the memtables not yet flushed.
#[derive(Debug, Default)]
pub(crate) struct BlobWriters {
    /// The file the current memtable's large values go to; created on first use.
    pub(crate) active: Option<BlobFileWriter>,
    /// A file number set aside for the next active file.
    reserved: Option<u64>,
    /// Files closed (full, or at a memtable switch) but not yet listed in the version. The
    /// next flush syncs them and lists them, with the files of the memtable it flushes.
    pub(crate) sealed: Vec<BlobFileWriter>,
    /// A blob file was created since the directory was last synced: its name would not
    /// survive a power loss yet.
    dir_entry_unsynced: bool,
    /// Per blob file, the writes that appended values to it and have not yet returned (their
    /// pointers may not be in a memtable yet). Garbage collection must not rewrite such a
    /// file: it would take those values for dead. Only the active file gains entries, so once
    /// a closed file's count is zero, every pointer into it is visible.
    in_flight: HashMap<u64, usize>,
}

/// A write's claim on the blob file it appended values to, until the write returns; see
/// `BlobWriters::in_flight`.
pub(crate) struct AppendInFlight<'a> {
    inner: &'a DbInner,
    file: u64,
}

impl Drop for AppendInFlight<'_> {
    fn drop(&mut self) {
        let mut blobs = self.inner.lock_blob_writers();
        if let Some(n) = blobs.in_flight.get_mut(&self.file) {
            *n -= 1;
            if *n == 0 {
                blobs.in_flight.remove(&self.file);
            }
        }
    }
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
    /// The blob files some unfinished write appended values to (see
    /// `BlobWriters::in_flight`).
    pub(crate) fn blob_files_being_written(&self) -> Vec<u64> {
        self.lock_blob_writers().in_flight.keys().copied().collect()
    }

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
                let writer = BlobFileWriter::create(&*self.env, &self.dir, number)?
                    .reserving_up_to(self.options.blob_file_size as u64);
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
    /// kill after the log write cannot lose them. The claim returned with it must be held
    /// until the write has returned (its pointers are then in a memtable, or never will be).
    pub(crate) fn separate_values(
        &self,
        batch: WriteBatch,
    ) -> Result<(WriteBatch, Option<AppendInFlight<'_>>)> {
        let Some(threshold) = self.options.blob_threshold else {
            return Ok((batch, None));
        };
        let large = |op: &BatchOp<'_>| op.kind == ValueKind::Value && op.value.len() >= threshold;
        if !batch.iter().any(|op| large(&op)) {
            return Ok((batch, None));
        }
        self.separate_ops(batch.iter(), batch.count() as usize, threshold)
    }

    /// A batch of `ops` (`count` of them) in which every value of at least `threshold` bytes
    /// is appended to the active blob file and replaced by its pointer; see
    /// [`separate_values`](Self::separate_values). `Db::put` of a large value calls it
    /// straight, so that the value is not first copied into a batch.
    pub(crate) fn separate_ops<'b>(
        &self,
        ops: impl Iterator<Item = BatchOp<'b>>,
        count: usize,
        threshold: usize,
    ) -> Result<(WriteBatch, Option<AppendInFlight<'_>>)> {
        let large = |op: &BatchOp<'_>| op.kind == ValueKind::Value && op.value.len() >= threshold;
        self.wait_for_blob_gc()?;
        // A blob file that cannot be created stops writes too, as a log that cannot be.
        let mut blobs = self
            .blob_writers_with_active()
            .inspect_err(|e| self.blob_write_failed(e))?;
        let writer = blobs.active.as_mut().expect("opened above");
        let file = writer.number();
        let len_before = writer.len();
        let mut out = WriteBatch::with_capacity(count * 48);
        let appended = (|| {
            for op in ops {
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
        let appended_now = writer.len() - len_before;
        // A full file is closed; the next large value starts a new one. It stays with the
        // sealed files until a flush lists it (every memtable's files are synced by then).
        let mut closed = None;
        if writer.len() >= self.options.blob_file_size as u64 {
            let full = blobs.active.take().expect("written above");
            closed = Some(full.number());
            blobs.sealed.push(full);
        }
        self.blob_mem_bytes
            .fetch_add(appended_now, Ordering::Relaxed);
        let total = self
            .blob_appended_bytes
            .fetch_add(appended_now, Ordering::Relaxed);
        // Claimed under the same lock as the append, before the file can be closed and listed.
        *blobs.in_flight.entry(file).or_default() += 1;
        drop(blobs);
        if let Some(number) = closed {
            // Outside the lock: dropping the last handle unmaps it.
            self.blob_cache.evict(number);
        }
        let claim = AppendInFlight { inner: self, file };
        // Every quarter file, the collector re-estimates the garbage of unflushed overwrites.
        let quarter = self.estimate_interval();
        if total / quarter != (total + appended_now) / quarter {
            self.blob_gc_work.notify_all();
        }
        if let Err(e) = appended {
            self.blob_write_failed(&e);
            return Err(e);
        }
        Ok((out, Some(claim)))
    }

    /// Closes the active blob file at a memtable switch: it belongs to the memtable becoming
    /// immutable. Requires the state and log mutexes (lock order).
    pub(crate) fn seal_active_blob_file(&self) {
        let mut blobs = self.lock_blob_writers();
        let closed = blobs.active.take().map(|w| {
            let number = w.number();
            blobs.sealed.push(w);
            number
        });
        drop(blobs);
        if let Some(number) = closed {
            // Outside the blob writers' lock: dropping the last handle unmaps it.
            self.blob_cache.evict(number);
        }
        self.blob_mem_bytes.store(0, Ordering::Relaxed);
    }

    /// The blob bytes appended between two estimates of unflushed garbage: a quarter file.
    pub(crate) fn estimate_interval(&self) -> u64 {
        (self.options.blob_file_size / 4) as u64
    }

    /// The blob bytes that fill a memtable: [`BLOB_FILES_PER_MEMTABLE`] files' worth.
    pub(crate) fn blob_bytes_per_memtable(&self) -> u64 {
        BLOB_FILES_PER_MEMTABLE * self.options.blob_file_size as u64
    }

    /// Syncs every sealed blob file (those of the memtable being flushed, and any the current
    /// memtable filled: a version may list a file before a table points into it) and hands
    /// back their descriptions for the flush's version edit. The files stay in `sealed` until
    /// the edit is applied, so that a synced write meanwhile still finds them synced.
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
    ///
    /// Pointers into `tombstones` (files garbage collection removed after this log was
    /// written) are not checked: newer entries supersede every one of them.
    pub(crate) fn check_batch(
        &mut self,
        inner: &DbInner,
        batch: &WriteBatch,
        tombstones: &BTreeMap<u64, u64>,
    ) -> Result<bool> {
        for op in batch.iter() {
            if op.kind != ValueKind::BlobPointer {
                continue;
            }
            let pointer =
                BlobPointer::decode(op.value).expect("WriteBatch::decode checked every pointer");
            if tombstones.contains_key(&pointer.file) {
                continue;
            }
            let path = filename::blob_file(&inner.dir, pointer.file);
            let size = *self
                .sizes
                .entry(pointer.file)
                .or_insert_with(|| inner.env.file_size(&path).ok());
            let Some(size) = size.filter(|&len| pointer.fits_in(len)) else {
                return Ok(false);
            };
            let file = inner.blob_cache.file(pointer.file)?;
            match read_value(&*file, &path, size, &pointer, true) {
                Ok(_) => {}
                Err(e) if e.is_corruption() => return Ok(false),
                Err(e) => return Err(e),
            }
            self.referenced.insert(pointer.file);
        }
        Ok(true)
    }

    /// Syncs the blob files that replayed pointers reach and the version does not list yet,
    /// and describes them for the recovery's version edit. Their value bytes are summed from
    /// their records, so that garbage accounting stays exact, and their size is where the good
    /// records end: a tail torn or damaged by the crash holds no value any pointer reaches
    /// (replay ended the log before the first pointer that missed its value), and garbage
    /// collection and `check` stop before it.
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
            let mut value_bytes = 0;
            let mut scanner = BlobScanner::open(&*inner.env, &path)?;
            while let Some(record) = scanner.next() {
                match record {
                    Ok(r) => value_bytes += r.pointer.len,
                    // Damage after the values the log reaches (which were all checked): the
                    // values before it are what the file holds.
                    Err(e) if e.is_corruption() => break,
                    Err(e) => return Err(e),
                }
            }
            metas.push(BlobFileMeta {
                number,
                file_size: scanner.position().min(file_size),
                value_bytes,
            });
        }
        Ok(metas)
    }
}

/// The value bytes, per blob file, that flushing `mem` turns into garbage: every pointer `mem`
/// holds under a newer entry for the same key, and for each key of `mem`, the newest older
/// entry (`older(key)`, from the tables) if it is a pointer.
///
/// Each pointer is superseded by exactly one entry, the next newer one for its key, and each
/// entry is flushed exactly once (with its table, in the same version edit), so each pointer's
/// bytes are counted once. They are counted whether or not a snapshot can still read them:
/// rewriting keeps the old file until no such snapshot remains.
///
/// Only what the entries with seqnos in `seqnos` supersede is counted, and the entries above
/// it are passed over as if absent: a flush counts with `0..=MAX_SEQNO`; the collector's
/// estimate counts each window of new writes once (`EstimatePace`), so that the windows of a
/// memtable add up to its whole count, and `older` is asked only of keys whose oldest entry in
/// `mem` lies in the window.
pub(crate) fn superseded_blob_values(
    icmp: &InternalKeyComparator,
    mem: &Arc<MemTable>,
    seqnos: RangeInclusive<SeqNo>,
    mut older: impl FnMut(&[u8]) -> Result<Option<BlobPointer>>,
) -> Result<Vec<(u64, u64)>> {
    let ucmp = icmp.user_comparator();
    let mut garbage: BTreeMap<u64, u64> = BTreeMap::new();
    // Lengths come from tables, untrusted: a count saturates (the file is all garbage).
    let mut count = |p: BlobPointer| {
        let bytes = garbage.entry(p.file).or_default();
        *bytes = bytes.saturating_add(p.len);
    };
    let mut iter = mem.iter();
    iter.seek_to_first();
    // The user key of the entries being read (one buffer, reused), and the seqno of its last
    // entry read at or below the window's top: the entry that supersedes the next one.
    let mut current: Vec<u8> = Vec::new();
    let mut newer: Option<SeqNo> = None;
    let mut first = true;
    while iter.valid() {
        let parsed = ParsedInternalKey::parse(iter.key())
            .expect("MemTable invariant: its keys are internal keys it built");
        let same_key = !first && ucmp.compare(parsed.user_key, &current).is_eq();
        if !same_key {
            // The oldest entry of the key before supersedes the key's newest older entry.
            if newer.is_some_and(|s| seqnos.contains(&s)) {
                if let Some(p) = older(&current)? {
                    count(p);
                }
            }
            current.clear();
            current.extend_from_slice(parsed.user_key);
            newer = None;
            first = false;
        }
        if parsed.seqno <= *seqnos.end() {
            if newer.is_some_and(|s| seqnos.contains(&s)) && parsed.kind == ValueKind::BlobPointer {
                if let Some(p) = BlobPointer::decode(iter.value()) {
                    count(p);
                }
            }
            newer = Some(parsed.seqno);
        }
        iter.next();
    }
    if newer.is_some_and(|s| seqnos.contains(&s)) {
        if let Some(p) = older(&current)? {
            count(p);
        }
    }
    Ok(garbage.into_iter().collect())
}

/// True if flushing `mem` onto `version` can make blob garbage: `mem` holds pointers, or the
/// tables may (the version lists blob files). Otherwise counting is skipped, at no cost to
/// databases without blob files.
pub(crate) fn may_supersede_blob_values(mem: &MemTable, version: &Version) -> bool {
    mem.holds_blob_pointers() || !version.blob_files.is_empty()
}

/// `older` for [`superseded_blob_values`]: the newest entry for a key in `mem` (an older
/// memtable), else in `tables` (level-0 tables, oldest first, not in `version` yet), else in
/// `version`, if it is a blob pointer.
pub(crate) fn newest_older_pointer(
    inner: &DbInner,
    mem: Option<&MemTable>,
    version: &Version,
    tables: &[FileMetaData],
    key: &[u8],
) -> Result<Option<BlobPointer>> {
    match mem.and_then(|m| m.get(key, MAX_SEQNO)) {
        Some(MemLookup::BlobPointer(p)) => return Ok(BlobPointer::decode(p)),
        Some(_) => return Ok(None),
        None => {}
    }
    let read = BlockReadOptions {
        verify_checksums: false,
        trust_verified: true,
        fill_cache: false,
        release_behind: false,
    };
    let mut seek_key = Vec::with_capacity(key.len() + 8);
    append_internal_key(&mut seek_key, key, MAX_SEQNO, ValueKind::FOR_SEEK);
    let ucmp = &**inner.icmp.user_comparator();
    let mut found = None;
    for f in tables.iter().rev() {
        let covers = ucmp.compare(key, user_key(&f.smallest)).is_ge()
            && ucmp.compare(key, user_key(&f.largest)).is_le();
        if covers {
            found = lookup_in_table(&inner.table_cache, f, &read, &seek_key, &inner.icmp, 0)?;
            if found.is_some() {
                break;
            }
        }
    }
    let found = match found {
        Some(f) => f,
        None => {
            let mut answer = TableLookup::Absent;
            version.get_into(&read, &inner.table_cache, key, MAX_SEQNO, 0, &mut answer)?;
            answer
        }
    };
    Ok(match found {
        TableLookup::BlobPointer(p) => BlobPointer::decode(&p),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Compression;

    fn pointer(file: u64, len: u64) -> BlobPointer {
        BlobPointer {
            file,
            offset: 0,
            len,
            compression: Compression::None,
            crc: 0,
        }
    }

    /// Counted by seqno windows, a memtable's garbage adds up to the whole count, which is what
    /// a model of the writes says, and the tables are asked of each key once.
    #[test]
    fn windows_of_seqnos_add_up_to_the_whole_count() {
        let icmp = InternalKeyComparator::new(crate::comparator::bytewise());
        let mem = Arc::new(MemTable::new(icmp.clone()));
        // (seqno, key, kind, pointer's file and length)
        let mut ops = Vec::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for seqno in 1..=300u64 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let key = (state >> 33) % 40;
            let kind = match (state >> 20) % 4 {
                0 => ValueKind::Deletion,
                1 => ValueKind::Value,
                _ => ValueKind::BlobPointer,
            };
            let p = pointer(10 + (state >> 40) % 3, 1 + (state >> 45) % 1000);
            let value = if kind == ValueKind::BlobPointer {
                p.encode()
            } else {
                Vec::new()
            };
            mem.add(seqno, kind, format!("k{key:02}").as_bytes(), &value);
            ops.push((seqno, key, kind, p));
        }
        // The tables' newest entry of every third key is a pointer into file 99.
        let older_of = |key: &[u8]| -> Option<BlobPointer> {
            let n: u64 = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
            n.is_multiple_of(3).then(|| pointer(99, 1_000 + n))
        };
        // The model: each pointer with a later write of its key, and each key's older entry.
        let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
        for (i, &(_, key, kind, p)) in ops.iter().enumerate() {
            if kind == ValueKind::BlobPointer && ops[i + 1..].iter().any(|o| o.1 == key) {
                *expected.entry(p.file).or_default() += p.len;
            }
        }
        for key in ops.iter().map(|o| o.1).collect::<BTreeSet<_>>() {
            if let Some(p) = older_of(format!("k{key:02}").as_bytes()) {
                *expected.entry(p.file).or_default() += p.len;
            }
        }
        let whole =
            superseded_blob_values(&icmp, &mem, 0..=MAX_SEQNO, |k| Ok(older_of(k))).unwrap();
        assert_eq!(whole, expected.clone().into_iter().collect::<Vec<_>>());

        for cuts in [
            vec![150],
            vec![1, 2, 3, 100, 299],
            vec![37, 74, 111, 148, 185, 222, 259],
        ] {
            let mut sum: BTreeMap<u64, u64> = BTreeMap::new();
            let mut asked = Vec::new();
            let mut from = 0;
            for to in cuts.iter().copied().chain([300]) {
                let part = superseded_blob_values(&icmp, &mem, from..=to, |k| {
                    asked.push(k.to_vec());
                    Ok(older_of(k))
                })
                .unwrap();
                for (file, bytes) in part {
                    *sum.entry(file).or_default() += bytes;
                }
                from = to + 1;
            }
            assert_eq!(sum, expected, "windows cut at {cuts:?}");
            let distinct: BTreeSet<_> = asked.iter().cloned().collect();
            assert_eq!(
                asked.len(),
                distinct.len(),
                "cuts {cuts:?}: a key asked twice"
            );
            assert_eq!(
                distinct.len(),
                40.min(ops.iter().map(|o| o.1).collect::<BTreeSet<_>>().len())
            );
        }
    }
}
