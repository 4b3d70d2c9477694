# SPDX-License-Identifier: MIT OR Apache-2.0
"""plyvel's DB: opening, get/put/delete, write batches, snapshots, prefixed views, sizes,
properties, closing, repair and destroy. Each test runs on strata.plyvel and on plyvel."""

import builtins
import os
import random

import pytest

import strata.plyvel


def test_exception_classes(pv):
    assert issubclass(pv.IOError, pv.Error)
    assert issubclass(pv.IOError, builtins.IOError)
    assert issubclass(pv.CorruptionError, pv.Error)
    assert issubclass(pv.IteratorInvalidError, pv.Error)
    assert issubclass(pv.Error, Exception)


def test_versions():
    assert isinstance(strata.plyvel.__version__, str) and strata.plyvel.__version__
    assert strata.plyvel.__leveldb_version__ == "1.23"


def test_open_options(pv, tmp_path):
    path = str(tmp_path / "db")
    with pytest.raises(pv.Error):
        pv.DB(path)  # no database, create_if_missing not set
    if pv is strata.plyvel:  # LevelDB makes the directory, LOCK and LOG all the same
        assert not os.path.exists(path)
    db = pv.DB(
        path,
        create_if_missing=True,
        error_if_exists=True,
        paranoid_checks=True,
        write_buffer_size=128 << 10,
        max_open_files=100,
        lru_cache_size=1 << 20,
        block_size=1024,
        block_restart_interval=8,
        max_file_size=1 << 20,
        compression=None,
        bloom_filter_bits=10,
    )
    assert db.name == path
    for i in range(3000):
        db.put(b"%06d" % i, b"v" * 100)
    db.compact_range()
    assert db.get(b"001234") == b"v" * 100
    with pytest.raises(pv.IOError):  # locked by `db`
        pv.DB(path)
    db.close()
    with pytest.raises(pv.Error):
        pv.DB(path, error_if_exists=True)
    with pytest.raises(ValueError):
        pv.DB(path, compression="zlib")
    with pytest.raises(ValueError):
        pv.DB(path, comparator=lambda a, b: 0)
    db = pv.DB(path, compression="snappy")
    assert db.get(b"000000") == b"v" * 100
    db.close()


def test_put_get_delete(pv, db):
    assert db.get(b"k") is None
    assert db.get(b"k", b"default") == b"default"
    assert db.get(b"k", default=7) == 7
    db.put(b"k", b"v")
    db.put(b"s", b"synced", sync=True)
    assert db.get(b"k") == b"v"
    assert db.get(b"k", verify_checksums=True, fill_cache=False) == b"v"
    assert db.get(b"s") == b"synced"
    db.put(b"", b"empty key")
    assert db.get(b"") == b"empty key"
    db.put(b"\x00\xff", b"\x00" * 1000)
    assert db.get(b"\x00\xff") == b"\x00" * 1000
    db.delete(b"k")
    db.delete(b"s", sync=True)
    db.delete(b"never there")
    assert db.get(b"k") is None and db.get(b"s") is None


def test_keys_and_values_must_be_bytes(pv, db):
    for bad in ("str", bytearray(b"x"), 1, None):
        with pytest.raises(TypeError):
            db.put(bad, b"v")
        with pytest.raises(TypeError):
            db.get(bad)
        with pytest.raises(TypeError):
            db.delete(bad)
    with pytest.raises(TypeError):
        db.put(b"k", "str value")
    wb = db.write_batch()
    with pytest.raises(TypeError):
        wb.put("k", b"v")
    with pytest.raises(TypeError):
        wb.delete("k")


def test_write_batch(pv, db):
    db.put(b"gone", b"1")
    wb = db.write_batch()
    wb.put(b"a", b"1")
    wb.put(b"b", b"2")
    wb.delete(b"gone")
    assert db.get(b"a") is None  # nothing written yet
    wb.write()
    assert (db.get(b"a"), db.get(b"b"), db.get(b"gone")) == (b"1", b"2", None)
    # A batch keeps its operations after write().
    db.delete(b"a")
    wb.write()
    assert db.get(b"a") == b"1"
    wb.clear()
    db.delete(b"a")
    wb.write()
    assert db.get(b"a") is None
    with db.write_batch(sync=True) as b:
        b.put(b"c", b"3")
    assert db.get(b"c") == b"3"


def test_write_batch_size_and_append(pv, db):
    wb = db.write_batch()
    empty = wb.approximate_size()
    wb.put(b"k", b"v")
    assert wb.approximate_size() > empty
    other = db.write_batch()
    other.put(b"x", b"y")
    wb.append(other)
    wb.write()
    assert db.get(b"k") == b"v" and db.get(b"x") == b"y"


def test_write_batch_context_manager_on_exception(pv, db):
    with pytest.raises(ValueError):
        with db.write_batch(transaction=True) as b:
            b.put(b"tx", b"1")
            raise ValueError
    assert db.get(b"tx") is None  # a transaction writes nothing
    with pytest.raises(ValueError):
        with db.write_batch() as b:
            b.put(b"plain", b"1")
            raise ValueError
    assert db.get(b"plain") == b"1"  # otherwise what was added is written
    with db.write_batch(transaction=True) as b:
        b.put(b"tx", b"2")
    assert db.get(b"tx") == b"2"


def test_snapshot(pv, abc):
    db = abc
    snap = db.snapshot()
    db.put(b"a", b"new")
    db.delete(b"b")
    db.put(b"f", b"F")
    assert snap.get(b"a") == b"A"
    assert snap.get(b"b") == b"B"
    assert snap.get(b"f") is None
    assert snap.get(b"f", b"dflt") == b"dflt"
    assert snap.get(b"a", verify_checksums=True, fill_cache=False) == b"A"
    assert list(snap.iterator(include_value=False)) == [b"a", b"b", b"c", b"d", b"e"]
    assert list(snap.iterator(start=b"b", stop=b"d", reverse=True)) == [(b"c", b"C"), (b"b", b"B")]
    raw = snap.raw_iterator()
    raw.seek_to_last()
    assert raw.item() == (b"e", b"E")
    assert db.get(b"a") == b"new"
    snap.release()
    with pytest.raises(RuntimeError):
        snap.get(b"a")
    with pytest.raises(RuntimeError):
        snap.iterator()
    snap.close()  # again: nothing happens
    with db.snapshot() as s2:
        assert s2.get(b"f") == b"F"
    with pytest.raises(RuntimeError):
        s2.get(b"f")


def test_prefixed_db(pv, db):
    db.put(b"other", b"x")
    p = db.prefixed_db(b"p-")
    assert p.prefix == b"p-" and p.db is db
    p.put(b"1", b"one")
    p.put(b"2", b"two", sync=True)
    assert db.get(b"p-1") == b"one"
    assert p.get(b"1") == b"one" and p.get(b"3") is None and p.get(b"3", b"d") == b"d"
    assert p.get(b"1", verify_checksums=True, fill_cache=False) == b"one"
    assert list(p.iterator()) == [(b"1", b"one"), (b"2", b"two")]
    assert list(p.iterator(reverse=True, include_value=False)) == [b"2", b"1"]
    assert list(p.iterator(start=b"2")) == [(b"2", b"two")]
    assert list(p.iterator(stop=b"2", include_key=False)) == [b"one"]
    it = p.iterator()
    it.seek(b"2")
    assert next(it) == (b"2", b"two")
    p.delete(b"2")
    assert db.get(b"p-2") is None
    with p.write_batch() as wb:
        wb.put(b"3", b"three")
        wb.delete(b"1")
    assert db.get(b"p-3") == b"three" and db.get(b"p-1") is None
    nested = p.prefixed_db(b"q-")
    assert nested.prefix == b"p-q-" and nested.db is db
    nested.put(b"z", b"w")
    assert db.get(b"p-q-z") == b"w"
    assert list(nested.iterator()) == [(b"z", b"w")]
    snap = p.snapshot()
    p.put(b"3", b"changed")
    assert snap.get(b"3") == b"three"
    assert list(snap.iterator()) == [(b"3", b"three"), (b"q-z", b"w")]
    assert list(p.iterator(prefix=b"q")) == [(b"q-z", b"w")]
    with pytest.raises(TypeError):
        p.put("str", b"v")


def test_prefix_at_top_of_key_space(pv, db):
    db.put(b"\xff\xff\x01", b"top")
    db.put(b"\xfe", b"below")
    p = db.prefixed_db(b"\xff\xff")
    assert list(p.iterator()) == [(b"\x01", b"top")]
    assert list(db.iterator(prefix=b"\xff")) == [(b"\xff\xff\x01", b"top")]


def test_approximate_sizes_and_compact_range(pv, db):
    rnd = random.Random(1)
    for i in range(20000):
        db.put(b"%08d" % i, rnd.randbytes(100))  # incompressible
    db.compact_range()
    db.compact_range(start=b"00000100", stop=b"00000200")
    db.compact_range(start=b"00000100")
    db.compact_range(stop=b"00000100")
    whole = db.approximate_size(b"0", b"1")
    assert whole > 20000 * 50
    assert db.approximate_size(b"x", b"y") == 0
    sizes = db.approximate_sizes((b"0", b"1"), (b"x", b"y"), (b"00000000", b"00010000"))
    assert sizes[0] == whole and sizes[1] == 0 and 0 < sizes[2] < whole
    assert db.approximate_sizes() == []


def test_get_property(pv, db):
    db.put(b"k", b"v")
    db.compact_range()
    files = sum(int(db.get_property(b"leveldb.num-files-at-level%d" % n)) for n in range(7))
    assert files == 1
    assert isinstance(db.get_property(b"leveldb.stats"), bytes)
    assert db.get_property(b"no.such.property") is None
    with pytest.raises(TypeError):
        db.get_property("leveldb.stats")


def test_close(pv, tmp_path):
    path = str(tmp_path / "db")
    db = pv.DB(path, create_if_missing=True)
    db.put(b"k", b"v")
    it = db.iterator()
    raw = db.raw_iterator()
    snap = db.snapshot()
    wb = db.write_batch()
    wb.put(b"x", b"y")
    assert db.closed is False
    db.close()
    assert db.closed is True
    db.close()  # twice: nothing happens
    for op in (
        lambda: db.get(b"k"),
        lambda: db.put(b"k", b"v"),
        lambda: db.delete(b"k"),
        lambda: db.write_batch(),
        lambda: db.iterator(),
        lambda: db.raw_iterator(),
        lambda: db.snapshot(),
        lambda: db.approximate_size(b"a", b"b"),
        lambda: db.compact_range(),
        lambda: db.get_property(b"leveldb.stats"),
        lambda: wb.write(),
        lambda: next(it),
        lambda: raw.seek_to_first(),
        lambda: snap.get(b"k"),
    ):
        with pytest.raises(RuntimeError):
            op()
    # The lock is released: it opens again at once, with what was written.
    db = pv.DB(path)
    assert db.get(b"k") == b"v" and db.get(b"x") is None
    db.close()


def test_destroy_and_repair(pv, tmp_path):
    path = str(tmp_path / "db")
    db = pv.DB(path, create_if_missing=True)
    for i in range(1000):
        db.put(b"%04d" % i, b"v%d" % i)
    db.close()
    os.remove(os.path.join(path, "CURRENT"))
    with pytest.raises(pv.Error):
        pv.DB(path)
    pv.repair_db(path)
    db = pv.DB(path)
    assert db.get(b"0999") == b"v999"
    assert sum(1 for _ in db.iterator()) == 1000
    db.close()
    pv.destroy_db(path)
    assert not os.path.exists(os.path.join(path, "CURRENT"))
    pv.destroy_db(str(tmp_path / "never"))  # nothing there: nothing happens
    pv.repair_db(str(tmp_path / "never"))
    with pytest.raises(pv.Error):
        pv.DB(path)


def _reverse(a, b):
    return (a < b) - (a > b)


def test_comparator(pv, tmp_path):
    path = str(tmp_path / "db")
    db = pv.DB(path, create_if_missing=True, comparator=_reverse, comparator_name=b"test.Reverse")
    for k in (b"a", b"b", b"c"):
        db.put(k, k.upper())
    assert list(db.iterator(include_value=False)) == [b"c", b"b", b"a"]
    assert list(db.iterator(start=b"b", include_value=False)) == [b"b", b"a"]
    for i in range(2000):  # enough for a flush: the comparator runs in the background too
        db.put(b"%05d" % i, b"x" * 100)
    db.compact_range()
    assert db.get(b"01234") == b"x" * 100
    db.close()
    # Another comparator name is refused.
    with pytest.raises(pv.Error):
        pv.DB(path, comparator=lambda a, b: (a > b) - (a < b), comparator_name=b"other")
    db = pv.DB(path, comparator=_reverse, comparator_name=b"test.Reverse")
    assert next(db.iterator(include_value=False)) == b"c"
    db.close()


def test_iteration_protocols_and_context_manager(pv, tmp_path):
    path = str(tmp_path / "db")
    with pv.DB(path, create_if_missing=True) as db:
        db.put(b"a", b"1")
        db.put(b"p-b", b"2")
        assert list(db) == [(b"a", b"1"), (b"p-b", b"2")]
        assert list(db.prefixed_db(b"p-")) == [(b"b", b"2")]
        with db.snapshot() as snap:
            db.put(b"c", b"3")
            assert list(snap) == [(b"a", b"1"), (b"p-b", b"2")]
    assert db.closed
    with pytest.raises(RuntimeError):
        db.get(b"a")
