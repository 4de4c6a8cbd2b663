"""``TreeExplainer``: exact TreeSHAP for tree ensembles, path-dependent or interventional."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from .._result._explanation import Explanation
from .._core._validate import DEFAULT_MEMORY_BUDGET
from .._engine._explainer import drop_output_axis
from .._core._inputs import align_columns, as_key, float_dtype, is_traced, resolve_feature_names
from .._core._model import output_names_of
from .._engine._program import host_or_device
from .._core._progress import ProgressBar, wants_progress
from .._engine._rows import RowExplainer
from .._core._sharding import row_mesh
from .._engine._shap_api import ShapAPI, interactions_as_values, shap_background
from .._core._streaming import check_batch_size, is_array, total_rows
from .._tree import _transforms
from .._tree._ensemble import TreeEnsemble
from .._tree._import import import_model
from .._tree._shap_dict import SOURCE as SHAP_DICT
from .._tree._interactions import explain_interactions
from .._tree._interventional import interventional_tables_host, pair_shapley
from .._tree._path_dependent import expected_value, path_shapley, path_tables_host
from .._tree._paths import decompose, follows, follows_host, pattern, slot_arrays
from .._tree._routing import Router
from .._tree._rows import host_rows

CPU_CHUNK_ROWS = 64
"""Rows per chunk of the TreeSHAP kernels on a CPU (fewer when the memory budget says so).

Measured on a 2-core CPU, 2000 rows of XGBoost regressors (M=20, depth 6), warm seconds by rows
per chunk: 100 trees 0.117 (16), 0.071 (64), 0.071 (128), 0.287 (2000, all rows); 500 trees
0.55 (6), 0.205 (64), 0.238 (128), 0.546 (437). Chunks sized in bytes (the cache-sized cap of
the model-agnostic explainers) come out at 6 to 30 rows for such models, too few. On
accelerators only the budget limits the chunk."""

_MODES = ("tree_path_dependent", "interventional")
_OUTPUTS = ("raw", "probability", "predict_proba", "log_loss")
MAX_TABLE_SLOTS = 10  # tables have 2**U rows per path
# Paths are grouped by their number of distinct features (a table has 2**U rows per path,
# so padding would double its size); longer paths form one group evaluated directly.
GROUP_WIDTHS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)


def _check_dtype(dtype: Any) -> np.dtype:
    """The compute dtype: float32 (the default) or float64 (with ``jax_enable_x64``)."""
    if dtype is None:
        return float_dtype(np.zeros(0, np.float32))
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"`dtype` must be float32 or float64; got {dtype!r}.") from None
    if dt not in (np.float32, np.float64):
        raise ValueError(f"`dtype` must be float32 or float64; got {dt}.")
    if dt == np.float64 and not jax.config.jax_enable_x64:
        raise ValueError("`dtype=float64` needs x64: call jax.config.update('jax_enable_x64', True) first.")
    return dt


def _put(a, dtype) -> jax.Array:
    """A host array on the default device, converted on the host (no compiled conversion)."""
    return jax.device_put(np.asarray(a, dtype))


# --- compiled per-row evaluation --------------------------------------------------------------
def _row_contributions(params: dict, x: jax.Array) -> jax.Array:
    """``[P, U]``: each path's contribution to each of its slots' features for row ``x``."""
    fx = follows(params["slots"], x)
    if "saabas" in params:  # the row's own path only: Saabas' per-split changes of the mean
        return jnp.where(jnp.all(fx, axis=-1, keepdims=True), params["saabas"], 0.0)
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


def _chunk_values(groups: list, X: jax.Array, n_features: int, n_outputs: int) -> jax.Array:
    """``[r, M, K]`` Shapley values of a chunk of rows: per row, every group's path
    contributions scatter-added into the features (traced)."""

    def one_row(x):
        phi = jnp.zeros(n_features * n_outputs, X.dtype)
        for params in groups:
            contrib = _row_contributions(params, x)
            phi = phi.at[params["index"].reshape(-1)].add(contrib.reshape(-1))
        return phi

    return jax.vmap(one_row)(X).reshape(X.shape[0], n_features, n_outputs)


def _chunk_values_transformed(groups, X, y, raw_base, fb, n_features, n_outputs, transform):
    """``([r, M, K], [r, K])``: values and base values of the transformed output ``g(f(x))`` for
    a chunk of rows, rescaling each background row's pair values (see :mod:`._transforms`)."""

    def one_row(args):
        x, yx = args
        fxs, fx_raw = [], raw_base
        for params in groups:
            fx = follows(params["slots"], x)
            reach = jnp.all(fx, axis=-1)
            fx_raw = fx_raw + jax.ops.segment_sum(
                jnp.where(reach, params["value"], 0.0), params["output"], num_segments=n_outputs
            )
            fxs.append(fx)
        r, gb = _transforms.rescale_matrix(transform, fx_raw, fb, yx)  # [B, K(k), K(j)]
        phi = jnp.zeros(n_features * n_outputs, X.dtype)
        for params, fx in zip(groups, fxs):
            rp = jnp.swapaxes(r[:, :, params["output"]], 1, 2)  # [B, P, K(k)]

            def add(acc, inputs):
                b_follows, rb = inputs
                return acc + pair_shapley(fx, b_follows, acc.dtype)[:, :, None] * rb[:, None, :], None

            shape = fx.shape + (n_outputs,)
            total, _ = jax.lax.scan(add, jnp.zeros(shape, X.dtype), (params["background"], rp))
            contrib = total / fb.shape[0] * params["value"][:, None, None]  # [P, U, K]
            index = params["slots"]["feature"][:, :, None] * n_outputs + jnp.arange(n_outputs)
            phi = phi.at[index.reshape(-1)].add(contrib.reshape(-1))
        return phi, gb.mean(axis=0)

    phi, base = jax.vmap(one_row)((X, y))
    return phi.reshape(X.shape[0], n_features, n_outputs), base


class _TreeRows(RowExplainer):
    """One build's TreeSHAP kernels on the shared runtime (:class:`jaxshap._engine._rows.RowExplainer`).

    Its leaves are the build's tables and slot tests (``groups``), the raw base value and, for
    a transformed output, the background margins; the rest is static. So every call on a build
    of the same shapes (another explainer of the same model, another number of rows within a
    capacity) reuses one compiled program, and chunks, padding, host blocks (progress, streams)
    and devices come from the runtime. A row is the routed row's codes ``[M]``, followed by its
    label for a transformed output (``[M + 1]``).
    """

    def __init__(self, groups, n_features, n_outputs, base, fb, transform, bytes_per_row, memory_budget):
        self.groups, self.base, self.fb = groups, base, fb
        self.n_features, self.n_outputs, self.transform = n_features, n_outputs, transform
        self.bytes_per_row, self.memory_budget = bytes_per_row, memory_budget

    def _bytes_per_row(self) -> int:
        return self.bytes_per_row

    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, None]:
        """Rows per chunk: as many as ``memory_budget`` holds, at most :data:`CPU_CHUNK_ROWS` on a CPU."""
        rows = max(1, self.memory_budget // max(self.bytes_per_row, 1))
        if jax.default_backend() == "cpu":
            rows = min(rows, CPU_CHUNK_ROWS)
        return (min(rows, max(n_rows, 1)) if exact else rows), None

    def _validate(self, X: Any) -> jax.Array:  # the rows are routed and checked by TreeExplainer
        return X

    def _explain_rows(self, X: jax.Array, keys: jax.Array):
        del keys  # exact: no sampling
        m, k = self.n_features, self.n_outputs
        if self.transform == "identity":
            return _chunk_values(self.groups, X, m, k), jnp.broadcast_to(self.base, (X.shape[0], k)), None
        phi, base = _chunk_values_transformed(self.groups, X[:, :m], X[:, m], self.base, self.fb, m, k, self.transform)
        return phi, base, None

    def _wrap(self, phi, base, stderr, X, names):  # TreeExplainer wraps the results itself
        return phi, base


@dataclasses.dataclass
class _Build:
    """Everything one (tree limit, kind) needs: the router, the groups of paths and the base."""

    ensemble: TreeEnsemble
    router: Router
    groups: list
    tabled: list
    base: np.ndarray  # [K] float64 (raw base for transformed outputs)
    fb: np.ndarray | None = None  # [B, K] background margins (transformed outputs)
    paths: Any = None  # the routed paths (for interaction values)
    background: np.ndarray | None = None  # the routed background rows (interventional)


def _cover_from_data(e: TreeEnsemble, X: np.ndarray) -> TreeEnsemble:
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


class TreeExplainer(ShapAPI):
    r"""Exact SHAP values of a tree ensemble, computed from its structure.

    Two value functions (Lundberg et al. 2020, "From local explanations to global understanding
    with explainable AI for trees", Nature Machine Intelligence 2:56-67):

    * ``"tree_path_dependent"``: ``v_x(S)`` descends each tree following ``x`` at splits on
      features in ``S`` and averaging both children by training cover elsewhere. No background
      is needed; the base value is the cover-weighted mean leaf value. Given ``data`` as well
      (and ``feature_perturbation="tree_path_dependent"`` explicitly), the covers are
      re-counted on those rows, as shap does, so the base value is their mean raw output.
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
    are evaluated directly per row (and per background row), which is slower.

    Routing is exactly the library's own: inputs are rounded to the precision the library
    compares in (float32 for XGBoost and scikit-learn's classic trees, float64 for LightGBM and
    HistGradientBoosting), missing values (NaN, ``pd.NA``, XGBoost's ``missing=`` value, entries
    absent from an XGBoost sparse matrix or DMatrix) go where the model sends them, and the
    kernels compare ranks among the thresholds, so they route exactly whatever ``dtype`` the
    attributions are computed in. The sklearn wrappers of XGBoost and LightGBM predict with the
    best iteration after early stopping; that is what is explained (``tree_limit`` overrides it).

    Outputs (``model_output``):

    * ``"raw"`` (default): the raw margin, as in shap: log-odds or multi-class scores for
      boosted models, ``predict`` / ``predict_proba`` for scikit-learn trees and forests, the
      mean path length ``E[h(x)]`` for ``IsolationForest`` (its anomaly score is
      ``-2 ** (-E[h(x)] / c(max_samples))``).
    * ``"probability"``: the model's probability, ``sigmoid`` (binary) or ``softmax``
      (multi-class) of the margin; ``"predict_proba"``: exactly the columns ``predict_proba``
      returns (for a binary classifier two columns, ``1 - p`` and ``p``); ``"log_loss"``: the
      log loss (or, for squared-error regression, the squared error) given the labels ``y``
      passed to the call. These are interventional (``data`` needed), exact with respect to the
      background in shap's sense: each background row's pair values are rescaled so that they
      sum to the change in the transformed output (see :mod:`jaxshap._tree._transforms`), so
      efficiency holds in the output's units. For models whose raw output already is the
      probability (scikit-learn classifier trees and forests) they equal ``"raw"``.

    Efficiency holds: ``values.sum(1) + base_values`` equals the explained output.

    Args:
      model: a fitted XGBoost, LightGBM or scikit-learn tree model (see ``TypeError`` below).
      data: background rows ``[B, M]`` for the interventional mode (array, DataFrame, sparse).
      feature_perturbation: ``"tree_path_dependent"``, ``"interventional"``, or ``"auto"``
        (default: interventional when ``data`` is given, else path-dependent).
      model_output: ``"raw"``, ``"probability"``, ``"predict_proba"`` or ``"log_loss"``.
      feature_names: optional names of the ``M`` features.
      memory_budget: bytes of working memory a chunk of rows may use; the model's path tables
        must fit in it too, or in 512 MiB when it is smaller (deep trees with very many leaves
        raise a ``ValueError`` saying so).
      dtype: compute dtype (default float32, float64 under ``jax_enable_x64`` if requested).

    Example::

        ex = jaxshap.TreeExplainer(xgb_model)                      # path-dependent
        ex = jaxshap.TreeExplainer(xgb_model, X_train[:100])       # interventional
        expl = ex(X)   # expl.values: [n, M], or [n, M, K] for K classes
        ex = jaxshap.TreeExplainer(clf, X_train[:100], model_output="probability")

    Raises:
      TypeError: for an unsupported model (the message lists the supported ones).
      ValueError: for a bad ``feature_perturbation`` or ``model_output``, the interventional
        mode or a transformed output without ``data``, or background rows with the wrong
        number of features.
    """

    def __init__(
        self,
        model: Any,
        data: Any = None,
        feature_perturbation: str = "auto",
        *,
        model_output: str = "raw",
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        dtype: Any = None,
    ):
        if model_output not in _OUTPUTS:
            raise ValueError(f"`model_output` must be one of {_OUTPUTS}; got {model_output!r}.")
        explicit = feature_perturbation
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
        self.model = model
        self.feature_perturbation = feature_perturbation
        self.model_output = model_output
        self.memory_budget = int(memory_budget)
        self.ensemble = import_model(model)
        self.n_features = self.ensemble.n_features
        self._transform, self._doubled = self._resolve_transform(model_output)
        if self._transform != "identity" and feature_perturbation == "tree_path_dependent":
            raise ValueError(
                f"model_output={model_output!r} is explained interventionally only (as in shap): pass background "
                "rows `data` [B, M] and feature_perturbation='interventional' (or 'auto')."
            )
        self.dtype = _check_dtype(dtype)
        self._names = feature_names
        self._data_names = None
        self._background_rows = None
        if data is not None:
            data = shap_background(data, "TreeExplainer")  # shap's 100 rows of a larger array or DataFrame
            bg, self._data_names = host_rows(data, "data", sparse_missing=self.ensemble.sparse_missing)
            self._check_n_features(bg, "data")
            if bg.shape[0] == 0:
                raise ValueError("`data` has no rows; pass at least one background row.")
            self._background_rows = self.ensemble.prepare(bg)
            if feature_perturbation == "tree_path_dependent" and explicit == "tree_path_dependent":
                # as shap: the path-dependent game with node covers counted on `data`
                self.ensemble = _cover_from_data(self.ensemble, self._background_rows)
        self.n_outputs = self.ensemble.n_outputs * (2 if self._doubled else 1)
        self._output_names = output_names_of(model, self.n_outputs)  # a classifier's classes_
        self._builds: dict = {}
        default = self._build(self.ensemble.default_rounds, False)
        # for interaction values (built on demand): routed paths and background rows
        self._paths, self._background = default.paths, default.background

    # --- set-up -------------------------------------------------------------------------------
    def _resolve_transform(self, model_output: str) -> tuple[str, bool]:
        """The transform ``g`` of the raw output, and whether a binary output is doubled."""
        e = self.ensemble
        if model_output == "raw":
            return "identity", False
        if model_output in ("probability", "predict_proba"):
            if e.link == "softmax" and e.n_outputs > _transforms.MAX_SOFTMAX_CLASSES:
                raise ValueError(
                    f"model_output={model_output!r} supports up to {_transforms.MAX_SOFTMAX_CLASSES} classes; this "
                    f"model has {e.n_outputs}. Use model_output='raw'."
                )
            if e.link in ("logistic", "softmax"):
                doubled = model_output == "predict_proba" and e.link == "logistic" and hasattr(self.model, "predict_proba")
                return e.link, doubled
            if e.link == "identity" and hasattr(self.model, "predict_proba"):
                return "identity", False  # the raw output already is the probability
            raise ValueError(
                f"model_output={model_output!r} needs a classifier whose output link is known; this {e.source} "
                f"model's is not (link={e.link!r}). Use model_output='raw'."
            )
        if e.loss == "binary_crossentropy":
            return "logistic_nlogloss", False
        if e.loss == "squared_error":
            return "squared_loss", False
        raise ValueError(
            f"model_output='log_loss' supports binary classifiers (log loss) and squared-error regressors; "
            f"this {e.source} model's loss is {e.loss!r}."
        )

    def _check_n_features(self, X: np.ndarray, name: str) -> None:
        if X.shape[1] > self.n_features and self.ensemble.source == SHAP_DICT and self._background_rows is None:
            self._widen(X.shape[1])  # a dict model names no width: features past its last split add nothing
        if X.shape[1] != self.n_features:
            raise ValueError(
                f"`{name}` has {X.shape[1]} features but the model has {self.n_features}; "
                f"pass rows with the same {self.n_features} columns, in the same order."
            )

    def _widen(self, n_features: int) -> None:
        """Take ``n_features`` columns (a model in shap's dictionary format, whose width is only
        known from the rows): the trees are the same, the extra features get zero values."""
        self.ensemble = dataclasses.replace(self.ensemble, n_features=n_features)
        self.n_features = n_features
        if getattr(self, "_builds", None):  # built already: build again at the new width
            self._builds = {}
            default = self._build(self.ensemble.default_rounds, False)
            self._paths, self._background = default.paths, default.background

    def _rounds(self, tree_limit) -> int | None:
        if tree_limit is None:
            return self.ensemble.default_rounds
        n = self.ensemble.n_rounds
        if isinstance(tree_limit, bool) or not isinstance(tree_limit, (int, np.integer)) or not 1 <= tree_limit:
            raise ValueError(f"`tree_limit` must be a positive number of boosting rounds; got {tree_limit!r}.")
        if tree_limit > n:
            raise ValueError(f"`tree_limit` is {tree_limit} but the model has {n} rounds; pass at most {n}.")
        return int(tree_limit)

    def _build(self, rounds: int | None, approximate: bool) -> _Build:
        key = (rounds, approximate)
        if key in self._builds:
            return self._builds[key]
        e = self.ensemble.first_rounds(rounds)
        paths = decompose(e, max_bytes=max(self.memory_budget, DEFAULT_MEMORY_BUDGET), saabas=approximate)
        categorical = None
        if paths.cat is not None:
            categorical = np.zeros(e.n_features, bool)
            categorical[paths.feature[paths.cat]] = True
        router = Router.from_bounds(paths.feature, paths.lower, paths.upper, e.n_features, categorical)
        paths = dataclasses.replace(
            paths, lower=router.bounds(paths.feature, paths.lower), upper=router.bounds(paths.feature, paths.upper)
        )
        k = paths.n_outputs
        transformed = self._transform != "identity"
        background = None
        if self.feature_perturbation == "tree_path_dependent" or approximate:
            base = expected_value(paths.zero_fraction, paths.value, paths.output, paths.base)
        else:
            background = router.encode(self._background_rows, np.float32)
            stump = paths.length == 0  # single-leaf trees: every row reaches the leaf
            base = paths.base + np.bincount(paths.output[stump], paths.value[stump], minlength=k)
        # Paths are grouped by their number of distinct features L, so each group is tabulated
        # with 2**L patterns (or, for long paths or a tight budget, evaluated directly).
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
        fb = e.predict(self._background_rows) if transformed else None
        build = _Build(e, router, groups, group_tabled, np.asarray(base, np.float64), fb, paths, background)
        self._builds[key] = build
        return build

    def _group_params(self, g, background, tabled: bool, approximate: bool, transformed: bool):
        """Arrays one group of paths needs: slot tests, scatter index, and a table or the inputs
        of the direct evaluation; with the background's reach share ``[P]`` when interventional."""
        u, k = g.n_slots, g.n_outputs
        slots = slot_arrays(g, self.dtype)
        value = _put(g.value, self.dtype)
        params = {"slots": slots, "index": _put(g.feature * k + g.output[:, None], np.int32)}
        if approximate:
            params["saabas"] = _put(g.saabas, self.dtype)
            return params, None
        if background is None:
            if tabled:
                params["table"] = _put(path_tables_host(g.zero_fraction) * g.value[:, None, None], self.dtype)
            else:
                params.update(zero_fraction=_put(g.zero_fraction, self.dtype), value=value)
            return params, None
        step = max(1, self.memory_budget // max(1, 16 * g.n_paths * u))  # background rows per host chunk
        parts = [follows_host(g, background[i : i + step]) for i in range(0, background.shape[0], step)]
        reached = sum(f.all(axis=-1).sum(axis=0) for f in parts) / background.shape[0]
        if tabled:
            codes = np.concatenate([(f.astype(np.int64) << np.arange(u)).sum(-1) for f in parts])
            table = interventional_tables_host(codes, u) * g.value[:, None, None]
            params["table"] = _put(table, self.dtype)
        else:
            params.update(background=jax.device_put(np.concatenate(parts)), value=value)
            if transformed:
                params["output"] = _put(g.output, np.int32)
        return params, reached

    # --- the default build's internals (tests and the interactions module read them) ----------
    @property
    def _default(self) -> _Build:
        return self._build(self.ensemble.default_rounds, False)

    @property
    def _groups(self) -> list:
        return self._default.groups

    @property
    def _group_tabled(self) -> list:
        return self._default.tabled

    @property
    def _use_table(self) -> bool:
        return all(self._default.tabled)

    def _rows_per_chunk(self, n_rows: int, build: _Build | None = None) -> int:
        """Rows per chunk of ``n_rows`` rows under ``memory_budget`` (without the CPU cap that
        the runtime applies, see :func:`jaxshap._core._chunking.chunk_bytes`)."""
        return max(1, min(n_rows, self.memory_budget // self._bytes_per_row(build)))

    def _bytes_per_row(self, build: _Build | None = None) -> int:
        """Working memory of one explained row in a build's kernels."""
        build = self._default if build is None else build
        per_row = 8 * self.n_features * self.n_outputs
        for params, tabled in zip(build.groups, build.tabled):
            p, u = params["index"].shape
            if "saabas" in params:
                per_row += p * u * 3 * self.dtype.itemsize
            elif self._transform != "identity":
                k = self.ensemble.n_outputs
                per_row += p * u * 8 * k * self.dtype.itemsize + 64 * self._background_rows.shape[0] * 2**k
            else:
                per_row += p * u * (16 if tabled else 8 * (u + 2)) * self.dtype.itemsize // 4
        return max(int(per_row), 1)

    def _runner(self, build: _Build, approximate: bool) -> _TreeRows:
        """The build's kernels as a :class:`_TreeRows` (built per call: cheap, and always
        current with the build's base value)."""
        transform = "identity" if approximate else self._transform
        fb = None if transform == "identity" else _put(build.fb, self.dtype)
        return _TreeRows(
            build.groups, self.n_features, build.ensemble.n_outputs, _put(build.base, self.dtype), fb,
            transform, self._bytes_per_row(build), self.memory_budget,
        )

    @property
    def expected_value(self) -> Any:
        """The base value: ``[K]`` (a scalar for a single output); for ``log_loss``, whose base
        value depends on the label, a function of the label ``y`` (as shap's):
        ``explainer.expected_value(y)`` is the mean loss over the background at label ``y``."""
        build = self._default
        if self._transform in ("logistic_nlogloss", "squared_loss"):
            return functools.partial(_label_base, self._transform, build.fb)
        if self._transform == "identity":
            base = build.base
        else:
            base = np.asarray(_transforms.apply(self._transform, jnp.asarray(build.fb), 0.0)).mean(0)
        if self._doubled:
            base = np.concatenate([1.0 - base, base])
        return _put(base[0] if base.size == 1 else base, self.dtype)

    # --- explaining ---------------------------------------------------------------------------
    def __call__(
        self,
        X: Any,
        key: Any = None,
        *,
        y: Any = None,
        tree_limit: int | None = None,
        approximate: bool = False,
        check_additivity: bool = True,
        interactions: bool = False,
        progress: bool | None = None,
        devices: Any = None,
    ) -> Explanation:
        """Explain the rows of ``X`` (``key`` is accepted for a uniform interface and unused).

        Args:
          X: rows ``[n, M]``: array, DataFrame (numeric, bool, nullable and category columns),
            ``scipy.sparse`` matrix or ``xgboost.DMatrix``; one row ``[M]`` is promoted. Missing
            values are routed as the model routes them.
          y: labels ``[n]``, needed by ``model_output="log_loss"``.
          tree_limit: explain the first ``tree_limit`` boosting rounds only (default: what the
            model's ``predict`` uses, the best iteration after early stopping).
          approximate: Saabas attributions (Saabas 2014, "Interpreting random forests"; shap's
            ``approximate=True``): along the row's own path in each tree, each split's feature
            gets the change in the cover-weighted mean leaf value. Much cheaper but not Shapley
            values; they use the training covers (no background) and the raw output, and sum,
            with the path-dependent base value, to the raw output.
          check_additivity: check that the values plus the base values reproduce the model's own
            prediction of the explained output, and raise ``RuntimeError`` when they do not.
          interactions: return the SHAP interaction values (see
            :meth:`shap_interaction_values`) as ``values`` ``[n, M, M]`` (or ``[n, M, M, K]``),
            as shap does (also as ``interaction_values``); raw output, default trees, exact
            values only.
          progress: progress bar on stderr (rows done, rate, time left); ``None`` (default): only
            when stderr is a terminal.
          devices: ``None`` (the default device, or, for a JAX array sharded along its rows over
            a mesh, that mesh: the rows are routed on the host and explained where they lay,
            the results sharded the same way), ``"local"`` or a sequence of devices to shard the
            rows over (the interaction values are computed on the default device).

        The routed rows are explained by the shared runtime
        (:class:`jaxshap._engine._rows.RowExplainer`): chunks under ``memory_budget``, row
        counts padded to a few capacities (a new ``n`` rarely compiles), and one compiled
        program for every explainer whose tables have the same shapes.

        Returns:
          An :class:`Explanation`: ``values`` ``[n, M]`` for one output, else ``[n, M, K]``.
        """
        bar = ProgressBar(_n_rows(X)) if wants_progress(progress) else None
        try:
            return self._explain(X, y, tree_limit, approximate, check_additivity, interactions, devices, bar, 0)
        finally:
            if bar is not None:
                bar.close()

    def _explain(self, X, y, tree_limit, approximate, check_additivity, interactions, devices, bar, offset):
        """``__call__`` on one batch; ``bar`` (or ``None``) is advanced as blocks finish."""
        sharding = _row_sharding(X) if devices is None else None
        X = align_columns(X, self._data_names, "X")
        Xh, names = host_rows(X, "X", sparse_missing=self.ensemble.sparse_missing)
        self._check_n_features(Xh, "X")
        rounds = self._rounds(tree_limit)
        if approximate and self._transform != "identity":
            raise ValueError("approximate=True explains the raw output only; use model_output='raw'.")
        build = self._build(rounds, bool(approximate))
        Xp = self.ensemble.prepare(Xh)
        codes = build.router.encode(Xp, np.float32)
        n = Xh.shape[0]
        yv = self._labels(y, n)
        runner = self._runner(build, bool(approximate))
        if runner.transform != "identity":  # each row carries its label
            codes = np.concatenate([codes, yv[:, None]], axis=1)
        rows = _put(codes, self.dtype)
        if sharding is not None:  # routed on the host, explained where the rows lay
            rows = jax.device_put(rows, sharding)
        if n == 0:
            phi, base = runner._empty(rows, None)
        else:
            phi, base, _ = runner._run(rows, as_key(None), offset, devices, bar, blocked=bar is not None)
        if self._doubled:
            phi, base = _doubled(phi, base)
        if check_additivity:
            self._check_additivity(phi, base, Xp, build, yv, approximate)
        single = phi.shape[-1] == 1
        if single:
            phi, base = drop_output_axis((phi, base))
        feature_names = resolve_feature_names(self._names, self.n_features, self._data_names, names)
        output_names = None if single else self._output_names or [f"Output {j}" for j in range(phi.shape[-1])]
        expl = Explanation(phi, base, _put(Xh, self.dtype), None, feature_names, output_names)
        if interactions:
            self._check_interactions(tree_limit, approximate)
            inter = explain_interactions(self, rows)  # the raw output: rows are the codes
            expl.interaction_values = inter[..., 0] if single else inter
            expl = interactions_as_values(expl)
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
        labels = None
        if is_array(batches) or hasattr(batches, "tocsr"):
            n = int(batches.shape[0])
            frame = hasattr(batches, "iloc")
            cut = lambda a, b: batches.iloc[a:b] if frame else batches[a:b]  # noqa: E731
            parts = (cut(a, min(a + batch_size, n)) for a in range(0, n, batch_size))
            if y is not None:
                yv = np.asarray(y).reshape(-1)
                if yv.shape[0] != n:
                    raise ValueError(f"`y` has {yv.shape[0]} labels but `batches` has {n} rows; pass one label per row.")
                labels = (yv[a : a + batch_size] for a in range(0, n, batch_size))
            total = n
        else:
            parts, total = batches, total_rows(batches)
            if y is not None:
                labels = iter(y)
        bar = ProgressBar(total) if wants_progress(progress) else None
        offset = 0
        try:
            for batch in parts:
                yb = None if labels is None else next(labels)
                out = self._explain(batch, yb, tree_limit, approximate, check_additivity, False, devices, bar, offset)
                offset += len(out)
                yield out
        finally:
            if bar is not None:
                bar.close()

    def _check_interactions(self, tree_limit, approximate) -> None:
        if self._transform != "identity" or approximate or (tree_limit is not None and self._rounds(tree_limit)
                                                             != self.ensemble.default_rounds):
            raise ValueError(
                "Interaction values are computed for model_output='raw', the default trees (no tree_limit) "
                "and exact values (approximate=False)."
            )

    def shap_interaction_values(self, X: Any) -> np.ndarray:
        """SHAP interaction values as shap's ``TreeExplainer.shap_interaction_values``: NumPy
        ``[n, M, M]`` (``[n, M, M, K]`` for ``K`` outputs), symmetric, rows summing to the SHAP
        values, the diagonal holding the main effects (Lundberg et al. 2020). Path-dependent or,
        with background ``data``, interventional (exact; equal to
        ``ExactExplainer(model, data, index="k-SII")``). See :mod:`jaxshap._tree._interactions`.
        """
        self._check_interactions(None, False)
        X = align_columns(X, self._data_names, "X")
        Xh, _ = host_rows(X, "X", sparse_missing=self.ensemble.sparse_missing)
        self._check_n_features(Xh, "X")
        codes = _put(self._default.router.encode(self.ensemble.prepare(Xh), np.float32), self.dtype)
        inter = explain_interactions(self, codes)
        return np.asarray(inter[..., 0] if self.n_outputs == 1 else inter)

    def shap_values(self, X: Any, y: Any = None, *, tree_limit: int | None = None, approximate: bool = False,
                    check_additivity: bool = True, **kwargs: Any) -> np.ndarray:
        """As shap's ``TreeExplainer.shap_values(X, y=None, tree_limit=None, approximate=False,
        check_additivity=True)``: NumPy ``[n, M]`` or ``[n, M, K]`` (``[M]`` for one 1-D row)."""
        return super().shap_values(X, y=y, tree_limit=tree_limit, approximate=approximate,
                                   check_additivity=check_additivity, **kwargs)

    def _labels(self, y: Any, n: int) -> np.ndarray:
        if self._transform not in ("logistic_nlogloss", "squared_loss"):
            return np.zeros(n)
        if y is None:
            raise ValueError("model_output='log_loss' needs the labels: call the explainer with `y=` [n].")
        yv = np.asarray(y, dtype=np.float64).reshape(-1)
        if yv.shape[0] != n:
            raise ValueError(f"`y` has {yv.shape[0]} labels but `X` has {n} rows; pass one label per row.")
        return yv

    def _explained_output(self, Xp: np.ndarray, build: _Build, y: np.ndarray) -> np.ndarray:
        """``[n, K]`` the explained output as the model's library computes it (float64)."""
        raw = _native_raw(self.model, build.ensemble, Xp)
        if self._transform == "identity":
            out = raw
        else:
            out = np.asarray(jax.vmap(lambda m, yy: _transforms.apply(self._transform, m, yy))(
                jnp.asarray(raw, jnp.float32), jnp.asarray(y, jnp.float32)), np.float64)
        if self._doubled:
            out = np.concatenate([1.0 - out, out], axis=-1)
        return out

    def _check_additivity(self, phi, base, Xp, build: _Build, y, approximate: bool) -> None:
        phi = np.asarray(phi, np.float64)
        total = phi.sum(1) + np.asarray(base, np.float64)
        expected = self._explained_output(Xp, build, y)
        scale = np.abs(phi).sum(1) + np.abs(np.asarray(base, np.float64)) + np.abs(expected)
        tol = 1e-5 + (1e-4 if self.dtype == jnp.float32 else 1e-10) * scale
        bad = np.abs(total - expected) > tol
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise RuntimeError(
                f"Additivity check failed: for row {i}, output {j}, values.sum() + base_values = {total[i, j]:.8g} "
                f"but the model's output is {expected[i, j]:.8g}. Please report this with the model; pass "
                "check_additivity=False to skip the check."
            )


STREAM_BATCH_ROWS = 65536
"""Default rows per batch of :meth:`TreeExplainer.explain_batches` on an array."""


def _label_base(transform: str, fb: np.ndarray, y: Any) -> Any:
    """The mean over the background margins ``fb`` of the loss at label ``y`` (a scalar for one
    output), in float64."""
    with jax.enable_x64(True):
        base = np.asarray(_transforms.apply(transform, jnp.asarray(fb, jnp.float64), float(y))).mean(0)
    return base[0] if base.size == 1 else base


def _row_sharding(X: Any) -> NamedSharding | None:
    """The rows' sharding when ``X`` is a JAX array sharded along its rows over several devices."""
    if not isinstance(X, jax.Array) or is_traced(X) or row_mesh(X, None) is None:
        return None
    return NamedSharding(X.sharding.mesh, PartitionSpec(X.sharding.spec[0]))


def _n_rows(X: Any) -> int | None:
    """Rows of ``X`` for the progress bar (``None`` when unknown, as for a DMatrix)."""
    if hasattr(X, "num_row"):
        return int(X.num_row())
    shape = getattr(X, "shape", None) or np.shape(X)
    return None if not shape else (1 if len(shape) == 1 else int(shape[0]))


_negate_and_keep = jax.jit(lambda phi: jnp.concatenate([-phi, phi], axis=-1))
_complement_and_keep = jax.jit(lambda base: jnp.concatenate([1.0 - base, base], axis=-1))


def _doubled(phi, base):
    """A binary classifier's ``predict_proba`` columns ``(1 - p, p)`` from the values and base
    values of ``p`` (through NumPy on a CPU, so a new number of rows compiles nothing)."""
    phi = host_or_device(lambda a: np.concatenate([-a, a], axis=-1), _negate_and_keep, phi)
    base = host_or_device(lambda a: np.concatenate([1.0 - a, a], axis=-1), _complement_and_keep, base)
    return phi, base


def _native_raw(model: Any, e: TreeEnsemble, Xp: np.ndarray) -> np.ndarray:
    """``[n, K]`` raw output from the model's own library where it can give it for the trees in
    ``e`` (XGBoost, LightGBM), else from the imported ensemble's NumPy reference walk."""
    root = (type(model).__module__ or "").split(".")[0]
    rounds = e.n_rounds
    try:
        if root == "xgboost":
            booster = model.get_booster() if hasattr(model, "get_booster") else model
            out = booster.inplace_predict(Xp.astype(np.float32), iteration_range=(0, rounds), predict_type="margin",
                                          missing=np.nan, validate_features=False)
            return np.asarray(out, np.float64).reshape(Xp.shape[0], -1)
        if root == "lightgbm":
            booster = model.booster_ if hasattr(model, "booster_") else model
            out = booster.predict(Xp, raw_score=True, num_iteration=rounds)
            return np.asarray(out, np.float64).reshape(Xp.shape[0], -1)
    except (TypeError, ValueError):  # pragma: no cover - the library refused the rows as given
        pass
    return e.predict(Xp)
