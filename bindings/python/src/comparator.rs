// SPDX-License-Identifier: MIT OR Apache-2.0
//! A Python callable as a strata [`Comparator`].

use std::cmp::Ordering;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use strata::Comparator;

/// Orders keys by calling a Python function `f(a: bytes, b: bytes) -> int` (negative, zero or
/// positive, as plyvel's comparators).
///
/// strata calls it from any thread, the background compaction thread included, and never
/// with the GIL held: every call from this binding into strata releases the GIL first, so
/// [`compare`](Comparator::compare) takes it here for the length of one call.
///
/// If the function raises (or returns something not comparable with 0), the exception is
/// reported through `sys.unraisablehook` (printed to stderr by default) and `compare` panics.
/// strata turns such a panic into a stopped (poisoned) database: the operation that met it,
/// and every later write, fails with `strata.Error`; reads go on; the process does not abort
/// (plyvel aborts the process instead, since LevelDB has no way to report the failure).
pub(crate) struct PyComparator {
    name: String,
    func: Py<PyAny>,
}

impl PyComparator {
    pub(crate) fn new(name: String, func: Py<PyAny>) -> Self {
        PyComparator { name, func }
    }

    fn call(&self, py: Python<'_>, a: &[u8], b: &[u8]) -> PyResult<Ordering> {
        let result = self
            .func
            .call1(py, (PyBytes::new(py, a), PyBytes::new(py, b)))?;
        let result = result.bind(py);
        if result.lt(0)? {
            Ok(Ordering::Less)
        } else if result.gt(0)? {
            Ok(Ordering::Greater)
        } else {
            Ok(Ordering::Equal)
        }
    }
}

impl Comparator for PyComparator {
    fn name(&self) -> &str {
        &self.name
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        Python::attach(|py| match self.call(py, a, b) {
            Ok(order) => order,
            Err(err) => {
                err.write_unraisable(py, Some(self.func.bind(py)));
                panic!("the Python comparator {:?} raised an exception", self.name);
            }
        })
    }

    // Leaving keys unchanged is always correct; shortening them would mean more calls into
    // Python for a little less index space.
    fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}

    fn find_short_successor(&self, _key: &mut Vec<u8>) {}
}
