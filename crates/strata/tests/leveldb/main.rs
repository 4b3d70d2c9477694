// SPDX-License-Identifier: MIT OR Apache-2.0
//! strata and LevelDB 1.23, one test binary (one link step): the databases LevelDB wrote
//! (`fixtures`), and with the `leveldb-interop` feature LevelDB itself through its C API
//! (`interop`, `differential`; after `scripts/install-peers.sh --leveldb-only`):
//!
//! ```sh
//! cargo test -p strata --features leveldb-interop --test leveldb
//! ```

#[cfg(feature = "leveldb-interop")]
mod differential;
mod fixtures;
#[cfg(feature = "leveldb-interop")]
mod interop;
