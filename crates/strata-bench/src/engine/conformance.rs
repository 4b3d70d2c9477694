// SPDX-License-Identifier: MIT OR Apache-2.0
//! One small conformance test that every engine must pass, so that an engine that drops,
//! reorders or invents data cannot report a speed: puts, gets, deletes, atomic batches,
//! overwrites, forward and backward scans with limits, seeks, compaction, and a reopen.

use std::collections::BTreeMap;

use super::{open, EngineConfig};

/// Runs the conformance checks on engine `name` in a fresh temporary directory.
pub fn check(name: &str) {
    check_with(name, &EngineConfig::default());
}

/// The conformance checks with `config`. With a row cache every check reads three times, so
/// that answers come from the cache (strata caches a key on its second miss).
pub fn check_with(name: &str, config: &EngineConfig) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::create_dir_all(&path).unwrap();
    let rounds = if config.row_cache_size > 0 { 3 } else { 1 };
    let check_contents = |name: &str, db: &dyn super::Engine, model: &BTreeMap<_, _>| {
        for _ in 0..rounds {
            check_contents(name, db, model);
        }
    };
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    {
        let db = open(name, &path, config).unwrap();
        let mut value = Vec::new();
        assert!(
            !db.get(b"absent", &mut value).unwrap(),
            "{name}: found an absent key"
        );

        // Single puts, in an order that is not the key order.
        for i in [5u32, 1, 9, 3, 7, 0, 8, 2, 6, 4] {
            let (k, v) = (format!("key{i:04}"), format!("value-{i}"));
            db.write(&[(k.as_bytes(), v.as_bytes())], false).unwrap();
            model.insert(k.into_bytes(), v.into_bytes());
        }
        // A batch of 100, one of them synced.
        let batch: Vec<(Vec<u8>, Vec<u8>)> = (10..110u32)
            .map(|i| {
                (
                    format!("key{i:04}").into_bytes(),
                    vec![b'a' + (i % 26) as u8; 100],
                )
            })
            .collect();
        let entries: Vec<(&[u8], &[u8])> = batch
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        db.write(&entries, true).unwrap();
        model.extend(batch.iter().cloned());
        // Overwrites, and a value of 100,000 bytes.
        db.write(&[(b"key0003", b"overwritten")], false).unwrap();
        model.insert(b"key0003".to_vec(), b"overwritten".to_vec());
        let large = vec![7u8; 100_000];
        db.write(&[(b"key0050", &large)], false).unwrap();
        model.insert(b"key0050".to_vec(), large.clone());
        // Deletes, as a batch, including a key that was never written.
        db.delete(&[b"key0001", b"key0100", b"never"], false)
            .unwrap();
        model.remove(&b"key0001"[..]);
        model.remove(&b"key0100"[..]);

        check_contents(name, &*db, &model);
        db.compact().unwrap();
        check_contents(name, &*db, &model);
    }
    // Everything survives a close and reopen.
    let db = open(name, &path, config).unwrap();
    check_contents(name, &*db, &model);
}

fn check_contents(name: &str, db: &dyn super::Engine, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut value = Vec::new();
    for (k, v) in model {
        assert!(
            db.get(k, &mut value).unwrap(),
            "{name}: lost {}",
            String::from_utf8_lossy(k)
        );
        assert_eq!(
            &value,
            v,
            "{name}: wrong value for {}",
            String::from_utf8_lossy(k)
        );
    }
    for gone in [&b"key0001"[..], b"key0100", b"never", b"key", b"key99999"] {
        assert!(
            !db.get(gone, &mut value).unwrap(),
            "{name}: found {}",
            String::from_utf8_lossy(gone)
        );
    }

    let mut forward = Vec::new();
    let n = db
        .scan(false, u64::MAX, &mut |k, v| {
            forward.push((k.to_vec(), v.to_vec()))
        })
        .unwrap();
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(n as usize, expected.len(), "{name}: forward scan count");
    assert!(
        forward == expected,
        "{name}: forward scan differs from the model"
    );

    let mut backward = Vec::new();
    db.scan(true, u64::MAX, &mut |k, v| {
        backward.push((k.to_vec(), v.to_vec()))
    })
    .unwrap();
    backward.reverse();
    assert!(
        backward == expected,
        "{name}: backward scan differs from the model"
    );

    let mut first = Vec::new();
    assert_eq!(
        db.scan(false, 3, &mut |k, _| first.push(k.to_vec()))
            .unwrap(),
        3
    );
    assert_eq!(first, model.keys().take(3).cloned().collect::<Vec<_>>());
    let mut last = Vec::new();
    assert_eq!(
        db.scan(true, 2, &mut |k, _| last.push(k.to_vec())).unwrap(),
        2
    );
    assert_eq!(
        last,
        model.keys().rev().take(2).cloned().collect::<Vec<_>>()
    );

    let mut found = Vec::new();
    for probe in [&b"key0001"[..], b"key0002", b"key00025", b"", b"key0100"] {
        let want = model.range(probe.to_vec()..).next().map(|(k, _)| k.clone());
        let got = db.seek(probe, &mut found).unwrap().then(|| found.clone());
        assert_eq!(
            got,
            want,
            "{name}: seek to {}",
            String::from_utf8_lossy(probe)
        );
    }
    assert!(
        !db.seek(b"zzz", &mut found).unwrap(),
        "{name}: seek past the end"
    );

    // A seek and steps (`--seek_nexts`), where the engine has it: the entries after the
    // probe, in order, with their values.
    for (probe, nexts) in [
        (&b"key00025"[..], 3u64),
        (b"", 0),
        (b"key0100", 2),
        (b"zzz", 4),
    ] {
        let mut seen = Vec::new();
        match db.seek_scan(probe, nexts, &mut |k, v| {
            seen.push((k.to_vec(), v.to_vec()))
        }) {
            Ok(n) => {
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range(probe.to_vec()..)
                    .take(usize::try_from(nexts).unwrap() + 1)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(
                    seen,
                    want,
                    "{name}: seek_scan to {}",
                    String::from_utf8_lossy(probe)
                );
                assert_eq!(n, want.len() as u64, "{name}: seek_scan count");
            }
            Err(e) => {
                assert!(e.contains("--seek_nexts"), "{name}: {e}");
                assert!(
                    !super::SEEK_SCAN.contains(&name),
                    "{name} is listed in SEEK_SCAN but has no seek_scan: {e}"
                );
            }
        }
    }
    assert!(
        super::SEEK_SCAN.contains(&name) || db.seek_scan(b"", 0, &mut |_, _| {}).is_err(),
        "{name} has seek_scan but is not listed in SEEK_SCAN"
    );
}

#[test]
fn every_engine_in_this_build_conforms() {
    for name in super::available() {
        check(name);
    }
}

#[test]
fn engines_with_leveldbs_level0_triggers_conform() {
    let config = EngineConfig {
        l0_slowdown_writes_trigger: Some(8),
        l0_stop_writes_trigger: Some(12),
        ..EngineConfig::default()
    };
    for name in super::available() {
        check_with(name, &config);
    }
}

#[test]
fn engines_with_a_row_cache_conform() {
    let config = EngineConfig {
        row_cache_size: 64 << 10,
        ..EngineConfig::default()
    };
    for name in super::available() {
        check_with(name, &config);
    }
}
