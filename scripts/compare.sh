#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs the benchmark reports' configurations on every engine and writes the report:
# target/report/index.html (tables and bar charts), report.md and results.json.
#   scripts/compare.sh [db_bench flags...]      e.g. scripts/compare.sh --runs=3
#   scripts/compare.sh --engines=strata,leveldb --num=100000
# Installs the peers' Debian packages first (needs root or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-peers.sh
cargo build --release -q -p strata-bench --features peers
exec ./target/release/db_bench --compare "$@"
