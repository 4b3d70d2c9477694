// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`PosixEnv`]: the real file system.
//!
//! Reads use `pread` (through `FileExt::read_at`), so one open table serves every thread without
//! a lock; tables and blob files are mapped (`new_mapped_file`). Writable files buffer appends
//! in user space and hand them to the kernel on `flush`; `sync` is `fdatasync`. Write-ahead
//! logs are written through a shared mapping of space allocated ahead (Linux; `mapped_log`),
//! with no system call per record. Locks are `fcntl` write locks over the whole file, the kind
//! LevelDB takes, so LevelDB and strata keep each other out. On Linux they are
//! open-file-description locks (`F_OFD_SETLK`), which conflict with LevelDB's `F_SETLK` locks
//! but, unlike them, are not released when some unrelated descriptor of the same file is closed.
//!
//! Fail-stop: once a write or sync of a writable file fails, the file is never written again,
//! by any method and not at drop. After a failed `write` the file may hold any prefix of what
//! was handed to it; after a failed `fdatasync` the kernel may have dropped the dirty pages.
//! Writing the buffer again would put a second copy of bytes after a torn first one.
//!
//! [`IoFaults`] injects failures into the system calls themselves, below the write buffer, so
//! that tests exercise exactly this code under a full or failing disk.

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::{Env, FileLock, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

/// The operating system's file system.
///
/// # Example
///
/// ```
/// use strata::{Env, PosixEnv};
/// let dir = tempfile::tempdir().unwrap();
/// let env = PosixEnv::new();
/// let path = dir.path().join("f");
/// let mut f = env.new_writable_file(&path).unwrap();
/// f.append(b"abc").unwrap();
/// f.sync().unwrap();
/// assert_eq!(env.file_size(&path).unwrap(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct PosixEnv {
    /// Failures to inject into the system calls that write (tests only; `None` in use).
    faults: Option<Arc<dyn IoFaults>>,
    /// Write-ahead logs are written with `write` calls, as LevelDB writes them, instead of
    /// through a mapping ([`PosixEnv::with_log_write_calls`]).
    log_write_calls: bool,
}

impl PosixEnv {
    /// The POSIX environment.
    pub fn new() -> Self {
        PosixEnv {
            faults: None,
            log_write_calls: false,
        }
    }

    /// This environment, writing write-ahead logs ([`Env::new_log_file`]) with a `write`
    /// system call per record, as LevelDB does, instead of through a shared mapping.
    ///
    /// A mapped log costs a copy per record and no system call; a crash cannot lose more of
    /// it than of a written one (the mapping is the page cache). Its cost is the one every
    /// writable mapping has: if the disk fails to read back a page of the log being written
    /// (an I/O error, not a full disk, which the mapped log meets when it allocates), the
    /// process gets `SIGBUS`, where a `write` would have returned an error.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata::{Db, Options, PosixEnv};
    /// let dir = tempfile::tempdir().unwrap();
    /// let env = PosixEnv::new().with_log_write_calls();
    /// let options = Options { create_if_missing: true, ..Options::default() }.with_env(Arc::new(env));
    /// let db = Db::open(dir.path(), options).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// ```
    pub fn with_log_write_calls(mut self) -> Self {
        self.log_write_calls = true;
        self
    }

    /// The POSIX environment, shared.
    pub fn shared() -> Arc<dyn Env> {
        Arc::new(PosixEnv::new())
    }

    /// The POSIX environment with failures injected by `faults` into the system calls that
    /// write files (`write`, a mapped log's `fallocate`, `fdatasync`, the directory's `fsync`),
    /// below the write buffer: the real code paths meet an error exactly as they would on a
    /// full or failing disk.
    ///
    /// # Example
    ///
    /// ```
    /// use std::io;
    /// use std::path::Path;
    /// use std::sync::Arc;
    /// use strata::{Env, IoFaults, PosixEnv};
    ///
    /// /// A disk with room for 10 more bytes.
    /// #[derive(Debug)]
    /// struct TenBytesLeft;
    /// impl IoFaults for TenBytesLeft {
    ///     fn before_write(&self, _path: &Path, len: usize) -> Option<(usize, io::Error)> {
    ///         (len > 10).then(|| (10, io::Error::from_raw_os_error(28))) // ENOSPC
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let env = PosixEnv::with_faults(Arc::new(TenBytesLeft));
    /// let path = dir.path().join("f");
    /// let mut f = env.new_writable_file(&path).unwrap();
    /// f.append(&[7; 100]).unwrap(); // buffered
    /// assert!(f.flush().is_err());
    /// assert!(f.flush().is_err()); // the file failed: it is never written again
    /// drop(f);
    /// assert_eq!(env.file_size(&path).unwrap(), 10);
    /// ```
    pub fn with_faults(faults: Arc<dyn IoFaults>) -> Self {
        PosixEnv {
            faults: Some(faults),
            log_write_calls: false,
        }
    }
}

impl Default for PosixEnv {
    fn default() -> Self {
        PosixEnv::new()
    }
}

/// Failures to inject into [`PosixEnv`]'s system calls, for tests of what a full or failing
/// disk does to a database (see [`PosixEnv::with_faults`]). Each method is asked before the
/// call it names; `None` lets the call run. The defaults inject nothing.
pub trait IoFaults: Send + Sync + fmt::Debug {
    /// Before `len` bytes are written to `path`: `Some((n, error))` writes only the first `n`
    /// bytes (`n < len`; a full disk stops at a page boundary, say), then fails with `error`.
    fn before_write(&self, path: &Path, len: usize) -> Option<(usize, io::Error)> {
        let _ = (path, len);
        None
    }

    /// Before `len` bytes of space are allocated at the end of `path` (`fallocate`, which a
    /// mapped log calls before it stores into the space): `Some(error)` fails it, allocating
    /// nothing. The default fails it as [`before_write`](Self::before_write) would fail a
    /// write of `len` bytes: on a full disk, both are refused.
    fn before_allocate(&self, path: &Path, len: usize) -> Option<io::Error> {
        self.before_write(path, len).map(|(_, e)| e)
    }

    /// Before `fdatasync` of the file `path`: `Some(error)` fails it without syncing.
    fn before_sync(&self, path: &Path) -> Option<io::Error> {
        let _ = path;
        None
    }

    /// Before `fsync` of directory `dir`: `Some(error)` fails it without syncing.
    fn before_sync_dir(&self, dir: &Path) -> Option<io::Error> {
        let _ = dir;
        None
    }
}

/// The size of a writable file's buffer, and the alignment of the writes it makes: when an
/// append would overflow the buffer, the buffer is written through the next multiple of this
/// many bytes of the file, so that a stream of small appends (a table's blocks) is written in
/// whole aligned 64 KiB, and a writer that flushes after each record (a blob file) still
/// makes one write per flush (after a `flush` or a large append left the file's end between
/// two multiples, the next overflowing write reaches the next one). The kernel's page cache
/// takes an aligned write in large folios: on this host's ext4, sequential writes of 65,536
/// bytes took 211-216 µs per MiB, of 65,000 bytes 277-288, of 4,000 bytes 488-492
/// (`scripts/page-cache/write_sizes.c`; docs/benchmarks.md, section (30)).
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

struct PosixSequentialFile {
    path: PathBuf,
    file: File,
}

impl SequentialFile for PosixSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        loop {
            match self.file.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, "read", e)),
            }
        }
    }

    fn skip(&mut self, n: u64) -> Result<()> {
        let n = i64::try_from(n).map_err(|_| {
            Error::io(
                &self.path,
                "seek",
                io::Error::from(io::ErrorKind::InvalidInput),
            )
        })?;
        self.file
            .seek(SeekFrom::Current(n))
            .map(|_| ())
            .map_err(|e| Error::io(&self.path, "seek", e))
    }
}

/// The system's page size, which `madvise` ranges are whole multiples of (4 KiB where
/// `sysconf` cannot tell, which on a kernel of larger pages only makes the release fail and
/// the pages stay mapped).
pub(super) fn page_bytes() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| n.is_power_of_two())
            .unwrap_or(4096)
    })
}

struct PosixRandomAccessFile {
    path: PathBuf,
    file: File,
    /// The file's bytes as far as it extended when opened (`new_mapped_file` only).
    map: Option<memmap2::Mmap>,
}

impl RandomAccessFile for PosixRandomAccessFile {
    #[inline]
    fn mapped(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let map = self.map.as_ref()?;
        let start = usize::try_from(offset).ok()?;
        map.get(start..start.checked_add(len)?)
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if let Some(bytes) = self.mapped(offset, buf.len()) {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(&self.path, "read", e))
    }

    fn read_to_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        // One copy out of the page cache, with no system call and no zeroing first.
        if let Some(bytes) = self.mapped(offset, len) {
            return Ok(bytes.to_vec());
        }
        let mut buf = vec![0u8; len];
        self.read_exact_at(offset, &mut buf)?;
        Ok(buf)
    }

    #[allow(unsafe_code)]
    fn release_resident(&self, offset: u64, len: u64) {
        let Some(map) = self.map.as_ref() else { return };
        let page = page_bytes();
        // Whole pages only: the first page the range starts in may hold bytes before it. The
        // mapping's last page, which the file ends inside, holds nothing past the range.
        let Ok(start) = usize::try_from(offset) else {
            return;
        };
        let Some(start) = start.checked_next_multiple_of(page) else {
            return;
        };
        let end = usize::try_from(offset.saturating_add(len)).unwrap_or(usize::MAX);
        let end = if end >= map.len() {
            map.len()
        } else {
            end - end % page
        };
        if start >= end {
            return;
        }
        // SAFETY: `start` is a page boundary and `start < end <= map.len()`, so the range is
        // whole pages of this mapping (an end not on a page boundary is the mapping's own end,
        // whose last page the kernel mapped whole). The mapping is a read-only file mapping
        // of a file never written again (`new_mapped_file`): `MADV_DONTNEED` only takes its
        // pages out of this process's page tables; a later access maps them again with the
        // same bytes, so a slice borrowed from the mapping still reads what it read before.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// A writable file's fail-stop state: the first failed write or sync. Once set, nothing is
/// written to the file again.
#[derive(Default)]
pub(super) struct FailStop {
    failed: Option<Arc<io::Error>>,
}

impl FailStop {
    pub(super) fn failed(&self) -> bool {
        self.failed.is_some()
    }

    /// The error for any call after the file failed.
    pub(super) fn check(&self, path: &Path, op: &'static str) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(first) => Err(Error::io(
                path,
                op,
                io::Error::new(
                    first.kind(),
                    format!(
                        "an earlier write or sync failed ({first}); the file is not written again"
                    ),
                ),
            )),
        }
    }

    /// Remembers `e` as the file's failure and reports it.
    pub(super) fn fail(&mut self, path: &Path, op: &'static str, e: io::Error) -> Error {
        let e = Arc::new(e);
        self.failed = Some(e.clone());
        Error::Io {
            path: path.to_path_buf(),
            op,
            source: e,
        }
    }
}

/// `fdatasync` of `file`, with an injected fault.
pub(super) fn sync_data(
    file: &File,
    path: &Path,
    faults: Option<&Arc<dyn IoFaults>>,
) -> io::Result<()> {
    match faults.and_then(|f| f.before_sync(path)) {
        None => file.sync_data(),
        Some(e) => Err(e),
    }
}

/// A file written by `write` calls through a buffer.
///
/// Invariant: the file holds the first `len - buffer.len()` bytes appended, and `buffer` the
/// rest. If `reserved`, space past the file's length may be allocated on the disk
/// ([`WritableFile::reserve`]); dropping the file gives it back.
struct PosixWritableFile {
    path: PathBuf,
    file: File,
    buffer: Vec<u8>,
    len: u64,
    reserved: bool,
    faults: Option<Arc<dyn IoFaults>>,
    failure: FailStop,
}

impl PosixWritableFile {
    /// A writer appending to `file`, which holds `len` bytes.
    fn new(path: &Path, file: File, len: u64, faults: Option<Arc<dyn IoFaults>>) -> Self {
        PosixWritableFile {
            path: path.to_path_buf(),
            file,
            buffer: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len,
            reserved: false,
            faults,
            failure: FailStop::default(),
        }
    }

    /// Writes `first`, then `second`, in as few system calls as the kernel allows (one
    /// `writev` for both, as a rule). A fault injected here cuts the pair where it says.
    fn write_raw(&mut self, first: &[u8], second: &[u8]) -> Result<()> {
        let total = first.len() + second.len();
        let (limit, injected) = match self
            .faults
            .as_ref()
            .and_then(|f| f.before_write(&self.path, total))
        {
            None => (total, None),
            Some((written, e)) => (written.min(total), Some(e)),
        };
        let mut slices = [
            io::IoSlice::new(&first[..limit.min(first.len())]),
            io::IoSlice::new(&second[..limit.saturating_sub(first.len())]),
        ];
        let result = write_all_vectored(&mut self.file, &mut slices)
            .and_then(|()| injected.map_or(Ok(()), Err));
        result.map_err(|e| self.failure.fail(&self.path, "write", e))
    }

    fn write_buffered(&mut self) -> Result<()> {
        self.write_buffered_then(&[])
    }

    /// Writes the buffered bytes, then `data`, and empties the buffer.
    fn write_buffered_then(&mut self, data: &[u8]) -> Result<()> {
        self.write_buffered_through(self.buffer.len(), data)
    }

    /// Writes the first `n` buffered bytes, then `data`, and drops those `n` from the buffer.
    fn write_buffered_through(&mut self, n: usize, data: &[u8]) -> Result<()> {
        if n == 0 && data.is_empty() {
            return Ok(());
        }
        let buffer = std::mem::take(&mut self.buffer);
        let result = self.write_raw(&buffer[..n], data);
        self.buffer = buffer;
        result?;
        self.buffer.drain(..n);
        Ok(())
    }
}

/// `write_all` for a list of slices (`Write::write_all_vectored` is not stable): `writev`
/// until every byte is written, retrying on `EINTR`.
fn write_all_vectored(file: &mut File, mut slices: &mut [io::IoSlice<'_>]) -> io::Result<()> {
    // Drops the empty slices in front, so that nothing left to write is an empty list.
    io::IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => io::IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl WritableFile for PosixWritableFile {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        self.failure.check(&self.path, "write")?;
        const CAP: u64 = WRITE_BUFFER_BYTES as u64;
        loop {
            if self.buffer.len() + data.len() <= WRITE_BUFFER_BYTES {
                self.buffer.extend_from_slice(data);
                self.len += data.len() as u64;
                return Ok(());
            }
            if data.len() >= WRITE_BUFFER_BYTES {
                // A large append (a blob file's value, which its writer flushes next) goes
                // out whole with what is buffered before it, in one call.
                self.write_buffered_then(data)?;
                self.len += data.len() as u64;
                return Ok(());
            }
            // The buffer would overflow: it is written through the first multiple of 64 KiB
            // after its start. When the buffer started on a multiple (a table's stream of
            // blocks, from its start), that is the buffer and the head of `data`; when it
            // started between two (after a `flush`) and already holds that multiple, it is
            // the buffer's bytes before the multiple, the rest moved to its front.
            let start = self.len - self.buffer.len() as u64;
            let boundary = (start / CAP + 1) * CAP;
            if self.len <= boundary {
                // At most `CAP - buffer.len() < data.len()` bytes.
                let head = (boundary - self.len) as usize;
                self.write_buffered_then(&data[..head])?;
                self.len += head as u64;
                data = &data[head..];
            } else {
                self.write_buffered_through((boundary - start) as usize, &[])?;
            }
        }
    }

    /// `fallocate` with `FALLOC_FL_KEEP_SIZE` from the file's end (its length counts the
    /// buffered bytes): the blocks are the file's, past its length, so that a crash leaves the
    /// file as long as what was written, and the `write` calls that fill them skip the
    /// delayed allocation of each page (a 100 KB append into allocated space took about 0.85
    /// of the time; see docs/benchmarks.md). Linux only, as the mapped log's allocation is.
    #[cfg(target_os = "linux")]
    fn reserve(&mut self, bytes: u64) {
        use std::os::fd::AsRawFd;
        if self.failure.failed() || bytes == 0 {
            return;
        }
        let Ok(len) = usize::try_from(bytes) else {
            return;
        };
        if let Some(faults) = &self.faults {
            if faults.before_allocate(&self.path, len).is_some() {
                return;
            }
        }
        let (Ok(offset), Ok(len)) = (i64::try_from(self.len), i64::try_from(bytes)) else {
            return;
        };
        let allocated = nix::fcntl::fallocate(
            self.file.as_raw_fd(),
            nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        );
        self.reserved |= allocated.is_ok();
    }

    fn flush(&mut self) -> Result<()> {
        self.failure.check(&self.path, "write")?;
        self.write_buffered()
    }

    fn sync(&mut self) -> Result<()> {
        self.failure.check(&self.path, "sync")?;
        self.write_buffered()?;
        sync_data(&self.file, &self.path, self.faults.as_ref())
            .map_err(|e| self.failure.fail(&self.path, "sync", e))
    }
}

impl Drop for PosixWritableFile {
    fn drop(&mut self) {
        // Best effort, and never after a failure: a caller that cares about errors calls
        // flush or sync first.
        if !self.failure.failed() && self.write_buffered().is_ok() && self.reserved {
            // Cutting the file at its own length (as the file system has it: this changes no
            // byte) frees the blocks reserved past it.
            if let Ok(meta) = self.file.metadata() {
                let _ = self.file.set_len(meta.len());
            }
        }
    }
}

/// Paths locked by this process. OFD locks already conflict within one process; the set also
/// covers platforms that only have classic `fcntl` locks, which do not.
fn locked_paths() -> &'static Mutex<HashSet<PathBuf>> {
    static LOCKED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    LOCKED.get_or_init(Default::default)
}

#[derive(Debug)]
struct PosixFileLock {
    /// The path registered in `locked_paths` (exclusive locks only).
    path: Option<PathBuf>,
    // Dropping the file releases the lock, since the lock belongs to this open file description.
    _file: File,
}

impl FileLock for PosixFileLock {}

impl Drop for PosixFileLock {
    fn drop(&mut self) {
        // Unlocked explicitly, not only by closing the file: an open-file-description lock
        // lasts while any descriptor of the description is open, and a child another thread
        // of this process is forking holds a copy of this one until it execs. Closing alone
        // left the database locked for that long (a reopen in this process failed with
        // `Error::Locked` under load); an unlock through any descriptor ends the lock.
        let _ = fcntl_unlock(&self._file);
        if let Some(path) = &self.path {
            locked_paths()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(path);
        }
    }
}

fn fcntl_lock(file: &File, exclusive: bool) -> io::Result<()> {
    let kind = if exclusive {
        nix::libc::F_WRLCK
    } else {
        nix::libc::F_RDLCK
    };
    fcntl_set(file, kind)
}

/// Releases the lock `fcntl_lock` took on `file`'s open file description.
fn fcntl_unlock(file: &File) -> io::Result<()> {
    fcntl_set(file, nix::libc::F_UNLCK)
}

/// Sets a whole-file lock of `kind` (`F_WRLCK`, `F_RDLCK` or `F_UNLCK`): an
/// open-file-description lock where the platform has them, a classic `fcntl` lock otherwise.
fn fcntl_set(file: &File, kind: i32) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg};
    use nix::libc;
    use std::os::fd::AsRawFd;

    let lock = libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let arg = FcntlArg::F_OFD_SETLK(&lock);
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let arg = FcntlArg::F_SETLK(&lock);
    fcntl(file.as_raw_fd(), arg)
        .map(|_| ())
        .map_err(io::Error::from)
}

/// True if a failed `link(2)` means "no hard link here" rather than a failure a copy would
/// meet too: `EXDEV` (another device), `EPERM` (a file system without links), `EMLINK` (too
/// many links), `EOPNOTSUPP`.
pub(super) fn link_needs_copy(e: &io::Error) -> bool {
    const EPERM: i32 = 1;
    const EXDEV: i32 = 18;
    const EMLINK: i32 = 31;
    const EOPNOTSUPP: i32 = 95;
    matches!(e.raw_os_error(), Some(EPERM | EXDEV | EMLINK | EOPNOTSUPP))
        || e.kind() == io::ErrorKind::Unsupported
}

/// Creates `path` for writing (and reading, if `read`), truncating it if it exists.
pub(super) fn create_truncated(path: &Path, read: bool) -> Result<File> {
    OpenOptions::new()
        .read(read)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(path)
        .map_err(io_err(path, "create"))
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> Error + 'a {
    move |e| Error::io(path, op, e)
}

impl Env for PosixEnv {
    /// Half the process's soft limit on open files (`RLIMIT_NOFILE`), leaving the rest to the
    /// program and to the database's logs and MANIFEST.
    fn open_files_limit(&self) -> Option<usize> {
        let (soft, _hard) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok()?;
        usize::try_from(soft / 2).ok()
    }

    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let file = File::open(path).map_err(io_err(path, "open"))?;
        Ok(Box::new(PosixSequentialFile {
            path: path.to_path_buf(),
            file,
        }))
    }

    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(io_err(path, "open"))?;
        Ok(Arc::new(PosixRandomAccessFile {
            path: path.to_path_buf(),
            file,
            map: None,
        }))
    }

    // Mapping is the one `unsafe` call here: it saves a system call, the kernel's copy and a
    // zeroed buffer per table block or blob value read (docs/benchmarks.md, "Key-value
    // separation", "Mapped tables").
    #[allow(unsafe_code)]
    fn new_mapped_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(io_err(path, "open"))?;
        let len = file.metadata().map_err(io_err(path, "stat"))?.len();
        // An empty file cannot be mapped; one too large for the address space is read.
        let map = if len == 0 || usize::try_from(len).is_err() {
            None
        } else {
            // SAFETY: the mapping is read-only and private to this file handle. The bytes it
            // covers are never written again: strata never changes a finished table, only
            // appends to a blob file, never truncates either, and deletes a file only when no
            // reader holds it (the mapping keeps the inode). Another process changing the file
            // would break that, as it would break any reader; the database's lock file keeps
            // other strata processes out (docs/unsafe.md says what a truncation by anyone else
            // does). Borrowed bytes (`RandomAccessFile::mapped`) live no longer than `&self`,
            // so none outlives the mapping.
            Some(unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(io_err(path, "mmap"))?)
        };
        Ok(Arc::new(PosixRandomAccessFile {
            path: path.to_path_buf(),
            file,
            map,
        }))
    }

    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = create_truncated(path, false)?;
        Ok(Box::new(PosixWritableFile::new(
            path,
            file,
            0,
            self.faults.clone(),
        )))
    }

    /// A log written through a shared mapping (see [`PosixEnv::with_log_write_calls`]),
    /// where the file system can allocate space ahead; otherwise, and with
    /// `with_log_write_calls`, a file written with `write` calls.
    fn new_log_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        #[cfg(target_os = "linux")]
        if !self.log_write_calls {
            if let Some(log) = super::mapped_log::MappedLogFile::create(path, self.faults.clone())?
            {
                return Ok(Box::new(log));
            }
        }
        self.new_writable_file(path)
    }

    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o644)
            .open(path)
            .map_err(io_err(path, "open for append"))?;
        let len = file
            .metadata()
            .map_err(io_err(path, "stat for append"))?
            .len();
        Ok(Box::new(PosixWritableFile::new(
            path,
            file,
            len,
            self.faults.clone(),
        )))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn children(&self, dir: &Path) -> Result<Vec<String>> {
        let entries = fs::read_dir(dir).map_err(io_err(dir, "list"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err(dir, "list"))?;
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        fs::metadata(path)
            .map(|m| m.len())
            .map_err(io_err(path, "stat"))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(io_err(path, "remove"))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        fs::create_dir_all(path).map_err(io_err(path, "create directory"))
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        fs::remove_dir(path).map_err(io_err(path, "remove directory"))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(io_err(from, "rename"))
    }

    /// `link(2)`; where the file system refuses a hard link (`to` on another device, or no
    /// links supported), a synced copy ([`copy_file`](super::copy_file)).
    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        match fs::hard_link(from, to) {
            Ok(()) => Ok(()),
            Err(e) if link_needs_copy(&e) => super::copy_file(self, from, to),
            Err(e) => Err(Error::io(from, "link", e)),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let d = File::open(dir).map_err(io_err(dir, "open directory"))?;
        if let Some(e) = self.faults.as_ref().and_then(|f| f.before_sync_dir(dir)) {
            return Err(Error::io(dir, "sync directory", e));
        }
        d.sync_all().map_err(io_err(dir, "sync directory"))
    }

    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.lock(path, true)
    }

    fn lock_file_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.lock(path, false)
    }
}

impl PosixEnv {
    /// Takes an `fcntl` lock on `path`: exclusive (creating the file) or shared (opening the
    /// existing file read-only, so that read-only media work).
    fn lock(&self, path: &Path, exclusive: bool) -> Result<Box<dyn FileLock>> {
        let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let mut locked = locked_paths().lock().unwrap_or_else(|e| e.into_inner());
        // This process's own exclusive holders; shared holders are not tracked here, since
        // open-file-description locks already make them exclude an exclusive lock.
        if locked.contains(&key) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        let file = if exclusive {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .open(path)
        } else {
            File::open(path)
        }
        .map_err(io_err(path, "open lock file"))?;
        match fcntl_lock(&file, exclusive) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(nix::libc::EAGAIN) | Some(nix::libc::EACCES)
                ) =>
            {
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                })
            }
            Err(e) => return Err(Error::io(path, "lock", e)),
        }
        // Canonicalize again now that the file exists, so that every spelling of the path maps
        // to one entry.
        let key = path.canonicalize().unwrap_or(key);
        if exclusive {
            locked.insert(key.clone());
        }
        Ok(Box::new(PosixFileLock {
            path: exclusive.then_some(key),
            _file: file,
        }))
    }
}
