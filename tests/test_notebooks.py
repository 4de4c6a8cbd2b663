"""Execute every tutorial in notebooks/ top to bottom; any cell that raises fails the test.

The notebooks are committed without outputs. They run in a fresh python3 kernel whose working
directory is notebooks/ and whose PYTHONPATH starts with the repository root, so they import
this checkout of jaxshap; plots go to the inline backend, as in Jupyter (each figure is
rendered to PNG and closed at the end of its cell, also when CI exports MPLBACKEND=Agg).
"""

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    assert len(NOTEBOOKS) >= 5, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: commit without outputs"
            assert "execution" not in cell.metadata, f"{path.name}: commit without execution timings"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    # the python3 kernelspec runs `python` from PATH: make that the interpreter running the tests
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    # the backend Jupyter uses: renders each figure to PNG and closes it when its cell ends
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("JAXSHAP_NOTEBOOK_QUICK", "1")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, on the first error
