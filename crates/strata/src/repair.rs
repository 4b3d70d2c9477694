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

use crate::coding::{crc32c, crc32c_extend, decode_fixed32, unmask_crc, Decoder};
use crate::env::RandomAccessFile;

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
use crate::table::format::{read_block, BLOCK_TRAILER_SIZE, FOOTER_SIZE, TABLE_MAGIC};
use crate::table::{Block, BlockHandle, Table, TableBuilder, TableOptions};
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
/// use strata::{repair, Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options { create_if_missing: true, ..Options::default() };
/// let db = Db::open(dir.path(), options.clone())?;
/// db.put(b"k", b"v")?;
/// drop(db);
/// std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
/// let report = repair(dir.path(), &options)?;
/// assert_eq!(report.logs_replayed, 1);
/// let db = Db::open(dir.path(), options)?;
/// assert_eq!(db.get(b"k")?.as_deref(), Some(&b"v"[..]));
/// # Ok::<(), strata::Error>(())
/// ```
///
/// # Errors
/// [`Error::Locked`](crate::Error::Locked) if the database is open; I/O errors writing the new
/// files.
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
            blob_files: Vec::new(),
            range_tombstones: std::collections::BTreeMap::new(),
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
    /// Blob files found, all kept: entries may point into any of them.
    blob_files: Vec<crate::version::BlobFileMeta>,
    /// Range deletions found in the logs and MANIFESTs, by seqno. Tables hold none, so losing
    /// one would bring back the keys it deleted; keeping one a MANIFEST had dropped is
    /// harmless (it deletes only entries older than itself, which compaction had removed).
    range_tombstones: std::collections::BTreeMap<u64, crate::range_del::RangeTombstone>,
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
                    FileKind::Blob => self.keep_blob_file(n),
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
        for name in &manifests {
            self.collect_range_tombstones(name);
        }
        self.write_manifest()?;
        for name in manifests {
            self.move_to_lost(&name)?;
        }
        Ok(())
    }

    /// Keeps the range deletions a MANIFEST lists, reading it as far as it reads.
    fn collect_range_tombstones(&mut self, name: &str) {
        let path = self.dir.join(name);
        let Ok(file) = self.env.new_sequential_file(&path) else {
            return;
        };
        let mut reader = LogReader::new(file, &path, ReadMode::Tolerant);
        while let Ok(Some(record)) = reader.next_record() {
            let Ok(edit) = VersionEdit::decode(record) else {
                continue;
            };
            for t in edit.new_range_tombstones {
                self.max_seqno = self.max_seqno.max(t.seqno);
                self.range_tombstones.insert(t.seqno, t);
            }
        }
    }

    /// Adds blob file `number` to the rebuilt version, its value bytes those of the records
    /// that read whole from the front (a damaged record ends the count, not the file: values
    /// after it stay reachable through their pointers).
    fn keep_blob_file(&mut self, number: u64) {
        let path = filename::blob_file(self.dir, number);
        let Ok(file_size) = self.env.file_size(&path) else {
            return;
        };
        let mut value_bytes = 0;
        if let Ok(mut scanner) = crate::blob::BlobScanner::open(self.env, &path) {
            while let Some(record) = scanner.next() {
                match record {
                    Ok(r) => value_bytes += r.pointer.len,
                    Err(_) => {
                        self.report.damaged_pieces += 1;
                        break;
                    }
                }
            }
        } else {
            self.report.damaged_pieces += 1;
        }
        self.blob_files.push(crate::version::BlobFileMeta {
            number,
            file_size,
            value_bytes,
        });
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
        for t in mem.range_tombstones() {
            self.range_tombstones.insert(t.seqno, t);
        }
        let mut it = mem.iter();
        let mut entries = Vec::new();
        it.seek_to_first();
        while it.valid() {
            entries.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        if !entries.is_empty() {
            let number = self.new_number();
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
            Ok((file, size))
        });
        let Ok((file, size)) = opened else {
            self.report.damaged_pieces += 1;
            return self.move_to_lost(name);
        };
        // The filter is not needed to read entries: a damaged filter or metaindex costs
        // nothing.
        let table_options = TableOptions {
            filter_policy: None,
            ..self.options.table_options()
        };
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut bad_keys = 0;
        let mut keep = |k: &[u8], v: &[u8]| {
            if ParsedInternalKey::parse(k).is_some() {
                entries.push((k.to_vec(), v.to_vec()));
            } else {
                bad_keys += 1;
            }
        };
        let skipped = match Table::open(table_options, file.clone(), &path, size, None) {
            Ok(table) => table.salvage(&mut keep).0,
            Err(_) => 1,
        };
        // A table is kept as it is only if it also opens with the filter policy: a damaged
        // filter or metaindex block makes it rewritten from its entries.
        let opens_whole = skipped == 0
            && Table::open(
                self.options.table_options(),
                file.clone(),
                &path,
                size,
                None,
            )
            .is_ok();
        if skipped > 0 {
            // The index, the footer or a data block is damaged: find the blocks that still
            // read whole without the index's help.
            salvage_blocks_without_index(&*file, &path, size, &self.icmp, &mut keep);
        }
        let sorted = entries
            .windows(2)
            .all(|w| self.icmp.compare(&w[0].0, &w[1].0).is_lt());
        for (k, _) in &entries {
            let seqno = ParsedInternalKey::parse(k).expect("filtered above").seqno;
            self.max_seqno = self.max_seqno.max(seqno);
        }
        if opens_whole && bad_keys == 0 && sorted {
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
        self.report.damaged_pieces += (skipped + bad_keys).max(usize::from(!opens_whole)) as u64;
        if !sorted || skipped > 0 {
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
        edit.new_blob_files = self.blob_files.clone();
        edit.new_range_tombstones = self.range_tombstones.values().cloned().collect();
        self.report.tables = self.tables.len();
        let path = filename::manifest_file(self.dir, number);
        let mut records = Vec::new();
        if !self.blob_files.is_empty() || !self.range_tombstones.is_empty() {
            // The marker that keeps LevelDB out, first (see `BLOB_COMPARATOR_SUFFIX` and
            // `RANGE_DELETION_COMPARATOR_SUFFIX`).
            let mut name = self.options.comparator.name().to_owned();
            if !self.blob_files.is_empty() {
                name.push_str(crate::version::BLOB_COMPARATOR_SUFFIX);
            }
            if !self.range_tombstones.is_empty() {
                name.push_str(crate::version::RANGE_DELETION_COMPARATOR_SUFFIX);
            }
            let marker = VersionEdit {
                comparator: Some(name),
                ..VersionEdit::default()
            };
            let mut record = Vec::new();
            marker.encode_into(&mut record);
            records.push(record);
        }
        let mut record = Vec::new();
        edit.encode_into(&mut record);
        records.push(record);
        let result = (|| {
            let mut writer = LogWriter::new(self.env.new_writable_file(&path)?);
            for record in &records {
                writer.add_record(record)?;
            }
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

/// Reads the data blocks of a table whose index or footer is damaged, or that was cut short,
/// calling `visit` with each entry of each block that reads whole (checksum verified):
/// - the blocks the index names, the index read without its checksum and the footer without
///   its magic number;
/// - then the blocks found one after the other from the start of the file, each recognised by
///   a trailer whose checksum matches, up to the first that is not found or is not a data
///   block (its keys do not follow the previous block's, or it is the index).
fn salvage_blocks_without_index(
    file: &dyn RandomAccessFile,
    path: &Path,
    size: u64,
    icmp: &InternalKeyComparator,
    visit: &mut dyn FnMut(&[u8], &[u8]),
) {
    let Some(bytes) = read_whole_file(file, size) else {
        return;
    };
    let footer = TrustedFooter::from_table(&bytes, size);
    let salvage = BlockSalvage {
        file,
        path: Arc::from(path),
        icmp,
        cmp: Arc::new(icmp.clone()),
        data_end: footer.data_end,
    };
    let named = footer
        .index
        .map_or_else(Vec::new, |index| salvage.index_handles(index, size));
    for &handle in &named {
        salvage.visit_data_block(handle, None, &[], visit);
    }
    salvage.visit_blocks_by_trailer(&bytes, visit);
}

/// The whole table, `size` bytes from offset 0; `None` if it does not fit in memory's address
/// space or cannot be read whole (nothing is salvaged then).
fn read_whole_file(file: &dyn RandomAccessFile, size: u64) -> Option<Vec<u8>> {
    let len = usize::try_from(size).ok()?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(0, &mut bytes).ok()?;
    Some(bytes)
}

/// What a damaged footer still says, kept only where it fits the layout every table has: data
/// blocks, filter, metaindex, index, footer, one after the other.
struct TrustedFooter {
    /// Where the data blocks end: the metaindex's offset if its handle fits, else the file
    /// size. Everything at or after it (filter, metaindex, index) is not data.
    data_end: u64,
    /// The index block's handle, if it ends exactly where the footer starts.
    index: Option<BlockHandle>,
}

impl TrustedFooter {
    /// Reads the footer at the end of `bytes` (the whole table, `size` bytes). A file shorter
    /// than a footer trusts nothing. A handle whose end overflows a u64 fits nowhere. The
    /// metaindex must end where a trusted index starts; without one, it is trusted only under
    /// an intact magic number and if it ends before the footer.
    fn from_table(bytes: &[u8], size: u64) -> Self {
        let len = bytes.len();
        if len < FOOTER_SIZE {
            return TrustedFooter {
                data_end: size,
                index: None,
            };
        }
        let footer_start = size - FOOTER_SIZE as u64;
        let magic_ok = bytes[len - 8..] == TABLE_MAGIC.to_le_bytes();
        let mut d = Decoder::new(&bytes[len - FOOTER_SIZE..]);
        let metaindex = BlockHandle::decode_from(&mut d);
        let index =
            BlockHandle::decode_from(&mut d).filter(|h| h.end_with_trailer() == Some(footer_start));
        let metaindex = metaindex.filter(|m| {
            let end = m.end_with_trailer();
            match index {
                Some(i) => end == Some(i.offset),
                None => magic_ok && end.is_some_and(|e| e < footer_start),
            }
        });
        TrustedFooter {
            data_end: metaindex.map_or(size, |m| m.offset),
            index,
        }
    }
}

/// One table being salvaged without a usable index. Reads only; `visit` is the only effect.
struct BlockSalvage<'a> {
    file: &'a dyn RandomAccessFile,
    path: Arc<Path>,
    icmp: &'a InternalKeyComparator,
    cmp: Arc<dyn Comparator>,
    /// Where the data blocks end (see [`TrustedFooter::data_end`]); no data block read goes
    /// past it.
    data_end: u64,
}

impl BlockSalvage<'_> {
    /// The block handles the index at `index` names, in index order, the index read without
    /// its checksum (within the file's `size`); entries whose value is not a handle are
    /// skipped, and an index that does not parse names nothing.
    fn index_handles(&self, index: BlockHandle, size: u64) -> Vec<BlockHandle> {
        let mut named = Vec::new();
        let Ok(data) = read_block(self.file, &self.path, size, index, false) else {
            return named;
        };
        let Ok(block) = Block::new(data, self.path.clone(), 0) else {
            return named;
        };
        let block = Arc::new(block);
        let mut it = block.iter(self.cmp.clone());
        it.seek_to_first();
        while it.valid() {
            if let Some(h) = BlockHandle::decode(it.value()) {
                named.push(h);
            }
            it.next();
        }
        named
    }

    /// Visits the entries of the block at `handle` and returns its last key, only if the block
    /// reads whole (checksum verified, before `data_end`), is not empty, every key is an
    /// internal key, the keys ascend, and the first one follows `previous_last`. A block whose
    /// every value is the handle of a block in `seen` is an index, not data. A block refused
    /// visits nothing: `visit` sees whole blocks or none of one.
    fn visit_data_block(
        &self,
        handle: BlockHandle,
        previous_last: Option<&[u8]>,
        seen: &[BlockHandle],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Option<Vec<u8>> {
        let data = read_block(self.file, &self.path, self.data_end, handle, true).ok()?;
        let block = Arc::new(Block::new(data, self.path.clone(), handle.offset).ok()?);
        let mut entries = Vec::new();
        let mut it = block.iter(self.cmp.clone());
        it.seek_to_first();
        while it.valid() {
            ParsedInternalKey::parse(it.key())?;
            entries.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().ok()?;
        let icmp = self.icmp;
        let in_order = entries
            .windows(2)
            .all(|w| icmp.compare(&w[0].0, &w[1].0).is_lt());
        let follows = match (previous_last, entries.first()) {
            (Some(prev), Some((first, _))) => icmp.compare(prev, first).is_lt(),
            _ => true,
        };
        let is_index = entries
            .iter()
            .all(|(_, v)| BlockHandle::decode(v).is_some_and(|h| seen.contains(&h)));
        if !in_order || !follows || entries.is_empty() || is_index {
            return None;
        }
        for (k, v) in &entries {
            visit(k, v);
        }
        entries.pop().map(|(k, _)| k)
    }

    /// Visits the blocks one after the other from offset 0 of `bytes` (the whole table), each
    /// found by its trailer, while each is a data block by [`Self::visit_data_block`] whose
    /// keys follow the previous one's. Stops at the first block not found or refused, and
    /// never looks at or past `data_end`.
    fn visit_blocks_by_trailer(&self, bytes: &[u8], visit: &mut dyn FnMut(&[u8], &[u8])) {
        let end = usize::try_from(self.data_end)
            .unwrap_or(bytes.len())
            .min(bytes.len());
        let mut start = 0usize;
        let mut previous_last: Option<Vec<u8>> = None;
        let mut seen: Vec<BlockHandle> = Vec::new();
        while start + BLOCK_TRAILER_SIZE <= end {
            let Some(stored_len) = block_len_by_trailer(&bytes[..end], start) else {
                break;
            };
            let handle = BlockHandle {
                offset: start as u64,
                size: stored_len as u64,
            };
            match self.visit_data_block(handle, previous_last.as_deref(), &seen, visit) {
                Some(last) => previous_last = Some(last),
                None => break,
            }
            seen.push(handle);
            start += stored_len + BLOCK_TRAILER_SIZE;
        }
    }
}

/// The stored length of the block starting at `start`: the shortest length after which a
/// trailer (type byte 0 or 1, masked CRC of the block and type) checks and fits in `bytes`.
/// `None` if no trailer checks. Requires `start + BLOCK_TRAILER_SIZE <= bytes.len()`.
fn block_len_by_trailer(bytes: &[u8], start: usize) -> Option<usize> {
    let mut crc = crc32c(&[]);
    for stored_len in 0..=bytes.len() - start - BLOCK_TRAILER_SIZE {
        let at = start + stored_len;
        let kind = bytes[at];
        if kind <= 1 {
            let stored = decode_fixed32(&bytes[at + 1..at + 5]).expect("4 bytes");
            if crc32c_extend(crc, &[kind]) == unmask_crc(stored) {
                return Some(stored_len);
            }
        }
        crc = crc32c_extend(crc, &bytes[at..at + 1]);
    }
    None
}
