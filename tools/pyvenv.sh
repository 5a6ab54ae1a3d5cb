#!/usr/bin/env bash
# Makes BUILD_DIR/pyvenv, a virtual environment with the Python package
# built from this checkout (`pip install .`: scikit-build-core runs the
# CMake build with RK_BUILD_PYTHON=ON) and what its tests and benchmarks
# need: scikit-build-core, pytest, pytest-asyncio, numpy, msgpack and
# pydotcompute 0.2.0 (the reference the compatibility tests and benchmarks
# compare with); for the notebooks and type checks ipywidgets, ipykernel,
# nbclient, nbformat and mypy, and a Jupyter kernel spec "ringkernel" in
# the venv (share/jupyter/kernels) that runs the venv's python, which the
# notebook tests execute the example notebooks in. Used by `make pytest`
# (so `make test`), `make pybench` and `make mypy`.
#   tools/pyvenv.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
py=${PYTHON:-python3}
venv=$build/pyvenv

if [ ! -x "$venv/bin/python" ]; then
    # --system-site-packages: reuse what the machine already has.
    "$py" -m venv --system-site-packages "$venv"
fi
vpy=$venv/bin/python
if ! "$vpy" -c "import scikit_build_core, pytest, pytest_asyncio, numpy, msgpack, pydotcompute" 2>/dev/null; then
    "$vpy" -m pip install -q "scikit-build-core>=0.8" pytest pytest-asyncio numpy msgpack "pydotcompute==0.2.0"
fi
if ! "$vpy" -c "import ipywidgets, ipykernel, nbclient, nbformat, mypy" 2>/dev/null; then
    "$vpy" -m pip install -q "ipywidgets>=8" "ipykernel>=6" "nbclient>=0.7" nbformat "mypy>=1.5"
fi
if [ ! -f "$venv/share/jupyter/kernels/ringkernel/kernel.json" ]; then
    "$vpy" -m ipykernel install --sys-prefix --name ringkernel \
        --display-name "Python (ringkernel build venv)" >/dev/null
fi
# No build isolation: the build uses the venv's scikit-build-core, so the
# package rebuilds without network access once the venv is set up.
"$vpy" -m pip install -q --no-build-isolation --no-deps .
