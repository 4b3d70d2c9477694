// SPDX-License-Identifier: MIT OR Apache-2.0
//! `strata._strata`: the native half of the `strata` Python package.
//!
//! It implements plyvel's classes (`DB`, `WriteBatch`, `Iterator`, `RawIterator`,
//! `Snapshot`) over [`strata::Db`]; `strata.plyvel` re-exports them (adding `PrefixedDB`, in
//! Python), and `strata`'s own Pythonic API is Python on top of them.
//!
//! Two rules hold for every method:
//! - every call into strata that may do I/O, wait, or call a Python comparator runs with the
//!   GIL released and with panics caught ([`errors::blocking`]);
//! - a value read from a table crosses into Python with one copy, from the block it lives in
//!   straight into a new `bytes` (`get_pinned`, and forward cursors' slices); a memtable hit
//!   and a reverse cursor copy twice, as strata hands those out in buffers of its own.
//!
//! Ownership: a Python `DB` owns an `Arc<Handle>`; its iterators, snapshots and write batches
//! hold clones of it, so that closing the `DB` is seen by all of them (they then raise
//! `RuntimeError`, as plyvel's do). The handle's lock is held only to clone or take the
//! `Arc<Db>`, never across a call into strata.

mod comparator;
mod errors;
mod iterator;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple, PyType};
use strata::{Comparator, Compression, Db, Options, ReadOptions, WriteOptions};

use crate::errors::{blocking, db_closed, iterator_closed, snapshot_closed, to_py, Failure};
use crate::iterator::{PyIterator, PyRawIterator, RangeSpec};

/// The LevelDB version strata is on-disk compatible with, as `__leveldb_version__`.
const LEVELDB_VERSION: &str = "1.23";

/// What a `DB` and everything made from it share: the database while it is open.
pub(crate) struct Handle {
    /// `None` once closed. Locked only to clone or take the `Arc`.
    db: RwLock<Option<Arc<Db>>>,
    /// The key order, for iterators' range checks.
    pub(crate) cmp: Arc<dyn Comparator>,
}

impl Handle {
    /// The open database, or `None` once closed. The clone must be dropped with the GIL
    /// released (moved into [`blocking`], or dropped after a `py.detach`): it may be the last
    /// reference, if `close()` ran meanwhile, and closing waits for the background thread,
    /// which may be waiting for the GIL in a Python comparator.
    pub(crate) fn get(&self) -> Option<Arc<Db>> {
        self.db.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the database is still open, without taking a reference to it.
    pub(crate) fn is_open(&self) -> bool {
        self.db.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    fn take(&self) -> Option<Arc<Db>> {
        self.db.write().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Drop for Handle {
    /// Closing a database waits for its background thread, which may be calling a Python
    /// comparator: so the last reference goes with the GIL released.
    fn drop(&mut self) {
        if let Some(db) = self.take() {
            Python::attach(|py| py.detach(move || drop(db)));
        }
    }
}

/// Locks a mutex held across GIL releases (a cursor's): waits for it with the GIL released,
/// so that a thread holding it can take the GIL back to finish. Poisoning is ignored as in
/// [`lock`].
pub(crate) fn lock_detached<'a, T>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    use pyo3::sync::MutexExt;
    m.lock_py_attached(py).unwrap_or_else(|e| e.into_inner())
}

/// Locks a mutex, ignoring poisoning: the data behind every mutex here stays consistent
/// whatever panicked (panics are caught around calls into strata, which hold no guard).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Options built from plyvel's keyword arguments.
#[allow(clippy::too_many_arguments)]
fn build_options(
    py: Python<'_>,
    create_if_missing: bool,
    error_if_exists: bool,
    paranoid_checks: Option<bool>,
    write_buffer_size: Option<usize>,
    max_open_files: Option<usize>,
    lru_cache_size: Option<usize>,
    block_size: Option<usize>,
    block_restart_interval: Option<usize>,
    max_file_size: Option<usize>,
    compression: Option<&str>,
    bloom_filter_bits: usize,
    comparator: Option<Py<PyAny>>,
    comparator_name: Option<&[u8]>,
) -> PyResult<Options> {
    let mut o = Options {
        create_if_missing,
        error_if_exists,
        ..Options::default()
    };
    if let Some(v) = paranoid_checks {
        o.paranoid_checks = v;
    }
    if let Some(v) = write_buffer_size {
        o.write_buffer_size = v;
    }
    if let Some(v) = max_open_files {
        o.max_open_files = v;
    }
    if let Some(v) = lru_cache_size {
        o.block_cache_capacity = v;
    }
    if let Some(v) = block_size {
        o.block_size = v;
    }
    if let Some(v) = block_restart_interval {
        o.block_restart_interval = v;
    }
    if let Some(v) = max_file_size {
        o.max_file_size = v;
    }
    o.compression = match compression {
        None => Compression::None,
        Some("snappy") => Compression::Snappy,
        Some(_) => {
            return Err(PyValueError::new_err(
                "'compression' must be None or 'snappy'",
            ))
        }
    };
    if bloom_filter_bits > 0 {
        o = o.with_bloom_filter(bloom_filter_bits);
    }
    match (comparator, comparator_name) {
        (None, None) => {}
        (Some(func), Some(name)) => {
            if !func.bind(py).is_callable() {
                return Err(PyTypeError::new_err("'comparator' must be callable"));
            }
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| PyValueError::new_err("'comparator_name' must be UTF-8"))?;
            o.comparator = Arc::new(comparator::PyComparator::new(name, func));
        }
        _ => {
            return Err(PyValueError::new_err(
                "'comparator' and 'comparator_name' must be specified together",
            ))
        }
    }
    Ok(o)
}

/// A read's options.
fn read_options(verify_checksums: bool, fill_cache: bool) -> ReadOptions<'static> {
    ReadOptions {
        verify_checksums,
        fill_cache,
        snapshot: None,
    }
}

/// `key` with `prefix` in front.
fn prefixed(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + key.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(key);
    k
}

/// A LevelDB database, opened with plyvel's arguments (`strata.plyvel.DB`).
#[pyclass(module = "strata._strata", name = "DB", subclass, frozen)]
pub struct PyDb {
    handle: Arc<Handle>,
    name: Py<PyAny>,
}

#[pymethods]
impl PyDb {
    #[new]
    #[pyo3(signature = (name, create_if_missing=false, *, error_if_exists=false,
        paranoid_checks=None, write_buffer_size=None, max_open_files=None, lru_cache_size=None,
        block_size=None, block_restart_interval=None, max_file_size=None,
        compression=Some("snappy"), bloom_filter_bits=0, comparator=None, comparator_name=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        name: Bound<'_, PyAny>,
        create_if_missing: bool,
        error_if_exists: bool,
        paranoid_checks: Option<bool>,
        write_buffer_size: Option<usize>,
        max_open_files: Option<usize>,
        lru_cache_size: Option<usize>,
        block_size: Option<usize>,
        block_restart_interval: Option<usize>,
        max_file_size: Option<usize>,
        compression: Option<&str>,
        bloom_filter_bits: usize,
        comparator: Option<Py<PyAny>>,
        comparator_name: Option<&[u8]>,
    ) -> PyResult<Self> {
        // plyvel takes a `str` or `bytes` name (and path-like objects).
        let path: PathBuf = match name.cast::<PyBytes>() {
            Ok(bytes) => {
                use std::os::unix::ffi::OsStrExt;
                std::ffi::OsStr::from_bytes(bytes.as_bytes()).into()
            }
            Err(_) => name.extract()?,
        };
        let options = build_options(
            py,
            create_if_missing,
            error_if_exists,
            paranoid_checks,
            write_buffer_size,
            max_open_files,
            lru_cache_size,
            block_size,
            block_restart_interval,
            max_file_size,
            compression,
            bloom_filter_bits,
            comparator,
            comparator_name,
        )?;
        let cmp = options.comparator.clone();
        let db = blocking(py, move || Ok(Db::open(&path, options)?))?;
        Ok(PyDb {
            handle: Arc::new(Handle {
                db: RwLock::new(Some(Arc::new(db))),
                cmp,
            }),
            name: name.unbind(),
        })
    }

    /// The name (path) the database was opened with.
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyAny> {
        self.name.clone_ref(py)
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        !self.handle.is_open()
    }

    /// Closes the database: later operations on it, and on its iterators and snapshots,
    /// raise `RuntimeError`. Closing twice does nothing. If another thread is inside a call
    /// on the database, the database closes when that call returns (without syncing the log
    /// first: unsynced writes are in the operating system's hands, as after any close).
    ///
    /// As plyvel's `close` (LevelDB's destructor), it reports no error: the database is
    /// closed in every case, and an error that had stopped its writes (reported by the
    /// writes it refused) is not raised again here.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(db) = self.handle.take() else {
            return Ok(());
        };
        blocking(py, move || match Arc::try_unwrap(db) {
            Ok(db) => {
                let _ = db.close();
                Ok(())
            }
            // A call on another thread still holds it: its end closes the database.
            Err(shared) => {
                drop(shared);
                Ok(())
            }
        })
    }

    /// The value of `key`, or `default` if it is absent.
    #[pyo3(signature = (key, default=None, verify_checksums=false, fill_cache=true))]
    fn get(
        &self,
        py: Python<'_>,
        key: &[u8],
        default: Option<Py<PyAny>>,
        verify_checksums: bool,
        fill_cache: bool,
    ) -> PyResult<Py<PyAny>> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        get_value(py, db, None, key, default, verify_checksums, fill_cache)
    }

    /// Sets `key` to `value`; with `sync`, durable against a power loss when it returns.
    #[pyo3(signature = (key, value, sync=false))]
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8], sync: bool) -> PyResult<()> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        blocking(py, move || {
            Ok(db.put_opt(key, value, &WriteOptions { sync })?)
        })
    }

    /// Removes `key` (nothing happens if it is absent).
    #[pyo3(signature = (key, sync=false))]
    fn delete(&self, py: Python<'_>, key: &[u8], sync: bool) -> PyResult<()> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        blocking(py, move || Ok(db.delete_opt(key, &WriteOptions { sync })?))
    }

    /// A batch of puts and deletes written atomically by `write()` or at the end of its
    /// `with` block (not at all, with `transaction`, if the block raises).
    #[pyo3(signature = (transaction=false, sync=false, *, _key_prefix=None))]
    fn write_batch(
        &self,
        transaction: bool,
        sync: bool,
        _key_prefix: Option<&[u8]>,
    ) -> PyResult<PyWriteBatch> {
        if !self.handle.is_open() {
            return Err(db_closed());
        }
        Ok(PyWriteBatch {
            handle: self.handle.clone(),
            batch: Mutex::new(strata::WriteBatch::new()),
            transaction,
            sync,
            key_prefix: _key_prefix.unwrap_or_default().to_vec(),
        })
    }

    /// An iterator over a range of the database (all of it by default), as plyvel's.
    #[pyo3(signature = (reverse=false, start=None, stop=None, include_start=true,
        include_stop=false, prefix=None, include_key=true, include_value=true,
        verify_checksums=false, fill_cache=true, *, _key_prefix=None))]
    #[allow(clippy::too_many_arguments)]
    fn iterator(
        &self,
        py: Python<'_>,
        reverse: bool,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        include_start: bool,
        include_stop: bool,
        prefix: Option<&[u8]>,
        include_key: bool,
        include_value: bool,
        verify_checksums: bool,
        fill_cache: bool,
        _key_prefix: Option<&[u8]>,
    ) -> PyResult<PyIterator> {
        let spec = RangeSpec::new(
            start,
            stop,
            include_start,
            include_stop,
            prefix,
            _key_prefix.unwrap_or_default().to_vec(),
        )?;
        let db = self.handle.get().ok_or_else(iterator_closed)?;
        PyIterator::open(
            py,
            &self.handle,
            db,
            None,
            spec,
            reverse,
            include_key,
            include_value,
            read_options(verify_checksums, fill_cache),
        )
    }

    /// LevelDB's cursor, unpositioned.
    #[pyo3(signature = (verify_checksums=false, fill_cache=true))]
    fn raw_iterator(
        &self,
        py: Python<'_>,
        verify_checksums: bool,
        fill_cache: bool,
    ) -> PyResult<PyRawIterator> {
        let db = self.handle.get().ok_or_else(iterator_closed)?;
        PyRawIterator::open(
            py,
            &self.handle,
            db,
            None,
            read_options(verify_checksums, fill_cache),
        )
    }

    /// A consistent read-only view of the database as it is now.
    #[pyo3(signature = (*, _key_prefix=None))]
    fn snapshot(&self, py: Python<'_>, _key_prefix: Option<&[u8]>) -> PyResult<PySnapshot> {
        let db = self
            .handle
            .get()
            .ok_or_else(|| PyRuntimeError::new_err("Cannot operate on closed LevelDB database"))?;
        // `Db::snapshot` takes the state mutex, which the background thread holds while it
        // compares keys (a Python comparator then waits for the GIL): never with the GIL held.
        let snapshot = blocking(py, move || Ok(db.snapshot()))?;
        Ok(PySnapshot {
            handle: self.handle.clone(),
            snapshot: Mutex::new(Some(Arc::new(snapshot))),
            key_prefix: _key_prefix.unwrap_or_default().to_vec(),
        })
    }

    /// A view of the keys that start with `prefix`, with the prefix left out
    /// (`strata.plyvel.PrefixedDB`).
    fn prefixed_db(slf: &Bound<'_, Self>, prefix: &Bound<'_, PyBytes>) -> PyResult<Py<PyAny>> {
        let class = slf.py().import("strata.plyvel")?.getattr("PrefixedDB")?;
        Ok(class.call1((slf, prefix))?.unbind())
    }

    /// The approximate bytes on disk of the keys in `[start, stop)`.
    fn approximate_size(&self, py: Python<'_>, start: &[u8], stop: &[u8]) -> PyResult<u64> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        blocking(py, move || Ok(db.approximate_sizes(&[(start, stop)])[0]))
    }

    /// `approximate_size` of each `(start, stop)` range.
    #[pyo3(signature = (*ranges))]
    fn approximate_sizes(
        &self,
        py: Python<'_>,
        ranges: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> PyResult<Vec<u64>> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        blocking(py, move || {
            let borrowed: Vec<(&[u8], &[u8])> = ranges
                .iter()
                .map(|(a, b)| (a.as_slice(), b.as_slice()))
                .collect();
            Ok(db.approximate_sizes(&borrowed))
        })
    }

    /// Compacts the tables holding keys in `[start, stop]` (everything by default).
    #[pyo3(signature = (start=None, stop=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
    ) -> PyResult<()> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        blocking(py, move || Ok(db.compact_range(start, stop)?))
    }

    /// A LevelDB property (`b"leveldb.stats"`, `b"leveldb.num-files-at-level0"`, ...) as bytes,
    /// or None if there is no such property.
    fn get_property<'py>(
        &self,
        py: Python<'py>,
        name: &[u8],
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let Ok(name) = std::str::from_utf8(name) else {
            return Ok(None);
        };
        let db = self.handle.get().ok_or_else(db_closed)?;
        let value = blocking(py, move || Ok(db.property(name)))?;
        Ok(value.map(|v| PyBytes::new(py, v.as_bytes())))
    }

    /// Removes every key in `[start, end)` (the Pythonic API's `delete_range`).
    #[pyo3(signature = (start, end, sync=false))]
    fn _delete_range(&self, py: Python<'_>, start: &[u8], end: &[u8], sync: bool) -> PyResult<()> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        blocking(py, move || {
            Ok(db.delete_range_opt(start, end, &WriteOptions { sync })?)
        })
    }

    /// Writes a consistent copy of the database into directory `path` (the Pythonic API's
    /// `checkpoint`).
    fn _checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        blocking(py, move || Ok(db.checkpoint(&path)?))
    }

    /// Iterates over every `(key, value)`, as `iterator()`.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIterator> {
        self.iterator(
            py, false, None, None, true, false, None, true, true, false, true, None,
        )
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the database.
    #[pyo3(signature = (_exc_type=None, _exc_value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<Bound<'_, PyAny>>,
        _exc_value: Option<Bound<'_, PyAny>>,
        _traceback: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<strata.plyvel.DB with name {} at {:p}>",
            self.name.bind(py).repr()?,
            Arc::as_ptr(&self.handle)
        ))
    }
}

/// `get` of a database or snapshot: `default` when absent, else one copy into `bytes`.
fn get_value(
    py: Python<'_>,
    db: Arc<Db>,
    snapshot: Option<Arc<strata::Snapshot>>,
    key: &[u8],
    default: Option<Py<PyAny>>,
    verify_checksums: bool,
    fill_cache: bool,
) -> PyResult<Py<PyAny>> {
    let found = blocking(py, move || {
        let options = ReadOptions {
            verify_checksums,
            fill_cache,
            snapshot: snapshot.as_deref(),
        };
        Ok(db.get_pinned_opt(key, &options)?)
    })?;
    Ok(match found {
        Some(value) => PyBytes::new(py, &value).into_any().unbind(),
        None => default.unwrap_or_else(|| py.None()),
    })
}

/// A batch of puts and deletes written atomically (`DB.write_batch()`).
#[pyclass(module = "strata._strata", name = "WriteBatch", frozen)]
pub struct PyWriteBatch {
    handle: Arc<Handle>,
    batch: Mutex<strata::WriteBatch>,
    transaction: bool,
    sync: bool,
    /// Put in front of every key (a `PrefixedDB`'s batch).
    key_prefix: Vec<u8>,
}

impl PyWriteBatch {
    fn key(&self, key: &[u8]) -> Vec<u8> {
        prefixed(&self.key_prefix, key)
    }

    fn write_taken(&self, py: Python<'_>, batch: strata::WriteBatch) -> PyResult<()> {
        let db = self.handle.get().ok_or_else(db_closed)?;
        let options = WriteOptions { sync: self.sync };
        blocking(py, move || Ok(db.write_opt(batch, &options)?))
    }
}

#[pymethods]
impl PyWriteBatch {
    /// Adds a put of `key`; `RuntimeError` once the database is closed, as plyvel's.
    fn put(&self, key: &[u8], value: &[u8]) -> PyResult<()> {
        if !self.handle.is_open() {
            return Err(db_closed());
        }
        if self.key_prefix.is_empty() {
            lock(&self.batch).put(key, value);
        } else {
            lock(&self.batch).put(self.key(key), value);
        }
        Ok(())
    }

    /// Adds a deletion of `key`; `RuntimeError` once the database is closed, as plyvel's.
    fn delete(&self, key: &[u8]) -> PyResult<()> {
        if !self.handle.is_open() {
            return Err(db_closed());
        }
        if self.key_prefix.is_empty() {
            lock(&self.batch).delete(key);
        } else {
            lock(&self.batch).delete(self.key(key));
        }
        Ok(())
    }

    /// Removes every operation from the batch.
    fn clear(&self) {
        lock(&self.batch).clear();
    }

    /// Appends the operations of `source` to this batch.
    fn append(&self, source: &Bound<'_, PyWriteBatch>) {
        let source = source.get();
        if std::ptr::eq(source, self) {
            let copy = lock(&self.batch).clone();
            lock(&self.batch).append(&copy);
        } else {
            let other = lock(&source.batch).clone();
            lock(&self.batch).append(&other);
        }
    }

    /// The size of the batch's encoding in bytes, as LevelDB's `ApproximateSize`.
    fn approximate_size(&self) -> usize {
        lock(&self.batch).approximate_size()
    }

    /// Writes the batch (it keeps its operations, as plyvel's does).
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        let batch = lock(&self.batch).clone();
        self.write_taken(py, batch)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Writes the batch, unless the block raised and the batch is a transaction.
    #[pyo3(signature = (exc_type=None, _exc_value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        _exc_value: Option<Bound<'_, PyAny>>,
        _traceback: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let raised = exc_type.is_some_and(|t| !t.is_none());
        let batch = std::mem::take(&mut *lock(&self.batch));
        if !(raised && self.transaction) {
            self.write_taken(py, batch)?;
        }
        Ok(false)
    }
}

/// A consistent read-only view of the database (`DB.snapshot()`).
#[pyclass(module = "strata._strata", name = "Snapshot", frozen)]
pub struct PySnapshot {
    handle: Arc<Handle>,
    /// `None` once released.
    snapshot: Mutex<Option<Arc<strata::Snapshot>>>,
    key_prefix: Vec<u8>,
}

impl PySnapshot {
    fn parts(&self) -> PyResult<(Arc<Db>, Arc<strata::Snapshot>)> {
        let snapshot = lock(&self.snapshot).clone().ok_or_else(snapshot_closed)?;
        let db = self.handle.get().ok_or_else(snapshot_closed)?;
        Ok((db, snapshot))
    }
}

#[pymethods]
impl PySnapshot {
    #[pyo3(signature = (key, default=None, verify_checksums=false, fill_cache=true))]
    fn get(
        &self,
        py: Python<'_>,
        key: &[u8],
        default: Option<Py<PyAny>>,
        verify_checksums: bool,
        fill_cache: bool,
    ) -> PyResult<Py<PyAny>> {
        let (db, snapshot) = self.parts()?;
        if self.key_prefix.is_empty() {
            get_value(
                py,
                db,
                Some(snapshot),
                key,
                default,
                verify_checksums,
                fill_cache,
            )
        } else {
            let key = prefixed(&self.key_prefix, key);
            get_value(
                py,
                db,
                Some(snapshot),
                &key,
                default,
                verify_checksums,
                fill_cache,
            )
        }
    }

    #[pyo3(signature = (reverse=false, start=None, stop=None, include_start=true,
        include_stop=false, prefix=None, include_key=true, include_value=true,
        verify_checksums=false, fill_cache=true))]
    #[allow(clippy::too_many_arguments)]
    fn iterator(
        &self,
        py: Python<'_>,
        reverse: bool,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        include_start: bool,
        include_stop: bool,
        prefix: Option<&[u8]>,
        include_key: bool,
        include_value: bool,
        verify_checksums: bool,
        fill_cache: bool,
    ) -> PyResult<PyIterator> {
        let spec = RangeSpec::new(
            start,
            stop,
            include_start,
            include_stop,
            prefix,
            self.key_prefix.clone(),
        )?;
        let (db, snapshot) = self.parts()?;
        PyIterator::open(
            py,
            &self.handle,
            db,
            Some(snapshot),
            spec,
            reverse,
            include_key,
            include_value,
            read_options(verify_checksums, fill_cache),
        )
    }

    #[pyo3(signature = (verify_checksums=false, fill_cache=true))]
    fn raw_iterator(
        &self,
        py: Python<'_>,
        verify_checksums: bool,
        fill_cache: bool,
    ) -> PyResult<PyRawIterator> {
        let (db, snapshot) = self.parts()?;
        PyRawIterator::open(
            py,
            &self.handle,
            db,
            Some(snapshot),
            read_options(verify_checksums, fill_cache),
        )
    }

    /// Iterates over every `(key, value)` of the snapshot, as `iterator()`.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIterator> {
        self.iterator(
            py, false, None, None, true, false, None, true, true, false, true,
        )
    }

    /// Releases the snapshot; later reads through it raise `RuntimeError`.
    fn close(&self, py: Python<'_>) {
        let taken = lock(&self.snapshot).take();
        py.detach(move || drop(taken));
    }

    /// The same as `close()`.
    fn release(&self, py: Python<'_>) {
        self.close(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type=None, _exc_value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<Bound<'_, PyAny>>,
        _exc_value: Option<Bound<'_, PyAny>>,
        _traceback: Option<Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }
}

/// Rebuilds a damaged database in `name`, keeping every record that can be read.
#[pyfunction]
#[pyo3(signature = (name, *, paranoid_checks=None, write_buffer_size=None, max_open_files=None,
    lru_cache_size=None, block_size=None, block_restart_interval=None, max_file_size=None,
    compression=Some("snappy"), bloom_filter_bits=0, comparator=None, comparator_name=None))]
#[allow(clippy::too_many_arguments)]
fn repair_db(
    py: Python<'_>,
    name: PathBuf,
    paranoid_checks: Option<bool>,
    write_buffer_size: Option<usize>,
    max_open_files: Option<usize>,
    lru_cache_size: Option<usize>,
    block_size: Option<usize>,
    block_restart_interval: Option<usize>,
    max_file_size: Option<usize>,
    compression: Option<&str>,
    bloom_filter_bits: usize,
    comparator: Option<Py<PyAny>>,
    comparator_name: Option<&[u8]>,
) -> PyResult<()> {
    let options = build_options(
        py,
        false,
        false,
        paranoid_checks,
        write_buffer_size,
        max_open_files,
        lru_cache_size,
        block_size,
        block_restart_interval,
        max_file_size,
        compression,
        bloom_filter_bits,
        comparator,
        comparator_name,
    )?;
    // As LevelDB's RepairDB: nothing to repair where there is no directory.
    if !name.is_dir() {
        return Ok(());
    }
    blocking(py, move || {
        strata::repair(&name, &options)?;
        Ok(())
    })
}

/// Deletes the database in `name` and its directory (nothing to do if there is none).
#[pyfunction]
fn destroy_db(py: Python<'_>, name: PathBuf) -> PyResult<()> {
    if !name.exists() {
        return Ok(());
    }
    blocking(py, move || {
        strata::destroy(&name, &Options::default())?;
        Ok(())
    })
}

/// The exception classes of an I/O error, a corruption and an invalid argument, for the
/// tests of the error mapping.
#[pyfunction]
fn _error_kinds(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    let io = std::io::Error::other("test");
    let errors = [
        strata::Error::io("/x", "open", io),
        strata::Error::corruption("/x", 0, "test"),
        strata::Error::invalid_argument("test"),
    ];
    let classes: Vec<Bound<'_, PyType>> = errors
        .into_iter()
        .map(|e| to_py(py, e).get_type(py))
        .collect();
    PyTuple::new(py, classes)
}

/// Turns a panic into the exception strata raises for it; used by tests.
#[pyfunction]
fn _panic_error(py: Python<'_>) -> PyResult<()> {
    blocking(py, || -> Result<(), Failure> { panic!("deliberate") })
}

/// The native module `strata._strata`.
#[pymodule]
fn _strata(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("__leveldb_version__", LEVELDB_VERSION)?;
    m.add_class::<PyDb>()?;
    m.add_class::<PyWriteBatch>()?;
    m.add_class::<PySnapshot>()?;
    m.add_class::<PyIterator>()?;
    m.add_class::<PyRawIterator>()?;
    m.add_function(wrap_pyfunction!(repair_db, m)?)?;
    m.add_function(wrap_pyfunction!(destroy_db, m)?)?;
    m.add_function(wrap_pyfunction!(_error_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_error, m)?)?;
    Ok(())
}
