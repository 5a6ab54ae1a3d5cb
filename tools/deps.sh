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
      libmicrohttpd-dev  # the optional metrics HTTP endpoint (src/metrics/)
      gnuplot-nox        # `ringkernel bench --plot DIR` PNG charts
      curl python3-prometheus-client # metrics endpoint test: real client, parser
      libopenmpi-dev openmpi-bin # Open MPI: the multi-node cluster layer (src/cluster/)
      doxygen            # `make docs`: the API reference from include/ringkernel/
      clang libclang-rt-14-dev  # libFuzzer targets and LeakSanitizer
      python3 python3-pip)      # tools/pydeps.sh: PyDotCompute writes the test vectors

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "tools/deps.sh: installing ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python: PyDotCompute 0.2.0 writes the wire-format test vectors.
"$(dirname "$0")/pydeps.sh"
