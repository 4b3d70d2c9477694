#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Real ENOSPC, on a small tmpfs: `strata load` of 200,000 lines into a tmpfs of 8-12 MiB (too
# small for them), then the tmpfs grown and the database checked: it must open, `check` must
# call it sound, and it must hold exactly a prefix of the input. Needs root (mount).
#
#   scripts/enospc-loop.sh [RUNS]      # default 200; prints the counts, exits 1 on any bad run
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
if [ "$(id -u)" != 0 ]; then
  echo "skipped: mounting a tmpfs needs root" >&2
  exit 0
fi
probe=$(mktemp -d)
if ! mount -t tmpfs -o size=1m tmpfs "$probe" 2>/dev/null; then
  rmdir "$probe"
  echo "skipped: this machine does not let us mount a tmpfs" >&2
  exit 0
fi
umount "$probe"
rmdir "$probe"
cargo build --release -q -p strata-cli
strata=$PWD/target/release/strata
work=$(mktemp -d)
mnt=$work/mnt
mkdir -p "$mnt"
trap 'umount "$mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++) { v = ""; for (j = 0; j < 6; j++) v = v sprintf("%08x", int(rand() * 4294967296)); printf "key%08d\t%s\n", i, v } }' >"$work/in.tsv"

full=0 fitted=0 bad=0
for i in $(seq 1 "$runs"); do
  size=$((8192 + (i * 4096 / runs)))   # KiB: 8 MiB .. 12 MiB
  mount -t tmpfs -o size=${size}k tmpfs "$mnt"
  if "$strata" load "$mnt/db" "$work/in.tsv" --create >/dev/null 2>"$work/load.err"; then
    fitted=$((fitted + 1))
  else
    full=$((full + 1))
  fi
  ok=1
  # Checked on the full disk (check writes nothing), then with room again: the database must
  # open for writing too, which replays its log into a new table.
  if ! "$strata" check "$mnt/db" >"$work/check.out" 2>&1; then
    echo "run $i (${size} KiB): check failed: $(tail -1 "$work/check.out") (load: $(tail -1 "$work/load.err"))"
    ok=0
  fi
  mount -o remount,size=64m "$mnt"
  if [ "$ok" = 0 ]; then
    :
  elif ! "$strata" export "$mnt/db" "$work/out.tsv" 2>"$work/export.err"; then
    echo "run $i (${size} KiB): export failed: $(tail -1 "$work/export.err")"
    ok=0
  else
    n=$(wc -l <"$work/out.tsv")
    if ! head -n "$n" "$work/in.tsv" | cmp -s - "$work/out.tsv"; then
      echo "run $i (${size} KiB): the $n entries are not a prefix of the input"
      ok=0
    elif ! "$strata" put "$mnt/db" zz-probe x >/dev/null 2>"$work/put.err"; then
      echo "run $i (${size} KiB): does not open for writing: $(tail -1 "$work/put.err")"
      ok=0
    fi
  fi
  [ "$ok" = 1 ] || bad=$((bad + 1))
  umount "$mnt"
done
echo "enospc loop: $runs runs (tmpfs 8-12 MiB): $full loads hit ENOSPC, $fitted fitted; $bad unusable or not a prefix"
[ "$bad" = 0 ]
