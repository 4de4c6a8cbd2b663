r"""Path-dependent TreeSHAP as dense products at Gauss-Legendre nodes (Quadrature-TreeSHAP).

A path with slots ``u`` (distinct features), cover shares ``z_u`` and, for one row, ``o_u = 1``
where the row follows the slot has the leaf game ``v(S) = value prod_{u in S} o_u prod_{u not in S} z_u``
(Lundberg et al. 2020, Algorithm 2). By :mod:`._quadrature`, its Shapley values are

.. math::

    \phi_u = value\,(o_u - z_u) \int_0^1 \prod_{j \ne u} f_j(t)\, dt, \qquad
    f_j(t) = z_j + t\,(o_j - z_j),

a polynomial of degree ``U - 1``, integrated exactly by ``Q = ceil(U / 2)`` Gauss-Legendre nodes
``t_q`` with weights ``w_q``. With :math:`F_q = \prod_j f_j(t_q)` and
:math:`H_q = value\, w_q F_q`, one slot's term is :math:`\sum_q H_q (o_u - z_u) / f_u(t_q)`:

* ``o_u = 1``: :math:`(1 - z_u) / (z_u + t_q (1 - z_u))`, tabulated per path (``G1``);
* ``o_u = 0``: :math:`-z_u / (z_u (1 - t_q)) = -1 / (1 - t_q)` whenever ``z_u > 0``; for
  ``z_u = 0`` the factor ``f_u`` vanishes, and so does the term (its own ``o_u - z_u = 0``, and
  every other slot's product holds ``f_u = 0``): no division by zero is ever made.

So for a block of paths and a chunk of rows the kernel is a product over the slot axis and a
weighted sum over the node axis of arrays ``[paths, slots, nodes, rows]``: no scan, and the program
does not grow with the depth or the number of trees. Both factor choices are tabulated on the host
(``A1``, ``A0``: :math:`f_u(t_q)` for ``o_u = 1`` and ``0``), so a row costs selects and products.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._quadrature import gauss_legendre


def shapley_arrays(zero_fraction: np.ndarray, value: np.ndarray) -> dict:
    """Host tables of :func:`shapley_block` for paths ``[P, U]`` (float64).

    Returns:
      ``A1``, ``A0`` ``[P, U, Q]``; ``G`` ``[P, U + 1, Q]``: ``G1`` of the module docstring for each
      slot and, last, ``1 / (1 - t_q)`` (the term of the slots the row does not follow);
      ``vw`` ``[P, Q]`` (``value * w_q``) and ``zpos`` ``[P, U]``; ``Q = ceil(U / 2)``.
    """
    z = np.asarray(zero_fraction, np.float64)[..., None]
    t, w = gauss_legendre((z.shape[1] + 1) // 2)
    a1 = z + t * (1.0 - z)
    off = np.broadcast_to(1.0 / (1.0 - t), (z.shape[0], 1, t.size))
    return {
        "A1": a1, "A0": z * (1.0 - t), "G": np.concatenate([(1.0 - z) / a1, off], axis=1),
        "vw": np.asarray(value, np.float64)[:, None] * w, "zpos": z[..., 0] > 0,
    }


def shapley_block(params: dict, follow: jax.Array) -> jax.Array:
    """``[P, U, r]``: each path's contribution to each slot's feature for a chunk of rows.

    Args:
      params: one block of :func:`shapley_arrays` (device arrays).
      follow: ``[P, U, r]`` booleans ``o``: the rows follow the slot.
    """
    f = jnp.where(follow[:, :, None, :], params["A1"][..., None], params["A0"][..., None])  # [P, U, Q, r]
    h = jnp.prod(f, axis=1) * params["vw"][..., None]  # [P, Q, r]
    if h.dtype == jnp.float64:  # XLA's CPU sums of float64 products run 1.5x slower than its batched dot
        terms = jnp.einsum("pqr,puq->pur", h, params["G"])
    else:  # float32: as fast, and half the compile time
        terms = jnp.sum(h[:, None] * params["G"][..., None], axis=2)  # [P, U + 1, r]
    off = jnp.where(params["zpos"][..., None], -terms[:, -1:], 0.0)
    return jnp.where(follow, terms[:, :-1], off)
