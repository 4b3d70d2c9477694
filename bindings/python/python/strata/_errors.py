# SPDX-License-Identifier: MIT OR Apache-2.0
"""The exceptions strata raises (shared by ``strata`` and ``strata.plyvel``)."""

import builtins

__all__ = ["Error", "IOError", "CorruptionError", "IteratorInvalidError"]


class Error(Exception):
    """Base class of the errors the database reports."""


class IOError(Error, builtins.IOError):  # noqa: A001 - plyvel's name
    """The file system failed, or the database is locked by another handle or process."""


class CorruptionError(Error):
    """Bytes on disk do not follow the format: a damaged file."""


class IteratorInvalidError(Error):
    """A raw iterator was read or moved while it was not on an entry."""
