// SPDX-License-Identifier: MIT OR Apache-2.0
//! Read-only handles beside a writer (`db/read_only.rs`): the state fixed at open and at each
//! `catch_up`, files held open through the writer's deletions, snapshots and cursors keeping
//! their state, retries when the writer replaces a file.

use super::*;

fn key(i: u32) -> Vec<u8> {
    format!("{i:06}").into_bytes()
}

/// Writes `round`'s value of keys `0..n` (large enough values that flushes and compactions
/// run), then compacts everything, so that every table the round before made is deleted.
fn write_round(db: &Db, n: u32, round: u32) {
    for i in 0..n {
        db.put(key(i), format!("{round}-{i}-{}", "x".repeat(200)))
            .unwrap();
    }
}

fn value_round(db: &Db, options: &ReadOptions<'_>, i: u32) -> Option<u32> {
    db.get_opt(key(i), options)
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
        .map(|v| v.split('-').next().unwrap().parse().unwrap())
}

fn tables(env: &MemEnv) -> Vec<String> {
    let mut names: Vec<String> = env
        .children(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".ldb"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_reader_beside_a_writer_keeps_its_state_and_files_until_it_catches_up() {
    let env = MemEnv::new();
    let writer = Db::open(DIR, small_options(&env)).unwrap();
    write_round(&writer, 2000, 1);
    writer.compact_range(None, None).unwrap();
    write_round(&writer, 500, 2); // in tables and the log
    let reader = Db::open_read_only(DIR, small_options(&env)).unwrap();
    let (seqno, beside) = reader.read_state();
    assert!(beside);
    assert_eq!(seqno, 2500);
    let tables_at_open = tables(&env);
    let snapshot = reader.snapshot();
    let mut cursor = reader.iter().unwrap();
    cursor.seek_to_first();

    // The writer rewrites everything and compacts: every table the reader opened is deleted.
    write_round(&writer, 2000, 3);
    writer.compact_range(None, None).unwrap();
    writer.wait_for_compactions().unwrap();
    let now = tables(&env);
    assert!(
        tables_at_open.iter().all(|t| !now.contains(t)),
        "{tables_at_open:?} {now:?}"
    );

    // The reader still reads its state, from the files it holds, even once its cache has
    // let go of them.
    for number in 0..10_000 {
        reader.inner.table_cache.evict(number);
    }
    for i in (0..2000).step_by(7) {
        assert_eq!(
            value_round(&reader, &r(), i),
            Some(if i < 500 { 2 } else { 1 })
        );
    }
    reader.catch_up().unwrap();
    assert_eq!(reader.read_state(), (4500, true));
    let at_snapshot = ReadOptions {
        snapshot: Some(&snapshot),
        ..ReadOptions::default()
    };
    for i in (0..2000).step_by(7) {
        assert_eq!(value_round(&reader, &r(), i), Some(3));
        // The snapshot keeps the state it was taken in.
        assert_eq!(
            value_round(&reader, &at_snapshot, i),
            Some(if i < 500 { 2 } else { 1 })
        );
    }
    // And so does the cursor made before.
    let mut seen = 0;
    while cursor.valid() {
        let round = cursor
            .value()
            .split(|&b| b == b'-')
            .next()
            .unwrap()
            .to_vec();
        let i: u32 = std::str::from_utf8(cursor.key()).unwrap().parse().unwrap();
        assert_eq!(round, if i < 500 { b"2" } else { b"1" });
        seen += 1;
        cursor.next();
    }
    assert_eq!(seen, 2000);
    // A writable handle has nothing to catch up on.
    writer.catch_up().unwrap();
}

#[test]
fn a_reader_sees_the_log_up_to_its_last_whole_record() {
    let env = MemEnv::new();
    let writer = Db::open(DIR, options(&env)).unwrap();
    writer.put("a", "1").unwrap();
    writer.put("b", "2").unwrap();
    writer.put("c", "3").unwrap();
    // The last record torn, as a reader meets a write being appended.
    let log = env
        .children(Path::new(DIR))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".log"))
        .unwrap();
    let path = Path::new(DIR).join(log);
    let whole = crate::env::read_file_to_vec(&env, &path).unwrap();
    crate::env::write_file(&env, &path, &whole[..whole.len() - 3], false).unwrap();
    let reader = Db::open_read_only(DIR, options(&env)).unwrap();
    assert_eq!(reader.read_state(), (2, true));
    assert_eq!(reader.get("b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(reader.get("c").unwrap(), None);
    // The write appended whole, a catch_up sees it.
    crate::env::write_file(&env, &path, &whole, false).unwrap();
    reader.catch_up().unwrap();
    assert_eq!(reader.get("c").unwrap().as_deref(), Some(&b"3"[..]));
}

#[test]
fn a_current_naming_a_missing_manifest_is_retried_then_an_error_naming_it() {
    let env = MemEnv::new();
    let writer = Db::open(DIR, options(&env)).unwrap();
    writer.put("a", "1").unwrap();
    let current = Path::new(DIR).join("CURRENT");
    let name = crate::env::read_file_to_vec(&env, &current).unwrap();
    crate::env::write_file(&env, &current, b"MANIFEST-999999\n", false).unwrap();
    let started = std::time::Instant::now();
    let err = Db::open_read_only(DIR, options(&env)).unwrap_err();
    assert!(err.to_string().contains("MANIFEST-999999"), "{err}");
    // Retried, with a pause each time (1 + 2 + ... + 64 + 64 ms at least).
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    crate::env::write_file(&env, &current, &name, false).unwrap();
    let reader = Db::open_read_only(DIR, options(&env)).unwrap();
    assert_eq!(reader.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    // A failed catch_up leaves the reader's state as it was.
    writer.put("a", "2").unwrap();
    crate::env::write_file(&env, &current, b"MANIFEST-999999\n", false).unwrap();
    assert!(reader.catch_up().is_err());
    assert_eq!(reader.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    crate::env::write_file(&env, &current, &name, false).unwrap();
    reader.catch_up().unwrap();
    assert_eq!(reader.get("a").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_reader_beside_a_writer_holds_its_blob_files() {
    let env = MemEnv::new();
    let options = Options {
        blob_threshold: Some(100),
        ..small_options(&env)
    };
    let writer = Db::open(DIR, options.clone()).unwrap();
    // Values in blob files the version lists (flushed), then in ones only the log reaches.
    write_round(&writer, 600, 1);
    writer.compact_range(None, None).unwrap();
    for i in 0..100 {
        writer
            .put(key(i), format!("2-{i}-{}", "y".repeat(300)))
            .unwrap();
    }
    let reader = Db::open_read_only(DIR, options).unwrap();
    // The writer's garbage collection could delete every one of them: here they go at once.
    let blobs: Vec<String> = env
        .children(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".blob"))
        .collect();
    assert!(!blobs.is_empty());
    for name in &blobs {
        env.remove_file(&Path::new(DIR).join(name)).unwrap();
        let number = name.trim_end_matches(".blob").parse().unwrap();
        reader.inner.blob_cache.evict(number);
    }
    for i in 0..600 {
        assert_eq!(
            value_round(&reader, &r(), i),
            Some(if i < 100 { 2 } else { 1 })
        );
    }
    drop(writer);
}
