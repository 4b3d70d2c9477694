# SPDX-License-Identifier: MIT OR Apache-2.0
"""strata: an embedded, persistent, ordered key-value store, on-disk compatible with
LevelDB 1.23, written in Rust.

Two APIs:

* ``strata.plyvel``: plyvel's API (``import strata.plyvel as plyvel``);
* this module's own, small and Pythonic::

      import strata

      with strata.open("/tmp/example-db") as db:
          db[b"apple"] = b"red"
          with db.write_batch() as batch:       # atomic: all or nothing
              batch.put(b"banana", b"yellow")
              batch.delete(b"apple")
          assert b"apple" not in db
          for key, value in db.items(start=b"a", stop=b"c"):
              print(key, value)

Keys and values are ``bytes``; values are returned as new ``bytes`` objects. Every call that
may do I/O releases the GIL, so threads read in parallel.
"""

from typing import Iterator as _Iter, Optional, Tuple, Union
import os as _os

from . import _strata
from ._errors import CorruptionError, Error, IOError, IteratorInvalidError

__all__ = [
    "open",
    "DB",
    "Snapshot",
    "WriteBatch",
    "Error",
    "IOError",
    "CorruptionError",
    "IteratorInvalidError",
    "destroy",
    "repair",
]

__version__ = _strata.__version__

_Path = Union[str, "_os.PathLike[str]"]


def open(path: _Path, **options) -> "DB":  # noqa: A001 - the natural name
    """Opens the database in directory ``path``, creating it if it does not exist.

    ``options`` are ``strata.plyvel.DB``'s keyword arguments (``create_if_missing`` defaults
    to True here): ``error_if_exists``, ``paranoid_checks``, ``write_buffer_size``,
    ``max_open_files``, ``lru_cache_size``, ``block_size``, ``block_restart_interval``,
    ``max_file_size``, ``compression`` ('snappy' or None), ``bloom_filter_bits``,
    ``comparator`` with ``comparator_name``.
    """
    return DB(path, **options)


def destroy(path: _Path) -> None:
    """Deletes the database in ``path`` (which must not be open)."""
    _strata.destroy_db(path)


def repair(path: _Path, **options) -> None:
    """Rebuilds a database that will not open, keeping every record that can be read."""
    _strata.repair_db(path, **options)


def _pairs(it):
    """Yields what iterator `it` yields, and closes it when done or abandoned."""
    with it:
        yield from it


class _Reader:
    """What a database and a snapshot share: reads."""

    __slots__ = ()

    def _src(self):
        raise NotImplementedError

    def get(self, key: bytes, default=None):
        """The value of ``key``, or ``default`` if it is absent."""
        return self._src().get(key, default)

    def __getitem__(self, key: bytes) -> bytes:
        value = self._src().get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: bytes) -> bool:
        return self._src().get(key) is not None

    def items(
        self, start: Optional[bytes] = None, stop: Optional[bytes] = None, reverse: bool = False
    ) -> _Iter[Tuple[bytes, bytes]]:
        """``(key, value)`` pairs with ``start <= key < stop`` (either end open when None),
        in key order, or in reverse order."""
        return _pairs(self._src().iterator(reverse=reverse, start=start, stop=stop))

    def keys(
        self, start: Optional[bytes] = None, stop: Optional[bytes] = None, reverse: bool = False
    ) -> _Iter[bytes]:
        """The keys of ``items()``."""
        it = self._src().iterator(reverse=reverse, start=start, stop=stop, include_value=False)
        return _pairs(it)

    def values(
        self, start: Optional[bytes] = None, stop: Optional[bytes] = None, reverse: bool = False
    ) -> _Iter[bytes]:
        """The values of ``items()``."""
        it = self._src().iterator(reverse=reverse, start=start, stop=stop, include_key=False)
        return _pairs(it)

    def prefix(self, prefix: bytes, reverse: bool = False) -> _Iter[Tuple[bytes, bytes]]:
        """``(key, value)`` pairs of the keys that start with ``prefix`` (keys in full)."""
        return _pairs(self._src().iterator(reverse=reverse, prefix=prefix))

    def __iter__(self) -> _Iter[bytes]:
        return self.keys()


class DB(_Reader):
    """An open database. Use it as a context manager, or call ``close()``."""

    __slots__ = ("_db", "_path")

    def __init__(self, path: _Path, **options) -> None:
        options.setdefault("create_if_missing", True)
        self._path = _os.fspath(path)
        self._db = _strata.DB(self._path, **options)

    def _src(self):
        return self._db

    @property
    def path(self) -> str:
        """The database's directory."""
        return self._path

    @property
    def closed(self) -> bool:
        return self._db.closed

    def put(self, key: bytes, value: bytes, *, sync: bool = False) -> None:
        """Sets ``key`` to ``value``; with ``sync``, durable when it returns."""
        self._db.put(key, value, sync)

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._db.put(key, value)

    def delete(self, key: bytes, *, sync: bool = False) -> None:
        """Removes ``key`` (nothing happens if it is absent)."""
        self._db.delete(key, sync)

    def __delitem__(self, key: bytes) -> None:
        if self._db.get(key) is None:
            raise KeyError(key)
        self._db.delete(key)

    def delete_range(self, start: bytes, end: bytes, *, sync: bool = False) -> None:
        """Removes every key ``k`` with ``start <= k < end``, atomically."""
        self._db._delete_range(start, end, sync)

    def write_batch(self, *, sync: bool = False) -> "WriteBatch":
        """A batch of puts and deletes, written atomically when its ``with`` block ends
        without an exception (and not at all if it raises), or by ``write()``."""
        return WriteBatch(self._db.write_batch(transaction=True, sync=sync))

    def snapshot(self) -> "Snapshot":
        """A consistent read-only view of the database as it is now."""
        return Snapshot(self._db.snapshot())

    def checkpoint(self, path: _Path) -> None:
        """Writes a consistent copy of the database, openable at once, into directory
        ``path`` (which must not exist, or be empty)."""
        self._db._checkpoint(_os.fspath(path))

    def compact(self, start: Optional[bytes] = None, stop: Optional[bytes] = None) -> None:
        """Compacts the tables holding keys in ``[start, stop]`` (everything by default)."""
        self._db.compact_range(start, stop)

    def property(self, name: str) -> Optional[str]:
        """A LevelDB property such as ``"leveldb.stats"``, or None."""
        value = self._db.get_property(name.encode())
        return None if value is None else value.decode()

    def close(self) -> None:
        """Closes the database (its files synced); closing twice does nothing."""
        self._db.close()

    def __enter__(self) -> "DB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<strata.DB {self._path!r} ({state})>"


class Snapshot(_Reader):
    """A read-only view of a database as of one moment. Close it (or use ``with``) to let the
    database drop what it keeps for it."""

    __slots__ = ("_snap",)

    def __init__(self, snap) -> None:
        self._snap = snap

    def _src(self):
        return self._snap

    def close(self) -> None:
        self._snap.close()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class WriteBatch:
    """Puts and deletes applied together (``DB.write_batch()``)."""

    __slots__ = ("_batch",)

    def __init__(self, batch) -> None:
        self._batch = batch

    def put(self, key: bytes, value: bytes) -> None:
        self._batch.put(key, value)

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._batch.put(key, value)

    def delete(self, key: bytes) -> None:
        self._batch.delete(key)

    def __delitem__(self, key: bytes) -> None:
        self._batch.delete(key)

    def clear(self) -> None:
        self._batch.clear()

    def write(self) -> None:
        """Writes the batch now, and empties it."""
        self._batch.write()
        self._batch.clear()

    def __enter__(self) -> "WriteBatch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._batch.__exit__(exc_type, exc, tb)
