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
    see :mod:`jaxshap._coalitions._hierarchy`), evaluated as one product ``phi = coef @ v(masks)``
    with ``masks``/``coef`` from :func:`jaxshap._coalitions._hierarchy.owen_plan`.

    Returns:
      ``(phi [M, ...], v_empty, v_full)``; ``phi.sum(0) == v_full - v_empty`` (efficiency).
    """
    v = value_fn(jnp.asarray(masks))
    phi = jnp.tensordot(jnp.asarray(coef, v.dtype), v, axes=1, precision=jax.lax.Precision.HIGHEST)
    return phi, v[0], v[-1]
