// SPDX-License-Identifier: MIT OR Apache-2.0
//! Blob file tests: pointers, writing, reading through pointers, scanning, damage.

use std::path::Path;

use super::*;
use crate::env::{read_file_to_vec, write_file, Env, MemEnv};
use crate::error::Error;

fn env() -> MemEnv {
    let env = MemEnv::new();
    env.create_dir_all(Path::new("/db")).unwrap();
    env
}

fn value_of(i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 7 + j % 13) as u8).collect()
}

/// Writes records `i → value_of(i, len_i)` and returns their pointers.
fn write_some(env: &MemEnv, number: u64, compression: Compression) -> Vec<(Vec<u8>, BlobPointer)> {
    let mut w = BlobFileWriter::create(env, Path::new("/db"), number).unwrap();
    let mut out = Vec::new();
    for (i, len) in [0usize, 1, 100, 4096, 100_000, 7].into_iter().enumerate() {
        let key = format!("key{i}").into_bytes();
        let p = w.add(&key, &value_of(i as u32, len), compression).unwrap();
        out.push((key, p));
    }
    w.sync().unwrap();
    assert!(w.is_synced());
    assert_eq!(w.records(), 6);
    assert_eq!(env.file_size(w.path()).unwrap(), w.len());
    out
}

#[test]
fn pointers_round_trip_and_reject_garbage() {
    for p in [
        BlobPointer {
            file: 1,
            offset: 41,
            len: 0,
            compression: Compression::None,
            crc: 0,
        },
        BlobPointer {
            file: u64::MAX,
            offset: u64::MAX,
            len: u64::MAX,
            compression: Compression::Snappy,
            crc: u32::MAX,
        },
    ] {
        let e = p.encode();
        assert!(e.len() <= BlobPointer::MAX_ENCODED_LEN);
        assert_eq!(BlobPointer::decode(&e), Some(p));
        assert_eq!(BlobPointer::decode(&e[..e.len() - 1]), None, "cut");
        let mut longer = e.clone();
        longer.push(0);
        assert_eq!(BlobPointer::decode(&longer), None, "trailing byte");
    }
    let mut bad_compression = BlobPointer {
        file: 1,
        offset: 41,
        len: 3,
        compression: Compression::None,
        crc: 0,
    }
    .encode();
    bad_compression[3] = 9;
    assert_eq!(BlobPointer::decode(&bad_compression), None);
    assert_eq!(BlobPointer::decode(b""), None);
}

#[test]
fn values_read_back_through_their_pointers_with_and_without_compression() {
    let env = env();
    for (number, compression) in [(5, Compression::None), (6, Compression::Snappy)] {
        let written = write_some(&env, number, compression);
        let path = crate::filename::blob_file(Path::new("/db"), number);
        let file = env.new_random_access_file(&path).unwrap();
        let len = env.file_size(&path).unwrap();
        for (i, (_, p)) in written.iter().enumerate() {
            assert!(p.fits_in(len));
            let want = value_of(i as u32, [0usize, 1, 100, 4096, 100_000, 7][i]);
            assert_eq!(read_value(&*file, &path, len, p, true).unwrap(), want);
        }
        // The 100 KB value compresses (it repeats every 13 bytes) when asked.
        let big = written[4].1;
        assert_eq!(big.compression, compression);
        assert_eq!(big.len < 100_000, compression == Compression::Snappy);
    }
}

#[test]
fn a_scan_returns_every_record_with_the_pointer_that_reaches_it() {
    let env = env();
    let written = write_some(&env, 7, Compression::Snappy);
    let path = crate::filename::blob_file(Path::new("/db"), 7);
    let mut scan = BlobScanner::open(&env, &path).unwrap();
    assert_eq!(scan.number(), 7);
    let mut seen = Vec::new();
    while let Some(r) = scan.next() {
        let r = r.unwrap();
        assert_eq!(
            r.value(&path).unwrap(),
            value_of(
                seen.len() as u32,
                [0usize, 1, 100, 4096, 100_000, 7][seen.len()]
            )
        );
        seen.push((r.key, r.pointer));
    }
    assert_eq!(seen, written);
    assert_eq!(scan.position(), scan.file_len());
}

#[test]
fn damage_is_caught_by_the_pointer_checksum_and_by_the_scan() {
    let env = env();
    let written = write_some(&env, 8, Compression::None);
    let path = crate::filename::blob_file(Path::new("/db"), 8);
    let clean = read_file_to_vec(&env, &path).unwrap();
    let target = written[3].1; // the 4096-byte value
    for at in [
        target.offset,
        target.offset + 2000,
        target.offset + target.len - 1,
    ] {
        let mut bytes = clean.clone();
        bytes[at as usize] ^= 0x10;
        write_file(&env, &path, &bytes, false).unwrap();
        let file = env.new_random_access_file(&path).unwrap();
        let len = bytes.len() as u64;
        let err = read_value(&*file, &path, len, &target, true).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("000008.blob"), "{err}");
        // Without verification the damaged bytes come back: the caller asked not to check.
        assert_ne!(
            read_value(&*file, &path, len, &target, false).unwrap(),
            value_of(3, 4096)
        );
        // A scan stops at the damaged record, after the good ones.
        let mut scan = BlobScanner::open(&env, &path).unwrap();
        let good = (&mut std::iter::from_fn(|| scan.next()))
            .take_while(|r| r.is_ok())
            .count();
        assert_eq!(good, 3);
    }
}

#[test]
fn a_torn_tail_ends_a_scan_where_the_good_records_end() {
    let env = env();
    let written = write_some(&env, 9, Compression::None);
    let path = crate::filename::blob_file(Path::new("/db"), 9);
    let clean = read_file_to_vec(&env, &path).unwrap();
    let last_good_end = written[4].1.offset + written[4].1.len;
    for cut in [clean.len() - 1, clean.len() - 8, last_good_end as usize + 3] {
        write_file(&env, &path, &clean[..cut], false).unwrap();
        let mut scan = BlobScanner::open(&env, &path).unwrap();
        let mut good = 0;
        let mut err = None;
        while let Some(r) = scan.next() {
            match r {
                Ok(_) => good += 1,
                Err(e) => err = Some(e),
            }
        }
        assert_eq!(good, 5);
        assert!(err.unwrap().is_corruption());
        assert_eq!(scan.position(), last_good_end);
        // A pointer past the end is corruption at its offset, read or not: not a wrong value.
        let file = env.new_random_access_file(&path).unwrap();
        assert!(!written[5].1.fits_in(cut as u64));
        let err = read_value(&*file, &path, cut as u64, &written[5].1, true).unwrap_err();
        assert!(
            matches!(&err, Error::Corruption { offset, .. } if *offset == written[5].1.offset),
            "{err}"
        );
    }
}

#[test]
fn a_file_that_is_not_a_blob_file_is_refused() {
    let env = env();
    let path = Path::new("/db/000010.blob");
    for bytes in [
        &b""[..],
        b"strata-blob",
        b"strata-blob\0\x02\0\0\0\0\0\0\0\0\0\0\0",
        b"not-a-blob-file-at-all!!",
    ] {
        write_file(&env, path, bytes, false).unwrap();
        assert!(BlobScanner::open(&env, path).unwrap_err().is_corruption());
    }
}

#[test]
fn a_writer_refuses_everything_after_a_failure() {
    use crate::env::{FaultEnv, FaultKind, FaultPlan};
    let faults = FaultEnv::new(env());
    let mut w = BlobFileWriter::create(&faults, Path::new("/db"), 11).unwrap();
    w.add(b"a", b"1", Compression::None).unwrap();
    faults.set_plan(Some(FaultPlan {
        at: faults.ops(),
        kind: FaultKind::FailedSync,
        persistent: false,
    }));
    assert!(w.sync().is_err());
    assert!(w.sync().is_err(), "a failed sync is not retried");
    assert!(w.add(b"b", b"2", Compression::None).is_err());
    assert!(faults.violations().is_empty(), "{:?}", faults.violations());
}

#[test]
fn the_cache_opens_a_file_again_after_its_short_handle_is_forgotten() {
    let env = env();
    let written = write_some(&env, 8, Compression::None);
    let cache = BlobCache::new(std::sync::Arc::new(env.clone()), Path::new("/db"), 4);
    let first = cache.file(8).unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&first, &cache.file(8).unwrap()),
        "kept open"
    );
    cache.evict(8);
    let again = cache.file(8).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&first, &again), "opened anew");
    // Both handles read every value.
    for (i, (_, p)) in written.iter().enumerate() {
        let want = value_of(i as u32, [0usize, 1, 100, 4096, 100_000, 7][i]);
        assert_eq!(cache.read(p, true).unwrap(), want);
        let path = crate::filename::blob_file(Path::new("/db"), 8);
        let len = env.file_size(&path).unwrap();
        assert_eq!(read_value(&*first, &path, len, p, true).unwrap(), want);
    }
}

/// Regression (issue #15): a pointer's length was not checked against its file before a buffer
/// that long was allocated; a crafted one claiming 1 TiB aborted the process, checksums or not.
#[test]
fn a_pointer_reaching_past_its_file_is_corruption_before_anything_is_allocated() {
    let env = env();
    let written = write_some(&env, 12, Compression::None);
    let cache = BlobCache::new(std::sync::Arc::new(env.clone()), Path::new("/db"), 4);
    let path = crate::filename::blob_file(Path::new("/db"), 12);
    let len = env.file_size(&path).unwrap();
    let first = written[0].1;
    for (offset, claimed) in [
        (first.offset, 1 << 40),
        (first.offset, u64::MAX),
        (u64::MAX - 1, 2),
        (len, 1),
        (3, 1),
    ] {
        let pointer = BlobPointer {
            offset,
            len: claimed,
            ..first
        };
        for verify in [false, true] {
            let err = cache.read(&pointer, verify).unwrap_err();
            match &err {
                Error::Corruption {
                    file, offset: at, ..
                } => {
                    assert_eq!((file, *at), (&path, offset), "{err}")
                }
                other => panic!("expected corruption, got {other}"),
            }
        }
    }
}

#[test]
fn the_cache_reads_values_appended_after_it_opened_the_file() {
    let env = env();
    let mut w = BlobFileWriter::create(&env, Path::new("/db"), 13).unwrap();
    let cache = BlobCache::new(std::sync::Arc::new(env.clone()), Path::new("/db"), 4);
    let mut pointers = Vec::new();
    for i in 0..3u32 {
        let p = w.add(b"k", &value_of(i, 5000), Compression::None).unwrap();
        w.flush().unwrap();
        pointers.push(p);
        // Each read, the first of which opens the file, comes before the next append.
        for (j, p) in pointers.iter().enumerate() {
            assert_eq!(cache.read(p, true).unwrap(), value_of(j as u32, 5000));
        }
    }
}

/// A malformed pointer names the blob file it points into when it decodes that far, else the
/// database's directory; never an empty file. The reason names the entry's key.
#[test]
fn a_malformed_pointer_names_what_is_known() {
    let dir = Path::new("/db");
    let mut encoded = Vec::new();
    crate::coding::put_varint64(&mut encoded, 7);
    crate::coding::put_varint64(&mut encoded, 300);
    // File and offset decode; the length is cut off.
    match malformed_pointer(dir, b"k\x01", &encoded) {
        Error::Corruption {
            file,
            offset,
            reason,
        } => {
            assert_eq!((file, offset), (crate::filename::blob_file(dir, 7), 300));
            assert!(
                reason.contains("key 'k\\x01'") && reason.contains("/db"),
                "{reason}"
            );
        }
        other => panic!("{other}"),
    }
    // Only the file number decodes.
    match malformed_pointer(dir, b"k", &encoded[..1]) {
        Error::Corruption { file, .. } => assert_eq!(file, crate::filename::blob_file(dir, 7)),
        other => panic!("{other}"),
    }
    // Nothing decodes.
    match malformed_pointer(dir, b"k", &[0x80]) {
        Error::Corruption { file, reason, .. } => {
            assert_eq!(file, dir);
            assert!(reason.contains("key 'k'"), "{reason}");
        }
        other => panic!("{other}"),
    }
}

/// On a real disk a blob file asks for space ahead of its appends (so that the `write` of
/// each value does not allocate as it goes), its length stays what was appended, and the
/// space not filled is given back when the writer is dropped.
#[test]
fn a_posix_blob_file_reserves_ahead_and_gives_back_the_rest() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let env = crate::env::PosixEnv::new();
    let mut w = BlobFileWriter::create(&env, tmp.path(), 9).unwrap();
    let path = crate::filename::blob_file(tmp.path(), 9);
    let allocated = || std::fs::metadata(&path).unwrap().blocks() * 512;
    let mut pointers = Vec::new();
    for i in 0..50u32 {
        let key = format!("key{i:03}").into_bytes();
        pointers.push(w.add(&key, &value_of(i, 100_000), Compression::None).unwrap());
        w.flush().unwrap();
    }
    let len = w.len();
    assert_eq!(env.file_size(&path).unwrap(), len);
    let while_open = allocated();
    w.sync().unwrap();
    drop(w);
    let after = allocated();
    assert!(after < len + (1 << 20), "{after} bytes allocated for {len}");
    // Where the file system allocates ahead, the writer had space past its end.
    if while_open > after {
        assert!(while_open >= len, "{while_open} < {len}");
    }
    let mut scan = BlobScanner::open(&env, &path).unwrap();
    let mut n = 0;
    while let Some(r) = scan.next() {
        let r = r.unwrap();
        assert_eq!(r.pointer, pointers[n]);
        assert_eq!(r.value(&path).unwrap(), value_of(n as u32, 100_000));
        n += 1;
    }
    assert_eq!(n, 50);
    assert_eq!(scan.position(), len);
}

/// A writer told the length at which its file is closed reserves no space past it: the
/// record that crosses it, and any after, are written without a reservation.
#[test]
fn a_posix_blob_file_reserves_no_further_than_its_target_length() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let env = crate::env::PosixEnv::new();
    let target = 1 << 20;
    let mut w = BlobFileWriter::create(&env, tmp.path(), 9)
        .unwrap()
        .reserving_up_to(target);
    let path = crate::filename::blob_file(tmp.path(), 9);
    let allocated = || std::fs::metadata(&path).unwrap().blocks() * 512;
    for i in 0..15u32 {
        w.add(format!("key{i:03}").as_bytes(), &value_of(i, 100_000), Compression::None)
            .unwrap();
        w.flush().unwrap();
        // Never more than the target and a record past what was written (the file system
        // rounds to its blocks); without the target the first reservation was 4 MiB.
        let (len, now) = (w.len(), allocated());
        assert!(now <= len.max(target) + (256 << 10), "after {i}: {now} bytes allocated for {len}");
    }
    assert!(w.len() > target + 4 * 100_000);
}
