"""``TreeExplainer``: exact TreeSHAP for tree ensembles, path-dependent or interventional."""

from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._runtime._chunking import DEFAULT_MEMORY_BUDGET, map_chunks
from .._explanation import Explanation
from .._runtime._inputs import align_columns, as_matrix, check_n_features, column_names, float_dtype, resolve_feature_names
from .._runtime._model import output_names_of
from .._runtime._shap_api import ShapAPI
from ._import import import_model
from ._interventional import interventional_tables_host, pair_shapley
from ._path_dependent import expected_value, path_shapley, path_tables_host
from ._paths import decompose, follows, follows_host, pattern, slot_arrays

_MODES = ("tree_path_dependent", "interventional")
MAX_TABLE_SLOTS = 10  # tables have 2**U rows per path
# Paths are padded (with null dummy slots) up to one of these widths, so that few group
# shapes need compiling; longer paths form one group evaluated directly.
GROUP_WIDTHS = (2, 4, 6, 8, 10)


def _put(a, dtype) -> jax.Array:
    """A host array on the default device, converted on the host (no compiled conversion)."""
    return jax.device_put(np.asarray(a, dtype))


# --- compiled per-row evaluation --------------------------------------------------------------
def _row_contributions(params: dict, x: jax.Array) -> jax.Array:
    """``[P, U]``: each path's contribution to each of its slots' features for row ``x``."""
    fx = follows(params["slots"], x)
    if "table" in params:
        table = params["table"]
        return table[jnp.arange(table.shape[0]), pattern(fx)]
    value = params["value"][:, None]
    if "background" not in params:
        return jax.vmap(path_shapley)(params["zero_fraction"], fx) * value
    background = params["background"]

    def add(acc, fb):
        return acc + pair_shapley(fx, fb, acc.dtype), None

    total, _ = jax.lax.scan(add, jnp.zeros(fx.shape, value.dtype), background)
    return total / background.shape[0] * value


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _explain_rows(groups: list, X: jax.Array, n_features: int, n_outputs: int, rows_per_chunk: int) -> jax.Array:
    """``[n, M, K]`` Shapley values: per row, every group's path contributions scatter-added
    into the features."""

    def one_row(x):
        phi = jnp.zeros(n_features * n_outputs, X.dtype)
        for params in groups:
            contrib = _row_contributions(params, x)
            phi = phi.at[params["index"].reshape(-1)].add(contrib.reshape(-1))
        return phi

    phi = map_chunks(jax.vmap(one_row), X, rows_per_chunk)
    return phi.reshape(X.shape[0], n_features, n_outputs)


class TreeExplainer(ShapAPI):
    r"""Exact SHAP values of a tree ensemble's raw output (margin), computed from its structure.

    Two value functions (Lundberg et al. 2020, "From local explanations to global understanding
    with explainable AI for trees", Nature Machine Intelligence 2:56-67):

    * ``"tree_path_dependent"``: ``v_x(S)`` descends each tree following ``x`` at splits on
      features in ``S`` and averaging both children by training cover elsewhere. No background
      is needed; the base value is the cover-weighted mean leaf value.
    * ``"interventional"``: ``v_x(S) = mean_b f(x_S, b_{-S})`` over the background rows ``data``:
      exactly what :class:`jaxshap.ExactExplainer` with the ``Independent`` masker gives, in time
      independent of ``2**M``.

    Each tree is cut into root-to-leaf paths (as GPUTreeShap does); a path's Shapley values
    depend on the explained row only through which of its ``L`` distinct features the row
    follows, an ``L``-bit pattern. Paths are grouped by ``L``; for short paths (``L <= 10``,
    within half of ``memory_budget``) the values of every pattern are tabulated once when the
    explainer is built (for the interventional game the background enters only through a
    histogram of its own patterns), so explaining a row is a gather per path and a scatter-add
    into the features, ``vmap``-ped over rows and chunked under ``memory_budget``. Longer paths
    are evaluated directly per row (and per background row), which is much slower.

    The explained output is the raw margin, as in ``shap``: for boosted models the log-odds (or
    the multi-class scores), for scikit-learn forests and trees the mean of the trees
    (``predict`` / ``predict_proba``). NaN in ``X`` is routed as the model routes missing values.
    Efficiency holds: ``values.sum(1) + base_values`` equals the raw output.

    Args:
      model: a fitted XGBoost, LightGBM or scikit-learn tree model (see ``TypeError`` below).
      data: background rows ``[B, M]`` for the interventional mode (array or DataFrame).
      feature_perturbation: ``"tree_path_dependent"``, ``"interventional"``, or ``"auto"``
        (default: interventional when ``data`` is given, else path-dependent).
      feature_names: optional names of the ``M`` features.
      memory_budget: bytes of working memory a chunk of rows may use.
      dtype: compute dtype (default float32, float64 under ``jax_enable_x64`` if requested).

    Example::

        ex = jaxshap.TreeExplainer(xgb_model)                      # path-dependent
        ex = jaxshap.TreeExplainer(xgb_model, X_train[:100])       # interventional
        expl = ex(X)   # expl.values: [n, M], or [n, M, K] for K classes

    Raises:
      TypeError: for an unsupported model (the message lists the supported ones).
      ValueError: for a bad ``feature_perturbation``, or the interventional mode without
        ``data``, or background rows with the wrong number of features.
    """

    def __init__(
        self,
        model: Any,
        data: Any = None,
        feature_perturbation: str = "auto",
        *,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        dtype: Any = None,
    ):
        if feature_perturbation == "auto":
            feature_perturbation = "tree_path_dependent" if data is None else "interventional"
        if feature_perturbation not in _MODES:
            raise ValueError(f"`feature_perturbation` must be one of {_MODES} or 'auto'; got {feature_perturbation!r}.")
        if feature_perturbation == "interventional" and data is None:
            raise ValueError(
                "feature_perturbation='interventional' needs background rows: pass `data` [B, M] "
                "(for example 100 training rows), or use feature_perturbation='tree_path_dependent'."
            )
        if not isinstance(memory_budget, (int, np.integer)) or memory_budget <= 0:
            raise ValueError(f"`memory_budget` must be a positive number of bytes; got {memory_budget!r}.")
        self.feature_perturbation = feature_perturbation
        self.memory_budget = int(memory_budget)
        self.ensemble = import_model(model)
        paths = decompose(self.ensemble)
        self.n_features, self.n_outputs = paths.n_features, paths.n_outputs
        self._output_names = output_names_of(model, self.n_outputs)  # a classifier's classes_
        self.dtype = jnp.dtype(dtype) if dtype is not None else float_dtype(np.zeros(0, np.float32))
        self._names = feature_names
        self._data_names = column_names(data) if data is not None else None
        self._n_slots, self._n_paths = paths.n_slots, paths.n_paths
        k = paths.n_outputs
        if feature_perturbation == "tree_path_dependent":
            base = expected_value(paths.zero_fraction, paths.value, paths.output, paths.base)
            background = None
        else:
            background = as_matrix(data, "data", dtype=self.dtype)
            check_n_features(background, self.n_features, "data", "the model")
            if background.shape[0] == 0:
                raise ValueError("`data` has no rows; pass at least one background row.")
            stump = paths.length == 0  # single-leaf trees: every row reaches the leaf
            base = paths.base + np.bincount(paths.output[stump], paths.value[stump], minlength=k)
        # Paths are grouped by their number of distinct features L, so each group is tabulated
        # with 2**L patterns (or, for long paths or a tight budget, evaluated directly).
        table_budget = self.memory_budget // 2
        self._groups, self._group_tabled = [], []
        widths = [w for w in GROUP_WIDTHS if w < paths.n_slots] + [paths.n_slots]
        lower = 0
        for width in widths:
            keep = (paths.length > lower) & (paths.length <= width)
            lower = width
            if not keep.any():
                continue
            g = paths.subset(keep, width)
            table_bytes = g.n_paths * 2**g.n_slots * g.n_slots * self.dtype.itemsize
            tabled = g.n_slots <= MAX_TABLE_SLOTS and table_bytes <= table_budget
            if tabled:
                table_budget -= table_bytes
            params, reached = self._group_params(g, background, tabled)
            if reached is not None:
                base = base + np.bincount(g.output, g.value * np.asarray(reached, np.float64), minlength=k)
            self._groups.append(params)
            self._group_tabled.append(tabled)
        self._use_table = all(self._group_tabled)
        self._base = np.asarray(base, self.dtype)

    def _group_params(self, g, background, tabled: bool):
        """Arrays one group of paths needs: slot tests, scatter index, and a table or the inputs
        of the direct evaluation; with the background's reach share ``[P]`` when interventional."""
        u, k = g.n_slots, g.n_outputs
        slots = slot_arrays(g, self.dtype)
        value = _put(g.value, self.dtype)
        params = {"slots": slots, "index": _put(g.feature * k + g.output[:, None], np.int32)}
        if background is None:
            if tabled:
                params["table"] = _put(path_tables_host(g.zero_fraction) * g.value[:, None, None], self.dtype)
            else:
                params.update(zero_fraction=_put(g.zero_fraction, self.dtype), value=value)
            return params, None
        background = np.asarray(background)
        step = max(1, self.memory_budget // max(1, 16 * g.n_paths * u))  # background rows per host chunk
        parts = [follows_host(g, background[i : i + step]) for i in range(0, background.shape[0], step)]
        reached = sum(f.all(axis=-1).sum(axis=0) for f in parts) / background.shape[0]
        if tabled:
            codes = np.concatenate([(f.astype(np.int64) << np.arange(u)).sum(-1) for f in parts])
            table = interventional_tables_host(codes, u) * g.value[:, None, None]
            params["table"] = _put(table, self.dtype)
        else:
            params.update(background=jax.device_put(np.concatenate(parts)), value=value)
        return params, reached

    def _rows_per_chunk(self, n_rows: int) -> int:
        per_row = 8 * self.n_features * self.n_outputs
        for params, tabled in zip(self._groups, self._group_tabled):
            p, u = params["index"].shape
            per_row += p * u * (16 if tabled else 8 * (u + 2)) * self.dtype.itemsize // 4
        return max(1, min(n_rows, self.memory_budget // max(per_row, 1)))

    @property
    def expected_value(self) -> jax.Array:
        """The base value: ``[K]`` (a scalar for a single output)."""
        return _put(self._base[0] if self.n_outputs == 1 else self._base, self.dtype)

    def __call__(self, X: Any, key: Any = None) -> Explanation:
        """Explain the rows of ``X`` (``key`` is accepted for a uniform interface and unused).

        Args:
          X: rows ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted). NaN is allowed
            and routed as the model routes missing values.

        Returns:
          An :class:`Explanation`: ``values`` ``[n, M]`` for one output, else ``[n, M, K]``.
        """
        X = align_columns(X, self._data_names, "X")
        names = column_names(X)
        X = as_matrix(X, "X", dtype=self.dtype)
        check_n_features(X, self.n_features, "X", "the model")
        phi = _explain_rows(self._groups, X, self.n_features, self.n_outputs, self._rows_per_chunk(X.shape[0]))
        base = _put(np.broadcast_to(self._base, (X.shape[0], self.n_outputs)), self.dtype)
        single = self.n_outputs == 1
        if single:
            phi, base = phi[..., 0], base[..., 0]
        feature_names = resolve_feature_names(self._names, self.n_features, self._data_names, names)
        output_names = None if single else self._output_names or [f"Output {k}" for k in range(self.n_outputs)]
        return Explanation(phi, base, X, None, feature_names, output_names)
