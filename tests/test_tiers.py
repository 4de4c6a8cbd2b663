"""The fast tier (the README's test command) still checks every public name: each name of
``jaxshap`` and ``jaxshap.maskers`` is used by a test outside ``tests/slow_tests.txt``, in the
test's own body or in a module-level helper it calls (read with ``ast``; nothing is run)."""

from __future__ import annotations

import ast
import pathlib
import re

import jaxshap
import jaxshap.maskers

from conftest import _slow_entries

TESTS = pathlib.Path(__file__).parent


def _fast_sources() -> list[str]:
    """The source of each fast test function, with the module-level helpers it names appended."""
    entries = _slow_entries()
    files = tuple(e for e in entries if "::" not in e)
    slow_full = {e for e in entries if "::" in e}
    out = []
    for path in sorted(TESTS.rglob("test_*.py")):
        rel = path.relative_to(TESTS.parent).as_posix()
        if rel.startswith(files):
            continue
        text = path.read_text()
        tree = ast.parse(text)
        helpers = {n.name: ast.get_source_segment(text, n) for n in tree.body
                   if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("test")}
        for node in tree.body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test")):
                continue
            nodeid = f"{rel}::{node.name}"
            cases = [e for e in slow_full if e.startswith(nodeid + "[")]
            if nodeid in slow_full or (cases and _all_params_slow(node, cases)):
                continue
            body = ast.get_source_segment(text, node)
            used = [src for name, src in helpers.items() if re.search(rf"\b{name}\b", body)]
            out.append("\n".join([body, *used]))
    return out


def _all_params_slow(node: ast.FunctionDef, params: list[str]) -> bool:
    """Whether every case of a parametrised test is listed slow (its case count read from the
    ``parametrize`` decorators with literal lists; unknown counts are taken as all slow)."""
    count = 1
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize" and len(dec.args) >= 2:
            values = dec.args[1]
            if not isinstance(values, (ast.List, ast.Tuple)):
                return True
            count *= len(values.elts)
    return len(params) >= count


RETURNED_BY = {"ALE": "accumulated_local_effects", "FunctionalANOVA": "functional_anova", "HStatistics": "h_statistic",
               "PartialDependence": "partial_dependence"}
"""Result classes, checked through the function that returns them."""


def test_every_public_name_is_used_by_a_fast_test():
    sources = _fast_sources()
    assert len(sources) > 300  # the fast tier is most of the suite's tests
    missing = []
    for package in (jaxshap, jaxshap.maskers):
        for name in package.__all__:
            used = RETURNED_BY.get(name, name)
            if not any(re.search(rf"\b{re.escape(used)}\b", src) for src in sources):
                missing.append(f"{package.__name__}.{name}")
    assert missing == [], f"public names no fast test uses: {missing}"
