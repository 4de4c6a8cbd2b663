r"""Faith-SHAP interactions of large games by sampled, constrained, kernel-weighted regression.

Faith-SHAP of order ``k`` (Tsai, Yeh & Ravikumar, 2023, "Faith-Shap: the faithful Shapley
interaction index") is the solution of

.. math::

    \min_E \sum_{\emptyset \ne S \ne N} \mu(S) \Bigl(v(S) - v(\emptyset) - \sum_{T \subseteq S,\,
    1 \le |T| \le k} E_T\Bigr)^2 \quad \text{subject to} \quad \sum_T E_T = v(N) - v(\emptyset),

with the Shapley kernel :math:`\mu(S) = (M - 1) / (\binom{M}{|S|} |S| (M - |S|))`. As in
KernelSHAP, the sums over coalitions are replaced by Horvitz-Thompson estimates from coalitions
drawn by :func:`jaxshap.coalitions.sample_kernel_coalitions` (small layers enumerated, the rest
complementary pairs without replacement), which is the regression approach to interaction
indices of Tsai et al. (2023) and of KernelSHAP-IQ (Fumagalli et al., 2024, "KernelSHAP-IQ:
weighted least square optimization for Shapley interactions"). A budget of ``2**M - 2`` or more
enumerates every coalition and is exact.

The constraint is eliminated as in :func:`jaxshap.estimators.kernel_solve`: the total is first
spread over the order-1 terms (``E^0_i = Delta / M``), and the correction ``delta`` is confined
to ``1^T delta = 0`` with the projection ``P = I - 1 1^T / n`` (``n`` unknowns), solved by one
Cholesky factorisation of ``P X^T W X P + c 1 1^T``.

The standard errors linearise the estimate around its solution (sandwich / Horvitz-Thompson
variance): coalition ``S`` contributes ``psi_S = H^{-1} P x_S w_S e_S`` with ``e_S`` its
residual, and the variance is the stratified without-replacement variance of the per-pair sums
of ``psi`` over the plan's sampling units. Enumerated coalitions contribute none.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._kernel_plan import kernel_plan, max_coalitions
from .._coalitions._kernel_sampling import sample_coalitions
from .._core._validate import integer
from ._interactions import dense_from_sets
from ._kernel_solve import design_variance, safe_sqrt, spd_inverse
from ._precision import full_precision

ValueFn = Callable[[jax.Array], jax.Array]


def n_terms(n_features: int, order: int) -> int:
    """Number of unknowns ``sum_{t = 1..k} C(M, t)``."""
    return sum(math.comb(n_features, t) for t in range(1, order + 1))


@full_precision
def _fit(plan, design, w, r, delta, m):
    """``(E [n, K], stderr [n, K])``: ``E = E^0 + H^{-1} D^T W r`` with ``H = D^T W D + c 1 1^T``
    (``c = tr / (n (n - 1))`` fixes the null direction of the projected design ``D``), and the
    design variance of the per-coalition terms ``psi_S = H^{-1} d_S w_S e_S``."""
    n = design.shape[1]
    weighted = design * w[:, None]
    h = weighted.T @ design
    inverse = spd_inverse(h + jnp.trace(h) / (n * (n - 1)))
    theta = inverse @ (weighted.T @ r)
    base = jnp.zeros((n, delta.shape[0]), design.dtype).at[:m].set(delta / m)
    psi = (inverse @ design.T).T[:, :, None] * (w[:, None] * (r - design @ theta))[:, None, :]  # [C, n, K]
    return base + theta, safe_sqrt(design_variance(plan, psi, jnp.asarray(plan.unit)))


def kernel_interactions(
    key: jax.Array,
    value_fn: ValueFn,
    n_features: int,
    n_coalitions: int,
    *,
    order: int = 2,
    sampler: str = "paired",
) -> tuple[list[jax.Array], list[jax.Array], jax.Array, jax.Array]:
    """Faith-SHAP interactions (orders ``1..k``) of one game from sampled coalitions, with standard errors.

    Cost: one call of ``value_fn`` on ``n_coalitions + 2`` coalitions, and a Cholesky
    factorisation of size ``sum_t C(M, t)`` (``M + M (M - 1) / 2`` for pairs).

    Args:
      key: PRNG key.
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static; at least 2).
      n_coalitions: coalitions other than the empty and the full one (static; capped at
        ``2**M - 2``, where the result is exact); at least the number of unknowns plus one.
      order: ``k`` (static).
      sampler: ``"paired"``, ``"leverage"`` or ``"middle"`` (see :func:`jaxshap.coalitions.kernel_plan`).

    Returns:
      ``(terms, stderr, v_empty, v_full)``: ``terms[t - 1]`` and ``stderr[t - 1]`` are dense
      symmetric ``[M] * t + [...]`` tensors as in :func:`jaxshap.estimators.exact_interactions`
      (``stderr`` zero where the estimate is exact). All terms (each set once) sum to
      ``v_full - v_empty``.

    Example::

        terms, se, v0, v1 = kernel_interactions(jax.random.key(0), game, 40, 20_000)
        matrix = jaxshap.estimators.interaction_matrix(terms)   # [40, 40]
    """
    m = int(n_features)
    if m < 2:
        raise ValueError(f"kernel_interactions needs at least 2 features; got n_features={n_features!r}.")
    order = integer(order, "order", least=1, most=m - 1, rule=f"an int between 1 and M - 1 = {m - 1}")
    n = n_terms(m, order)
    budget = min(int(n_coalitions), max_coalitions(m))
    if budget < n + 1:
        raise ValueError(
            f"`n_coalitions` ({n_coalitions}) must be more than the {n} unknowns of order-{order} "
            f"interactions of {m} features; use at least {n + 1} (a few times more for accuracy)."
        )
    plan = kernel_plan(m, budget, sampler)
    masks, weights = sample_coalitions(key, plan)
    ends = jnp.stack([jnp.zeros(m, bool), jnp.ones(m, bool)])
    v = value_fn(jnp.concatenate([ends, masks], axis=0))
    v0, v1 = v[0], v[1]
    tail = v.shape[1:]
    values = v[2:].reshape(v.shape[0] - 2, -1)
    dtype = values.dtype

    sets = tuple(c for t in range(1, order + 1) for c in itertools.combinations(range(m), t))
    z = masks.astype(dtype)
    columns = [z]
    for t in range(2, order + 1):
        combos = np.array([c for c in sets if len(c) == t], dtype=np.int32)
        prod = z[:, combos[:, 0]]
        for i in range(1, t):
            prod = prod * z[:, combos[:, i]]
        columns.append(prod)
    x = jnp.concatenate(columns, axis=1)  # [C, n]: [T <= S]

    w = weights.astype(dtype)
    w = w / w.sum()
    delta = (v1 - v0).reshape(-1)  # [K]
    r = values - v0.reshape(-1) - (z.sum(-1, keepdims=True) / m) * delta  # residual of E^0
    design = x @ (jnp.eye(n, dtype=dtype) - 1.0 / n)
    e, stderr = _fit(plan, design, w, r, delta, m)
    terms = dense_from_sets(e, sets, m, order)
    errors = dense_from_sets(stderr, sets, m, order)
    reshape = lambda a, t: a.reshape((m,) * t + tail)
    return (
        [reshape(a, t + 1) for t, a in enumerate(terms)],
        [reshape(a, t + 1) for t, a in enumerate(errors)],
        v0,
        v1,
    )
