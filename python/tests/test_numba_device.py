"""Device handlers written in Python and compiled by Numba
(ringkernel/numba_device.py, docs/python.md "Device handlers in Python").

Without a GPU: numba-cuda compiles the handler to PTX with the C ABI
(NVVM runs on the CPU), the C test program test_cuda_jitlink links that
PTX with the persistent loop for sm_90 with nvJitLink and checks the cubin,
and the whole runtime path runs under the stand-in driver
(tests/fake_cuda) with the same Python function compiled by Numba's CPU
target as a C-ABI cfunc, called by the host build of the same loop.
Functions Numba cannot compile are a clear NumbaCompileError.
"""

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ringkernel as rk

numba = pytest.importorskip("numba")
pytest.importorskip("numba.cuda")

from ringkernel import numba_device as nd  # noqa: E402


def _have_nvvm():
    try:
        from numba.cuda.cudadrv.libs import get_cudalib
        get_cudalib("nvvm")
        return True
    except Exception:
        return False


pytestmark = pytest.mark.skipif(
    not _have_nvvm(), reason="numba-cuda finds no NVVM (no CUDA toolkit)")

ROOT = Path(__file__).resolve().parents[2]


@rk.message
class Sample:
    x: rk.float32
    n: rk.int32
    v: rk.array(rk.float64, 4)


def sample_handler(req, resp):
    """The sample of tests/test_cuda_jitlink.c (its C twin)."""
    resp.x = req.x * 2
    resp.n = req.n + 1
    for i in range(4):
        resp.v[i] = req.v[i] / 2
    if req.n < 0:
        return -1  # a failure: the block faults
    if req.n == 7:
        return 1  # no reply
    return 0


def c_program(name):
    path = Path(os.environ.get("RK_TEST_BUILD_DIR", ROOT / "build")) / "tests" / name
    return path if path.exists() else None


def fake_driver():
    path = os.environ.get("RK_TEST_FAKE_CUDA") or str(
        ROOT / "build" / "tests" / "libfake_cuda.so")
    return path if os.path.exists(path) else None


def test_compiles_to_a_c_abi_device_function():
    h = nd.compile_device_handler(sample_handler, Sample)
    assert Sample.dtype.itemsize == 40
    assert (h.in_size, h.out_size) == (40, 40)
    assert h.out_type_id == Sample.__rk_msgtype__.type_id
    # A visible device function with the C ABI: int (ptr, ptr), no kernel.
    assert ".visible .func  (.param .b32 func_retval0) rk_numba_handler(" in h.ptx
    assert "rk_numba_handler_param_1" in h.ptx
    assert ".entry" not in h.ptx
    assert ".target sm_75" in h.ptx
    assert f"RK_DEV_NUMBA_KERNEL(rk_numba_kernel, 40u, 40u, {h.out_type_id}u," in h.source
    assert h.entry == "rk_numba_kernel"


def test_numba_ptx_links_with_the_loop(tmp_path):
    """test_cuda_jitlink links the PTX Numba just produced with the loop
    (nvJitLink, sm_90), checks the cubin and runs it under the stand-in."""
    prog = c_program("test_cuda_jitlink")
    if prog is None:
        pytest.skip("needs build/tests/test_cuda_jitlink (make build)")
    ptx = tmp_path / "handler.ptx"
    ptx.write_text(nd.compile_device_handler(sample_handler, Sample).ptx)
    env = dict(os.environ, RK_TEST_NUMBA_PTX=str(ptx),
               RK_KERNEL_CACHE_DIR=str(tmp_path / "kcache"))
    if fake_driver():
        env["RK_CUDA_DRIVER"] = fake_driver()
    r = subprocess.run([str(prog)], env=env, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "[  PASSED  ] 3 test(s)." in out, out
    if "NVRTC not available" in out or "nvJitLink not available" in out:
        pytest.skip("no NVRTC or nvJitLink: " + out)


CHILD = textwrap.dedent("""
    import ctypes, sys
    import ringkernel as rk
    from ringkernel import numba_device as nd

    @rk.message
    class Sample:
        x: rk.float32
        n: rk.int32
        v: rk.array(rk.float64, 4)

""") + inspect.getsource(sample_handler) + textwrap.dedent("""
    scale = rk.ring_kernel(kernel_id="scale", backend="cuda", input_type=Sample,
                           device_handler=True, grid_size=1,
                           block_size=32)(sample_handler)

    # The stand-in runs the host build of the loop: hand it the same
    # function compiled by Numba's CPU target.
    spec = rk.get_registered_kernel("scale")
    cf = nd.compile_host_handler(scale.__wrapped__, Sample)
    drv = ctypes.CDLL(sys.argv[1])
    drv.fake_cuda_numba_set(ctypes.c_void_p(cf.address), spec.device_handler.in_size,
                            spec.device_handler.out_size,
                            spec.device_handler.out_type_id)
    with rk.RingKernelRuntime(load_static_kernels=False) as rt:
        rt.launch("scale")
        print("backend", rt.get_kernel_backend("scale"))
        rt.activate("scale")
        for i in range(50):
            if i == 7:
                continue
            rt.send_fixed("scale", Sample(x=i, n=i, v=[i, 2 * i, -1, 0.5]))
            r = rt.receive("scale", timeout=30)
            assert r.x == 2 * i and r.n == i + 1, r
            assert list(r.v) == [i / 2, i, -0.5, 0.25], r
        # n == 7 sends nothing: the next reply is n == 8's.
        zero = [0.0] * 4
        rt.send_fixed("scale", Sample(x=0, n=7, v=zero))
        rt.send_fixed("scale", Sample(x=0, n=8, v=zero))
        print("after7", rt.receive("scale", timeout=30).n)
        # A failure faults the block: no supervision, so FAILED, and the
        # message is dead-lettered.
        rt.send_fixed("scale", Sample(x=0, n=-1, v=zero))
        rt.wait("scale", timeout=30)
        print("state", rt.get_kernel_state("scale").name)
        dl = rt.dead_letter(timeout=30)
        print("dead", dl["kernel_id"], dl["error"])
    print("ok")
""")


def test_runs_end_to_end_under_the_stand_in(tmp_path):
    drv = fake_driver()
    if drv is None:
        pytest.skip("needs tests/fake_cuda (build the C tests)")
    env = dict(os.environ, RK_CUDA_DRIVER=drv,
               RK_KERNEL_CACHE_DIR=str(tmp_path / "kcache"))
    r = subprocess.run([sys.executable, "-c", CHILD, drv], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "backend cuda" in lines, r.stdout
    assert "after7 9" in lines, r.stdout
    assert "state FAILED" in lines, r.stdout
    assert any(ln.startswith("dead scale") for ln in lines), r.stdout
    assert lines[-1] == "ok"


# ------------------------------------------------------------ bad input


def uses_a_dict(req, resp):
    d = {}
    d[1] = req.x
    resp.x = d[1]


def uses_a_string(req, resp):
    resp.n = len(str(req.n))


def allocates_a_list(req, resp):
    resp.n = len([i for i in range(req.n)])


def allocates_an_array(req, resp):
    resp.x = np.empty(4)[0]


def raises(req, resp):
    raise ValueError("no exceptions on the device")


def returns_a_float(req, resp):
    return req.x


def unknown_field(req, resp):
    resp.y = req.x


@pytest.mark.parametrize("fn,reason", [
    (uses_a_dict, "No implementation of function"),
    (uses_a_string, "No implementation of function"),
    (allocates_a_list, "Unknown attribute 'append'"),
    (allocates_an_array, "No implementation of function"),
    (unknown_field, "KeyError: 'y'"),
    (returns_a_float, "returns float32"),
    (raises, "cannot raise: return a negative int"),
])
def test_unsupported_python_is_a_clear_error(fn, reason):
    with pytest.raises(nd.NumbaCompileError) as ei:
        nd.compile_device_handler(fn, Sample)
    e = ei.value
    assert e.name == "RK_ECOMPILE"
    assert f"device_handler {fn.__name__!r}" in str(e), str(e)
    assert reason in str(e), str(e)


def test_message_types_must_have_fixed_numeric_layouts():
    @rk.message
    class Named:
        name: str

    with pytest.raises(nd.NumbaCompileError, match="fixed layout"):
        nd.compile_device_handler(sample_handler, Named)

    @rk.message
    class Huge:
        v: rk.array(rk.float64, 1024)

    with pytest.raises(nd.NumbaCompileError, match="over the device reply limit"):
        nd.compile_device_handler(sample_handler, Sample, Huge)


def test_decorator_checks_the_backend_and_types():
    with pytest.raises(rk.InvalidConfigurationError, match="backend='cuda'"):
        @rk.ring_kernel(kernel_id="nd_cpu", input_type=Sample,
                        device_handler=sample_handler, auto_register=False)
        def k1(ctx):
            pass
    with pytest.raises(rk.InvalidConfigurationError, match="input_type"):
        @rk.ring_kernel(kernel_id="nd_noin", backend="cuda",
                        device_handler=sample_handler, auto_register=False)
        def k2(ctx):
            pass
    with pytest.raises(nd.NumbaCompileError, match="uses_a_dict"):
        @rk.ring_kernel(kernel_id="nd_bad", backend="cuda", input_type=Sample,
                        device_handler=uses_a_dict, auto_register=False)
        def k3(ctx):
            pass


def test_host_cfunc_computes_what_the_device_would():
    import ctypes
    cf = nd.compile_host_handler(sample_handler, Sample)
    a = Sample.records(1)
    a["x"], a["n"], a["v"] = 3, 2, [1, 2, 3, 4]
    b = Sample.records(1)
    rc = cf.ctypes(ctypes.c_void_p(a.ctypes.data), ctypes.c_void_p(b.ctypes.data))
    assert rc == 0
    assert b["x"][0] == 6 and b["n"][0] == 3
    assert np.array_equal(b["v"][0], [0.5, 1, 1.5, 2])
