// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`KeyBuf`]: the key a database cursor remembers, copied without a `memcpy` call when short.
//!
//! A forward scan copies every key it passes (to skip that key's older entries), so the copy is
//! on the step's path. `Vec::extend_from_slice` copies with a call to `memcpy` for a length
//! known only at run time, which costs more than the copy of a 16-byte key. A key of at most
//! [`INLINE`] bytes is copied here into an inline array with [`copy_key_bytes`].

use crate::key::copy_key_bytes;

/// Keys up to this long are kept inline.
const INLINE: usize = 32;

/// A reused key buffer: inline while the key fits, else in a heap buffer kept for its capacity.
///
/// Invariant: the key is `inline[..len]` if `len <= INLINE`, else `heap` (whose length is
/// `len`).
pub(crate) struct KeyBuf {
    inline: [u8; INLINE],
    len: usize,
    heap: Vec<u8>,
}

impl Default for KeyBuf {
    fn default() -> Self {
        KeyBuf {
            inline: [0; INLINE],
            len: 0,
            heap: Vec::new(),
        }
    }
}

impl std::fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KeyBuf({:?})",
            self.as_slice().escape_ascii().to_string()
        )
    }
}

impl KeyBuf {
    /// Makes the buffer hold `key`.
    #[inline]
    pub(crate) fn set(&mut self, key: &[u8]) {
        let n = key.len();
        if n <= INLINE {
            copy_key_bytes(&mut self.inline[..n], key);
        } else {
            self.heap.clear();
            self.heap.extend_from_slice(key);
        }
        self.len = n;
    }

    /// Forgets the key (the heap buffer keeps its capacity).
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// The key.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.len <= INLINE {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }
}

impl std::ops::Deref for KeyBuf {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length around the inline bound and the copy's cases, set over longer and shorter
    /// keys before it, reads back exactly.
    #[test]
    fn holds_what_was_set_at_every_length() {
        let mut buf = KeyBuf::default();
        let mut previous: Vec<u8> = Vec::new();
        for n in (0..=INLINE + 9).chain((0..=INLINE + 9).rev()) {
            let key: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
            assert_eq!(buf.as_slice(), &previous[..]);
            buf.set(&key);
            assert_eq!(buf.as_slice(), &key[..], "length {n}");
            assert_eq!(&*buf, &key[..]);
            previous = key;
        }
        buf.clear();
        assert!(buf.is_empty());
        buf.set(b"after a clear");
        assert_eq!(&*buf, b"after a clear");
    }
}
