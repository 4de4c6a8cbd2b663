r"""The functional ANOVA view: first- and second-order components at the data rows.

With partial dependences :math:`F_S(x_S) = E_{X_{\bar S}}[f(x_S, X_{\bar S})]` the functional
ANOVA decomposition (Hooker, 2004, "Discovering additive structure in black box functions";
Friedman & Popescu, 2008, section 8) writes

.. math::

    f(x) = g_\emptyset + \sum_j g_j(x_j) + \sum_{j<k} g_{jk}(x_j, x_k) + \dots,\qquad
    g_\emptyset = E[f],\quad g_j = F_j - g_\emptyset,\quad g_{jk} = F_{jk} - g_j - g_k - g_\emptyset.

Here each component is estimated at the (subsampled) data rows by centring the Monte-Carlo
partial dependences over the rows: :math:`g_j = \hat F_j` and
:math:`g_{jk} = \hat F_{jk} - \hat F_j - \hat F_k` with centred :math:`\hat F`, so that
:math:`\sum_i g_{jk}(x^{(i)})^2 / \sum_i \hat F_{jk}^2` is the pairwise H statistic. With
independent features the components are orthogonal and their variances add up to the
prediction variance; the shares below are those variances as fractions of it.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core._validate import DEFAULT_MEMORY_BUDGET
from ._hstats import centred_pds, result_output_names, resolve_tuples, safe_ratio, set_masks, sum_sq
from .._core._model import wrap_model
from ._partial_dependence import check_budget, check_n_max, prepare_data, subsample


@jax.tree_util.register_pytree_node_class
class FunctionalANOVA:
    r"""First- and second-order functional ANOVA components at the data rows, with variance shares.

    For a model with ``K`` outputs every array gets a trailing ``K`` axis.

    Attributes:
      data: ``[n, M]``: the rows the components are evaluated at (and averaged over).
      intercept: scalar :math:`g_\emptyset`, the mean prediction over the rows.
      main: ``[n, M]``: :math:`g_j(x^{(i)}_j)`.
      interaction: ``[n, P]``: :math:`g_{jk}(x^{(i)}_j, x^{(i)}_k)` for the pairs in ``pairs``.
      main_share: ``[M]``: :math:`\sum_i g_j^2 / \sum_i (f - g_\emptyset)^2`.
      interaction_share: ``[P]``: :math:`\sum_i g_{jk}^2 / \sum_i (f - g_\emptyset)^2`.
      residual_share: scalar: the share of prediction variance the computed components leave,
        :math:`\sum_i (f - g_\emptyset - \sum_j g_j - \sum_{jk} g_{jk})^2 / \sum_i (f - g_\emptyset)^2`
        (higher-order effects, pairs not computed, and dependence between features).
      feature_names: the ``M`` names (static).
      pairs: the ``P`` pairs, sorted index tuples (static).
      output_names: the ``K`` output names or ``None`` (static).
    """

    def __init__(self, data, intercept, main, interaction, main_share, interaction_share, residual_share,
                 feature_names, pairs, output_names=None):
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

    def tree_flatten(self):
        children = (self.data, self.intercept, self.main, self.interaction, self.main_share,
                    self.interaction_share, self.residual_share)
        return children, (self.feature_names, self.pairs, self.output_names)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def __repr__(self) -> str:
        return (
            f"FunctionalANOVA(rows: {np.shape(self.data)[0]}, features: {len(self.feature_names)}, "
            f"pairs: {len(self.pairs)}, residual_share: {np.round(np.asarray(self.residual_share), 4)})"
        )


def functional_anova(
    model: Callable,
    X: Any,
    *,
    n_max: int = 500,
    key: Any = None,
    pairs: Any = None,
    feature_names: Sequence[str] | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> FunctionalANOVA:
    r"""First- and second-order functional ANOVA components and their variance shares.

    :math:`g_j = \hat F_j` and :math:`g_{jk} = \hat F_{jk} - \hat F_j - \hat F_k`, the centred
    partial dependences of :func:`jaxshap.h_statistic`, evaluated at the (subsampled) rows of
    ``X`` and averaged over the same rows; each component's share is its sum of squares over
    that of the centred predictions (0 when the predictions are constant up to rounding).
    Costs ``n (M + P) n`` model evaluations for ``n = min(len(X), n_max)`` rows.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable or a plain NumPy callable.
      X: data rows ``[n, M]`` (array or DataFrame).
      n_max: use at most this many rows, drawn without replacement with ``key``.
      key: PRNG key (or int seed) for that subsample; ``None`` means ``jax.random.key(0)``.
      pairs: ``None`` for all pairs, or a sequence of pairs of feature positions or names
        (an empty sequence for main effects only).
      feature_names: names of the ``M`` features (default: DataFrame columns, else ``Feature j``).
      memory_budget: bytes of working memory one chunk of model evaluations may use.

    Returns:
      A :class:`FunctionalANOVA`.

    Raises:
      ValueError: for NaN/inf in ``X`` or in the model's output (naming the rows), bad ``n_max``, malformed pairs or unknown features.
    """
    X, names = prepare_data(X, feature_names)
    budget = check_budget(memory_budget)
    n_max = check_n_max(n_max, allow_none=False)
    m = X.shape[1]
    if pairs is None:
        pair_list = tuple(itertools.combinations(range(m), 2))
    else:
        pair_list = resolve_tuples(pairs, names, 2, "pairs")
    rows, row_ids = subsample(X, n_max, key, return_index=True)
    wrapped = wrap_model(model, m, X.dtype, rows[:2])
    sets = [(j,) for j in range(m)] + list(pair_list)
    f, F, floor = centred_pds(wrapped, rows, set_masks(m, sets), budget, row_ids=row_ids)
    intercept = wrapped.fn(rows).mean(0)
    main = F[:m]  # [M, n, K]
    if pair_list:
        a = jnp.asarray([p[0] for p in pair_list])
        b = jnp.asarray([p[1] for p in pair_list])
        inter = F[m:] - main[a] - main[b]  # [P, n, K]
    else:
        inter = jnp.zeros((0,) + main.shape[1:], main.dtype)
    den = sum_sq(f)
    main_share = safe_ratio(sum_sq(main), den[None], floor)
    inter_share = safe_ratio(sum_sq(inter), den[None], floor)
    resid = f - main.sum(0) - inter.sum(0)
    residual_share = safe_ratio(sum_sq(resid), den, floor)
    main, inter = jnp.moveaxis(main, 0, 1), jnp.moveaxis(inter, 0, 1)  # [n, M, K], [n, P, K]
    if wrapped.single_output:
        intercept, main, inter = intercept[0], main[..., 0], inter[..., 0]
        main_share, inter_share, residual_share = main_share[..., 0], inter_share[..., 0], residual_share[..., 0]
    return FunctionalANOVA(rows, intercept, main, inter, main_share, inter_share, residual_share,
                           names, pair_list, result_output_names(wrapped))
