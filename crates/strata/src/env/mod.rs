// SPDX-License-Identifier: MIT OR Apache-2.0
//! The file-system interface: every byte strata reads or writes goes through an [`Env`].
//!
//! Two implementations ship with the library:
//! - [`PosixEnv`], the real file system (`pread`, buffered appends, `fdatasync`, `fcntl` locks);
//! - [`MemEnv`], an in-memory file system for tests that can also simulate a crash: it forgets
//!   whatever was not synced, and can undo directory changes that were not made durable.
//!
//! [`FaultEnv`] wraps either to number every mutating call, fail any of them as a disk would
//! (`EIO`, `ENOSPC`, a short write, a failed sync), and watch each one before it runs: the
//! crash and fault tests are built on it. Users may implement [`Env`] themselves too.
//!
//! All methods report failures as [`Error::Io`](crate::Error::Io) naming the path.

mod fault;
#[cfg(target_os = "linux")]
mod mapped_log;
mod mem;
mod posix;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

pub use fault::{FaultEnv, FaultKind, FaultPlan, FileOp, OpKind};
pub use mem::{CrashMode, MemEnv, Survivor};
pub use posix::{IoFaults, PosixEnv};

use crate::error::Result;

/// A file read from start to end, as the log reader does.
pub trait SequentialFile: Send {
    /// Reads up to `buf.len()` bytes; returns how many were read, 0 at end of file.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize>;

    /// Skips `n` bytes forward. Skipping past the end leaves the file at its end.
    fn skip(&mut self, n: u64) -> Result<()>;
}

/// A file read at arbitrary offsets by many threads at once, as tables are.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` with the bytes at `offset..offset + buf.len()`.
    ///
    /// # Errors
    /// An I/O error, or an `Io` error of kind `UnexpectedEof` if the file ends before `buf` is
    /// full.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;

    /// The `len` bytes at `offset`, in a new buffer. The default fills a zeroed buffer with
    /// [`read_exact_at`](Self::read_exact_at); a file mapped into memory copies straight out
    /// of the mapping.
    ///
    /// # Errors
    /// As [`read_exact_at`](Self::read_exact_at).
    fn read_to_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_exact_at(offset, &mut buf)?;
        Ok(buf)
    }

    /// The `len` bytes at `offset` where they already are in memory (a file mapped by
    /// [`Env::new_mapped_file`]), borrowed: no system call and no copy. `None` when the
    /// file is not mapped or the mapping does not cover them; the caller then reads them with
    /// [`read_exact_at`](Self::read_exact_at). The default is always `None`.
    ///
    /// An implementation returns exactly `len` bytes (strata reads a slice of another length
    /// as `None`), and they must stay valid and unchanged as long as the file handle lives:
    /// a block of a table stored uncompressed keeps the handle and reads them in place.
    fn mapped(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let _ = (offset, len);
        None
    }

    /// A hint that the bytes at `offset..offset + len` have been read and copied, and will
    /// not be read again soon: a file mapped into memory may take the pages that lie wholly
    /// inside that range out of the process's resident memory. Their bytes stay what they
    /// were (borrowed slices stay valid; the next read maps the pages again, from the page
    /// cache). It reports nothing. A table calls it once opened, for its index, filter and
    /// footer, which it holds copied. The default does nothing.
    fn release_resident(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
}

/// A file written by appending, as logs and tables are.
///
/// `append` may buffer; `flush` hands buffered bytes to the operating system (they then survive
/// a process crash); `sync` also makes them durable (they survive a power loss).
pub trait WritableFile: Send {
    /// Appends `data` at the end of the file.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system.
    fn flush(&mut self) -> Result<()>;
    /// Flushes, then makes the file's contents durable.
    fn sync(&mut self) -> Result<()>;

    /// A hint that the file will grow by about `bytes` past its end: the environment may
    /// allocate that space on the disk now, without changing the file's length, so that the
    /// appends that fill it do not allocate as they go. It reports nothing: a file system that
    /// cannot allocate ahead, or a disk without the room, leaves the appends to report any
    /// error, as they would without it. Space allocated and not written is given back when
    /// the file is dropped. The default does nothing.
    fn reserve(&mut self, bytes: u64) {
        let _ = bytes;
    }
}

/// A held lock on a database's `LOCK` file. The lock is released when this is dropped.
pub trait FileLock: Send + Sync + fmt::Debug {}

/// Everything strata needs from a file system.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use strata::{Env, MemEnv};
///
/// let env = MemEnv::new();
/// env.create_dir_all(Path::new("/db")).unwrap();
/// let mut f = env.new_writable_file(Path::new("/db/hello")).unwrap();
/// f.append(b"hello").unwrap();
/// f.sync().unwrap();
/// assert_eq!(env.file_size(Path::new("/db/hello")).unwrap(), 5);
/// ```
pub trait Env: Send + Sync + fmt::Debug {
    /// Opens an existing file for sequential reading.
    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn SequentialFile>>;

    /// Opens an existing file for positional reads.
    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;

    /// Opens an existing file for positional reads, for a file that is only ever appended to
    /// and never changed in place (a table, a blob file). An environment may map
    /// it into memory (as far as it extends when opened; reads past that go to the file).
    /// The default opens it as [`new_random_access_file`](Self::new_random_access_file) does.
    ///
    /// # Errors
    /// As [`new_random_access_file`](Self::new_random_access_file).
    fn new_mapped_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.new_random_access_file(path)
    }

    /// Creates a file for appending, truncating it if it exists.
    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>>;

    /// Opens a file for appending at its end, creating it if it does not exist.
    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>>;

    /// Creates a write-ahead log, truncating it if it exists: a file appended to in small
    /// records, each handed to the operating system as it is written (`flush` after each).
    ///
    /// An environment may write it through a shared mapping of space it allocates ahead, so
    /// that a record costs a copy and no system call. While the file is open, and after a
    /// crash, its end may then be zero-filled space the log reader passes over; it is cut off
    /// when the file is dropped. The default creates it as
    /// [`new_writable_file`](Self::new_writable_file) does.
    ///
    /// # Errors
    /// As [`new_writable_file`](Self::new_writable_file).
    fn new_log_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.new_writable_file(path)
    }

    /// True if `path` names an existing file or directory.
    fn exists(&self, path: &Path) -> bool;

    /// The names (not paths) of the entries of directory `dir`. Names that are not UTF-8 are
    /// left out: no file strata writes has one.
    fn children(&self, dir: &Path) -> Result<Vec<String>>;

    /// The size of a file in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;

    /// Removes a file.
    fn remove_file(&self, path: &Path) -> Result<()>;

    /// Creates a directory and its missing parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;

    /// Removes an empty directory.
    fn remove_dir(&self, path: &Path) -> Result<()>;

    /// Renames a file, replacing `to` if it exists. Atomic on POSIX file systems.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;

    /// Makes `to` name the contents of the existing file `from`: a hard link where the file
    /// system allows one, a copy (synced) otherwise. Used for files that never change once
    /// written (tables, blob files), so either way `to` reads as `from` does. The directory
    /// entry of `to` is durable only once its directory is synced.
    ///
    /// The default copies, through this env's own files ([`copy_file`]).
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) naming the path: `from` does not exist, `to` exists
    /// already (kind `AlreadyExists`), or the link or copy failed (a partial copy is removed).
    /// # Example
    ///
    /// ```
    /// use std::path::Path;
    /// use strata::{Env, MemEnv};
    /// let env = MemEnv::new();
    /// strata::env::write_file(&env, Path::new("/a"), b"table", true)?;
    /// env.link_file(Path::new("/a"), Path::new("/b"))?;
    /// assert_eq!(strata::env::read_file_to_vec(&env, Path::new("/b"))?, b"table");
    /// assert!(env.link_file(Path::new("/a"), Path::new("/b")).is_err()); // `to` exists
    /// # Ok::<(), strata::Error>(())
    /// ```
    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        copy_file(self, from, to)
    }

    /// Makes the entries of directory `dir` (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;

    /// Takes an exclusive lock on `path`, creating the file if needed.
    ///
    /// # Errors
    /// [`Error::Locked`](crate::Error::Locked) if any other handle, in this process or another,
    /// holds it.
    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>>;

    /// How many files a database may keep open through this env, if the env has a limit (the
    /// process's open-file limit, for example). A database keeps its table cache within both
    /// this and [`Options::max_open_files`](crate::Options::max_open_files). Default: no limit.
    fn open_files_limit(&self) -> Option<usize> {
        None
    }

    /// Takes a shared lock on the existing file `path`, without writing anything: shared locks
    /// coexist, but exclude an exclusive one. Read-only opens use it.
    ///
    /// The default takes the exclusive lock, which is stricter but correct.
    ///
    /// # Errors
    /// [`Error::Locked`](crate::Error::Locked) if an exclusive lock is held elsewhere.
    fn lock_file_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.lock_file(path)
    }
}

/// Reads a whole file through `env`.
pub fn read_file_to_vec(env: &dyn Env, path: &Path) -> Result<Vec<u8>> {
    let mut file = env.new_sequential_file(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Copies the file `from` to a new file `to` through `env`, and syncs the copy: what
/// [`Env::link_file`] does where it cannot link. Refuses a `to` that exists; removes a partial
/// copy when reading or writing fails.
///
/// # Errors
/// [`Error::Io`](crate::Error::Io) naming the path: `to` exists (kind `AlreadyExists`),
/// `from` cannot be read, or `to` cannot be written or synced.
/// # Example
///
/// ```
/// use std::path::Path;
/// use strata::{Env, MemEnv};
/// let env = MemEnv::new();
/// strata::env::write_file(&env, Path::new("/a"), b"bytes", true)?;
/// strata::env::copy_file(&env, Path::new("/a"), Path::new("/b"))?;
/// assert_eq!(env.file_size(Path::new("/b"))?, 5);
/// # Ok::<(), strata::Error>(())
/// ```
pub fn copy_file<E: Env + ?Sized>(env: &E, from: &Path, to: &Path) -> Result<()> {
    if env.exists(to) {
        let exists = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
        return Err(crate::error::Error::io(to, "copy to", exists));
    }
    let mut source = env.new_sequential_file(from)?;
    let mut copy = env.new_writable_file(to)?;
    let mut buf = vec![0u8; 64 * 1024];
    let copied = loop {
        match source.read(&mut buf) {
            Ok(0) => break copy.sync(),
            Ok(n) => {
                if let Err(e) = copy.append(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) => break Err(e),
        }
    };
    if copied.is_err() {
        drop(copy);
        let _ = env.remove_file(to);
    }
    copied
}

/// Writes `data` to a new file at `path` through `env`, syncing it if `sync`.
pub fn write_file(env: &dyn Env, path: &Path, data: &[u8], sync: bool) -> Result<()> {
    let mut file = env.new_writable_file(path)?;
    file.append(data)?;
    if sync {
        file.sync()
    } else {
        file.flush()
    }
}

#[cfg(test)]
mod contract_tests;
