# SPDX-License-Identifier: MIT OR Apache-2.0
"""Databases cross between Python and Rust, and between strata.plyvel and plyvel (LevelDB):
each side reads what the other wrote.

The Rust side is strata's command-line tool (crates/strata-cli): set STRATA_CLI to its path
(CI builds it with `cargo build --release -p strata-cli`); without it, those tests are
skipped."""

import os
import random
import subprocess

import pytest

import strata.plyvel as splyvel

try:
    import plyvel as real_plyvel
except ImportError:  # pragma: no cover - depends on the machine
    real_plyvel = None


def _cli():
    path = os.environ.get("STRATA_CLI")
    if path and os.access(path, os.X_OK):
        return path
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..")
    for target in (os.environ.get("CARGO_TARGET_DIR"), os.path.join(root, "target")):
        for profile in ("release", "debug"):
            if target:
                candidate = os.path.join(target, profile, "strata")
                if os.access(candidate, os.X_OK):
                    return candidate
    return None  # the tests that need it skip


CLI = _cli()
needs_cli = pytest.mark.skipif(
    CLI is None,
    reason="strata's CLI binary not found: build it with `cargo build --release -p strata-cli` "
    "and set STRATA_CLI to target/release/strata",
)
needs_plyvel = pytest.mark.skipif(real_plyvel is None, reason="plyvel is not installed")


def _entries(n=3000, seed=7):
    rnd = random.Random(seed)
    keys = {rnd.randbytes(rnd.randint(1, 24)) for _ in range(n)}
    return {k: rnd.randbytes(rnd.randint(0, 300)) for k in keys}


def _fill(mod, path, entries, **options):
    db = mod.DB(path, create_if_missing=True, **options)
    with db.write_batch() as wb:
        for k, v in entries.items():
            wb.put(k, v)
    db.delete(next(iter(entries)))  # a deletion too
    db.compact_range()
    db.put(b"after compaction", b"in the log")  # and something only in the log
    db.close()
    expected = dict(entries)
    del expected[next(iter(entries))]
    expected[b"after compaction"] = b"in the log"
    return expected


def _read_all(mod, path):
    db = mod.DB(path)
    got = dict(db.iterator())
    for k, v in list(got.items())[:100]:
        assert db.get(k) == v
    db.close()
    return got


@needs_cli
def test_written_by_rust_read_by_python(tmp_path):
    entries = _entries()
    lines = "".join(f"{k.hex()}\t{v.hex()}\n" for k, v in entries.items())
    (tmp_path / "in.txt").write_text(lines)
    path = str(tmp_path / "db")
    subprocess.run([CLI, "load", "--create", "--hex", path, str(tmp_path / "in.txt")],
                   check=True, capture_output=True)
    subprocess.run([CLI, "put", "--hex", path, b"from rust".hex(), b"!".hex()],
                   check=True, capture_output=True)
    entries[b"from rust"] = b"!"
    assert _read_all(splyvel, path) == entries


@needs_cli
def test_written_by_python_read_by_rust(tmp_path):
    path = str(tmp_path / "db")
    expected = _fill(splyvel, path, _entries(seed=8))
    out = tmp_path / "out.txt"
    subprocess.run([CLI, "export", "--hex", path, str(out)], check=True, capture_output=True)
    got = {}
    for line in out.read_text().splitlines():
        k, v = line.split("\t")
        got[bytes.fromhex(k)] = bytes.fromhex(v)
    assert got == expected
    check = subprocess.run([CLI, "check", path], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@needs_plyvel
@pytest.mark.parametrize("compression", ["snappy", None])
def test_written_by_plyvel_read_by_strata(tmp_path, compression):
    path = str(tmp_path / "db")
    expected = _fill(real_plyvel, path, _entries(seed=9), compression=compression,
                     bloom_filter_bits=10)
    assert _read_all(splyvel, path) == expected
    # strata writes on, and plyvel reads it back.
    db = splyvel.DB(path, bloom_filter_bits=10)
    db.put(b"strata was here", b"1")
    db.close()
    expected[b"strata was here"] = b"1"
    assert _read_all(real_plyvel, path) == expected


@needs_plyvel
@pytest.mark.parametrize("compression", ["snappy", None])
def test_written_by_strata_read_by_plyvel(tmp_path, compression):
    path = str(tmp_path / "db")
    expected = _fill(splyvel, path, _entries(seed=10), compression=compression,
                     bloom_filter_bits=10)
    assert _read_all(real_plyvel, path) == expected
