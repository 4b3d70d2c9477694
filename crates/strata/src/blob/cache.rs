// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`BlobCache`]: open blob files, for reads through pointers.
//!
//! The caching itself (eviction, sharing, locking: concurrent reads of a file that is not open
//! yet wait for one of them to open it, and a file evicted from the cache stays open while a
//! reader holds it) is the generic open-file cache's, as for tables; this module only knows how
//! to open a blob file and read a value from it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{malformed_pointer, read_value, BlobPointer};
use crate::cache::file_cache::{CachedFile, FileCache, FileOpener};
use crate::env::{Env, RandomAccessFile};
use crate::error::Result;
use crate::filename::blob_file;

/// An open blob file.
struct OpenBlobFile {
    file: Arc<dyn RandomAccessFile>,
    /// A length the file is known to have reached. Invariant: at most its length now (blob
    /// files only grow), so a value within it is in the file. Raised, from the file's size,
    /// when a pointer reaches past it.
    known_len: AtomicU64,
}

impl CachedFile for OpenBlobFile {}

/// A blob file held open by [`BlobCache::pin`]; nothing but holding it.
pub(crate) struct PinnedBlobFile {
    _held: Arc<OpenBlobFile>,
}

/// Opens the blob files of one database directory, mapped.
struct BlobOpener {
    env: Arc<dyn Env>,
    dir: PathBuf,
}

impl FileOpener for BlobOpener {
    type File = OpenBlobFile;
    type Hint = ();

    fn open(&self, number: u64, (): ()) -> Result<OpenBlobFile> {
        let path = blob_file(&self.dir, number);
        let file = self.env.new_mapped_file(&path)?;
        // Taken after opening: the file cannot be shorter than this when read.
        let len = self.env.file_size(&path)?;
        Ok(OpenBlobFile {
            file,
            known_len: AtomicU64::new(len),
        })
    }
}

/// Opens blob files on demand and keeps up to a number of them open.
#[derive(Debug)]
pub struct BlobCache {
    files: FileCache<BlobOpener>,
}

impl BlobCache {
    /// A cache for the blob files of the database in `dir`, keeping up to `capacity` open.
    pub fn new(env: Arc<dyn Env>, dir: &Path, capacity: usize) -> BlobCache {
        let opener = BlobOpener {
            env,
            dir: dir.to_path_buf(),
        };
        BlobCache {
            files: FileCache::with_opener(opener, capacity),
        }
    }

    fn open(&self, number: u64) -> Result<Arc<OpenBlobFile>> {
        self.files.get(number, ())
    }

    /// Blob file `number`, opened and pinned while the returned handle is held: reads of the
    /// file go to this open file even after the cache evicted it (see
    /// [`TableCache::pin`](crate::cache::TableCache::pin)).
    pub(crate) fn pin(&self, number: u64) -> Result<PinnedBlobFile> {
        self.files.pin(number, ()).map(|held| PinnedBlobFile { _held: held })
    }

    /// The directory of the database whose blob files these are.
    pub(crate) fn dir(&self) -> &Path {
        &self.files.opener().dir
    }

    /// The open blob file `number`.
    ///
    /// # Errors
    /// An I/O error naming `NNNNNN.blob` if it cannot be opened.
    pub fn file(&self, number: u64) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(self.open(number)?.file.clone())
    }

    /// The value of the entry with user key `key` whose stored value is the blob pointer
    /// `encoded`, as [`read`](Self::read).
    ///
    /// # Errors
    /// As [`read`](Self::read); and if `encoded` is not a pointer, corruption naming what is
    /// known (see [`malformed_pointer`]).
    pub(crate) fn read_encoded(&self, key: &[u8], encoded: &[u8], verify: bool) -> Result<Vec<u8>> {
        match BlobPointer::decode(encoded) {
            Some(pointer) => self.read(&pointer, verify),
            None => Err(malformed_pointer(self.dir(), key, encoded)),
        }
    }

    /// The value `pointer` points to, checked against the pointer's checksum when `verify` is
    /// set.
    ///
    /// A pointer reaching past the length the file had when opened (a file still being
    /// written) costs a look at the file's size; others cost nothing more than the read.
    ///
    /// # Errors
    /// Corruption naming the blob file and the value's offset if the value does not lie within
    /// the file, or as [`read_value`]: corruption or an I/O error, naming the blob file.
    pub fn read(&self, pointer: &BlobPointer, verify: bool) -> Result<Vec<u8>> {
        let open = self.open(pointer.file)?;
        let opener = self.files.opener();
        let path = blob_file(&opener.dir, pointer.file);
        let mut len = open.known_len.load(Ordering::Relaxed);
        if !pointer.fits_in(len) {
            len = opener.env.file_size(&path)?;
            open.known_len.fetch_max(len, Ordering::Relaxed);
        }
        read_value(&*open.file, &path, len, pointer, verify)
    }

    /// Forgets blob file `number`: once it is deleted, and when it is closed for writing (a
    /// handle opened while the file grew maps it only as far as it then reached, and reads past
    /// that take a system call each; the next read opens it again, mapped whole). Readers
    /// holding the old handle keep it.
    pub fn evict(&self, number: u64) {
        self.files.evict(number);
    }
}
