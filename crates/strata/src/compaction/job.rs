// SPDX-License-Identifier: MIT OR Apache-2.0
//! Running a compaction plan: merging its inputs into new tables at `level + 1`, dropping the
//! entries no snapshot can see, cutting outputs at `max_output_file_size` and where they would
//! overlap too many grandparents.
//!
//! The job writes and syncs tables; it changes no version. The database (the caller) owns the
//! rest through [`JobHost`]: file numbers and pending outputs (under its lock), shutdown, and
//! flushing a memtable that fills up meanwhile. The caller installs the outputs, or on an error
//! keeps its background error; the job has then removed every output it wrote.

use std::path::Path;
use std::sync::Arc;

use super::Compaction;
use crate::cache::TableCache;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::filename;
use crate::iter::{BoxedIter, InternalIterator, MergingIter};
use crate::key::{InternalKeyComparator, ParsedInternalKey, ValueKind, MAX_SEQNO};
use crate::table::{BlockReadOptions, TableBuilder, TableOptions};
use crate::version::level_iter::level_iter;
use crate::version::set::new_table_meta;
use crate::version::FileMetaData;

/// What a compaction job asks of the database that runs it.
pub(crate) trait JobHost {
    /// A new file number for an output, already kept from obsolete-file deletion (a pending
    /// output) until the caller installs or abandons the job's result.
    fn new_output_number(&self) -> u64;

    /// True if the job should stop now (the database is closing).
    fn stopping(&self) -> bool;

    /// Called between entries: flushes a memtable that is waiting, so that writers are not
    /// held up behind a long compaction.
    fn between_entries(&self);
}

/// The files and settings a job reads and writes.
pub(crate) struct JobFiles<'a> {
    pub(crate) env: &'a dyn Env,
    pub(crate) dir: &'a Path,
    pub(crate) table_cache: &'a Arc<TableCache>,
    pub(crate) icmp: &'a InternalKeyComparator,
    pub(crate) table_options: TableOptions,
}

/// An output table being written.
struct Output {
    number: u64,
    builder: TableBuilder,
    smallest: Vec<u8>,
    largest: Vec<u8>,
}

/// A cursor over every input of a compaction, merged.
fn input_iterator(
    files: &JobFiles<'_>,
    c: &Compaction,
) -> Result<MergingIter<InternalKeyComparator>> {
    // Each input block is read once, in order: the mapped pages behind the cursors leave the
    // process's resident memory as they pass, so that a write-heavy process does not hold
    // every table it compacts resident (db_bench fillseq,fillrandom,overwrite,compact at 1M:
    // peak resident 93-98 MB with them held, 54-59 without). Gets map what they read again.
    // Every input block is verified as read: a block damaged since an earlier read checked it
    // must not be rewritten under a fresh checksum.
    let options = BlockReadOptions {
        verify_checksums: true,
        trust_verified: false,
        fill_cache: false,
        release_behind: true,
    };
    let mut children: Vec<BoxedIter> = Vec::new();
    for which in 0..2 {
        let level = c.level + which;
        if level == 0 {
            for f in &c.inputs[which] {
                let table = files.table_cache.get(f.number, f.file_size)?;
                children.push(Box::new(table.iter(options)));
            }
        } else if !c.inputs[which].is_empty() {
            children.push(Box::new(level_iter(
                files.icmp.clone(),
                c.inputs[which].as_slice().into(),
                // A compaction steps through its inputs; it does not seek.
                None,
                files.table_cache.clone(),
                options,
                false,
            )));
        }
    }
    Ok(MergingIter::new(files.icmp.clone(), children))
}

/// Merges the inputs of `c` into output tables (appended to `outputs`), dropping what no
/// snapshot at or above `smallest_snapshot` can see. Returns false if it stopped because the
/// host is stopping; on false or an error the outputs it wrote are removed.
pub(crate) fn run(
    host: &impl JobHost,
    files: &JobFiles<'_>,
    c: &mut Compaction,
    smallest_snapshot: u64,
    outputs: &mut Vec<FileMetaData>,
) -> Result<bool> {
    let mut input = input_iterator(files, c)?;
    input.seek_to_first();
    // The version's range deletions that every snapshot sees delete what they cover.
    let range_deletions = c.input_version.range_fragments.clone();
    let ucmp = files.icmp.user_comparator().clone();
    let mut current: Option<Output> = None;
    let mut current_user_key: Option<Vec<u8>> = None;
    let mut last_seqno_for_key = MAX_SEQNO;
    let result = (|| -> Result<bool> {
        while input.valid() {
            if host.stopping() {
                return Ok(false);
            }
            host.between_entries();
            let key = input.key();
            if c.should_stop_before(key) && current.is_some() {
                finish_output(files, current.take().expect("checked"), outputs)?;
            }
            let parsed = ParsedInternalKey::parse(key).ok_or_else(|| {
                Error::corruption(
                    files.dir,
                    0,
                    format!(
                        "compaction input of the database at {} holds a malformed internal key \
                         '{}'",
                        files.dir.display(),
                        key.escape_ascii()
                    ),
                )
            })?;
            let new_key = current_user_key
                .as_deref()
                .is_none_or(|k| ucmp.compare(parsed.user_key, k).is_ne());
            if new_key {
                current_user_key = Some(parsed.user_key.to_vec());
                last_seqno_for_key = MAX_SEQNO;
            }
            // (A) a newer entry for this key is visible to every snapshot, so this one is
            // hidden from all of them; (B) a tombstone every snapshot sees, with nothing older
            // below to hide, hides nothing.
            // (C) a range deletion every snapshot sees is newer and covers it.
            let drop = last_seqno_for_key <= smallest_snapshot
                || (parsed.kind == ValueKind::Deletion
                    && parsed.seqno <= smallest_snapshot
                    && c.is_base_level_for_key(parsed.user_key))
                || range_deletions.as_ref().is_some_and(|r| {
                    r.covering(parsed.user_key, smallest_snapshot)
                        .is_some_and(|t| parsed.seqno < t)
                });
            last_seqno_for_key = parsed.seqno;
            if !drop {
                if current.is_none() {
                    current = Some(open_output(host, files)?);
                }
                let out = current.as_mut().expect("opened above");
                if out.builder.entry_count() == 0 {
                    out.smallest = key.to_vec();
                }
                out.largest.clear();
                out.largest.extend_from_slice(key);
                out.builder.add(key, input.value())?;
                if out.builder.file_size() >= c.max_output_file_size {
                    finish_output(files, current.take().expect("checked"), outputs)?;
                }
            }
            input.next();
        }
        input.status()?;
        if let Some(out) = current.take() {
            finish_output(files, out, outputs)?;
        }
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        // Outputs of a failed or abandoned compaction are not installed; remove them now
        // (the next open would otherwise).
        for o in outputs.iter() {
            files.table_cache.evict(o.number);
            let _ = files
                .env
                .remove_file(&filename::table_file(files.dir, o.number));
        }
        if let Some(out) = current {
            let _ = files
                .env
                .remove_file(&filename::table_file(files.dir, out.number));
        }
    }
    result
}

fn open_output(host: &impl JobHost, files: &JobFiles<'_>) -> Result<Output> {
    let number = host.new_output_number();
    let file = files
        .env
        .new_writable_file(&filename::table_file(files.dir, number))?;
    Ok(Output {
        number,
        builder: TableBuilder::new(files.table_options.clone(), file),
        smallest: Vec::new(),
        largest: Vec::new(),
    })
}

fn finish_output(files: &JobFiles<'_>, out: Output, outputs: &mut Vec<FileMetaData>) -> Result<()> {
    let size = out.builder.finish(true)?;
    files.table_cache.get(out.number, size)?;
    outputs.push(new_table_meta(out.number, size, out.smallest, out.largest));
    Ok(())
}
