// SPDX-License-Identifier: MIT OR Apache-2.0
//! Filter policies: small summaries of a set of keys that answer "may contain" or "does not
//! contain", so that a read can skip a table block without reading it.
//!
//! [`BloomFilterPolicy`] is LevelDB's built-in bloom filter, bit for bit: LevelDB uses filters
//! strata writes and strata uses LevelDB's.

mod bloom;

pub use bloom::{bloom_hash, BloomFilterPolicy};

/// Builds and probes filters over sets of keys.
///
/// A filter must never answer "no" for a key that was added: that would hide data.
pub trait FilterPolicy: Send + Sync {
    /// The name stored in a table's metaindex (as `filter.<name>`). Change it whenever the
    /// encoding changes.
    fn name(&self) -> &str;

    /// Appends a filter summarizing `keys` (duplicates allowed) to `dst`.
    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>);

    /// False only if `key` was certainly not among the keys `filter` was built from.
    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool;
}
