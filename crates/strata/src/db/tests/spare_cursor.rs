// SPDX-License-Identifier: MIT OR Apache-2.0
//! The spare cursor (`db/spare_cursor.rs`): a cursor built from a dropped one's parts reads
//! exactly what a new one would, and parts of an old view never outlive it.

use super::background::{fill_tables, tables_on_disk_and_live};
use super::*;

fn keys(cursor: &mut DbIterator) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    cursor.seek_to_first();
    while cursor.valid() {
        keys.push(cursor.key().to_vec());
        cursor.next();
    }
    cursor.status().unwrap();
    keys
}

fn spare_kept(db: &Db) -> bool {
    db.inner.spare_cursor.is_full()
}

#[test]
fn a_cursor_on_spare_parts_reads_the_writes_made_since() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put_opt(b"a", b"1", &w()).unwrap();
    db.put_opt(b"c", b"3", &w()).unwrap();
    let mut cursor = db.iter_opt(&r()).unwrap();
    assert_eq!(keys(&mut cursor), [b"a".to_vec(), b"c".to_vec()]);
    drop(cursor);
    assert!(spare_kept(&db), "the view is current: the parts are kept");
    db.put_opt(b"b", b"2", &w()).unwrap();
    db.delete_opt(b"c", &w()).unwrap();
    let mut cursor = db.iter_opt(&r()).unwrap();
    assert!(!spare_kept(&db), "the new cursor took them");
    assert_eq!(keys(&mut cursor), [b"a".to_vec(), b"b".to_vec()]);
    cursor.seek(b"b");
    assert_eq!(cursor.value(), b"2");
}

#[test]
fn a_cursor_on_spare_parts_hides_what_a_later_range_deletion_covers() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    for k in ["a", "b", "c", "d"] {
        db.put_opt(k, "v", &w()).unwrap();
    }
    // The database's first range deletion marks the manifest (a new view); later ones only
    // add to the memtable's fragments.
    db.delete_range("x", "y").unwrap();
    drop(db.iter_opt(&r()).unwrap());
    assert!(spare_kept(&db));
    db.delete_range("b", "d").unwrap();
    assert!(spare_kept(&db), "no new view");
    let mut cursor = db.iter_opt(&r()).unwrap();
    assert!(!spare_kept(&db), "built from the spare parts");
    assert_eq!(keys(&mut cursor), [b"a".to_vec(), b"d".to_vec()]);
}

#[test]
fn a_snapshot_or_other_read_options_build_their_own_cursor() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put_opt(b"k", b"old", &w()).unwrap();
    let snapshot = db.snapshot();
    db.put_opt(b"k", b"new", &w()).unwrap();
    drop(db.iter_opt(&r()).unwrap());
    assert!(spare_kept(&db));
    let at_snapshot = ReadOptions {
        snapshot: Some(&snapshot),
        ..r()
    };
    let mut cursor = db.iter_opt(&at_snapshot).unwrap();
    assert!(
        spare_kept(&db),
        "a snapshot's cursor left the spare parts alone"
    );
    cursor.seek(b"k");
    assert_eq!(cursor.value(), b"old");
    let unverified = ReadOptions {
        verify_checksums: false,
        ..r()
    };
    let cursor_unverified = db.iter_opt(&unverified).unwrap();
    assert!(spare_kept(&db), "other block options left them alone");
    drop(cursor_unverified);
    let mut cursor = db.iter_opt(&r()).unwrap();
    cursor.seek(b"k");
    assert_eq!(cursor.value(), b"new");
    drop(cursor);
}

#[test]
fn a_new_view_drops_the_spare_parts_and_the_tables_only_they_held_go() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    fill_tables(&db, 0);
    db.compact_range(None, None).unwrap();
    let mut cursor = db.iter_opt(&r()).unwrap();
    assert_eq!(keys(&mut cursor).len(), 3000);
    drop(cursor);
    assert!(spare_kept(&db));
    let (_, before) = tables_on_disk_and_live(&env, &db);
    fill_tables(&db, 1);
    db.compact_range(None, None).unwrap();
    assert!(!spare_kept(&db), "publishing a view emptied the slot");
    let (on_disk, live) = tables_on_disk_and_live(&env, &db);
    assert!(before.iter().all(|n| !live.contains(n)), "all rewritten");
    assert_eq!(on_disk, live, "tables only the spare parts read are gone");
    let mut cursor = db.iter_opt(&r()).unwrap();
    cursor.seek_to_first();
    assert!(cursor.value().starts_with(b"1:"));
}

#[test]
fn cursors_on_many_threads_share_one_slot_and_read_their_own_writes() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let db = &db;
            s.spawn(move || {
                for i in 0..300u32 {
                    let key = format!("t{t}-{i:04}");
                    db.put_opt(key.as_bytes(), format!("{i:0>100}").as_bytes(), &w())
                        .unwrap();
                    let mut cursor = db.iter_opt(&r()).unwrap();
                    cursor.seek(key.as_bytes());
                    assert!(cursor.valid(), "{key}");
                    assert_eq!(cursor.key(), key.as_bytes());
                    cursor.prev();
                    if i > 0 {
                        assert_eq!(cursor.key(), format!("t{t}-{:04}", i - 1).as_bytes());
                    }
                }
            });
        }
    });
    assert_eq!(scan(&db).len(), 1200);
}
