"""Device code from Python on the cuda backend, under the test-only
stand-in driver (tests/fake_cuda; see test_cuda.py): one-shot kernels
(RawKernel over tests/kernels/oneshot_kernels.cu, whose host build the
stand-in runs), ctx.execute_kernel from an actor, a device actor defined
with @ring_kernel(device_source=...) (tests/kernels/test_kernels.cu's
rk_sum), and UnifiedBuffer's CUDA exports (__cuda_array_interface__,
kDLCUDA DLPack). Each case runs in a child process (the driver is chosen
when the library first loads it). RK_TEST_CUDA_REAL=1 runs the same on a
GPU's real driver."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_cuda import fake_driver, have_nvrtc

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ONESHOT_SRC = ROOT / "tests" / "kernels" / "oneshot_kernels.cu"
RING_SRC = ROOT / "tests" / "kernels" / "test_kernels.cu"


def run(code, tmp_path, driver=None):
    """Runs code in a child on the stand-in driver (or driver); with
    RK_TEST_CUDA_REAL=1 (a machine with a GPU) on the real one."""
    env = dict(os.environ, RK_KERNEL_CACHE_DIR=str(tmp_path / "kcache"),
               PYTHONPATH=str(HERE))
    if driver is not None:
        env["RK_CUDA_DRIVER"] = driver
    elif os.environ.get("RK_TEST_CUDA_REAL") != "1":
        drv = fake_driver()
        if drv is None or not have_nvrtc():
            pytest.skip("needs tests/fake_cuda (build the C tests) and NVRTC")
        env["RK_CUDA_DRIVER"] = drv
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(ONESHOT_SRC),
                        str(RING_SRC)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "ok", r.stdout + r.stderr
    return r.stdout.splitlines()


def test_raw_kernel_on_cuda(tmp_path):
    out = run("""
        import sys
        import numpy as np
        import ringkernel as rk
        src = open(sys.argv[1]).read()
        vadd = rk.kernel(src, name="rk_os_vadd")
        print("backend", vadd.backend)
        n = 1000
        x = rk.UnifiedBuffer((n,), np.uint32).allocate(); x.copy_from(np.arange(n))
        y = rk.UnifiedBuffer((n,), np.uint32).allocate(); y.copy_from(3 * np.arange(n))
        z = rk.UnifiedBuffer((n,), np.uint32).allocate()
        vadd(4, 32, (x, y, z, np.uint32(n)))
        assert z.state == rk.BufferState.DEVICE_DIRTY  # written on the device
        assert (z.host == 4 * np.arange(n)).all()
        # numpy arrays travel through temporary buffers and are copied back
        za = np.zeros(n, np.uint32)
        launch = vadd.start(2, 64, (np.arange(n, dtype=np.uint32), y, za, np.uint32(n)))
        launch.wait(60)
        assert launch.done and (za == 4 * np.arange(n)).all()
        one = np.zeros((), np.uint32)  # a 0-d array is a buffer of one element
        vadd(1, 1, (np.array(2, np.uint32), np.array(3, np.uint32), one, np.uint32(1)))
        assert one == 5
        # a cooperative kernel: the grid barrier
        gsum = rk.RawKernel(src, "rk_os_gridsum", cooperative=True)
        inp = rk.UnifiedBuffer((n,), np.uint32).allocate(); inp.copy_from(np.arange(n))
        part = rk.UnifiedBuffer((2,), np.uint32).zeros()
        out = rk.UnifiedBuffer((3,), np.uint32).zeros()
        gsum(2, 32, (inp, part, out, np.uint32(n)))
        assert list(out.host) == [n * (n - 1) // 2] * 3, out.host
        # the grid barrier without cooperative: an error naming the kernel
        nocoop = rk.RawKernel(src, "rk_os_nocoop")
        try:
            nocoop(1, 1, (rk.UnifiedBuffer((1,), np.uint32).zeros(),))
        except rk.RingKernelError as e:
            print("nocoop", e.name, "rk_os_nocoop" in str(e))
        # a grid that cannot be resident at once
        try:
            gsum(65535, 32, (inp, part, out, np.uint32(n)))
        except rk.RingKernelError as e:
            print("toobig", e.name, "rk_os_gridsum" in str(e))
        # a source that does not compile: the file and line, the kernel named
        try:
            rk.RawKernel("RK_DEV_FN void f(void) { undeclared(); }\\n", "broken",
                         source_name="broken.cu")
        except rk.CompileError as e:
            print("compile", e.name, "broken.cu:1" in str(e))
        print("ok")
    """, tmp_path)
    assert "compile RK_ECOMPILE True" in out, out
    assert "backend cuda" in out
    assert "nocoop RK_EINVAL True" in out
    assert "toobig RK_ENOTSUP True" in out


def test_execute_kernel_from_an_actor_on_cuda(tmp_path):
    out = run("""
        import sys
        import numpy as np
        import ringkernel as rk
        src = open(sys.argv[1]).read()
        from test_oneshot import Done, Job
        rk.RawKernel(src, "rk_os_vadd")  # made before any ring kernel runs

        n = 256
        x = rk.UnifiedBuffer((n,), np.uint32).allocate(); x.copy_from(np.arange(n))
        z = rk.UnifiedBuffer((n,), np.uint32).allocate()

        @rk.ring_kernel(kernel_id="vadd_actor", input_type=Job, output_type=Done,
                        grid_size=2, block_size=64)
        def actor(ctx):
            while not ctx.should_terminate:
                m = ctx.receive()
                args = (x, x, z, np.uint32(m.n))
                if m.start:
                    ctx.execute_kernel("rk_os_vadd", args, wait=False).wait(60)
                else:
                    ctx.execute_kernel("rk_os_vadd", args)
                ctx.send(Done(total=int(z.host[:m.n].sum())))

        with rk.RingKernelRuntime() as rt:
            rt.launch("vadd_actor")
            rt.activate("vadd_actor")
            for start in (False, True):
                rt.send("vadd_actor", Job(n=n, start=start))
                print("total", rt.receive("vadd_actor", timeout=60).total)
            rt.terminate("vadd_actor", timeout=30)
        print("ok")
    """, tmp_path)
    assert out.count(f"total {256 * 255}") == 2, out


DEVICE_ACTOR = """
    import sys
    import ringkernel as rk

    @rk.message
    class Bytes4:
        a: rk.uint8
        b: rk.uint8
        c: rk.uint8
        d: rk.uint8

    @rk.message
    class Sum:
        total: rk.uint32

    @rk.ring_kernel(kernel_id="dev_sum", input_type=Bytes4, output_type=Sum,
                    backend=BACKEND, device_source=open(sys.argv[2]).read(),
                    device_entry="rk_sum", block_size=32, max_payload=128)
    def dev_sum(ctx):  # the host twin: where cuda does not run it
        while not ctx.should_terminate:
            m = ctx.receive()
            ctx.send(Sum(total=m.a + m.b + m.c + m.d))

    with rk.RingKernelRuntime() as rt:
        rt.launch("dev_sum")
        print("backend", rt.get_kernel_backend("dev_sum"))
        rt.activate("dev_sum")
        for i in range(50):
            rt.send_fixed("dev_sum", Bytes4(a=i, b=2, c=3, d=250))
            assert rt.receive("dev_sum", timeout=60).total == i + 255
        if rt.get_kernel_backend("dev_sum") == "cuda":
            try:  # code cannot load while the device actor is resident
                rk.RawKernel(open(sys.argv[1]).read(), "rk_os_vadd")
            except rk.RingKernelError as e:
                print("late", e.name, "rk_os_vadd" in str(e))
        rt.terminate("dev_sum", timeout=30)
        print("processed", rt.get_kernel_stats("dev_sum")["processed"])
    print("ok")
"""


def test_device_actor_from_python_on_cuda(tmp_path):
    out = run(DEVICE_ACTOR.replace("BACKEND", '"cuda"'), tmp_path)
    assert "backend cuda" in out and "processed 50" in out
    assert "late RK_EBUSY True" in out


def test_device_actor_runs_its_host_twin_without_a_gpu(tmp_path):
    out = run(DEVICE_ACTOR.replace("BACKEND", '"auto"'), tmp_path,
              driver="/nonexistent/libcuda.so.1")
    assert "backend cpu" in out and "processed 50" in out


def test_device_actor_on_cuda_without_a_gpu_is_refused(tmp_path):
    code = DEVICE_ACTOR.replace("BACKEND", '"cuda"').replace(
        '        rt.launch("dev_sum")', '''        try:
            rt.launch("dev_sum")
        except rk.NoDeviceError as e:
            print("refused", "dev_sum" in str(e))
            print("ok")
            raise SystemExit(0)''')
    out = run(code, tmp_path, driver="/nonexistent/libcuda.so.1")
    assert "refused True" in out


def test_cuda_buffer_exports(tmp_path):
    out = run("""
        import numpy as np
        import ringkernel as rk
        from test_dlpack import read_capsule
        b = rk.UnifiedBuffer((6, 5), np.float32).allocate()
        b.copy_from(np.arange(30).reshape(6, 5))
        assert b.state == rk.BufferState.HOST_DIRTY
        cai = b.__cuda_array_interface__
        assert b.state == rk.BufferState.SYNCHRONIZED  # synchronised for the consumer
        assert cai["data"] == (b.device_ptr, False)
        assert cai["shape"] == (6, 5) and cai["typestr"] == "<f4"
        assert cai["strides"] is None and cai["version"] == 3 and cai["stream"] is None
        assert b.device.__cuda_array_interface__["data"][0] == b.device_ptr  # .device as before
        assert b.__dlpack_device__() == (2, 0)  # kDLCUDA
        for mv in (None, (1, 0)):
            d = read_capsule(b.__dlpack__(stream=1, max_version=mv))
            assert d["device"] == (2, 0) and d["data"] == b.device_ptr
            assert d["shape"] == (6, 5) and d["strides"] == (5, 1)
            assert d["dtype"] == (2, 32, 1)
        # the host copy on request (kDLCPU), so numpy can take it
        a = np.from_dlpack(b, device="cpu")
        assert a.ctypes.data == b.host.ctypes.data and (a == np.arange(30).reshape(6, 5)).all()
        try:
            np.from_dlpack(b)  # numpy cannot read device memory
        except (RuntimeError, BufferError, TypeError) as e:
            print("numpy refuses kDLCUDA:", type(e).__name__)
        for bad in (dict(dl_device=(2, 1)), dict(stream=0)):
            try:
                b.__dlpack__(**bad)
            except rk.DLPackError as e:
                print("refused", bad, e.name)
        print("ok")
    """, tmp_path)
    assert "refused {'dl_device': (2, 1)} RK_ENODEV" in out, out
    assert "refused {'stream': 0} RK_EINVAL" in out, out
