#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The same operations through strata.plyvel and through plyvel (LevelDB), on fresh
databases, engines alternated within each round; prints µs/op and the strata/plyvel ratio
(below 1: strata faster).

    python bench_plyvel.py [--n 100000] [--rounds 3] [--dir DIR]

Operations (16-byte keys, 100-byte values, default options of both):
  put          N puts of random keys, one call each
  get          N gets of random existing keys, after a compaction
  write_batch  N puts, 1000 per batch (`with db.write_batch() as wb`)
  iterate      one full forward pass over N entries
Each round runs every operation on both engines, alternating which goes first.
"""

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

import plyvel
import strata.plyvel

ENGINES = {"strata": strata.plyvel, "plyvel": plyvel}


def make_data(n, seed):
    rnd = random.Random(seed)
    keys = [rnd.randbytes(16) for _ in range(n)]
    values = [rnd.randbytes(50) * 2 for _ in range(n)]  # half-compressible, as db_bench's
    return keys, values


def op_put(db, keys, values):
    put = db.put
    t = time.perf_counter()
    for k, v in zip(keys, values):
        put(k, v)
    return time.perf_counter() - t


def op_write_batch(db, keys, values):
    t = time.perf_counter()
    for i in range(0, len(keys), 1000):
        with db.write_batch() as wb:
            put = wb.put
            for k, v in zip(keys[i : i + 1000], values[i : i + 1000]):
                put(k, v)
    return time.perf_counter() - t


def op_get(db, keys, values, probe):
    get = db.get
    t = time.perf_counter()
    for k in probe:
        get(k)
    return time.perf_counter() - t


def op_iterate(db, n):
    t = time.perf_counter()
    count = 0
    for _ in db.iterator():
        count += 1
    elapsed = time.perf_counter() - t
    assert count == n, (count, n)
    return elapsed


def run_round(mod, base, n, keys, values, probe):
    out = {}
    path = os.path.join(base, "put")
    db = mod.DB(path, create_if_missing=True)
    out["put"] = op_put(db, keys, values)
    db.close()
    path_b = os.path.join(base, "batch")
    db = mod.DB(path_b, create_if_missing=True)
    out["write_batch"] = op_write_batch(db, keys, values)
    db.compact_range()
    out["get"] = op_get(db, keys, values, probe)
    out["iterate"] = op_iterate(db, n)
    db.close()
    shutil.rmtree(path)
    shutil.rmtree(path_b)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the databases go (a temporary dir)")
    args = ap.parse_args()
    keys, values = make_data(args.n, 1)
    probe = random.Random(2).sample(keys, len(keys))
    results = {e: {} for e in ENGINES}
    base = tempfile.mkdtemp(dir=args.dir)
    try:
        for r in range(args.rounds):
            order = list(ENGINES) if r % 2 == 0 else list(reversed(ENGINES))
            for engine in order:
                d = os.path.join(base, engine)
                os.makedirs(d)
                for op, secs in run_round(ENGINES[engine], d, args.n, keys, values, probe).items():
                    results[engine].setdefault(op, []).append(secs)
                shutil.rmtree(d)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"N = {args.n}, {args.rounds} rounds, median µs/op "
          f"(strata {strata.plyvel.__version__}, plyvel {plyvel.__version__} "
          f"with LevelDB {plyvel.__leveldb_version__})")
    print()
    print("| operation | strata.plyvel µs/op | plyvel µs/op | strata/plyvel |")
    print("| --- | ---: | ---: | ---: |")
    for op in ("put", "get", "write_batch", "iterate"):
        s = statistics.median(results["strata"][op]) / args.n * 1e6
        p = statistics.median(results["plyvel"][op]) / args.n * 1e6
        print(f"| {op} | {s:.3f} | {p:.3f} | {s / p:.2f} |")


if __name__ == "__main__":
    main()
