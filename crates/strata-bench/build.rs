// SPDX-License-Identifier: MIT OR Apache-2.0
//! Compiles the C shims of the engines whose C APIs are structs of function pointers
//! (Berkeley DB and WiredTiger), each only when its cargo feature is on, and links their
//! libraries. With neither feature on it does nothing (and needs no `cc`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "berkeleydb")]
    if std::env::var_os("CARGO_FEATURE_BERKELEYDB").is_some() {
        shim("berkeleydb", "db");
    }
    #[cfg(feature = "wiredtiger")]
    if std::env::var_os("CARGO_FEATURE_WIREDTIGER").is_some() {
        shim("wiredtiger", "wiredtiger");
    }
}

/// Compiles `shim/<name>.c` into a static library and links it, then the system library
/// `lib` it calls (after the shim, so that the linker resolves the shim's references).
#[cfg(any(feature = "berkeleydb", feature = "wiredtiger"))]
fn shim(name: &str, lib: &str) {
    let source = format!("shim/{name}.c");
    println!("cargo:rerun-if-changed={source}");
    cc::Build::new()
        .file(&source)
        .warnings(true)
        .extra_warnings(true)
        .compile(&format!("strata_bench_{name}_shim"));
    println!("cargo:rustc-link-lib={lib}");
}
