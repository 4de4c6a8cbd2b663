"""``TreeExplainer.decompose``: the exact interventional functional decomposition of a tree ensemble.

Rows are read and routed as for SHAP values (:mod:`._explain`); the kernel is
:func:`jaxshap._tree._decomposition.chunk_components`, run over chunks of rows under
``memory_budget``; its tables are built once per ``max_order`` from the default build's routed
paths and background (:func:`jaxshap._tree._decomposition.build_tables`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import numpy as np

from ..._core._inputs import resolve_feature_names
from ..._core._validate import integer
from ..._result._decomposition import Decomposition
from ..._tree._decomposition import (
    DecompositionTables,
    build_tables,
    bytes_per_row,
    chunk_components,
)
from ._build import put

CPU_CHUNK_ROWS = 64
"""Rows per chunk on a CPU (fewer when the memory budget says so)."""


@partial(jax.jit, static_argnames=("n_columns", "n_outputs"))
def _run_chunk(groups, low, X, n_columns, n_outputs):
    comp, fx = chunk_components(groups, low, X, n_columns, n_outputs)
    return comp.T, fx.T  # rows first: each chunk is one contiguous block of the result


def _check(explainer: Any, max_order: Any) -> int | None:
    if explainer.feature_perturbation != "interventional":
        raise ValueError(
            "decompose() is the interventional decomposition: pass background rows `data` [B, M] to "
            "TreeExplainer (feature_perturbation='interventional' or 'auto')."
        )
    weights = getattr(explainer, "_background_weights", None)
    if weights is not None and not np.allclose(weights, weights[0]):
        raise ValueError(
            "decompose() averages over the background rows equally; `data` is a weighted summary. Pass the rows "
            "themselves (or jaxshap.maskers.Independent(rows, max_samples=None))."
        )
    if explainer._output.transform != "identity" or explainer._output.doubled:
        raise ValueError(
            f"decompose() decomposes the raw output (model_output='raw'); got model_output={explainer.model_output!r}."
        )
    if max_order is None:
        return None
    return integer(max_order, "max_order", least=1, rule="a positive integer (or None for every order)")


def tables(explainer: Any, max_order: int | None) -> DecompositionTables:
    """The explainer's decomposition tables for ``max_order`` (built on first use, then cached)."""
    cache = explainer.__dict__.setdefault("_decomposition_tables", {})
    build = explainer._default
    if max_order not in cache or cache[max_order][0] is not build:
        order = build.paths.n_slots if max_order is None else max_order
        cache[max_order] = build, build_tables(build.paths, build.background, order, explainer.dtype,
                                               explainer.memory_budget, build.router)
    return cache[max_order][1]


def _components(t: DecompositionTables, codes: np.ndarray, dtype, memory_budget: int) -> tuple[np.ndarray, np.ndarray]:
    """``([n, C, K], [n, K])``: the components and the raw output of routed rows, chunk by chunk."""
    n, k = codes.shape[0], t.n_outputs
    rows = max(1, min(memory_budget // bytes_per_row(t, np.dtype(dtype).itemsize), n))
    if jax.default_backend() == "cpu":
        rows = min(rows, CPU_CHUNK_ROWS)
    values = np.empty((n, t.n_columns), dtype)
    fx = np.empty((n, k), dtype)
    for start in range(0, n, rows):
        part = codes[start : start + rows]
        padded = np.concatenate([part, np.repeat(part[:1], rows - part.shape[0], axis=0)])
        comp, f = _run_chunk(t.groups, t.low, put(padded, dtype), n_columns=t.n_columns, n_outputs=k)
        values[start : start + part.shape[0]] = np.asarray(comp)[: part.shape[0]]
        fx[start : start + part.shape[0]] = np.asarray(f)[: part.shape[0]]
    return values.reshape(n, -1, k), fx + t.base.astype(dtype)


def decompose(explainer: Any, X: Any, max_order: Any = None) -> Decomposition:
    """See :meth:`jaxshap.TreeExplainer.decompose`."""
    max_order = _check(explainer, max_order)
    Xh, names = explainer._host_rows(X)
    build = explainer._default
    t = tables(explainer, max_order)
    codes = build.router.encode(explainer.ensemble.prepare(Xh), np.float32)
    values, fx = _components(t, codes, explainer.dtype, explainer.memory_budget)
    truncated = max_order is not None and max_order < build.paths.n_slots
    intercept = t.intercept.astype(explainer.dtype)
    remainder = fx - intercept - values.sum(1) if truncated else np.zeros_like(fx)
    feature_names = resolve_feature_names(explainer._names, explainer.n_features, explainer._data_names, names)
    k = t.n_outputs
    output_names = None if k == 1 else explainer._output_names or [f"Output {j}" for j in range(k)]
    return Decomposition(values, t.sets, intercept, remainder, feature_names, output_names, Xh, max_order, truncated)
