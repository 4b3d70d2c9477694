// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`VersionSet`]: the current [`Version`], the counters saved in the MANIFEST, and the MANIFEST
//! itself.
//!
//! Every change to the set of live tables is a [`VersionEdit`] appended to the MANIFEST and
//! synced before it takes effect. A new MANIFEST starts with a snapshot of the current version;
//! `CURRENT` is switched to it by writing a temporary file, syncing it, renaming it over
//! `CURRENT` and syncing the directory.
//!
//! Locking: the database's state mutex owns the `VersionSet`.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use super::edit::{
    FileMetaData, VersionEdit, BLOB_COMPARATOR_SUFFIX, NUM_LEVELS, RANGE_DELETION_COMPARATOR_SUFFIX,
};
use super::version::{BlobFileState, LiveFile, Version};
use crate::comparator::Comparator;
use crate::env::{read_file_to_vec, Env};
use crate::error::{Error, Result};
use crate::filename;
use crate::key::{InternalKeyComparator, SeqNo};
use crate::log::{LogReader, LogWriter, ReadMode};
use crate::range_del::RangeTombstone;

/// The live tables and the database's counters.
pub(crate) struct VersionSet {
    dir: PathBuf,
    env: Arc<dyn Env>,
    icmp: InternalKeyComparator,
    /// The next number to hand out for a log, table, MANIFEST or temp file.
    pub(crate) next_file_number: u64,
    pub(crate) manifest_file_number: u64,
    /// The last sequence number written to a table or (for the database) to the log.
    pub(crate) last_sequence: SeqNo,
    /// Logs numbered below this are obsolete: their data is in tables.
    pub(crate) log_number: u64,
    pub(crate) prev_log_number: u64,
    current: Arc<Version>,
    /// Every version handed out, to keep the files of those still in use.
    live_versions: Vec<Weak<Version>>,
    /// Per level, where the last compaction ended.
    pub(crate) compact_pointers: [Vec<u8>; NUM_LEVELS],
    manifest: Option<LogWriter>,
    /// The MANIFEST carries the blob marker: the database has used blob files (see
    /// `BLOB_COMPARATOR_SUFFIX`).
    pub(crate) blob_marked: bool,
    /// The MANIFEST carries the range-deletion marker (see
    /// `RANGE_DELETION_COMPARATOR_SUFFIX`): it is written before the first log record that
    /// holds a range deletion.
    pub(crate) range_marked: bool,
    /// `request_range_deletion_marker` was called: the next edit applied marks the MANIFEST.
    range_marker_requested: bool,
}

/// Reads `CURRENT` and returns the MANIFEST name it holds.
pub(crate) fn read_current(env: &dyn Env, dir: &Path) -> Result<String> {
    let path = filename::current_file(dir);
    let bytes = read_file_to_vec(env, &path)?;
    filename::parse_current(&bytes)
        .map(str::to_owned)
        .map_err(|reason| Error::corruption(&path, 0, reason))
}

/// True if `CURRENT` can be read and names MANIFEST `manifest_number`.
pub(crate) fn current_names(env: &dyn Env, dir: &Path, manifest_number: u64) -> bool {
    read_current(env, dir).is_ok_and(|name| name == filename::manifest_name(manifest_number))
}

/// Points `CURRENT` at MANIFEST `manifest_number`, atomically and durably.
pub(crate) fn set_current_file(env: &dyn Env, dir: &Path, manifest_number: u64) -> Result<()> {
    let temp = filename::temp_file(dir, manifest_number);
    let contents = format!("{}\n", filename::manifest_name(manifest_number));
    let result = crate::env::write_file(env, &temp, contents.as_bytes(), true)
        .and_then(|()| env.rename(&temp, &filename::current_file(dir)))
        .and_then(|()| env.sync_dir(dir));
    if result.is_err() {
        let _ = env.remove_file(&temp);
    }
    result
}

/// What the MANIFEST that `CURRENT` names records: the version its edits build and the
/// counters they set. Opening the database ([`VersionSet::recover`]) and
/// [`check`](crate::check) both read a MANIFEST through [`replay_manifest`], so that they agree
/// on what it says and on what makes it unreadable.
pub(crate) struct ManifestReplay {
    /// The version after every edit.
    pub(crate) version: Version,
    /// Per level, where the last compaction ended.
    pub(crate) compact_pointers: [Vec<u8>; NUM_LEVELS],
    /// The comparator the MANIFEST records, without the blob marker's suffix.
    pub(crate) comparator: Option<String>,
    /// The MANIFEST carries the blob marker, or an edit mentions a blob file.
    pub(crate) blob_marked: bool,
    /// The MANIFEST carries the range-deletion marker, or an edit mentions a range deletion.
    pub(crate) range_marked: bool,
    /// Logs numbered below this hold nothing the tables lack.
    pub(crate) log_number: u64,
    /// The log an older LevelDB was still writing while `log_number` began (0 for none).
    pub(crate) prev_log_number: u64,
    /// The next file number the MANIFEST records (also the number of the next MANIFEST).
    pub(crate) next_file_number: u64,
    /// The last sequence number the MANIFEST records.
    pub(crate) last_sequence: SeqNo,
    /// The version edits read.
    pub(crate) records: u64,
    /// The MANIFEST ends in an edit a crash cut short (not damage: the replay ends there).
    pub(crate) torn_tail: bool,
}

/// The one rule for which logs hold writes no table has yet: log `number` is live if it is not
/// older than the MANIFEST's log number, or it is the MANIFEST's previous log (0: none).
/// Opening replays exactly these, obsolete-file deletion keeps them, and `check` reads them.
pub(crate) fn log_is_live(number: u64, log_number: u64, prev_log_number: u64) -> bool {
    number >= log_number || (prev_log_number != 0 && number == prev_log_number)
}

impl ManifestReplay {
    /// True if opening the database replays log `number` (see [`log_is_live`]).
    pub(crate) fn log_is_live(&self, number: u64) -> bool {
        log_is_live(number, self.log_number, self.prev_log_number)
    }
}

/// Reads `CURRENT` and replays the MANIFEST it names, edit by edit, as opening the database
/// does: in recovery mode (a torn tail is where the MANIFEST ends), with the comparator of
/// `icmp`.
///
/// # Errors
/// - Corruption if `CURRENT` is damaged or names a MANIFEST that does not exist, if a record of
///   the MANIFEST is damaged (anywhere but in a torn tail) or is not a version edit, if a
///   required counter (log number, next file, last sequence) is missing, or if two tables of a
///   level above 0 overlap;
/// - `InvalidArgument` if the MANIFEST records another comparator than `icmp`'s;
/// - I/O errors.
pub(crate) fn replay_manifest(
    env: &dyn Env,
    dir: &Path,
    icmp: &InternalKeyComparator,
) -> Result<ManifestReplay> {
    let name = read_current(env, dir)?;
    let path = dir.join(&name);
    let file = env.new_sequential_file(&path).map_err(|e| {
        if e.is_not_found() {
            Error::corruption(&path, 0, "CURRENT names a MANIFEST that does not exist")
        } else {
            e
        }
    })?;
    let mut reader = LogReader::new(file, &path, ReadMode::Recovery);
    let empty = Version::empty(icmp.clone());
    let mut builder = Builder::new(icmp, &empty);
    let (mut log_number, mut prev_log_number, mut next_file, mut last_sequence) =
        (None, None, None, None);
    let mut compact_pointers: [Vec<u8>; NUM_LEVELS] = Default::default();
    let (mut comparator, mut blob_marked, mut range_marked, mut records) = (None, false, false, 0);
    while let Some(record) = reader.next_record()? {
        records += 1;
        let decoded = VersionEdit::decode(record);
        let edit = decoded.map_err(|e| reader.record_error(e))?;
        if let Some(c) = &edit.comparator {
            let ours = icmp.user_comparator().name();
            let mut c = c.as_str();
            if let Some(name) = c.strip_suffix(RANGE_DELETION_COMPARATOR_SUFFIX) {
                range_marked = true;
                c = name;
            }
            if let Some(name) = c.strip_suffix(BLOB_COMPARATOR_SUFFIX) {
                blob_marked = true;
                c = name;
            }
            if c != ours {
                return Err(Error::invalid_argument(format!(
                    "{} was created with comparator {c}, not {ours}",
                    dir.display()
                )));
            }
            comparator = Some(c.to_owned());
        }
        blob_marked |= edit.has_blob_changes();
        range_marked |= edit.has_range_deletion_changes();
        builder.apply(&edit);
        for (level, key) in &edit.compact_pointers {
            compact_pointers[*level] = key.clone();
        }
        log_number = edit.log_number.or(log_number);
        prev_log_number = edit.prev_log_number.or(prev_log_number);
        next_file = edit.next_file_number.or(next_file);
        last_sequence = edit.last_sequence.or(last_sequence);
    }
    let missing = |what: &'static str| Error::corruption(&path, 0, what);
    let next_file_number = next_file.ok_or_else(|| missing("MANIFEST has no next-file entry"))?;
    let log_number = log_number.ok_or_else(|| missing("MANIFEST has no log-number entry"))?;
    let last_sequence =
        last_sequence.ok_or_else(|| missing("MANIFEST has no last-sequence entry"))?;
    if last_sequence > crate::key::MAX_SEQNO {
        return Err(Error::corruption(
            &path,
            0,
            format!("MANIFEST's last sequence number {last_sequence} is past the largest"),
        ));
    }
    for n in [next_file_number, log_number, prev_log_number.unwrap_or(0)] {
        if n > filename::MAX_FILE_NUMBER {
            return Err(Error::corruption(
                &path,
                0,
                format!("MANIFEST names file number {n}, beyond any database's"),
            ));
        }
    }
    Ok(ManifestReplay {
        version: builder.finish(&path)?,
        compact_pointers,
        comparator,
        blob_marked,
        range_marked,
        log_number,
        prev_log_number: prev_log_number.unwrap_or(0),
        next_file_number,
        last_sequence,
        records,
        torn_tail: reader.torn_tail(),
    })
}

/// An edit being applied: prepared under the lock, written without it, installed under it.
pub(crate) struct PendingApply {
    version: Version,
    log_number: u64,
    prev_log_number: u64,
    /// The edit adds tables or blob files, or moves to a newer log.
    needs_dir_sync: bool,
    manifest_number: u64,
    manifest_path: PathBuf,
    /// The open MANIFEST, or `None` to start a new one.
    writer: Option<LogWriter>,
    /// The records that start a new MANIFEST, when one is started.
    snapshot: Option<Vec<Vec<u8>>>,
    /// The marker, when this edit is the first to mention a blob file or a range deletion.
    marker: Option<Vec<u8>>,
    /// The MANIFEST is marked for blob files once this edit is written.
    marks: bool,
    /// The MANIFEST is marked for range deletions once this edit is written.
    marks_range: bool,
    record: Vec<u8>,
}

impl PendingApply {
    /// Writes and syncs the edit to the MANIFEST (starting a new one, and switching `CURRENT`
    /// to it, if needed). Needs no lock.
    pub(crate) fn write(&mut self, env: &dyn Env, dir: &Path) -> Result<()> {
        // The tables the edit adds were synced, but their names live in the directory, as does
        // the name of a new log the edit makes live: make them durable before the MANIFEST
        // refers to them.
        if self.needs_dir_sync {
            env.sync_dir(dir)?;
        }
        if let Some(snapshot) = &self.snapshot {
            let mut writer = LogWriter::new(env.new_writable_file(&self.manifest_path)?);
            for record in snapshot {
                writer.add_record(record)?;
            }
            self.writer = Some(writer);
        }
        let writer = self
            .writer
            .as_mut()
            .expect("opened above or taken from the set");
        if let Some(marker) = &self.marker {
            writer.add_record(marker)?;
        }
        writer.add_record(&self.record)?;
        writer.sync()?;
        if self.snapshot.is_some() {
            set_current_file(env, dir, self.manifest_number)?;
        }
        Ok(())
    }
}

/// Applies edits to a base version.
struct Builder<'a> {
    icmp: &'a InternalKeyComparator,
    levels: [BTreeMap<u64, Arc<LiveFile>>; NUM_LEVELS],
    blob_files: BTreeMap<u64, BlobFileState>,
    blob_tombstones: BTreeMap<u64, u64>,
    /// The range deletions, by seqno.
    range_tombstones: BTreeMap<SeqNo, RangeTombstone>,
}

impl<'a> Builder<'a> {
    fn new(icmp: &'a InternalKeyComparator, base: &Version) -> Self {
        let mut levels: [BTreeMap<u64, Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        for (level, files) in base.files.iter().enumerate() {
            for f in files.iter() {
                levels[level].insert(f.number, f.clone());
            }
        }
        Builder {
            icmp,
            levels,
            blob_files: (*base.blob_files).clone(),
            blob_tombstones: base.blob_tombstones.clone(),
            range_tombstones: base
                .range_tombstones
                .iter()
                .map(|t| (t.seqno, t.clone()))
                .collect(),
        }
    }

    fn apply(&mut self, edit: &VersionEdit) {
        // A table moved to another level keeps its horizon unless the edit gives one (not
        // its key filter: only level-0 tables keep one, see `LiveFile::key_filter`).
        let mut moved_horizons = BTreeMap::new();
        for &(level, number) in &edit.deleted_files {
            if let Some(f) = self.levels[level].remove(&number) {
                moved_horizons.insert(number, f.range_deletion_horizon);
            }
        }
        let horizons: BTreeMap<u64, SeqNo> = edit.range_deletion_horizons.iter().copied().collect();
        for (level, meta) in &edit.new_files {
            let horizon = horizons
                .get(&meta.number)
                .or(moved_horizons.get(&meta.number))
                .copied()
                .unwrap_or(0);
            self.levels[*level].insert(meta.number, LiveFile::with_horizon(meta.clone(), horizon));
        }
        for seqno in &edit.dropped_range_tombstones {
            self.range_tombstones.remove(seqno);
        }
        for t in &edit.new_range_tombstones {
            self.range_tombstones.insert(t.seqno, t.clone());
        }
        for number in &edit.deleted_blob_files {
            self.blob_files.remove(number);
        }
        self.blob_tombstones
            .extend(edit.blob_tombstones.iter().copied());
        if let Some(oldest_log) = edit.log_number {
            // Logs before the oldest live one are never replayed again.
            self.blob_tombstones.retain(|_, log| *log >= oldest_log);
        }
        for meta in &edit.new_blob_files {
            self.blob_files.insert(
                meta.number,
                BlobFileState {
                    meta: *meta,
                    garbage_bytes: 0,
                },
            );
        }
        for &(number, bytes) in &edit.blob_garbage {
            // Garbage counted for a file already gone (rewritten and removed) is moot.
            if let Some(state) = self.blob_files.get_mut(&number) {
                state.garbage_bytes = state.garbage_bytes.saturating_add(bytes);
            }
        }
    }

    /// The new version. Level 0 is kept in file-number order; deeper levels by smallest key,
    /// and they must not overlap.
    fn finish(self, manifest: &Path) -> Result<Version> {
        // Compaction sums the sizes of any set of live tables: their total must fit a u64.
        let mut sizes = self.levels.iter().flat_map(|level| level.values());
        if sizes
            .try_fold(0u64, |total, f| total.checked_add(f.file_size))
            .is_none()
        {
            return Err(Error::corruption(
                manifest,
                0,
                "the sizes of the tables the MANIFEST lists add up to more than a u64 counts",
            ));
        }
        let mut files: [Vec<Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        for (level, map) in self.levels.into_iter().enumerate() {
            let mut list: Vec<Arc<LiveFile>> = map.into_values().collect();
            if level > 0 {
                list.sort_by(|a, b| {
                    self.icmp
                        .compare(&a.smallest, &b.smallest)
                        .then(a.number.cmp(&b.number))
                });
                for pair in list.windows(2) {
                    if self.icmp.compare(&pair[0].largest, &pair[1].smallest) != CmpOrdering::Less {
                        return Err(Error::corruption(
                            manifest,
                            0,
                            format!(
                                "tables {} and {} overlap in level {level}",
                                pair[0].number, pair[1].number
                            ),
                        ));
                    }
                }
            }
            files[level] = list;
        }
        let mut version = Version::new(self.icmp.clone(), files);
        version.blob_files = Arc::new(self.blob_files);
        version.blob_tombstones = self.blob_tombstones;
        version.set_range_tombstones(self.range_tombstones.into_values().collect());
        Ok(version)
    }
}

impl VersionSet {
    /// An empty set for the database in `dir`; [`recover`](Self::recover) loads it.
    pub(crate) fn new(dir: &Path, env: Arc<dyn Env>, icmp: InternalKeyComparator) -> Self {
        VersionSet {
            dir: dir.to_path_buf(),
            env,
            current: Arc::new(Version::empty(icmp.clone())),
            icmp,
            next_file_number: 2,
            manifest_file_number: 0,
            last_sequence: 0,
            log_number: 0,
            prev_log_number: 0,
            live_versions: Vec::new(),
            compact_pointers: Default::default(),
            manifest: None,
            blob_marked: false,
            range_marked: false,
            range_marker_requested: false,
        }
    }

    /// The current version.
    pub(crate) fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// The current version, borrowed.
    pub(crate) fn current_ref(&self) -> &Version {
        &self.current
    }

    /// True if log `number` holds writes no table has yet (see [`log_is_live`]).
    pub(crate) fn log_is_live(&self, number: u64) -> bool {
        log_is_live(number, self.log_number, self.prev_log_number)
    }

    /// A new file number.
    pub(crate) fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes sure `number` is never handed out.
    pub(crate) fn mark_file_number_used(&mut self, number: u64) {
        if self.next_file_number <= number {
            self.next_file_number = number + 1;
        }
    }

    /// Loads the state recorded in the MANIFEST that `CURRENT` names (see
    /// [`replay_manifest`]).
    ///
    /// # Errors
    /// As [`replay_manifest`].
    pub(crate) fn recover(&mut self) -> Result<()> {
        let replay = replay_manifest(&*self.env, &self.dir, &self.icmp)?;
        self.current = Arc::new(replay.version);
        self.compact_pointers = replay.compact_pointers;
        self.blob_marked = replay.blob_marked;
        self.range_marked = replay.range_marked;
        self.manifest_file_number = replay.next_file_number;
        self.next_file_number = replay.next_file_number + 1;
        self.last_sequence = replay.last_sequence;
        self.log_number = replay.log_number;
        self.prev_log_number = replay.prev_log_number;
        self.mark_file_number_used(replay.log_number);
        self.mark_file_number_used(replay.prev_log_number);
        Ok(())
    }

    /// The record that marks a MANIFEST as a database with blob files or range deletions
    /// (see [`BLOB_COMPARATOR_SUFFIX`] and [`RANGE_DELETION_COMPARATOR_SUFFIX`]): LevelDB
    /// stops at it.
    fn marker_record(&self, blobs: bool, range_deletions: bool) -> Vec<u8> {
        let mut name = self.icmp.user_comparator().name().to_owned();
        if blobs {
            name.push_str(BLOB_COMPARATOR_SUFFIX);
        }
        if range_deletions {
            name.push_str(RANGE_DELETION_COMPARATOR_SUFFIX);
        }
        let edit = VersionEdit {
            comparator: Some(name),
            ..VersionEdit::default()
        };
        let mut record = Vec::new();
        edit.encode_into(&mut record);
        record
    }

    /// Has the next edit applied carry the range-deletion marker (for the first range
    /// deletion, before its log record is written).
    pub(crate) fn request_range_deletion_marker(&mut self) {
        self.range_marker_requested = true;
    }

    /// The record that starts a new MANIFEST: the comparator, compact pointers and every live
    /// file.
    fn snapshot_edit(&self) -> VersionEdit {
        let mut edit = VersionEdit {
            comparator: Some(self.icmp.user_comparator().name().to_owned()),
            ..VersionEdit::default()
        };
        for (level, key) in self.compact_pointers.iter().enumerate() {
            if !key.is_empty() {
                edit.compact_pointers.push((level, key.clone()));
            }
        }
        edit.new_range_tombstones = self.current.range_tombstones.to_vec();
        for (level, files) in self.current.files.iter().enumerate() {
            for f in files.iter() {
                if f.range_deletion_horizon > 0 {
                    edit.range_deletion_horizons
                        .push((f.number, f.range_deletion_horizon));
                }
                edit.new_files.push((level, f.meta.clone()));
            }
        }
        for state in self.current.blob_files.values() {
            edit.new_blob_files.push(state.meta);
            if state.garbage_bytes > 0 {
                edit.blob_garbage
                    .push((state.meta.number, state.garbage_bytes));
            }
        }
        edit.blob_tombstones.extend(
            self.current
                .blob_tombstones
                .iter()
                .map(|(&f, &log)| (f, log)),
        );
        edit
    }

    /// The records of a MANIFEST for a copy of the database ([`Db::checkpoint`]) that holds the
    /// current version's files and, when `log_number` is not 0, the logs it and
    /// `prev_log_number` make live: the marker if this MANIFEST has one, then the current
    /// version (as a new MANIFEST starts) with every counter. The copy's MANIFEST is numbered
    /// `next_file_number`, above every file the copy can hold; no number is taken from this
    /// set (the copy is another database).
    ///
    /// [`Db::checkpoint`]: crate::Db::checkpoint
    pub(crate) fn checkpoint_manifest(
        &self,
        log_number: u64,
        prev_log_number: u64,
    ) -> (u64, Vec<Vec<u8>>) {
        let manifest_number = self.next_file_number;
        let mut records = Vec::new();
        let blobs = self.blob_marked || !self.current.blob_files.is_empty();
        let ranges = self.range_marked || !self.current.range_tombstones.is_empty();
        if blobs || ranges {
            records.push(self.marker_record(blobs, ranges));
        }
        let mut edit = self.snapshot_edit();
        edit.log_number = Some(log_number);
        edit.prev_log_number = (prev_log_number != 0).then_some(prev_log_number);
        edit.next_file_number = Some(manifest_number + 1);
        edit.last_sequence = Some(self.last_sequence);
        let mut record = Vec::new();
        edit.encode_into(&mut record);
        records.push(record);
        (manifest_number, records)
    }

    /// Records `edit` in the MANIFEST (starting a new one if there is none open), syncs it, and
    /// makes the resulting version current. Fills in the counters the edit carries.
    ///
    /// # Errors
    /// The write or sync error. The edit then did not take effect, and the caller must stop
    /// writing (the MANIFEST's tail is unknown): the database turns read-only until reopened.
    pub(crate) fn log_and_apply(&mut self, edit: &mut VersionEdit) -> Result<()> {
        let mut pending = self.prepare_apply(edit)?;
        let result = pending.write(&*self.env, &self.dir);
        self.finish_apply(pending, result)
    }

    /// The first half of [`log_and_apply`](Self::log_and_apply), under the caller's lock:
    /// fills in the edit's counters, builds the new version, encodes the records, and takes the
    /// MANIFEST writer out of the set so that [`PendingApply::write`] can run without the lock.
    ///
    /// Requires: no other apply is in flight (only the background thread applies edits once the
    /// database is open).
    pub(crate) fn prepare_apply(&mut self, edit: &mut VersionEdit) -> Result<PendingApply> {
        let log_number = *edit.log_number.get_or_insert(self.log_number);
        debug_assert!(log_number >= self.log_number && log_number < self.next_file_number);
        let prev_log_number = *edit.prev_log_number.get_or_insert(self.prev_log_number);
        edit.next_file_number = Some(self.next_file_number);
        edit.last_sequence = Some(self.last_sequence);
        for (level, key) in &edit.compact_pointers {
            self.compact_pointers[*level] = key.clone();
        }
        let manifest_path = filename::manifest_file(&self.dir, self.manifest_file_number);
        let mut builder = Builder::new(&self.icmp, &self.current);
        builder.apply(edit);
        let version = builder.finish(&manifest_path)?;
        let writer = self.manifest.take();
        // The marker goes first in a new MANIFEST of a marked database, and before the first
        // edit that mentions a blob file or a range deletion otherwise.
        let marks = self.blob_marked || edit.has_blob_changes();
        let marks_range =
            self.range_marked || edit.has_range_deletion_changes() || self.range_marker_requested;
        let snapshot = writer.is_none().then(|| {
            let mut records = Vec::new();
            if marks || marks_range {
                records.push(self.marker_record(marks, marks_range));
            }
            let mut record = Vec::new();
            self.snapshot_edit().encode_into(&mut record);
            records.push(record);
            records
        });
        let newly_marked = (marks && !self.blob_marked) || (marks_range && !self.range_marked);
        let marker =
            (newly_marked && snapshot.is_none()).then(|| self.marker_record(marks, marks_range));
        let mut record = Vec::new();
        edit.encode_into(&mut record);
        Ok(PendingApply {
            version,
            log_number,
            prev_log_number,
            needs_dir_sync: !edit.new_files.is_empty()
                || !edit.new_blob_files.is_empty()
                || log_number > self.log_number,
            manifest_number: self.manifest_file_number,
            manifest_path,
            writer,
            snapshot,
            marker,
            marks,
            marks_range,
            record,
        })
    }

    /// The second half of an apply, under the caller's lock again: installs the version if the
    /// MANIFEST write succeeded; otherwise forgets the MANIFEST writer (its tail is unknown).
    pub(crate) fn finish_apply(&mut self, pending: PendingApply, result: Result<()>) -> Result<()> {
        match result {
            Ok(()) => {
                self.manifest = pending.writer;
                self.blob_marked |= pending.marks;
                self.range_marked |= pending.marks_range;
                self.range_marker_requested &= !pending.marks_range;
                self.install(pending.version);
                self.log_number = pending.log_number;
                self.prev_log_number = pending.prev_log_number;
                Ok(())
            }
            Err(e) => {
                self.manifest = None;
                // A new MANIFEST that CURRENT may already name (the rename done, the directory
                // sync failed) must stay: removing it could leave CURRENT naming nothing.
                if pending.snapshot.is_some()
                    && !current_names(&*self.env, &self.dir, pending.manifest_number)
                {
                    let _ = self.env.remove_file(&pending.manifest_path);
                }
                Err(e)
            }
        }
    }

    fn install(&mut self, version: Version) {
        let version = Arc::new(version);
        self.live_versions.retain(|v| v.strong_count() > 0);
        self.live_versions.push(Arc::downgrade(&self.current));
        self.current = version;
    }

    /// Adds the number of every table some live version references to `live`.
    pub(crate) fn add_live_files(&mut self, live: &mut HashSet<u64>) {
        self.live_versions.retain(|v| v.strong_count() > 0);
        let versions = self
            .live_versions
            .iter()
            .filter_map(Weak::upgrade)
            .chain(std::iter::once(self.current.clone()));
        for v in versions {
            for files in &v.files {
                live.extend(files.iter().map(|f| f.number));
            }
            live.extend(v.blob_files.keys());
        }
    }

    /// The (level, number) of every table in the current version.
    pub(crate) fn live_file_list(&self) -> BTreeSet<(usize, u64)> {
        self.current
            .files
            .iter()
            .enumerate()
            .flat_map(|(level, files)| files.iter().map(move |f| (level, f.number)))
            .collect()
    }
}

/// A `FileMetaData` for a freshly written table.
pub(crate) fn new_table_meta(
    number: u64,
    file_size: u64,
    smallest: Vec<u8>,
    largest: Vec<u8>,
) -> FileMetaData {
    FileMetaData {
        number,
        file_size,
        smallest,
        largest,
    }
}

#[cfg(test)]
#[path = "set_tests.rs"]
mod tests;
