"""Execute every tutorial in notebooks/ top to bottom; any cell that raises fails the test.

The notebooks are committed without outputs. They run in a fresh python3 kernel whose working
directory is notebooks/ and whose PYTHONPATH starts with the repository root, so they import
this checkout of jaxshap; plots go to the inline backend, as in Jupyter (each figure is
rendered to PNG and closed at the end of its cell, also when CI exports MPLBACKEND=Agg).
The executed notebooks are stored for the site build (``docs/executed_notebooks.py``), which
then does not run them again; a notebook the site build already ran on the same notebook and
package is checked here from its stored, executed copy: every code cell ran, none raised.
"""

import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import executed_notebooks as executed  # noqa: E402

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
    nb = executed.stored(path, quick=True)
    if nb is None:
        for name, value in executed.kernel_environment(quick=True).items():
            monkeypatch.setenv(name, value)
        nb = executed.execute(path, quick=True, timeout=300)  # raises CellExecutionError naming the cell
    source = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code] == [c.source for c in source.cells if c.cell_type == "code"]
    for cell in code:
        assert cell.execution_count is not None or not cell.source.strip(), f"{path.name}: a cell did not run"
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: {errors[0].ename}: {errors[0].evalue}"
