"""Public names imported on first use (PEP 562), so that ``import jaxshap`` costs next to nothing.

A package's ``__init__`` writes its public imports once, under ``if TYPE_CHECKING:`` (where
type checkers, IDEs and the documentation read them); :func:`lazy_exports` reads those lines and
imports a name's module when the name is first read (``jaxshap.TreeExplainer``, ``from jaxshap
import kmeans``), keeping the value on the package so that later reads are plain attribute reads.
``import jaxshap`` imports neither JAX nor an explainer, and a job pays only for the parts it
touches: a tree explanation never imports the learned maskers, optax or the plots.
"""

from __future__ import annotations

import ast
import importlib
from typing import Any, Callable


def _typing_imports(path: str) -> dict[str, str]:
    """``{name: module}`` of the ``from M import a, b`` lines under the module's top-level
    ``if TYPE_CHECKING:`` (``module`` ``""`` for ``from . import sub``: a submodule)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for line in node.body:
                if isinstance(line, ast.ImportFrom):
                    module = "." * line.level + (line.module or "")
                    for alias in line.names:
                        names[alias.asname or alias.name] = "" if module == "." else module
    return names


def lazy_exports(package: str, path: str, namespace: dict) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for the package ``package`` whose ``__init__`` is at ``path``.

    Args:
      package: the package's ``__name__``.
      path: its ``__file__``; the public names are the imports under its ``if TYPE_CHECKING:``.
      namespace: the package's ``globals()``, where each value is kept once imported.
    """
    names = _typing_imports(path)

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = names[name]
        value = importlib.import_module(f".{name}" if where == "" else where, package)
        if where != "":
            value = getattr(value, name)
        namespace[name] = value
        return value

    def __dir__() -> list:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
