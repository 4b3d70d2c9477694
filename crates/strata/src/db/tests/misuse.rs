// SPDX-License-Identifier: MIT OR Apache-2.0
//! Cursors and ranges used out of order: nothing panics. A `DbIterator` that is not on an
//! entry answers `key` and `value` with an empty slice, ignores `next` and `prev`, and says
//! why through `try_key` and `try_value`; a `RangeIter` that has ended stays ended.

use super::*;

fn db_with(env: &MemEnv, keys: &[&str]) -> Db {
    let db = Db::open(DIR, options(env)).unwrap();
    for k in keys {
        db.put(k, format!("value of {k}")).unwrap();
    }
    db
}

/// A database of three keys in one table, whose first data block is damaged (a flipped byte):
/// reading it is a corruption error.
fn damaged_db(env: &MemEnv) -> Db {
    let db = db_with(env, &["a", "b", "c"]);
    db.compact_range(None, None).unwrap();
    drop(db);
    let table = env
        .children(Path::new(DIR))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".ldb"))
        .unwrap();
    let path = Path::new(DIR).join(table);
    let mut bytes = crate::env::read_file_to_vec(env, &path).unwrap();
    bytes[2] ^= 0x40;
    crate::env::write_file(env, &path, &bytes, false).unwrap();
    Db::open(DIR, options(env)).unwrap()
}

/// Every read of an invalid cursor, and both moves, on `it`: no panic, empty answers, and
/// still invalid after.
fn assert_inert(it: &mut DbIterator) {
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
    assert_eq!(it.value(), b"");
    assert!(it.try_key().is_err());
    assert!(it.try_value().is_err());
    it.next();
    assert!(!it.valid());
    it.prev();
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
}

#[test]
fn a_cursor_never_positioned_is_inert() {
    let env = MemEnv::new();
    let db = db_with(&env, &["a", "b"]);
    let mut it = db.iter().unwrap();
    assert_inert(&mut it);
    // Misuse is no error of the data: the status stays clean, and try_key says what it is.
    it.status().unwrap();
    assert!(matches!(it.try_key(), Err(Error::InvalidArgument(_))));
    // A seek still works after it.
    it.seek_to_first();
    assert_eq!(it.try_key().unwrap(), b"a");
    assert_eq!(it.try_value().unwrap(), b"value of a");
}

#[test]
fn a_cursor_past_either_end_is_inert_until_a_seek() {
    let env = MemEnv::new();
    let db = db_with(&env, &["a", "b"]);
    let mut it = db.iter().unwrap();
    it.seek_to_last();
    it.next();
    assert_inert(&mut it);
    it.status().unwrap();
    it.seek_to_first();
    it.prev();
    assert_inert(&mut it);
    it.status().unwrap();
    // `prev` past the start does not come back on the first entry, nor `next` on the last.
    it.next();
    assert!(!it.valid());
    it.seek(b"b");
    assert_eq!(it.key(), b"b");
    // A seek past every key leaves it invalid too.
    it.seek(b"z");
    assert_inert(&mut it);
}

#[test]
fn a_cursor_on_an_empty_database_is_inert() {
    let env = MemEnv::new();
    let db = db_with(&env, &[]);
    let mut it = db.iter().unwrap();
    it.seek_to_first();
    assert_inert(&mut it);
    it.seek_to_last();
    assert_inert(&mut it);
    it.status().unwrap();
}

#[test]
fn the_empty_key_is_told_apart_from_no_entry_by_try_key() {
    let env = MemEnv::new();
    let db = db_with(&env, &[""]);
    let mut it = db.iter().unwrap();
    it.seek_to_first();
    assert!(it.valid());
    assert_eq!((it.key(), it.try_key().unwrap()), (&b""[..], &b""[..]));
    it.next();
    assert_eq!(it.key(), b"");
    assert!(it.try_key().is_err());
}

#[test]
fn a_cursor_stopped_by_damage_reports_the_damage_from_try_key() {
    let env = MemEnv::new();
    let db = damaged_db(&env);
    let mut it = db.iter().unwrap();
    it.seek_to_first();
    assert_inert(&mut it);
    assert!(it.status().unwrap_err().is_corruption());
    assert!(it.try_key().unwrap_err().is_corruption());
    assert!(it.try_value().unwrap_err().is_corruption());
}

#[test]
fn a_range_stays_ended_whichever_end_is_asked() {
    let env = MemEnv::new();
    let db = db_with(&env, &["a", "b", "c"]);
    let mut range = db.range("a".."c").unwrap();
    assert_eq!(range.next().unwrap().unwrap().0, b"a");
    assert_eq!(range.next_back().unwrap().unwrap().0, b"b");
    for _ in 0..3 {
        assert!(range.next().is_none());
        assert!(range.next_back().is_none());
        assert!(range.next_borrowed().is_none());
        assert!(range.next_back_borrowed().is_none());
    }
    let mut keys = range.keys();
    assert!(keys.next().is_none() && keys.next_back().is_none());

    // Drained by `next_borrowed`, then asked again from both ends.
    let mut range = db.scan().unwrap();
    let mut seen = 0;
    while let Some(entry) = range.next_borrowed() {
        entry.unwrap();
        seen += 1;
    }
    assert_eq!(seen, 3);
    assert!(range.next_back_borrowed().is_none() && range.next().is_none());

    // Keys drained from the back, then asked from the front.
    let mut keys = db.scan().unwrap().keys();
    assert_eq!(keys.by_ref().rev().count(), 3);
    assert!(keys.next().is_none() && keys.next_back().is_none());
}

#[test]
fn empty_and_inverted_ranges_end_at_once() {
    let env = MemEnv::new();
    let db = db_with(&env, &["a", "b", "c"]);
    assert_eq!(db.range("m".."a").unwrap().count(), 0);
    assert_eq!(db.range("m".."a").unwrap().rev().count(), 0);
    assert_eq!(db.range("b".."b").unwrap().count(), 0);
    assert!(db.range("x"..).unwrap().next_back_borrowed().is_none());
    assert_eq!(db.prefix("zz").unwrap().keys().rev().count(), 0);
    let empty = db_with(&MemEnv::new(), &[]);
    let mut range = empty.scan().unwrap();
    assert!(range.next_borrowed().is_none() && range.next_back().is_none());
}

#[test]
fn a_range_ended_by_damage_stays_ended() {
    let env = MemEnv::new();
    let db = damaged_db(&env);
    let mut range = db.scan().unwrap();
    assert!(range.next_borrowed().unwrap().unwrap_err().is_corruption());
    assert!(range.next().is_none() && range.next_back().is_none());
    assert!(range.keys().next().is_none());
}
