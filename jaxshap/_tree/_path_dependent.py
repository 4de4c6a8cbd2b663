r"""Path-dependent TreeSHAP on one root-to-leaf path (Lundberg et al. 2020, Algorithm 2).

For one path with ``U`` distinct features (slots), zero fractions ``z_u`` (the share of
training cover that follows the path through the slot's splits) and one fractions
``o_u in {0, 1}`` (whether the explained row follows it), the path-dependent value function
of the leaf is ``v(S) = value * prod_{u in S} o_u * prod_{u not in S} z_u``. Its Shapley values
have the closed form

.. math::

    \phi_u = value\,(o_u - z_u) \sum_{k=0}^{U-1} \frac{k!\,(U-1-k)!}{U!}\, e_k^{(-u)},
    \qquad \prod_{j \ne u} (z_j + o_j t) = \sum_k e_k^{(-u)} t^k ,

the ``k``-th coefficient counting the weight of the coalitions of size ``k`` among the other
slots. The product over all slots is built once ("extend"); dividing one factor back out
("unwind") gives each ``e^{(-u)}``: by the stable backward recurrence
``g_{k-1} = c_k - z_u g_k`` when ``o_u = 1``, and by ``c / z_u`` when ``o_u = 0``.
Summing the leaf contributions over all paths of all trees gives TreeSHAP's values.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_codes_bits, shapley_weights as coalition_weights


def shapley_weights(n_slots: int, dtype) -> jax.Array:
    """``w_k = k! (U-1-k)! / U!`` for ``k = 0 .. U-1``."""
    return jnp.asarray(coalition_weights(n_slots), dtype)


def path_shapley(zero_fraction: jax.Array, one: jax.Array) -> jax.Array:
    """Shapley values ``[U]`` of one path's game for a unit leaf value.

    Args:
      zero_fraction: ``[U]`` cover ratios ``z_u`` in ``[0, 1]``.
      one: ``[U]`` booleans ``o_u``: the row follows the path through slot ``u``.

    Returns:
      ``[U]``: ``phi_u`` as in the module docstring (multiply by the leaf value).
    """
    z = zero_fraction
    o = one.astype(z.dtype)
    n = z.shape[0]

    def extend(c, slot):  # multiply by (z_j + o_j t)
        z_j, o_j = slot
        return z_j * c + o_j * jnp.concatenate([jnp.zeros(1, c.dtype), c[:-1]]), None

    c, _ = jax.lax.scan(extend, jnp.zeros(n + 1, z.dtype).at[0].set(1.0), (z, o))
    w = shapley_weights(n, z.dtype)

    def unwind(carry, step):  # every slot at once: g_{k-1} = c_k - z g_k, and s += w_{k-1} g_{k-1}
        g, s = carry
        c_k, w_before = step
        g = c_k - z * g
        return (g, s + w_before * g), None

    top = jnp.broadcast_to(c[n], (n,))  # g_{U-1} = c_U
    (_, s_one), _ = jax.lax.scan(unwind, (top, w[n - 1] * top), (c[1:n], w[: n - 1]), reverse=True)
    s_zero = (c[:n] @ w) / jnp.where(z > 0, z, 1.0)  # o_u = 0: e^{(-u)} = c / z_u
    return (o - z) * jnp.where(one, s_one, s_zero)


def expected_value(zero_fraction: np.ndarray, value: np.ndarray, output: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``E[f]`` under the trees' cover: ``base + sum_paths value * prod_u z_u`` per output."""
    out = np.asarray(base, dtype=np.float64).copy()
    np.add.at(out, output, value * np.prod(zero_fraction, axis=1))
    return out


def path_tables_host(zero_fraction: np.ndarray, max_chunk_bytes: int = 4 * 2**20) -> np.ndarray:
    r"""``[P, 2**U, U]``: :func:`path_shapley` for every path and every pattern, in NumPy (float64).

    Uses the integral form of the Shapley weights, ``k! (U-1-k)! / U! = int_0^1 s^k (1-s)^{U-1-k} ds``
    (the view of Linear TreeShap, Yu et al. 2022), which turns the weighted sum over coalition
    sizes into

    .. math::

        \phi_u = (o_u - z_u) \int_0^1 \prod_{j \ne u} \big((1 - s) z_j + s\, o_j\big)\, ds ,

    a polynomial of degree ``U - 1`` in ``s``, integrated exactly by Gauss-Legendre quadrature
    with ``ceil(U / 2)`` nodes. The products leaving one factor out are prefix times suffix
    products (no division, so zero fractions of 0 are fine). Vectorised over paths and
    patterns, so building an explainer needs no compilation and no loop over nodes.
    """
    p, n = zero_fraction.shape
    o = all_codes_bits(n).astype(np.float64)  # [2**U, U]
    x, w = np.polynomial.legendre.leggauss(max(1, (n + 1) // 2))
    s_nodes, weights = (x + 1.0) / 2.0, w / 2.0
    q = s_nodes.size
    out = np.empty((p, 2**n, n))
    chunk = max(1, max_chunk_bytes // (8 * 3 * q * 2**n * n))
    for start in range(0, p, chunk):
        z = np.asarray(zero_fraction[start : start + chunk], np.float64)  # [c, U]
        # factors [U, q, c, 2**U], slot axis first so that the running products are contiguous
        f = (1.0 - s_nodes)[None, :, None, None] * z.T[:, None, :, None] + s_nodes[None, :, None, None] * o.T[:, None, None, :]
        loo = np.empty_like(f)  # products leaving slot u out
        run = np.ones(f.shape[1:])
        for j in range(n):  # prefix products
            loo[j] = run
            run = run * f[j]
        run = np.ones(f.shape[1:])
        for j in range(n - 1, -1, -1):  # times suffix products
            loo[j] *= run
            run = run * f[j]
        integral = np.einsum("q,uqca->cau", weights, loo)
        out[start : start + chunk] = (o[None] - z[:, None, :]) * integral
    return out
