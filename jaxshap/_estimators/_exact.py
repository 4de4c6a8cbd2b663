"""Exact Shapley values by enumerating every coalition."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from .._coalitions._combinatorics import all_masks, exact_coefficients

ValueFn = Callable[[jax.Array], jax.Array]


def exact_shapley(value_fn: ValueFn, n_features: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Shapley values of one game from all ``2**M`` coalition values.

    .. math::

        \phi_j = \sum_{S \subseteq N \setminus \{j\}} \frac{|S|!\,(M-|S|-1)!}{M!}
                 \bigl[v(S \cup \{j\}) - v(S)\bigr]

    (Shapley, 1953), evaluated as one matrix product ``phi = A (v - v(empty))`` with the
    coefficients of :func:`jaxshap.coalitions.exact_coefficients`. Costs ``2**M`` calls of
    ``v``, made as one batched call.

    Args:
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static).

    Returns:
      ``(phi, v_empty, v_full)``: ``phi`` of shape ``[M, ...]``, and the values of the empty and
      the full coalition (so ``phi.sum(0) == v_full - v_empty``).
    """
    masks = all_masks(n_features)
    v = value_fn(masks)
    v0 = v[0]
    coef = exact_coefficients(masks, dtype=v.dtype)
    # full float32 precision: GPUs default to TF32 for float32 products, which would round the
    # Shapley coefficients to 10 bits and break efficiency at about 1e-4 relative
    phi = jnp.tensordot(coef, v - v0, axes=1, precision=jax.lax.Precision.HIGHEST)
    return phi, v0, v[-1]
