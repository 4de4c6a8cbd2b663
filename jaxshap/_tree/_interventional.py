r"""Interventional TreeSHAP against one background row, leaf by leaf, in closed form.

With background row ``b``, the value of a coalition ``S`` is the tree's output at the hybrid
row ``(x_S, b_{-S})``. A leaf is reached by the hybrid iff every slot (distinct feature) of
its path is followed by the row whose value the hybrid takes there. Let ``A`` be the slots
followed only by ``x``, ``B`` those followed only by ``b``; if some slot is followed by
neither, the leaf is never reached and contributes nothing. Otherwise the leaf's indicator
game is ``g(S) = 1[A subseteq S and B cap S = empty]``, in which slots followed by both are
null players, and its Shapley values are (with ``a = |A|``, ``b = |B|``)

.. math::

    \phi_i = \frac{(a-1)!\, b!}{(a+b)!} \quad (i \in A), \qquad
    \phi_j = -\frac{a!\, (b-1)!}{(a+b)!} \quad (j \in B), \qquad 0 \text{ otherwise}.

(In a random order of the players, ``i in A`` turns the leaf on iff it comes after the rest
of ``A`` and before all of ``B``; ``j in B`` turns it off iff it comes after all of ``A`` and
before the rest of ``B``.) Multiplying by the leaf value, summing over leaves and trees and
averaging over the background rows gives the exact interventional Shapley values, the same
as enumerating all coalitions with the ``Independent`` masker (Lundberg et al. 2020;
Janzing et al. 2020). The values depend on ``b`` only through the pattern of slots it follows,
so for short paths the background is summarised per path by a histogram of its patterns.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_codes_bits, shapley_weight, subset_sums
from .._coalitions._static_cache import static_cache


def _weight_tables(n_slots: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``w_a[a, b] = (a-1)! b! / (a+b)!`` and ``w_b[a, b] = -a! (b-1)! / (a+b)!``."""
    m = n_slots + 1
    wa, wb = np.zeros((m, m)), np.zeros((m, m))
    for a in range(m):
        for b in range(m - a):
            if a >= 1:  # (a-1)! b! / (a+b)!: a coalition of a-1 among a+b players
                wa[a, b] = shapley_weight(a + b, a - 1)
            if b >= 1:  # a! (b-1)! / (a+b)!
                wb[a, b] = -shapley_weight(a + b, a)
    return wa.astype(dtype), wb.astype(dtype)


def pair_shapley(x_follows: jax.Array, b_follows: jax.Array, dtype=jnp.float32) -> jax.Array:
    """Shapley values ``[U]`` of one leaf's indicator game for one (row, background row) pair.

    Args:
      x_follows: ``[U]`` booleans, slots of the path that the explained row follows.
      b_follows: ``[U]`` booleans, slots that the background row follows.

    Returns:
      ``[U]`` as in the module docstring (multiply by the leaf value).
    """
    wa, wb = (jnp.asarray(w) for w in _weight_tables(x_follows.shape[-1], dtype))
    only_x = x_follows & ~b_follows
    only_b = b_follows & ~x_follows
    reach = jnp.all(x_follows | b_follows, axis=-1, keepdims=True)
    a = jnp.sum(only_x, axis=-1, keepdims=True)
    b = jnp.sum(only_b, axis=-1, keepdims=True)
    phi = jnp.where(only_x, wa[a, b], 0.0) + jnp.where(only_b, wb[a, b], 0.0)
    return jnp.where(reach, phi, 0.0).astype(dtype)


@static_cache(16)
def pattern_table(n_slots: int, dtype) -> np.ndarray:
    """``[2**U (x pattern), 2**U (b pattern), U]``: the pair values of every pair of patterns.

    The same closed form as :func:`pair_shapley`, tabulated on the host with NumPy.
    """
    wa, wb = (np.asarray(w, np.float64) for w in _weight_tables(n_slots, np.float64))
    bits = all_codes_bits(n_slots)
    x, b = bits[:, None, :], bits[None, :, :]
    only_x, only_b = x & ~b, b & ~x
    a_count = only_x.sum(-1, keepdims=True)
    b_count = only_b.sum(-1, keepdims=True)
    reach = np.all(x | b, axis=-1, keepdims=True)
    phi = np.where(only_x, wa[a_count, b_count], 0.0) + np.where(only_b, wb[a_count, b_count], 0.0)
    return np.where(reach, phi, 0.0).astype(dtype)


def interventional_tables_host(bg_codes: np.ndarray, n_slots: int, max_chunk_bytes: int = 4 * 2**20) -> np.ndarray:
    r"""``[P, 2**U, U]``: for each path and x pattern, the mean over background rows of the pair
    values (NumPy, float64).

    Args:
      bg_codes: ``[B, P]`` the pattern of slots each background row follows on each path.
      n_slots: ``U``.

    Only background patterns ``b`` with ``a | b`` full reach the leaf, i.e. ``b = ~a | c`` with
    ``c subseteq a``; then ``A = a & ~b`` has ``|a| - |c|`` slots and ``B = ~a`` has ``U - |a|``,
    so the pair values depend on ``b`` only through ``|b|`` (and, for ``u in a``, whether
    ``u in b``). With the background's pattern shares ``h`` and the ranked superset sums
    ``Z_j[x] = sum_{b supseteq x, |b| = j} h[b]`` (one zeta transform per rank ``j``):

    .. math::

        T[a, u] = \sum_k w_b(|a| - k, U - |a|)\, Z_{U-|a|+k}[\bar a] \quad (u \notin a), \qquad
        T[a, u] = \sum_k w_a(|a| - k, U - |a|)\,
                  \big(Z_{U-|a|+k}[\bar a] - Z_{U-|a|+k}[\bar a \cup \{u\}]\big) \quad (u \in a),

    in ``O(U^2 2^U)`` per path, whatever the number of background rows.
    """
    n_bg, p = bg_codes.shape
    u = n_slots
    size = 2**u
    wa, wb = _weight_tables(u, np.float64)
    codes = np.arange(size)
    in_a = all_codes_bits(u)  # [2**U, U]
    pc = in_a.sum(1)
    nota = (size - 1) ^ codes
    bits = 1 << np.arange(u)
    flat = np.arange(p)[None, :] * size + bg_codes
    hist = np.bincount(flat.reshape(-1), minlength=p * size).reshape(p, size) / n_bg
    out = np.empty((p, size, u))
    chunk = max(1, max_chunk_bytes // (8 * (u + 1) * size * (u + 2)))
    for start in range(0, p, chunk):
        h = hist[start : start + chunk]  # [c, 2**U]
        c = h.shape[0]
        z = np.zeros((c, u + 1, size))
        z[:, pc, codes] = h
        z = subset_sums(z, superset=True)
        z = z.reshape(c, (u + 1) * size)
        s_a = np.zeros((c, size))
        s_b = np.zeros((c, size))
        d = np.zeros((c, size, u))
        for k in range(u + 1):
            ok = k <= pc
            j = np.where(ok, u - pc + k, 0) * size
            wa_k = np.where(ok, wa[np.clip(pc - k, 0, u), u - pc], 0.0)
            wb_k = np.where(ok, wb[np.clip(pc - k, 0, u), u - pc], 0.0)
            zk = np.take(z, j + nota, axis=1)  # [c, 2**U]
            s_a += zk * wa_k
            s_b += zk * wb_k
            d += np.take(z, (j + nota)[:, None] | bits[None, :], axis=1) * wa_k[:, None]
        out[start : start + chunk] = np.where(in_a[None], s_a[:, :, None] - d, s_b[:, :, None])
    return out
