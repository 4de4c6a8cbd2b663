"""``PermutationExplainer``: antithetic permutation sampling."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from .._runtime._chunking import DEFAULT_MEMORY_BUDGET
from .._runtime._explainer import Explainer
from .._runtime._inputs import check_walks
from .._estimators._permutation import permutation_shapley
from .._coalitions._hierarchy import consistent_ranks
from ..maskers._partition import Partition


class PermutationExplainer(Explainer):
    r"""Shapley values estimated from sampled permutations, walked forward and reversed.

    Each walk adds the features of a random permutation one at a time and credits each with
    its marginal contribution :math:`v_x(\mathrm{Pre}(j) \cup \{j\}) - v_x(\mathrm{Pre}(j))`; every
    sampled permutation is also walked in reverse (antithetic sampling). Efficiency holds exactly
    for every estimate; ``stderr`` is the spread across antithetic pairs over the square root of
    their number (see :func:`jaxshap.estimators.permutation_shapley`).

    With a :class:`jaxshap.maskers.Partition` masker the permutations are drawn consistent with
    the masker's feature hierarchy (each node swaps its two children with probability 1/2), so
    the estimate is of the Owen values (shap's PermutationExplainer does the same).

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy).
      background: background rows ``[B, M]`` or a masker.
      n_permutations: permutations walked per row, an even number of at least 4 (a permutation
        and its reverse are two walks); each walk costs ``M + 1`` coalitions, each ``B`` model
        evaluations with the ``Independent`` masker.
      feature_names: optional feature names.
      memory_budget: bytes of working memory one chunk of model evaluations may use (default
        512 MiB); memory grows with the chunk, not with the rows (see :class:`Explainer`).
      link: ``"identity"`` or ``"logit"`` (explain the log-odds of a probability output, as
        shap's ``link``; see :class:`jaxshap._runtime._explainer.Explainer`).

    Raises:
      ValueError: for an ``n_permutations`` that is not an even integer of at least 4.
    """

    def __init__(
        self,
        model: Callable,
        background: Any,
        n_permutations: int = 32,
        *,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        link: str = "identity",
    ):
        self.n_permutations = check_walks(n_permutations, 4)
        super().__init__(
            model, background, feature_names=feature_names, memory_budget=memory_budget, link=link
        )

    def _coalitions_per_row(self) -> int:
        return self.n_permutations * (self.n_features - 1) + 2

    def _estimate(self, key, value_fn):
        ranks_fn = None
        if isinstance(self.masker, Partition):  # Owen values: orders consistent with the hierarchy
            node, side, size = (jnp.asarray(t) for t in self.masker.order_tables)
            n_nodes = max(self.n_features - 1, 1)

            def ranks_fn(k, pairs):
                flips = jax.random.bernoulli(k, 0.5, (pairs, n_nodes)).astype(jnp.int32)
                return consistent_ranks(flips, node, side, size)

        phi, stderr, v0, _ = permutation_shapley(key, value_fn, self.n_features, self.n_permutations, ranks_fn)
        return phi, v0, stderr
