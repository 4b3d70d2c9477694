# SPDX-License-Identifier: MIT OR Apache-2.0
"""Several threads reading while one writes, through strata.plyvel and the Pythonic API:
every read is checked against what the writer had acknowledged before it."""

import random
import threading

import strata
import strata.plyvel as plyvel


def _value(i: int) -> bytes:
    return (b"%08d|" % i) * 8


def test_readers_beside_a_writer(tmp_path):
    db = plyvel.DB(str(tmp_path / "db"), create_if_missing=True, write_buffer_size=64 << 10)
    n_initial, n_written = 5000, 20000
    with db.write_batch() as wb:
        for i in range(n_initial):
            wb.put(b"%08d" % i, _value(i))
    acknowledged = [n_initial]  # keys below this are written (read without a lock: an int)
    stop = threading.Event()
    failures = []
    reads = [0]

    def writer():
        try:
            for i in range(n_initial, n_written):
                db.put(b"%08d" % i, _value(i))
                acknowledged[0] = i + 1
                if i % 5000 == 0:
                    db.compact_range()
        except Exception as e:  # pragma: no cover - reported below
            failures.append(e)
        finally:
            stop.set()

    def reader(seed):
        rnd = random.Random(seed)
        try:
            while not stop.is_set():
                known = acknowledged[0]
                i = rnd.randrange(known)
                got = db.get(b"%08d" % i)
                if got != _value(i):
                    failures.append(("get", i, got))
                # A range scan: contiguous keys, each with its value, at least to `known`.
                lo = rnd.randrange(known)
                keys = []
                for k, v in db.iterator(start=b"%08d" % lo, stop=b"%08d" % (lo + 50)):
                    if v != _value(int(k)):
                        failures.append(("scan", k, v))
                    keys.append(int(k))
                want = list(range(lo, min(lo + 50, known)))
                if keys[: len(want)] != want:
                    failures.append(("scan keys", lo, keys[:5]))
                reads[0] += 1
        except Exception as e:  # pragma: no cover - reported below
            failures.append(e)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures[:5]
    assert reads[0] > 100
    assert sum(1 for _ in db.iterator(include_value=False)) == n_written
    db.close()


def test_snapshots_in_threads(tmp_path):
    with strata.open(tmp_path / "db") as db:
        for i in range(1000):
            db[b"%04d" % i] = b"0"
        failures = []

        def worker(t):
            for round_ in range(20):
                with db.snapshot() as snap:
                    values = set(snap.values())
                    if len(values) != 1:  # each batch rewrites every key at once
                        failures.append((t, round_, values))

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(3)]
        for t in threads:
            t.start()
        for gen in range(1, 30):
            with db.write_batch() as wb:
                for i in range(1000):
                    wb.put(b"%04d" % i, b"%d" % gen)
        for t in threads:
            t.join()
        assert not failures, failures[:3]


def test_threads_sharing_one_iterator(tmp_path):
    """Threads that share one iterator take its entries each once, and do not deadlock (a
    cursor's lock is waited for with the GIL released)."""
    db = plyvel.DB(str(tmp_path / "db"), create_if_missing=True)
    n = 20000
    with db.write_batch() as wb:
        for i in range(n):
            wb.put(b"%08d" % i, b"v")
    db.compact_range()
    it = db.iterator(include_value=False)
    raw = db.raw_iterator()
    raw.seek_to_first()
    taken = [[] for _ in range(4)]

    def worker(t):
        for key in it:
            taken[t].append(key)
            if raw.valid():  # the raw iterator is shared too
                raw.key()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    keys = sorted(k for part in taken for k in part)
    assert keys == [b"%08d" % i for i in range(n)]
    db.close()
