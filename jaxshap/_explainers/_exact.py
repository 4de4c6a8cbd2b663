"""``ExactExplainer``: Shapley values over all ``2**M`` coalitions."""

from __future__ import annotations

from .._estimators._exact import exact_shapley
from .._estimators._owen import owen_exact
from .._runtime._explainer import Explainer
from ..maskers._partition import MAX_OWEN_COALITIONS, Partition

MAX_EXACT_FEATURES = 20


class ExactExplainer(Explainer):
    r"""Exact Shapley values by enumerating every coalition.

    .. math::

        \phi_j(x) = \sum_{S \subseteq N \setminus \{j\}} \frac{|S|!\,(M-|S|-1)!}{M!}
                    \bigl[v_x(S \cup \{j\}) - v_x(S)\bigr]

    with ``v_x`` the masker's value function (by default interventional:
    ``v_x(S) = mean_b f(x_S, b_{-S})`` over the background). Each row costs ``2**M * B`` model
    evaluations, made in large batches under ``memory_budget``. Works inside ``jax.jit`` and
    ``jax.grad`` for JAX models.

    With a :class:`jaxshap.maskers.Partition` masker it computes the exact Owen values over the
    masker's feature hierarchy instead, from only the coalitions that hierarchy needs (see
    :func:`jaxshap._estimators._owen.owen_exact`); the 20-feature limit then does not apply.

    Example::

        ex = jaxshap.ExactExplainer(model, background)
        expl = ex(X)          # expl.values: [n, M]

    Raises:
      ValueError: with more than 20 features (use ``KernelExplainer`` or ``PermutationExplainer``).
    """

    def _check_n_features(self, n_features: int) -> None:
        if isinstance(self.masker, Partition):  # exact Owen values: only the hierarchy's coalitions
            c = self.masker.owen_coalitions[0].shape[0]
            if c > MAX_OWEN_COALITIONS:
                raise ValueError(
                    f"exact Owen values over this feature hierarchy need {c:,} coalitions per row (more than "
                    f"{MAX_OWEN_COALITIONS:,}); use jaxshap.PermutationExplainer with the Partition masker."
                )
            return
        if n_features > MAX_EXACT_FEATURES:
            raise ValueError(
                f"ExactExplainer enumerates 2**M coalitions and supports at most {MAX_EXACT_FEATURES} "
                f"features; the data has {n_features} (2**{n_features} = {2**n_features:,} coalitions). "
                "Use jaxshap.KernelExplainer or jaxshap.PermutationExplainer instead."
            )

    def _coalitions_per_row(self) -> int:
        if isinstance(self.masker, Partition):
            return self.masker.owen_coalitions[0].shape[0]
        return 2**self.n_features

    def _estimate(self, key, value_fn):
        if isinstance(self.masker, Partition):  # Owen values over the masker's hierarchy
            phi, v0, _ = owen_exact(value_fn, *self.masker.owen_coalitions)
            return phi, v0, None
        phi, v0, _ = exact_shapley(value_fn, self.n_features)
        return phi, v0, None
