// SPDX-License-Identifier: MIT OR Apache-2.0
//! The atomics and mutex the skiplist is built on: the standard library's, or loom's when the
//! crate is built with `--cfg loom`, so that the models in `crate::loom_models` explore every
//! interleaving (and every weak-memory outcome loom knows) of the real skiplist code.
//!
//! Only the skiplist goes through here; under `--cfg loom` the crate is built for the loom
//! models alone (`RUSTFLAGS="--cfg loom" cargo test -p strata --lib loom_models`).

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicPtr, AtomicUsize, Ordering},
    Mutex,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicPtr, AtomicUsize, Ordering},
    Mutex,
};
