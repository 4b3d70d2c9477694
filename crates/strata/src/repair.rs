// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`repair`]: rebuilding a database that will not open, keeping every record that can be read.
//!
//! 1. Every log is replayed (tolerantly: damaged records are skipped) into a new table.
//! 2. Every table is read block by block; a table with damage is rewritten from its readable
//!    entries. A file that cannot be read at all, a damaged table's original, every replayed
//!    log and every old MANIFEST move into `lost/` beside the database: nothing is deleted.
//! 3. A new MANIFEST lists every table at level 0, with the highest sequence number found, and
//!    `CURRENT` points at it.
//! 4. The database is opened and fully compacted: level-0 tables from a repair may overlap in
//!    any order, and the compaction's merge (which orders entries by sequence number) settles
//!    which version of each key is the newest.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::comparator::Comparator;
use crate::env::Env;
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::iter::InternalIterator;
use crate::key::{InternalKeyComparator, ParsedInternalKey};
use crate::log::{LogReader, LogWriter, ReadMode};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table::{Table, TableBuilder};
use crate::version::set::set_current_file;
use crate::version::{FileMetaData, VersionEdit};
use crate::Db;

/// What [`repair`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Logs replayed into tables.
    pub logs_replayed: usize,
    /// Tables in the repaired database.
    pub tables: usize,
    /// Records kept (entries in tables after repair, before the final compaction).
    pub records: u64,
    /// Log records and table blocks that could not be read and were dropped.
    pub damaged_pieces: u64,
    /// Files moved into `lost/`.
    pub moved_to_lost: Vec<PathBuf>,
}

/// Repairs the database in `path`: rebuilds its MANIFEST from every readable table and log,
/// keeps every readable record, and moves what cannot be read into `path/lost/`. Afterwards the
/// database opens (with `options`) and holds every record that could be read.
///
/// Run it on a database no process has open; it takes the lock.
///
/// # Example
///
/// ```
/// use strata::{repair, Db, Options, ReadOptions, WriteOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options { create_if_missing: true, ..Options::default() };
/// let db = Db::open(dir.path(), options.clone())?;
/// db.put(&WriteOptions::default(), b"k", b"v")?;
/// drop(db);
/// std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
/// let report = repair(dir.path(), &options)?;
/// assert_eq!(report.logs_replayed, 1);
/// let db = Db::open(dir.path(), options)?;
/// assert_eq!(db.get(&ReadOptions::default(), b"k")?.as_deref(), Some(&b"v"[..]));
/// # Ok::<(), strata::Error>(())
/// ```
///
/// # Errors
/// [`Error::Locked`] if the database is open; I/O errors writing the new files.
pub fn repair(path: impl AsRef<Path>, options: &Options) -> Result<RepairReport> {
    let dir = path.as_ref();
    let options = options.sanitized()?;
    let env = options.env.clone();
    let mut report = RepairReport::default();
    {
        let _lock = env.lock_file(&filename::lock_file(dir))?;
        let mut repairer = Repairer {
            dir,
            env: &*env,
            options: &options,
            icmp: InternalKeyComparator::new(options.comparator.clone()),
            next_number: 1,
            max_seqno: 0,
            tables: Vec::new(),
            report: &mut report,
        };
        repairer.run()?;
    }
    // Settle the order of overlapping level-0 tables by merging them.
    let db = Db::open(
        dir,
        Options {
            create_if_missing: false,
            error_if_exists: false,
            ..options.clone()
        },
    )?;
    db.compact_range(None, None)?;
    Ok(report)
}

struct Repairer<'a> {
    dir: &'a Path,
    env: &'a dyn Env,
    options: &'a Options,
    icmp: InternalKeyComparator,
    next_number: u64,
    max_seqno: u64,
    tables: Vec<FileMetaData>,
    report: &'a mut RepairReport,
}

impl Repairer<'_> {
    fn run(&mut self) -> Result<()> {
        let mut logs = Vec::new();
        let mut tables = Vec::new();
        let mut manifests = Vec::new();
        for name in self.env.children(self.dir)? {
            if let Some((kind, n)) = filename::parse_file_name(&name) {
                self.next_number = self.next_number.max(n + 1);
                match kind {
                    FileKind::Log => logs.push(n),
                    FileKind::Table => tables.push((n, name)),
                    FileKind::Manifest => manifests.push(name),
                    _ => {}
                }
            }
        }
        logs.sort();
        tables.sort();
        for number in logs {
            self.replay_log(number)?;
        }
        for (number, name) in tables {
            self.salvage_table(number, &name)?;
        }
        self.write_manifest()?;
        for name in manifests {
            self.move_to_lost(&name)?;
        }
        Ok(())
    }

    fn new_number(&mut self) -> u64 {
        let n = self.next_number;
        self.next_number += 1;
        n
    }

    fn move_to_lost(&mut self, name: &str) -> Result<()> {
        let lost = self.dir.join("lost");
        self.env.create_dir_all(&lost)?;
        self.env.rename(&self.dir.join(name), &lost.join(name))?;
        self.report.moved_to_lost.push(lost.join(name));
        Ok(())
    }

    /// Replays a log into a new table, skipping damaged records, and moves the log to `lost/`.
    fn replay_log(&mut self, number: u64) -> Result<()> {
        let path = filename::log_file(self.dir, number);
        let mem = Arc::new(MemTable::new(self.icmp.clone()));
        let mut reader = LogReader::new(
            self.env.new_sequential_file(&path)?,
            &path,
            ReadMode::Tolerant,
        );
        loop {
            let record = match reader.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(_) => {
                    self.report.damaged_pieces += 1;
                    break;
                }
            };
            match WriteBatch::decode(record) {
                Ok(batch) => {
                    let last = batch.seqno() + u64::from(batch.count()).saturating_sub(1);
                    self.max_seqno = self.max_seqno.max(last);
                    mem.add_batch(&batch);
                }
                Err(_) => self.report.damaged_pieces += 1,
            }
        }
        self.report.damaged_pieces += reader.corruptions().len() as u64;
        if !mem.is_empty() {
            let number = self.new_number();
            let mut it = mem.iter();
            let mut entries = Vec::new();
            it.seek_to_first();
            while it.valid() {
                entries.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            self.write_table(number, &entries)?;
        }
        self.report.logs_replayed += 1;
        self.move_to_lost(&format!("{number:06}.log"))
    }

    /// Reads a table block by block; keeps it as is if it is whole, rewrites it from its
    /// readable entries otherwise.
    fn salvage_table(&mut self, number: u64, name: &str) -> Result<()> {
        let path = self.dir.join(name);
        let opened = self.env.file_size(&path).and_then(|size| {
            let file = self.env.new_random_access_file(&path)?;
            Table::open(self.options.table_options(), file, &path, size, None).map(|t| (t, size))
        });
        let Ok((table, size)) = opened else {
            self.report.damaged_pieces += 1;
            return self.move_to_lost(name);
        };
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut bad_keys = 0;
        let (skipped, _) = table.salvage(|k, v| {
            if ParsedInternalKey::parse(k).is_some() {
                entries.push((k.to_vec(), v.to_vec()));
            } else {
                bad_keys += 1;
            }
        });
        // Blocks whose entries are out of order are damage too.
        let sorted = entries
            .windows(2)
            .all(|w| self.icmp.compare(&w[0].0, &w[1].0).is_lt());
        for (k, _) in &entries {
            let seqno = ParsedInternalKey::parse(k).expect("filtered above").seqno;
            self.max_seqno = self.max_seqno.max(seqno);
        }
        if skipped == 0 && bad_keys == 0 && sorted {
            if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
                self.report.records += entries.len() as u64;
                self.tables.push(FileMetaData {
                    number,
                    file_size: size,
                    smallest: first.0.clone(),
                    largest: last.0.clone(),
                });
                return Ok(());
            }
            // An empty table holds nothing to keep.
            return self.move_to_lost(name);
        }
        self.report.damaged_pieces += (skipped + bad_keys) as u64;
        if !sorted {
            entries.sort_by(|a, b| self.icmp.compare(&a.0, &b.0));
            entries.dedup_by(|a, b| a.0 == b.0);
        }
        if !entries.is_empty() {
            let new = self.new_number();
            self.write_table(new, &entries)?;
        }
        self.move_to_lost(name)
    }

    fn write_table(&mut self, number: u64, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let path = filename::table_file(self.dir, number);
        let mut builder = TableBuilder::new(
            self.options.table_options(),
            self.env.new_writable_file(&path)?,
        );
        for (k, v) in entries {
            builder.add(k, v)?;
        }
        let file_size = builder.finish(true)?;
        self.report.records += entries.len() as u64;
        self.tables.push(FileMetaData {
            number,
            file_size,
            smallest: entries[0].0.clone(),
            largest: entries[entries.len() - 1].0.clone(),
        });
        Ok(())
    }

    fn write_manifest(&mut self) -> Result<()> {
        let number = self.new_number();
        let mut edit = VersionEdit {
            comparator: Some(self.options.comparator.name().to_owned()),
            log_number: Some(0),
            prev_log_number: Some(0),
            next_file_number: Some(self.next_number),
            last_sequence: Some(self.max_seqno),
            ..VersionEdit::default()
        };
        for t in &self.tables {
            edit.new_files.push((0, t.clone()));
        }
        self.report.tables = self.tables.len();
        let path = filename::manifest_file(self.dir, number);
        let mut record = Vec::new();
        edit.encode_into(&mut record);
        let result = (|| {
            let mut writer = LogWriter::new(self.env.new_writable_file(&path)?);
            writer.add_record(&record)?;
            writer.sync()?;
            self.env.sync_dir(self.dir)?;
            set_current_file(self.env, self.dir, number)
        })();
        if result.is_err() {
            let _ = self.env.remove_file(&path);
        }
        result
    }
}
