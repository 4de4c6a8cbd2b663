"""The executed tutorials, kept once: written by whoever runs a notebook first, reused by the other.

``tests/test_notebooks.py`` and the site build (``docs/hooks.py``) both execute every notebook in
``notebooks/`` with ``JAXSHAP_NOTEBOOK_QUICK=1``. CI runs both, so each notebook would run twice.
Whichever runs first stores the executed notebook in ``.cache/docs-notebooks/notebooks/``, stamped
with a fingerprint of everything its outputs depend on in this checkout: the notebook file, every
file of the ``jaxshap`` package, and the quick flag. The other reuses a stored copy only when its
fingerprint equals the current one; after any change to the package or the notebook, it executes
the notebook again. An execution that raised stores nothing.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "docs-notebooks" / "notebooks"
STAMP = "jaxshap_fingerprint"


def fingerprint(path: Path, quick: bool) -> str:
    """SHA-256 over the notebook's bytes, every file under ``jaxshap/`` (path and bytes) and ``quick``."""
    digest = hashlib.sha256(f"quick={quick}\n".encode())
    digest.update(Path(path).read_bytes())
    package = ROOT / "jaxshap"
    for file in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(file.relative_to(ROOT)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def kernel_environment(quick: bool) -> dict:
    """The variables a notebook kernel runs under: this interpreter first on ``PATH`` (the python3
    kernelspec runs ``python``), this checkout first on ``PYTHONPATH``, Jupyter's inline plot
    backend (each figure rendered to PNG and closed when its cell ends), and the quick flag."""
    env = {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        # shap imports tqdm.auto, which warns in a kernel without ipywidgets; the pages would
        # show that warning, with this machine's paths, under every `import shap`
        "PYTHONWARNINGS": "ignore:IProgress not found",
    }
    if quick:
        env["JAXSHAP_NOTEBOOK_QUICK"] = "1"
    return env


def stored(path: Path, quick: bool):
    """The stored executed copy of the notebook at ``path`` if it is current, else ``None``."""
    import nbformat

    out = CACHE / Path(path).name
    if not out.exists():
        return None
    nb = nbformat.read(out, as_version=4)
    return nb if nb.metadata.get(STAMP) == fingerprint(path, quick) else None


def execute(path: Path, quick: bool, timeout: int = 600):
    """Execute the notebook at ``path`` in a fresh python3 kernel (working directory: its folder)
    and store the result; a cell that raises raises ``CellExecutionError`` naming the cell.

    The caller sets :func:`kernel_environment` in ``os.environ`` first (the kernel inherits it).
    """
    import nbclient
    import nbformat

    stamp = fingerprint(path, quick)  # before running: a file edited meanwhile makes the copy stale
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=timeout,
                                     resources={"metadata": {"path": str(Path(path).parent)}})
    client.execute()
    nb.metadata[STAMP] = stamp
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = CACHE / f".{Path(path).name}.{os.getpid()}"
    nbformat.write(nb, tmp)
    tmp.replace(CACHE / Path(path).name)  # atomic: a reader never sees half a notebook
    return nb
