#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Installs the C libraries of the engines strata is compared with and tested against, from
# Debian's packages, and valgrind for the C API's leak test. Idempotent; needs root (or sudo).
set -euo pipefail

packages=(
  libleveldb-dev libsnappy-dev
  librocksdb-dev
  liblmdb-dev
  libsqlite3-dev
  libkyotocabinet-dev
  libdb-dev
  libwiredtiger-dev
  pkg-config
  valgrind
)
if [ "${1:-}" = "--leveldb-only" ]; then
  packages=(libleveldb-dev libsnappy-dev pkg-config)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
