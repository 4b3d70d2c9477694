// SPDX-License-Identifier: MIT OR Apache-2.0
//! What a panic leaves behind: a poisoned database, never a hung one.
//!
//! A user's comparator or filter policy (or a bug) may panic in any thread that reads or
//! writes keys: a writer leading a group, the background thread, the blob collector. A thread
//! that unwinds out of such work may leave the writer queue's front, an immutable memtable or
//! a manual compaction in place, and every thread waiting on them would wait forever. So each
//! such stretch of work runs under a [`PoisonOnUnwind`] guard: if it is dropped by an unwind,
//! it keeps [`Error::Poisoned`] as the database's error (every later write fails with it), fails
//! and removes the queue entries the thread was leading, and wakes every waiter. A panic while
//! the state mutex is held poisons the mutex; `DbInner::lock_state` turns that into the same
//! error. Reads take no lock on their hot path and go on; `Drop` returns.
//!
//! Invariant for the guard's users: the thread holds no lock of the database when the guard is
//! dropped (the guard takes the state mutex). Declare it before any state guard of the same
//! scope, and end its scope before re-locking.

use super::write::leave_front;
use super::DbInner;
use crate::error::Error;

/// Poisons the database if dropped while its thread unwinds from a panic.
pub(crate) struct PoisonOnUnwind<'a> {
    inner: &'a DbInner,
    /// Where the panic happened, for the error.
    context: &'static str,
    /// Writers at the front of the queue that this thread leads (itself included): failed and
    /// removed from the queue on unwind.
    leading: usize,
}

impl<'a> PoisonOnUnwind<'a> {
    /// A guard for work that leads no queue entry.
    pub(crate) fn new(inner: &'a DbInner, context: &'static str) -> Self {
        PoisonOnUnwind {
            inner,
            context,
            leading: 0,
        }
    }

    /// A guard for work done at the front of the writer queue for the first `leading` entries.
    pub(crate) fn leading(inner: &'a DbInner, context: &'static str, leading: usize) -> Self {
        PoisonOnUnwind {
            inner,
            context,
            leading,
        }
    }
}

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let inner = self.inner;
        let mut state = inner.lock_state();
        inner.set_error(&mut state, &Error::poisoned(self.context));
        let error = state.bg_error.clone().expect("set above");
        leave_front(&mut state, self.leading, Some(&Err(error)));
        inner.bg_work.notify_all();
        inner.blob_gc_work.notify_all();
        super::open::info!(
            inner,
            "a panic {}: the database accepts no more writes",
            self.context
        );
    }
}
