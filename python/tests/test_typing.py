"""Typed use: the installed package is typed (py.typed, the _core stub),
@message classes are dataclasses for the checker (dataclass_transform),
TypedMessage gives the envelope types, UnifiedBuffer is generic in its
scalar type, at run time and for mypy.

The mypy checks run `mypy --strict` on small programs outside the source
tree, so ringkernel is the installed copy (what a user's checker sees),
and expect both: the good program passes, and each bad line is an error
on that line (were a type lost, to Any, those errors would vanish).
"""

import dataclasses
import os
import textwrap
import typing
from pathlib import Path

import numpy as np
import pytest

import ringkernel as rk
from ringkernel import TypedMessage, UnifiedBuffer

if os.environ.get("RK_REQUIRE_JUPYTER"):  # make pytest: missing is a failure
    from mypy import api as mypy_api
else:
    mypy_api = pytest.importorskip("mypy.api")


def test_package_ships_its_type_information():
    here = Path(rk.__file__).parent
    assert (here / "py.typed").is_file()
    assert (here / "_core.pyi").is_file()


def test_unified_buffer_is_generic_at_run_time():
    alias = UnifiedBuffer[np.float32]
    assert typing.get_origin(alias) is UnifiedBuffer
    assert typing.get_args(alias) == (np.float32,)
    b = alias((4,), np.float32)  # the alias instantiates
    assert isinstance(b, UnifiedBuffer) and b.dtype == np.float32
    b.allocate()  # PyDotCompute's buffers start unallocated
    b.host[:] = [1, 2, 3, 4]
    assert b.host_readonly.sum() == 10

    def f(x: "UnifiedBuffer[np.int32]") -> "UnifiedBuffer[np.int32]":
        return x

    hints = typing.get_type_hints(f)
    assert typing.get_args(hints["x"]) == (np.int32,)


def test_typed_message_is_a_message_with_its_envelope():
    @rk.message
    class TPing(TypedMessage):
        n: int

    p = TPing(n=3)
    assert dataclasses.is_dataclass(p)
    assert [f.name for f in dataclasses.fields(p)] == ["n", "message_id", "priority", "correlation_id"]
    q = TPing.deserialize(p.serialize())
    assert q.n == 3 and q.message_id == p.message_id
    assert p.reply(n=4).correlation_id == p.message_id


GOOD = """
    import uuid
    from typing import Any, Callable, Optional

    import numpy as np
    import numpy.typing as npt
    from typing_extensions import assert_type

    import ringkernel as rk
    from ringkernel import TypedMessage, UnifiedBuffer, message


    @message
    class Ping(TypedMessage):
        n: int
        label: str = "x"


    @message(type_id=7)
    class Plain:
        x: float


    p = Ping(n=1)
    assert_type(p.n, int)
    assert_type(p.message_id, uuid.UUID)
    assert_type(p.correlation_id, Optional[uuid.UUID])
    assert_type(p.reply(n=2), Ping)
    assert_type(p.reply(response_class=Plain, x=1.0), Plain)
    assert_type(Ping.deserialize(p.serialize()), Ping)
    assert_type(Plain(x=1.0).x, float)

    buf = UnifiedBuffer((4,), np.float32)
    assert_type(buf, UnifiedBuffer[np.float32])
    assert_type(UnifiedBuffer(4), UnifiedBuffer[np.float32])
    assert_type(UnifiedBuffer((2, 2), np.int64), UnifiedBuffer[np.int64])
    host: npt.NDArray[np.float32] = buf.host
    assert_type(buf.allocate(), UnifiedBuffer[np.float32])
    written: npt.NDArray[np.float32] = buf.zeros().host_write
    assert_type(buf.dtype, np.dtype[np.float32])


    @rk.ring_kernel(kernel_id="typed_k", input_type=Ping)
    def k(ctx: rk.KernelContext) -> None:
        m: Ping = ctx.receive()


    kk: Callable[[rk.KernelContext], None] = k  # the decorator keeps the signature


    async def use(rt: rk.RingKernelRuntime) -> None:
        await rt.launch("typed_k")
        assert_type(rt.get_kernel_state("typed_k"), rk.KernelState)


    def oneshots(src: str) -> None:
        assert_type(rk.kernel(src, name="vadd"), rk.RawKernel)

        @rk.kernel(source=src)
        def vadd(x: UnifiedBuffer[np.float32]) -> None: ...

        assert_type(vadd, rk.RawKernel)
        assert_type(vadd.start(1, 32, (buf, np.uint32(4))), rk.KernelLaunch)
        assert_type(vadd(1, 32, (buf,)), None)
"""

BAD = """
    import numpy as np

    import ringkernel as rk
    from ringkernel import TypedMessage, UnifiedBuffer, message


    @message
    class Ping(TypedMessage):
        n: int


    def wants_f32(b: UnifiedBuffer[np.float32]) -> None: ...


    Ping(n="one")  # E1
    Ping(m=1)  # E2
    Ping(n=1).nope  # E3
    wants_f32(UnifiedBuffer((4,), np.int32))  # E4
    Ping(n=1).reply(n=2).message_id + 1  # E5
    rk.kernel("RK_DEV_ONESHOT(v, v)")  # E6
"""


def run_mypy(tmp_path, name, source):
    f = tmp_path / name
    f.write_text(textwrap.dedent(source))
    cfg = tmp_path / "mypy.ini"
    cfg.write_text("[mypy]\n")
    out, err, status = mypy_api.run([
        "--strict", "--config-file", str(cfg), "--cache-dir", str(tmp_path / "cache"),
        "--no-error-summary", "--show-error-codes", str(f)])
    return out + err, status


def test_mypy_strict_accepts_typed_use(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # away from the source tree: the installed package
    out, status = run_mypy(tmp_path, "good.py", GOOD)
    assert status == 0, out


def test_mypy_strict_rejects_mistyped_use(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out, status = run_mypy(tmp_path, "bad.py", BAD)
    assert status == 1, out
    src = textwrap.dedent(BAD).splitlines()
    for tag, code in (("E1", "arg-type"), ("E2", "call-arg"), ("E3", "attr-defined"),
                      ("E4", "arg-type"), ("E5", "operator"), ("E6", "call-overload")):
        line = next(i for i, s in enumerate(src, 1) if s.endswith(f"# {tag}"))
        assert f"bad.py:{line}: error:" in out and f"[{code}]" in out, (tag, out)
    assert out.count(": error:") == 6, out


ROOT = Path(__file__).resolve().parents[2]


def test_typed_quickstart_runs():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "typed_quickstart.py")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Result: 6.0\n"


def test_package_examples_and_notebooks_pass_mypy_strict(tmp_path, monkeypatch):
    """What `make mypy` checks (also in CI): the package's sources, the
    typed example and the notebooks' code cells, with the repository's
    [tool.mypy] configuration."""
    import subprocess
    import sys

    nbdir = tmp_path / "nbcheck"
    notebooks = sorted(str(p) for p in (ROOT / "examples" / "notebooks").glob("*.ipynb"))
    subprocess.run([sys.executable, str(ROOT / "tools" / "nb2py.py"), str(nbdir), *notebooks],
                   check=True)
    assert len(list(nbdir.glob("*.py"))) == len(notebooks) == 3
    monkeypatch.chdir(ROOT)
    out, err, status = mypy_api.run([
        "--strict", "--config-file", str(ROOT / "pyproject.toml"),
        "--cache-dir", str(tmp_path / "cache"), "python/ringkernel",
        "examples/python/typed_quickstart.py", str(nbdir)])
    assert status == 0, out + err
    assert "Success: no issues found in" in out
