// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`TwoLevelIter`]: a cursor over an index cursor whose entries each name a second-level cursor
//! (a table's index block naming its data blocks; a level's file list naming its tables).
//!
//! It owns the walk: stepping across second-level boundaries in both directions, skipping
//! second-level cursors with no entries, and stopping at the first error. It does not know
//! what an index entry means or how the cursor it names is opened; a [`SecondLevel`] does. The
//! types are generic parameters, so the per-entry path (`next`, `prev`, `key`, `value`) is
//! monomorphized: no dynamic dispatch and no allocation is added to it.

use super::read_ahead::ReadAhead;
use super::{BlockLane, InternalIterator};
use crate::error::{Error, Result};

/// What the entries of an index cursor name, and how to open it.
pub(crate) trait SecondLevel {
    /// The index cursor. Requires: its keys are sorted like the second-level keys, and the
    /// entry for a second-level cursor has a key `>=` that cursor's last key and `<` the next
    /// cursor's first key, so that seeking the index finds the only cursor that may hold a key.
    type Index: InternalIterator;
    /// The cursor an index entry names.
    type Iter: InternalIterator;
    /// Names a second-level cursor; equal ids name the same entries.
    type Id: Copy + PartialEq;

    /// The id of the cursor named by the entry `index` is on. Requires: `index.valid()`.
    ///
    /// # Errors
    /// Corruption if the index entry does not decode.
    fn id(&self, index: &Self::Index) -> Result<Self::Id>;

    /// Opens the cursor `id` names, which `index` is on; it need not be positioned.
    ///
    /// # Errors
    /// Whatever opening it meets (I/O, corruption).
    fn open(&self, index: &Self::Index, id: Self::Id) -> Result<Self::Iter>;

    /// Makes `slot` the cursor `id` names, unpositioned. The cursor `slot` holds (named by
    /// another id) may be reused rather than dropped, keeping its buffers: a scan then
    /// allocates nothing per second-level cursor for them. The default opens a new one. On an
    /// error `slot` may hold anything; the caller closes it.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    fn open_into(
        &self,
        index: &Self::Index,
        id: Self::Id,
        slot: &mut Option<Self::Iter>,
    ) -> Result<()> {
        *slot = Some(self.open(index, id)?);
        Ok(())
    }

    /// Makes `slot` the cursor `id` names, as [`open_into`](Self::open_into) does, and seeks
    /// it to `target`. A second level may do both at once, reading only what the seek needs
    /// (a data block decoded as far as the entry found). The default opens, then seeks.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    fn seek_into(
        &self,
        index: &Self::Index,
        id: Self::Id,
        target: &[u8],
        slot: &mut Option<Self::Iter>,
    ) -> Result<()> {
        self.open_into(index, id, slot)?;
        if let Some(cursor) = slot {
            cursor.seek(target);
        }
        Ok(())
    }

    /// Asked when a forward walk has just opened the cursor `id` names (stepping into it, or
    /// at `seek_to_first`; not at a seek, which may read no further): the cursor after it is
    /// likely next. Returns the bytes that one will read, if they lie in memory (a table: the
    /// stored bytes after the block, in its mapping), and the walk fetches them into the CPU
    /// cache a little at each step through this cursor ([`ReadAhead`]). Default: none.
    fn expect_next(&self, id: Self::Id) -> Option<&[u8]> {
        let _ = id;
        None
    }

    /// [`expect_next`](Self::expect_next) for a backward walk: the cursor before `id`'s is
    /// likely next. Default: none. (A walk that turns around keeps the bytes it was given
    /// until the next cursor opens: a few useless prefetches, nothing else.)
    fn expect_previous(&self, id: Self::Id) -> Option<&[u8]> {
        let _ = id;
        None
    }

    /// [`InternalIterator::block_lane`] for the whole two-level cursor, which is on `data`'s
    /// entry, named by `index`'s. Default: none.
    fn lane<'a>(
        index: &'a Self::Index,
        data: &'a mut Self::Iter,
        steps: usize,
    ) -> Option<BlockLane<'a>> {
        let _ = (index, data, steps);
        None
    }

    /// [`InternalIterator::may_pass_seeks`] for the whole two-level cursor. Default: false.
    fn may_pass_seeks(&self) -> bool {
        false
    }

    /// [`InternalIterator::seek_passes`] for the whole two-level cursor, answered from the
    /// index cursor (which it must not move) and what the entries name. Default: false.
    fn seek_passes(&self, index: &Self::Index, target: &[u8], key: &[u8]) -> bool {
        let _ = (index, target, key);
        false
    }
}

/// A cursor over the entries of every second-level cursor an index cursor names, in index
/// order.
///
/// Invariants:
/// 1. `data` and `data_id` are both `Some` or both `None`. When they are `Some`, the index
///    cursor is valid, `data_id` is the id of its entry, and `data` was opened from that id.
/// 2. Once `error` is set it stays set and `data` is `None`: the cursor is invalid and
///    `status` returns the error (contract item 5).
/// 3. After every public move, either `data` is on an entry, or the walk ran out of index
///    entries with every cursor it passed reporting `Ok`, or `error` is set. An empty or failed
///    second-level cursor is never left behind as the position.
pub(crate) struct TwoLevelIter<S: SecondLevel> {
    index: S::Index,
    second: S,
    /// Kept apart from `data` so that the compiler builds the cursor `open` returns directly in
    /// `data`: moved into an `(id, cursor)` tuple it is copied, and a table cursor is large.
    data: Option<S::Iter>,
    data_id: Option<S::Id>,
    error: Option<Error>,
    /// What the walk expects to read after the open cursor ([`SecondLevel::expect_next`]),
    /// fetched a little at each step within it.
    ahead: ReadAhead,
}

impl<S: SecondLevel> TwoLevelIter<S> {
    /// A cursor over what `index`'s entries name, opened through `second`. Unpositioned.
    pub(crate) fn new(index: S::Index, second: S) -> Self {
        TwoLevelIter {
            index,
            second,
            data: None,
            data_id: None,
            error: None,
            ahead: ReadAhead::default(),
        }
    }

    /// Unpositions the cursor and lends out its parts for pointing it at other entries (a
    /// level's cursor moving on to another table): its index cursor and second level, to be
    /// re-pointed, and the second-level cursor that was open, taken out (none is open after),
    /// for the new second level to reuse. The cursor is unpositioned, without error, as new.
    pub(crate) fn restart(&mut self) -> (&mut S::Index, &mut S, Option<S::Iter>) {
        self.data_id = None;
        self.error = None;
        self.ahead = ReadAhead::default();
        (&mut self.index, &mut self.second, self.data.take())
    }

    /// The second level the cursor opens its cursors through.
    pub(crate) fn second(&self) -> &S {
        &self.second
    }

    /// A seek whose index entry the caller found without the index cursor: `id` names the
    /// entry's second-level cursor (`None`: every entry is before `target`). That cursor is
    /// sought first, by `seek_data` (or, if it is the open one, by its own seek); then
    /// `position_index` puts the index cursor on the entry, so that the entry's bytes are not
    /// waited for before the data's are read. Requires: `position_index` leaves the index
    /// cursor on an entry naming `id` (past the end for `None`), or invalid with an error.
    pub(crate) fn seek_located(
        &mut self,
        target: &[u8],
        id: Option<S::Id>,
        seek_data: impl FnOnce(&S, &mut Option<S::Iter>) -> Result<()>,
        position_index: impl FnOnce(&mut S::Index),
    ) {
        self.ahead.start(None);
        if self.error.is_some() {
            return self.close();
        }
        let Some(id) = id else {
            position_index(&mut self.index);
            return self.close();
        };
        if self.data_id == Some(id) {
            if let Some(d) = self.data.as_mut() {
                d.seek(target);
            }
        } else {
            match seek_data(&self.second, &mut self.data) {
                Ok(()) => self.data_id = Some(id),
                Err(e) => {
                    position_index(&mut self.index);
                    return self.fail(e);
                }
            }
        }
        position_index(&mut self.index);
        if !self.index.valid() {
            // Invariant 1: no open cursor without its index entry.
            return match self.index.status() {
                Err(e) => self.fail(e),
                Ok(()) => self.close(),
            };
        }
        self.skip_empty_forward();
    }

    /// Makes `data` the cursor the index entry names (invariant 1), keeping the open one when
    /// the entry names it already.
    fn load(&mut self) {
        self.load_then_seek(None);
    }

    /// [`load`](Self::load), then, given a `target`, seeks the loaded cursor to it: through
    /// [`SecondLevel::seek_into`] when the entry names another cursor than the open one.
    #[inline]
    fn load_then_seek(&mut self, target: Option<&[u8]>) {
        if self.error.is_some() || !self.index.valid() {
            self.close();
            return;
        }
        let id = match self.second.id(&self.index) {
            Ok(id) => id,
            Err(e) => return self.fail(e),
        };
        if self.data_id == Some(id) {
            if let (Some(target), Some(d)) = (target, self.data.as_mut()) {
                d.seek(target);
            }
            return;
        }
        let opened = match target {
            None => self.second.open_into(&self.index, id, &mut self.data),
            Some(target) => self.second.seek_into(&self.index, id, target, &mut self.data),
        };
        match opened {
            Ok(()) => self.data_id = Some(id),
            Err(e) => self.fail(e),
        }
    }

    fn close(&mut self) {
        self.data = None;
        self.data_id = None;
    }

    fn fail(&mut self, e: Error) {
        // Invariant 2: the first error is the one kept.
        self.error.get_or_insert(e);
        self.close();
    }

    /// True if the walk may move on to another index entry: no error so far, and neither the
    /// index nor the current second-level cursor reports one (else it is kept, invariant 2).
    fn can_continue(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        let status = self
            .data
            .as_ref()
            .map_or(Ok(()), |d| d.status())
            .and(self.index.status());
        match status {
            Ok(()) => true,
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    /// Invariant 3, forward: moves to the first entry of the next non-empty cursor.
    #[inline(never)]
    fn skip_empty_forward(&mut self) {
        while !self.data_valid() {
            if !self.can_continue() || !self.index.valid() {
                self.close();
                return;
            }
            self.index.next();
            self.load();
            if let Some(id) = self.data_id {
                self.ahead.start(self.second.expect_next(id));
            }
            if let Some(d) = self.data.as_mut() {
                d.seek_to_first();
            }
        }
    }

    /// Invariant 3, backward: moves to the last entry of the previous non-empty cursor.
    #[inline(never)]
    fn skip_empty_backward(&mut self) {
        while !self.data_valid() {
            if !self.can_continue() || !self.index.valid() {
                self.close();
                return;
            }
            self.index.prev();
            self.load();
            if let Some(id) = self.data_id {
                self.ahead.start(self.second.expect_previous(id));
            }
            if let Some(d) = self.data.as_mut() {
                d.seek_to_last();
            }
        }
    }

    fn data(&self) -> &S::Iter {
        self.data.as_ref().expect("requires valid()")
    }
}

impl<S: SecondLevel> InternalIterator for TwoLevelIter<S> {
    #[inline]
    fn valid(&self) -> bool {
        self.error.is_none() && self.data_valid()
    }

    fn seek_to_first(&mut self) {
        self.index.seek_to_first();
        self.load();
        if let Some(id) = self.data_id {
            self.ahead.start(self.second.expect_next(id));
        }
        if let Some(d) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_empty_forward();
    }

    fn seek_to_last(&mut self) {
        self.index.seek_to_last();
        self.load();
        if let Some(id) = self.data_id {
            self.ahead.start(self.second.expect_previous(id));
        }
        if let Some(d) = self.data.as_mut() {
            d.seek_to_last();
        }
        self.skip_empty_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        // What an earlier walk expected is not what this position reads next.
        self.ahead.start(None);
        self.index.seek(target);
        self.load_then_seek(Some(target));
        self.skip_empty_forward();
    }

    #[inline]
    fn next(&mut self) {
        if let Some(d) = self.data.as_mut() {
            d.next();
            // The per-entry path: most steps stay inside the second-level cursor.
            if d.valid() {
                self.ahead.step();
                return;
            }
        }
        self.skip_empty_forward();
    }

    #[inline]
    fn prev(&mut self) {
        if let Some(d) = self.data.as_mut() {
            d.prev();
            // The per-entry path: most steps stay inside the second-level cursor.
            if d.valid() {
                self.ahead.step();
                return;
            }
        }
        self.skip_empty_backward();
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.data().key()
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.data().value()
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.index.status()?;
        self.data.as_ref().map_or(Ok(()), |d| d.status())
    }

    fn may_pass_seeks(&self) -> bool {
        self.second.may_pass_seeks()
    }

    fn seek_passes(&self, target: &[u8], key: &[u8]) -> bool {
        self.second.seek_passes(&self.index, target, key)
    }

    #[inline]
    fn block_lane(&mut self, steps: usize) -> Option<BlockLane<'_>> {
        if self.error.is_some() {
            return None;
        }
        let data = self.data.as_mut()?;
        for _ in 0..steps {
            self.ahead.step();
        }
        S::lane(&self.index, data, steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::bytewise;
    use crate::iter::contract::{check_against_model, check_errors_surface};
    use crate::iter::VecIter;

    type Entry = (Vec<u8>, Vec<u8>);

    fn damage() -> Error {
        Error::corruption("/test", 7, "test damage")
    }

    /// Second-level cursors over in-memory groups, any one of which can be made to fail.
    #[derive(Clone, Default)]
    struct Groups {
        groups: Vec<Vec<Entry>>,
        /// The ids `expect_next` (true) and `expect_previous` (false) were given, in order.
        hints: std::rc::Rc<std::cell::RefCell<Vec<(bool, usize)>>>,
        /// What `expect_next` and `expect_previous` say the next cursor reads (none if empty).
        read_next: Vec<u8>,
        /// Opening this group fails.
        open_fails: Option<usize>,
        /// This group's cursor fails on its n-th move (0: the first).
        cursor_fails: Option<(usize, usize)>,
    }

    impl SecondLevel for Groups {
        type Index = VecIter;
        type Iter = VecIter;
        type Id = usize;

        fn id(&self, index: &VecIter) -> Result<usize> {
            let bytes: [u8; 8] = index
                .value()
                .try_into()
                .map_err(|_| Error::corruption("/test", 0, "bad group number"))?;
            Ok(u64::from_le_bytes(bytes) as usize)
        }

        fn open(&self, _: &VecIter, id: usize) -> Result<VecIter> {
            if self.open_fails == Some(id) {
                return Err(damage());
            }
            let mut it = VecIter::new(self.groups[id].clone());
            if let Some((_, moves)) = self.cursor_fails.filter(|(g, _)| *g == id) {
                it.fail_after(moves, damage());
            }
            Ok(it)
        }

        fn expect_next(&self, id: usize) -> Option<&[u8]> {
            self.hints.borrow_mut().push((true, id));
            (!self.read_next.is_empty()).then_some(&self.read_next[..])
        }

        fn expect_previous(&self, id: usize) -> Option<&[u8]> {
            self.hints.borrow_mut().push((false, id));
            (!self.read_next.is_empty()).then_some(&self.read_next[..])
        }
    }

    /// Groups of the given sizes over consecutive keys, their index, and all entries in order.
    /// An empty group's index key lies between its neighbours' keys.
    fn layout(sizes: &[usize]) -> (Vec<Entry>, Groups, Vec<Entry>) {
        let (mut index, mut groups, mut model) = (Vec::new(), Groups::default(), Vec::new());
        let mut last_key: Vec<u8> = Vec::new();
        for (g, &size) in sizes.iter().enumerate() {
            let group: Vec<Entry> = (model.len()..model.len() + size)
                .map(|n| {
                    (
                        format!("k{n:05}").into_bytes(),
                        format!("v{n}").into_bytes(),
                    )
                })
                .collect();
            last_key = match group.last() {
                Some((k, _)) => k.clone(),
                None => [&last_key[..], b"\0"].concat(),
            };
            index.push((last_key.clone(), (g as u64).to_le_bytes().to_vec()));
            model.extend(group.iter().cloned());
            groups.groups.push(group);
        }
        (index, groups, model)
    }

    /// Uneven groups, with runs of empty ones at both ends and in the middle.
    fn sizes() -> Vec<usize> {
        let mut sizes = vec![0, 0, 1];
        sizes.extend((0..40).map(|i| [0, 3, 1, 0, 0, 5, 2][i % 7]));
        sizes.extend([0, 0]);
        sizes
    }

    fn probes(model: &[Entry]) -> Vec<Vec<u8>> {
        let mut probes: Vec<Vec<u8>> = (0..=model.len() * 2)
            .map(|n| format!("k{:05}", n / 2).into_bytes())
            .collect();
        probes.extend(model.iter().map(|(k, _)| [&k[..], b"\0"].concat()));
        probes.extend([Vec::new(), b"\0".to_vec(), b"z".to_vec()]);
        probes
    }

    #[test]
    fn walk_across_uneven_and_empty_groups_meets_the_contract() {
        let (index, groups, model) = layout(&sizes());
        let mut it = TwoLevelIter::new(VecIter::new(index), groups);
        check_against_model(&mut it, &model, &*bytewise(), &probes(&model));
    }

    #[test]
    fn walks_hint_each_cursor_they_open_in_their_direction_and_seeks_none() {
        let (index, groups, model) = layout(&[2, 0, 3, 1]);
        let hints = groups.hints.clone();
        let mut it = TwoLevelIter::new(VecIter::new(index), groups);
        it.seek(b"k00003");
        assert!(it.valid() && hints.borrow().is_empty());
        it.seek_to_first();
        let mut forward = 0;
        while it.valid() {
            forward += 1;
            it.next();
        }
        assert_eq!(forward, model.len());
        let opened: Vec<(bool, usize)> = (0..4).map(|id| (true, id)).collect();
        assert_eq!(*hints.borrow(), opened);
        hints.borrow_mut().clear();
        it.seek_to_last();
        let mut backward = 0;
        while it.valid() {
            backward += 1;
            it.prev();
        }
        assert_eq!(backward, model.len());
        let opened: Vec<(bool, usize)> = (0..4).rev().map(|id| (false, id)).collect();
        assert_eq!(*hints.borrow(), opened);
    }

    #[test]
    fn walks_fetch_what_the_next_cursor_reads_a_little_per_step_and_seeks_fetch_nothing() {
        let (index, mut groups, _) = layout(&[20, 5]);
        groups.read_next = vec![0; 1000];
        let mut it = TwoLevelIter::new(VecIter::new(index), groups);
        it.seek_to_first();
        assert_eq!(it.ahead.remaining(), 1000);
        for _ in 0..3 {
            it.next();
        }
        assert_eq!(it.ahead.remaining(), 1000 - 3 * 128);
        it.seek(b"k00003");
        assert_eq!(it.ahead.remaining(), 0, "a seek forgets what the walk expected");
        it.next();
        assert_eq!(it.ahead.remaining(), 0, "and expects nothing");
        it.seek_to_last();
        assert_eq!(it.ahead.remaining(), 1000);
        it.prev();
        assert_eq!(it.ahead.remaining(), 1000 - 128);
    }

    #[test]
    fn no_groups_or_only_empty_ones_show_no_entries() {
        for sizes in [&[][..], &[0], &[0, 0, 0]] {
            let (index, groups, model) = layout(sizes);
            let mut it = TwoLevelIter::new(VecIter::new(index), groups);
            check_against_model(&mut it, &model, &*bytewise(), &probes(&model));
        }
    }

    #[test]
    fn a_second_level_cursor_that_fails_to_open_surfaces_its_error() {
        let (index, groups, model) = layout(&sizes());
        for g in 0..groups.groups.len() {
            let groups = Groups {
                open_fails: Some(g),
                ..groups.clone()
            };
            check_errors_surface(
                || TwoLevelIter::new(VecIter::new(index.clone()), groups.clone()),
                &model,
            );
        }
    }

    #[test]
    fn a_second_level_cursor_that_fails_while_moving_surfaces_its_error() {
        let (index, groups, model) = layout(&sizes());
        for (g, group) in groups.groups.iter().enumerate() {
            // Every full scan makes at least one move in each group, two in non-empty ones.
            let moves = if group.is_empty() { 1 } else { 2 };
            for m in 0..moves {
                let groups = Groups {
                    cursor_fails: Some((g, m)),
                    ..groups.clone()
                };
                check_errors_surface(
                    || TwoLevelIter::new(VecIter::new(index.clone()), groups.clone()),
                    &model,
                );
            }
        }
    }

    #[test]
    fn an_index_cursor_that_fails_surfaces_its_error() {
        let (index, groups, model) = layout(&sizes());
        // A full scan moves the index once per group and once more past the end.
        for m in 0..=index.len() {
            check_errors_surface(
                || {
                    let mut index = VecIter::new(index.clone());
                    index.fail_after(m, damage());
                    TwoLevelIter::new(index, groups.clone())
                },
                &model,
            );
        }
    }

    #[test]
    fn an_index_entry_that_does_not_decode_surfaces_its_error() {
        let (index, groups, model) = layout(&sizes());
        for g in 0..index.len() {
            let mut index = index.clone();
            index[g].1.pop();
            check_errors_surface(
                || TwoLevelIter::new(VecIter::new(index.clone()), groups.clone()),
                &model,
            );
        }
    }
}
