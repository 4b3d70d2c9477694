#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs db_bench's baseline suite on strata and LevelDB, alternating engines, RUNS times each,
# and prints a Markdown table of the median micros/op per benchmark with the ratio to LevelDB
# (above 1.00 means strata is faster), plus peak memory.
#   scripts/compare.sh [RUNS] [extra db_bench flags...]
# Needs the LevelDB feature's library: scripts/install-peers.sh --leveldb-only
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
cargo build --release -q -p strata-bench --features leveldb
out=$(mktemp -d)
for run in $(seq 1 "$runs"); do
  for engine in strata leveldb; do
    ./target/release/db_bench --engine="$engine" "$@" > "$out/$engine.$run.txt"
  done
done
awk -v runs="$runs" '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  FNR == 1 { split(FILENAME, p, "/"); split(p[length(p)], q, "."); engine = q[1] }
  $2 == ":" && $4 == "micros/op;" {
    if (!($1 in seen)) { seen[$1] = 1; order[++count] = $1 }
    values[engine, $1] = values[engine, $1] " " $3
  }
  /^peak memory:/ { mem[engine] = mem[engine] " " $3 }
  END {
    printf "| benchmark | strata µs/op | LevelDB µs/op | strata speed ÷ LevelDB |\n|---|---|---|---|\n"
    for (i = 1; i <= count; i++) {
      b = order[i]; s = median(values["strata", b]); l = median(values["leveldb", b])
      printf "| %s | %.3f | %.3f | %.2f |\n", b, s, l, l / s
    }
    s = median(mem["strata"]); l = median(mem["leveldb"])
    printf "| peak memory (MB) | %.1f | %.1f | %.2f of LevelDB |\n", s, l, s / l
    printf "\nMedians of %d runs per engine, engines alternating.\n", runs
  }' "$out"/*.txt
rm -rf "$out"
