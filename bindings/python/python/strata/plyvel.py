# SPDX-License-Identifier: MIT OR Apache-2.0
"""plyvel's API over strata: ``import strata.plyvel as plyvel`` is the only change a plyvel
program needs.

The classes are strata's own implementation (``strata._strata``); ``PrefixedDB`` is here.
``__leveldb_version__`` is ``"1.23"``: strata reads and writes the on-disk format of
LevelDB 1.23.
"""

from typing import Optional

from . import _strata
from ._errors import CorruptionError, Error, IOError, IteratorInvalidError

__all__ = [
    "DB",
    "PrefixedDB",
    "WriteBatch",
    "Iterator",
    "RawIterator",
    "Snapshot",
    "Error",
    "IOError",
    "CorruptionError",
    "IteratorInvalidError",
    "repair_db",
    "destroy_db",
]

__version__ = _strata.__version__
__leveldb_version__ = _strata.__leveldb_version__

DB = _strata.DB
WriteBatch = _strata.WriteBatch
Iterator = _strata.Iterator
RawIterator = _strata.RawIterator
Snapshot = _strata.Snapshot
repair_db = _strata.repair_db
destroy_db = _strata.destroy_db


def _check_bytes(name: str, value: object) -> None:
    if not isinstance(value, bytes):
        raise TypeError(
            f"Argument {name!r} has incorrect type (expected bytes, got {type(value).__name__})"
        )


class PrefixedDB:
    """The keys of ``db`` that start with ``prefix``, seen without it: every key given is
    prefixed, every key returned has the prefix taken off."""

    __slots__ = ("_db", "_prefix")

    def __init__(self, db: "_strata.DB", prefix: bytes) -> None:
        _check_bytes("prefix", prefix)
        self._db = db
        self._prefix = prefix

    @property
    def prefix(self) -> bytes:
        """The prefix of every key of this view."""
        return self._prefix

    @property
    def db(self) -> "_strata.DB":
        """The database this view is of."""
        return self._db

    def get(self, key: bytes, default=None, verify_checksums: bool = False, fill_cache: bool = True):
        _check_bytes("key", key)
        return self._db.get(self._prefix + key, default, verify_checksums, fill_cache)

    def put(self, key: bytes, value: bytes, sync: bool = False) -> None:
        _check_bytes("key", key)
        self._db.put(self._prefix + key, value, sync)

    def delete(self, key: bytes, sync: bool = False) -> None:
        _check_bytes("key", key)
        self._db.delete(self._prefix + key, sync)

    def write_batch(self, transaction: bool = False, sync: bool = False) -> "_strata.WriteBatch":
        return self._db.write_batch(transaction, sync, _key_prefix=self._prefix)

    def iterator(
        self,
        reverse: bool = False,
        start: Optional[bytes] = None,
        stop: Optional[bytes] = None,
        include_start: bool = True,
        include_stop: bool = False,
        prefix: Optional[bytes] = None,
        include_key: bool = True,
        include_value: bool = True,
        verify_checksums: bool = False,
        fill_cache: bool = True,
    ) -> "_strata.Iterator":
        return self._db.iterator(
            reverse,
            start,
            stop,
            include_start,
            include_stop,
            prefix,
            include_key,
            include_value,
            verify_checksums,
            fill_cache,
            _key_prefix=self._prefix,
        )

    def snapshot(self) -> "_strata.Snapshot":
        return self._db.snapshot(_key_prefix=self._prefix)

    def prefixed_db(self, prefix: bytes) -> "PrefixedDB":
        _check_bytes("prefix", prefix)
        return PrefixedDB(self._db, self._prefix + prefix)

    def __iter__(self) -> "_strata.Iterator":
        return self.iterator()

    def __repr__(self) -> str:
        return f"<strata.plyvel.PrefixedDB with prefix {self._prefix!r} at {id(self):#x}>"
