#!/usr/bin/env bash
# Installs the Python packages the tests need, only when missing: the
# published PyDotCompute 0.2.0 (whose own encoder writes the msgpack test
# vectors at test time, tests/support/gen_msg_vectors.py) with its msgpack
# and numpy. Safe to run repeatedly; needs the network only when something
# is missing. PYTHON selects the interpreter (default python3).
set -euo pipefail
py="${PYTHON:-python3}"

if ! command -v "$py" >/dev/null 2>&1; then
    echo "tools/pydeps.sh: $py not found; the message tests need Python 3" >&2
    exit 1
fi
if "$py" -c 'import sys, msgpack, numpy, pydotcompute
sys.exit(0 if pydotcompute.__version__ == "0.2.0" else 1)' 2>/dev/null; then
    exit 0
fi
echo "tools/pydeps.sh: installing pydotcompute==0.2.0 msgpack numpy" >&2
"$py" -m pip install --quiet "pydotcompute==0.2.0" msgpack numpy
