// SPDX-License-Identifier: MIT OR Apache-2.0
//! plyvel's two iterators over a [`DbIterator`]: `Iterator` (a Python iterator over a range,
//! movable both ways) and `RawIterator` (LevelDB's cursor as it is).

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use strata::{Comparator, Db, DbIterator, ReadOptions};

use crate::errors::{blocking, iterator_closed, new_err, Failure, Kind};
use crate::{lock_detached, prefixed, Handle};

/// One end of a range: a key and whether it belongs to the range.
#[derive(Clone)]
struct End {
    key: Vec<u8>,
    inclusive: bool,
}

/// The keys an `Iterator` covers, in full (a `PrefixedDB`'s prefix included), and the
/// prefix to strip from the keys it yields.
pub(crate) struct RangeSpec {
    lower: Option<End>,
    upper: Option<End>,
    strip: usize,
}

/// The shortest key after every key that starts with `prefix`, if there is one.
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

impl RangeSpec {
    /// The range of plyvel's `iterator()` arguments, inside `key_prefix`.
    pub(crate) fn new(
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        include_start: bool,
        include_stop: bool,
        prefix: Option<&[u8]>,
        key_prefix: Vec<u8>,
    ) -> PyResult<RangeSpec> {
        let (start, stop, include_start, include_stop) = match prefix {
            Some(p) => {
                if start.is_some() || stop.is_some() {
                    return Err(PyTypeError::new_err(
                        "'prefix' cannot be used together with 'start' or 'stop'",
                    ));
                }
                // Every key that starts with `p`: from `p` up to its successor.
                let stop = prefix_successor(p);
                (Some(p.to_vec()), stop, true, false)
            }
            None => (
                start.map(<[u8]>::to_vec),
                stop.map(<[u8]>::to_vec),
                include_start,
                include_stop,
            ),
        };
        let lower = match start {
            Some(s) => Some(End {
                key: prefixed(&key_prefix, &s),
                inclusive: include_start,
            }),
            None if !key_prefix.is_empty() => Some(End {
                key: key_prefix.clone(),
                inclusive: true,
            }),
            None => None,
        };
        let upper = match stop {
            Some(s) => Some(End {
                key: prefixed(&key_prefix, &s),
                inclusive: include_stop,
            }),
            None if !key_prefix.is_empty() => prefix_successor(&key_prefix).map(|key| End {
                key,
                inclusive: false,
            }),
            None => None,
        };
        Ok(RangeSpec {
            lower,
            upper,
            strip: key_prefix.len(),
        })
    }

    fn above_lower(&self, cmp: &dyn Comparator, key: &[u8]) -> bool {
        match &self.lower {
            None => true,
            Some(b) => match cmp.compare(key, &b.key) {
                Ordering::Greater => true,
                Ordering::Equal => b.inclusive,
                Ordering::Less => false,
            },
        }
    }

    fn below_upper(&self, cmp: &dyn Comparator, key: &[u8]) -> bool {
        match &self.upper {
            None => true,
            Some(b) => match cmp.compare(key, &b.key) {
                Ordering::Less => true,
                Ordering::Equal => b.inclusive,
                Ordering::Greater => false,
            },
        }
    }
}

/// Where an `Iterator` stands. Like a Python list iterator, it stands *between* entries:
/// `next` (forward) returns the entry after the gap and moves past it, `prev` moves back over
/// the entry before the gap and returns it, so `next` then `prev` return the same entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pos {
    /// Before the first entry of the range.
    BeforeStart,
    /// After the last entry of the range.
    AfterStop,
    /// The gap is just before the entry under the cursor (which may lie past the range's
    /// upper end: `next` then finds the range exhausted).
    Before,
    /// The gap is just after the entry under the cursor (an entry of the range).
    After,
}

struct Cursor {
    it: DbIterator,
    pos: Pos,
}

/// What a move found: an entry (the cursor is on it) or the end of the range.
type Found = bool;

impl Cursor {
    fn status(&self) -> Result<(), Failure> {
        Ok(self.it.status()?)
    }

    /// Puts the cursor on the first entry of the range (or an entry past it, or nowhere).
    fn seek_first(&mut self, spec: &RangeSpec, cmp: &dyn Comparator) {
        match &spec.lower {
            None => self.it.seek_to_first(),
            Some(b) => {
                self.it.seek(&b.key);
                if !b.inclusive
                    && self.it.valid()
                    && cmp.compare(self.it.key(), &b.key) == Ordering::Equal
                {
                    self.it.next();
                }
            }
        }
    }

    /// Puts the cursor on the last entry at or below the range's upper end (or nowhere).
    fn seek_last(&mut self, spec: &RangeSpec, cmp: &dyn Comparator) {
        match &spec.upper {
            None => self.it.seek_to_last(),
            Some(b) => {
                self.it.seek(&b.key);
                if !self.it.valid() {
                    self.it.seek_to_last();
                } else if !spec.below_upper(cmp, self.it.key()) {
                    self.it.prev();
                }
            }
        }
    }

    /// Forward over one entry: the entry after the gap, if the range has one.
    fn forward(&mut self, spec: &RangeSpec, cmp: &dyn Comparator) -> Result<Found, Failure> {
        match self.pos {
            Pos::AfterStop => return Ok(false),
            Pos::BeforeStart => self.seek_first(spec, cmp),
            Pos::After => self.it.next(),
            Pos::Before => {}
        }
        self.status()?;
        if self.it.valid() && spec.below_upper(cmp, self.it.key()) {
            self.pos = Pos::After;
            Ok(true)
        } else {
            self.pos = Pos::AfterStop;
            Ok(false)
        }
    }

    /// Back over one entry: the entry before the gap, if the range has one.
    fn backward(&mut self, spec: &RangeSpec, cmp: &dyn Comparator) -> Result<Found, Failure> {
        match self.pos {
            Pos::BeforeStart => return Ok(false),
            Pos::After => {
                self.pos = Pos::Before;
                return Ok(true);
            }
            Pos::AfterStop => self.seek_last(spec, cmp),
            Pos::Before => self.it.prev(),
        }
        self.status()?;
        if self.it.valid() && spec.above_lower(cmp, self.it.key()) {
            self.pos = Pos::Before;
            Ok(true)
        } else {
            self.pos = Pos::BeforeStart;
            Ok(false)
        }
    }

    /// Puts the gap just before the first entry at or after `target`, within the range.
    fn seek(
        &mut self,
        spec: &RangeSpec,
        cmp: &dyn Comparator,
        target: &[u8],
    ) -> Result<(), Failure> {
        if !spec.above_lower(cmp, target) {
            self.pos = Pos::BeforeStart;
        } else if !spec.below_upper(cmp, target) {
            self.pos = Pos::AfterStop;
        } else {
            self.it.seek(target);
            self.status()?;
            self.pos = if self.it.valid() {
                Pos::Before
            } else {
                Pos::AfterStop
            };
        }
        Ok(())
    }
}

/// Makes a cursor with the GIL released (it may read table indexes).
fn new_cursor(
    py: Python<'_>,
    db: Arc<Db>,
    snapshot: Option<Arc<strata::Snapshot>>,
    options: ReadOptions<'static>,
) -> PyResult<DbIterator> {
    blocking(py, move || {
        let options = ReadOptions {
            snapshot: snapshot.as_deref(),
            ..options
        };
        Ok(db.iter_opt(&options)?)
    })
}

/// plyvel's `Iterator`: the entries of a range, forward or in reverse.
#[pyclass(module = "strata._strata", name = "Iterator", frozen)]
pub struct PyIterator {
    handle: Arc<Handle>,
    /// `None` once closed. Locked for a whole step; the GIL is released inside it.
    cursor: Mutex<Option<Cursor>>,
    spec: RangeSpec,
    reverse: bool,
    include_key: bool,
    include_value: bool,
}

impl PyIterator {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        py: Python<'_>,
        handle: &Arc<Handle>,
        db: Arc<Db>,
        snapshot: Option<Arc<strata::Snapshot>>,
        spec: RangeSpec,
        reverse: bool,
        include_key: bool,
        include_value: bool,
        options: ReadOptions<'static>,
    ) -> PyResult<PyIterator> {
        let it = new_cursor(py, db, snapshot, options)?;
        Ok(PyIterator {
            handle: handle.clone(),
            cursor: Mutex::new(Some(Cursor {
                it,
                pos: if reverse {
                    Pos::AfterStop
                } else {
                    Pos::BeforeStart
                },
            })),
            spec,
            reverse,
            include_key,
            include_value,
        })
    }

    /// One step, `forward` in key order or not; the entry as plyvel yields it, or
    /// StopIteration.
    fn step(&self, py: Python<'_>, forward: bool) -> PyResult<Py<PyAny>> {
        if !self.handle.is_open() {
            return Err(iterator_closed());
        }
        let mut guard = lock_detached(py, &self.cursor);
        let cursor = guard.as_mut().ok_or_else(iterator_closed)?;
        let spec = &self.spec;
        let cmp = &*self.handle.cmp;
        let include_value = self.include_value;
        let found = blocking(py, || {
            let found = if forward {
                cursor.forward(spec, cmp)?
            } else {
                cursor.backward(spec, cmp)?
            };
            if found && include_value {
                // A value kept in a blob file is read here, without the GIL.
                cursor.it.try_value()?;
            }
            Ok(found)
        })?;
        if !found {
            return Err(PyStopIteration::new_err(()));
        }
        let it = &cursor.it;
        // A key shorter than the prefix can lie in a prefixed view's range only under a
        // comparator that is not bytewise; it is yielded whole rather than cut.
        let key = || PyBytes::new(py, it.key().get(spec.strip..).unwrap_or(it.key()));
        let value = || -> PyResult<Bound<'_, PyBytes>> {
            let v = it.try_value().map_err(|e| crate::errors::to_py(py, e))?;
            Ok(PyBytes::new(py, v))
        };
        Ok(match (self.include_key, self.include_value) {
            (true, true) => PyTuple::new(py, [key().into_any(), value()?.into_any()])?
                .into_any()
                .unbind(),
            (true, false) => key().into_any().unbind(),
            (false, true) => value()?.into_any().unbind(),
            // plyvel yields None for each entry then.
            (false, false) => py.None(),
        })
    }

    fn close_cursor(&self, py: Python<'_>) {
        let taken = lock_detached(py, &self.cursor).take();
        py.detach(move || drop(taken));
    }
}

impl Drop for PyIterator {
    fn drop(&mut self) {
        drop_without_gil(&mut self.cursor);
    }
}

/// Drops the cursor in `slot`, if any, with the GIL released: a cursor's drop may delete files
/// its view kept alive.
fn drop_without_gil<C: Send>(slot: &mut Mutex<Option<C>>) {
    let cursor = slot.get_mut().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(cursor) = cursor {
        Python::attach(|py| py.detach(move || drop(cursor)));
    }
}

#[pymethods]
impl PyIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.step(py, !self.reverse)
    }

    /// Moves back over one entry and returns it (for a reverse iterator: towards the end of
    /// the key space).
    fn prev(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.step(py, self.reverse)
    }

    /// Moves before the first entry of the range: `next()` of a forward iterator then
    /// returns it.
    fn seek_to_start(&self, py: Python<'_>) -> PyResult<()> {
        self.set_pos(py, Pos::BeforeStart)
    }

    /// Moves after the last entry of the range: `next()` of a reverse iterator then returns
    /// it.
    fn seek_to_stop(&self, py: Python<'_>) -> PyResult<()> {
        self.set_pos(py, Pos::AfterStop)
    }

    /// Moves just before the first entry at or after `target` (within the range).
    fn seek(&self, py: Python<'_>, target: &[u8]) -> PyResult<()> {
        if !self.handle.is_open() {
            return Err(iterator_closed());
        }
        let mut guard = lock_detached(py, &self.cursor);
        let cursor = guard.as_mut().ok_or_else(iterator_closed)?;
        let target = prefixed(&self.key_prefix(), target);
        let spec = &self.spec;
        let cmp = &*self.handle.cmp;
        blocking(py, || cursor.seek(spec, cmp, &target))
    }

    /// Closes the iterator; later steps raise `RuntimeError`.
    fn close(&self, py: Python<'_>) {
        self.close_cursor(py);
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
        self.close_cursor(py);
        false
    }
}

impl PyIterator {
    fn set_pos(&self, py: Python<'_>, pos: Pos) -> PyResult<()> {
        if !self.handle.is_open() {
            return Err(iterator_closed());
        }
        let mut guard = lock_detached(py, &self.cursor);
        guard.as_mut().ok_or_else(iterator_closed)?.pos = pos;
        Ok(())
    }

    /// The prefix of a `PrefixedDB`'s iterator (empty otherwise).
    fn key_prefix(&self) -> Vec<u8> {
        match &self.spec.lower {
            Some(b) if self.spec.strip > 0 => b.key[..self.spec.strip].to_vec(),
            _ => Vec::new(),
        }
    }
}

/// plyvel's `RawIterator`: LevelDB's cursor, which raises `IteratorInvalidError` when used
/// while not on an entry.
#[pyclass(module = "strata._strata", name = "RawIterator", frozen)]
pub struct PyRawIterator {
    handle: Arc<Handle>,
    /// `None` once closed.
    cursor: Mutex<Option<DbIterator>>,
}

impl PyRawIterator {
    pub(crate) fn open(
        py: Python<'_>,
        handle: &Arc<Handle>,
        db: Arc<Db>,
        snapshot: Option<Arc<strata::Snapshot>>,
        options: ReadOptions<'static>,
    ) -> PyResult<PyRawIterator> {
        let it = new_cursor(py, db, snapshot, options)?;
        Ok(PyRawIterator {
            handle: handle.clone(),
            cursor: Mutex::new(Some(it)),
        })
    }

    /// Runs `f` on the open cursor, with the GIL released; `need_valid` refuses a cursor
    /// that is not on an entry (IteratorInvalidError).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        need_valid: bool,
        f: impl FnOnce(&mut DbIterator) -> T + Send,
    ) -> PyResult<T> {
        if !self.handle.is_open() {
            return Err(iterator_closed());
        }
        let mut guard = lock_detached(py, &self.cursor);
        let it = guard.as_mut().ok_or_else(iterator_closed)?;
        if need_valid && !it.valid() {
            return Err(new_err(py, Kind::IteratorInvalid, String::new()));
        }
        let out = blocking(py, move || {
            let out = f(it);
            it.status()?;
            Ok(out)
        })?;
        Ok(out)
    }

    fn read<'py>(&self, py: Python<'py>, key: bool, value: bool) -> PyResult<Bound<'py, PyAny>> {
        if !self.handle.is_open() {
            return Err(iterator_closed());
        }
        let mut guard = lock_detached(py, &self.cursor);
        let it = guard.as_mut().ok_or_else(iterator_closed)?;
        if !it.valid() {
            return Err(new_err(py, Kind::IteratorInvalid, String::new()));
        }
        if value {
            let it = &mut *it;
            blocking(py, move || Ok(it.try_value().map(|_| ())?))?;
        }
        let k = || PyBytes::new(py, it.key()).into_any();
        let v = || -> PyResult<Bound<'py, PyAny>> {
            let v = it.try_value().map_err(|e| crate::errors::to_py(py, e))?;
            Ok(PyBytes::new(py, v).into_any())
        };
        Ok(match (key, value) {
            (true, true) => PyTuple::new(py, [k(), v()?])?.into_any(),
            (true, false) => k(),
            _ => v()?,
        })
    }
}

impl Drop for PyRawIterator {
    fn drop(&mut self) {
        drop_without_gil(&mut self.cursor);
    }
}

#[pymethods]
impl PyRawIterator {
    /// True if the cursor is on an entry.
    fn valid(&self, py: Python<'_>) -> PyResult<bool> {
        if !self.handle.is_open() {
            return Err(iterator_closed());
        }
        let guard = lock_detached(py, &self.cursor);
        Ok(guard.as_ref().ok_or_else(iterator_closed)?.valid())
    }

    fn seek_to_first(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, false, |it| it.seek_to_first())
    }

    fn seek_to_last(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, false, |it| it.seek_to_last())
    }

    fn seek(&self, py: Python<'_>, target: &[u8]) -> PyResult<()> {
        self.with(py, false, move |it| it.seek(target))
    }

    fn next(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, true, |it| it.next())
    }

    fn prev(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, true, |it| it.prev())
    }

    fn key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.read(py, true, false)
    }

    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.read(py, false, true)
    }

    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.read(py, true, true)
    }

    /// Closes the iterator; later calls raise `RuntimeError`.
    fn close(&self, py: Python<'_>) {
        let taken = lock_detached(py, &self.cursor).take();
        py.detach(move || drop(taken));
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
