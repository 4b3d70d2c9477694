// SPDX-License-Identifier: MIT OR Apache-2.0
//! `dump FILE`: the records of one file, for a person. Logs show each write batch and its
//! operations, MANIFESTs each version edit, tables their footer, meta blocks, and every data
//! block with its entries (internal keys: user key, sequence number, put or del).
//!
//! Damage does not stop a dump: each damaged piece is printed as a `damaged:` line where it is
//! found (log damage after the records), and the command exits 3.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use strata::check::FileKind;
use strata::iter::InternalIterator;
use strata::key::{InternalKeyComparator, ParsedInternalKey, ValueKind};
use strata::log::{LogReader, ReadMode};
use strata::table::format::{read_block, read_footer, FOOTER_SIZE};
use strata::table::{Block, BlockHandle};
use strata::version::VersionEdit;
use strata::{BytewiseComparator, Comparator, Env, PosixEnv, WriteBatch};

use super::output;
use crate::encoding::Encoding;
use crate::error::{CliError, DAMAGE_FOUND};

/// The kinds of file `dump` reads.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpKind {
    /// A write-ahead log (NNNNNN.log).
    Log,
    /// A MANIFEST (MANIFEST-NNNNNN).
    Manifest,
    /// A table (NNNNNN.ldb or NNNNNN.sst).
    Table,
    /// CURRENT.
    Current,
    /// A blob file of values kept apart from the tree (NNNNNN.blob).
    Blob,
}

/// `strata dump`'s arguments.
#[derive(Args, Debug)]
pub struct DumpArgs {
    /// The file.
    file: PathBuf,
    /// What the file is, when its name does not say.
    #[arg(long, value_enum)]
    kind: Option<DumpKind>,
    /// Print keys and values as lowercase hex instead of escaped text.
    #[arg(long)]
    hex: bool,
    /// Print values whole (by default, values longer than 200 bytes are cut short).
    #[arg(long)]
    full_values: bool,
}

/// Prints keys and values, and counts the damage found.
struct Dumper {
    out: Box<dyn Write>,
    encoding: Encoding,
    full_values: bool,
    damage: usize,
}

const SHORT_VALUE: usize = 200;

impl Dumper {
    fn line(&mut self, text: std::fmt::Arguments<'_>) -> Result<(), CliError> {
        self.out.write_fmt(text).map_err(CliError::output)?;
        self.out.write_all(b"\n").map_err(CliError::output)
    }

    fn damaged(&mut self, what: impl std::fmt::Display) -> Result<(), CliError> {
        self.damage += 1;
        self.line(format_args!("damaged: {what}"))
    }

    /// An error met while reading: corruption is a damaged piece and the dump goes on; any
    /// other error (I/O) stops it, with that error's exit code.
    fn met(&mut self, e: strata::Error) -> Result<(), CliError> {
        if e.is_corruption() {
            self.damaged(e)
        } else {
            Err(e.into())
        }
    }

    fn key(&self, user_key: &[u8]) -> String {
        self.encoding.show(user_key)
    }

    fn value(&self, value: &[u8]) -> String {
        if self.full_values || value.len() <= SHORT_VALUE {
            self.encoding.show(value)
        } else {
            format!(
                "{}... ({} bytes)",
                self.encoding.show(&value[..SHORT_VALUE]),
                value.len()
            )
        }
    }

    /// An internal key: `'key' @ seq put|del`.
    fn internal_key(&self, internal_key: &[u8]) -> String {
        match ParsedInternalKey::parse(internal_key) {
            Some(k) => format!(
                "{} @ {} {}",
                self.key(k.user_key),
                k.seqno,
                match k.kind {
                    ValueKind::Value => "put",
                    ValueKind::BlobPointer => "blob",
                    ValueKind::Deletion => "del",
                    // `parse` refuses the kind: no internal key has it.
                    ValueKind::RangeDeletion => "range-del",
                }
            ),
            None => format!(
                "(malformed internal key {})",
                Encoding::Hex.show(internal_key)
            ),
        }
    }
}

/// A blob pointer as a person reads it.
fn show_blob_pointer(encoded: &[u8]) -> String {
    match strata::blob::BlobPointer::decode(encoded) {
        Some(p) => format!(
            "(in blob file {}: {} bytes at offset {}{})",
            p.file,
            p.len,
            p.offset,
            if p.compression == strata::Compression::Snappy {
                ", Snappy"
            } else {
                ""
            }
        ),
        None => format!("(malformed blob pointer {})", Encoding::Hex.show(encoded)),
    }
}

/// What the file's name says it is.
fn kind_from_name(path: &Path) -> Option<DumpKind> {
    let name = path.file_name()?.to_str()?;
    match strata::check::parse_file_name(name)?.0 {
        FileKind::Log => Some(DumpKind::Log),
        FileKind::Manifest => Some(DumpKind::Manifest),
        FileKind::Table => Some(DumpKind::Table),
        FileKind::Current => Some(DumpKind::Current),
        FileKind::Blob => Some(DumpKind::Blob),
        _ => None,
    }
}

/// `strata dump FILE`.
pub fn dump(args: &DumpArgs) -> Result<ExitCode, CliError> {
    let path = args.file.as_path();
    let kind = args.kind.or_else(|| kind_from_name(path)).ok_or_else(|| {
        CliError::Usage(format!(
            "cannot tell what {} is from its name; pass --kind log|manifest|table|current|blob",
            path.display()
        ))
    })?;
    let env = PosixEnv::new();
    let size = env.file_size(path)?;
    let mut d = Dumper {
        out: output()?,
        encoding: Encoding::new(args.hex),
        full_values: args.full_values,
        damage: 0,
    };
    let name = format!("{kind:?}").to_lowercase();
    d.line(format_args!("{}: {name}, {size} bytes", path.display()))?;
    match kind {
        DumpKind::Log => dump_log(&env, path, size, &mut d, false)?,
        DumpKind::Manifest => dump_log(&env, path, size, &mut d, true)?,
        DumpKind::Table => dump_table(&env, path, size, &mut d)?,
        DumpKind::Blob => dump_blob(&env, path, &mut d)?,
        DumpKind::Current => dump_current(&env, path, &mut d)?,
    }
    d.out.flush().map_err(CliError::output)?;
    Ok(if d.damage == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DAMAGE_FOUND)
    })
}

/// `CURRENT`: its contents, damaged unless they name a MANIFEST (as opening reads them) that is
/// in the same directory.
fn dump_current(env: &PosixEnv, path: &Path, d: &mut Dumper) -> Result<(), CliError> {
    let bytes = strata::env::read_file_to_vec(env, path)?;
    d.line(format_args!("{}", Encoding::Text.show(&bytes)))?;
    match strata::check::parse_current(&bytes) {
        Ok(name) => {
            let manifest = path.with_file_name(name);
            if !env.exists(&manifest) {
                d.damaged(format_args!(
                    "{}: names {name}, which does not exist",
                    path.display()
                ))?;
            }
            Ok(())
        }
        Err(reason) => d.damaged(format_args!("{} at offset 0: {reason}", path.display())),
    }
}

/// A log or a MANIFEST: both are sequences of records in the log format. Bytes after the last
/// record are damage unless a crash while appending can have left them
/// ([`strata::log::tail_damage`]): a file of garbage is not an empty log.
fn dump_log(
    env: &PosixEnv,
    path: &Path,
    size: u64,
    d: &mut Dumper,
    manifest: bool,
) -> Result<(), CliError> {
    let file = env.new_sequential_file(path)?;
    let mut reader = LogReader::new(file, path, ReadMode::Tolerant);
    loop {
        let record = match reader.next_record() {
            Ok(Some(record)) => record.to_vec(),
            Ok(None) => break,
            Err(e) => {
                d.met(e)?;
                break;
            }
        };
        let offset = reader.last_record_offset();
        if manifest {
            dump_edit(&reader, offset, &record, d)?;
        } else {
            dump_batch(&reader, offset, &record, d)?;
        }
    }
    let end = reader.end_of_last_record();
    let mut damage = reader.corruptions().to_vec();
    // Damage already found after the last record covers the tail.
    if size > end && damage.iter().all(|c| c.offset < end) {
        let file = env.new_random_access_file(path)?;
        let tail = file.read_to_vec(end, (size - end) as usize)?;
        match strata::log::tail_damage(&tail, end) {
            Some(c) => damage.push(c),
            None => d.line(format_args!(
                "torn tail: {} bytes after offset {end}, a write a crash cut short (opening \
                 the database drops it)",
                size - end
            ))?,
        }
    }
    for c in damage {
        d.damaged(format_args!(
            "{} at offset {}: {} ({} bytes dropped)",
            path.display(),
            c.offset,
            c.reason,
            c.dropped_bytes
        ))?;
    }
    Ok(())
}

fn dump_batch(
    reader: &LogReader,
    offset: u64,
    record: &[u8],
    d: &mut Dumper,
) -> Result<(), CliError> {
    let batch = match WriteBatch::decode(record) {
        Ok(batch) => batch,
        Err(e) => {
            return d.damaged(format_args!(
                "record at offset {offset} ({} bytes) is not a write batch: {}",
                record.len(),
                reader.record_error(e)
            ))
        }
    };
    d.line(format_args!(
        "@{offset} batch seq {}, {} operations ({} bytes)",
        batch.seqno(),
        batch.count(),
        record.len()
    ))?;
    for op in batch.iter() {
        match op.kind {
            ValueKind::Value => d.line(format_args!(
                "  put {} => {}",
                d.key(op.key),
                d.value(op.value)
            ))?,
            ValueKind::BlobPointer => d.line(format_args!(
                "  put {} => {}",
                d.key(op.key),
                show_blob_pointer(op.value)
            ))?,
            ValueKind::Deletion => d.line(format_args!("  del {}", d.key(op.key)))?,
            ValueKind::RangeDeletion => d.line(format_args!(
                "  delete-range {} .. {}",
                d.key(op.key),
                d.key(op.value)
            ))?,
        }
    }
    Ok(())
}

fn dump_edit(
    reader: &LogReader,
    offset: u64,
    record: &[u8],
    d: &mut Dumper,
) -> Result<(), CliError> {
    let edit = match VersionEdit::decode(record) {
        Ok(edit) => edit,
        Err(e) => {
            return d.damaged(format_args!(
                "record at offset {offset} ({} bytes) is not a version edit: {}",
                record.len(),
                reader.record_error(e)
            ))
        }
    };
    let mut fields = Vec::new();
    if let Some(c) = &edit.comparator {
        fields.push(format!("comparator {c}"));
    }
    if let Some(n) = edit.log_number {
        fields.push(format!("log {n:06}"));
    }
    if let Some(n) = edit.prev_log_number {
        fields.push(format!("previous log {n}"));
    }
    if let Some(n) = edit.next_file_number {
        fields.push(format!("next file {n}"));
    }
    if let Some(n) = edit.last_sequence {
        fields.push(format!("last sequence {n}"));
    }
    d.line(format_args!("@{offset} edit: {}", fields.join(", ")))?;
    for (level, key) in &edit.compact_pointers {
        d.line(format_args!(
            "  compact pointer at level {level}: {}",
            d.internal_key(key)
        ))?;
    }
    for (level, number) in &edit.deleted_files {
        d.line(format_args!(
            "  remove table {number:06} from level {level}"
        ))?;
    }
    for (level, f) in &edit.new_files {
        d.line(format_args!(
            "  add table {:06} at level {level}: {} bytes, {} .. {}",
            f.number,
            f.file_size,
            d.internal_key(&f.smallest),
            d.internal_key(&f.largest)
        ))?;
    }
    for number in &edit.deleted_blob_files {
        d.line(format_args!("  remove blob file {number:06}"))?;
    }
    for b in &edit.new_blob_files {
        d.line(format_args!(
            "  add blob file {:06}: {} bytes, {} bytes of values",
            b.number, b.file_size, b.value_bytes
        ))?;
    }
    for (number, bytes) in &edit.blob_garbage {
        d.line(format_args!(
            "  blob file {number:06}: {bytes} more bytes of values no entry reaches"
        ))?;
    }
    for (number, log) in &edit.blob_tombstones {
        d.line(format_args!(
            "  tombstone for blob file {number:06}: log {log:06} and older may point into it"
        ))?;
    }
    for t in &edit.new_range_tombstones {
        d.line(format_args!(
            "  add range deletion @ {}: {} .. {}",
            t.seqno,
            d.key(&t.start),
            d.key(&t.end)
        ))?;
    }
    for seqno in &edit.dropped_range_tombstones {
        d.line(format_args!("  drop range deletion @ {seqno}"))?;
    }
    for (number, horizon) in &edit.range_deletion_horizons {
        d.line(format_args!(
            "  table {number:06}: range deletions up to @ {horizon} applied"
        ))?;
    }
    Ok(())
}

/// A blob file: every record, checksums verified, in order.
fn dump_blob(env: &PosixEnv, path: &Path, d: &mut Dumper) -> Result<(), CliError> {
    let mut scanner = match strata::blob::BlobScanner::open(env, path) {
        Ok(scanner) => scanner,
        Err(e) => return d.met(e),
    };
    d.line(format_args!("blob file {}", scanner.number()))?;
    let mut records = 0u64;
    while let Some(record) = scanner.next() {
        match record {
            Ok(r) => {
                records += 1;
                let value = match r.value(path) {
                    Ok(v) => d.value(&v),
                    Err(e) => return d.met(e),
                };
                d.line(format_args!(
                    "@{} {} => {}{}",
                    r.offset,
                    d.key(&r.key),
                    value,
                    if r.pointer.compression == strata::Compression::Snappy {
                        " (stored with Snappy)"
                    } else {
                        ""
                    }
                ))?;
            }
            Err(e) => {
                if scanner.cut_off() {
                    d.line(format_args!(
                        "torn tail after offset {}: a record the end of the file cuts short",
                        scanner.position()
                    ))?;
                } else {
                    d.met(e)?;
                }
            }
        }
    }
    d.line(format_args!("{records} records"))
}

fn dump_table(env: &PosixEnv, path: &Path, size: u64, d: &mut Dumper) -> Result<(), CliError> {
    let file = env.new_random_access_file(path)?;
    let footer = match read_footer(&*file, path, size) {
        Ok(footer) => footer,
        Err(e) => return d.met(e),
    };
    let data_end = size - FOOTER_SIZE as u64;
    let handle_text = |h: BlockHandle| format!("@{} +{}", h.offset, h.size);
    d.line(format_args!(
        "footer: metaindex {}, index {}",
        handle_text(footer.metaindex),
        handle_text(footer.index)
    ))?;
    let shared_path: Arc<Path> = Arc::from(path);
    let read = |handle: BlockHandle| -> strata::Result<Arc<Block>> {
        let data = read_block(&*file, path, data_end, handle, true)?;
        Ok(Arc::new(Block::new(
            data,
            shared_path.clone(),
            handle.offset,
        )?))
    };

    match read(footer.metaindex) {
        Ok(meta) => {
            let mut it = meta.iter(Arc::new(BytewiseComparator));
            it.seek_to_first();
            while it.valid() {
                let name = String::from_utf8_lossy(it.key()).into_owned();
                match BlockHandle::decode(it.value()) {
                    Some(h) => match read(h) {
                        Ok(_) => d.line(format_args!("meta block {name}: {}", handle_text(h)))?,
                        Err(e) => d.met(e)?,
                    },
                    None => d.damaged(format_args!("metaindex entry {name}: bad block handle"))?,
                }
                it.next();
            }
            if let Err(e) = it.status() {
                d.met(e)?;
            }
        }
        Err(e) => d.met(e)?,
    }

    let icmp: Arc<dyn Comparator> =
        Arc::new(InternalKeyComparator::new(Arc::new(BytewiseComparator)));
    let index = match read(footer.index) {
        Ok(index) => index,
        Err(e) => return d.met(e),
    };
    let mut entries = index.iter(icmp.clone());
    entries.seek_to_first();
    let (mut blocks, mut total) = (0u64, 0u64);
    while entries.valid() {
        let Some(handle) = BlockHandle::decode(entries.value()) else {
            d.damaged(format_args!(
                "{}: index entry {} has a bad block handle",
                path.display(),
                d.internal_key(entries.key())
            ))?;
            entries.next();
            continue;
        };
        blocks += 1;
        match read(handle) {
            Ok(block) => {
                d.line(format_args!(
                    "data block {} ({} bytes raw), index key {}",
                    handle_text(handle),
                    block.size(),
                    d.internal_key(entries.key())
                ))?;
                let mut it = block.iter(icmp.clone());
                it.seek_to_first();
                while it.valid() {
                    total += 1;
                    let key = d.internal_key(it.key());
                    match ParsedInternalKey::parse(it.key()).map(|k| k.kind) {
                        Some(ValueKind::Deletion) => d.line(format_args!("  {key}"))?,
                        Some(ValueKind::BlobPointer) => {
                            d.line(format_args!("  {key} => {}", show_blob_pointer(it.value())))?
                        }
                        _ => d.line(format_args!("  {key} => {}", d.value(it.value())))?,
                    }
                    it.next();
                }
                if let Err(e) = it.status() {
                    d.met(e)?;
                }
            }
            Err(e) => d.met(e)?,
        }
        entries.next();
    }
    if let Err(e) = entries.status() {
        d.met(e)?;
    }
    d.line(format_args!("{blocks} data blocks, {total} entries"))
}
