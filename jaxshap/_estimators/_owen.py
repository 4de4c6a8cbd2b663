"""Owen values of one game over a binary hierarchy of players."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

ValueFn = Callable[[jax.Array], jax.Array]


def owen_exact(value_fn: ValueFn, masks: np.ndarray, coef: np.ndarray) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Exact Owen values from the coalitions a hierarchy needs.

    .. math::

        \phi_i = 2^{-d_i} \sum_{T \subseteq \{1..d_i\}} \bigl[v(U_T \cup \{i\}) - v(U_T)\bigr],
        \qquad U_T = \textstyle\bigcup_{k \in T} s_k,

    with ``s_1..s_{d_i}`` the sibling clusters on feature ``i``'s path from the root (Owen, 1977;
    see :mod:`jaxshap._coalitions._hierarchy`), evaluated as one product ``phi = coef @ (v(masks) -
    v(empty))`` with ``masks``/``coef`` from :func:`jaxshap._coalitions._hierarchy.owen_plan`. Any
    plan of marginal contributions takes this product (every row of ``coef`` sums to zero, so
    subtracting ``v(empty)`` changes nothing but the rounding): the Winter plans of
    :func:`jaxshap._estimators._winter.winter_values` and the asymmetric orders of
    :class:`jaxshap.maskers.Asymmetric` too.

    Returns:
      ``(phi [M, ...], v_empty, v_full)``; ``phi.sum(0) == v_full - v_empty`` (efficiency).
    """
    v = jnp.asarray(value_fn(jnp.asarray(masks)))
    v0 = v[0]
    # full float32 precision on GPUs (TF32 would round the coefficients): see exact_shapley
    phi = jnp.tensordot(jnp.asarray(coef, v.dtype), v - v0, axes=1, precision=jax.lax.Precision.HIGHEST)
    return phi, v0, v[-1]
