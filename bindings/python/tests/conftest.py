# SPDX-License-Identifier: MIT OR Apache-2.0
"""Fixtures: the plyvel API tests run against strata.plyvel, and also against the real plyvel
when it is installed, so that every expectation is checked against plyvel itself."""

import importlib

import pytest

import strata.plyvel

try:
    real_plyvel = importlib.import_module("plyvel")
except ImportError:  # pragma: no cover - depends on the machine
    real_plyvel = None

_IMPLS = [pytest.param(strata.plyvel, id="strata")]
_IMPLS.append(
    pytest.param(
        real_plyvel,
        id="plyvel",
        marks=pytest.mark.skipif(real_plyvel is None, reason="plyvel is not installed"),
    )
)


@pytest.fixture(params=_IMPLS)
def pv(request):
    """The module under test: strata.plyvel, or plyvel itself for reference."""
    return request.param


@pytest.fixture
def db(pv, tmp_path):
    d = pv.DB(str(tmp_path / "db"), create_if_missing=True)
    yield d
    d.close()


@pytest.fixture
def abc(db):
    """A database holding a..e mapped to A..E."""
    for k in b"abcde":
        db.put(bytes([k]), bytes([k]).upper())
    return db
