// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`BlobCache`]: open blob files, for reads through pointers.
//!
//! Locking: like the table cache, concurrent reads of a file that is not open yet wait for one
//! of them to open it. A file evicted from the cache stays open while a reader holds it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{read_value, BlobPointer};
use crate::env::{Env, RandomAccessFile};
use crate::error::Result;
use crate::filename::blob_file;

/// Opens blob files on demand and keeps up to a number of them open.
pub struct BlobCache {
    env: Arc<dyn Env>,
    dir: PathBuf,
    files: quick_cache::sync::Cache<u64, Arc<dyn RandomAccessFile>>,
}

impl std::fmt::Debug for BlobCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobCache")
            .field("dir", &self.dir)
            .field("open", &self.files.len())
            .finish()
    }
}

impl BlobCache {
    /// A cache for the blob files of the database in `dir`, keeping up to `capacity` open.
    pub fn new(env: Arc<dyn Env>, dir: &Path, capacity: usize) -> BlobCache {
        BlobCache {
            env,
            dir: dir.to_path_buf(),
            files: quick_cache::sync::Cache::new(capacity.max(1)),
        }
    }

    /// The open blob file `number`.
    ///
    /// # Errors
    /// An I/O error naming `NNNNNN.blob` if it cannot be opened.
    pub fn file(&self, number: u64) -> Result<Arc<dyn RandomAccessFile>> {
        self.files.get_or_insert_with(&number, || {
            self.env.new_mapped_file(&blob_file(&self.dir, number))
        })
    }

    /// The value `pointer` points to, checked against the pointer's checksum when `verify` is
    /// set.
    ///
    /// # Errors
    /// As [`read_value`]: corruption or an I/O error, naming the blob file.
    pub fn read(&self, pointer: &BlobPointer, verify: bool) -> Result<Vec<u8>> {
        let file = self.file(pointer.file)?;
        read_value(&*file, &blob_file(&self.dir, pointer.file), pointer, verify)
    }

    /// Forgets blob file `number`: once it is deleted, and when it is closed for writing (a
    /// handle opened while the file grew maps it only as far as it then reached, and reads past
    /// that take a system call each; the next read opens it again, mapped whole). Readers
    /// holding the old handle keep it.
    pub fn evict(&self, number: u64) {
        self.files.remove(&number);
    }
}
