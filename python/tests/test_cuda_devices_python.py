"""Devices, managed memory and other libraries' arrays from Python.

Under the test-only stand-in driver (tests/fake_cuda, two devices; see
test_cuda.py), each case in a child process (test_cuda_python.run);
RK_TEST_CUDA_REAL=1 runs the same on a GPU's real driver, where the
cases that need a second device pass without it (saying so).

  - one-shot kernels on a chosen device (``device=1``, ``"cuda:1"``),
    their numpy arguments on that device, a buffer of another device
    refused naming both; a device the driver lacks: NoDeviceError naming
    the ordinal and the device count;
  - CUDA arrays of other libraries as arguments without a copy: a fake
    exporter of the CUDA Array Interface (v2, v3 with streams) and one of
    DLPack (kDLCUDA, over a real capsule whose deleter must run), each
    error (other device, other device type, not contiguous, empty, old
    interface, mask, stream 0), a host DLPack array as numpy, and the
    array kept alive by a started launch;
  - managed buffers (prefetch and advice reach the driver, a kernel
    writes one with no copy, more than the device has free refused);
  - a device actor's device (``device=1``, a missing one refused at
    launch) and two device actors at a named barrier.

The argument and configuration checks that need no driver run in this
process (the cpu backend). numba-cuda's device arrays need a GPU to be
made (numba.cuda.device_array asks the real driver), so they are tested
only where one is: test_numba_device_array_is_an_argument.
"""

import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ringkernel as rk
from test_cuda_python import run

ROOT = Path(__file__).resolve().parents[2]
BAR_SRC = ROOT / "tests" / "kernels" / "bar_kernels.cu"

PRELUDE = """
    import ctypes, gc, os, sys, weakref
    import numpy as np
    import ringkernel as rk
    src = open(sys.argv[1]).read()
    REAL = os.environ.get("RK_TEST_CUDA_REAL") == "1"

    def has_device1():
        try:
            rk.UnifiedBuffer(1, np.uint8, "cuda:1")
            return True
        except rk.NoDeviceError:
            return False

    def fake(fn):  # a stand-in query, None on a GPU
        return None if REAL else getattr(ctypes.CDLL(os.environ["RK_CUDA_DRIVER"]), fn)

    class CAI:  # an exporter of the CUDA Array Interface only (Numba's kind)
        def __init__(self, buf, **over):
            self.buf = buf
            d = dict(buf.__cuda_array_interface__)
            d.update(over)
            self.__cuda_array_interface__ = d

    class DL:  # an exporter of DLPack only (over a UnifiedBuffer's capsule)
        def __init__(self, buf, device=None):
            self.buf, self.device = buf, device
        def __dlpack_device__(self):
            return self.device or self.buf.__dlpack_device__()
        def __dlpack__(self, stream=None, max_version=None):
            self.stream = stream
            return self.buf.__dlpack__(stream=stream, max_version=max_version)

    def u32(n, values=None, device="cuda"):
        b = rk.UnifiedBuffer((n,), np.uint32, device).allocate()
        if values is not None:
            b.copy_from(values)
        b.sync_to_device()
        return b

    def refused(cls, fn, *want):
        try:
            fn()
        except cls as e:
            for w in want:
                assert w in str(e), (w, str(e))
            return e.name
        raise AssertionError(f"not refused: {want}")
"""


def child(*parts, tmp_path):
    """The parts (each indented as it likes) after PRELUDE, in a child."""
    return run("".join(textwrap.dedent(p) for p in (PRELUDE,) + parts), tmp_path)


def test_oneshot_on_a_chosen_device(tmp_path):
    out = child("""
        nodev = refused(rk.NoDeviceError, lambda: rk.RawKernel(src, "rk_os_vadd", device=7),
                        "names CUDA device 7", "device(s)")
        print("nodev", nodev)
        if not has_device1():
            print("one device: device 1 skipped"); print("ok"); raise SystemExit(0)
        n = 300
        for dev in (1, "cuda:1"):
            k = rk.RawKernel(src, "rk_os_vadd", device=dev, register=False)
            assert k.backend == "cuda" and k.ordinal == 1, (k.backend, k.ordinal)
            x, y = u32(n, np.arange(n), "cuda:1"), u32(n, 5 * np.arange(n), "cuda:1")
            z = u32(n, None, "cuda:1")
            assert x.ordinal == 1 and x.__dlpack_device__() == (2, 1)
            k(2, 64, (x, y, z, np.uint32(n)))
            assert (z.host == 6 * np.arange(n)).all()
            # numpy arguments travel through buffers on the kernel's device
            za = np.zeros(n, np.uint32)
            k(2, 64, (np.arange(n, dtype=np.uint32), y, za, np.uint32(n)))
            assert (za == 6 * np.arange(n)).all()
            print("other", refused(rk.InvalidArgumentError,
                  lambda: k(1, 32, (u32(n, np.arange(n)), y, z, np.uint32(n))),
                  "buffer 0 is on CUDA device 0, the kernel runs on device 1"))
        g = rk.gpu_kernel(src, name="rk_os_vadd", device=1)
        assert g.ordinal == 1
        print("ok")
    """, tmp_path=tmp_path)
    assert "nodev RK_ENODEV" in out, out
    assert "one device: device 1 skipped" in out or out.count("other RK_EINVAL") == 2, out


def test_device_spellings_are_checked_here():
    for bad in (-1, "cuda:", "cuda:x", "gpu", True, 1.0):
        with pytest.raises(rk.InvalidConfigurationError, match="device must be"):
            rk.RawKernel(None, "bad_dev", host=lambda: None, device=bad, register=False)
    with pytest.raises(rk.InvalidConfigurationError, match="device must be"):
        rk.kernel(source="x", name="bad_dev", device=-2)
    with pytest.raises(rk.InvalidArgumentError, match="cuda:N"):
        rk.UnifiedBuffer(4, np.float32, "cuda:one")
    # the cpu backend runs on no CUDA device
    k = rk.RawKernel(None, "on_cpu", host=lambda *a: None, device="cpu", register=False)
    assert k.ordinal == -1


class FakeCuda:
    """A CUDA array as another library's (an address: never read here)."""

    def __init__(self):
        self.__cuda_array_interface__ = {"data": (0x1000, False), "shape": (4,),
                                         "typestr": "<u4", "strides": None, "version": 3}


def test_cuda_array_on_the_cpu_backend_is_refused():
    seen = []
    k = rk.RawKernel(None, "host_only", host=lambda *a: seen.append(a), device="cpu",
                     register=False)
    with pytest.raises(rk.InvalidArgumentError, match="argument 1 .*runs on the cpu backend"):
        k(1, 1, (np.uint32(1), FakeCuda()))
    assert seen == []


class HostDL:
    """A host array exported through DLPack only (kDLCPU)."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)


def test_host_dlpack_array_goes_to_the_host_fallback_as_it_is():
    seen = []
    k = rk.RawKernel(None, "host_dl", host=lambda a: seen.append(a), device="cpu",
                     register=False)
    h = HostDL(np.arange(4, dtype=np.uint32))
    k(1, 1, (h,))
    assert seen == [h]


def test_foreign_cuda_arrays_without_a_copy(tmp_path):
    out = child("""
        k = rk.RawKernel(src, "rk_os_vadd", register=False)
        n = 256
        x, y, z = u32(n, np.arange(n)), u32(n, 10 * np.arange(n)), u32(n, np.zeros(n))
        before = x.stats["h2d_transfers"]
        # the CUDA Array Interface (v3; a stream of None, then the legacy one)
        k(2, 64, (CAI(x), CAI(y, stream=1), CAI(z), np.uint32(n)))
        z.mark_device_dirty()  # written in place, on the device
        assert (z.host == 11 * np.arange(n)).all()
        assert x.stats["h2d_transfers"] == before  # no copy of the argument
        # v2 (no stream key)
        cai2 = CAI(z); del cai2.__cuda_array_interface__["stream"]
        cai2.__cuda_array_interface__["version"] = 2
        k(2, 64, (CAI(x), CAI(x), cai2, np.uint32(n)))
        z.mark_device_dirty()
        assert (z.host == 2 * np.arange(n)).all()
        # DLPack (a real capsule, consumed; its deleter runs when done)
        dz = DL(z)
        k(2, 64, (DL(x), DL(y), dz, np.uint32(n)))
        assert dz.stream == 1  # the producer was asked to order its work
        z.mark_device_dirty()
        assert (z.host == 11 * np.arange(n)).all()
        gc.collect()
        for b in (x, y, z):
            b._b.free()  # BusyError if a consumer still held it
        print("freed")
        x, y, z = u32(n, np.arange(n)), u32(n, np.arange(n)), u32(n)
        E, NS = rk.InvalidArgumentError, rk.NotSupportedError
        print("wrongdev", refused(E, lambda: k(1, 32, (DL(x, (2, 1)), y, z, np.uint32(n))),
              "argument 0 (DL) is on CUDA device 1, the kernel runs on device 0"))
        print("rocm", refused(NS, lambda: k(1, 32, (x, DL(y, (10, 0)), z, np.uint32(n))),
              "argument 1 (DL)", "kDLROCM"))
        print("strided", refused(E, lambda: k(1, 32, (CAI(x, strides=(8,), shape=(n // 2,)),
              y, z, np.uint32(n))), "not C-contiguous"))
        print("empty", refused(E, lambda: k(1, 32, (CAI(x, shape=(0,)), y, z, 0)),
              "is empty"))
        print("v1", refused(NS, lambda: k(1, 32, (CAI(x, version=1), y, z, 0)), "version 1"))
        print("mask", refused(NS, lambda: k(1, 32, (CAI(x, mask=CAI(y)), y, z, 0)), "masked"))
        print("stream0", refused(E, lambda: k(1, 32, (CAI(x, stream=0), y, z, 0)),
              "stream 0"))
        # a host array through DLPack: as numpy (copied back after)
        class HostDL:
            def __init__(self, a): self.a = a
            def __dlpack_device__(self): return (1, 0)
            def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)
        ha = np.zeros(n, np.uint32)
        k(2, 64, (x, y, HostDL(ha), np.uint32(n)))
        assert (ha == 2 * np.arange(n)).all()
        # a started launch keeps the array alive after the caller dropped it
        c = CAI(z); alive = weakref.ref(c)
        launch = k.start(2, 64, (x, y, c, np.uint32(n)))
        del c
        gc.collect()
        assert alive() is not None
        launch.wait(60)
        del launch
        gc.collect()
        assert alive() is None
        print("ok")
    """, tmp_path=tmp_path)
    assert "freed" in out, out
    for want in ("wrongdev RK_EINVAL", "rocm RK_ENOTSUP", "strided RK_EINVAL",
                 "empty RK_EINVAL", "v1 RK_ENOTSUP", "mask RK_ENOTSUP", "stream0 RK_EINVAL"):
        assert want in out, (want, out)


def test_foreign_array_of_another_device(tmp_path):
    out = child("""
        if not has_device1():
            print("one device: skipped"); print("ok"); raise SystemExit(0)
        k = rk.RawKernel(src, "rk_os_vadd", device=1, register=False)
        n = 64
        x1, z1 = u32(n, np.arange(n), "cuda:1"), u32(n, None, "cuda:1")
        k(1, 64, (CAI(x1), DL(x1), DL(z1), np.uint32(n)))  # device 1's: fine
        z1.mark_device_dirty()
        assert (z1.host == 2 * np.arange(n)).all()
        x0 = u32(n, np.arange(n))
        print("dl0", refused(rk.InvalidArgumentError, lambda: k(1, 64, (DL(x0), x1, z1, n)),
              "is on CUDA device 0, the kernel runs on device 1"))
        # the CUDA Array Interface names no device: where the driver can
        # say whose memory it is (a GPU), the wrong one is refused
        if REAL:
            print("cai0", refused(rk.InvalidArgumentError,
                  lambda: k(1, 64, (CAI(x0), x1, z1, n)), "of CUDA device 0, not of device 1"))
        print("ok")
    """, tmp_path=tmp_path)
    assert "one device: skipped" in out or "dl0 RK_EINVAL" in out, out


def test_managed_buffers(tmp_path):
    out = child("""
        q = fake("fake_cuda_managed_query")
        dev = ctypes.c_int(-2)
        n = 128
        m = rk.UnifiedBuffer((n,), np.uint32, "cuda", managed=True)
        assert m.is_managed and m.state == rk.BufferState.UNINITIALIZED
        m.prefetch("device")  # allocates, zeroed, and moves the pages
        assert m.state == rk.BufferState.SYNCHRONIZED and (m.host == 0).all()
        if q is not None:
            before = q(1, ctypes.byref(dev))
            assert dev.value == 0, dev.value
        m.prefetch("host")
        if q is not None:
            assert q(1, ctypes.byref(dev)) == before + 1 and dev.value == -1
        m.advise("read_mostly")
        m.advise("preferred_location", "host")
        if q is not None:
            assert q(2, ctypes.byref(dev)) == 3 and dev.value == -1
        m.advise("unset_preferred_location")
        # a kernel writes it in place: no copy either way
        k = rk.RawKernel(src, "rk_os_vadd", register=False)
        x = u32(n, np.arange(n))
        k(1, 64, (x, x, m, np.uint32(n)))
        assert m.state == rk.BufferState.SYNCHRONIZED
        assert (m.host == 2 * np.arange(n)).all()
        assert m.stats["h2d_transfers"] == 0 and m.stats["d2h_transfers"] == 0
        E = rk.InvalidArgumentError
        print("side", refused(E, lambda: m.prefetch("gpu"), "'device' or 'host'"))
        print("advice", refused(E, lambda: m.advise("bogus"), "read_mostly"))
        print("plain", refused(E, lambda: x.prefetch(), "is not managed"))
        # pinned reaches C: a managed buffer cannot also be pinned
        print("pinman", refused(E, lambda: rk.UnifiedBuffer(4, np.float32, "cuda",
                                                            managed=True, pinned=True),
                                "RK_BUFFER_PINNED"))
        # more than the device has free: refused before the driver is asked
        print("big", refused(rk.OutOfMemoryError,
              lambda: rk.UnifiedBuffer((1 << 40,), np.uint8, "cuda", managed=True),
              "bytes of managed memory asked for", "free"))
        if q is not None:
            assert q(0, ctypes.byref(dev)) == 0  # never oversubscribed
        # on the CPU device a managed buffer is one host allocation
        c = rk.UnifiedBuffer(4, np.float32, "cpu", managed=True)
        c.prefetch(); c.advise("accessed_by")
        assert c.state == rk.BufferState.SYNCHRONIZED
        print("ok")
    """, tmp_path=tmp_path)
    for want in ("side RK_EINVAL", "advice RK_EINVAL", "plain RK_EINVAL", "pinman RK_EINVAL",
                 "big RK_ENOMEM"):
        assert want in out, (want, out)


DEVICE_ACTOR = """
    def actor(kid, device):  # test_kernels.cu's rk_echo: each message back
        @rk.ring_kernel(kernel_id=kid, backend="cuda", device_source=open(sys.argv[2]).read(),
                        device_entry="rk_echo", block_size=32, max_payload=128,
                        device=device)
        def f(ctx):
            pass
        return f
"""


def test_device_actor_on_a_chosen_device(tmp_path):
    out = child(DEVICE_ACTOR, """
        actor("dev_far", 9)
        with rk.RingKernelRuntime() as rt:
            print("far", refused(rk.NoDeviceError, lambda: rt.launch("dev_far"),
                  "'dev_far' names CUDA device 9", "device(s)"))
        if not has_device1():
            print("one device: skipped"); print("ok"); raise SystemExit(0)
        actor("dev_one", 1)
        grids_on = fake("fake_cuda_grids_on")
        with rk.RingKernelRuntime() as rt:
            rt.launch("dev_one")
            rt.activate("dev_one")
            if grids_on is not None:
                assert grids_on(1) == 1 and grids_on(0) == 0, (grids_on(0), grids_on(1))
            for i in range(20):
                rt.send("dev_one", b"hop%d" % i, type_id=9)
                assert rt.receive("dev_one", timeout=60) == b"hop%d" % i
            rt.terminate("dev_one", timeout=30)
        print("ok")
    """, tmp_path=tmp_path)
    assert "far RK_ENODEV" in out, out


def test_device_actors_meet_at_a_named_barrier(tmp_path):
    out = child(f"""
        bar = open({str(BAR_SRC)!r}).read()
        for kid, entry in (("bar_a", "rk_bar_a"), ("bar_b", "rk_bar_b")):
            rk.ring_kernel(kernel_id=kid, backend="cuda", device_source=bar,
                           device_entry=entry, block_size=32, max_payload=64,
                           device_barrier="ab", device_barrier_parties=2)(lambda ctx: None)
        with rk.RingKernelRuntime() as rt:
            for kid in ("bar_a", "bar_b"):
                rt.launch(kid)
                rt.activate(kid)
            for r in range(1, 31):
                for kid in (("bar_a", "bar_b") if r % 2 else ("bar_b", "bar_a")):
                    rt.send(kid, r.to_bytes(4, "little"), type_id=1)
                for kid in ("bar_a", "bar_b"):  # what the other wrote this round
                    assert int.from_bytes(rt.receive(kid, timeout=60), "little") == r
            for kid in ("bar_a", "bar_b"):
                rt.terminate(kid, timeout=30)
        print("rounds done")
        print("ok")
    """, tmp_path=tmp_path)
    assert "rounds done" in out, out


def test_ring_kernel_device_settings_are_checked():
    src = "RK_DEV_KERNEL(x, h)\n"
    E = rk.InvalidConfigurationError
    for kw, want in ((dict(device=-1), "device must be"), (dict(device="1"), "device must be"),
                     (dict(device_barrier="ab"), "needs device_barrier_parties"),
                     (dict(device_barrier="ab", device_barrier_parties=0),
                      "needs device_barrier_parties"),
                     (dict(device_barrier_parties=2), "without device_barrier"),
                     (dict(device_barrier="", device_barrier_parties=2), "non-empty name")):
        with pytest.raises(E, match=want):
            rk.ring_kernel(kernel_id="bad_cfg", device_source=src, auto_register=False,
                           **kw)(lambda ctx: None)
    with pytest.raises(E, match="waited at by device code"):
        rk.ring_kernel(kernel_id="bad_cfg", device_barrier="ab", device_barrier_parties=2,
                       auto_register=False)(lambda ctx: None)
    f = rk.ring_kernel(kernel_id="dev_ok", device_source=src, device=1,
                       device_barrier="ab", device_barrier_parties=2,
                       auto_register=False)(lambda ctx: None)
    spec = f._ring_kernel_meta["spec"]
    assert (spec.device, spec.device_barrier, spec.device_barrier_parties) == (1, "ab", 2)


@pytest.mark.skipif(os.environ.get("RK_TEST_CUDA_REAL") != "1",
                    reason="numba-cuda's device arrays need a GPU and its real driver "
                           "(numba.cuda.device_array cannot be made under the stand-in)")
def test_numba_device_array_is_an_argument(tmp_path):
    pytest.importorskip("numba.cuda")
    child("""
        from numba import cuda
        k = rk.RawKernel(src, "rk_os_vadd", register=False)
        n = 1000
        x = cuda.to_device(np.arange(n, dtype=np.uint32))
        z = cuda.device_array(n, np.uint32)
        k(4, 64, (x, x, z, np.uint32(n)))
        assert (z.copy_to_host() == 2 * np.arange(n)).all()
        print("ok")
    """, tmp_path=tmp_path)
