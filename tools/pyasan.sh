#!/usr/bin/env bash
# The Python tests against the extension and libringkernel built with
# AddressSanitizer + UBSan (the interpreter itself is not instrumented, so
# the sanitizer runtimes are preloaded and leak checking is off). Needs
# build/pyvenv (tools/pyvenv.sh) for pytest and the reference packages.
#   tools/pyasan.sh [BUILD_DIR]   (default build-pyasan)
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-pyasan}
tools/pyvenv.sh build >/dev/null
py=build/pyvenv/bin/python
cmake -S . -B "$b" -DRK_BUILD_PYTHON=ON -DRK_BUILD_TESTS=OFF -DRK_BUILD_BENCH=OFF \
    -DRK_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Debug -DRK_SANITIZE=address,undefined \
    -DPython_EXECUTABLE="$("$py" -c 'import sys; print(sys.executable)')" >/dev/null
cmake --build "$b" -j"${JOBS:-2}"
# A package directory as the wheel lays it out, over the sanitized build.
pkg=$b/pkg/ringkernel
rm -rf "$b/pkg"
mkdir -p "$pkg"
cp -r python/ringkernel/. "$pkg"/
find "$pkg" -name __pycache__ -prune -exec rm -rf {} +
cp "$b"/python/_core*.so "$pkg"/
cp "$(readlink -f "$b"/libringkernel.so)" "$pkg"/libringkernel.so.0
ln -s "$PWD/include" "$pkg/include"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export PYTHONPATH=$PWD/$b/pkg
exec "$py" -m pytest -q -p no:cacheprovider python/tests
