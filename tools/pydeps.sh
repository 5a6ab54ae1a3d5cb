#!/usr/bin/env bash
# Installs the Python packages the tests need, only when missing: the
# published PyDotCompute 0.2.0 (whose own encoder writes the msgpack test
# vectors at test time, tests/support/gen_msg_vectors.py) with its msgpack
# and numpy; and for the notebooks, the telemetry dashboard and the type
# checks (docs/python.md, "Notebooks and typing"): ipywidgets, ipykernel,
# nbclient, nbformat and mypy. Safe to run repeatedly; needs the network
# only when something is missing. PYTHON selects the interpreter (default
# python3).
set -euo pipefail
py="${PYTHON:-python3}"

if ! command -v "$py" >/dev/null 2>&1; then
    echo "tools/pydeps.sh: $py not found; the message tests need Python 3" >&2
    exit 1
fi
if "$py" -c 'import sys, msgpack, numpy, pydotcompute
sys.exit(0 if pydotcompute.__version__ == "0.2.0" else 1)' 2>/dev/null; then
    :
else
    echo "tools/pydeps.sh: installing pydotcompute==0.2.0 msgpack numpy" >&2
    "$py" -m pip install --quiet "pydotcompute==0.2.0" msgpack numpy
fi
# numba-cuda: device handlers written in Python (docs/python.md, "Device
# handlers in Python"). It compiles to PTX without a GPU, with the CUDA
# toolkit's NVVM (/usr/local/cuda; without a toolkit those tests skip);
# numba comes with it.
if ! "$py" -c 'import numba.cuda, numba_cuda' 2>/dev/null; then
    echo "tools/pydeps.sh: installing numba-cuda" >&2
    "$py" -m pip install --quiet "numba-cuda==0.30.4"
fi
# Jupyter and typing (the [jupyter] and [typing] extras of pyproject.toml).
if ! "$py" -c 'import ipywidgets, ipykernel, nbclient, nbformat, mypy' 2>/dev/null; then
    echo "tools/pydeps.sh: installing ipywidgets ipykernel nbclient nbformat mypy" >&2
    "$py" -m pip install --quiet "ipywidgets>=8" "ipykernel>=6" "nbclient>=0.7" nbformat "mypy>=1.5"
fi
