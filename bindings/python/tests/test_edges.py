# SPDX-License-Identifier: MIT OR Apache-2.0
"""Edges a review found: a snapshot taken while the background thread compares keys with a
Python comparator, destroying an empty directory, batches of a closed database, bytes names,
and a prefixed view under a comparator that is not bytewise."""

import subprocess
import sys
import textwrap

import pytest

import strata.plyvel

SNAPSHOTS_BESIDE_COMPACTIONS = textwrap.dedent(
    """
    import tempfile, threading, time
    from strata import plyvel

    def cmp(a, b):
        return (a > b) - (a < b)

    db = plyvel.DB(tempfile.mkdtemp(), create_if_missing=True, write_buffer_size=64 * 1024,
                   comparator=cmp, comparator_name=b"python-bytewise")
    stop = False
    taken = [0]

    def snapshots():
        while not stop:
            s = db.snapshot()
            s.close()
            taken[0] += 1

    t = threading.Thread(target=snapshots)
    t.start()
    value = b"x" * 200
    start, n = time.time(), 0
    while time.time() - start < 8:
        db.put(b"%08d" % ((n * 7919) % 1000003), value)
        n += 1
    stop = True
    t.join()
    db.close()
    print("puts", n, "snapshots", taken[0])
    """
)


def test_snapshots_beside_a_python_comparator_in_compactions_do_not_deadlock():
    # Db::snapshot takes the state mutex, which the background thread holds while it compares
    # keys with the Python comparator (waiting for the GIL): taken with the GIL held, this
    # hung within seconds. In a child process, so that a hang fails instead of blocking.
    try:
        done = subprocess.run(
            [sys.executable, "-c", SNAPSHOTS_BESIDE_COMPACTIONS],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("snapshots beside compactions with a Python comparator deadlocked")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("puts "), done.stdout


def test_destroy_db_removes_an_empty_directory(pv, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    pv.destroy_db(str(empty))
    assert not empty.exists()


def test_destroy_db_refuses_a_directory_of_other_files(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_bytes(b"mine")
    with pytest.raises(strata.plyvel.Error):
        strata.plyvel.destroy_db(str(other))
    assert (other / "notes.txt").read_bytes() == b"mine"


def test_a_batch_of_a_closed_database_refuses_puts_and_deletes(pv, tmp_path):
    db = pv.DB(str(tmp_path / "db"), create_if_missing=True)
    batch = db.write_batch()
    db.close()
    with pytest.raises(RuntimeError):
        batch.put(b"k", b"v")
    with pytest.raises(RuntimeError):
        batch.delete(b"k")


def test_a_bytes_name_opens_the_database(pv, tmp_path):
    name = str(tmp_path / "db").encode()
    db = pv.DB(name, create_if_missing=True)
    db.put(b"k", b"v")
    db.close()
    db = pv.DB(str(tmp_path / "db"))
    assert db.get(b"k") == b"v"
    db.close()


def test_a_prefixed_view_under_a_reversed_comparator_does_not_panic(tmp_path):
    def reversed_bytes(a, b):
        a, b = a[::-1], b[::-1]
        return (a > b) - (a < b)

    db = strata.plyvel.DB(
        str(tmp_path / "db"),
        create_if_missing=True,
        comparator=reversed_bytes,
        comparator_name=b"reversed-bytes",
    )
    db.put(b"c", b"1")
    db.put(b"ab", b"2")
    # Under this order the prefix range [b"ab", b"ac") holds b"c", shorter than the prefix:
    # it is yielded whole, not cut (and nothing panics).
    items = list(db.prefixed_db(b"ab").iterator())
    assert (b"", b"2") in items
    db.close()
