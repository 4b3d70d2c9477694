// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`FileFences`]: a sorted level's files' largest user keys as integers, so that a point
//! lookup finds its file by comparing numbers in one array instead of following each probed
//! file's pointer to its key.
//!
//! Every file's largest user key starts with the prefix the first and the last share (keys
//! in order share whatever the two ends share); each file gets the eight bytes after that
//! prefix, zero-padded, as a big-endian `u64` (its window). Windows never decrease along the
//! level, a window below (above) the target's says the file's largest user key is below
//! (above) the target's, and files whose window ties with the target's are compared whole.
//! Valid only for user keys in bytewise order: a version builds fences only then.

use std::cmp::Ordering;

use crate::comparator::{common_prefix_len, compare_bytes};
use crate::key::user_key;
use crate::table::{count_below, window, window_after};

/// The windows of one sorted level's files' largest user keys (see the module's notes).
///
/// Invariants: `windows.len()` is the level's file count; every file's largest user key
/// starts with `prefix`; `windows[i]` is file `i`'s largest user key after `prefix`, its first
/// eight bytes zero-padded, big-endian; so `windows` is non-decreasing.
#[derive(Debug)]
pub(crate) struct FileFences {
    prefix: Box<[u8]>,
    windows: Box<[u64]>,
}

impl FileFences {
    /// The fences of a sorted level whose files' largest internal keys are `largest`, in
    /// order; `None` for an empty level, or for keys out of order (a damaged MANIFEST's level:
    /// the whole-key search then meets it as it would without fences).
    pub(crate) fn build<'a>(largest: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Option<Self> {
        let mut users = largest.clone().map(user_key);
        let first = users.next()?;
        let last = users.last().unwrap_or(first);
        let prefix = &first[..common_prefix_len(first, last)];
        let mut windows: Vec<u64> = Vec::with_capacity(largest.len());
        for key in largest {
            let w = window(user_key(key).strip_prefix(prefix)?);
            if windows.last().is_some_and(|&before| before > w) {
                return None;
            }
            windows.push(w);
        }
        Some(FileFences {
            prefix: prefix.into(),
            windows: windows.into(),
        })
    }

    /// The files `lo..hi` whose windows tie with `target`'s (an internal key), to be compared
    /// whole: every file before `lo` has a smaller largest user key than `target`'s, every
    /// file from `hi` on a larger one.
    pub(crate) fn ties(&self, target: &[u8]) -> (usize, usize) {
        let user = user_key(target);
        let files = self.windows.len();
        let shared = self.prefix.len().min(user.len());
        match compare_bytes(&user[..shared], &self.prefix[..shared]) {
            Ordering::Less => return (0, 0),
            Ordering::Greater => return (files, files),
            // A proper prefix of every largest key: smaller than all of them.
            Ordering::Equal if user.len() < self.prefix.len() => return (0, 0),
            Ordering::Equal => {}
        }
        let q = window_after(user, self.prefix.len());
        let lo = count_below(&self.windows, q);
        // Ties are few (files whose largest keys agree on eight bytes past the prefix).
        let hi = lo + self.windows[lo..].iter().take_while(|&&w| w == q).count();
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{append_internal_key, ValueKind};

    fn ikey(user: &[u8], seqno: u64) -> Vec<u8> {
        let mut k = Vec::new();
        append_internal_key(&mut k, user, seqno, ValueKind::Value);
        k
    }

    /// For levels of many shapes and targets around every key, the files the fences leave to
    /// compare whole hold the answer a whole-key search gives, and every file outside them is
    /// on the side the fences say.
    #[test]
    fn ties_bracket_the_file_a_whole_key_search_finds() {
        let decimal: Vec<Vec<u8>> = (0..40u32)
            .map(|i| format!("{:016}", i * 977).into_bytes())
            .collect();
        let levels: Vec<Vec<Vec<u8>>> = vec![
            decimal.clone(),
            vec![b"only".to_vec()],
            vec![b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"ab\0".to_vec(), b"abc".to_vec()],
            (0..30u32)
                .map(|i| format!("pp{:02}xxxxxxxxxx{:03}", i / 10, i).into_bytes())
                .collect(),
            vec![b"k1".to_vec(), b"k2".to_vec(), b"z".to_vec()],
        ];
        for users in levels {
            let largest: Vec<Vec<u8>> = users.iter().map(|u| ikey(u, 7)).collect();
            let fences = FileFences::build(largest.iter().map(Vec::as_slice)).unwrap();
            let mut targets: Vec<Vec<u8>> = Vec::new();
            for u in users.iter().chain([&b"".to_vec(), &b"0".to_vec(), &b"zzz".to_vec()]) {
                for extra in [&b""[..], b"\0", b"5", b"\xff"] {
                    let t = [u.as_slice(), extra].concat();
                    for seqno in [1, 7, 100] {
                        targets.push(ikey(&t, seqno));
                    }
                    if let Some((_, shorter)) = t.split_last() {
                        targets.push(ikey(shorter, 7));
                    }
                }
            }
            for target in &targets {
                let (lo, hi) = fences.ties(target);
                assert!(lo <= hi && hi <= largest.len());
                let tu = user_key(target);
                for (i, k) in largest.iter().enumerate() {
                    let ku = user_key(k);
                    if i < lo {
                        assert!(ku < tu, "{i} < lo {lo}");
                    } else if i >= hi {
                        assert!(ku > tu, "{i} >= hi {hi}");
                    }
                }
                // What `find_file` answers through the fences is the whole-key search's.
                let whole = largest.partition_point(|k| user_key(k) < tu);
                assert!(lo <= whole && whole <= hi, "{whole} outside {lo}..{hi}");
            }
        }
        assert!(FileFences::build(std::iter::empty::<&[u8]>()).is_none());
    }

    /// A level out of order (a damaged MANIFEST) gets no fences, and building them does not
    /// panic, even where a key in the middle is shorter than the ends' shared prefix.
    #[test]
    fn keys_out_of_order_get_no_fences() {
        for users in [
            vec![&b"abcd1"[..], b"a", b"abcd2"],
            vec![&b"k2"[..], b"k1", b"k3"],
            vec![&b"pp01xxxxxxxx9"[..], b"pp00", b"pp02"],
        ] {
            let largest: Vec<Vec<u8>> = users.iter().map(|u| ikey(u, 7)).collect();
            assert!(
                FileFences::build(largest.iter().map(Vec::as_slice)).is_none(),
                "{users:?}"
            );
        }
    }
}
