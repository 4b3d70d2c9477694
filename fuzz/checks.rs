// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the fuzz targets check, shared with `cargo test`: each fuzz target calls one function
//! here, and `crates/strata/tests/fuzz_regressions.rs` calls the same function on every input
//! committed under `fuzz/regressions/<target>/`, so an input a fuzzer once found is checked by
//! every test run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use strata::env::{read_file_to_vec, write_file};
use strata::log::{LogReader, ReadMode};
use strata::{Db, Env, MemEnv, Options, ReadOptions, WriteBatch, WriteOptions};

fn read_all(env: &MemEnv, mode: ReadMode) -> Vec<Vec<u8>> {
    let path = Path::new("/f.log");
    let file = env.new_sequential_file(path).unwrap();
    let mut reader = LogReader::new(file, path, mode);
    let mut out = Vec::new();
    while let Ok(Some(record)) = reader.next_record() {
        // Every record also goes through the write-batch decoder, as recovery does.
        let _ = WriteBatch::decode(record);
        out.push(record.to_vec());
    }
    out
}

/// `data` as a log file, read in every mode: never a panic; strict mode's records are a prefix
/// of tolerant mode's; recovery mode returns exactly strict mode's records (both stop at the
/// first damage, recovery mode only forgives it when nothing readable follows).
pub fn log_reader(data: &[u8]) {
    let env = MemEnv::new();
    write_file(&env, Path::new("/f.log"), data, false).unwrap();
    let strict = read_all(&env, ReadMode::Strict);
    let tolerant = read_all(&env, ReadMode::Tolerant);
    let recovery = read_all(&env, ReadMode::Recovery);
    assert!(tolerant.len() >= strict.len());
    assert_eq!(&tolerant[..strict.len()], &strict[..]);
    assert_eq!(recovery, strict);
}

/// `data` as the MANIFEST of a database (CURRENT names it), opened read-only and read whole:
/// never a panic; an open either fails or gives a database whose reads fail or succeed cleanly.
pub fn manifest(data: &[u8]) {
    let env = MemEnv::new();
    env.create_dir_all(Path::new("/db")).unwrap();
    write_file(&env, Path::new("/db/MANIFEST-000002"), data, false).unwrap();
    write_file(&env, Path::new("/db/CURRENT"), b"MANIFEST-000002\n", false).unwrap();
    let options = Options::default().with_env(Arc::new(env));
    if let Ok(db) = Db::open_read_only("/db", options) {
        if let Ok(scan) = db.scan(&ReadOptions::default()) {
            for item in scan {
                if item.is_err() {
                    break;
                }
            }
        }
        let _ = db.get(&ReadOptions::default(), b"key");
    }
}

/// A small database: its files, and its contents.
struct Base {
    env: MemEnv,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
    files: Vec<String>,
}

fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let env = MemEnv::new();
        let options = Options {
            create_if_missing: true,
            block_size: 256,
            ..Options::default()
        }
        .with_env(Arc::new(env.clone()));
        let db = Db::open("/db", options).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..200u32 {
            let (k, v) = (
                format!("k{i:04}"),
                format!("value {i} {}", "x".repeat((i % 30) as usize)),
            );
            db.put(&WriteOptions::default(), k.as_bytes(), v.as_bytes())
                .unwrap();
            model.insert(k.into_bytes(), v.into_bytes());
            if i == 150 {
                db.compact_range(None, None).unwrap();
            }
        }
        drop(db);
        let mut files = env.children(Path::new("/db")).unwrap();
        files.retain(|n| n != "LOCK" && n != "LOG" && n != "LOG.old");
        files.sort();
        Base { env, model, files }
    })
}

/// `data` mutates one file of a small database: byte 0 picks the file, then each following
/// triple (offset high, offset low, xor mask) flips bits, and a last lone byte, if any, cuts
/// the file to that fraction of its length. The database is opened and every key read: never a
/// panic, and never a wrong value (a key may be missing only if the log was damaged: a torn
/// tail ends the log).
pub fn open_db(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let base = base();
    let env = base.env.snapshot();
    let name = &base.files[pick as usize % base.files.len()];
    let path = Path::new("/db").join(name);
    let mut bytes = read_file_to_vec(&env, &path).unwrap();
    let mut chunks = rest.chunks_exact(3);
    for c in &mut chunks {
        if !bytes.is_empty() {
            let at = (usize::from(c[0]) << 8 | usize::from(c[1])) % bytes.len();
            bytes[at] ^= c[2];
        }
    }
    if let [cut] = chunks.remainder() {
        let len = bytes.len() * usize::from(*cut) / 256;
        bytes.truncate(len);
    }
    write_file(&env, &path, &bytes, false).unwrap();
    let options = Options::default().with_env(Arc::new(env));
    let Ok(db) = Db::open("/db", options) else {
        return;
    };
    let log_damaged = name.ends_with(".log");
    for (k, v) in &base.model {
        match db.get(&ReadOptions::default(), k) {
            Ok(Some(got)) => assert_eq!(&got, v, "a wrong value for {k:?} after damage to {name}"),
            Ok(None) => assert!(log_damaged, "{k:?} silently missing after damage to {name}"),
            Err(_) => {}
        }
    }
    if let Ok(scan) = db.scan(&ReadOptions::default()) {
        for item in scan {
            match item {
                Ok((k, v)) => assert_eq!(base.model.get(&k), Some(&v), "a wrong entry in a scan"),
                Err(_) => break,
            }
        }
    }
}
