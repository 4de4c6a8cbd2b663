"""Building TreeExplainer's kernels: the model's paths, their router, tables and base value.

A *build* is everything one choice of trees (``tree_limit``) and kind (exact or Saabas) needs:
the ensemble cut to those rounds is decomposed into root-to-leaf paths
(:func:`jaxshap._tree._paths.decompose`), a :class:`~jaxshap._tree._routing.Router` turns path
bounds and rows into ranks among the thresholds, and the paths are grouped by their number of
distinct features ``U``. A group is tabulated (``2**U`` patterns per path, for ``U <=``
:data:`MAX_TABLE_SLOTS` and within half of ``memory_budget``) or evaluated directly per row;
for the interventional game the background enters a table only through a histogram of its own
patterns. Builds are cached per ``(rounds, approximate)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from ..._core._validate import DEFAULT_MEMORY_BUDGET, integer
from ..._tree._ensemble import TreeEnsemble
from ..._tree._interventional import interventional_tables_host
from ..._tree._path_dependent import expected_value, path_tables_host
from ..._tree._paths import Paths, decompose, follows_host, pattern, slot_arrays
from ..._tree._routing import Router
from ._kernels import TreeRows

MAX_TABLE_SLOTS = 10
"""Groups of paths with at most this many distinct features are tabulated (``2**U`` rows per path)."""

GROUP_WIDTHS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
"""Paths are grouped by their number of distinct features ``U`` (a table has ``2**U`` rows per
path, so padding would double its size); longer paths form one group evaluated directly."""


def put(a, dtype) -> jax.Array:
    """A host array on the default device, converted on the host (no compiled conversion)."""
    return jax.device_put(np.asarray(a, dtype))


@dataclasses.dataclass
class Build:
    """Everything one (tree limit, kind) needs: the router, the groups of paths and the base."""

    ensemble: TreeEnsemble
    router: Router
    groups: list
    tabled: list
    base: np.ndarray  # [K] float64 (raw base for transformed outputs)
    fb: np.ndarray | None = None  # [B, K] background margins (transformed outputs)
    paths: Any = None  # the routed paths (for interaction values)
    background: np.ndarray | None = None  # the routed background rows (interventional)


def cover_from_data(e: TreeEnsemble, X: np.ndarray) -> TreeEnsemble:
    """The ensemble with each node's cover replaced by the number of rows of ``X`` (already
    prepared) that pass through it, counted for all trees at once, one level per step."""
    t, n = e.feature.shape
    rows = np.arange(X.shape[0])[:, None]
    node = np.zeros((X.shape[0], t), dtype=np.int64)
    trees = np.arange(t)[None, :]
    counts = np.bincount((trees * n + node).reshape(-1), minlength=t * n).astype(np.float64)
    while True:
        node, inner = e.descend(X, rows, trees, node)
        if not inner.any():
            break
        flat = (trees * n + node)[inner]
        counts += np.bincount(flat, minlength=t * n)
    return dataclasses.replace(e, cover=counts.reshape(t, n))


def routed_paths(e: TreeEnsemble, memory_budget: int, approximate: bool) -> tuple[Paths, Router]:
    """The ensemble's paths with their bounds as ranks, and the router that gives rows as ranks."""
    paths = decompose(e, max_bytes=max(memory_budget, DEFAULT_MEMORY_BUDGET), saabas=approximate)
    categorical = None
    if paths.cat is not None:
        categorical = np.zeros(e.n_features, bool)
        categorical[paths.feature[paths.cat]] = True
    router = Router.from_bounds(paths.feature, paths.lower, paths.upper, e.n_features, categorical)
    paths = dataclasses.replace(
        paths, lower=router.bounds(paths.feature, paths.lower), upper=router.bounds(paths.feature, paths.upper)
    )
    return paths, router


class TreeBuilder:
    """The builds of one explainer (see the module docstring), cached per ``(rounds, approximate)``.

    Args:
      ensemble: the model's trees (covers recounted on the background when asked for).
      background_rows: ``[B, M]`` prepared background rows, or ``None``.
      interventional: the interventional game (else path-dependent).
      transform: the output transform (``"identity"`` for the raw output).
      n_outputs: outputs of the explained output (two for a doubled binary ``predict_proba``).
      dtype: compute dtype.
      memory_budget: bytes.
    """

    def __init__(self, ensemble, background_rows, interventional, transform, n_outputs, dtype, memory_budget):
        self.ensemble, self.background_rows = ensemble, background_rows
        self.interventional, self.transform = interventional, transform
        self.n_outputs, self.dtype, self.memory_budget = n_outputs, dtype, memory_budget
        self.builds: dict = {}

    def rounds(self, tree_limit: Any) -> int | None:
        """The boosting rounds to explain: ``tree_limit``, or the model's default (``None``: all)."""
        if tree_limit is None:
            return self.ensemble.default_rounds
        tree_limit = integer(tree_limit, "tree_limit", least=1, rule="a positive number of boosting rounds")
        n = self.ensemble.n_rounds
        if tree_limit > n:
            raise ValueError(f"`tree_limit` is {tree_limit} but the model has {n} rounds; pass at most {n}.")
        return tree_limit

    def build(self, rounds: int | None, approximate: bool) -> Build:
        """The (cached) build of the first ``rounds`` rounds, Saabas' when ``approximate``."""
        key = (rounds, approximate)
        if key not in self.builds:
            self.builds[key] = self._build(rounds, approximate)
        return self.builds[key]

    def _build(self, rounds: int | None, approximate: bool) -> Build:
        e = self.ensemble.first_rounds(rounds)
        paths, router = routed_paths(e, self.memory_budget, approximate)
        k = paths.n_outputs
        transformed = self.transform != "identity"
        background = None
        if not self.interventional or approximate:
            base = expected_value(paths.zero_fraction, paths.value, paths.output, paths.base)
        else:
            background = router.encode(self.background_rows, np.float32)
            stump = paths.length == 0  # single-leaf trees: every row reaches the leaf
            base = paths.base + np.bincount(paths.output[stump], paths.value[stump], minlength=k)
        table_budget = self.memory_budget // 2
        groups, group_tabled = [], []
        for _, g in paths.by_width(GROUP_WIDTHS):
            table_bytes = g.n_paths * 2**g.n_slots * g.n_slots * self.dtype.itemsize
            tabled = g.n_slots <= MAX_TABLE_SLOTS and table_bytes <= table_budget and not approximate and not transformed
            if tabled:
                table_budget -= table_bytes
            params, reached = self._group_params(g, background, tabled, approximate, transformed)
            if reached is not None and not transformed:
                base = base + np.bincount(g.output, g.value * np.asarray(reached, np.float64), minlength=k)
            groups.append(params)
            group_tabled.append(tabled)
        fb = e.predict(self.background_rows) if transformed else None
        return Build(e, router, groups, group_tabled, np.asarray(base, np.float64), fb, paths, background)

    def _group_params(self, g: Paths, background, tabled: bool, approximate: bool, transformed: bool):
        """Arrays one group of paths needs: slot tests, scatter index, and a table or the inputs
        of the direct evaluation; with the background's reach share ``[P]`` when interventional."""
        u, k = g.n_slots, g.n_outputs
        value = put(g.value, self.dtype)
        params = {"slots": slot_arrays(g, self.dtype), "index": put(g.feature * k + g.output[:, None], np.int32)}
        if approximate:
            params["saabas"] = put(g.saabas, self.dtype)
            return params, None
        if background is None:
            if tabled:
                params["table"] = put(path_tables_host(g.zero_fraction) * g.value[:, None, None], self.dtype)
            else:
                params.update(zero_fraction=put(g.zero_fraction, self.dtype), value=value)
            return params, None
        step = max(1, self.memory_budget // max(1, 16 * g.n_paths * u))  # background rows per host chunk
        parts = [follows_host(g, background[i : i + step]) for i in range(0, background.shape[0], step)]
        reached = sum(f.all(axis=-1).sum(axis=0) for f in parts) / background.shape[0]
        if tabled:
            codes = np.concatenate([pattern(f, np) for f in parts])
            params["table"] = put(interventional_tables_host(codes, u) * g.value[:, None, None], self.dtype)
        else:
            params.update(background=jax.device_put(np.concatenate(parts)), value=value)
            if transformed:
                params["output"] = put(g.output, np.int32)
        return params, reached

    def bytes_per_row(self, build: Build) -> int:
        """Working memory of one explained row in a build's kernels."""
        per_row = 8 * self.ensemble.n_features * self.n_outputs
        for params, tabled in zip(build.groups, build.tabled):
            p, u = params["index"].shape
            if "saabas" in params:
                per_row += p * u * 3 * self.dtype.itemsize
            elif self.transform != "identity":
                k = self.ensemble.n_outputs
                per_row += p * u * 8 * k * self.dtype.itemsize + 64 * self.background_rows.shape[0] * 2**k
            else:
                per_row += p * u * (16 if tabled else 8 * (u + 2)) * self.dtype.itemsize // 4
        return max(int(per_row), 1)

    def runner(self, build: Build, approximate: bool) -> TreeRows:
        """The build's kernels as a :class:`TreeRows` (made per call: cheap, and always current
        with the build's base value)."""
        transform = "identity" if approximate else self.transform
        fb = None if transform == "identity" else put(build.fb, self.dtype)
        return TreeRows(
            build.groups, self.ensemble.n_features, build.ensemble.n_outputs, put(build.base, self.dtype), fb,
            transform, self.bytes_per_row(build), self.memory_budget,
        )
