#!/usr/bin/env bash
# Builds a wheel of the Python package from this checkout, installs it in a
# fresh virtual environment (nothing from the system site-packages) and
# imports it there: a message round trip through a Python kernel proves the
# extension and the bundled libringkernel load. Run by .ci/run.
#   tools/check-wheel.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-build/wheel-check}
py=${PYTHON:-python3}
rm -rf "$work"
mkdir -p "$work/dist"
# The build venv (tools/pyvenv.sh) has scikit-build-core; build without
# isolation so no network is needed.
tools/pyvenv.sh build >/dev/null
build/pyvenv/bin/python -m pip wheel -q --no-build-isolation --no-deps -w "$work/dist" .
whl=$(ls "$work"/dist/ringkernel-*.whl)
echo "check-wheel: built $(basename "$whl")"
"$py" -m venv "$work/venv"
# numpy is the package's one dependency: install it from the index, or
# from this machine's copy when there is no network.
if ! "$work/venv/bin/pip" install -q "$whl" 2>/dev/null; then
    "$work/venv/bin/pip" install -q --no-index --find-links "$work/dist" \
        "$whl" --no-deps
    np=$(build/pyvenv/bin/python -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')
    echo "$np" > "$(echo "$work"/venv/lib/python3*/site-packages)/host-numpy.pth"
fi
cd "$work"  # away from the source tree
venv/bin/python - <<'PY'
import ringkernel as rk, os
assert "site-packages" in rk.__file__, rk.__file__
@rk.message
class Ping:
    n: int
@rk.ring_kernel(kernel_id="echo", input_type=Ping, output_type=Ping)
def echo(ctx):
    while not ctx.should_terminate:
        ctx.send(ctx.receive())
with rk.RingKernelRuntime() as rt:
    rt.launch("echo"); rt.activate("echo")
    rt.send("echo", Ping(n=41))
    assert rt.receive("echo", timeout=10).n == 41
# PyDotCompute's module paths and the type information travel in the wheel.
import ringkernel.core, ringkernel.ring_kernels, ringkernel.decorators, ringkernel.backends
here = os.path.dirname(rk.__file__)
for f in ("py.typed", "_core.pyi"):
    assert os.path.isfile(os.path.join(here, f)), f
print("check-wheel: ringkernel", rk.__version__, "imports and runs from", os.path.dirname(rk.__file__))
PY
