// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Snapshot`]: a consistent, read-only view of the database as of one sequence number.
//!
//! The database keeps the seqnos of live snapshots in a [`SnapshotList`]; compaction keeps every
//! entry a live snapshot can see (it drops an overwritten or deleted entry only when no snapshot
//! lies between it and its newer version).
//!
//! Locking: the list has its own mutex, held only to add, remove or read the oldest seqno.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::db::ReadView;
use crate::key::SeqNo;

/// A view of the database as of the moment [`Db::snapshot`](crate::Db::snapshot) was called.
/// Reads given this snapshot (in [`ReadOptions`](crate::ReadOptions)) see exactly the writes made
/// before it. It is released when dropped.
///
/// # Example
///
/// ```
/// use strata::{Db, Options, ReadOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put(b"k", b"before")?;
/// let snapshot = db.snapshot();
/// db.put(b"k", b"after")?;
/// let at_snapshot = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
/// assert_eq!(db.get_opt(b"k", &at_snapshot)?.as_deref(), Some(&b"before"[..]));
/// assert_eq!(db.get(b"k")?.as_deref(), Some(&b"after"[..]));
/// # Ok::<(), strata::Error>(())
/// ```
pub struct Snapshot {
    seqno: SeqNo,
    list: Arc<SnapshotList>,
    /// A read-only handle's snapshot holds the view it was taken in (its version and files):
    /// `Db::catch_up` moves the handle on, and the writer compacts without knowing of it.
    view: Option<Arc<ReadView>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("seqno", &self.seqno)
            .finish_non_exhaustive()
    }
}

impl Snapshot {
    /// The sequence number the snapshot reads at: the last write it sees.
    pub fn seqno(&self) -> SeqNo {
        self.seqno
    }

    /// The view a read-only handle's snapshot reads (`None` on a writable handle, whose
    /// compactions keep what live snapshots see).
    pub(crate) fn view(&self) -> Option<&Arc<ReadView>> {
        self.view.as_ref()
    }

    /// True if this snapshot was taken from the database that owns `list`.
    pub(crate) fn belongs_to(&self, list: &Arc<SnapshotList>) -> bool {
        Arc::ptr_eq(&self.list, list)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.release(self.seqno);
    }
}

/// The seqnos of live snapshots, with a count for each.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at `seqno`.
    pub(crate) fn acquire(self: &Arc<Self>, seqno: SeqNo) -> Snapshot {
        self.register(seqno);
        Snapshot {
            seqno,
            list: self.clone(),
            view: None,
        }
    }

    /// Registers a snapshot at `seqno` that reads `view` (a read-only handle's).
    pub(crate) fn acquire_with_view(
        self: &Arc<Self>,
        seqno: SeqNo,
        view: Arc<ReadView>,
    ) -> Snapshot {
        self.register(seqno);
        Snapshot {
            seqno,
            list: self.clone(),
            view: Some(view),
        }
    }

    fn register(&self, seqno: SeqNo) {
        *self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(seqno)
            .or_default() += 1;
    }

    fn release(&self, seqno: SeqNo) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = live.get_mut(&seqno) {
            *count -= 1;
            if *count == 0 {
                live.remove(&seqno);
            }
        }
    }

    /// The number of live snapshots (two at one seqno count twice).
    pub(crate) fn count(&self) -> usize {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .sum()
    }

    /// The oldest live snapshot's seqno, if any.
    pub(crate) fn oldest(&self) -> Option<SeqNo> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .next()
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_tracks_live_snapshots() {
        let list = Arc::new(SnapshotList::default());
        assert_eq!(list.oldest(), None);
        let a = list.acquire(5);
        let b = list.acquire(3);
        let c = list.acquire(3);
        assert_eq!((list.oldest(), list.count()), (Some(3), 3));
        drop(b);
        assert_eq!((list.oldest(), list.count()), (Some(3), 2));
        drop(c);
        assert_eq!((list.oldest(), list.count()), (Some(5), 1));
        assert!(a.belongs_to(&list));
        assert!(!a.belongs_to(&Arc::new(SnapshotList::default())));
        drop(a);
        assert_eq!((list.oldest(), list.count()), (None, 0));
    }
}
