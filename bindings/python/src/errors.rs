// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata's errors as Python exceptions, and the one way every call into strata is made
//! ([`blocking`]): without the GIL, and with panics caught.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The exception classes, defined in Python (`strata/_errors.py`) so that `IOError` can derive
/// from both `Error` and the built-in `OSError`, as plyvel's does. Looked up once.
static CLASSES: PyOnceLock<[Py<PyType>; 4]> = PyOnceLock::new();

/// Which of the four classes an error becomes.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// `strata.Error`: every other failure.
    Error = 0,
    /// `strata.IOError`: the file system failed, or the database is locked.
    Io = 1,
    /// `strata.CorruptionError`: bytes on disk do not follow the format.
    Corruption = 2,
    /// `strata.IteratorInvalidError`: a raw iterator used while not on an entry.
    IteratorInvalid = 3,
}

fn class(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<_> {
        let m = py.import("strata._errors")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(m.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok([
            get("Error")?,
            get("IOError")?,
            get("CorruptionError")?,
            get("IteratorInvalidError")?,
        ])
    })?;
    Ok(classes[kind as usize].bind(py).clone())
}

/// A Python exception of class `kind` with message `message`, as bytes (plyvel's
/// exceptions carry LevelDB's status message as bytes).
pub(crate) fn new_err(py: Python<'_>, kind: Kind, message: String) -> PyErr {
    let message = pyo3::types::PyBytes::new(py, message.as_bytes());
    match class(py, kind) {
        Ok(cls) => match if message.as_bytes().is_empty() {
            cls.call0()
        } else {
            cls.call1((message,))
        } {
            Ok(instance) => PyErr::from_value(instance),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// A strata error as the Python exception plyvel raises for LevelDB's status of that kind.
pub(crate) fn to_py(py: Python<'_>, err: strata::Error) -> PyErr {
    let kind = match &err {
        strata::Error::Io { .. } | strata::Error::Locked { .. } => Kind::Io,
        strata::Error::Corruption { .. } => Kind::Corruption,
        _ => Kind::Error,
    };
    new_err(py, kind, err.to_string())
}

/// What a call into strata can end with besides its result.
pub(crate) enum Failure {
    /// strata returned an error.
    Strata(strata::Error),
    /// Code under the call panicked (a Python comparator that raised, or a bug).
    Panic(String),
}

impl From<strata::Error> for Failure {
    fn from(e: strata::Error) -> Self {
        Failure::Strata(e)
    }
}

impl Failure {
    /// The Python exception for this failure.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Strata(e) => to_py(py, e),
            Failure::Panic(what) => new_err(
                py,
                Kind::Error,
                format!("strata stopped the operation after a panic: {what}"),
            ),
        }
    }
}

/// Runs `f` (a call into strata, which may do I/O, wait on locks or call a Python comparator)
/// with the GIL released, so that other Python threads run meanwhile, and with any panic
/// caught: no panic crosses into Python.
pub(crate) fn blocking<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> Result<T, Failure> + Send,
{
    let outcome = py.detach(|| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = if let Some(s) = payload.downcast_ref::<&str>() {
                (*s).to_owned()
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s.clone()
            } else {
                "unknown panic".to_owned()
            };
            Err(Failure::Panic(what))
        }
    });
    outcome.map_err(|f| f.into_py(py))
}

/// plyvel's error for an operation on a closed database.
pub(crate) fn db_closed() -> PyErr {
    PyRuntimeError::new_err("Database is closed")
}

/// plyvel's error for an operation on a closed iterator (or one of a closed database).
pub(crate) fn iterator_closed() -> PyErr {
    PyRuntimeError::new_err("Database or iterator is closed")
}

/// plyvel's error for an operation on a released snapshot (or one of a closed database).
pub(crate) fn snapshot_closed() -> PyErr {
    PyRuntimeError::new_err("Database or snapshot is closed")
}
