"""The package's layers: every import inside ``jaxshap`` points down, never up or sideways.

The layer map is the one written in the README's *Layout* section. A module may import modules
of its own folder and of any folder on a lower layer; two folders on the same layer may not
import each other. The test reads the source with ``ast`` (nothing is imported), so an import
that only runs inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "jaxshap"

# folder (or top-level module) -> layer; lower layers know nothing of higher ones.
LAYERS = {
    "_lazy": 0,         # public names imported on first use (PEP 562)
    "_core": 1,         # the host platform (environment settings, BLAS threads, LAPACK order, program caches), pytree split,
                        # inputs, device rows, validation, chunking and progress, model adapters
    "datasets": 1,      # data shipped with the package
    "_coalitions": 2,   # combinatorics, masks, permutations, Shapley-kernel samplers, feature hierarchies
    "_estimators": 3,   # estimator kernels on a game v(masks), the Gaussian conditioning algebra, learned models' pieces
    "_tree": 4,         # tree ensembles: readers, path tables, TreeSHAP kernels (the interaction indices of _estimators)
    "maskers": 4,       # value functions
    "_result": 5,       # Explanation and its cohorts
    "_engine": 6,       # the explainer engine: base classes (with the links), the compiled block program, shap's calls
    "_explainers": 7,   # the explainers
    "_effects": 7,      # partial dependence, H statistics, functional ANOVA, ALE, MSEv
    "plots": 8,         # the public surface
    "coalitions": 8,
    "estimators": 8,
    "explainers": 8,
    "trees": 8,
    "links": 8,
    "__main__": 9,
    "__init__": 9,
}


def _unit(module: str) -> str:
    """The layer unit of a dotted module name inside the package (``jaxshap._core._inputs`` -> ``_core``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: pathlib.Path, root: pathlib.Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` for every import of a ``jaxshap`` module in one source file."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    package = parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                if node.module:
                    found.append((node.lineno, ".".join(base + [node.module])))
                else:
                    found.extend((node.lineno, ".".join(base + [a.name])) for a in node.names)
            elif node.module and node.module.split(".")[0] == "jaxshap":
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "jaxshap")
    return found


def _violations(root: pathlib.Path = PACKAGE) -> list[str]:
    """Every import in the package at ``root`` that points up or sideways, or at a unit with no layer."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        source_unit = _unit(".".join(rel.parts))
        for line, target in _imports(path, root):
            target_unit = _unit(target)
            if target_unit == source_unit:
                continue
            if source_unit not in LAYERS or target_unit not in LAYERS:
                bad.append(f"{rel}:{line}: {target} (a unit missing from LAYERS)")
            elif LAYERS[target_unit] >= LAYERS[source_unit]:
                way = "sideways" if LAYERS[target_unit] == LAYERS[source_unit] else "up"
                bad.append(f"{rel}:{line}: imports {target} ({way}: {source_unit} is layer "
                           f"{LAYERS[source_unit]}, {target_unit} layer {LAYERS[target_unit]})")
    return bad


def test_every_import_points_down():
    assert _violations() == []


def test_every_unit_has_a_layer():
    units = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    assert units <= set(LAYERS), sorted(units - set(LAYERS))


@pytest.mark.parametrize("source, target, expected", [
    ("_core", "_engine", "up"), ("maskers", "_tree", "sideways"), ("_engine", "_core", None)])
def test_the_check_can_fail(tmp_path, source, target, expected):
    """The checker reports an upward and a sideways import in a planted package, and accepts a downward one."""
    root = tmp_path / "jaxshap"
    for unit in (source, target):
        (root / unit).mkdir(parents=True)
        (root / unit / "__init__.py").write_text("")
    (root / source / "_planted.py").write_text(f"from ..{target} import _nothing\nfrom . import _same\n")
    found = _violations(root)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and f"({expected}:" in found[0]


def _environment_reads(root: pathlib.Path = PACKAGE) -> list[str]:
    """``file:line`` of every ``os.environ`` / ``os.getenv`` / ``os.putenv`` in the package."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name in ("environ", "getenv", "putenv", "environb"):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_the_environment_is_read_in_one_module(tmp_path):
    """Settings from environment variables live in ``_core/_platform.py`` (and the check sees a planted read)."""
    assert {f.split(":")[0] for f in _environment_reads()} <= {"jaxshap/_core/_platform.py"}
    (tmp_path / "jaxshap").mkdir()
    (tmp_path / "jaxshap" / "_planted.py").write_text("import os\nflag = os.environ.get('X')\n")
    assert _environment_reads(tmp_path / "jaxshap") == ["jaxshap/_planted.py:2"]


def test_import_is_lazy_and_every_public_name_resolves():
    """``import jaxshap`` imports neither JAX nor an explainer; each public name of the package
    and of ``jaxshap.maskers`` (the imports under their ``if TYPE_CHECKING:``) is its ``__all__``
    and resolves on first use to the object its module defines."""
    import subprocess
    import sys

    code = ("import sys, jaxshap; assert 'jax' not in sys.modules, 'jax imported'; "
            "print(sorted(m for m in sys.modules if m.startswith('jaxshap')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['jaxshap', 'jaxshap._lazy']", out.stdout
    import jaxshap
    import jaxshap.maskers
    from jaxshap._lazy import _typing_imports

    for package in (jaxshap, jaxshap.maskers):
        names = _typing_imports(package.__file__)
        assert sorted(names) == sorted(package.__all__)
        for name in package.__all__:
            value = getattr(package, name)
            module = names[name]
            expected = importlib.import_module(f".{name}" if module == "" else module, package.__name__)
            assert value is (expected if module == "" else getattr(expected, name)), name
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError, match="has no attribute 'nope'"):
            package.nope
