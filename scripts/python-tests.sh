#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# The Python package's tests as a user would meet them: a fresh virtualenv, `pip install
# ./bindings/python` (maturin comes from PyPI as the build backend), pytest, and plyvel when
# it installs (its wheels carry LevelDB), for the tests that compare with it.
#
# STRATA_CLI: path of strata's CLI binary for the Rust<->Python interop tests (built here if
# unset and cargo is present). PYTHON: the interpreter to make the venv with (python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
python=${PYTHON:-python3}
venv=$(mktemp -d "${TMPDIR:-/tmp}/strata-py-venv.XXXXXX")
trap 'rm -rf "$venv"' EXIT

if [ -z "${STRATA_CLI:-}" ] && command -v cargo >/dev/null 2>&1; then
  cargo build --release -p strata-cli
  STRATA_CLI="${CARGO_TARGET_DIR:-$root/target}/release/strata"
fi
export STRATA_CLI="${STRATA_CLI:-}"

"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "$root/bindings/python" pytest
if ! "$venv/bin/python" -m pip install --quiet plyvel; then
  echo "plyvel did not install: the tests that compare with it are skipped"
fi
# Run from the tests' directory, so that `strata` is the installed package, not the source.
cd "$root/bindings/python/tests"
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider .
