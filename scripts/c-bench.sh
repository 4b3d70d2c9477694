#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# The C API's benchmark: crates/strata-c/bench/c_bench.c (fillrandom, readrandom, readseq through
# LevelDB's C API) built unchanged against Debian's libleveldb and against libstrata_c (release),
# run alternately, ROUNDS rounds each (which library goes first alternates too), in a directory
# under the target dir. Prints each run, then a table of the medians in micros/op with the ratio
# strata/LevelDB (below 1: strata is faster).
#
#   scripts/c-bench.sh [--num=N] [--rounds=R]     (defaults: 1000000 and 3)
#
# Uses CARGO_TARGET_DIR if set; CARGO_BUILD_JOBS limits the build's jobs.
set -euo pipefail
cd "$(dirname "$0")/.."

num=1000000
rounds=3
for arg in "$@"; do
  case "$arg" in
    --num=*) num="${arg#--num=}" ;;
    --rounds=*) rounds="${arg#--rounds=}" ;;
    *) echo "usage: $0 [--num=N] [--rounds=R]" >&2; exit 2 ;;
  esac
done

target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p strata-c >&2
lib="$(cd "$target/release" && pwd)"
out="$target/c-bench"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

cc -O2 -Wall -Werror crates/strata-c/bench/c_bench.c -o "$out/c_bench_leveldb" -lleveldb
cc -O2 -Wall -Werror crates/strata-c/bench/c_bench.c -o "$out/c_bench_strata" \
  -L"$lib" -lstrata_c -Wl,-rpath,"$lib" -Wl,--disable-new-dtags

results="$out/results.txt"
: > "$results"
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then order="leveldb strata"; else order="strata leveldb"; fi
  for engine in $order; do
    echo "-- round $round, $engine (--num=$num)"
    env -u LD_LIBRARY_PATH "$out/c_bench_$engine" --num="$num" "$out/db-$engine" | tee "$out/run.txt"
    awk -v e="$engine" '{ print e, $1, $2 }' "$out/run.txt" >> "$results"
  done
done

median() { # engine benchmark
  awk -v e="$1" -v b="$2" '$1 == e && $2 == b { print $3 }' "$results" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo
echo "c_bench, --num=$num, $rounds rounds each, alternating; medians in micros/op:"
echo
echo "| benchmark | LevelDB 1.23 (libleveldb) | strata (libstrata_c) | strata/LevelDB |"
echo "|---|---:|---:|---:|"
for bench in fillrandom readrandom readseq; do
  l="$(median leveldb "$bench")"
  s="$(median strata "$bench")"
  awk -v b="$bench" -v l="$l" -v s="$s" 'BEGIN { printf "| %s | %.3f | %.3f | %.2f |\n", b, l, s, s / l }'
done
