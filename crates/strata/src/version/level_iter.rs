// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`LevelIter`]: a cursor over the files of one sorted level (>= 1), opening each table as
//! it is reached: the two-level cursor whose index is the level's file list.
//!
//! Requires the version's invariant 2 (files of a level >= 1 do not overlap and are sorted),
//! so that a seek lands on the one file that may hold the target.

use std::cmp::Ordering;
use std::sync::Arc;

use super::file_fences::FileFences;
use super::version::{find_file_fenced, LiveFile};
use crate::cache::TableCache;
use crate::comparator::Comparator;
use crate::error::Result;
use crate::iter::{BlockLane, InternalIterator, SecondLevel, TwoLevelIter};
use crate::key::{user_key, InternalKeyComparator};
use crate::table::{BlockReadOptions, TableIter};

/// A cursor over the files of one sorted level (>= 1), opening each table as it is reached.
/// Crate-private, so the two-level cursor itself serves (`TableIter` wraps its own to keep
/// its block opener out of the public API).
pub(crate) type LevelIter = TwoLevelIter<LevelTables>;

/// A [`LevelIter`] over `files`. Requires: `files` sorted and non-overlapping (invariant 2).
/// With `defer_seeks`, a merge may put off its seeks (see [`LevelTables::seek_passes`]).
pub(crate) fn level_iter(
    icmp: InternalKeyComparator,
    files: Arc<[Arc<LiveFile>]>,
    fences: Option<Arc<FileFences>>,
    table_cache: Arc<TableCache>,
    options: BlockReadOptions,
    defer_seeks: bool,
) -> LevelIter {
    TwoLevelIter::new(
        LevelFileIter::new(icmp, files, fences),
        LevelTables {
            table_cache,
            options,
            defer_seeks,
        },
    )
}

/// Opens the tables of a level's files, through the table cache, for [`LevelIter`].
pub(crate) struct LevelTables {
    table_cache: Arc<TableCache>,
    options: BlockReadOptions,
    /// True if a merge may ask whether a seek would pass (the database's cursors, for every
    /// level but the last: the one most likely to hold a sought key seeks first).
    defer_seeks: bool,
}

impl SecondLevel for LevelTables {
    type Index = LevelFileIter;
    type Iter = TableIter;
    /// The file's number and size.
    type Id = (u64, u64);

    fn id(&self, index: &LevelFileIter) -> Result<(u64, u64)> {
        let f = index.file();
        Ok((f.number, f.file_size))
    }

    /// Through the file's pin when it has one, pinning it when the table cache's budget
    /// allows, as point lookups do: no table cache lookup per cursor.
    #[inline]
    fn open(&self, index: &LevelFileIter, _: (u64, u64)) -> Result<TableIter> {
        index
            .file()
            .with_table(&self.table_cache, |table| table.iter(self.options))
    }

    /// The table cursor in `slot`, if any, is pointed at the new table rather than dropped:
    /// its buffers are kept ([`TableIter::retarget`]).
    #[inline]
    fn open_into(
        &self,
        index: &LevelFileIter,
        id: (u64, u64),
        slot: &mut Option<TableIter>,
    ) -> Result<()> {
        match slot {
            Some(cursor) => index
                .file()
                .with_table(&self.table_cache, |table| cursor.retarget(table, self.options)),
            None => {
                *slot = Some(self.open(index, id)?);
                Ok(())
            }
        }
    }

    fn may_pass_seeks(&self) -> bool {
        self.defer_seeks
    }

    /// The data block cursor of the table cursor.
    #[inline]
    fn lane<'a>(
        _: &'a LevelFileIter,
        data: &'a mut TableIter,
        steps: usize,
    ) -> Option<BlockLane<'a>> {
        data.block_lane(steps)
    }

    /// True if the level has no entry from `target` to `key`, told from the file list and at
    /// most one table's index and filter (no data block): no file ends at or after `target`;
    /// or the file a seek would land in starts after `key`; or `key` has `target`'s user key,
    /// the next file starts after `key`, and the one file that may hold that user key rules it
    /// out (every entry from `target` to `key` has that user key).
    fn seek_passes(&self, index: &LevelFileIter, target: &[u8], key: &[u8]) -> bool {
        if !self.defer_seeks || target.len() < 8 || key.len() < 8 {
            return false;
        }
        let icmp = &index.icmp;
        let files = &index.files;
        let at = index.find(target);
        let Some(file) = files.get(at) else {
            return true;
        };
        if icmp.compare(&file.smallest, key) == Ordering::Greater {
            return true;
        }
        if user_key(key) != user_key(target) {
            return false;
        }
        if files
            .get(at + 1)
            .is_some_and(|next| icmp.compare(&next.smallest, key) != Ordering::Greater)
        {
            return false;
        }
        file.rules_out(&self.table_cache, target)
    }
}

/// The index of a [`LevelIter`]: a cursor over a level's files, keyed by each file's largest
/// key, so that a seek lands on the only file that may hold the target (invariant 2). Its
/// value is the file's number and size, fixed-width little-endian.
pub(crate) struct LevelFileIter {
    icmp: InternalKeyComparator,
    files: Arc<[Arc<LiveFile>]>,
    /// The version's fences of `files`, if it has them.
    fences: Option<Arc<FileFences>>,
    /// The file the cursor is on; `files.len()` when none.
    index: usize,
    /// The value of the file at `index`, when there is one.
    value: [u8; 16],
}

impl LevelFileIter {
    fn new(
        icmp: InternalKeyComparator,
        files: Arc<[Arc<LiveFile>]>,
        fences: Option<Arc<FileFences>>,
    ) -> Self {
        let index = files.len();
        LevelFileIter {
            icmp,
            files,
            fences,
            index,
            value: [0; 16],
        }
    }

    fn go_to(&mut self, index: usize) {
        self.index = index.min(self.files.len());
        if let Some(f) = self.files.get(self.index) {
            self.value[..8].copy_from_slice(&f.number.to_le_bytes());
            self.value[8..].copy_from_slice(&f.file_size.to_le_bytes());
        }
    }

    /// The index of the first file whose largest key is at or after `target`.
    fn find(&self, target: &[u8]) -> usize {
        find_file_fenced(&self.icmp, &self.files, self.fences.as_deref(), target)
    }

    /// The file the cursor is on. Requires: `valid()`.
    fn file(&self) -> &LiveFile {
        &self.files[self.index]
    }
}

impl InternalIterator for LevelFileIter {
    fn valid(&self) -> bool {
        self.index < self.files.len()
    }
    fn seek_to_first(&mut self) {
        self.go_to(0);
    }
    fn seek_to_last(&mut self) {
        // An empty level has no last file: index 0 is then past the end.
        self.go_to(self.files.len().saturating_sub(1));
    }
    fn seek(&mut self, target: &[u8]) {
        self.go_to(self.find(target));
    }
    fn next(&mut self) {
        self.go_to(self.index + 1);
    }
    fn prev(&mut self) {
        // Before the first file is past the end, as for every cursor.
        self.go_to(self.index.checked_sub(1).unwrap_or(self.files.len()));
    }
    fn key(&self) -> &[u8] {
        &self.file().largest
    }
    fn value(&self) -> &[u8] {
        &self.value
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::comparator::bytewise;
    use crate::env::{read_file_to_vec, write_file, Env, MemEnv};
    use crate::filter::BloomFilterPolicy;
    use crate::iter::contract::{check_against_model, check_errors_surface};
    use crate::key::{append_internal_key, SeqNo, ValueKind};
    use crate::table::{TableBuilder, TableOptions};
    use crate::version::FileMetaData;

    type Entry = (Vec<u8>, Vec<u8>);

    fn options() -> TableOptions {
        TableOptions {
            block_size: 128,
            filter_policy: Some(Arc::new(BloomFilterPolicy::new(10))),
            ..TableOptions::default()
        }
    }

    fn ikey(user: &[u8], seqno: SeqNo) -> Vec<u8> {
        let mut k = Vec::new();
        append_internal_key(&mut k, user, seqno, ValueKind::Value);
        k
    }

    /// A level of tables of uneven sizes over consecutive keys, in `env` under `/db`; returns
    /// its files and every entry in order.
    fn level(env: &MemEnv) -> (Vec<Arc<LiveFile>>, Vec<Entry>) {
        env.create_dir_all(Path::new("/db")).unwrap();
        let (mut files, mut model) = (Vec::new(), Vec::new());
        for (i, count) in [1, 7, 30, 2, 1, 12, 25, 3].into_iter().enumerate() {
            let number = 10 + i as u64;
            let path = crate::filename::table_file(Path::new("/db"), number);
            let mut b = TableBuilder::new(options(), env.new_writable_file(&path).unwrap());
            let first = model.len();
            for n in first..first + count {
                let entry = (
                    ikey(format!("key{n:05}").as_bytes(), n as u64 + 1),
                    format!("value{n}").into_bytes(),
                );
                b.add(&entry.0, &entry.1).unwrap();
                model.push(entry);
            }
            let file_size = b.finish(true).unwrap();
            files.push(LiveFile::new(FileMetaData {
                number,
                file_size,
                smallest: model[first].0.clone(),
                largest: model[model.len() - 1].0.clone(),
            }));
        }
        (files, model)
    }

    fn level_iter_in(env: &MemEnv, files: &[Arc<LiveFile>]) -> LevelIter {
        level_iter_with(env, files, true)
    }

    fn level_iter_with(env: &MemEnv, files: &[Arc<LiveFile>], defer_seeks: bool) -> LevelIter {
        let env: Arc<dyn Env> = Arc::new(env.clone());
        let cache = TableCache::new(env, Path::new("/db"), options(), None, 100);
        // Fenced, as a version's levels of bytewise keys are.
        let fences = FileFences::build(files.iter().map(|f| f.largest.as_slice())).map(Arc::new);
        super::level_iter(
            InternalKeyComparator::new(bytewise()),
            files.into(),
            fences,
            Arc::new(cache),
            BlockReadOptions::default(),
            defer_seeks,
        )
    }

    #[test]
    fn level_iter_meets_the_contract() {
        let env = MemEnv::new();
        let (files, model) = level(&env);
        let probes: Vec<Vec<u8>> = (0..=model.len() * 2)
            .map(|n| ikey(format!("key{:05}", n / 2).as_bytes(), n as u64 % 3))
            .chain([ikey(b"", 1), ikey(b"zzz", 1)])
            .collect();
        let icmp = InternalKeyComparator::new(bytewise());
        check_against_model(&mut level_iter_in(&env, &files), &model, &icmp, &probes);
        check_against_model(&mut level_iter_in(&env, &[]), &[], &icmp, &probes);
    }

    /// `seek_passes(target, key)` may say true only if the level holds no entry from `target`
    /// to `key` (the model says), and says it in each of its three ways: nothing at or after
    /// the target, a file that starts after the key, a user key the filter rules out.
    #[test]
    fn a_seek_passes_only_where_the_level_has_nothing_from_the_target_to_the_key() {
        let env = MemEnv::new();
        let (files, model) = level(&env);
        let icmp = InternalKeyComparator::new(bytewise());
        let it = level_iter_in(&env, &files);
        let mut user_keys: Vec<Vec<u8>> = (0..=model.len())
            .flat_map(|n| [format!("key{n:05}"), format!("key{n:05}a")])
            .map(String::into_bytes)
            .collect();
        user_keys.extend([b"".to_vec(), b"zzz".to_vec()]);
        let seqnos = [1000, 40, 3, 0];
        let (mut past_the_end, mut before_a_file, mut ruled_out) = (0, 0, 0);
        for tu in &user_keys {
            for &ts in &seqnos {
                let target = ikey(tu, ts);
                for ku in &user_keys {
                    for &ks in &seqnos {
                        let key = ikey(ku, ks);
                        if icmp.compare(&key, &target) == Ordering::Less {
                            continue;
                        }
                        if !it.seek_passes(&target, &key) {
                            continue;
                        }
                        let held = model.iter().any(|(k, _)| {
                            icmp.compare(k, &target) != Ordering::Less
                                && icmp.compare(k, &key) != Ordering::Greater
                        });
                        assert!(
                            !held,
                            "passed a seek to {} with {} though the level holds an entry between",
                            target.escape_ascii(),
                            key.escape_ascii()
                        );
                        let after = model.iter().find(|(k, _)| icmp.compare(k, &target) != Ordering::Less);
                        match after {
                            None => past_the_end += 1,
                            Some(_) if tu == ku => ruled_out += 1,
                            Some(_) => before_a_file += 1,
                        }
                    }
                }
            }
        }
        assert!(past_the_end > 0 && before_a_file > 0 && ruled_out > 0, "{past_the_end} {before_a_file} {ruled_out}");
        // The deepest level seeks at once: a merge never asks it.
        let last = level_iter_with(&env, &files, false);
        assert!(!last.may_pass_seeks());
        assert!(!last.seek_passes(&ikey(b"zzz", 1), &ikey(b"zzz", 0)));
    }

    /// A table that cannot be opened, or whose index is damaged, never lets a seek pass: the
    /// seek then runs, and reports the damage (as the tests below show it does).
    #[test]
    fn a_seek_does_not_pass_a_table_that_cannot_be_read() {
        let env = MemEnv::new();
        let (files, _) = level(&env);
        // Inside file 2's range, a user key it does not hold: its filter would rule it out.
        let (target, key) = (ikey(b"key00010a", 1000), ikey(b"key00010a", 0));
        assert!(level_iter_in(&env, &files).seek_passes(&target, &key));
        let path = crate::filename::table_file(Path::new("/db"), files[2].number);
        let data = read_file_to_vec(&env, &path).unwrap();
        env.remove_file(&path).unwrap();
        assert!(!level_iter_in(&env, &files).seek_passes(&target, &key));
        // The index block is just before the footer: damage the bytes there.
        let mut damaged = data.clone();
        let at = damaged.len() - 48 - 10;
        damaged[at] ^= 0xff;
        write_file(&env, &path, &damaged, false).unwrap();
        assert!(!level_iter_in(&env, &files).seek_passes(&target, &key));
    }

    #[test]
    fn a_table_that_cannot_be_opened_surfaces_as_the_level_cursors_error() {
        for victim in [0, 3, 7] {
            let env = MemEnv::new();
            let (files, model) = level(&env);
            let path = crate::filename::table_file(Path::new("/db"), files[victim].number);
            env.remove_file(&path).unwrap();
            check_errors_surface(|| level_iter_in(&env, &files), &model);
        }
    }

    #[test]
    fn a_damaged_block_in_a_table_surfaces_as_the_level_cursors_error() {
        for victim in [0, 2, 7] {
            let env = MemEnv::new();
            let (files, model) = level(&env);
            let path = crate::filename::table_file(Path::new("/db"), files[victim].number);
            let mut data = read_file_to_vec(&env, &path).unwrap();
            // The first data block starts the file.
            data[3] ^= 0x10;
            write_file(&env, &path, &data, false).unwrap();
            check_errors_surface(|| level_iter_in(&env, &files), &model);
        }
    }
}
