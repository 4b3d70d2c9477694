// SPDX-License-Identifier: MIT OR Apache-2.0
//! The compaction picker: pure functions from a [`Version`] to a [`Compaction`] plan, following
//! LevelDB 1.23's policy.
//!
//! - A *size* compaction when the best level score is >= 1 (level 0: files / 4; deeper levels:
//!   bytes / budget). It takes the first file after the level's compact pointer, wrapping
//!   around, so compactions sweep each level's key space in turn.
//! - Otherwise a *seek* compaction, if some file ran out of its seek allowance.
//! - The level-0 input grows to every overlapping level-0 file; the level+1 inputs are the files
//!   overlapping the level inputs; the level inputs then grow if that adds no level+1 file and
//!   keeps the total under 25 × max_file_size.
//! - "Boundary" files are added so that every version of a user key stays in one compaction.

use std::cmp::Ordering;
use std::sync::Arc;

use super::Compaction;
use crate::comparator::Comparator;
use crate::key::{user_key, InternalKeyComparator};
use crate::version::version::{total_file_size, LiveFile, Version};
use crate::version::{VersionEdit, NUM_LEVELS};

/// Picks the next compaction, if any level needs one, or else a table that holds entries a
/// range deletion every snapshot sees has deleted (`oldest_snapshot`): it is rewritten one
/// level down without them, never merely moved.
pub(crate) fn pick_compaction(
    version: &Arc<Version>,
    compact_pointers: &[Vec<u8>; NUM_LEVELS],
    icmp: &InternalKeyComparator,
    max_file_size: u64,
    oldest_snapshot: u64,
) -> Option<Compaction> {
    let mut rewrite = false;
    let (level, first) = if version.compaction_score >= 1.0 {
        let level = version.compaction_level;
        let files = &version.files[level];
        let pointer = &compact_pointers[level];
        let first = files
            .iter()
            .find(|f| pointer.is_empty() || icmp.compare(&f.largest, pointer) == Ordering::Greater)
            .or_else(|| files.first())?
            .clone();
        (level, first)
    } else {
        let slot = version
            .file_to_compact
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let (file, level) = match slot {
            Some(slot) => slot,
            None => {
                rewrite = true;
                version.file_with_range_deleted_entries(oldest_snapshot)?
            }
        };
        (level, file)
    };
    let mut inputs0 = vec![first];
    if level == 0 {
        let (smallest, largest) = key_range(icmp, &inputs0);
        inputs0 = version.overlapping_inputs(0, Some(&smallest), Some(&largest));
    }
    Some(setup_other_inputs(
        version,
        icmp,
        level,
        inputs0,
        max_file_size,
        rewrite,
    ))
}

/// Plans a manual compaction of `level` over the internal-key range `[begin, end]` (open bounds
/// allowed). Above level 0 it takes input files only until they reach `max_file_size`, so one
/// step does not grow too large; the caller repeats until the range is done.
pub(crate) fn compact_range(
    version: &Arc<Version>,
    icmp: &InternalKeyComparator,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    max_file_size: u64,
) -> Option<Compaction> {
    let mut inputs = version.overlapping_inputs(level, begin, end);
    if inputs.is_empty() {
        return None;
    }
    if level > 0 {
        let mut total = 0;
        if let Some(cut) = inputs.iter().position(|f| {
            total += f.file_size;
            total >= max_file_size
        }) {
            inputs.truncate(cut + 1);
        }
    }
    Some(setup_other_inputs(
        version,
        icmp,
        level,
        inputs,
        max_file_size,
        true,
    ))
}

/// The smallest and largest internal keys of `files`.
fn key_range(icmp: &InternalKeyComparator, files: &[Arc<LiveFile>]) -> (Vec<u8>, Vec<u8>) {
    let mut smallest = &files[0].smallest;
    let mut largest = &files[0].largest;
    for f in &files[1..] {
        if icmp.compare(&f.smallest, smallest) == Ordering::Less {
            smallest = &f.smallest;
        }
        if icmp.compare(&f.largest, largest) == Ordering::Greater {
            largest = &f.largest;
        }
    }
    (smallest.clone(), largest.clone())
}

fn key_range2(
    icmp: &InternalKeyComparator,
    a: &[Arc<LiveFile>],
    b: &[Arc<LiveFile>],
) -> (Vec<u8>, Vec<u8>) {
    let all: Vec<Arc<LiveFile>> = a.iter().chain(b).cloned().collect();
    key_range(icmp, &all)
}

/// Adds to `inputs` every file of `level_files` whose smallest key has the same user key as the
/// inputs' largest key but sorts after it: otherwise a newer version of that user key would stay
/// at the level while an older one moved down, and reads would find the older one.
fn add_boundary_inputs(
    icmp: &InternalKeyComparator,
    level_files: &[Arc<LiveFile>],
    inputs: &mut Vec<Arc<LiveFile>>,
) {
    if inputs.is_empty() {
        return;
    }
    let ucmp = icmp.user_comparator();
    loop {
        let (_, largest) = key_range(icmp, inputs);
        let boundary = level_files
            .iter()
            .filter(|f| {
                icmp.compare(&f.smallest, &largest) == Ordering::Greater
                    && ucmp.compare(user_key(&f.smallest), user_key(&largest)) == Ordering::Equal
            })
            .min_by(|a, b| icmp.compare(&a.smallest, &b.smallest));
        match boundary {
            Some(f) => inputs.push(f.clone()),
            None => return,
        }
    }
}

fn setup_other_inputs(
    version: &Arc<Version>,
    icmp: &InternalKeyComparator,
    level: usize,
    mut inputs0: Vec<Arc<LiveFile>>,
    max_file_size: u64,
    manual: bool,
) -> Compaction {
    add_boundary_inputs(icmp, &version.files[level], &mut inputs0);
    let (smallest, largest) = key_range(icmp, &inputs0);
    let mut inputs1 = version.overlapping_inputs(level + 1, Some(&smallest), Some(&largest));
    add_boundary_inputs(icmp, &version.files[level + 1], &mut inputs1);
    let (mut all_start, mut all_limit) = key_range2(icmp, &inputs0, &inputs1);
    let mut largest = largest;

    // Grow the level inputs if that pulls in no new level+1 file.
    if !inputs1.is_empty() {
        let mut expanded0 = version.overlapping_inputs(level, Some(&all_start), Some(&all_limit));
        add_boundary_inputs(icmp, &version.files[level], &mut expanded0);
        let inputs1_size = total_file_size(&inputs1);
        let expanded0_size = total_file_size(&expanded0);
        if expanded0.len() > inputs0.len() && inputs1_size + expanded0_size < 25 * max_file_size {
            let (new_start, new_limit) = key_range(icmp, &expanded0);
            let mut expanded1 =
                version.overlapping_inputs(level + 1, Some(&new_start), Some(&new_limit));
            add_boundary_inputs(icmp, &version.files[level + 1], &mut expanded1);
            if expanded1.len() == inputs1.len() {
                largest = new_limit;
                inputs0 = expanded0;
                inputs1 = expanded1;
                (all_start, all_limit) = key_range2(icmp, &inputs0, &inputs1);
            }
        }
    }
    let grandparents = if level + 2 < NUM_LEVELS {
        version.overlapping_inputs(level + 2, Some(&all_start), Some(&all_limit))
    } else {
        Vec::new()
    };
    let mut edit = VersionEdit::default();
    edit.compact_pointers.push((level, largest));
    Compaction {
        level,
        inputs: [inputs0, inputs1],
        grandparents,
        input_version: version.clone(),
        edit,
        max_output_file_size: max_file_size,
        icmp: icmp.clone(),
        manual,
        grandparent_index: 0,
        seen_key: false,
        overlapped_bytes: 0,
        level_ptrs: [0; NUM_LEVELS],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::bytewise;
    use crate::key::{append_internal_key, ValueKind};
    use crate::version::FileMetaData;

    fn ikey(user: &str, seqno: u64) -> Vec<u8> {
        let mut k = Vec::new();
        append_internal_key(&mut k, user.as_bytes(), seqno, ValueKind::Value);
        k
    }

    fn file(number: u64, smallest: &str, largest: &str, size: u64) -> Arc<LiveFile> {
        LiveFile::new(FileMetaData {
            number,
            file_size: size,
            smallest: ikey(smallest, 100),
            largest: ikey(largest, 100),
        })
    }

    fn icmp() -> InternalKeyComparator {
        InternalKeyComparator::new(bytewise())
    }

    const MB: u64 = 1 << 20;

    #[test]
    fn nothing_to_do_in_a_small_version() {
        let mut files: [Vec<Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        files[0] = vec![file(1, "a", "c", MB)];
        files[1] = vec![file(2, "a", "z", MB)];
        let v = Arc::new(Version::new(icmp(), files));
        assert!(pick_compaction(&v, &Default::default(), &icmp(), 2 * MB, u64::MAX).is_none());
    }

    #[test]
    fn four_level0_files_compact_with_every_overlapping_file() {
        let mut files: [Vec<Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        files[0] = vec![
            file(10, "a", "c", MB),
            file(11, "b", "e", MB),
            file(12, "x", "y", MB),
            file(13, "d", "f", MB),
        ];
        files[1] = vec![
            file(5, "a", "b", MB),
            file(6, "c", "g", MB),
            file(7, "h", "k", MB),
        ];
        files[2] = vec![file(3, "a", "z", MB)];
        let v = Arc::new(Version::new(icmp(), files));
        assert_eq!(v.compaction_level, 0);
        let c = pick_compaction(&v, &Default::default(), &icmp(), 2 * MB, u64::MAX)
            .expect("L0 is full");
        let numbers = |fs: &[Arc<LiveFile>]| {
            let mut n: Vec<u64> = fs.iter().map(|f| f.number).collect();
            n.sort();
            n
        };
        // File 10 overlaps 11, which overlaps 13; 12 is apart.
        assert_eq!(numbers(&c.inputs[0]), vec![10, 11, 13]);
        assert_eq!(numbers(&c.inputs[1]), vec![5, 6]);
        assert_eq!(c.grandparents.len(), 1);
        assert_eq!(c.edit.compact_pointers[0].0, 0);
        assert!(!c.is_trivial_move());
    }

    #[test]
    fn size_compaction_resumes_after_the_compact_pointer() {
        let mut files: [Vec<Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        files[1] = (0..8)
            .map(|i| {
                let s = format!("k{i}a");
                let l = format!("k{i}z");
                file(i + 1, &s, &l, 2 * MB)
            })
            .collect();
        let v = Arc::new(Version::new(icmp(), files));
        assert_eq!(v.compaction_level, 1);
        let mut pointers: [Vec<u8>; NUM_LEVELS] = Default::default();
        let c = pick_compaction(&v, &pointers, &icmp(), 2 * MB, u64::MAX).unwrap();
        assert_eq!(c.inputs[0][0].number, 1);
        assert!(c.is_trivial_move());
        pointers[1] = c.edit.compact_pointers[0].1.clone();
        let c = pick_compaction(&v, &pointers, &icmp(), 2 * MB, u64::MAX).unwrap();
        assert_eq!(c.inputs[0][0].number, 2);
        pointers[1] = ikey("k7z", 100);
        let c = pick_compaction(&v, &pointers, &icmp(), 2 * MB, u64::MAX).unwrap();
        assert_eq!(c.inputs[0][0].number, 1, "wraps around");
    }

    #[test]
    fn boundary_files_keep_a_user_key_together() {
        // Two level-1 files split one user key "m" between them (newer version first).
        let mut files: [Vec<Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        let a = LiveFile::new(FileMetaData {
            number: 1,
            file_size: 11 * MB,
            smallest: ikey("a", 5),
            largest: ikey("m", 9),
        });
        let b = LiveFile::new(FileMetaData {
            number: 2,
            file_size: MB,
            smallest: ikey("m", 3),
            largest: ikey("q", 3),
        });
        files[1] = vec![a, b];
        let v = Arc::new(Version::new(icmp(), files));
        let c = pick_compaction(&v, &Default::default(), &icmp(), 2 * MB, u64::MAX).unwrap();
        let numbers: Vec<u64> = c.inputs[0].iter().map(|f| f.number).collect();
        assert_eq!(numbers, vec![1, 2]);
    }

    #[test]
    fn seek_compaction_takes_the_file_that_ran_out() {
        let mut files: [Vec<Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        files[1] = vec![file(1, "a", "c", MB)];
        files[2] = vec![file(2, "b", "d", MB)];
        let v = Arc::new(Version::new(icmp(), files));
        assert!(pick_compaction(&v, &Default::default(), &icmp(), 2 * MB, u64::MAX).is_none());
        *v.file_to_compact.lock().unwrap() = Some((v.files[1][0].clone(), 1));
        let c = pick_compaction(&v, &Default::default(), &icmp(), 2 * MB, u64::MAX).unwrap();
        assert_eq!(
            (c.level, c.inputs[0][0].number, c.inputs[1][0].number),
            (1, 1, 2)
        );
    }

    #[test]
    fn manual_compaction_limits_each_step() {
        let mut files: [Vec<Arc<LiveFile>>; NUM_LEVELS] = Default::default();
        files[1] = (0..5)
            .map(|i| file(i + 1, &format!("k{i}a"), &format!("k{i}z"), MB))
            .collect();
        let v = Arc::new(Version::new(icmp(), files));
        let c = compact_range(&v, &icmp(), 1, None, None, 2 * MB).unwrap();
        assert_eq!(c.num_input_files(0), 2);
        assert!(!c.is_trivial_move(), "manual compactions rewrite");
        assert!(compact_range(&v, &icmp(), 2, None, None, 2 * MB).is_none());
    }
}
