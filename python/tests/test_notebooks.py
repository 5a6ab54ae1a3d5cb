"""The example notebooks (examples/notebooks/*.ipynb) run for real: each is
executed headless, cell by cell, in a real Jupyter kernel (nbclient and
ipykernel; the build venv's "ringkernel" kernel spec from tools/pyvenv.sh,
whose python has this checkout's package installed). A cell that raises
fails the test; the notebooks check their own results (numpy references)
with asserts. Also checks that each one displayed the live dashboard
widget."""

import os
import sys
from pathlib import Path

import pytest

if os.environ.get("RK_REQUIRE_JUPYTER"):  # make pytest: missing is a failure
    import nbclient
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
else:
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    KernelSpecManager = pytest.importorskip("jupyter_client.kernelspec").KernelSpecManager

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "examples" / "notebooks").glob("*.ipynb"))
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def kernel_name():
    specs = KernelSpecManager().find_kernel_specs()
    if "ringkernel" in specs:  # tools/pyvenv.sh installs it into the venv
        return "ringkernel"
    if os.environ.get("RK_REQUIRE_JUPYTER"):
        pytest.fail(f"no 'ringkernel' kernel spec for {sys.prefix} (tools/pyvenv.sh installs it)")
    return "python3"  # ipykernel's own spec: this interpreter


def test_the_three_notebooks_are_there():
    assert [p.name for p in NOTEBOOKS] == [
        "graph_analytics.ipynb", "streaming_pipeline.ipynb", "vector_processing.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_headless(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name=kernel_name(), timeout=300, allow_errors=False,
        resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # CellExecutionError (the cell's traceback) if one raised
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any(WIDGET_MIME in o.get("data", {}) for o in outputs), \
        "the notebook did not display the telemetry dashboard"
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "Traceback" not in text, text
