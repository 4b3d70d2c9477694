# SPDX-License-Identifier: MIT OR Apache-2.0
"""strata's own Pythonic API, and the README's example."""

import os
import re

import pytest

import strata


def test_open_as_context_manager(tmp_path):
    path = tmp_path / "db"
    with strata.open(path) as db:  # created when missing; a PathLike works
        assert db.path == str(path) and not db.closed
        db[b"k"] = b"v"
    assert db.closed
    with pytest.raises(RuntimeError):
        db[b"k"]
    with strata.open(str(path), create_if_missing=False, bloom_filter_bits=10) as db:
        assert db[b"k"] == b"v"
    with pytest.raises(strata.Error):
        strata.open(tmp_path / "missing", create_if_missing=False)


def test_mapping_operations(tmp_path):
    with strata.open(tmp_path / "db") as db:
        db[b"a"] = b"1"
        db.put(b"b", b"2", sync=True)
        assert db[b"a"] == b"1" and db.get(b"b") == b"2"
        assert db.get(b"zz") is None and db.get(b"zz", b"d") == b"d"
        assert b"a" in db and b"zz" not in db
        with pytest.raises(KeyError):
            db[b"zz"]
        del db[b"a"]
        assert b"a" not in db
        with pytest.raises(KeyError):
            del db[b"a"]
        db.delete(b"b")
        db.delete(b"never")
        assert list(db) == []
        with pytest.raises(TypeError):
            db["str"] = b"v"
        with pytest.raises(TypeError):
            db.get("str")


def test_ranges(tmp_path):
    with strata.open(tmp_path / "db") as db:
        for k in (b"a", b"b", b"c", b"d", b"x1", b"x2", b"y"):
            db[k] = k.upper()
        assert list(db.keys()) == [b"a", b"b", b"c", b"d", b"x1", b"x2", b"y"]
        assert list(db) == list(db.keys())
        assert list(db.items(start=b"b", stop=b"d")) == [(b"b", b"B"), (b"c", b"C")]
        assert list(db.keys(stop=b"c", reverse=True)) == [b"b", b"a"]
        assert list(db.values(start=b"x")) == [b"X1", b"X2", b"Y"]
        assert list(db.prefix(b"x")) == [(b"x1", b"X1"), (b"x2", b"X2")]
        assert list(db.prefix(b"x", reverse=True)) == [(b"x2", b"X2"), (b"x1", b"X1")]
        db.delete_range(b"b", b"x2")
        assert list(db.keys()) == [b"a", b"x2", b"y"]


def test_write_batch_is_all_or_nothing(tmp_path):
    with strata.open(tmp_path / "db") as db:
        db[b"gone"] = b"1"
        with db.write_batch() as batch:
            batch.put(b"a", b"1")
            batch[b"b"] = b"2"
            batch.delete(b"gone")
            assert b"a" not in db
        assert db[b"a"] == b"1" and db[b"b"] == b"2" and b"gone" not in db
        with pytest.raises(ZeroDivisionError):
            with db.write_batch(sync=True) as batch:
                batch.put(b"c", b"3")
                del batch[b"a"]
                1 / 0
        assert b"c" not in db and b"a" in db
        batch = db.write_batch()
        batch.put(b"d", b"4")
        batch.write()
        assert db[b"d"] == b"4"
        batch.clear()
        batch.write()


def test_snapshot(tmp_path):
    with strata.open(tmp_path / "db") as db:
        db[b"a"] = b"old"
        with db.snapshot() as snap:
            db[b"a"] = b"new"
            db[b"b"] = b"added"
            assert snap[b"a"] == b"old" and b"b" not in snap
            assert snap.get(b"b", b"d") == b"d"
            assert list(snap.items()) == [(b"a", b"old")]
            with pytest.raises(KeyError):
                snap[b"b"]
        with pytest.raises(RuntimeError):
            snap.get(b"a")


def test_checkpoint_compact_property_destroy_repair(tmp_path):
    path, copy = tmp_path / "db", tmp_path / "copy"
    with strata.open(path) as db:
        for i in range(1000):
            db[b"%04d" % i] = b"v"
        db.checkpoint(copy)
        db[b"after"] = b"x"
        db.compact()
        db.compact(b"0000", b"0100")
        assert int(db.property("leveldb.num-files-at-level0")) == 0
        assert "Compactions" in db.property("leveldb.stats")
        assert db.property("no.such") is None
    with strata.open(copy) as c:
        assert len(list(c.keys())) == 1000 and b"after" not in c
    os.remove(copy / "CURRENT")
    strata.repair(copy)
    with strata.open(copy) as c:
        assert c[b"0999"] == b"v"
    strata.destroy(copy)
    assert not (copy / "CURRENT").exists()


def test_readme_example(tmp_path, monkeypatch, capsys):
    """Runs the Python example of the README as it is written there."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")).read()
    section = readme[readme.index("## Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "b'banana' b'yellow'" in out
