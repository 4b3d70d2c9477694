// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`check`]: reading every byte a database depends on and listing what is damaged, without
//! changing anything.
//!
//! What the database depends on is what opening it reads: `CURRENT`, the MANIFEST it names, the
//! tables that MANIFEST lists, and the logs not yet flushed to tables. Each is read whole:
//! every log and MANIFEST record (and each record's decoding), every block of every table
//! (checksums, block structure, key order, the index against the blocks). Other files in the
//! directory (obsolete tables and logs, older MANIFESTs, temporary files) are listed as unused
//! and not read: opening the database would delete them.
//!
//! A record torn at the end of a log, as a crash while writing leaves it, is not damage: opening
//! the database treats it as the log's end, and so does `check`.
//!
//! Locking: `check` takes the shared lock on `LOCK` when the file exists, as a read-only open
//! does, so it never reads a database that a writer has open.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::batch::WriteBatch;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::filename;
pub use crate::filename::{parse_current, parse_file_name, FileKind};
use crate::log::{LogReader, ReadMode};
use crate::options::Options;
use crate::table::{Table, TableVerification};
use crate::version::set::{read_current, replay_manifest, ManifestReplay};
use crate::version::FileMetaData;

/// What [`check`] found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// The MANIFEST `CURRENT` names, if `CURRENT` could be read.
    pub manifest: Option<String>,
    /// The comparator the MANIFEST records.
    pub comparator: Option<String>,
    /// The last sequence number the MANIFEST records.
    pub last_sequence: Option<u64>,
    /// The MANIFEST ends in an edit a crash cut short (not damage: opening ignores it).
    pub manifest_torn_tail: bool,
    /// Every file of the database's kinds in the directory, in name order.
    pub files: Vec<CheckedFile>,
    /// Every damaged piece, in the order found.
    pub damage: Vec<Damage>,
    /// 0 if the check held a shared lock (no writer changed the database under it); else
    /// how many times it ran beside a writer (again while it found damage, which may be
    /// files the writer deleted mid-check, up to [`CHECK_TRIES`]): the report is the last run's.
    pub checks_beside_writer: u32,
    /// Beside a writer: files the check met missing that the writer deleted during the check
    /// (gone, and the MANIFEST moved on meanwhile); not damage.
    pub deleted_during_check: u64,
}

impl CheckReport {
    /// True if nothing the database depends on is damaged or missing.
    pub fn is_sound(&self) -> bool {
        self.damage.is_empty()
    }

    /// The tables the MANIFEST lists, with their levels.
    pub fn live_tables(&self) -> impl Iterator<Item = &CheckedFile> {
        self.files
            .iter()
            .filter(|f| f.kind == FileKind::Table && f.live)
    }
}

/// One file of the database's directory.
#[derive(Debug, Clone)]
pub struct CheckedFile {
    /// The file name.
    pub name: String,
    /// What the name says the file is.
    pub kind: FileKind,
    /// Its size in bytes.
    pub size: u64,
    /// True if the database depends on it, so `check` read it.
    pub live: bool,
    /// For a live table, its level.
    pub level: Option<usize>,
    /// Records read: log records (write batches), MANIFEST records (version edits), or table
    /// entries.
    pub records: u64,
    /// For a log, the puts and deletions its batches hold.
    pub operations: u64,
    /// The file (a log or the MANIFEST) ends in a tail a crash cut short: not damage, opening
    /// the database ends the file there.
    pub torn_tail: bool,
    /// For a table, what reading it found (its `damage` is moved into the report's).
    pub table: Option<TableVerification>,
}

/// One damaged or missing piece of a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The file it is in (or that is missing).
    pub file: PathBuf,
    /// The byte offset of the damage, when it is at one place in the file.
    pub offset: Option<u64>,
    /// What is wrong.
    pub reason: String,
}

impl Damage {
    fn new(file: impl Into<PathBuf>, offset: Option<u64>, reason: impl Into<String>) -> Damage {
        Damage {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }
}

impl From<Error> for Damage {
    fn from(e: Error) -> Damage {
        match e {
            Error::Corruption {
                file,
                offset,
                reason,
            } => Damage::new(file, Some(offset), reason),
            Error::Io { path, op, source } => Damage::new(path, None, format!("{op}: {source}")),
            other => Damage::new(PathBuf::new(), None, other.to_string()),
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(offset) = self.offset {
            write!(f, " at offset {offset}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// Reads every file the database in `path` depends on and reports what is damaged or missing.
/// Changes nothing, creates nothing, and can run on a database that will not open.
///
/// `options` supplies the env, the comparator (the order keys are checked against) and the
/// filter policy; the other options do not matter.
///
/// # Example
///
/// ```
/// use strata::{check, Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options { create_if_missing: true, ..Options::default() };
/// let db = Db::open(dir.path(), options.clone())?;
/// db.put(b"k", b"v")?;
/// drop(db);
/// let report = check(dir.path(), &options)?;
/// assert!(report.is_sound());
/// assert_eq!(report.files.iter().map(|f| f.operations).sum::<u64>(), 1);
/// # Ok::<(), strata::Error>(())
/// ```
///
/// # Errors
/// Damage is in the report, not an error. Errors are for what stops the check from starting:
/// `path` does not exist or holds no database ([`Error::NoDatabase`]), the directory cannot be listed ([`Error::Io`]), or the
/// MANIFEST records another comparator than `options`'.
pub fn check(path: impl AsRef<Path>, options: &Options) -> Result<CheckReport> {
    let dir = path.as_ref();
    let options = options.sanitized()?;
    let env = &*options.env;
    if !env.exists(dir) {
        return Err(Error::no_database(dir, "the directory does not exist"));
    }
    let mut names = match env.children(dir) {
        Ok(names) => names,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::no_database(dir, "it is not a directory"));
        }
        Err(e) => return Err(e),
    };
    names.sort();
    let kinds: Vec<(String, FileKind, u64)> = names
        .into_iter()
        .filter_map(|name| {
            let (kind, number) = filename::parse_file_name(&name)?;
            Some((name, kind, number))
        })
        .collect();
    let holds_database_files = kinds.iter().any(|(_, kind, _)| {
        matches!(
            kind,
            FileKind::Current | FileKind::Manifest | FileKind::Table | FileKind::Log
        )
    });
    if !holds_database_files {
        return Err(Error::no_database(
            dir,
            "it holds no CURRENT, MANIFEST, table or log file",
        ));
    }
    let lock_path = filename::lock_file(dir);
    // Beside a writer (it holds LOCK), the check takes no lock: a file the writer deletes
    // mid-check (a compaction's inputs, a flushed log, a replaced MANIFEST) looks missing. A
    // check that found damage there runs again on the writer's newer state, up to
    // `CHECK_TRIES` times; damage left after them is reported.
    let (_lock, beside_writer) = if env.exists(&lock_path) {
        match env.lock_file_shared(&lock_path) {
            Ok(lock) => (Some(lock), false),
            Err(Error::Locked { .. }) => (None, true),
            Err(e) => return Err(e),
        }
    } else {
        (None, false)
    };
    if !beside_writer {
        return check_files(env, dir, &options, Some(kinds));
    }
    let mut report = check_beside_writer(env, dir, &options)?;
    report.checks_beside_writer = 1;
    while !report.is_sound() && report.checks_beside_writer < CHECK_TRIES {
        std::thread::sleep(std::time::Duration::from_millis(
            10 << report.checks_beside_writer.min(5),
        ));
        let tries = report.checks_beside_writer + 1;
        report = check_beside_writer(env, dir, &options)?;
        report.checks_beside_writer = tries;
    }
    Ok(report)
}

/// The files of `dir` whose names are database files', in name order: (name, kind, number).
fn database_files(env: &dyn Env, dir: &Path) -> Result<Vec<(String, FileKind, u64)>> {
    let mut names = env.children(dir)?;
    names.sort();
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let (kind, number) = filename::parse_file_name(&name)?;
            Some((name, kind, number))
        })
        .collect())
}

/// One check beside a writer. A file the check found missing (or could not read because it
/// is gone) is the writer's doing, not damage, when it is gone now and the MANIFEST moved on
/// during the check (`CURRENT` names another, or it grew): the writer deletes a file only
/// after logging the edit that drops it, so a file the MANIFEST the check read lists and that
/// is gone means such an edit came after that read. Those are counted in
/// `deleted_during_check`; a missing file while the MANIFEST stayed as read is damage.
fn check_beside_writer(env: &dyn Env, dir: &Path, options: &Options) -> Result<CheckReport> {
    let before = manifest_mark(env, dir);
    let mut report = check_files(env, dir, options, None)?;
    if manifest_mark(env, dir) != before {
        let found = report.damage.len();
        report
            .damage
            .retain(|d| d.file.as_os_str().is_empty() || env.exists(&d.file));
        report.deleted_during_check = (found - report.damage.len()) as u64;
    }
    Ok(report)
}

/// The MANIFEST `CURRENT` names and its size, if both can be read.
fn manifest_mark(env: &dyn Env, dir: &Path) -> Option<(String, u64)> {
    let name = read_current(env, dir).ok()?;
    let size = env.file_size(&dir.join(&name)).ok()?;
    Some((name, size))
}

/// How many times a check beside a writer runs while it finds damage.
pub const CHECK_TRIES: u32 = 5;

/// Checks `kinds`, the database files of `dir` (name, kind, number), against the MANIFEST;
/// with `None`, the files the directory holds once the MANIFEST is read (beside a writer: every
/// table the MANIFEST lists was written before the edit listing it, so the listing has it).
fn check_files(
    env: &dyn Env,
    dir: &Path,
    options: &Options,
    kinds: Option<Vec<(String, FileKind, u64)>>,
) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let mut found_tables = BTreeSet::new();
    let mut found_blobs = BTreeSet::new();
    let manifest = read_manifest(env, dir, options, &mut report)?;
    let kinds = match kinds {
        Some(kinds) => kinds,
        None => database_files(env, dir)?,
    };
    for (name, kind, number) in kinds {
        let path = dir.join(&name);
        let size = match env.file_size(&path) {
            Ok(size) => size,
            Err(e) => {
                report.damage.push(e.into());
                continue;
            }
        };
        let mut file = CheckedFile {
            name: name.clone(),
            kind,
            size,
            live: false,
            level: None,
            records: 0,
            operations: 0,
            torn_tail: false,
            table: None,
        };
        match kind {
            FileKind::Current => file.live = true,
            FileKind::Manifest => {
                if report.manifest.as_deref() == Some(name.as_str()) {
                    file.live = true;
                    file.torn_tail = report.manifest_torn_tail;
                    file.records = manifest.as_ref().map_or(0, |m| m.replay.records);
                }
            }
            FileKind::Log => {
                if manifest.as_ref().is_some_and(|m| m.log_is_live(number)) {
                    file.live = true;
                    check_log(env, &path, &mut file, &mut report.damage);
                }
            }
            FileKind::Table => {
                let listed = manifest.as_ref().and_then(|m| m.tables.get(&number));
                if let Some((level, meta)) = listed {
                    found_tables.insert(number);
                    file.live = true;
                    file.level = Some(*level);
                    check_table(env, &path, options, meta, &mut file, &mut report.damage);
                }
            }
            FileKind::Blob => {
                // Listed, or written since the last flush (a live log may point into it).
                let listed_len = manifest
                    .as_ref()
                    .and_then(|m| m.blob_files.get(&number).copied());
                let listed = listed_len.is_some();
                if listed || manifest.as_ref().is_some_and(|m| m.log_is_live(number)) {
                    found_blobs.insert(number);
                    file.live = true;
                    check_blob_file(env, &path, listed_len, &mut file, &mut report.damage);
                }
            }
            FileKind::Lock | FileKind::InfoLog | FileKind::Temp => {}
        }
        report.files.push(file);
    }
    if let Some(manifest) = &manifest {
        // Opening fails without the log the MANIFEST names as live; the other logs it would
        // replay are read above.
        let live_log = crate::db::live_log_must_exist(env, dir, manifest.replay.log_number);
        if let Err(e) = live_log {
            report.damage.push(e.into());
        }
        for number in manifest.blob_files.keys() {
            if !found_blobs.contains(number) {
                report.damage.push(Damage::new(
                    filename::blob_file(dir, *number),
                    None,
                    "blob file listed in the MANIFEST is missing",
                ));
            }
        }
        for (number, (level, _)) in &manifest.tables {
            if !found_tables.contains(number) {
                report.damage.push(Damage::new(
                    filename::table_file(dir, *number),
                    None,
                    format!("table listed at level {level} in the MANIFEST is missing"),
                ));
            }
        }
    }
    Ok(report)
}

/// What the MANIFEST says the database is made of, as opening the database reads it.
struct ManifestState {
    replay: ManifestReplay,
    /// Live tables by number: their level and what the MANIFEST records of them.
    tables: BTreeMap<u64, (usize, FileMetaData)>,
    /// Live blob files by number: the length the MANIFEST records.
    blob_files: BTreeMap<u64, u64>,
}

impl ManifestState {
    fn log_is_live(&self, number: u64) -> bool {
        self.replay.log_is_live(number)
    }
}

/// Reads `CURRENT` and the MANIFEST it names through the replay opening the database uses
/// ([`replay_manifest`]), so that whatever makes opening refuse the MANIFEST (damage, a missing
/// counter, overlapping tables in a level above 0) is damage here. `None` if the database's
/// state could not be read, so that no file is known to be live.
fn read_manifest(
    env: &dyn Env,
    dir: &Path,
    options: &Options,
    report: &mut CheckReport,
) -> Result<Option<ManifestState>> {
    let current = filename::current_file(dir);
    if !env.exists(&current) {
        report.damage.push(Damage::new(
            current,
            None,
            "CURRENT is missing: the database's MANIFEST is unknown",
        ));
        return Ok(None);
    }
    report.manifest = read_current(env, dir).ok();
    let icmp = crate::key::InternalKeyComparator::new(options.comparator.clone());
    let replay = match replay_manifest(env, dir, &icmp) {
        Ok(replay) => replay,
        // Another comparator is the caller's mistake, not damage.
        Err(e @ Error::InvalidArgument(_)) => return Err(e),
        Err(e) => {
            report.damage.push(e.into());
            return Ok(None);
        }
    };
    report.comparator = replay.comparator.clone();
    report.last_sequence = Some(replay.last_sequence);
    report.manifest_torn_tail = replay.torn_tail;
    let tables = replay
        .version
        .files
        .iter()
        .enumerate()
        .flat_map(|(level, files)| {
            files
                .iter()
                .map(move |f| (f.number, (level, f.meta.clone())))
        })
        .collect();
    let blob_files = replay
        .version
        .blob_files
        .iter()
        .map(|(&number, state)| (number, state.meta.file_size))
        .collect();
    Ok(Some(ManifestState {
        replay,
        tables,
        blob_files,
    }))
}

/// Reads the log at `path` as opening the database does (recovery mode: a torn tail is where
/// the log ends, other damage is corruption); if that finds damage, reads it again tolerantly
/// to list every damaged stretch.
/// Reads every record of a blob file, checksums verified. A file the MANIFEST does not list yet
/// was being written when the database stopped: a record cut off by the end of the file is its
/// torn tail, as opening sees it. A listed file is read as far as the MANIFEST says it goes
/// (`listed_len`); bytes after that are a tail a crash left, which no pointer reaches. Any
/// other damage is damage.
fn check_blob_file(
    env: &dyn Env,
    path: &Path,
    listed_len: Option<u64>,
    file: &mut CheckedFile,
    damage: &mut Vec<Damage>,
) {
    let listed = listed_len.is_some();
    let mut scanner = match crate::blob::BlobScanner::open(env, path) {
        Ok(scanner) => scanner,
        Err(e) => {
            damage.push(e.into());
            return;
        }
    };
    if let Some(len) = listed_len {
        if scanner.file_len() > len {
            file.torn_tail = true;
        }
        scanner.limit(len);
    }
    while let Some(record) = scanner.next() {
        match record {
            Ok(_) => file.records += 1,
            Err(e) => {
                if !listed && scanner.cut_off() {
                    file.torn_tail = true;
                } else {
                    damage.push(e.into());
                }
            }
        }
    }
}

fn check_log(env: &dyn Env, path: &Path, file: &mut CheckedFile, damage: &mut Vec<Damage>) {
    let before = damage.len();
    file.torn_tail = read_log(env, path, ReadMode::Recovery, file, damage);
    if damage.len() > before {
        let verdict = damage.split_off(before);
        file.records = 0;
        file.operations = 0;
        file.torn_tail = false;
        read_log(env, path, ReadMode::Tolerant, file, damage);
        if damage.len() == before {
            damage.extend(verdict);
        }
    }
}

/// Reads every record of the log at `path` in `mode`, decoding each as a write batch; returns
/// whether the log ends in a torn tail.
fn read_log(
    env: &dyn Env,
    path: &Path,
    mode: ReadMode,
    file: &mut CheckedFile,
    damage: &mut Vec<Damage>,
) -> bool {
    let source = match env.new_sequential_file(path) {
        Ok(source) => source,
        Err(e) => {
            damage.push(e.into());
            return false;
        }
    };
    let mut reader = LogReader::new(source, path, mode);
    loop {
        match reader.next_record() {
            Ok(Some(record)) => {
                file.records += 1;
                let decoded = WriteBatch::decode(record);
                match decoded {
                    Ok(batch) => file.operations += u64::from(batch.count()),
                    Err(e) => {
                        let offset = reader.file_offset_of(e.offset);
                        let reason = format!("record is not a write batch: {}", e.reason);
                        damage.push(Damage::new(path, Some(offset), reason));
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                damage.push(e.into());
                return false;
            }
        }
    }
    for c in reader.corruptions() {
        damage.push(Damage::new(
            path,
            Some(c.offset),
            format!("{} ({} bytes dropped)", c.reason, c.dropped_bytes),
        ));
    }
    reader.torn_tail()
}

/// Reads every block of the table at `path` and compares it with what the MANIFEST records.
fn check_table(
    env: &dyn Env,
    path: &Path,
    options: &Options,
    meta: &FileMetaData,
    file: &mut CheckedFile,
    damage: &mut Vec<Damage>,
) {
    if file.size != meta.file_size {
        damage.push(Damage::new(
            path,
            None,
            format!(
                "table is {} bytes; the MANIFEST records {}",
                file.size, meta.file_size
            ),
        ));
    }
    let table = env
        .new_random_access_file(path)
        .and_then(|f| Table::open(options.table_options(), f, path, file.size, None));
    let table = match table {
        Ok(table) => table,
        Err(e) => return damage.push(e.into()),
    };
    let mut verified = table.verify();
    damage.extend(verified.damage.drain(..).map(Damage::from));
    let icmp = crate::key::InternalKeyComparator::new(options.comparator.clone());
    use crate::comparator::Comparator as _;
    if let Some(smallest) = &verified.smallest {
        if icmp.compare(smallest, &meta.smallest) == std::cmp::Ordering::Less {
            damage.push(Damage::new(
                path,
                None,
                "table holds a key below the smallest the MANIFEST records",
            ));
        }
    }
    if let Some(largest) = &verified.largest {
        if icmp.compare(largest, &meta.largest) == std::cmp::Ordering::Greater {
            damage.push(Damage::new(
                path,
                None,
                "table holds a key above the largest the MANIFEST records",
            ));
        }
    }
    file.records = verified.entries;
    file.table = Some(verified);
}

#[cfg(test)]
mod tests;
