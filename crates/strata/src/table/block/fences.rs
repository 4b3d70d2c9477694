// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`RestartFences`]: a dense summary of a block's restart keys that narrows the binary search
//! over them without decoding entries.
//!
//! A table's index block holds one entry per data block, each a restart point (LevelDB writes
//! index blocks with a restart interval of 1), so a point lookup's search there takes about
//! log2(entries) steps, each decoding an entry at a scattered offset and comparing whole keys:
//! most of a get whose data block is cached. The fences keep, for every restart key, the eight
//! bytes of its user key that follow the prefix all of them share, as a big-endian `u64`: the
//! search runs over that array (a few cache lines, integer comparisons) and compares whole
//! keys only among restarts whose eight bytes tie with the target's.
//!
//! A data block's search form ([`Block::searchable`]), which the block cache keeps in place of
//! a block that point lookups hit, is fenced the same way, over all of its entries.
//!
//! Valid only for internal keys whose user keys are in bytewise order: a table builds fences
//! only when its comparator says it is bytewise.

use std::cmp::Ordering;

use super::{decode_entry, Block};
use crate::comparator::common_prefix_len;
use crate::key::TAG_LEN;

/// Restarts whose windows tie with the target's that [`RestartFences::narrow`] steps over
/// before it searches for the end of the ties instead.
const TIES_STEPPED: usize = 4;

/// Restart-key windows of one block.
///
/// Invariants: `1 <= covered <= restarts`, the block's restart count; the user keys of the
/// first `covered` restarts (the covered ones) start with the prefix (`prefix_len` bytes);
/// window `i` (`words[i]`) is the user key of restart `i` after the prefix, its first eight
/// bytes zero-padded, big-endian; so the windows are non-decreasing; `words` holds the
/// prefix's `prefix_len.div_ceil(8)` words after them. The user keys of the restarts after
/// the covered ones come after every user key that starts with the prefix.
///
/// The last restart is left uncovered when that lengthens the prefix: a table's last index
/// key is usually the short successor of its last key (`"1"` after `"0000…0647"`), which shares
/// nothing with the others and would leave every window the same.
pub(crate) struct RestartFences {
    /// The covered restarts' windows (`covered` of them), then `prefix` in words: its bytes
    /// eight at a time, each chunk as [`window`] reads it (zero-padded, big-endian). One
    /// allocation, so that a search loads the fences from one place, with no pointer between
    /// the block and them (the block holds this struct inline).
    words: Box<[u64]>,
    covered: usize,
    prefix_len: usize,
    restarts: usize,
    /// True if every entry of the block is a restart point (each restart's entry ends where
    /// the next restart, or the restart array, begins), as in an index block or a block's
    /// search form: the first restart at or after a target is then the entry a search wants.
    every_entry: bool,
}

impl std::fmt::Debug for RestartFences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestartFences")
            .field("prefix_len", &self.prefix_len)
            .field("covered", &self.covered)
            .field("restarts", &self.restarts)
            .finish()
    }
}

/// The first eight bytes of `bytes`, zero-padded, as a big-endian number: comparing two
/// windows as numbers orders them as the bytes would be (ties aside). (A level's file fences
/// take their windows with it too.)
#[inline]
pub(crate) fn window(bytes: &[u8]) -> u64 {
    if let Some(word) = bytes.first_chunk::<8>() {
        return u64::from_be_bytes(*word);
    }
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(buf)
}

/// [`window`] of `bytes[start..]`, without copying a short tail byte by byte: the eight
/// bytes that end `bytes` hold it, and a shift drops the bytes before it. Requires
/// `start <= bytes.len()`.
#[inline]
pub(crate) fn window_after(bytes: &[u8], start: usize) -> u64 {
    let tail = bytes.len() - start;
    match (bytes[start..].first_chunk::<8>(), bytes.last_chunk::<8>()) {
        (Some(word), _) => u64::from_be_bytes(*word),
        (None, _) if tail == 0 => 0,
        (None, Some(last)) => u64::from_be_bytes(*last) << (8 * (8 - tail)),
        (None, None) => window(&bytes[start..]),
    }
}

/// Windows a search counts one by one rather than halving further: counting has no chain of
/// dependent loads (each halving step waits for the load of the one before), and 32 windows
/// are four cache lines.
const COUNTED: usize = 32;

/// The number of `windows` (non-decreasing) below `q`: halving steps down to [`COUNTED`]
/// windows, then a count. (A level's file fences search their windows with it too.)
#[inline]
pub(crate) fn count_below(windows: &[u64], q: u64) -> usize {
    // Invariant: every window before `lo` is below `q`; none from `lo + len` on is.
    let (mut lo, mut len) = (0, windows.len());
    while len > COUNTED {
        let half = len / 2;
        let below = windows[lo + half] < q;
        lo = std::hint::select_unpredictable(below, lo + half + 1, lo);
        len = std::hint::select_unpredictable(below, len - half - 1, half);
    }
    lo + windows[lo..lo + len].iter().filter(|&&w| w < q).count()
}

impl RestartFences {
    /// The fences of `block`'s restart keys, read as internal keys; `None` if the block has no
    /// entries, or a restart entry does not decode whole or is too short to be an internal key
    /// (the ordinary search then meets, and reports, the damage), or the restart keys are out
    /// of order as internal keys.
    pub(crate) fn build(block: &Block) -> Option<RestartFences> {
        if block.restarts_offset == 0 {
            return None;
        }
        let mut keys = Vec::with_capacity(block.num_restarts);
        let mut every_entry = true;
        for i in 0..block.num_restarts {
            let offset = block.restart_point(i);
            let h = decode_entry(&block.data, offset, block.restarts_offset)
                .filter(|h| h.shared == 0 && h.non_shared >= TAG_LEN)?;
            let tag_start = h.value_start() - TAG_LEN;
            let tag = u64::from_le_bytes(
                block.data[tag_start..h.value_start()]
                    .try_into()
                    .expect("eight bytes"),
            );
            keys.push((&block.data[h.key_delta..tag_start], tag));
            let next = if i + 1 < block.num_restarts {
                block.restart_point(i + 1)
            } else {
                block.restarts_offset
            };
            every_entry &= h.end() == next;
        }
        // In order as internal keys: user keys ascending, and along one user key, tags
        // descending (a search among restarts that tie relies on it).
        if keys.windows(2).any(|pair| {
            pair[0].0 > pair[1].0 || (pair[0].0 == pair[1].0 && pair[0].1 <= pair[1].1)
        }) {
            return None;
        }
        let keys: Vec<&[u8]> = keys.into_iter().map(|(user, _)| user).collect();
        let first = keys[0];
        let mut covered = keys.len();
        let mut prefix_len = common_prefix_len(first, keys[covered - 1]);
        // The last key shares less with the first than the one before it does: it differs from
        // `first` within the longer prefix, and being larger, is larger there, so it comes
        // after every key that starts with that prefix.
        if covered > 2 && common_prefix_len(first, keys[covered - 2]) > prefix_len {
            covered -= 1;
            prefix_len = common_prefix_len(first, keys[covered - 1]);
        }
        let windows = keys[..covered].iter().map(|k| window(&k[prefix_len..]));
        let prefix = first[..prefix_len].chunks(8).map(window);
        Some(RestartFences {
            words: windows.chain(prefix).collect(),
            covered,
            prefix_len,
            restarts: keys.len(),
            every_entry,
        })
    }

    /// True if every entry of the block is a restart point.
    pub(crate) fn every_entry(&self) -> bool {
        self.every_entry
    }

    /// The heap bytes the fences hold (their windows and prefix).
    pub(crate) fn heap_bytes(&self) -> usize {
        8 * self.words.len()
    }

    /// How the user key `user` compares with the prefix over the bytes both have, read as
    /// the prefix's words read it: eight at a time, zero-padded. Where `user` is shorter than
    /// the prefix and agrees with it, the padding may make it `Less`, never `Greater`; a
    /// search answers both alike (before every key).
    #[inline]
    fn compare_prefix(&self, user: &[u8]) -> Ordering {
        let shared = self.prefix_len.min(user.len());
        let prefix = &self.words[self.covered..];
        for (chunk, &word) in user[..shared].chunks(8).zip(prefix) {
            match window(chunk).cmp(&word) {
                Ordering::Equal => {}
                other => return other,
            }
        }
        Ordering::Equal
    }

    /// The range `(left, right)` of restart indexes holding the last restart whose key is
    /// before the internal key `target` (0 if none is), as [`Block::last_restart_before`]
    /// answers it: restart `left` is before `target` or `left` is 0, and restart `right + 1`,
    /// if there is one, is not before it.
    pub(crate) fn narrow(&self, target: &[u8]) -> (usize, usize) {
        let user = &target[..target.len().saturating_sub(TAG_LEN)];
        let covered = self.covered;
        match self.compare_prefix(user) {
            // Before every covered key (so every key), or after all of them.
            Ordering::Less => return (0, 0),
            Ordering::Greater => return (covered - 1, self.restarts - 1),
            Ordering::Equal if user.len() < self.prefix_len => return (0, 0),
            Ordering::Equal => {}
        }
        let q = window_after(user, self.prefix_len);
        let windows = &self.words[..covered];
        // Covered restarts before `lo` have smaller user keys (so smaller keys); from `hi` on,
        // larger, as are all the uncovered ones (the user key starts with the prefix).
        let lo = count_below(windows, q);
        // Ties are few (keys that agree on eight bytes past the prefix): stepped over one by
        // one, and searched for only when there are many.
        let ties = &windows[lo..];
        let mut hi = lo + ties.iter().take(TIES_STEPPED).take_while(|&&w| w == q).count();
        if hi - lo == TIES_STEPPED {
            hi = lo + ties.partition_point(|&w| w == q);
        }
        let left = lo.saturating_sub(1);
        (left, hi.saturating_sub(1).max(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `window_after` is `window` of the tail, for every split of keys up to 20 bytes.
    #[test]
    fn window_after_is_the_tails_window() {
        for len in 0..=20usize {
            let key: Vec<u8> = (0..len).map(|i| (i * 29 + 3) as u8).collect();
            for start in 0..=len {
                assert_eq!(window_after(&key, start), window(&key[start..]), "{len} {start}");
            }
        }
    }

    /// The halving steps and the count agree with a plain binary search at every length around
    /// the point where counting takes over, for every position of the target and ties.
    #[test]
    fn count_below_is_the_partition_point() {
        for len in 0..(4 * COUNTED + 3) {
            // Pairs of equal windows, so that ties straddle the halving points.
            let windows: Vec<u64> = (0..len as u64).map(|i| 10 * (i / 2)).collect();
            for q in 0..=(10 * (len as u64 / 2) + 11) {
                assert_eq!(
                    count_below(&windows, q),
                    windows.partition_point(|&w| w < q),
                    "len {len}, q {q}"
                );
            }
        }
        assert_eq!(count_below(&[u64::MAX; 100], u64::MAX), 0);
        assert_eq!(count_below(&[0; 100], u64::MAX), 100);
    }
}
