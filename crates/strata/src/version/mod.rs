// SPDX-License-Identifier: MIT OR Apache-2.0
//! Versions: the set of live tables per level, and the MANIFEST records ([`VersionEdit`]s) that
//! change it.

mod edit;
#[allow(dead_code)]
pub(crate) mod set;
// The style guide's layout: `version/version.rs` holds the `Version` type.
#[allow(dead_code, clippy::module_inception)]
pub(crate) mod version;

pub use edit::{FileMetaData, VersionEdit, NUM_LEVELS};
