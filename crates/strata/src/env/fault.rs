// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`FaultEnv`]: an [`Env`] wrapper that numbers every file-system call that changes something,
//! can fail any of them (once or from then on) the way a disk does, lets a test watch each one
//! before it happens, and checks two rules of fail-stop behaviour as it goes.
//!
//! Mutating calls, in the order they are numbered: creating or truncating a file, opening one
//! for append, `append`, `sync`, removing, renaming or linking a file, creating or removing a
//! directory, syncing a directory, and taking a lock. Reads and `flush` are not numbered:
//! `flush` only moves bytes already handed to the env.
//!
//! The rules it checks (see [`FaultEnv::violations`]):
//! - after an `append` or `sync` to a file failed, nothing is appended to that file again;
//! - after a `sync` of a file failed, it is not synced again (a retried `fsync` can report
//!   success for data the kernel already dropped).
//!
//! A file created anew under the same name is another file, with a clean record.
//!
//! [`FaultEnv::limit_faults_to_suffix`] keeps faults to one kind of file (say the logs), as a
//! test of one failing writer needs.
//!
//! Locking: one mutex guards the plan, the counter and the record of failed files; it is never
//! held while the wrapped env runs, nor while the observer runs.

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Env, FileLock, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

/// The kind of a numbered call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `new_writable_file`: create or truncate.
    Create,
    /// `new_appendable_file`.
    OpenAppend,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::sync`.
    Sync,
    /// `remove_file`.
    Remove,
    /// `rename` (the path is the source).
    Rename,
    /// `create_dir_all`.
    CreateDir,
    /// `remove_dir`.
    RemoveDir,
    /// `sync_dir`.
    SyncDir,
    /// `lock_file` or `lock_file_shared`.
    Lock,
    /// `link_file` (the path is the existing file, `to` the new name).
    Link,
}

/// One numbered call, as the observer sees it before it runs.
#[derive(Debug, Clone, Copy)]
pub struct FileOp<'a> {
    /// Its number: 0 for the first mutating call through this env.
    pub index: u64,
    /// What it does.
    pub kind: OpKind,
    /// The file or directory it is on.
    pub path: &'a Path,
    /// For a rename or a link, where the file goes (the new name).
    pub to: Option<&'a Path>,
    /// For an append, the bytes.
    pub data: Option<&'a [u8]>,
}

/// How an injected fault fails a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// `EIO`: the device failed.
    Io,
    /// `ENOSPC`: the disk is full.
    NoSpace,
    /// An append writes part of its bytes, then fails with `ENOSPC`; other calls fail with
    /// `ENOSPC`.
    ShortWrite,
    /// Only `sync` and `sync_dir` fail (`EIO`); other calls succeed.
    FailedSync,
}

/// Which calls fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    /// The number of the first call to fail.
    pub at: u64,
    /// How it fails.
    pub kind: FaultKind,
    /// Every later call fails too (a disk that stays full or broken), instead of that one only.
    pub persistent: bool,
}

type Observer = Arc<dyn Fn(&FileOp<'_>) + Send + Sync>;

#[derive(Default)]
struct State {
    next_index: u64,
    plan: Option<FaultPlan>,
    /// Only calls on paths ending with this may fail; `None`: any call.
    fault_suffix: Option<String>,
    /// Files whose append or sync failed.
    failed_writes: HashSet<PathBuf>,
    /// Files whose sync failed.
    failed_syncs: HashSet<PathBuf>,
    /// Faults injected so far.
    injected: u64,
    violations: Vec<String>,
}

struct Shared {
    state: Mutex<State>,
    observer: Mutex<Option<Observer>>,
}

/// An [`Env`] that numbers, watches and can fail the mutating calls of another.
///
/// Clones share the counter, the plan and the observer.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use std::sync::Arc;
/// use strata::env::{FaultEnv, FaultKind, FaultPlan};
/// use strata::{Db, MemEnv, Options};
/// ///
/// let env = FaultEnv::new(MemEnv::new());
/// let options = Options { create_if_missing: true, ..Options::default() }
///     .with_env(Arc::new(env.clone()));
/// let db = Db::open("/db", options)?;
/// // The disk fills up: the next append fails, and so does every call after it.
/// env.set_plan(Some(FaultPlan { at: env.ops(), kind: FaultKind::NoSpace, persistent: true }));
/// assert!(db.put(b"k", b"v").is_err());
/// assert!(env.violations().is_empty());
/// # Ok::<(), strata::Error>(())
/// ```
#[derive(Clone)]
pub struct FaultEnv<E> {
    inner: E,
    shared: Arc<Shared>,
}

impl<E> fmt::Debug for FaultEnv<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("FaultEnv")
            .field("ops", &state.next_index)
            .field("plan", &state.plan)
            .finish_non_exhaustive()
    }
}

/// What a numbered call should do.
enum Verdict {
    Proceed,
    Fail(FaultKind),
}

impl<E: Env> FaultEnv<E> {
    /// Wraps `inner`, with no fault planned.
    pub fn new(inner: E) -> Self {
        FaultEnv {
            inner,
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                observer: Mutex::new(None),
            }),
        }
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E> FaultEnv<E> {
    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets (or clears) the calls to fail.
    pub fn set_plan(&self, plan: Option<FaultPlan>) {
        self.state().plan = plan;
    }

    /// Lets the plan fail only calls on paths ending with `suffix` (for a rename, its source),
    /// such as `".log"`; `None` lifts the limit. Other calls are still numbered and observed.
    /// A plan that is not persistent fails only if call `at` itself is on such a path.
    pub fn limit_faults_to_suffix(&self, suffix: Option<&str>) {
        self.state().fault_suffix = suffix.map(str::to_owned);
    }

    /// Calls `observer` before every numbered call, on the thread making it.
    pub fn set_observer(&self, observer: Option<Observer>) {
        *self
            .shared
            .observer
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = observer;
    }

    /// How many numbered calls were made (the number the next one gets).
    pub fn ops(&self) -> u64 {
        self.state().next_index
    }

    /// How many calls were failed on purpose.
    pub fn injected(&self) -> u64 {
        self.state().injected
    }

    /// Breaches of the fail-stop rules seen so far, each described for a person.
    pub fn violations(&self) -> Vec<String> {
        self.state().violations.clone()
    }

    /// Numbers a call, shows it to the observer, and decides whether it fails.
    fn begin(&self, kind: OpKind, path: &Path, to: Option<&Path>, data: Option<&[u8]>) -> Verdict {
        let (index, verdict) = {
            let mut state = self.state();
            let index = state.next_index;
            state.next_index += 1;
            if kind == OpKind::Create {
                // A new file under the name of one that failed is another file.
                state.failed_writes.remove(path);
                state.failed_syncs.remove(path);
            }
            if kind == OpKind::Append && state.failed_writes.contains(path) {
                let v = format!(
                    "call {index}: append to {} after a write or sync to it failed",
                    path.display()
                );
                state.violations.push(v);
            }
            if kind == OpKind::Sync && state.failed_syncs.contains(path) {
                let v = format!(
                    "call {index}: {} synced again after its sync failed",
                    path.display()
                );
                state.violations.push(v);
            }
            let on_path = state
                .fault_suffix
                .as_deref()
                .is_none_or(|suffix| path.to_string_lossy().ends_with(suffix));
            let fails = state.plan.and_then(|plan| {
                let due = index == plan.at || (plan.persistent && index > plan.at);
                let applies = plan.kind != FaultKind::FailedSync
                    || matches!(kind, OpKind::Sync | OpKind::SyncDir);
                (due && applies && on_path).then_some(plan.kind)
            });
            if let Some(fault) = fails {
                state.injected += 1;
                if matches!(kind, OpKind::Append | OpKind::Sync) {
                    state.failed_writes.insert(path.to_path_buf());
                }
                if kind == OpKind::Sync {
                    state.failed_syncs.insert(path.to_path_buf());
                }
                (index, Verdict::Fail(fault))
            } else {
                (index, Verdict::Proceed)
            }
        };
        let observer = self
            .shared
            .observer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(observer) = observer {
            observer(&FileOp {
                index,
                kind,
                path,
                to,
                data,
            });
        }
        verdict
    }
}

fn fault_error(path: &Path, op: &'static str, kind: FaultKind) -> Error {
    let errno = match kind {
        FaultKind::Io | FaultKind::FailedSync => 5,       // EIO
        FaultKind::NoSpace | FaultKind::ShortWrite => 28, // ENOSPC
    };
    Error::io(path, op, io::Error::from_raw_os_error(errno))
}

struct FaultFile<E> {
    env: FaultEnv<E>,
    path: PathBuf,
    inner: Box<dyn WritableFile>,
}

impl<E: Send + Sync + 'static> WritableFile for FaultFile<E> {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        match self.env.begin(OpKind::Append, &self.path, None, Some(data)) {
            Verdict::Proceed => self.inner.append(data),
            Verdict::Fail(FaultKind::ShortWrite) => {
                self.inner.append(&data[..data.len() / 2])?;
                self.inner.flush()?;
                Err(fault_error(&self.path, "append", FaultKind::ShortWrite))
            }
            Verdict::Fail(kind) => Err(fault_error(&self.path, "append", kind)),
        }
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn reserve(&mut self, bytes: u64) {
        self.inner.reserve(bytes);
    }

    fn sync(&mut self) -> Result<()> {
        match self.env.begin(OpKind::Sync, &self.path, None, None) {
            Verdict::Proceed => self.inner.sync(),
            Verdict::Fail(kind) => {
                // Like a kernel that drops dirty pages after a failed fsync: what was handed
                // over stays visible, but is not made durable.
                let _ = self.inner.flush();
                Err(fault_error(&self.path, "sync", kind))
            }
        }
    }
}

impl<E: Env + Clone + 'static> Env for FaultEnv<E> {
    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        self.inner.new_sequential_file(path)
    }

    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.new_random_access_file(path)
    }

    fn new_mapped_file(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.new_mapped_file(path)
    }

    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        match self.begin(OpKind::Create, path, None, None) {
            Verdict::Proceed => Ok(Box::new(FaultFile {
                env: self.clone(),
                path: path.to_path_buf(),
                inner: self.inner.new_writable_file(path)?,
            })),
            Verdict::Fail(kind) => Err(fault_error(path, "create", kind)),
        }
    }

    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        match self.begin(OpKind::OpenAppend, path, None, None) {
            Verdict::Proceed => Ok(Box::new(FaultFile {
                env: self.clone(),
                path: path.to_path_buf(),
                inner: self.inner.new_appendable_file(path)?,
            })),
            Verdict::Fail(kind) => Err(fault_error(path, "open for append", kind)),
        }
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn children(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.children(dir)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        match self.begin(OpKind::Remove, path, None, None) {
            Verdict::Proceed => self.inner.remove_file(path),
            Verdict::Fail(kind) => Err(fault_error(path, "remove", kind)),
        }
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        match self.begin(OpKind::CreateDir, path, None, None) {
            Verdict::Proceed => self.inner.create_dir_all(path),
            Verdict::Fail(kind) => Err(fault_error(path, "create directory", kind)),
        }
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        match self.begin(OpKind::RemoveDir, path, None, None) {
            Verdict::Proceed => self.inner.remove_dir(path),
            Verdict::Fail(kind) => Err(fault_error(path, "remove directory", kind)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        match self.begin(OpKind::Rename, from, Some(to), None) {
            Verdict::Proceed => self.inner.rename(from, to),
            Verdict::Fail(kind) => Err(fault_error(from, "rename", kind)),
        }
    }

    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        match self.begin(OpKind::Link, from, Some(to), None) {
            Verdict::Proceed => self.inner.link_file(from, to),
            Verdict::Fail(kind) => Err(fault_error(to, "link", kind)),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        match self.begin(OpKind::SyncDir, dir, None, None) {
            Verdict::Proceed => self.inner.sync_dir(dir),
            Verdict::Fail(kind) => Err(fault_error(dir, "sync directory", kind)),
        }
    }

    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        match self.begin(OpKind::Lock, path, None, None) {
            Verdict::Proceed => self.inner.lock_file(path),
            Verdict::Fail(kind) => Err(fault_error(path, "lock", kind)),
        }
    }

    fn lock_file_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        match self.begin(OpKind::Lock, path, None, None) {
            Verdict::Proceed => self.inner.lock_file_shared(path),
            Verdict::Fail(kind) => Err(fault_error(path, "lock", kind)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MemEnv;

    fn env() -> FaultEnv<MemEnv> {
        let env = FaultEnv::new(MemEnv::new());
        env.create_dir_all(Path::new("/d")).unwrap();
        env
    }

    #[test]
    fn calls_are_numbered_and_the_planned_one_fails_once() {
        let env = env();
        assert_eq!(env.ops(), 1);
        env.set_plan(Some(FaultPlan {
            at: 3,
            kind: FaultKind::Io,
            persistent: false,
        }));
        let mut f = env.new_writable_file(Path::new("/d/f")).unwrap(); // 1
        f.append(b"one").unwrap(); // 2
        let err = f.append(b"two").unwrap_err(); // 3
        assert!(err.to_string().contains("/d/f"), "{err}");
        assert!(err.to_string().contains("os error 5"), "{err}");
        f.sync().unwrap(); // 4
        assert_eq!(env.injected(), 1);
        assert_eq!(env.inner().file_size(Path::new("/d/f")).unwrap(), 3);
    }

    #[test]
    fn a_persistent_fault_fails_every_later_call() {
        let env = env();
        env.set_plan(Some(FaultPlan {
            at: 2,
            kind: FaultKind::NoSpace,
            persistent: true,
        }));
        let mut f = env.new_writable_file(Path::new("/d/f")).unwrap();
        assert!(f.append(b"x").is_err());
        assert!(env.rename(Path::new("/d/f"), Path::new("/d/g")).is_err());
        assert!(env.sync_dir(Path::new("/d")).is_err());
        assert_eq!(env.injected(), 3);
    }

    #[test]
    fn faults_limited_to_a_suffix_fail_only_calls_on_such_paths() {
        let env = env();
        env.limit_faults_to_suffix(Some(".log"));
        env.set_plan(Some(FaultPlan {
            at: env.ops(),
            kind: FaultKind::NoSpace,
            persistent: true,
        }));
        let mut table = env.new_writable_file(Path::new("/d/000005.ldb")).unwrap();
        table.append(b"table").unwrap();
        table.sync().unwrap();
        let err = env
            .new_writable_file(Path::new("/d/000006.log"))
            .err()
            .expect("creating a log fails");
        assert!(err.to_string().contains("000006.log"), "{err}");
        assert!(env
            .rename(Path::new("/d/000005.ldb"), Path::new("/d/x.log"))
            .is_ok());
        assert_eq!(env.injected(), 1);
        env.limit_faults_to_suffix(None);
        assert!(table.append(b"more").is_err());
        assert_eq!(env.injected(), 2);
    }

    #[test]
    fn a_short_write_keeps_half_and_fails() {
        let env = env();
        env.set_plan(Some(FaultPlan {
            at: 2,
            kind: FaultKind::ShortWrite,
            persistent: false,
        }));
        let mut f = env.new_writable_file(Path::new("/d/f")).unwrap();
        assert!(f.append(b"abcd").is_err());
        assert_eq!(env.inner().file_size(Path::new("/d/f")).unwrap(), 2);
    }

    #[test]
    fn failed_sync_only_fails_syncs_and_breaches_are_recorded() {
        let env = env();
        env.set_plan(Some(FaultPlan {
            at: 0,
            kind: FaultKind::FailedSync,
            persistent: false,
        }));
        let mut f = env.new_writable_file(Path::new("/d/f")).unwrap();
        f.append(b"data").unwrap();
        env.set_plan(Some(FaultPlan {
            at: env.ops(),
            kind: FaultKind::FailedSync,
            persistent: false,
        }));
        assert!(f.sync().is_err());
        assert!(env.violations().is_empty());
        f.sync().unwrap();
        f.append(b"more").unwrap();
        let v = env.violations();
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0].contains("synced again"), "{v:?}");
        assert!(v[1].contains("append to /d/f after"), "{v:?}");
    }

    #[test]
    fn the_observer_sees_each_call_before_it_runs() {
        let env = env();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let inner = env.inner().clone();
        env.set_observer(Some(Arc::new(move |op: &FileOp<'_>| {
            let size = inner.file_size(op.path).ok();
            log.lock()
                .unwrap()
                .push((op.index, op.kind, op.data.map(<[u8]>::len), size));
        })));
        let mut f = env.new_writable_file(Path::new("/d/f")).unwrap();
        f.append(b"abc").unwrap();
        env.rename(Path::new("/d/f"), Path::new("/d/g")).unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (1, OpKind::Create, None, None),
                (2, OpKind::Append, Some(3), Some(0)),
                (3, OpKind::Rename, None, Some(3)),
            ]
        );
    }
}
