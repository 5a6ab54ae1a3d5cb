#!/usr/bin/env bash
# Installs the Debian packages the build, tests and benchmarks need, and only
# those that are missing. Safe to run repeatedly; needs root (or sudo) only
# when something is missing.
set -euo pipefail

pkgs=(build-essential cmake pkg-config
      libmsgpack-dev     # msgpack-c: the message codec
      libcmocka-dev      # the test framework
      libck-dev          # Concurrency Kit: ck_ring, the benchmark reference
      libcaf-dev         # C++ Actor Framework: the runtime benchmark reference
      clang libclang-rt-14-dev # libFuzzer targets and LeakSanitizer
      libopenmpi-dev openmpi-bin) # Open MPI: the multi-node cluster layer (src/cluster/)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "tools/deps.sh: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
