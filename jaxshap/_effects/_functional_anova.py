r"""The functional ANOVA decomposition at the data rows, up to any order of interaction.

With partial dependences :math:`F_S(x_S) = E_{X_{\bar S}}[f(x_S, X_{\bar S})]` the functional
ANOVA decomposition (Hooker, 2004, "Discovering additive structure in black box functions";
Friedman & Popescu, 2008, section 8) writes

.. math::

    f(x) = g_\emptyset + \sum_{S \neq \emptyset} g_S(x_S),\qquad
    g_\emptyset = E[f],\quad g_S = \sum_{T \subseteq S} (-1)^{|S| - |T|} F_T,

so :math:`g_j = F_j - g_\emptyset` and :math:`g_{jk} = F_{jk} - g_j - g_k - g_\emptyset`.
Here each component is estimated at the (subsampled) data rows from the Monte-Carlo partial
dependences averaged over the same rows, each centred to mean zero over the rows
(:math:`\hat F_S`, with :math:`\hat F_\emptyset = 0`): :math:`g_S = \sum_{T \subseteq S}
(-1)^{|S|-|T|} \hat F_T`, so :math:`g_j = \hat F_j` and :math:`g_{jk} = \hat F_{jk} - \hat F_j
- \hat F_k`, whose sum of squares over that of :math:`\hat F_{jk}` is the pairwise H statistic.

What holds at the rows, exactly up to rounding and whatever the dependence between features:
every component has mean zero over the rows, and with ``max_order = M`` the components add up
to the predictions, :math:`g_\emptyset + \sum_S g_S(x^{(i)}) = f(x^{(i)})` (Möbius inversion:
:math:`\sum_{S \subseteq U} g_S = \hat F_U`, and :math:`\hat F` of all features is the centred
prediction). Orthogonality, :math:`\sum_i g_S(x^{(i)}) g_T(x^{(i)}) = 0` for :math:`S \neq T`,
and with it shares that add up to 1, holds exactly only when the rows form a full product grid
(their empirical distribution is then the product of its marginals); for independent features
it holds approximately, for dependent ones not at all.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core._model import wrap_model
from .._core._validate import DEFAULT_MEMORY_BUDGET, integer
from ._hstats import centred_pds, resolve_tuples, result_output_names, safe_ratio, set_masks, sum_sq
from .._coalitions._combinatorics import mobius, mobius_plan
from ._partial_dependence import by_size, check_budget, check_n_max, check_set_count, sets_up_to, split_rows, subsample
from ._frames import frame_inputs, host_precision


@jax.tree_util.register_pytree_node_class
class FunctionalANOVA:
    r"""Functional ANOVA components at the data rows, with variance shares.

    For a model with ``K`` outputs every array gets a trailing ``K`` axis.

    Attributes:
      data: ``[n, M]``: the rows the components are evaluated at (and averaged over).
      intercept: scalar :math:`g_\emptyset`, the mean prediction over the rows.
      main: ``[n, M]``: :math:`g_j(x^{(i)}_j)`.
      interaction: ``[n, P]``: :math:`g_{jk}(x^{(i)}_j, x^{(i)}_k)` for the pairs in ``pairs``.
      main_share: ``[M]``: :math:`\sum_i g_j^2 / \sum_i (f - g_\emptyset)^2`.
      interaction_share: ``[P]``: :math:`\sum_i g_{jk}^2 / \sum_i (f - g_\emptyset)^2`.
      residual_share: scalar: the share of prediction variance the computed components leave,
        :math:`\sum_i (f - g_\emptyset - \sum_S g_S)^2 / \sum_i (f - g_\emptyset)^2`
        (higher-order effects and sets not computed; 0 with ``max_order = M``).
      components: ``{S: [n]}``: :math:`g_S(x^{(i)}_S)` for every computed feature set ``S``, a
        sorted index tuple: every set of 1 to ``max_order`` features (the requested pairs
        when ``pairs`` was given), by size, then lexicographically.
      shares: ``{S: scalar}``: :math:`\sum_i g_S^2 / \sum_i (f - g_\emptyset)^2` per set.
      order_shares: ``{j: scalar}``: the shares of the sets of ``j`` features, summed.
      feature_names: the ``M`` names (static).
      pairs: the ``P`` pairs, sorted index tuples (static).
      output_names: the ``K`` output names or ``None`` (static).
      max_order: the largest set size computed (static).
    """

    def __init__(self, data, intercept, main, interaction, main_share, interaction_share, residual_share,
                 feature_names, pairs, output_names=None, components=None, shares=None, order_shares=None,
                 max_order=2):
        self.data = data
        self.intercept = intercept
        self.main = main
        self.interaction = interaction
        self.main_share = main_share
        self.interaction_share = interaction_share
        self.residual_share = residual_share
        self.feature_names = tuple(feature_names)
        self.pairs = tuple(tuple(p) for p in pairs)
        self.output_names = None if output_names is None else tuple(output_names)
        self.components = {} if components is None else components
        self.shares = {} if shares is None else shares
        self.order_shares = {} if order_shares is None else order_shares
        self.max_order = int(max_order)

    def tree_flatten(self):
        children = (self.data, self.intercept, self.main, self.interaction, self.main_share,
                    self.interaction_share, self.residual_share, self.components, self.shares, self.order_shares)
        return children, (self.feature_names, self.pairs, self.output_names, self.max_order)

    @classmethod
    def tree_unflatten(cls, aux, children):
        names, pairs, output_names, max_order = aux
        *arrays, components, shares, order_shares = children
        return cls(*arrays, names, pairs, output_names, components, shares, order_shares, max_order)

    def __repr__(self) -> str:
        return (
            f"FunctionalANOVA(rows: {np.shape(self.data)[0]}, features: {len(self.feature_names)}, "
            f"max_order: {self.max_order}, sets: {len(self.components)}, "
            f"residual_share: {np.round(np.asarray(self.residual_share), 4)})"
        )


@host_precision
def functional_anova(
    model: Callable,
    X: Any,
    *,
    max_order: int = 2,
    n_max: int = 500,
    key: Any = None,
    pairs: Any = None,
    feature_names: Sequence[str] | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> FunctionalANOVA:
    r"""Functional ANOVA components of every feature set up to ``max_order``, and their shares.

    :math:`g_S = \sum_{T \subseteq S} (-1)^{|S|-|T|} \hat F_T`, the Möbius transform of the
    centred partial dependences of :func:`jaxshap.h_statistic`, evaluated at the (subsampled)
    rows of ``X`` and averaged over the same rows (Hooker, 2004; Friedman & Popescu, 2008,
    section 8); so :math:`g_j = \hat F_j` and :math:`g_{jk} = \hat F_{jk} - \hat F_j - \hat F_k`.
    Each component's share is its sum of squares over that of the centred predictions (0 when
    the predictions are constant up to rounding). With ``max_order`` equal to the number of
    features the components add up to the predictions at every row (``residual_share`` 0),
    dependent features or not; the shares add up to 1 only where the components are orthogonal
    over the rows (exactly so when the rows form a full product grid).

    The partial dependences of all ``S`` sets are one compiled program chunked under
    ``memory_budget``, the transform a fast subset transform over bit masks in the same
    program. Costs ``S n^2`` model evaluations for ``n = min(len(X), n_max)`` rows and
    ``S = sum_{j <= max_order} C(M, j)`` sets (``M + P`` with ``pairs``).

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable or a plain NumPy callable.
      X: data rows ``[n, M]`` (array or DataFrame; a pandas ``category`` column is read as its
        codes, and a host model fitted on a DataFrame is called with the frame rebuilt from the
        rows, and a host model given float64 rows computes in float64, as the explainers do).
      max_order: the largest set size to compute (``1`` main effects only; orders above ``M``
        compute every set). At most 65,535 sets are computed (every set of 16 features).
      n_max: use at most this many rows, drawn without replacement with ``key``.
      key: PRNG key (or int seed) for that subsample; ``None`` means ``jax.random.key(0)``.
      pairs: with ``max_order=2`` only: ``None`` for all pairs, or a sequence of pairs of
        feature positions or names (an empty sequence for main effects only).
      feature_names: names of the ``M`` features (default: DataFrame columns, else ``Feature j``).
      memory_budget: bytes of working memory one chunk of model evaluations may use.

    Returns:
      A :class:`FunctionalANOVA`.

    Raises:
      ValueError: for NaN/inf in ``X`` or in the model's output (naming the rows), bad ``n_max``
        or ``max_order``, ``pairs`` with ``max_order`` other than 2, more sets than can be
        computed (naming ``max_order`` and the cost), malformed pairs or unknown features.
    """
    model, X, names, _, _ = frame_inputs(model, X, feature_names)
    budget = check_budget(memory_budget)
    n_max = check_n_max(n_max, allow_none=False)
    max_order = integer(max_order, "max_order", least=1, rule="a positive integer number of features")
    m = X.shape[1]
    order = min(max_order, m)
    rows, row_ids = subsample(X, n_max, key, return_index=True)
    if pairs is None:
        check_set_count(m, order, rows.shape[0], "max_order")
        sets = sets_up_to(m, order)
    elif max_order != 2:
        raise ValueError(
            f"`pairs` picks the pairs of `max_order=2`; with `max_order={max_order}` every set of up to "
            f"{max_order} features is computed: leave `pairs` as None."
        )
    else:
        sets = [(j,) for j in range(m)] + list(resolve_tuples(pairs, names, 2, "pairs"))
    wrapped = wrap_model(model, m, X.dtype, rows[:2])
    plan = mobius_plan(sets, sets)
    G, shares, residual_share = centred_pds(
        wrapped, rows, set_masks(m, sets), budget, _decompose, {"plan": plan}, row_ids
    )
    intercept = wrapped.fn(rows).mean(0)
    size_rows = by_size(sets)
    order_shares = {j: shares[r].sum(0) for j, r in size_rows.items()}
    pair_rows = size_rows.get(2, np.zeros(0, np.int32))
    pair_list = tuple(sets[r] for r in pair_rows)
    main, inter = jnp.moveaxis(G[:m], 0, 1), jnp.moveaxis(G[pair_rows], 0, 1)  # [n, M, K], [n, P, K]
    main_share, inter_share = shares[:m], shares[pair_rows]
    if wrapped.single_output:
        intercept, main, inter, G, shares = intercept[0], main[..., 0], inter[..., 0], G[..., 0], shares[..., 0]
        main_share, inter_share, residual_share = main_share[..., 0], inter_share[..., 0], residual_share[..., 0]
        order_shares = {j: v[0] for j, v in order_shares.items()}
    return FunctionalANOVA(rows, intercept, main, inter, main_share, inter_share, residual_share,
                           names, pair_list, result_output_names(wrapped), split_rows(G, sets),
                           split_rows(shares, sets), order_shares, max(len(s) for s in sets))


def _decompose(f, F, floor, *, plan):
    """Components ``[S, n, K]``, their shares ``[S, K]`` and the residual share ``[K]`` (traced)."""
    G = mobius(F, plan)
    den = sum_sq(f)
    shares = safe_ratio(sum_sq(G), den[None], floor)
    residual_share = safe_ratio(sum_sq(f - G.sum(0)), den, floor)
    return G, shares, residual_share
