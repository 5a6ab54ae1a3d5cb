"""C kernels with device code, reached from Python on the cuda backend.

There is no GPU here, so the cuda case runs under the test-only stand-in
driver (tests/fake_cuda, built by the C test suite in build/tests): the
backend's real host code (NVRTC compile, kernel cache, launch, host relay)
with the device loop on CPU threads. Each case runs in a child process,
because the driver is chosen (RK_CUDA_DRIVER) when the library first loads
it. Skipped where the stand-in or NVRTC is missing.
"""

import glob
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys
    import ringkernel as rk

    @rk.message
    class Num:
        value: int

    rk.load_library(sys.argv[1])
    with rk.RingKernelRuntime() as rt:
        print("backends", rt.get_kernel_backend("c_gpu_echo"),
              rt.get_kernel_backend("c_echo"))
        rt.launch("c_gpu_echo", input_type=Num, output_type=Num)
        rt.activate("c_gpu_echo")
        for i in range(200):
            rt.send("c_gpu_echo", Num(value=i))
            assert rt.receive("c_gpu_echo", timeout=30).value == i
        assert rt.request("c_gpu_echo", Num(value=-5), timeout=30).value == -5
        rt.terminate("c_gpu_echo", timeout=30)
        print("processed", rt.get_telemetry("c_gpu_echo")["processed"])
    print("ok")
""")


def fake_driver():
    """The stand-in driver of the C build that `make test` made (the
    Makefile names it; else build/): an uninstrumented library, so it also
    loads under the ASan job's preloaded runtime."""
    path = os.environ.get("RK_TEST_FAKE_CUDA") or str(
        ROOT / "build" / "tests" / "libfake_cuda.so")
    return path if os.path.exists(path) else None


def have_nvrtc():
    if os.environ.get("RK_NVRTC_LIBRARY"):
        return True
    for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/lib",
              "/usr/lib/x86_64-linux-gnu"):
        if glob.glob(os.path.join(d, "libnvrtc.so*")):
            return True
    return False


def run_child(lib, env_extra, tmp_path):
    env = dict(os.environ, RK_KERNEL_CACHE_DIR=str(tmp_path / "kcache"),
               **env_extra)
    return subprocess.run([sys.executable, "-c", CHILD, str(lib)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_device_kernel_on_cuda_backend(c_kernels, tmp_path):
    drv = fake_driver()
    if drv is None or not have_nvrtc():
        pytest.skip("needs tests/fake_cuda (build the C tests) and NVRTC")
    r = run_child(c_kernels, {"RK_CUDA_DRIVER": drv}, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    # The device kernel runs on cuda; the host-only one stays on cpu.
    assert "backends cuda cpu" in lines, r.stdout
    assert "processed 201" in lines, r.stdout
    assert lines[-1] == "ok"


def test_device_kernel_without_a_driver_runs_on_cpu(c_kernels, tmp_path):
    r = run_child(c_kernels, {"RK_CUDA_DRIVER": "/nonexistent/libcuda.so.1"},
                  tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "backends cpu cpu" in r.stdout.splitlines(), r.stdout


def test_cuda_backend_without_a_driver_is_a_clear_error(tmp_path):
    code = textwrap.dedent("""
        import ringkernel as rk
        try:
            rk.RingKernelRuntime(backend="cuda", load_static_kernels=False)
        except rk.errors.RingKernelError as e:
            print(type(e).__name__, e.name)
            print(str(e))
        else:
            print("no error")
    """)
    env = dict(os.environ, RK_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    r = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("NoDeviceError RK_ENODEV"), out
    assert "backend 'cuda' cannot run here" in out, out
    assert "cannot load the CUDA driver" in out, out
    assert "built in: cuda, cpu" in out, out
