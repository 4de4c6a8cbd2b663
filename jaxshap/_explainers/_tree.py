"""``TreeExplainer``: exact TreeSHAP for tree ensembles, path-dependent or interventional.

The class is assembled from three parts: building the kernels (:mod:`._tree_build`: model import
through the registered tree readers, path tables, background), the explained output
(:mod:`._tree_outputs`: ``model_output``, transforms, ``expected_value``) and explaining rows
(:mod:`._tree_explain`: routing, the compiled kernels of :mod:`._tree_kernels`, interaction values).

"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import numpy as np

from .._core._inputs import float_dtype
from .._core._model import declared_output_names
from .._core._chunking import ProgressBar, wants_progress
from .._core._validate import DEFAULT_MEMORY_BUDGET, choice, memory_budget as check_memory_budget
from .._engine._shap_api import ShapAPI, as_host64, precision, shap_background
from .._result._arrays import to_host
from .._result._decomposition import Decomposition
from .._result._explanation import Explanation
from .._tree._ensemble import TreeEnsemble
from .._tree._reader import find_reader
from .._tree._rows import host_rows
from ._tree_build import Build, TreeBuilder, cover_from_data, require_cover
from ._tree_explain import ExplainRows, decompose, n_rows
from ._tree_outputs import OUTPUTS, TreeOutput


MODES = ("tree_path_dependent", "interventional")


def check_dtype(dtype: Any) -> np.dtype:
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


def float64_model(ensemble: TreeEnsemble) -> bool:
    """Whether a model computes in float64: its library compares in float64 (LightGBM,
    HistGradientBoosting), or its leaf values are not float32 numbers (scikit-learn's trees and
    forests); XGBoost's are (its constant, read from text, need not be)."""
    value = ensemble.value
    return ensemble.precision == np.float64 or not np.array_equal(value, value.astype(np.float32).astype(np.float64))


class TreeExplainer(ExplainRows, ShapAPI):
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

    Each tree is cut into root-to-leaf paths (as GPUTreeShap does). Path-dependent values are
    products of each path's factors at Gauss-Legendre nodes, as many as the widest path needs
    for exact results (Quadrature-TreeSHAP, see :mod:`jaxshap._tree._quadrature`);
    interventional values are each leaf's pair game in closed form against chunks of background
    rows (:mod:`jaxshap._tree._interventional`), or, for paths of at most 10 distinct features
    (within half of ``memory_budget``), a table over the patterns of followed features built once
    from the background's pattern histogram. Blocks of paths meet chunks of rows in one compiled
    loop per group of path widths. Memory: the path arrays (about 64 bytes per path and slot),
    the interventional tables (within half of ``memory_budget``), a path block's temporaries
    (at most 4 MiB, and a quarter of ``memory_budget``), the rows' ``[M, K]`` accumulators and,
    interventional, the routed background rows ``[B, M]``, met 128 at a time: ``10**5``
    background rows (``data=jaxshap.maskers.Independent(rows, max_samples=None)``) need about
    ``4 * 10**5 * M`` bytes more and no ``rows x background x leaves`` array; the time grows
    with ``B`` for the paths that are not tabulated.

    Routing is exactly the library's own: inputs are rounded to the precision the library
    compares in (float32 for XGBoost, CatBoost, scikit-learn's classic trees and ONNX float inputs, float64
    for LightGBM, HistGradientBoosting and pyspark.ml), missing values (NaN, ``pd.NA``, XGBoost's ``missing=``
    value, entries absent from an XGBoost sparse matrix or DMatrix) and categories the model
    never saw go where the model sends them, and the kernels compare ranks among the thresholds,
    so they route exactly whatever ``dtype`` the attributions are computed in. The sklearn wrappers of XGBoost and LightGBM predict with the
    best iteration after early stopping; that is what is explained (``tree_limit`` overrides it).

    Outputs (``model_output``):

    * ``"raw"`` (default): the raw margin, as in shap: log-odds or multi-class scores for
      boosted models, ``predict`` / ``predict_proba`` for scikit-learn trees and forests, the
      mean path length ``E[h(x)]`` for ``IsolationForest`` (its anomaly score is
      ``-2 ** (-E[h(x)] / c(max_samples))``).
    * ``"probability"``: the model's probability, ``sigmoid`` (binary) or ``softmax``
      (multi-class) of the margin (the ensemble's ``output_transform``); ``"predict_proba"``: exactly the columns ``predict_proba``
      returns (for a binary classifier two columns, ``1 - p`` and ``p``); ``"log_loss"``: the
      log loss (or, for squared-error regression, the squared error) given the labels ``y``
      passed to the call. These are interventional (``data`` needed), exact with respect to the
      background in shap's sense: each background row's pair values are rescaled so that they
      sum to the change in the transformed output (see :mod:`jaxshap._tree._interventional`), so
      efficiency holds in the output's units. For models whose raw output already is the
      probability (scikit-learn classifier trees and forests) they equal ``"raw"``.

    Efficiency holds: ``values.sum(1) + base_values`` equals the explained output.

    Args:
      model: a fitted XGBoost, LightGBM, CatBoost, scikit-learn (HistGradientBoosting with
        categorical splits too) or pyspark.ml tree model, an ONNX ``ModelProto`` with one ``TreeEnsembleRegressor`` /
        ``TreeEnsembleClassifier`` node (no covers unless its ``nodes_hitrates`` add up: pass
        ``data``), or any model a registered :class:`jaxshap.trees.TreeReader` recognises (see
        ``TypeError`` below).
      data: background rows ``[B, M]`` for the interventional mode (array, DataFrame, sparse;
        more than 100 rows give shap's sample of 100, with a warning), or
        ``jaxshap.maskers.Independent(rows, max_samples=None)`` to keep every row, or a weighted
        summary with ``.data`` and ``.weights`` (such as ``shap.kmeans(X, k)``).
      feature_perturbation: ``"tree_path_dependent"``, ``"interventional"``, or ``"auto"``
        (default: interventional when ``data`` is given, else path-dependent).
      model_output: ``"raw"``, ``"probability"``, ``"predict_proba"`` or ``"log_loss"``.
      feature_names: optional names of the ``M`` features.
      memory_budget: bytes of working memory a chunk of rows may use; the model's path tables
        must fit in it too, or in 512 MiB when it is smaller (deep trees with very many leaves
        raise a ``ValueError`` saying so).
      dtype: compute dtype. By default the model's: float64 for a model that computes in float64
        (LightGBM, CatBoost, scikit-learn's trees and forests; computed with x64 enabled for the call only,
        results as NumPy arrays, as for a host model given float64 rows), float32 for XGBoost; or
        float32 / float64 (the latter under ``jax_enable_x64``) when given.

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
        choice(model_output, "model_output", OUTPUTS)
        explicit = feature_perturbation
        if feature_perturbation == "auto":
            feature_perturbation = "tree_path_dependent" if data is None else "interventional"
        choice(feature_perturbation, "feature_perturbation", MODES + ("auto",))
        if feature_perturbation == "interventional" and data is None:
            raise ValueError(
                "feature_perturbation='interventional' needs background rows: pass `data` [B, M] "
                "(for example 100 training rows), or use feature_perturbation='tree_path_dependent'."
            )
        self.memory_budget = check_memory_budget(memory_budget)
        self.model, self.feature_perturbation, self.model_output = model, feature_perturbation, model_output
        self._reader = find_reader(model)
        self.ensemble = self._reader.read(model)
        self.n_features = self.ensemble.n_features
        self._output = TreeOutput.resolve(model_output, self.ensemble, model)
        if self._output.transform != "identity" and feature_perturbation == "tree_path_dependent":
            raise ValueError(
                f"model_output={model_output!r} is explained interventionally only (as in shap): pass background "
                "rows `data` [B, M] and feature_perturbation='interventional' (or 'auto')."
            )
        self.dtype = check_dtype(dtype)
        if dtype is None and self.dtype == np.float32 and float64_model(self.ensemble):
            self.__dict__["x64_"] = True  # computed in float64 (locally), results as NumPy (see precision)
            self.dtype = np.dtype(np.float64)
        with precision(self):
            self._names, self._data_names, self._background_rows = feature_names, None, None
            self._background_weights = None
            if data is not None:
                self._read_background(data, recount=explicit == "tree_path_dependent")
            if feature_perturbation == "tree_path_dependent":
                require_cover(self.ensemble, "feature_perturbation='tree_path_dependent'")
            self.n_outputs = self._output.n_outputs
            self._output_names = declared_output_names(model, self.n_outputs)  # a classifier's classes_
            self._set_builder()

    def __getstate__(self) -> dict:
        """Pickled without its builds (device arrays, which would come back in JAX's default precision)."""
        skip = ("_builder", "_paths", "_background", "_interaction_builds", "_decomposition_tables")
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        with precision(self):
            self._set_builder()

    def _set_builder(self) -> None:
        """The builder of the ensemble's kernels, and the default build's routed paths and background
        rows (for interaction values, built on demand)."""
        self._builder = TreeBuilder(self.ensemble, self._background_rows, self.feature_perturbation == "interventional",
                                    self._output.transform, self.n_outputs, self.dtype, self.memory_budget,
                                    self._background_weights)
        default = self._default
        self._paths, self._background = default.paths, default.background

    def _widen(self, n_features: int) -> None:
        """Take ``n_features`` columns, for a model in shap's dictionary format, whose width only the
        rows tell: the trees are the same and the features past its last split get zero values."""
        self.ensemble = dataclasses.replace(self.ensemble, n_features=n_features)
        self.n_features = n_features
        if hasattr(self, "_builder"):
            self._set_builder()

    def _read_background(self, data: Any, recount: bool) -> None:
        """Keep ``data`` as prepared background rows; with ``recount`` (the path-dependent game
        asked for explicitly, as shap does) recount the node covers on them. An array or DataFrame
        of more than 100 rows gives shap's sample of 100, as shap's TreeExplainer keeps;
        ``maskers.Independent(data, max_samples=None)`` keeps every row, and a weighted summary
        (``.data`` and ``.weights``, such as ``shap.kmeans``) weighs its rows."""
        weights = None
        if hasattr(data, "data") and hasattr(data, "weights"):  # a masker or a weighted summary
            weights = None if data.weights is None else np.asarray(data.weights, np.float64).reshape(-1)
            data = np.asarray(data.data)
        else:
            data = shap_background(data, "TreeExplainer")
        bg, self._data_names = host_rows(data, "data", sparse_missing=self.ensemble.sparse_missing,
                                          categories=self.ensemble.categories,
                                          category_values=self.ensemble.category_values)
        self._check_n_features(bg, "data")
        if bg.shape[0] == 0:
            raise ValueError("`data` has no rows; pass at least one background row.")
        self._background_rows = self.ensemble.prepare(bg)
        self._background_weights = None if weights is None else weights / weights.sum()
        if recount:
            self.ensemble = cover_from_data(self.ensemble, self._background_rows, self._background_weights)

    def __call__(
        self,
        X: Any,
        key: Any = None,
        *,
        y: Any = None,
        tree_limit: int | None = None,
        approximate: bool = False,
        check_additivity: bool = True,
        interactions: bool | int | None = None,
        index: str | None = None,
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
          interactions: ``True``: the result's ``values`` (and ``interaction_values``) are the
            pairwise interaction values ``[n, M, M]`` (or ``[n, M, M, K]``), by default shap's
            SHAP interaction values (see :meth:`shap_interaction_values`); an int ``k``: the
            order-``k`` tensor ``[n] + [M] * k (+ [K])`` of the index's terms of orders ``1..k``,
            each set's term split evenly over the index tuples that hold exactly its features
            (:func:`jaxshap._estimators._interactions.interaction_tensor`; ``k = 2`` is shap's
            matrix). Exact, for the game of ``feature_perturbation``; raw output, default trees,
            ``approximate=False`` only.
          index: the interaction index: ``"k-SII"`` (default; for ``k = 2`` shap's SHAP
            interaction values, Lundberg et al. 2020), ``"SII"``, ``"STII"``, ``"FSII"`` or
            ``"BII"`` (see :class:`jaxshap.ExactExplainer`, which gives the same numbers from all
            ``2**M`` coalitions). Given without ``interactions``, the pairwise
            ``interaction_values`` are computed beside the SHAP ``values``.
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
        bar = ProgressBar(n_rows(X)) if wants_progress(progress) else None
        try:
            with precision(self):
                return as_host64(self, self._explain(X, y, tree_limit, approximate, check_additivity, interactions,
                                                     devices, bar, 0, index))
        finally:
            if bar is not None:
                bar.close()

    def shap_values(self, X: Any, y: Any = None, *, tree_limit: int | None = None, approximate: bool = False,
                    check_additivity: bool = True, **kwargs: Any) -> np.ndarray:
        """As shap's ``TreeExplainer.shap_values(X, y=None, tree_limit=None, approximate=False,
        check_additivity=True)``: NumPy ``[n, M]`` or ``[n, M, K]`` (``[M]`` for one 1-D row)."""
        return super().shap_values(X, y=y, tree_limit=tree_limit, approximate=approximate,
                                   check_additivity=check_additivity, **kwargs)

    def decompose(self, X: Any, max_order: int | None = None) -> Decomposition:
        r"""The exact interventional functional decomposition of the model at the rows of ``X``.

        ``m_S(x) = sum_{T subseteq S} (-1)^{|S|-|T|} v_x(T)`` with ``v_x(T) = mean_b f(x_T, b_{-T})``
        over the background rows ``data``, so ``f(x) = intercept + sum_S m_S(x)`` with
        ``intercept = v_x(emptyset)`` the mean raw output over the background (Hiabu, Meyer &
        Wright, 2023, "Unifying local and global model explanations by functional
        decomposition of low dimensional structures", AISTATS; the R package glex). Each leaf
        only gives components inside the set of features its path tests: main effects and
        pairs are gathered from tables over the features' threshold cells, built once, and each
        higher-order component from the subsets of each path's distinct features, per row (see
        :mod:`jaxshap._tree._decomposition`). The raw output of the default trees is decomposed.

        Args:
          X: rows ``[n, M]``, as for :meth:`__call__`.
          max_order: compute the components of at most this many features only; the rest is
            summed in ``remainder`` (``None``: every order).

        Returns:
          A :class:`jaxshap.Decomposition`: ``components`` ``{S: [n]}`` (``[n, K]`` for ``K``
          outputs), ``intercept``, ``remainder``, ``shap_values()`` (the interventional SHAP
          values), ``importance()``, ``without(features)`` and ``predict()``.

        Raises:
          ValueError: without background ``data``, for a ``model_output`` other than ``"raw"``,
            a bad ``max_order``, or paths with too many distinct features for ``memory_budget``.
        """
        with precision(self):
            return decompose(self, X, max_order)

    @property
    def expected_value(self) -> Any:
        """The base value: ``[K]`` (a scalar for a single output); for ``log_loss``, whose base
        value depends on the label, a function of the label ``y``, as shap's:
        ``explainer.expected_value(y)`` is the mean loss over the background at label ``y``."""
        with precision(self):
            return to_host(self._output.expected_value(self._default, self.dtype))

    # --- the default build's internals (tests read them) --------------------------------------
    @property
    def _default(self) -> Build:
        return self._builder.build(self.ensemble.default_rounds, False)

    def _rows_per_chunk(self, n_rows: int, build: Build | None = None) -> int:
        """Rows per chunk of ``n_rows`` rows under ``memory_budget``."""
        build = self._default if build is None else build
        return self._builder.runner(build, False)._plan(n_rows)[0]
