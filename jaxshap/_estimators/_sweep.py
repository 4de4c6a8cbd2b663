r"""The inverse of a small symmetric positive-definite matrix by sweeping, in XLA operations only.

Sweeping pivot :math:`k` of a symmetric matrix :math:`A` (Beaton, 1964; Goodnight, 1979, "A
tutorial on the SWEEP operator") replaces it by

.. math::

    A'_{kk} = -\frac{1}{A_{kk}}, \qquad A'_{ik} = A'_{ki} = \frac{A_{ik}}{A_{kk}}, \qquad
    A'_{ij} = A_{ij} - \frac{A_{ik} A_{kj}}{A_{kk}} \quad (i, j \ne k),

and sweeping every pivot once gives :math:`-A^{-1}`. It is Gauss-Jordan elimination without
pivoting, which is stable for a positive-definite matrix: every pivot is a Schur complement of
:math:`A`, hence positive, and the error is of the order of the Cholesky inverse's (the tests
compare them). It costs :math:`n^3` multiply-adds in ``n`` rank-one updates, a
``lax.fori_loop``.

Use it for the small per-row matrices of a batched program (a KernelSHAP row's ``M x M`` Gram
matrix, the leading-terms prior's ``r x r`` update): on a CPU, jaxlib's Cholesky and triangular
solve are LAPACK calls, which load SciPy's LAPACK on first use (about 0.25 s), need ordering
against other LAPACK calls in the program (:mod:`jaxshap._platform._lapack_order`) and compile
to more kernels; the loop is a few XLA kernels and, for matrices of up to about a hundred
rows, as fast. For one large matrix use a Cholesky factorisation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def sweep_inverse(a: jax.Array) -> jax.Array:
    """``a^{-1}`` of a symmetric positive-definite ``a [n, n]`` (module docstring); ``vmap`` it
    for a batch. ``a`` is symmetrised first, ``(a + a^T) / 2``: a product such as ``D^T C D`` is
    symmetric only up to rounding."""
    n = a.shape[-1]
    a = (a + a.T) / 2
    index = jnp.arange(n)

    def sweep(k, a):
        col = jax.lax.dynamic_index_in_dim(a, k, axis=1, keepdims=False)
        pivot = jax.lax.dynamic_index_in_dim(col, k, keepdims=False)
        at_k = index == k
        off = jnp.where(at_k, 0.0, col)
        a = a - jnp.outer(off, off) / pivot  # A_ij - A_ik A_kj / A_kk off row and column k
        edge = jnp.where(at_k, -1.0, col) / pivot  # the new row and column k
        a = jnp.where(at_k[:, None], edge[None, :], a)
        return jnp.where(at_k[None, :], edge[:, None], a)

    return -jax.lax.fori_loop(0, n, sweep, a)
