// SPDX-License-Identifier: MIT OR Apache-2.0
//! Versions: the set of live tables per level, and the MANIFEST records ([`VersionEdit`]s) that
//! change it.

mod edit;
mod file_fences;
pub(crate) mod level_iter;
pub(crate) mod set;
// The style guide's layout: `version/version.rs` holds the `Version` type.
#[allow(clippy::module_inception)]
pub(crate) mod version;

pub use edit::{
    BlobFileMeta, FileMetaData, RangeTombstone, VersionEdit, BLOB_COMPARATOR_SUFFIX, NUM_LEVELS,
    RANGE_DELETION_COMPARATOR_SUFFIX,
};
