// SPDX-License-Identifier: MIT OR Apache-2.0
//! The log's corruption matrix: one behaviour per test.

use std::path::Path;

use super::*;
use crate::coding::{crc32c, mask_crc};
use crate::env::{read_file_to_vec, write_file, Env, MemEnv};
use crate::error::{Error, RecordError, Result};
use crate::log::tail_damage;

const PATH: &str = "/000007.log";

fn write_log(records: &[Vec<u8>]) -> Vec<u8> {
    let env = MemEnv::new();
    let mut w = LogWriter::new(env.new_writable_file(Path::new(PATH)).unwrap());
    for r in records {
        w.add_record(r).unwrap();
    }
    read_file_to_vec(&env, Path::new(PATH)).unwrap()
}

fn read_log(bytes: &[u8], mode: ReadMode) -> (Vec<Vec<u8>>, Vec<LogCorruption>, Option<Error>) {
    let env = MemEnv::new();
    write_file(&env, Path::new(PATH), bytes, false).unwrap();
    let file = env.new_sequential_file(Path::new(PATH)).unwrap();
    let mut r = LogReader::new(file, Path::new(PATH), mode);
    let mut out = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(rec)) => out.push(rec.to_vec()),
            Ok(None) => return (out, r.corruptions().to_vec(), None),
            Err(e) => return (out, r.corruptions().to_vec(), Some(e)),
        }
    }
}

fn big(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Rewrites the CRC of the physical record at `offset` after its bytes were edited.
fn fix_crc(bytes: &mut [u8], offset: usize) {
    let len = u16::from_le_bytes([bytes[offset + 4], bytes[offset + 5]]) as usize;
    let crc = crc32c(&bytes[offset + 6..offset + HEADER_SIZE + len]);
    bytes[offset..offset + 4].copy_from_slice(&mask_crc(crc).to_le_bytes());
}

#[test]
fn records_of_every_size_round_trip() {
    let records: Vec<Vec<u8>> = [
        0,
        1,
        100,
        BLOCK_SIZE - 14,
        BLOCK_SIZE,
        3 * BLOCK_SIZE + 17,
        5,
    ]
    .iter()
    .enumerate()
    .map(|(i, &n)| big(n, i as u8))
    .collect();
    let bytes = write_log(&records);
    let (out, corruptions, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none() && corruptions.is_empty());
    assert_eq!(out, records);
}

#[test]
fn full_record_bytes_match_leveldb() {
    assert_eq!(
        write_log(&[b"hello".to_vec()]),
        [0x0b, 0xb9, 0x57, 0x58, 0x05, 0x00, 0x01, b'h', b'e', b'l', b'l', b'o']
    );
}

#[test]
fn exactly_seven_bytes_left_gets_an_empty_first_fragment() {
    // 32761 - 7 payload bytes leave exactly 7 bytes in block 0.
    let bytes = write_log(&[big(BLOCK_SIZE - 2 * HEADER_SIZE, 1), b"small".to_vec()]);
    let at = BLOCK_SIZE - HEADER_SIZE;
    assert_eq!(
        &bytes[at..BLOCK_SIZE],
        &[0x64, 0x51, 0xd0, 0xe9, 0x00, 0x00, 0x02]
    );
    assert_eq!(bytes[BLOCK_SIZE + 6], RecordType::Last as u8);
    let (out, _, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none());
    assert_eq!(out[1], b"small");
}

#[test]
fn fewer_than_seven_bytes_left_are_zero_filled() {
    let bytes = write_log(&[big(BLOCK_SIZE - HEADER_SIZE - 3, 1), b"next".to_vec()]);
    assert_eq!(&bytes[BLOCK_SIZE - 3..BLOCK_SIZE], &[0, 0, 0]);
    assert_eq!(bytes.len(), BLOCK_SIZE + HEADER_SIZE + 4);
    let (out, _, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none());
    assert_eq!(out.len(), 2);
}

#[test]
fn writer_appending_to_an_existing_log_continues_its_block() {
    let env = MemEnv::new();
    let path = Path::new(PATH);
    let mut w = LogWriter::new(env.new_writable_file(path).unwrap());
    w.add_record(&big(BLOCK_SIZE - 10, 3)).unwrap();
    let len = w.file_len();
    drop(w);
    let mut w = LogWriter::with_existing_len(env.new_appendable_file(path).unwrap(), len);
    w.add_record(b"after reopen").unwrap();
    let bytes = read_file_to_vec(&env, path).unwrap();
    let (out, _, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none());
    assert_eq!(out[1], b"after reopen");
}

#[test]
fn truncated_tail_header_is_the_end_of_the_log() {
    let mut bytes = write_log(&[b"first".to_vec(), b"second".to_vec()]);
    bytes.truncate(12 + 4);
    let (out, corruptions, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none() && corruptions.is_empty());
    assert_eq!(out, vec![b"first".to_vec()]);
}

#[test]
fn truncated_tail_payload_is_the_end_of_the_log() {
    let mut bytes = write_log(&[b"first".to_vec(), big(1000, 2)]);
    bytes.truncate(bytes.len() - 1);
    let (out, corruptions, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none() && corruptions.is_empty());
    assert_eq!(out, vec![b"first".to_vec()]);
}

#[test]
fn fragmented_record_cut_off_at_the_end_is_dropped_silently() {
    let mut bytes = write_log(&[b"first".to_vec(), big(3 * BLOCK_SIZE, 2)]);
    bytes.truncate(2 * BLOCK_SIZE + 100);
    let (out, corruptions, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none() && corruptions.is_empty());
    assert_eq!(out, vec![b"first".to_vec()]);
}

#[test]
fn bad_checksum_in_strict_mode_is_an_error_naming_file_and_offset() {
    let mut bytes = write_log(&[b"first".to_vec(), b"second".to_vec()]);
    bytes[12 + HEADER_SIZE] ^= 1;
    let (out, _, err) = read_log(&bytes, ReadMode::Strict);
    assert_eq!(out, vec![b"first".to_vec()]);
    let err = err.expect("corruption");
    match &err {
        Error::Corruption {
            file,
            offset,
            reason,
        } => {
            assert_eq!(file, Path::new(PATH));
            assert_eq!(*offset, 12);
            assert!(reason.contains("checksum mismatch"), "{reason}");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn bad_checksum_in_tolerant_mode_drops_the_rest_of_the_block_and_goes_on() {
    let records = vec![
        b"a".to_vec(),
        b"b".to_vec(),
        big(BLOCK_SIZE, 5),
        b"z".to_vec(),
    ];
    let mut bytes = write_log(&records);
    bytes[8 + HEADER_SIZE] ^= 0x80; // record "b", in block 0
    let (out, corruptions, err) = read_log(&bytes, ReadMode::Tolerant);
    assert!(err.is_none());
    // "b" and the FIRST fragment of the big record share block 0 and are lost; the big record's
    // later fragments are reported as orphans; "z" survives.
    assert_eq!(out, vec![b"a".to_vec(), b"z".to_vec()]);
    assert_eq!(corruptions[0].reason, "checksum mismatch");
    assert_eq!(corruptions[0].offset, 8);
    assert_eq!(corruptions[0].dropped_bytes, BLOCK_SIZE as u64 - 8);
    assert!(corruptions[1..]
        .iter()
        .all(|c| c.reason == "missing start of fragmented record"));
}

#[test]
fn bad_length_inside_the_file_is_corruption() {
    let mut bytes = write_log(&[b"a".to_vec(), big(BLOCK_SIZE, 1), b"end".to_vec()]);
    // Claim the first record is longer than the rest of its block.
    bytes[4..6].copy_from_slice(&0xfff0u16.to_le_bytes());
    let (out, corruptions, err) = read_log(&bytes, ReadMode::Tolerant);
    assert!(err.is_none());
    assert_eq!(corruptions[0].reason, "bad record length");
    assert_eq!(out.last().unwrap(), b"end");
    let (_, _, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.unwrap().to_string().contains("bad record length"));
}

#[test]
fn unknown_record_type_is_corruption() {
    let mut bytes = write_log(&[b"a".to_vec(), b"b".to_vec()]);
    bytes[6] = 9;
    fix_crc(&mut bytes, 0);
    let (out, corruptions, _) = read_log(&bytes, ReadMode::Tolerant);
    assert_eq!(out, vec![b"b".to_vec()]);
    assert_eq!(corruptions.len(), 1);
    assert_eq!(corruptions[0].reason, "unknown record type");
    assert_eq!(corruptions[0].dropped_bytes, 8);
}

#[test]
fn middle_fragment_without_first_is_corruption() {
    let mut bytes = write_log(&[b"a".to_vec(), b"b".to_vec()]);
    bytes[6] = RecordType::Middle as u8;
    fix_crc(&mut bytes, 0);
    let (out, corruptions, _) = read_log(&bytes, ReadMode::Tolerant);
    assert_eq!(out, vec![b"b".to_vec()]);
    assert_eq!(corruptions[0].reason, "missing start of fragmented record");
}

#[test]
fn last_fragment_without_first_is_corruption() {
    let mut bytes = write_log(&[b"a".to_vec(), b"b".to_vec()]);
    bytes[6] = RecordType::Last as u8;
    fix_crc(&mut bytes, 0);
    let (_, _, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.unwrap().is_corruption());
}

#[test]
fn first_fragment_followed_by_full_reports_the_partial_record() {
    let mut bytes = write_log(&[b"aaaa".to_vec(), b"b".to_vec()]);
    bytes[6] = RecordType::First as u8;
    fix_crc(&mut bytes, 0);
    let (out, corruptions, _) = read_log(&bytes, ReadMode::Tolerant);
    assert_eq!(out, vec![b"b".to_vec()]);
    assert_eq!(corruptions[0].reason, "partial record without end");
    assert_eq!(corruptions[0].dropped_bytes, 4);
}

#[test]
fn zero_filled_preallocated_space_is_skipped() {
    let mut bytes = write_log(&[b"a".to_vec()]);
    bytes.resize(BLOCK_SIZE, 0);
    bytes.extend(write_log(&[b"next block".to_vec()]));
    let (out, corruptions, err) = read_log(&bytes, ReadMode::Strict);
    assert!(err.is_none() && corruptions.is_empty());
    assert_eq!(out, vec![b"a".to_vec(), b"next block".to_vec()]);
}

/// Random bytes, alone or written over part of a real log, never panic the reader; it returns
/// only records that were written, in order, and every error is corruption naming the file.
#[test]
fn garbage_never_panics_and_never_yields_an_unwritten_record() {
    let written = vec![b"one".to_vec(), big(40_000, 1), b"three".to_vec()];
    let log = write_log(&written);
    let mut state = 0x1234_5678_u32;
    for len in [
        0usize,
        1,
        6,
        7,
        8,
        100,
        BLOCK_SIZE - 1,
        BLOCK_SIZE + 9,
        3 * BLOCK_SIZE,
    ] {
        let garbage: Vec<u8> = (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect();
        let mut overwritten = log.clone();
        let at = len % log.len();
        let end = (at + len).min(log.len());
        overwritten[at..end].copy_from_slice(&garbage[..end - at]);
        for (what, bytes) in [("garbage", &garbage), ("overwritten log", &overwritten)] {
            for mode in [ReadMode::Tolerant, ReadMode::Strict] {
                let (out, _, err) = read_log(bytes, mode);
                let mut rest = written.iter();
                for rec in &out {
                    assert!(
                        rest.any(|w| w == rec),
                        "{what} of {len} bytes, {mode:?}: a record of {} bytes was never written",
                        rec.len()
                    );
                }
                match err {
                    None => {}
                    Some(Error::Corruption { file, .. }) => assert_eq!(file, Path::new(PATH)),
                    Some(e) => panic!("{what} of {len} bytes, {mode:?}: {e}"),
                }
            }
        }
    }
}

#[test]
fn every_truncation_yields_a_prefix_of_the_records() {
    let records = vec![
        b"one".to_vec(),
        big(40_000, 1),
        b"three".to_vec(),
        big(70_000, 2),
    ];
    let bytes = write_log(&records);
    for cut in (0..bytes.len()).step_by(997).chain([bytes.len()]) {
        let (out, corruptions, err) = read_log(&bytes[..cut], ReadMode::Strict);
        assert!(err.is_none(), "cut at {cut}: {err:?}");
        assert!(corruptions.is_empty());
        assert_eq!(out[..], records[..out.len()], "cut at {cut}");
    }
}

#[test]
fn end_of_last_record_is_where_a_continuing_writer_appends() {
    // Records of every shape: small, block-filling, fragmented over several blocks.
    let records = vec![
        b"first".to_vec(),
        big(BLOCK_SIZE - 20, 1),
        big(3 * BLOCK_SIZE + 5, 2),
        Vec::new(),
    ];
    let env = MemEnv::new();
    let mut w = LogWriter::new(env.new_writable_file(Path::new(PATH)).unwrap());
    let mut ends = Vec::new();
    for r in &records {
        w.add_record(r).unwrap();
        ends.push(w.file_len());
    }
    let bytes = read_file_to_vec(&env, Path::new(PATH)).unwrap();
    for cut in [bytes.len(), bytes.len() - 3] {
        write_file(&env, Path::new(PATH), &bytes[..cut], false).unwrap();
        let file = env.new_sequential_file(Path::new(PATH)).unwrap();
        let mut r = LogReader::new(file, Path::new(PATH), ReadMode::Strict);
        assert_eq!(r.end_of_last_record(), 0);
        let mut seen = Vec::new();
        while r.next_record().unwrap().is_some() {
            seen.push(r.end_of_last_record());
        }
        if cut == bytes.len() {
            assert_eq!(seen, ends);
            assert_eq!(r.end_of_last_record(), bytes.len() as u64);
        } else {
            // The torn last record is not returned; the end stays after the one before it.
            assert_eq!(seen, ends[..3]);
            assert!(r.end_of_last_record() < cut as u64);
        }
    }
}

/// Reads in recovery mode and also reports whether the tail was torn.
fn recover_log(bytes: &[u8]) -> (Vec<Vec<u8>>, bool, Option<Error>) {
    let env = MemEnv::new();
    write_file(&env, Path::new(PATH), bytes, false).unwrap();
    let file = env.new_sequential_file(Path::new(PATH)).unwrap();
    let mut r = LogReader::new(file, Path::new(PATH), ReadMode::Recovery);
    let mut out = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(rec)) => out.push(rec.to_vec()),
            Ok(None) => return (out, r.torn_tail(), None),
            Err(e) => return (out, r.torn_tail(), Some(e)),
        }
    }
}

#[test]
fn recovery_mode_ends_the_log_at_damage_that_runs_to_its_end() {
    let records = vec![big(100, 1), big(200, 2), big(300, 3)];
    let clean = write_log(&records);
    let (read, torn, err) = recover_log(&clean);
    assert_eq!((read.len(), torn, err.is_none()), (3, false, true));

    // The last record cut short, or garbled: a torn tail, not an error.
    let mut garbled = clean[..clean.len() - 50].to_vec();
    garbled.extend_from_slice(&[0xab; 80]);
    for bytes in [&clean[..clean.len() - 50], &garbled[..]] {
        let (read, torn, err) = recover_log(bytes);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(read, records[..2].to_vec());
        assert!(torn);
    }
}

#[test]
fn recovery_mode_refuses_damage_followed_by_a_readable_record() {
    let records = vec![big(100, 1), big(200, 2), big(300, 3)];
    let mut bytes = write_log(&records);
    // Garbage over the second record's payload: record 3 still follows it.
    let second = HEADER_SIZE + 100;
    bytes[second + HEADER_SIZE + 10..second + HEADER_SIZE + 30].fill(0x5a);
    let (read, _, err) = recover_log(&bytes);
    assert_eq!(read, records[..1].to_vec());
    let err = err.expect("damage inside the log is an error");
    assert!(err.is_corruption());
    let text = err.to_string();
    assert!(
        text.contains(&format!("{PATH} at offset {second}"))
            && text.contains("readable records follow"),
        "{text}"
    );
}

#[test]
fn recovery_mode_refuses_one_flipped_bit_even_in_the_last_record() {
    let records = vec![big(100, 1), big(200, 2), big(300, 3)];
    let clean = write_log(&records);
    let last = 2 * HEADER_SIZE + 300;
    // Every bit of the last record: checksum, length, type, payload.
    for byte in last..clean.len() {
        for bit in 0..8 {
            let mut bytes = clean.clone();
            bytes[byte] ^= 1 << bit;
            let (read, _, err) = recover_log(&bytes);
            let err =
                err.unwrap_or_else(|| panic!("byte {byte} bit {bit}: read {} records", read.len()));
            let text = err.to_string();
            assert!(
                text.contains(&format!("at offset {last}")) && text.contains("one flipped bit"),
                "byte {byte} bit {bit}: {text}"
            );
        }
    }
}

#[test]
fn recovery_mode_takes_a_zeroed_tail_for_a_torn_write() {
    let records = vec![big(100, 1), big(200, 2), big(600, 3)];
    let mut bytes = write_log(&records);
    let len = bytes.len();
    bytes[len - 512..].fill(0);
    let (read, torn, err) = recover_log(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(read, records[..2].to_vec());
    assert!(torn);
}

#[test]
fn recovery_mode_finds_readable_records_in_a_later_block() {
    // A record filling most of block 0, damaged; records in block 1 follow it.
    let records = vec![
        big(BLOCK_SIZE - 100, 1),
        big(10, 2),
        big(BLOCK_SIZE, 3),
        big(10, 4),
    ];
    let mut bytes = write_log(&records);
    bytes[HEADER_SIZE + 5] ^= 1;
    let (read, _, err) = recover_log(&bytes);
    assert!(read.is_empty());
    assert!(err.expect("an error").to_string().contains("at offset 0"));
}

#[test]
fn torn_tail_is_false_for_a_log_that_ends_after_its_last_record() {
    let (_, torn, _) = recover_log(&[]);
    assert!(!torn);
    let bytes = write_log(&[big(BLOCK_SIZE - HEADER_SIZE - 3, 1)]);
    let (read, torn, _) = recover_log(&bytes);
    assert_eq!((read.len(), torn), (1, false));
    // Zero-filled space after the last record is a torn tail too.
    let mut zeros = bytes.clone();
    zeros.extend_from_slice(&[0; 100]);
    let (read, torn, err) = recover_log(&zeros);
    assert_eq!((read.len(), torn, err.is_none()), (1, true, true));
}

/// A file that fails its `fail_at`th append (counting from 0) and records every byte it takes.
struct FlakyFile {
    appends: usize,
    fail_at: usize,
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl crate::env::WritableFile for FlakyFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.appends += 1;
        if self.appends - 1 == self.fail_at {
            return Err(Error::io(
                "/flaky.log",
                "write",
                std::io::Error::from_raw_os_error(28),
            ));
        }
        self.bytes.lock().unwrap().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn after_a_failed_append_the_writer_never_touches_the_file_again() {
    let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let file = FlakyFile {
        appends: 0,
        fail_at: 1, // the payload of the first record: its header is already written
        bytes: bytes.clone(),
    };
    let mut writer = LogWriter::new(Box::new(file));
    assert!(writer.add_record(b"first").is_err());
    let torn = bytes.lock().unwrap().len();
    assert_eq!(torn, crate::log::HEADER_SIZE);
    // The file would take the next record, but the log's tail is torn: appending after it
    // would put a whole record behind a broken one.
    let e = writer.add_record(b"second").unwrap_err();
    assert!(e.to_string().contains("write"), "{e}");
    assert!(writer.sync().is_err());
    assert_eq!(bytes.lock().unwrap().len(), torn);
}

/// What a crash leaves after a log's last record passes `tail_damage`; bytes no writer wrote
/// there do not.
#[test]
fn tail_damage_passes_what_a_crash_leaves_and_nothing_else() {
    let whole = write_log(&[big(100, 1), big(3 * BLOCK_SIZE, 2)]);
    let first_end = HEADER_SIZE + 100;
    // The second record cut at every kind of place: in its first header, in its first
    // fragment's payload, after its first fragment, in a later fragment; zeros after a cut.
    for cut in [
        first_end + 3,
        first_end + 500,
        BLOCK_SIZE + 2,
        BLOCK_SIZE + 900,
        2 * BLOCK_SIZE + 40,
    ] {
        let tail = &whole[first_end..cut];
        assert_eq!(tail_damage(tail, first_end as u64), None, "cut at {cut}");
        let mut zeroed = tail.to_vec();
        zeroed.extend_from_slice(&[0; 700]);
        assert_eq!(
            tail_damage(&zeroed, first_end as u64),
            None,
            "zeros after {cut}"
        );
    }
    // A whole log has no tail to judge; nor has an empty one.
    assert_eq!(tail_damage(&[], whole.len() as u64), None);

    // Bytes a writer cannot have written there.
    let mut bad_type = whole[first_end..first_end + 500].to_vec();
    bad_type[6] = 9;
    let short = write_log(&[big(100, 1), big(50, 3)]);
    let mut bad_crc = short[first_end..].to_vec();
    bad_crc[0] ^= 1;
    let garbage: Vec<u8> = (0..100u32).map(|i| (i * 97 + 13) as u8 | 0x80).collect();
    for (tail, reason) in [
        (bad_type, "unknown record type"),
        (bad_crc, "checksum mismatch"),
        (garbage, "unknown record type"),
    ] {
        let damage = tail_damage(&tail, first_end as u64).expect(reason);
        assert_eq!(damage.reason, reason);
        assert_eq!(damage.offset, first_end as u64);
    }
    // A length that runs past its block while the file goes on.
    let mut long = vec![0u8; 64];
    long[4..6].copy_from_slice(&u16::MAX.to_le_bytes());
    long[6] = 1;
    let at = (BLOCK_SIZE - 64) as u64;
    let damage = tail_damage(&long, at).unwrap();
    assert_eq!(damage.reason, "bad record length");
}

/// Every byte of a record, whole or split across blocks, maps to the file offset where it lies:
/// `file_offset_of` skips the headers between fragments (a record's offset plus the byte's
/// index would not).
#[test]
fn file_offset_of_finds_each_byte_of_a_record_in_the_file() {
    let records = vec![big(100, 1), big(3 * BLOCK_SIZE + 500, 2), big(10, 3)];
    let bytes = write_log(&records);
    let env = MemEnv::new();
    write_file(&env, Path::new(PATH), &bytes, false).unwrap();
    let file = env.new_sequential_file(Path::new(PATH)).unwrap();
    let mut r = LogReader::new(file, Path::new(PATH), ReadMode::Strict);
    for expected in &records {
        let record = r.next_record().unwrap().unwrap().to_vec();
        assert_eq!(&record, expected);
        for n in (0..record.len()).step_by(97).chain([record.len() - 1]) {
            let at = r.file_offset_of(n as u64) as usize;
            assert_eq!(
                bytes[at],
                record[n],
                "byte {n} of a {}-byte record",
                record.len()
            );
        }
        // A fragment's first byte, past a header in the middle of the record.
        if record.len() > BLOCK_SIZE {
            let first_fragment = BLOCK_SIZE - HEADER_SIZE - 100 - HEADER_SIZE;
            let at = r.file_offset_of(first_fragment as u64);
            assert_eq!(at, (BLOCK_SIZE + HEADER_SIZE) as u64);
        }
        let e = r.record_error(RecordError::new(record.len() as u64 - 1, "test"));
        match e {
            Error::Corruption { file, offset, .. } => {
                assert_eq!(file, Path::new(PATH));
                assert_eq!(bytes[offset as usize], record[record.len() - 1]);
            }
            other => panic!("{other}"),
        }
    }
}

/// Any byte index gives an offset, never an overflow: a decoder's offset past the record (or
/// a caller's) is counted on from the last fragment and saturates.
#[test]
fn file_offset_of_any_index_saturates_instead_of_overflowing() {
    let bytes = write_log(&[big(100, 1)]);
    let env = MemEnv::new();
    write_file(&env, Path::new(PATH), &bytes, false).unwrap();
    let file = env.new_sequential_file(Path::new(PATH)).unwrap();
    let mut r = LogReader::new(file, Path::new(PATH), ReadMode::Strict);
    assert_eq!(
        r.file_offset_of(5),
        0,
        "before any record: the last record's offset"
    );
    r.next_record().unwrap().unwrap();
    assert_eq!(r.file_offset_of(100), (HEADER_SIZE + 100) as u64);
    assert_eq!(r.file_offset_of(u64::MAX), u64::MAX);
}
