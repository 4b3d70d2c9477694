// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`TableBuilder`]: writes a sorted table, byte-identical to LevelDB's for the same entries and
//! options with compression off. With Snappy, data blocks are compressed in chunks that
//! decode alone and their index entries say where the chunks start (`table::chunks`), which
//! LevelDB reads as it reads its own tables.

use super::block_builder::BlockBuilder;
use super::chunks::ChunkStarts;
use super::filter_block::FilterBlockBuilder;
use super::format::{block_crc, BlockCompressor, BlockHandle, Compression, Footer};
use super::TableOptions;
use crate::coding::mask_crc;
use crate::comparator::Comparator;
use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::key::{user_key, InternalKeyComparator};

/// Writes a table: add entries in increasing internal-key order, then [`finish`].
///
/// A data block is cut as soon as its size estimate reaches `block_size`. Each index entry is
/// the shortest separator between two blocks' keys; the filter holds user keys.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use strata::{Env, MemEnv};
/// use strata::key::{append_internal_key, ValueKind};
/// use strata::table::{TableBuilder, TableOptions};
///
/// let env = MemEnv::new();
/// let file = env.new_writable_file(Path::new("/000005.ldb")).unwrap();
/// let mut builder = TableBuilder::new(TableOptions::default(), file);
/// let mut key = Vec::new();
/// append_internal_key(&mut key, b"apple", 1, ValueKind::Value);
/// builder.add(&key, b"red").unwrap();
/// let size = builder.finish(true).unwrap();
/// assert_eq!(size, env.file_size(Path::new("/000005.ldb")).unwrap());
/// ```
///
/// [`finish`]: TableBuilder::finish
pub struct TableBuilder {
    options: TableOptions,
    icmp: InternalKeyComparator,
    file: Box<dyn WritableFile>,
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<FilterBlockBuilder>,
    last_key: Vec<u8>,
    entry_count: u64,
    /// The handle of the last data block written and where its chunks start, whose index
    /// entry waits for the next block's first key (so that a short separator can be chosen).
    pending_index_entry: Option<(BlockHandle, ChunkStarts)>,
    compressor: BlockCompressor,
    handle_encoding: Vec<u8>,
    /// The first write error; every later call returns it.
    error: Option<Error>,
}

impl TableBuilder {
    /// A builder writing to `file`, which must be empty.
    pub fn new(options: TableOptions, file: Box<dyn WritableFile>) -> Self {
        let mut filter = options.filter_policy.clone().map(FilterBlockBuilder::new);
        if let Some(f) = filter.as_mut() {
            f.start_block(0);
        }
        TableBuilder {
            icmp: InternalKeyComparator::new(options.comparator.clone()),
            data_block: BlockBuilder::new(options.block_restart_interval),
            index_block: BlockBuilder::new(1),
            filter,
            file,
            offset: 0,
            last_key: Vec::new(),
            entry_count: 0,
            pending_index_entry: None,
            compressor: BlockCompressor::new(),
            handle_encoding: Vec::new(),
            error: None,
            options,
        }
    }

    fn check(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn record<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.error.get_or_insert_with(|| e.clone());
        }
        result
    }

    /// Adds an entry.
    ///
    /// Requires: `internal_key` is greater than every key added before.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        self.check()?;
        debug_assert!(
            self.entry_count == 0
                || self.icmp.compare(&self.last_key, internal_key) == std::cmp::Ordering::Less,
            "keys must be added in increasing order"
        );
        if let Some((handle, chunks)) = self.pending_index_entry.take() {
            self.icmp
                .find_shortest_separator(&mut self.last_key, internal_key);
            self.add_index_entry(handle, chunks);
        }
        if let Some(f) = self.filter.as_mut() {
            f.add_key(user_key(internal_key));
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);
        self.entry_count += 1;
        self.data_block.add(internal_key, value);
        if self.data_block.size_estimate() >= self.options.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Adds the index entry of the data block at `handle`: the handle, then where the block's
    /// chunks start (nothing for a block compressed whole, as LevelDB writes it).
    fn add_index_entry(&mut self, handle: BlockHandle, chunks: ChunkStarts) {
        self.handle_encoding.clear();
        handle.encode_into(&mut self.handle_encoding);
        chunks.encode_into(&mut self.handle_encoding);
        self.index_block.add(&self.last_key, &self.handle_encoding);
    }

    /// Writes the current data block, if it has entries, into the file's buffer. It is not
    /// handed to the operating system a block at a time (as LevelDB's builder does): nothing
    /// reads a table before `finish`, and a `write` per stored block (about 2 KiB compressed)
    /// cost a flush or compaction several times what writes of whole aligned 64 KiB do
    /// (docs/benchmarks.md, section (30)).
    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let (raw, restarts, entries_end) = self.data_block.finish_with_restarts();
        let (compression, stored, chunks) =
            self.compressor
                .compress_data_block(raw, restarts, entries_end, self.options.compression);
        let result = write_raw_block(&mut *self.file, &mut self.offset, stored, compression);
        self.data_block.reset();
        let handle = self.record(result)?;
        self.pending_index_entry = Some((handle, chunks));
        if let Some(f) = self.filter.as_mut() {
            f.start_block(self.offset);
        }
        Ok(())
    }

    /// Compresses (if configured) and writes the index block.
    fn write_index_block(&mut self) -> Result<BlockHandle> {
        let raw = self.index_block.finish();
        let (compression, stored) = self.compressor.compress(raw, self.options.compression);
        let result = write_raw_block(&mut *self.file, &mut self.offset, stored, compression);
        self.index_block.reset();
        self.record(result)
    }

    /// The number of entries added.
    pub fn entry_count(&self) -> u64 {
        self.entry_count
    }

    /// The size of the file so far (finished blocks only).
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// Writes the last data block, the filter, metaindex and index blocks and the footer, and
    /// syncs the file if `sync`. Returns the table's size in bytes.
    pub fn finish(mut self, sync: bool) -> Result<u64> {
        self.check()?;
        self.flush_data_block()?;
        let mut metaindex = BlockBuilder::new(self.options.block_restart_interval);
        if let Some(mut filter) = self.filter.take() {
            let contents = filter.finish();
            let result = write_raw_block(
                &mut *self.file,
                &mut self.offset,
                contents,
                Compression::None,
            );
            let handle = self.record(result)?;
            let name = self
                .options
                .filter_policy
                .as_ref()
                .expect("a filter builder implies a policy")
                .name();
            self.handle_encoding.clear();
            handle.encode_into(&mut self.handle_encoding);
            metaindex.add(format!("filter.{name}").as_bytes(), &self.handle_encoding);
        }
        let raw = metaindex.finish();
        let (compression, stored) = self.compressor.compress(raw, self.options.compression);
        let result = write_raw_block(&mut *self.file, &mut self.offset, stored, compression);
        let metaindex_handle = self.record(result)?;

        if let Some((handle, chunks)) = self.pending_index_entry.take() {
            self.icmp.find_short_successor(&mut self.last_key);
            self.add_index_entry(handle, chunks);
        }
        let index_handle = self.write_index_block()?;
        let footer = Footer {
            metaindex: metaindex_handle,
            index: index_handle,
        };
        let footer = footer.encode();
        let result = self.file.append(&footer);
        self.record(result)?;
        self.offset += footer.len() as u64;
        let result = if sync {
            self.file.sync()
        } else {
            self.file.flush()
        };
        self.record(result)?;
        Ok(self.offset)
    }
}

/// Appends `stored` and its trailer at `*offset`, advancing it; returns the block's handle.
fn write_raw_block(
    file: &mut dyn WritableFile,
    offset: &mut u64,
    stored: &[u8],
    compression: Compression,
) -> Result<BlockHandle> {
    let handle = BlockHandle {
        offset: *offset,
        size: stored.len() as u64,
    };
    file.append(stored)?;
    let kind = compression as u8;
    let mut trailer = [0u8; 5];
    trailer[0] = kind;
    trailer[1..].copy_from_slice(&mask_crc(block_crc(stored, kind)).to_le_bytes());
    file.append(&trailer)?;
    *offset += stored.len() as u64 + trailer.len() as u64;
    Ok(handle)
}

impl std::fmt::Debug for TableBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableBuilder")
            .field("offset", &self.offset)
            .field("entry_count", &self.entry_count)
            .finish()
    }
}
