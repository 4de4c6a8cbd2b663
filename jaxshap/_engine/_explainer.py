r"""The base class of the model-agnostic explainers: what they share, in small parts, the links
(the scale on which coalition values are attributed) included.

An explainer binds a model and a masker once; calling it validates the rows (:meth:`_validate`,
with :mod:`._inputs`), plans chunks under the memory budget (:meth:`_plan`, with
:mod:`._chunking`), runs one compiled program over the rows (:func:`._program.run_rows`, which
also pads rows to a few capacities, shards them over devices and cuts
host-level blocks), and wraps the results (:meth:`_wrap`). Streams are cut by
:mod:`jaxshap._core._chunking`; progress is drawn there too. Subclasses only say how many
coalitions a row needs, how much working memory their estimator needs per row, and which
estimator kernel turns coalition values into attributions.

**Compile once.** Explainers are pytrees: their arrays (the masker's background, the model's
parameters when the model is a pytree or a ``functools.partial`` over arrays) are leaves and
everything else is static configuration (see :mod:`._pytree`). So ``jax.jit`` and ``jax.grad``
take an explainer as an argument, gradients with respect to the model's parameters need no
rebuilding, and the one module-level compiled program (:func:`._program.block_program`) serves
every explainer with the same configuration and shapes: a second instance, or one built per step
of a training loop, does not recompile. Concrete rows are padded to a few capacities (the padded
chunks are skipped, not evaluated), so a new number of rows rarely compiles either.

Scale (see :meth:`ModelAgnosticExplainer.__call__` and :meth:`ModelAgnosticExplainer.explain_batches`):

* memory: the working set is one chunk, sized from ``memory_budget`` (model evaluations plus the
  estimator's own working set); only the inputs and the results (``[n, M]``) grow with the
  number of rows. Chunk bodies are rematerialised under ``jax.grad``, so the gradient's memory
  is bounded by a chunk too;
* devices: rows sharded over a mesh (``NamedSharding`` on the row axis) are explained where
  they lie, with :func:`jax.shard_map`; ``devices=`` shards them on request; a mesh that spans
  several processes (``jax.distributed``) explains a data set across hosts;
* host-level blocks: with a progress bar, or when streaming batches, the compiled program runs
  on successive blocks of rows of one fixed shape (compiled once).

Row ``i`` (counted from the first row of the call or of the stream) is always explained with
the key ``fold_in(key, i)``, so results do not depend on chunks, blocks, batches or devices
(beyond float rounding: differently shaped batches may sum in a different order).

**Links** (shap's ``link``). With ``link="logit"`` the explained game is
:math:`g(S) = \operatorname{logit} v(S)`, the log-odds of the coalition's expected probability,
as ``shap.KernelExplainer(..., link="logit")``: the values then add up to
``logit f(x) - logit E[f(X)]`` (Lundberg & Lee, 2017, section 4). :func:`identity` and
:func:`logit` (each with its ``inverse``, as shap's) are ``jaxshap.links``; :func:`resolve_link`
reads the ``link=`` argument and :func:`check_link_outputs` refuses ``"logit"`` for a model whose
outputs are not probabilities.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core._categorical import as_frame_model, encode_categories
from .._core._chunking import chunk_capacity, map_chunks, plan_chunks
from .._core._inputs import (
    align_columns,
    as_matrix,
    check_finite_rows,
    check_missing_for_model,
    check_n_features,
    default_output_names,
    is_traced,
    resolve_feature_names,
)
from .._core._model import is_host_model, model_errors, wrap_model
from .._core._validate import DEFAULT_MEMORY_BUDGET, memory_budget as check_memory_budget
from .._result._explanation import Explanation
from ..maskers import Independent, Masker
from ..maskers._causal import player_masker
from ._host_model import map_rows, run_staged, staged_rows
from ._program import host_or_device
from ._rows import RowExplainer
from ._shap_api import SHAP_BACKGROUND_ROWS, ShapAPI, is_rows, precision, warn_large_background


ValueFn = Callable[[jax.Array], jax.Array]


@jax.jit
def _drop_output_axis(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda a: a[..., 0], tree)


def drop_output_axis(tree: Any) -> Any:
    """Drop the trailing output axis ``K = 1`` of every leaf (through NumPy on a CPU, so a new
    number of rows compiles nothing)."""
    return host_or_device(lambda a: a[..., 0], _drop_output_axis, tree)


def as_masker(masker: Any, max_samples: int | None = None, who: str = "explainer") -> Any:
    """A masker as given, or ``Independent(masker, max_samples)`` for a background array or
    DataFrame (``max_samples=None`` keeps every row, with shap's advice above 100 rows).

    Raises:
      TypeError: for an object with ``coalition_values`` that does not subclass
        :class:`jaxshap.maskers.Masker` (whose attribution hooks the explainers call).
    """
    if isinstance(masker, Masker):
        return masker
    if hasattr(masker, "coalition_values"):
        raise TypeError(
            f"the masker ({type(masker).__name__}) does not subclass jaxshap.maskers.Masker; subclass it: the "
            "base class supplies the attribution hooks the explainers call (Shapley values by default) and "
            "registers the masker as a pytree."
        )
    if masker is None:
        raise ValueError(
            "`background` is required: pass background rows [B, M] (for example 100 training rows) "
            "or a masker such as jaxshap.maskers.Independent(data)."
        )
    if callable(masker) and not hasattr(masker, "shape"):
        raise TypeError(
            f"{who} got a function as its masker; shap's function maskers (masker(mask, x) -> rows) are taken by "
            "jaxshap.Explainer(model, masker), which learns the number of features from the rows it explains."
        )
    if max_samples is None and is_rows(masker):
        warn_large_background(int(masker.shape[0]), who)
    return Independent(masker, max_samples=max_samples)


class ModelAgnosticExplainer(ShapAPI, RowExplainer):
    r"""Base class of the model-agnostic explainers (not used directly).

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable, or a plain NumPy callable
        such as a scikit-learn ``predict`` (evaluated on the host, in batches).
      background: background rows ``[B, M]`` (array or DataFrame), used through
        ``jaxshap.maskers.Independent(background, max_samples=background_rows)``: the
        class's ``background_rows`` is shap's for the class of that name (100 rows, shap's
        sample, for Exact and Permutation; every row for Kernel); or a masker
        (``maskers.Independent(data, max_samples=None)`` keeps every row).
      feature_names: optional names of the ``M`` features; by default the columns of a
        DataFrame background or of the explained rows, else ``Feature j``.
      memory_budget: bytes of working memory that one chunk of model evaluations may use
        (default :data:`jaxshap.DEFAULT_MEMORY_BUDGET`, 512 MiB). The rows' coalitions are
        evaluated in chunks of whole rows (or, when one row does not fit, of coalitions) whose
        inputs, model activations and outputs fit the budget, so memory grows with the chunk
        and not with the number of rows; only the inputs and results (``[n, M]``) are held in
        full. On a CPU chunks are further capped at the cache-friendly
        :data:`jaxshap._core._chunking.CPU_CHUNK_BYTES`. Results do not depend on the budget.
      groups: groups of columns as the players (a list of lists of column positions or names, or
        a dict ``{name: columns}``; a partition of the columns): see
        :class:`jaxshap.maskers.Grouped`. The explanation then has one value per group, the group
        names as ``feature_names`` and ``data=None``; ``feature_names=`` names the columns (for
        a background without names).
      causal_ordering: a partial causal order, the chain components first to last (a list of
        lists of features, or of groups with ``groups``), as shapr's.
      confounding: ``None`` (default: the masker's own values), one bool, or one per component:
        causal Shapley values :math:`E[f(X) \mid do(X_S = x_S)]` drawn through the masker's
        conditional distribution (:class:`jaxshap.maskers.Causal`; ``causal_ordering``
        defaults to one component).
      asymmetric: asymmetric Shapley values over ``causal_ordering``
        (:class:`jaxshap.maskers.Asymmetric`; ``KernelExplainer`` refuses them).

    An explainer is a pytree (arrays are leaves, the configuration is static), so it can be an
    argument of ``jax.jit`` and ``jax.grad``::

        explain = jax.jit(lambda ex, X: ex(X).values)
        explain(ExactExplainer(partial(mlp, params), background), X)   # compiled once
        grads = jax.grad(lambda ex: (ex(X).values ** 2).sum())(explainer)
        grads.model.leaves                                             # d loss / d params
    """

    background_rows: int | None = SHAP_BACKGROUND_ROWS
    """Rows of a background array or DataFrame kept (``None``: all), as shap's class of that name."""

    stages_host_model = True
    """Whether a host model runs between two compiled programs that the store keeps
    (:mod:`jaxshap._engine._host_model`) rather than inside one through a callback."""

    keeps_host_dtype = True
    """A host (NumPy) model given float64 rows gets them in float64: the explainer computes in
    float64 (``jax.enable_x64``) then (see :func:`jaxshap._engine._shap_api.host_float64`)."""

    def __init__(
        self,
        model: Callable,
        background: Any,
        *,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        link: Any = "identity",
        groups: Any = None,
        causal_ordering: Any = None,
        confounding: Any = None,
        asymmetric: bool = False,
    ):
        self.link = resolve_link(link)
        masker = as_masker(background, self.background_rows, type(self).__name__)
        self.masker = player_masker(masker, groups, causal_ordering, confounding, asymmetric, feature_names)
        if self.masker.n_columns != self.masker.n_features:  # the players are groups; feature_names named the columns
            feature_names = None
        self.memory_budget = check_memory_budget(memory_budget)
        self.n_features = self.masker.n_features
        self._check_n_features(self.n_features)
        n_columns, probe = self.masker.n_columns, self.masker.probe_rows
        model = as_frame_model(model, self.masker.column_names, self.masker.column_categories, probe,
                               lambda: is_host_model(model, n_columns))
        self.model = wrap_model(model, n_columns, self.masker.dtype, probe)
        with model_errors():
            self.masker.check_model(self.model.fn)
        if self.link != "identity":
            with model_errors():
                check_link_outputs(self.link, self.model.fn(jnp.asarray(self.masker.probe_rows[:256])))
        self._names = None if feature_names is None else tuple(str(n) for n in feature_names)
        self.expected_value_cache_ = None  # a trailing underscore: not part of the pytree

    # --- shap's explainer surface (pickling, expected_value) ------------------------------------
    def __getstate__(self) -> dict:
        """Pickle the user's model and the masker; the wrapped model and compiled code are rebuilt."""
        state = self.__dict__.copy()
        state["model"] = self.model.model  # the user's model, rebuilt around its arrays
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.model = wrap_model(state["model"], self.masker.n_columns, self.masker.dtype, self.masker.probe_rows)

    @property
    def expected_value(self) -> Any:
        """The base value ``link(v(empty))``, ``E[f(X)]`` over the masker: a NumPy scalar for a
        single-output model, else ``[K]``, as shap's ``explainer.expected_value``."""
        if getattr(self, "expected_value_cache_", None) is None:
            empty = jnp.zeros((1, self.n_features), bool)
            f = self.model.fn
            if self.model.is_host and self.masker.calls_model_once:  # called here, eagerly: its full precision
                f = lambda rows: jnp.asarray(self.model.evaluate_on_host(np.asarray(rows)))  # noqa: E731
            with model_errors(), precision(self):
                v = self.masker.coalition_values(f, jnp.asarray(self.masker.probe_rows[0]), empty)
                v = np.asarray(link_function(self.link)(v))[0]
            self.expected_value_cache_ = v[0] if self.model.single_output else v
        return self.expected_value_cache_

    def __repr__(self) -> str:
        chosen = getattr(self, "chosen_by_auto", None)
        note = f", chosen by jaxshap.Explainer: {chosen}" if chosen else ""
        return (
            f"{type(self).__name__}(features={self.n_features}, outputs={self.model.n_outputs}, "
            f"masker={self.masker!r}, link={self.link!r}{note})"
        )

    # --- what subclasses define ------------------------------------------------------------
    def _check_n_features(self, n_features: int) -> None:
        """Raise for feature counts this estimator cannot handle."""

    def _coalitions_per_row(self) -> int:
        raise NotImplementedError

    def _working_set_per_row(self) -> int:
        """Bytes the estimator itself holds per row besides model evaluations (masks, designs,
        Gram matrices), counted by the chunk planner. Subclasses refine it."""
        itemsize = np.dtype(self.masker.dtype).itemsize
        c, m, k = self._coalitions_per_row(), self.n_features, self.model.n_outputs
        return c * (m + 2 * itemsize * k)  # boolean masks and the coalition values (with their weights)

    def _solve_set_per_row(self) -> int:
        """Bytes the estimator holds per row only once the row's model evaluations are done (its
        solve's temporaries), counted by the chunk planner against the budget but not against the
        evaluations' chunk (:func:`jaxshap._core._chunking.chunk_capacity`). Subclasses refine it."""
        return 0

    def _estimate(self, key: jax.Array, value_fn: ValueFn) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """Return ``(phi [M, K], base [K], stderr [M, K] or None)`` for one row."""
        raise NotImplementedError

    # --- planning ---------------------------------------------------------------------------
    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, int]:
        """``(rows_per_chunk, coalitions_per_chunk)`` for ``n_rows`` rows under the memory budget.

        With ``exact`` the chunks are balanced over exactly ``n_rows`` rows; else the largest
        chunk that fits (one plan for any number of rows, so programs are shared).
        """
        args = (
            self._coalitions_per_row(),
            self.masker.evals_per_coalition,
            self.model.bytes_per_row + np.dtype(self.masker.dtype).itemsize * self.masker.n_columns,
            self.memory_budget,
            self._working_set_per_row(),
            self.masker.bytes_per_coalition,
            self._solve_set_per_row(),
        )
        if exact:
            return plan_chunks(n_rows, *args)
        return chunk_capacity(*args)

    def _evals_per_row(self) -> int:
        return self._coalitions_per_row() * self.masker.evals_per_coalition

    def _explain_local(self, X, keys, rows_per_chunk, coalitions_per_chunk, n_valid=None):
        """Explain rows ``X [b, M]`` with per-row keys ``keys [b]``, chunk by chunk (traced).

        Chunks of rows that start at or past ``n_valid`` (a traced count, or ``None``) are skipped.
        """
        body = lambda value_fn, x, k: self._estimate(k, value_fn)  # noqa: E731
        return self._map_rows(body, X, (keys,), rows_per_chunk, coalitions_per_chunk, n_valid)

    def _map_rows(self, body, X, rest, rows_per_chunk, coalitions_per_chunk, n_valid=None):
        """``body(value_fn, x, *rest_row)`` for every row, ``value_fn`` the row's game; ``body``
        calls it once. See :func:`jaxshap._engine._host_model.map_rows`."""
        return map_rows(self, body, X, rest, rows_per_chunk, coalitions_per_chunk, n_valid)

    def _game(self, x: jax.Array, model: Callable, coalitions_per_chunk: int) -> ValueFn:
        """The game of row ``x``: coalitions ``[C, M]`` to linked values ``[C, K]``, ``model``
        evaluated through the masker ``coalitions_per_chunk`` coalitions at a time."""
        masker, link = self.masker, link_function(self.link)
        return lambda masks: link(map_chunks(lambda part: masker.coalition_values(model, x, part), masks, coalitions_per_chunk))

    def _run(self, X, key, offset, devices, bar, blocked):
        """Explain validated rows (see :meth:`RowExplainer._run`); a host model between two
        compiled programs when it can be (:mod:`jaxshap._engine._host_model`)."""
        rows = staged_rows(self, X, key, devices)
        if rows:
            return run_staged(self._call_core(X, key)._with_shared_work(key), X, key, offset, rows, bar)
        return super()._run(X, key, offset, devices, bar, blocked)

    def _with_shared_work(self, key: jax.Array) -> "ModelAgnosticExplainer":
        """This explainer with the work that every row of a call shares done once, for a call
        whose rows run as several programs (a host model in stages). Default: none is shared."""
        return self

    def _n_columns(self) -> int:
        return self.masker.n_columns

    def _align(self, X: Any) -> Any:
        return align_columns(X, self.masker.column_names, "X")

    def _validate(self, X: Any) -> jax.Array:
        # NaN in X is passed to the model, as shap does (XGBoost and others handle missing values);
        # a model that raises or returns NaN on those rows is named before it runs, and a model
        # output that is NaN or inf elsewhere is reported by _wrap, naming the rows.
        X = align_columns(X, self.masker.column_names, "X")
        X = encode_categories(X, self.masker.column_categories, self.masker.column_names)  # labels: the masker's codes
        X = as_matrix(X, "X", dtype=self.masker.dtype)
        check_n_features(X, self.masker.n_columns, "X", "the background")
        check_missing_for_model(X, self.model.model if self.model.is_host else self.model.fn)
        return X

    def _wrap(self, phi, base, stderr, X, names) -> Explanation:
        if self.model.single_output:
            phi, base, stderr = drop_output_axis((phi, base, stderr))
        if isinstance(X, jax.Array) and not is_traced(X) and X.is_fully_addressable:
            check_finite_rows(base, "X", "the model's output on the background (the base value)")
            check_finite_rows(phi, "X", "the model's output (and so its SHAP values)", X)
        data = X
        if self.masker.n_columns != self.n_features:  # groups as players: no single value per group to show
            data, names = None, None
        feature_names = resolve_feature_names(self._names, self.n_features, self.masker.feature_names, names)
        outputs = None
        if not self.model.single_output:
            outputs = self.model.output_names or default_output_names(self.model.n_outputs)
        return Explanation(phi, base, data, stderr, feature_names, outputs)


LINKS = ("identity", "logit")


def identity(v: jax.Array) -> jax.Array:
    """The identity link: values are attributed on the model's own scale."""
    return v


def logit(p: jax.Array) -> jax.Array:
    r"""``log(p / (1 - p))``, finite at exactly 0 and 1.

    Probabilities are first clipped to ``[eps, 1 - eps]`` with ``eps`` the gap below 1 of the
    floating type (``2**-24`` in float32, ``2**-53`` in float64), the closest a probability can
    come to 1 and still differ from it, so ``logit(0) = -logit(1)`` is about -16.6 in float32
    (-36.7 in float64) instead of -inf; inside that range the result is the exact
    :math:`\log p - \log(1 - p)`.
    """
    eps = jnp.finfo(p.dtype).epsneg
    q = jnp.clip(p, eps, 1 - eps)
    return jnp.log(q) - jnp.log1p(-q)


def _logistic(x: jax.Array) -> jax.Array:
    """The inverse of :func:`logit`: ``1 / (1 + exp(-x))``."""
    return jax.nn.sigmoid(x)


identity.inverse = identity
logit.inverse = _logistic


def resolve_link(link: Any) -> str:
    """The link's name: ``"identity"`` or ``"logit"`` (shap's ``shap.links`` functions are accepted).

    Raises:
      ValueError: for any other link, naming the two that exist.
    """
    name = getattr(link, "__name__", link)
    if isinstance(name, str) and name in LINKS:
        return name
    raise ValueError(
        f"`link` must be 'identity' or 'logit' (the log-odds of a probability output); got {link!r}."
    )


def link_function(name: str) -> Callable[[jax.Array], jax.Array]:
    """The function of a link name."""
    return identity if name == "identity" else logit


def check_link_outputs(name: str, outputs: Any) -> None:
    """Raise when ``link="logit"`` is given a model whose outputs are not probabilities.

    Raises:
      ValueError: when an output on the background rows lies outside ``[0, 1]``.
    """
    if name != "logit":
        return
    y = np.asarray(outputs)
    outside = ~((y >= 0) & (y <= 1))
    if outside.any():
        bad = y[outside].reshape(-1)[0]
        raise ValueError(
            "link='logit' explains the log-odds of a probability, but the model returned "
            f"{float(bad)!r} on the background, outside [0, 1]. Pass a model that returns probabilities "
            "(such as clf.predict_proba), or use link='identity' for margins and other outputs."
        )
