"""Explaining rows with TreeExplainer: read and route the rows, run a build's kernels, wrap; and
``TreeExplainer.decompose``, the exact interventional functional decomposition of the ensemble.

:class:`ExplainRows` is the part of :class:`~jaxshap.TreeExplainer` that explains: rows are read
on the host as the model's library reads them (:func:`jaxshap._tree._rows.host_rows`), rounded
to its precision, routed to ranks (:meth:`jaxshap._tree._rows.Router.encode`), explained by
the build's compiled kernels on the shared runtime (:class:`._tree_kernels.TreeRows`), checked
against the model's own output (the reader's :meth:`~jaxshap._tree._reader.TreeReader.raw_output`)
and wrapped in an :class:`~jaxshap.Explanation`. Interaction values of any order and index run the
same path blocks with the quadrature terms of :mod:`jaxshap._tree._quadrature`
(:func:`._tree_kernels.interaction_rows`), assembled as
:func:`jaxshap._estimators._interactions.interaction_tensor`.

The decomposition (:func:`decompose`) reads and routes rows as for SHAP values; its kernel is
:func:`jaxshap._tree._decomposition.chunk_components`, run over chunks of rows under
``memory_budget``; its tables are built once per ``max_order`` from the default build's routed
paths and background (:func:`jaxshap._tree._decomposition.build_tables`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from .._core._chunking import ProgressBar, check_batch_size, is_single_batch, total_rows, wants_progress
from .._core._inputs import align_columns, as_key, is_traced, put, resolve_feature_names
from .._core._validate import integer, interaction_order
from .._engine._explainer import drop_output_axis
from .._engine._program import row_mesh
from .._engine._shap_api import as_host64, interactions_as_values, precision
from .._estimators._interactions import INDICES
from .._result._decomposition import Decomposition
from .._result._explanation import Explanation
from .._tree._decomposition import DecompositionTables, build_tables, bytes_per_row, chunk_components
from .._tree._rows import host_rows
from ._tree_build import require_cover
from ._tree_kernels import interaction_rows
from ._tree_outputs import assert_additive


DEFAULT_INDEX = "k-SII"
"""TreeExplainer's interaction index when none is named: shap's SHAP interaction values (Lundberg et al. 2020)."""

STREAM_BATCH_ROWS = 65536
"""Default rows per batch of :meth:`TreeExplainer.explain_batches` on an array."""


def row_sharding(X: Any) -> NamedSharding | None:
    """The rows' sharding when ``X`` is a JAX array sharded along its rows over several devices."""
    if not isinstance(X, jax.Array) or is_traced(X) or row_mesh(X, None) is None:
        return None
    return NamedSharding(X.sharding.mesh, PartitionSpec(X.sharding.spec[0]))


def n_rows(X: Any) -> int | None:
    """Rows of ``X`` for the progress bar (``None`` when unknown, as for a DMatrix)."""
    if hasattr(X, "num_row"):
        return int(X.num_row())
    shape = getattr(X, "shape", None) or np.shape(X)
    return None if not shape else (1 if len(shape) == 1 else int(shape[0]))


def _array_batches(batches: Any, y: Any, batch_size: int):
    """``(batches, label batches or None, total rows)`` for an array, DataFrame or sparse matrix."""
    n = int(batches.shape[0])
    frame = hasattr(batches, "iloc")
    cut = lambda a, b: batches.iloc[a:b] if frame else batches[a:b]  # noqa: E731
    parts = (cut(a, min(a + batch_size, n)) for a in range(0, n, batch_size))
    labels = None
    if y is not None:
        yv = np.asarray(y).reshape(-1)
        if yv.shape[0] != n:
            raise ValueError(f"`y` has {yv.shape[0]} labels but `batches` has {n} rows; pass one label per row.")
        labels = (yv[a : a + batch_size] for a in range(0, n, batch_size))
    return parts, labels, n


class ExplainRows:
    """TreeExplainer's explaining methods (mixed into :class:`~jaxshap.TreeExplainer`)."""

    def _check_n_features(self, X: np.ndarray, name: str) -> None:
        if X.shape[1] > self.n_features and self._reader.width_from_rows and self._background_rows is None:
            self._widen(X.shape[1])  # a dict model names no width: features past its last split add nothing
        if X.shape[1] != self.n_features:
            raise ValueError(
                f"`{name}` has {X.shape[1]} features but the model has {self.n_features}; "
                f"pass rows with the same {self.n_features} columns, in the same order."
            )

    def _host_rows(self, X: Any) -> tuple[np.ndarray, list[str] | None]:
        """``X`` read as the model's library reads it: ``[n, M]`` float64 (NaN missing), and its column names."""
        X = align_columns(X, self._data_names, "X")
        Xh, names = host_rows(X, "X", sparse_missing=self.ensemble.sparse_missing,
                              categories=self.ensemble.categories,
                              category_values=self.ensemble.category_values)
        self._check_n_features(Xh, "X")
        return Xh, names

    def _explain(self, X, y, tree_limit, approximate, check_additivity, interactions, devices, bar, offset,
                 index=None):
        """``__call__`` on one batch; ``bar`` (or ``None``) is advanced as blocks finish."""
        order = interaction_order(interactions, self.n_features)
        if index is not None:
            if index not in INDICES:
                raise ValueError(f"`index` must be None or one of {INDICES}; got {index!r}.")
            order = order or (2 if interactions is None else 0)
        if order:
            self._check_interactions(tree_limit, approximate)
        sharding = row_sharding(X) if devices is None else None
        Xh, names = self._host_rows(X)
        rounds = self._builder.rounds(tree_limit)
        if approximate and self._output.transform != "identity":
            raise ValueError("approximate=True explains the raw output only; use model_output='raw'.")
        if approximate:
            require_cover(self.ensemble, "approximate=True (Saabas values)")
        build = self._builder.build(rounds, bool(approximate), Xh.shape[0])
        Xp = self.ensemble.prepare(Xh)
        codes = build.router.encode(Xp, np.float32)
        n = Xh.shape[0]
        yv = self._output.labels(y, n)
        runner = self._builder.runner(build, bool(approximate))
        if runner.transform != "identity":  # each row carries its label
            codes = np.concatenate([codes, yv[:, None]], axis=1)
        rows = put(codes, self.dtype)
        if sharding is not None:  # routed on the host, explained where the rows lay
            rows = jax.device_put(rows, sharding)
        if n == 0:
            phi, base = runner._empty(rows, None)
        else:
            phi, base, _ = runner._run(rows, as_key(None), offset, devices, bar, blocked=bar is not None)
        phi, base = self._output.double(phi, base)
        if check_additivity:
            expected = self._output.of_raw(self._reader.raw_output(self.model, build.ensemble, Xp), yv)
            assert_additive(phi, base, expected, float32=self.dtype == np.float32)
        single = phi.shape[-1] == 1
        if single:
            phi, base = drop_output_axis((phi, base))
        feature_names = resolve_feature_names(self._names, self.n_features, self._data_names, names)
        output_names = None if single else self._output_names or [f"Output {j}" for j in range(phi.shape[-1])]
        expl = Explanation(phi, base, put(Xh, self.dtype), None, feature_names, output_names)
        if order:
            inter = self._interaction_values(rows, order, index or DEFAULT_INDEX)  # raw output: rows are the codes
            expl.interaction_values = inter[..., 0] if single else inter
            if interactions:
                expl = interactions_as_values(expl)  # shap's layout: the interaction values are the values
        return expl

    def explain_batches(
        self,
        batches: Any,
        key: Any = None,
        *,
        y: Any = None,
        batch_size: int | None = None,
        tree_limit: int | None = None,
        approximate: bool = False,
        check_additivity: bool = True,
        progress: bool | None = None,
        devices: Any = None,
    ) -> Iterator[Explanation]:
        """Explain a stream of rows batch by batch, yielding one :class:`Explanation` per batch.

        As every explainer's ``explain_batches`` (see
        :meth:`jaxshap._engine._rows.RowExplainer.explain_batches`): only one batch is in
        memory at a time, so a ``numpy.memmap`` or a generator of batches larger than memory can
        be explained with the results written out as they come; the values equal one call on all
        rows (TreeSHAP is exact and deterministic; ``key`` is unused).

        Args:
          batches: a 2-D array, DataFrame or ``scipy.sparse`` matrix, cut into batches of
            ``batch_size`` rows; or any iterable of batches (each as ``X`` of :meth:`__call__`).
          y: labels for ``model_output="log_loss"``: an array ``[n]`` when ``batches`` is an
            array, else an iterable of label batches, one per batch.
          batch_size: rows per batch when ``batches`` is an array (default 65,536; row counts
            are padded to a few capacities, so batches of any size share compiled programs).
          tree_limit, approximate, check_additivity: as in :meth:`__call__`.
          progress: progress bar over the rows (the total is known for an array or a sequence).
          devices: as in :meth:`__call__`.

        Yields:
          One :class:`Explanation` per batch, in order.
        """
        del key
        batch_size = check_batch_size(batch_size) or STREAM_BATCH_ROWS
        if is_single_batch(batches) or hasattr(batches, "tocsr"):
            parts, labels, total = _array_batches(batches, y, batch_size)
        else:
            parts, total = batches, total_rows(batches)
            labels = None if y is None else iter(y)
        bar = ProgressBar(total) if wants_progress(progress) else None
        offset = 0
        try:
            for batch in parts:
                yb = None if labels is None else next(labels)
                with precision(self):
                    out = as_host64(self, self._explain(batch, yb, tree_limit, approximate, check_additivity, False,
                                                        devices, bar, offset))
                offset += len(out)
                yield out
        finally:
            if bar is not None:
                bar.close()

    def _check_interactions(self, tree_limit, approximate) -> None:
        default = self.ensemble.default_rounds
        if self._output.transform != "identity" or approximate or (
                tree_limit is not None and self._builder.rounds(tree_limit) != default):
            raise ValueError(
                "Interaction values are computed for model_output='raw', the default trees (no tree_limit) "
                "and exact values (approximate=False)."
            )

    def _interaction_values(self, rows: jax.Array, order: int, index: str) -> jax.Array:
        """``[n] + [M] * k + [K]`` the index's order-``k`` tensor at routed rows (groups built on first use)."""
        cache = self.__dict__.setdefault("_interaction_builds", {})
        build = self._default
        key = (index, order)
        if key not in cache or cache[key][0] is not build:
            base = "SII" if index == "k-SII" else index
            cache[key] = (build, self._builder.interaction_groups(build, base, order))
        groups, (nodes, weights, interior), chunk, background = cache[key][1]
        if rows.shape[0] == 0:
            return jnp.zeros((0,) + (self.n_features,) * order + (self.n_outputs,), rows.dtype)
        return interaction_rows(groups, rows, background, nodes, weights, interior, n_features=self.n_features,
                                n_outputs=self._default.ensemble.n_outputs, order=order, ksii=index == "k-SII",
                                rows=chunk)

    def shap_interaction_values(self, X: Any) -> np.ndarray:
        """SHAP interaction values as shap's ``TreeExplainer.shap_interaction_values``: NumPy
        ``[n, M, M]`` (``[n, M, M, K]`` for ``K`` outputs), symmetric, rows summing to the SHAP
        values, the diagonal holding the main effects (Lundberg et al. 2020). Path-dependent or,
        with background ``data``, interventional (exact; equal to
        ``ExactExplainer(model, data, index="k-SII")``). See :mod:`jaxshap._tree._interactions`.
        """
        self._check_interactions(None, False)
        with precision(self):
            Xh, _ = self._host_rows(X)
            codes = put(self._default.router.encode(self.ensemble.prepare(Xh), np.float32), self.dtype)
            inter = self._interaction_values(codes, 2, "k-SII")
            return np.asarray(inter[..., 0] if self.n_outputs == 1 else inter)


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
