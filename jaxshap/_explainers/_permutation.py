"""``PermutationExplainer``: antithetic permutation sampling."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax

from .._core._chunking import chunk_bytes, map_chunks
from .._core._validate import DEFAULT_MEMORY_BUDGET
from .._engine._explainer import ModelAgnosticExplainer
from .._core._inputs import check_walks
from .._estimators._kernel import third_order_ridge
from .._estimators._permutation import (
    MAX_FIT_POINTS,
    adjust_walks,
    check_control_walks,
    fit_bytes_per_row,
    fit_points,
    permutation_shapley,
    permutation_walks,
)
from ..maskers._base import SHAPLEY


AUTO_MIN_BYTES = 2**16
"""Model work per coalition (evaluations per coalition times the model's activation bytes per
row) from which ``control_variates="auto"`` fits the controls for a JAX model: below it (a small
model or background) the fit costs more time than doubling the walks, which saves as much error."""


class PermutationExplainer(ModelAgnosticExplainer):
    r"""Shapley values estimated from sampled permutations, walked forward and reversed.

    Each walk adds the features of a random permutation one at a time and credits each with
    its marginal contribution :math:`v_x(\mathrm{Pre}(j) \cup \{j\}) - v_x(\mathrm{Pre}(j))`; every
    sampled permutation is also walked in reverse (antithetic sampling). Efficiency holds exactly
    for every estimate; ``stderr`` is the spread across antithetic pairs over the square root of
    their number (see :func:`jaxshap.estimators.permutation_shapley`).

    The masker draws the orders (:meth:`jaxshap.maskers.Masker.sample_order_ranks`; uniform by
    default). With a :class:`jaxshap.maskers.Partition` masker they are consistent with the
    masker's feature hierarchy (each node swaps its two children with probability 1/2), so the
    estimate is of the Owen values (shap's PermutationExplainer does the same).

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy).
      background: background rows ``[B, M]`` or a masker.
      n_permutations: permutations walked per row, an even number of at least 4 (a permutation
        and its reverse are two walks); each walk costs ``M + 1`` coalitions, each ``B`` model
        evaluations with the ``Independent`` masker.
      control_variates: subtract a surrogate of the game's third-order part, fitted on the
        walks themselves and cross-fitted between their two halves, whose Shapley values are
        zero (regression-adjusted Monte Carlo, Witter et al., 2025; see
        :mod:`jaxshap._estimators._permutation`). Same walks, same estimand, lower
        error (``python -m bench permutation`` measures how much). The fit costs time of its own,
        which pays when the model's evaluations dominate: ``"auto"`` (default) turns it on for a
        host model (scikit-learn, XGBoost, ...) or when one coalition's model work, its
        evaluations times the model's activation bytes per row, is at least
        :data:`AUTO_MIN_BYTES`, provided ``n_permutations``
        is a multiple of 4 of at least 8, ``M >= 3``, each half has at most
        :data:`~jaxshap._estimators._permutation.MAX_FIT_POINTS` prefixes, and the
        masker asks for Shapley values (not a ``Partition``'s Owen values, which the surrogate
        does not preserve).
        ``True`` turns it on wherever it applies (for a cheap JAX model with a small
        background the fit costs more than doubling the walks would), ``False`` turns it off.
      feature_names: optional feature names.
      memory_budget: bytes of working memory one chunk of model evaluations may use (default
        512 MiB); memory grows with the chunk, not with the rows (see :class:`ModelAgnosticExplainer`).
      link: ``"identity"`` or ``"logit"`` (explain the log-odds of a probability output, as
        shap's ``link``; see :class:`jaxshap._engine._explainer.ModelAgnosticExplainer`).
      groups, causal_ordering, confounding, asymmetric: groups of columns as the players, causal
        and asymmetric Shapley values (shapr's arguments; see
        :class:`jaxshap._engine._explainer.ModelAgnosticExplainer`); for asymmetric values the
        orders are consistent with the causal ordering and each is walked with its partner that
        reverses every component in place (:meth:`jaxshap.maskers.Masker.antithetic_ranks`).

    Raises:
      ValueError: for an ``n_permutations`` that is not an even integer of at least 4, or a
        ``control_variates`` that is not a bool or ``"auto"`` or is ``True`` where it cannot apply.
    """

    shap_budget = "permutations"  # shap's max_evals=: n_permutations = 2 * (max_evals // (2 M + 1))

    def __init__(
        self,
        model: Callable,
        background: Any,
        n_permutations: int = 32,
        *,
        control_variates: bool | str = "auto",
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        link: str = "identity",
        groups: Any = None,
        causal_ordering: Any = None,
        confounding: Any = None,
        asymmetric: bool = False,
    ):
        self.n_permutations = check_walks(n_permutations, 4)
        if not (isinstance(control_variates, bool) or control_variates == "auto"):
            raise ValueError(f"`control_variates` must be True, False or 'auto'; got {control_variates!r}.")
        super().__init__(
            model, background, feature_names=feature_names, memory_budget=memory_budget, link=link,
            groups=groups, causal_ordering=causal_ordering, confounding=confounding, asymmetric=asymmetric,
        )
        m, walks = self.n_features, self.n_permutations
        why = None
        if self.masker.attribution != SHAPLEY:
            why = (
                f"a {type(self.masker).__name__} masker asks for {self.masker.attribution} values, which the "
                "third-order surrogate does not preserve"
            )
        elif m < 3:
            why = f"there are no third-order terms with {m} features"
        else:
            try:
                check_control_walks(walks)
            except ValueError as err:
                why = str(err).rstrip(".")
        if control_variates is True and why is not None:
            raise ValueError(f"`control_variates=True` cannot apply: {why}.")
        if control_variates == "auto":
            work = self.masker.evals_per_coalition * self.model.bytes_per_row
            pays = self.model.is_host or work >= AUTO_MIN_BYTES
            control_variates = pays and fit_points(m, walks) <= MAX_FIT_POINTS
        self.control_variates = control_variates and why is None

    stages_host_model = False
    """A host model stays inside one program (a callback). In two programs the walks compile
    twice and the control-variate fit once more: on ``python -m bench first_touch``'s scikit-learn
    MLP job the first process took 2 s longer and 185 MB more, which later processes' loading
    from the store (1.5 s saved each) does not repay for a one-off job."""

    def _coalitions_per_row(self) -> int:
        return self.n_permutations * (self.n_features - 1) + 2

    def _estimate(self, key, value_fn):
        orders = self.masker.sample_order_ranks  # uniform, or as the masker's attribution asks
        phi, stderr, v0, _ = permutation_shapley(
            key, value_fn, self.n_features, self.n_permutations, orders, self.masker.antithetic_ranks
        )
        return phi, v0, stderr

    def _explain_local(self, X, keys, rows_per_chunk, coalitions_per_chunk, n_valid=None):
        """With the controls, two passes: evaluate each row's walks in the planned chunks (the
        model's memory), then adjust many rows at once (the fit is many small matrix operations,
        which cost per call, not per row, when batched)."""
        if not self.control_variates:
            return super()._explain_local(X, keys, rows_per_chunk, coalitions_per_chunk, n_valid)
        m, pairs = self.n_features, self.n_permutations // 2

        def walks(value_fn, x, k):
            return permutation_walks(k, value_fn, m, pairs, self.masker.sample_order_ranks)

        ranks, walk_f, walk_c = self._map_rows(walks, X, (keys,), rows_per_chunk, coalitions_per_chunk, n_valid)
        rho = third_order_ridge(m)
        fit_rows = max(1, chunk_bytes(self.memory_budget) // fit_bytes_per_row(m, self.n_permutations, self.model.n_outputs))

        def adjust(a):
            phi, stderr, v0, _ = jax.vmap(lambda r, wf, wc: adjust_walks(r, wf, wc, rho))(*a)
            return phi, v0, stderr

        return map_chunks(adjust, (ranks, walk_f, walk_c), fit_rows, n_valid)
