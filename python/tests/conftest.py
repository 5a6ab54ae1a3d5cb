"""Shared fixtures: the C kernel library (compiled here, as a user would,
against the installed package's headers and libringkernel)."""

import os
import subprocess
from pathlib import Path

import pytest

import ringkernel

HERE = Path(__file__).parent


def build_ckernels(out_dir: Path) -> Path:
    lib = ringkernel.get_library()
    out = out_dir / "libckernels.so"
    subprocess.run(
        [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2", "-std=c11",
         "-I", ringkernel.get_include(), str(HERE / "ckernels" / "ckernels.c"),
         lib, f"-Wl,-rpath,{os.path.dirname(lib)}", "-o", str(out)],
        check=True)
    return out


@pytest.fixture(scope="session")
def c_kernels(tmp_path_factory):
    """Loads the C kernels c_echo, c_sink and c_add; runtimes created
    afterwards can launch them."""
    path = build_ckernels(tmp_path_factory.mktemp("ckernels"))
    ringkernel.load_library(str(path))
    return path
