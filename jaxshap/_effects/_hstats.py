r"""Friedman & Popescu's H statistics of interaction strength.

Every statistic compares partial dependences evaluated at the data rows themselves, each
centred to mean zero over the rows (Friedman & Popescu, 2008, "Predictive learning via rule
ensembles", section 8, eqs. 44-48; the R package ``hstats`` computes them the same way):

* :math:`\hat F_S(x^{(i)}_S) = \frac1n\sum_b f(x^{(i)}_S, x^{(b)}_{\bar S})`, centred over ``i``;
* overall :math:`H^2_j = \sum_i (\hat f(x^{(i)}) - \hat F_j - \hat F_{\setminus j})^2 / \sum_i \hat f(x^{(i)})^2`;
* pairwise :math:`H^2_{jk} = \sum_i (\hat F_{jk} - \hat F_j - \hat F_k)^2 / \sum_i \hat F_{jk}^2`;
* three-way :math:`H^2_{jkl} = \sum_i (\hat F_{jkl} - \hat F_{jk} - \hat F_{jl} - \hat F_{kl}
  + \hat F_j + \hat F_k + \hat F_l)^2 / \sum_i \hat F_{jkl}^2`;
* total :math:`H^2 = \sum_i (\hat f(x^{(i)}) - \sum_j \hat F_j)^2 / \sum_i \hat f(x^{(i)})^2`,
  the share of prediction variance the main effects leave unexplained.

All the partial dependences one call needs are one list of (row, feature set) units, evaluated
in one compiled program by :func:`jaxshap._effects._partial_dependence.pd_units`.
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core._validate import DEFAULT_MEMORY_BUDGET
from .._core._inputs import check_finite_outputs
from .._core._inputs import default_output_names
from .._core._model import Model, wrap_model
from .._core._validate import integer, is_integer
from .._coalitions._combinatorics import mobius, mobius_plan
from ._partial_dependence import (
    MIXED_ROWS_HINT,
    check_budget,
    check_n_max,
    check_set_count,
    feature_index,
    pd_units,
    sets_up_to,
    split_rows,
    subsample,
    units_per_chunk,
)
from ._frames import frame_inputs, host_precision

# A denominator no larger than n * (NOISE_ULPS * eps * max|f|)^2 is rounding noise: the
# partial dependence in it is constant, and the statistic (then 0/0) is defined as 0.
NOISE_ULPS = 64


# --- building blocks (pure) -------------------------------------------------------------------


def set_masks(n_features: int, sets: Sequence[tuple[int, ...]], complement: bool = False) -> np.ndarray:
    """Boolean ``[len(sets), M]`` masks of the feature sets (or of their complements)."""
    masks = np.zeros((len(sets), n_features), dtype=bool)
    for r, s in enumerate(sets):
        masks[r, list(s)] = True
    return ~masks if complement else masks


def centred_pds(
    model: Model,
    rows: jax.Array,
    masks: np.ndarray,
    memory_budget: int,
    then: Callable | None = None,
    then_args: Any = None,
    row_ids: Any = None,
):
    """Predictions and partial dependences at the rows, all centred over the rows.

    Args:
      model: the wrapped model.
      rows: ``[n, M]``; both the evaluation points and the rows averaged over.
      masks: ``[S, M]`` feature sets.
      memory_budget: bytes one chunk of model evaluations may use.
      then: optional function of the three results (and of ``then_args`` as keywords), compiled
        into the same program (so the statistics cost no extra compilation); its result is
        returned instead. A module-level function, so the program is reused across calls.
      then_args: a dict of arrays passed to ``then`` as keyword arguments (traced, not static).
      row_ids: the rows' positions in the user's ``X`` (before subsampling), for error messages.

    Returns:
      ``(f [n, K], F [S, n, K], floor [K])``: centred predictions, centred partial dependences
      (``F[s, i] = F_{S_s}(x^{(i)}_{S_s})``) and the noise floor of a sum of ``n`` squares.

    Raises:
      ValueError: when the model returns NaN or inf at a row, or for a partial dependence at a
        row (a NaN would make the statistics' noise floor NaN, and every ratio 0: "no
        interaction", silently). Checked on concrete values only.
    """
    n, m = rows.shape
    chunk = units_per_chunk(model, masks.shape[0] * n, n, m, rows.dtype.itemsize, memory_budget)
    result, (finite_f, finite_pd) = _centred_program(
        model, rows, jnp.asarray(masks), {} if then_args is None else then_args, chunk, then
    )
    check_finite_outputs(finite_f, "`model`", row_ids=row_ids, source=" of `X`")
    check_finite_outputs(finite_pd, "`model`", row_ids=row_ids, source=" of `X` (partial dependence)",
                         hint=MIXED_ROWS_HINT)
    return result


@partial(jax.jit, static_argnums=(4, 5))
def _centred_program(model: Model, rows: jax.Array, masks: jax.Array, then_args: Any, chunk: int, then: Callable | None):
    """The compiled body of :func:`centred_pds`: module-level, so it compiles once per
    configuration (the model's static part, shapes, chunk and ``then``) and not once per call."""
    n = rows.shape[0]
    n_sets = masks.shape[0]
    f = model.fn(rows)
    if n_sets:
        point = jnp.tile(jnp.arange(n), n_sets)
        which = jnp.repeat(jnp.arange(n_sets), n)
        pd = pd_units(model.fn, rows, rows, masks, point, which, chunk)
        pd = pd.reshape(n_sets, n, -1)
    else:
        pd = jnp.zeros((0, n, f.shape[-1]), f.dtype)
    eps = jnp.finfo(f.dtype).eps
    floor = n * (NOISE_ULPS * eps * jnp.max(jnp.abs(f), axis=0)) ** 2
    out = f - f.mean(0), pd - pd.mean(1, keepdims=True), floor
    finite = jnp.isfinite(f).all(-1), jnp.isfinite(pd).all(-1).all(0)
    return (out if then is None else then(*out, **then_args)), finite


def safe_ratio(num: jax.Array, den: jax.Array, floor: jax.Array) -> jax.Array:
    """``num / den``, and 0 where ``den`` is at the rounding-noise floor (0/0: no interaction)."""
    ok = den > floor
    return jnp.where(ok, num / jnp.where(ok, den, 1), 0.0)


def sum_sq(x: jax.Array) -> jax.Array:
    """Sum of squares over the rows axis (second to last)."""
    return jnp.sum(x * x, axis=-2)


# --- argument handling ------------------------------------------------------------------------


def resolve_tuples(spec: Any, names: Sequence[str], size: int, arg: str) -> tuple[tuple[int, ...], ...]:
    """A sequence of feature pairs/triples (positions or names) as sorted, distinct index tuples."""
    try:
        items = list(spec)
    except TypeError:
        raise TypeError(f"`{arg}` must be a sequence of {size}-tuples of feature positions or names.") from None
    out = []
    for item in items:
        if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or len(item) != size:
            raise ValueError(f"`{arg}`: each entry must name {size} features, like {tuple(range(size))}; got {item!r}.")
        idx = tuple(sorted(feature_index(v, names, arg) for v in item))
        if len(set(idx)) != size:
            raise ValueError(f"`{arg}`: the entry {item!r} repeats a feature.")
        if idx not in out:
            out.append(idx)
    return tuple(out)


def result_output_names(model: Model) -> tuple[str, ...] | None:
    return None if model.single_output else default_output_names(model.n_outputs)


# --- the result -------------------------------------------------------------------------------


@jax.tree_util.register_pytree_node_class
class HStatistics:
    r"""Squared H statistics (Friedman & Popescu, 2008), a pytree of arrays with static metadata.

    For a model with ``K`` outputs every array gets a trailing ``K`` axis; each output has its
    own statistics.

    Attributes:
      overall: ``[M]``: :math:`H^2_j`, the share of prediction variance that comes from
        interactions of feature ``j`` with any others.
      pairwise: ``[M, M]``, symmetric: :math:`H^2_{jk}`, the share of the variance of the joint
        partial dependence of ``j`` and ``k`` that their main effects do not explain. The
        diagonal is 0; pairs that were not computed (see ``pairs``) are NaN.
      total: scalar: :math:`H^2`, the share of prediction variance not explained by the sum
        of the main effects.
      threeway: ``[T]``: :math:`H^2_{jkl}` for the requested ``triples``, or ``None``.
      by_order: with ``order=k``, ``{j: {S: H^2_S}}`` for ``j = 2 .. k``: every set ``S`` of
        ``j`` features (a sorted index tuple), :math:`H^2_S = \sum_i g_S^2 / \sum_i \hat F_S^2`
        with :math:`g_S` the inclusion-exclusion of the centred partial dependences of the
        subsets of ``S``; ``by_order[2]`` holds the values of ``pairwise``. ``None`` without ``order``.
      feature_names: the ``M`` feature names (static).
      pairs: the computed pairs, sorted index tuples (static).
      triples: the computed triples (static).
      output_names: the ``K`` output names, or ``None`` for a single output (static).
      order: the ``order`` asked for, or ``None`` (static).
    """

    def __init__(self, overall, pairwise, total, threeway, feature_names, pairs, triples, output_names,
                 by_order=None, order=None):
        self.overall = overall
        self.pairwise = pairwise
        self.total = total
        self.threeway = threeway
        self.feature_names = tuple(feature_names)
        self.pairs = tuple(tuple(p) for p in pairs)
        self.triples = tuple(tuple(t) for t in triples)
        self.output_names = None if output_names is None else tuple(output_names)
        self.by_order = by_order
        self.order = None if order is None else int(order)

    def tree_flatten(self):
        children = (self.overall, self.pairwise, self.total, self.threeway, self.by_order)
        return children, (self.feature_names, self.pairs, self.triples, self.output_names, self.order)

    @classmethod
    def tree_unflatten(cls, aux, children):
        *arrays, by_order = children
        *names, order = aux
        return cls(*arrays, *names, by_order, order)

    def ranked_pairs(self, output: int = 0) -> list[tuple[str, str, float]]:
        """The computed pairs as ``(name_j, name_k, H^2_jk)``, strongest first (for one output)."""
        pw = np.asarray(self.pairwise)
        if pw.ndim == 3:
            pw = pw[..., output]
        rows = [(self.feature_names[j], self.feature_names[k], float(pw[j, k])) for j, k in self.pairs]
        return sorted(rows, key=lambda r: -r[2])

    def __repr__(self) -> str:
        k = "" if self.output_names is None else f", outputs: {len(self.output_names)}"
        k += "" if self.order is None else f", order: {self.order}"
        return (
            f"HStatistics(features: {len(self.feature_names)}, pairs: {len(self.pairs)}, "
            f"triples: {len(self.triples)}{k}, total: {np.array2string(np.asarray(self.total), precision=4)})"
        )


# --- the public function ----------------------------------------------------------------------


@host_precision
def h_statistic(
    model: Callable,
    X: Any,
    *,
    n_max: int = 500,
    key: Any = None,
    pairs: Any = None,
    triples: Any = None,
    order: int | None = None,
    feature_names: Sequence[str] | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> HStatistics:
    r"""Friedman & Popescu's squared H statistics: overall, pairwise, total and three-way.

    With :math:`\hat f` the centred predictions and :math:`\hat F_S` the centred partial
    dependences, all evaluated at the (subsampled) rows of ``X`` and averaged over the same
    rows (Friedman & Popescu, 2008, "Predictive learning via rule ensembles", eqs. 44-48):

    .. math::

        H^2_j = \frac{\sum_i [\hat f(x^{(i)}) - \hat F_j(x^{(i)}_j) - \hat F_{\setminus j}(x^{(i)}_{\setminus j})]^2}
                     {\sum_i \hat f(x^{(i)})^2}, \qquad
        H^2_{jk} = \frac{\sum_i [\hat F_{jk}(x^{(i)}_{jk}) - \hat F_j(x^{(i)}_j) - \hat F_k(x^{(i)}_k)]^2}
                        {\sum_i \hat F_{jk}(x^{(i)}_{jk})^2},

    :math:`H^2 = \sum_i [\hat f(x^{(i)}) - \sum_j \hat F_j(x^{(i)}_j)]^2 / \sum_i \hat f(x^{(i)})^2`,
    and :math:`H^2_{jkl}` by inclusion-exclusion of the lower-order partial dependences. These
    match the R package ``hstats`` (Mayer) with ``approx = FALSE`` and no weights.

    Cost: ``n (2M + P + T) n`` model evaluations for ``n = min(len(X), n_max)`` rows, ``P``
    pairs and ``T`` triples, in one compiled program chunked under ``memory_budget`` (plus a
    second program for the pairs when ``pairs`` is an int).

    A model that returns NaN or inf at a row (or for a partial dependence at a row) raises a
    ``ValueError`` naming the rows. A denominator that is zero up to rounding (the partial dependence, or the model, is constant
    on the rows) makes its statistic 0: no variance, hence no interaction. A model with ``K``
    outputs gets separate statistics per output, on a trailing axis.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable or a plain NumPy callable.
      X: data rows ``[n, M]`` (array or DataFrame; a pandas ``category`` column is read as its
        codes, and a host model fitted on a DataFrame is called with the frame rebuilt from the
        rows, and a host model given float64 rows computes in float64, as the explainers do).
      n_max: use at most this many rows, drawn without replacement with ``key``.
      key: PRNG key (or int seed) for that subsample; ``None`` means ``jax.random.key(0)``.
      pairs: which pairwise statistics to compute: ``None`` for all ``M (M - 1) / 2`` pairs;
        an int ``m`` for all pairs among the ``m`` features with the largest overall
        statistic (summed over outputs), as ``hstats``'s ``pairwise_m``; or a sequence of pairs
        of feature positions or names.
      triples: a sequence of feature triples for three-way statistics (their pairs are computed
        too); ``None`` for none.
      order: ``None``, or ``k >= 2`` for :math:`H^2_S` of every set of ``j = 2 .. k`` features
        in ``by_order`` (Friedman & Popescu's statistic generalised to ``j`` features):
        :math:`H^2_S = \sum_i g_S(x^{(i)})^2 / \sum_i \hat F_S(x^{(i)}_S)^2` with
        :math:`g_S = \sum_{T \subseteq S} (-1)^{|S|-|T|} \hat F_T` (:math:`\hat F_\emptyset = 0`),
        the interaction of exactly the features of ``S``; it equals ``pairwise`` for ``j = 2``
        and ``threeway`` for ``j = 3``. Costs ``sum_{j <= k} C(M, j)`` sets of ``n^2`` model
        evaluations (with the ``M`` complements), computed exactly up to 65,535 sets; excludes ``pairs``.
      feature_names: names of the ``M`` features (default: DataFrame columns, else ``Feature j``).
      memory_budget: bytes of working memory one chunk of model evaluations may use.

    Returns:
      An :class:`HStatistics`.

    Raises:
      ValueError: for NaN/inf in ``X`` or in the model's output, bad ``n_max``, features out of range, unknown names,
        malformed pairs or triples, an ``order`` outside 2 to ``M``, with ``pairs``, or with more sets
        than can be computed (naming ``order`` and the cost).
      TypeError: for a model that cannot be called or arguments of the wrong type.
    """
    model, X, names, _, _ = frame_inputs(model, X, feature_names)
    budget = check_budget(memory_budget)
    n_max = check_n_max(n_max, allow_none=False)
    m = X.shape[1]
    triple_list = () if triples is None else resolve_tuples(triples, names, 3, "triples")
    top_m, pair_list, order = _requested_pairs(pairs, order, names)
    rows, row_ids = subsample(X, n_max, key, return_index=True)
    wrapped = wrap_model(model, m, X.dtype, rows[:2])

    # Phase 1 (the only one unless `pairs` is an int): every feature set the statistics need.
    singles = [(j,) for j in range(m)]
    complements = [tuple(k for k in range(m) if k != j) for j in range(m)]
    sets = singles + complements
    family = []  # with `order`: every set of up to `order` features, closed under subsets
    if order is not None:
        check_set_count(m, order, rows.shape[0], "order")
        family = _unique(sets_up_to(m, order) + list(triple_list))
    if top_m is None:
        sets += _with_subpairs(pair_list, triple_list) + list(triple_list) + family
    else:
        f, F, floor = centred_pds(wrapped, rows, set_masks(m, _unique(sets)), budget, row_ids=row_ids)
        where = {s: r for r, s in enumerate(_unique(sets))}
        rest = np.array([where[s] for s in complements])
        # Phase 2: rank features by overall H^2 (summed over outputs), then their pairs.
        strength = np.asarray(_overall(f, F, floor, np.arange(m), rest)).reshape(m, -1).sum(1)
        top = sorted(np.argsort(-strength, kind="stable")[:top_m].tolist())
        pair_list = tuple(itertools.combinations(top, 2))
        more = [s for s in _with_subpairs(pair_list, triple_list) + list(triple_list) if s not in sets]
        sets += more
    unique = _unique(sets)
    where = {s: r for r, s in enumerate(unique)}
    all_pairs = tuple(sorted(set(pair_list) | {p for t in triple_list for p in itertools.combinations(t, 2)}))
    layout = _layout(where, complements, all_pairs, triple_list)
    if top_m is not None:
        result = centred_pds(wrapped, rows, set_masks(m, more), budget, _extended_statistics, {**layout, "first": F}, row_ids)
    elif order is None:
        result = centred_pds(wrapped, rows, set_masks(m, unique), budget, _statistics, layout, row_ids)
    else:
        by_size = [list(itertools.combinations(range(m), j)) for j in range(2, order + 1)]
        layout["plan"] = mobius_plan(unique, family)
        layout["order_rows"] = tuple(np.array([where[s] for s in group], dtype=np.int32) for group in by_size)
        result = centred_pds(wrapped, rows, set_masks(m, unique), budget, _ordered_statistics, layout, row_ids)
    overall, pairwise, total, threeway = result[:4]
    threeway = threeway if triple_list else None
    squeeze = (lambda v: v[..., 0]) if wrapped.single_output else (lambda v: v)
    overall, pairwise, total = squeeze(overall), squeeze(pairwise), squeeze(total)
    threeway = None if threeway is None else squeeze(threeway)
    by_order = None
    if order is not None:
        by_order = {len(g[0]): split_rows(squeeze(v), g) for g, v in zip(by_size, result[4])}
    return HStatistics(overall, pairwise, total, threeway, names, all_pairs, triple_list, result_output_names(wrapped),
                       by_order, order)


def _requested_pairs(pairs: Any, order: Any, names: Sequence[str]):
    """``(top_m, pair_list, order)`` from the ``pairs`` and ``order`` arguments (checked)."""
    m = len(names)
    if order is not None:
        order = integer(order, "order", least=2, most=max(m, 2), rule=f"an integer from 2 to the number of features ({m})")
        if m < 2:
            raise ValueError(f"`order={order}` needs at least 2 features; the data have {m}.")
        if pairs is not None:
            raise ValueError(f"`order={order}` computes every set of up to {order} features, all pairs among them: "
                             "leave `pairs` as None.")
    if pairs is None:
        return None, tuple(itertools.combinations(range(m), 2)), order
    if is_integer(pairs):
        if pairs < 0:
            raise ValueError(f"`pairs` as an int is a number of features (0 to {m}); got {pairs}.")
        return min(int(pairs), m), None, order
    return None, resolve_tuples(pairs, names, 2, "pairs"), order


def _layout(where, complements, all_pairs, triple_list) -> dict:
    """Rows of the partial dependences that :func:`_statistics` combines, by statistic."""
    m = len(complements)
    layout = {
        "single": np.arange(m),
        "rest": np.array([where[s] for s in complements]),
        "pair": np.array([where[p] for p in all_pairs], dtype=int),
        "pair_j": np.array([p[0] for p in all_pairs], dtype=int),
        "pair_k": np.array([p[1] for p in all_pairs], dtype=int),
        # rows of F entering the three-way residual with signs + - - - + + +
        "triple": np.array(
            [[where[t], where[t[:2]], where[(t[0], t[2])], where[t[1:]]] + [where[(j,)] for j in t] for t in triple_list],
            dtype=int,
        ).reshape(-1, 7),
    }
    return {k: jnp.asarray(v) for k, v in layout.items()}


def _ordered_statistics(f, F, floor, *, plan, order_rows, **layout):
    """:func:`_statistics`, and ``H^2_S`` of the sets of each order from their Möbius components."""
    G = mobius(F, plan)
    by_order = tuple(safe_ratio(sum_sq(G[r]), sum_sq(F[r]), floor) for r in order_rows)
    return (*_statistics(f, F, floor, **layout), by_order)


def _unique(sets):
    """Feature sets without repeats, in first-seen order (complements of M=2 are singles)."""
    return list(dict.fromkeys(sets))


def _overall(f, F, floor, single, rest):
    return safe_ratio(sum_sq(f[None] - F[single] - F[rest]), sum_sq(f)[None], floor)


def _extended_statistics(f, F2, floor, *, first, **layout):
    """:func:`_statistics` with the partial dependences of a first phase put before ``F2``."""
    return _statistics(f, jnp.concatenate([first, F2]), floor, **layout)


def _statistics(f, F, floor, *, single, rest, pair, pair_j, pair_k, triple):
    """All H^2 from the centred predictions ``f [n, K]`` and partial dependences ``F [S, n, K]``."""
    m = single.shape[0]
    overall = _overall(f, F, floor, single, rest)
    total = safe_ratio(sum_sq(f - F[single].sum(0)), sum_sq(f), floor)
    pairwise = jnp.full((m, m) + f.shape[1:], jnp.nan, f.dtype).at[jnp.arange(m), jnp.arange(m)].set(0.0)
    if pair.size:
        h2 = safe_ratio(sum_sq(F[pair] - F[pair_j] - F[pair_k]), sum_sq(F[pair]), floor)
        pairwise = pairwise.at[pair_j, pair_k].set(h2).at[pair_k, pair_j].set(h2)
    sign = jnp.asarray([1, -1, -1, -1, 1, 1, 1], f.dtype)[:, None, None]
    resid = jnp.sum(sign * F[triple], axis=1)  # [T, n, K]
    threeway = safe_ratio(sum_sq(resid), sum_sq(F[triple[:, 0]]), floor)
    return overall, pairwise, total, threeway


def _with_subpairs(pair_list, triple_list) -> list[tuple[int, ...]]:
    """The requested pairs plus the pairs inside the triples, without repeats, in order."""
    out = list(pair_list)
    for t in triple_list:
        for p in itertools.combinations(t, 2):
            if p not in out:
                out.append(p)
    return out
