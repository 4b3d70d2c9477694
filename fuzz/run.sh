#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs one fuzz target for a number of seconds, its corpus seeded from the LevelDB fixtures.
#   fuzz/run.sh TARGET SECONDS        (TARGET: log_reader, manifest, open_db, ops_model,
#                                      block, table_reader, varint)
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")"
target=$1
seconds=${2:-600}
fixtures=../crates/strata/tests/fixtures/leveldb-1.23
corpus=corpus/$target
mkdir -p "$corpus"
case $target in
  log_reader)
    cp "$fixtures"/*/MANIFEST-* "$corpus"/ 2>/dev/null || true
    for f in "$fixtures"/log-edge/000003.log "$fixtures"/small/000004.log; do
      head -c 40000 "$f" > "$corpus/seed-$(basename "$(dirname "$f")").log"
    done
    max_len=140000 ;;
  manifest)
    cp "$fixtures"/*/MANIFEST-* "$corpus"/ 2>/dev/null || true
    max_len=4096 ;;
  open_db)
    cp regressions/open_db/* "$corpus"/
    max_len=64 ;;
  ops_model)
    cp regressions/ops_model/* "$corpus"/
    max_len=2048 ;;
  table_reader)
    cp "$fixtures"/small/000005.ldb "$corpus"/small.ldb
    cp "$fixtures"/uncompressed/000005.ldb "$corpus"/uncompressed.ldb
    max_len=70000 ;;
  block)
    printf '\x00\x03\x01abcx\x02\x01\x01dy\x00\x00\x00\x00\x01\x00\x00\x00' > "$corpus"/two-entries
    printf '\x00\x00\x00\x00\x01\x00\x00\x00' > "$corpus"/empty
    max_len=8192 ;;
  varint)
    printf '\xff\xff\xff\xff\x0f' > "$corpus"/u32max
    cp "$fixtures"/small/MANIFEST-000002 "$corpus"/manifest
    max_len=4096 ;;
  *) echo "unknown target $target" >&2; exit 2 ;;
esac
exec cargo +nightly fuzz run -O "$target" "$corpus" -- \
  -max_total_time="$seconds" -max_len="$max_len" -print_final_stats=1
