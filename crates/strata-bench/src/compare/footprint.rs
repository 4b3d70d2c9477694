// SPDX-License-Identifier: MIT OR Apache-2.0
//! Each engine's code size, for the report's footprint table.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Code size of each engine: for a C library, the text and data of its shared object (found
/// with ldd); for a Rust engine, the sizes of its crates' functions and data in this binary
/// (from nm).
pub(super) fn footprints(exe: &Path, engines: &[String]) -> BTreeMap<String, (u64, String)> {
    let mut out = BTreeMap::new();
    let ldd = Command::new("ldd")
        .arg(exe)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let nm = Command::new("nm")
        .args(["-S", "-C", "--defined-only"])
        .arg(exe)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for e in engines {
        let (library, crates): (&str, &[&str]) = match e.as_str() {
            "strata" => ("", &["strata::"]),
            "fjall" => ("", &["fjall::", "lsm_tree::", "value_log::"]),
            "redb" => ("", &["redb::"]),
            "leveldb" => ("libleveldb.so", &[]),
            "rocksdb" => ("librocksdb.so", &[]),
            "lmdb" => ("liblmdb.so", &[]),
            "sqlite" => ("libsqlite3.so", &[]),
            "kyotocabinet" => ("libkyotocabinet.so", &[]),
            "berkeleydb" => ("libdb-5", &[]),
            "wiredtiger-btree" | "wiredtiger-lsm" => ("libwiredtiger", &[]),
            _ => continue,
        };
        if crates.is_empty() {
            let Some(path) = ldd
                .lines()
                .filter(|l| l.trim_start().starts_with(library))
                .find_map(|l| l.split("=>").nth(1)?.split_whitespace().next())
            else {
                continue;
            };
            let size = Command::new("size").arg(path).output().ok().and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                let line = text.lines().nth(1)?.to_owned();
                let f: Vec<u64> = line
                    .split_whitespace()
                    .take(2)
                    .filter_map(|x| x.parse().ok())
                    .collect();
                (f.len() == 2).then(|| f[0] + f[1])
            });
            if let Some(size) = size {
                out.insert(e.clone(), (size, format!("text+data of {path}")));
            }
        } else {
            let size: u64 = nm
                .lines()
                .filter_map(|l| {
                    let mut parts = l.splitn(4, ' ');
                    let (_, size, kind, name) =
                        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
                    let code_or_data = matches!(kind, "T" | "t" | "R" | "r" | "D" | "d");
                    (code_or_data && crates.iter().any(|c| name.starts_with(c)))
                        .then(|| u64::from_str_radix(size, 16).ok())
                        .flatten()
                })
                .sum();
            if size > 0 {
                out.insert(
                    e.clone(),
                    (size, format!("functions and data of {}", crates.join(" "))),
                );
            }
        }
    }
    out
}
