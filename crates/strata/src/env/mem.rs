// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`MemEnv`]: an in-memory file system that can simulate a crash.
//!
//! The model keeps two views of the namespace:
//! - the *live* view, what a running process sees;
//! - the *durable* view, what a crash would leave: a directory's entries become durable only
//!   when that directory is synced.
//!
//! Each file's content is shared by both views and remembers how many of its bytes were synced.
//! [`MemEnv::crash`] replaces the live view by what survives, per [`CrashMode`]. Handles opened
//! before a crash keep writing into files nobody can see any more, as a dead process would.
//!
//! Locking: one mutex guards the namespace; each file has its own mutex for its bytes. A
//! reader-writer lock, the *write gate*, is held shared by every change to a file's bytes and
//! exclusively by a crash copy, so that a crash image is one instant across all files, as a
//! real crash is (copying files one at a time while writers went on could show a later write
//! to one file without an earlier write to another). Order: write gate, then namespace, then
//! a file's lock, never the other way round.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use super::{Env, FileLock, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct FileData {
    bytes: Vec<u8>,
    /// Invariant: `synced_len <= bytes.len()`. Bytes before it survive a crash.
    synced_len: usize,
}

type Node = Arc<Mutex<FileData>>;

fn lock_node(node: &Node) -> MutexGuard<'_, FileData> {
    node.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug, Default)]
struct Namespace {
    live: BTreeMap<PathBuf, Node>,
    durable: BTreeMap<PathBuf, Node>,
    /// Directories are created durably; crashes do not remove them.
    dirs: BTreeSet<PathBuf>,
    /// Held exclusive locks, each with the id of the handle that holds it.
    locks: HashMap<PathBuf, u64>,
    /// Held shared locks: the ids of their handles, per path.
    shared_locks: HashMap<PathBuf, Vec<u64>>,
    next_lock_id: u64,
}

/// How much a simulated crash loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashMode {
    /// Forget bytes appended after a file's last sync.
    pub drop_unsynced_data: bool,
    /// Undo file creations, renames and removals in directories not synced since.
    pub undo_unsynced_dir_ops: bool,
}

impl CrashMode {
    /// A power loss on a file system that persists nothing it was not told to: the harshest
    /// crash POSIX allows.
    pub const POWER_LOSS: CrashMode = CrashMode {
        drop_unsynced_data: true,
        undo_unsynced_dir_ops: true,
    };
    /// The process dies; the operating system keeps everything it was handed.
    pub const PROCESS_KILL: CrashMode = CrashMode {
        drop_unsynced_data: false,
        undo_unsynced_dir_ops: false,
    };
}

/// Chooses what survives of a file in a crash: given its path, its bytes and how many of them
/// were synced, returns the bytes left. See [`MemEnv::crash_clone_with`].
pub type Survivor<'a> = dyn FnMut(&Path, &[u8], usize) -> Vec<u8> + 'a;

/// An in-memory [`Env`] for tests, with crash simulation.
///
/// Clones share the same file system.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use strata::{CrashMode, Env, MemEnv};
///
/// let env = MemEnv::new();
/// env.create_dir_all(Path::new("/d")).unwrap();
/// let mut f = env.new_writable_file(Path::new("/d/f")).unwrap();
/// f.append(b"synced").unwrap();
/// f.sync().unwrap();
/// env.sync_dir(Path::new("/d")).unwrap();
/// f.append(b" and lost").unwrap();
/// env.crash(CrashMode::POWER_LOSS);
/// assert_eq!(env.file_size(Path::new("/d/f")).unwrap(), 6);
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemEnv {
    ns: Arc<Mutex<Namespace>>,
    /// The write gate (see the module's locking notes), shared with every writable handle.
    write_gate: WriteGate,
}

/// Held shared while a file's bytes change, exclusively while a crash image is copied.
type WriteGate = Arc<RwLock<()>>;

fn pass_gate(gate: &WriteGate) -> RwLockReadGuard<'_, ()> {
    gate.read().unwrap_or_else(|e| e.into_inner())
}

fn not_found(path: &Path, op: &'static str) -> Error {
    Error::io(path, op, io::Error::from(io::ErrorKind::NotFound))
}

impl MemEnv {
    /// An empty file system whose root directory `/` exists.
    pub fn new() -> Self {
        let env = MemEnv::default();
        env.namespace().dirs.insert(PathBuf::from("/"));
        env
    }

    fn namespace(&self) -> MutexGuard<'_, Namespace> {
        self.ns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Simulates a crash: afterwards the file system holds only what `mode` says survives, and
    /// every lock is released.
    pub fn crash(&self, mode: CrashMode) {
        let survivor = self.crash_clone(mode);
        let fresh = std::mem::take(&mut *survivor.namespace());
        let mut ns = self.namespace();
        let next_lock_id = ns.next_lock_id;
        *ns = fresh;
        ns.next_lock_id = next_lock_id;
    }

    /// A deep copy of this file system's live view, sharing nothing with it.
    pub fn snapshot(&self) -> MemEnv {
        let copy = MemEnv::new();
        self.crash_copy_into(&copy, CrashMode::PROCESS_KILL);
        copy
    }

    /// A deep copy of what would survive a crash of `mode` now, leaving this one untouched.
    pub fn crash_clone(&self, mode: CrashMode) -> MemEnv {
        let copy = MemEnv::new();
        self.crash_copy_into(&copy, mode);
        copy
    }

    fn crash_copy_into(&self, copy: &MemEnv, mode: CrashMode) {
        self.crash_copy_with(
            copy,
            mode.undo_unsynced_dir_ops,
            &mut |_, bytes, synced_len| {
                let keep = if mode.drop_unsynced_data {
                    synced_len
                } else {
                    bytes.len()
                };
                bytes[..keep].to_vec()
            },
        );
    }

    /// A deep copy of what a crash now could leave, with each file's surviving bytes chosen by
    /// `survive(path, bytes, synced_len)`, which sees the file's bytes and how many of them
    /// were synced. Directory changes not made durable are undone if `undo_unsynced_dir_ops`.
    /// Tests use it to build crash states [`CrashMode`] does not describe: part of the unsynced
    /// bytes kept, a torn or garbled tail.
    ///
    /// # Example
    ///
    /// ```
    /// use std::path::Path;
    /// use strata::{Env, MemEnv};
    ///
    /// let env = MemEnv::new();
    /// env.create_dir_all(Path::new("/d")).unwrap();
    /// let mut f = env.new_writable_file(Path::new("/d/f")).unwrap();
    /// f.append(b"synced").unwrap();
    /// f.sync().unwrap();
    /// env.sync_dir(Path::new("/d")).unwrap();
    /// f.append(b" and half kept").unwrap();
    /// // Keep the synced bytes and half of the rest.
    /// let image = env.crash_clone_with(true, &mut |_path, bytes, synced| {
    ///     bytes[..synced + (bytes.len() - synced) / 2].to_vec()
    /// });
    /// assert_eq!(image.file_size(Path::new("/d/f")).unwrap(), 6 + 7);
    /// ```
    pub fn crash_clone_with(
        &self,
        undo_unsynced_dir_ops: bool,
        survive: &mut Survivor<'_>,
    ) -> MemEnv {
        let copy = MemEnv::new();
        self.crash_copy_with(&copy, undo_unsynced_dir_ops, survive);
        copy
    }

    fn crash_copy_with(
        &self,
        copy: &MemEnv,
        undo_unsynced_dir_ops: bool,
        survive: &mut Survivor<'_>,
    ) {
        // No file changes while the image is taken: it is one instant.
        let _writes_stopped = self.write_gate.write().unwrap_or_else(|e| e.into_inner());
        let ns = self.namespace();
        let mut out = copy.namespace();
        out.dirs = ns.dirs.clone();
        let source = if undo_unsynced_dir_ops {
            &ns.durable
        } else {
            &ns.live
        };
        for (path, node) in source {
            let data = lock_node(node);
            let bytes = survive(path, &data.bytes, data.synced_len);
            let node = Arc::new(Mutex::new(FileData {
                synced_len: bytes.len(),
                bytes,
            }));
            out.live.insert(path.clone(), node.clone());
            out.durable.insert(path.clone(), node);
        }
    }

    fn node(&self, path: &Path, op: &'static str) -> Result<Node> {
        self.namespace()
            .live
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(path, op))
    }

    fn check_parent(ns: &Namespace, path: &Path, op: &'static str) -> Result<()> {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() && !ns.dirs.contains(parent) => {
                Err(not_found(parent, op))
            }
            _ => Ok(()),
        }
    }
}

struct MemSequentialFile {
    node: Node,
    pos: usize,
}

impl SequentialFile for MemSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let data = lock_node(&self.node);
        let available = data.bytes.len().saturating_sub(self.pos);
        let n = available.min(buf.len());
        buf[..n].copy_from_slice(&data.bytes[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }

    fn skip(&mut self, n: u64) -> Result<()> {
        let len = lock_node(&self.node).bytes.len();
        self.pos = (self.pos as u64).saturating_add(n).min(len as u64) as usize;
        Ok(())
    }
}

struct MemRandomAccessFile {
    path: PathBuf,
    node: Node,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let data = lock_node(&self.node);
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(buf.len())
            .and_then(|end| data.bytes.get(start..end))
        {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::io(
                &self.path,
                "read",
                io::Error::from(io::ErrorKind::UnexpectedEof),
            )),
        }
    }
}

struct MemWritableFile {
    node: Node,
    write_gate: WriteGate,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let _gate = pass_gate(&self.write_gate);
        lock_node(&self.node).bytes.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let _gate = pass_gate(&self.write_gate);
        let mut data = lock_node(&self.node);
        data.synced_len = data.bytes.len();
        Ok(())
    }
}

#[derive(Debug)]
struct MemFileLock {
    ns: Arc<Mutex<Namespace>>,
    path: PathBuf,
    id: u64,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        let mut ns = self.ns.lock().unwrap_or_else(|e| e.into_inner());
        // A handle from before a crash must not release a lock taken after it.
        if ns.locks.get(&self.path) == Some(&self.id) {
            ns.locks.remove(&self.path);
        }
        if let Some(ids) = ns.shared_locks.get_mut(&self.path) {
            ids.retain(|&id| id != self.id);
            if ids.is_empty() {
                ns.shared_locks.remove(&self.path);
            }
        }
    }
}

impl Env for MemEnv {
    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        Ok(Box::new(MemSequentialFile {
            node: self.node(path, "open")?,
            pos: 0,
        }))
    }

    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(MemRandomAccessFile {
            path: path.to_path_buf(),
            node: self.node(path, "open")?,
        }))
    }

    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut ns = self.namespace();
        Self::check_parent(&ns, path, "create")?;
        if ns.dirs.contains(path) {
            return Err(Error::io(
                path,
                "create",
                io::Error::from(io::ErrorKind::IsADirectory),
            ));
        }
        // Truncation is a new file: the old bytes stay reachable from the durable view until
        // the directory is synced, as a rename-over would leave them.
        let node: Node = Arc::default();
        ns.live.insert(path.to_path_buf(), node.clone());
        Ok(Box::new(MemWritableFile {
            node,
            write_gate: self.write_gate.clone(),
        }))
    }

    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut ns = self.namespace();
        Self::check_parent(&ns, path, "open for append")?;
        let node = ns.live.entry(path.to_path_buf()).or_default().clone();
        Ok(Box::new(MemWritableFile {
            node,
            write_gate: self.write_gate.clone(),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        let ns = self.namespace();
        ns.live.contains_key(path) || ns.dirs.contains(path)
    }

    fn children(&self, dir: &Path) -> Result<Vec<String>> {
        let ns = self.namespace();
        if !ns.dirs.contains(dir) {
            return Err(not_found(dir, "list"));
        }
        let files = ns.live.keys();
        let dirs = ns.dirs.iter();
        Ok(files
            .chain(dirs)
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(lock_node(&self.node(path, "stat")?).bytes.len() as u64)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.namespace()
            .live
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path, "remove"))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut ns = self.namespace();
        for ancestor in path.ancestors() {
            if ancestor.as_os_str().is_empty() {
                continue;
            }
            if ns.live.contains_key(ancestor) {
                return Err(Error::io(
                    ancestor,
                    "create directory",
                    io::Error::from(io::ErrorKind::AlreadyExists),
                ));
            }
            ns.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        let mut ns = self.namespace();
        if !ns.dirs.contains(path) {
            return Err(not_found(path, "remove directory"));
        }
        let occupied = ns.live.keys().any(|p| p.parent() == Some(path))
            || ns.dirs.iter().any(|p| p.parent() == Some(path));
        if occupied {
            return Err(Error::io(
                path,
                "remove directory",
                io::Error::from(io::ErrorKind::DirectoryNotEmpty),
            ));
        }
        ns.dirs.remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut ns = self.namespace();
        Self::check_parent(&ns, to, "rename")?;
        let node = ns
            .live
            .remove(from)
            .ok_or_else(|| not_found(from, "rename"))?;
        ns.live.insert(to.to_path_buf(), node);
        Ok(())
    }

    /// A true hard link: `to` shares `from`'s bytes and what of them is synced, as two names
    /// of one inode do.
    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        let mut ns = self.namespace();
        Self::check_parent(&ns, to, "link")?;
        if ns.live.contains_key(to) || ns.dirs.contains(to) {
            let exists = io::Error::from(io::ErrorKind::AlreadyExists);
            return Err(Error::io(to, "link", exists));
        }
        let node = ns
            .live
            .get(from)
            .cloned()
            .ok_or_else(|| not_found(from, "link"))?;
        ns.live.insert(to.to_path_buf(), node);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut ns = self.namespace();
        if !ns.dirs.contains(dir) {
            return Err(not_found(dir, "sync directory"));
        }
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        ns.durable.retain(|p, _| !in_dir(p));
        let entries: Vec<(PathBuf, Node)> = ns
            .live
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect();
        ns.durable.extend(entries);
        Ok(())
    }

    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut ns = self.namespace();
        Self::check_parent(&ns, path, "open lock file")?;
        if ns.locks.contains_key(path) || ns.shared_locks.contains_key(path) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        ns.next_lock_id += 1;
        let id = ns.next_lock_id;
        ns.locks.insert(path.to_path_buf(), id);
        ns.live.entry(path.to_path_buf()).or_default();
        Ok(Box::new(MemFileLock {
            ns: self.ns.clone(),
            path: path.to_path_buf(),
            id,
        }))
    }

    fn lock_file_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut ns = self.namespace();
        if !ns.live.contains_key(path) {
            return Err(not_found(path, "open lock file"));
        }
        if ns.locks.contains_key(path) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        ns.next_lock_id += 1;
        let id = ns.next_lock_id;
        ns.shared_locks
            .entry(path.to_path_buf())
            .or_default()
            .push(id);
        Ok(Box::new(MemFileLock {
            ns: self.ns.clone(),
            path: path.to_path_buf(),
            id,
        }))
    }
}
