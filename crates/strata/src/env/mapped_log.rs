// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`MappedLogFile`]: `PosixEnv`'s write-ahead logs, written through a shared mapping of space
//! allocated ahead (Linux: `fallocate`, `MADV_POPULATE_WRITE`, and an `fdatasync` that writes
//! the pages a mapping dirtied).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::posix::{create_truncated, page_bytes, sync_data, FailStop, IoFaults};
use super::WritableFile;
use crate::error::Result;

/// How much space a mapped log allocates and maps at a time.
const LOG_CHUNK_BYTES: usize = 1 << 20;

/// How far ahead of its appends a mapped log faults pages in, writable, with one
/// `madvise(MADV_POPULATE_WRITE)`: a page fault per 4 KiB cost a put 0.15 µs (fillseq 0.66
/// against 0.51 µs per put with the whole chunk faulted in at once). Faulting in a whole
/// chunk would dirty up to 1 MiB of zeros ahead: pages the kernel may write back before the
/// records, and charges to `write_bytes` for bytes never written (cut off at drop).
const LOG_POPULATE_BYTES: usize = 64 << 10;

/// Bytes of written pages a mapped log leaves mapped behind its appends. Once that many more
/// are written, they are unmapped (`madvise(MADV_DONTNEED)`, once per this many bytes): they
/// stay in the page cache, dirty until written back or synced, as the pages of a `write` do,
/// but stop counting in the process's resident memory, which otherwise held up to a whole
/// chunk of the log (1 MiB) that nothing reads.
const LOG_RELEASE_BYTES: usize = 256 << 10;

/// A write-ahead log written through a shared mapping ([`Env::new_log_file`](super::Env::new_log_file)).
///
/// The file grows [`LOG_CHUNK_BYTES`] at a time by `fallocate`, so that space belongs to the
/// file before a byte is stored into it: a full disk is an error from that call, never a
/// `SIGBUS` from a store. Each chunk is mapped shared and writable, and an append is a copy
/// into the mapping. The mapping is the page cache, so an appended record survives a process
/// crash with no system call, as a `write` would make it. `sync` is `fdatasync`, which writes
/// the pages the mapping dirtied like any others, and the file's allocated length.
///
/// Invariant: the file is `allocated` bytes long; bytes past `len()` are zeros (allocated,
/// never stored into), which the log reader passes over as preallocated space. Dropping the
/// file (unless it failed) cuts them off.
pub(super) struct MappedLogFile {
    path: PathBuf,
    file: File,
    /// The chunk being written: file bytes `map_offset..allocated`. `None` only after a
    /// failure while moving to the next chunk.
    map: Option<memmap2::MmapMut>,
    map_offset: u64,
    /// Bytes of the mapping written so far.
    map_used: usize,
    /// Bytes of the mapping, from its start, faulted in ahead (the kernel faults in whole
    /// pages; the next range starts here, rounded down to a page by `advise_range`).
    map_populated: usize,
    /// Bytes of the mapping, from its start, written and unmapped again (a multiple of the
    /// page size, at most `map_used`).
    map_released: usize,
    /// The file's length: the end of the last chunk allocated.
    allocated: u64,
    faults: Option<Arc<dyn IoFaults>>,
    failure: FailStop,
}

impl MappedLogFile {
    /// Creates (truncating) `path` and allocates its first chunk. `Ok(None)` if the file
    /// system cannot allocate space ahead (`fallocate` unsupported); the file is then left
    /// empty for a caller that writes it another way.
    pub(super) fn create(path: &Path, faults: Option<Arc<dyn IoFaults>>) -> Result<Option<Self>> {
        // Readable too: a writable shared mapping needs it.
        let file = create_truncated(path, true)?;
        let mut log = MappedLogFile {
            path: path.to_path_buf(),
            file,
            map: None,
            map_offset: 0,
            map_used: 0,
            map_populated: 0,
            map_released: 0,
            allocated: 0,
            faults,
            failure: FailStop::default(),
        };
        match log.allocate_chunk() {
            Ok(()) => {}
            Err(e) if unsupported(&e) => return Ok(None),
            Err(e) => return Err(log.failure.fail(&log.path, "allocate", e)),
        }
        log.map_chunk()?;
        Ok(Some(log))
    }

    /// The bytes appended so far.
    fn len(&self) -> u64 {
        self.map_offset + self.map_used as u64
    }

    /// Extends the file by one chunk of zeros, allocated on the disk.
    fn allocate_chunk(&mut self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if let Some(e) = self
            .faults
            .as_ref()
            .and_then(|f| f.before_allocate(&self.path, LOG_CHUNK_BYTES))
        {
            return Err(e);
        }
        let offset = i64::try_from(self.allocated).map_err(|_| io::ErrorKind::InvalidInput)?;
        nix::fcntl::fallocate(
            self.file.as_raw_fd(),
            nix::fcntl::FallocateFlags::empty(),
            offset,
            LOG_CHUNK_BYTES as i64,
        )
        .map_err(io::Error::from)?;
        self.allocated += LOG_CHUNK_BYTES as u64;
        Ok(())
    }

    /// Maps the last chunk allocated, unmapping the one before (its pages stay in the page
    /// cache, dirty until written back or synced).
    #[allow(unsafe_code)]
    fn map_chunk(&mut self) -> Result<()> {
        self.map = None;
        let offset = self.allocated - LOG_CHUNK_BYTES as u64;
        // SAFETY: the mapping covers file bytes `offset..allocated`, which `fallocate` has
        // just allocated, so no store into it is past the end of the file or meets a full
        // disk. Only this writer stores into the file, through this mapping alone, and
        // nothing reads it while it is written except the kernel (a reader opens the file
        // after the writer is dropped, or reads it with `read`, which sees the same pages).
        // Another process truncating the file would make a store raise `SIGBUS`; the
        // database's lock file keeps other strata processes out (docs/unsafe.md).
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(LOG_CHUNK_BYTES)
                .map_mut(&self.file)
        }
        .map_err(|e| self.failure.fail(&self.path, "mmap", e))?;
        self.map = Some(map);
        self.map_offset = offset;
        self.map_used = 0;
        self.map_populated = 0;
        self.map_released = 0;
        Ok(())
    }

    /// Faults in, writable, the pages of the mapping up to `LOG_POPULATE_BYTES` past `end`.
    /// Best effort: a kernel before 5.14 refuses it, and stores then fault page by page.
    /// Called once per `LOG_POPULATE_BYTES` appended, it also unmaps the pages written, once
    /// `LOG_RELEASE_BYTES` of them are mapped.
    #[allow(unsafe_code)]
    fn populate_through(&mut self, end: usize) {
        let Some(map) = self.map.as_ref() else { return };
        let written = self.map_used - self.map_used % page_bytes();
        if written >= self.map_released + LOG_RELEASE_BYTES {
            // SAFETY: the range holds whole pages (the mapping starts on a page, `map_offset`
            // being a multiple of the chunk size, 1 MiB, and so of any page size up to it)
            // that every append has finished storing into (they end at or before
            // `map_used`), and no reference into the mapping outlives an append. The mapping
            // is shared and of a file: `MADV_DONTNEED` only takes the pages out of this
            // process's page tables, their contents (dirty or not) staying in the page cache,
            // and a later access would map them again with those contents.
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.map_released,
                    written - self.map_released,
                )
            };
            self.map_released = written;
        }
        let from = self.map_populated;
        let to = (end + LOG_POPULATE_BYTES).min(map.len());
        if to > from {
            // The pages are first made by a `write` of zeros over the bytes not yet stored
            // (`map_used <= from`), through to the end of the last page. A write fault on a
            // page the page cache lacks reads it in first: ext4 reads the chunk's unwritten
            // blocks around it (`ext4_mpage_readpages`), which made the populates 28% of
            // fillseq's samples and cost 0.75-1.28 ms a MiB of log against 0.40-0.41 this way
            // (`scripts/page-cache/log_pages.c`; docs/benchmarks.md, section (30)). The bytes
            // were zeros already (allocated, never stored into), so a failed write changes
            // nothing the records need: the populate below then faults the pages in as before.
            let fill_end = to.next_multiple_of(page_bytes()).min(map.len());
            let _ = write_zeros_at(&self.file, self.map_offset + from as u64, fill_end - from);
            let _ = map.advise_range(memmap2::Advice::PopulateWrite, from, to - from);
            self.map_populated = to;
        }
    }
}

/// Writes `len` zero bytes into `file` at `offset`, `ZEROS` at a time.
fn write_zeros_at(file: &File, mut offset: u64, mut len: usize) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    static ZEROS: [u8; LOG_POPULATE_BYTES] = [0; LOG_POPULATE_BYTES];
    while len > 0 {
        let n = len.min(ZEROS.len());
        file.write_all_at(&ZEROS[..n], offset)?;
        offset += n as u64;
        len -= n;
    }
    Ok(())
}

/// True if `e` says the file system cannot allocate space ahead.
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::ENOSYS | nix::libc::EOPNOTSUPP)
    )
}

impl WritableFile for MappedLogFile {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        self.failure.check(&self.path, "write")?;
        while !data.is_empty() {
            let map = match self.map.as_mut() {
                Some(map) if self.map_used < map.len() => map,
                _ => {
                    self.allocate_chunk()
                        .map_err(|e| self.failure.fail(&self.path, "allocate", e))?;
                    self.map_chunk()?;
                    continue;
                }
            };
            let n = data.len().min(map.len() - self.map_used);
            if self.map_used + n > self.map_populated {
                self.populate_through(self.map_used + n);
                continue;
            }
            map[self.map_used..self.map_used + n].copy_from_slice(&data[..n]);
            self.map_used += n;
            data = &data[n..];
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // Stored bytes are already the operating system's.
        self.failure.check(&self.path, "write")
    }

    fn sync(&mut self) -> Result<()> {
        self.failure.check(&self.path, "sync")?;
        // `fdatasync` writes the pages dirtied through any mapping of the file, and the
        // length `fallocate` gave it: no `msync` is needed on Linux.
        sync_data(&self.file, &self.path, self.faults.as_ref())
            .map_err(|e| self.failure.fail(&self.path, "sync", e))
    }
}

impl Drop for MappedLogFile {
    fn drop(&mut self) {
        self.map = None;
        // Cut off the space never written, so that a log closed cleanly ends after its last
        // record, as LevelDB's do. Never after a failure; best effort otherwise (a reader
        // passes over the zeros all the same).
        if !self.failure.failed() {
            let _ = self.file.set_len(self.len());
        }
    }
}
