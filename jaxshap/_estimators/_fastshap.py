"""The FastSHAP objective: training an explainer network to output Shapley values.

An explainer network ``g(x; theta)`` with ``M K`` outputs is trained so that, for every row, its
(normalised) output is the weighted least-squares fit of the row's coalition values:

.. math::

    \\mathcal L(\\theta) = \\mathbb E_{x}\\, \\mathbb E_{S \\sim p}\\,
        \\bigl\\| v_x(S) - v_x(\\emptyset) - \\textstyle\\sum_{j \\in S} \\phi_j(x; \\theta) \\bigr\\|^2,
    \\qquad p(S) \\propto \\frac{M - 1}{\\binom{M}{|S|} |S| (M - |S|)},

the Shapley kernel as a sampling distribution over ``0 < |S| < M``, whose minimiser for each ``x``
is the vector of Shapley values of the game ``v_x`` (Jethani, Sudarshan, Covert, Lee &
Ranganath, 2022, "FastSHAP: real-time Shapley value estimation", ICLR; Charnes et al. 1988 and
Lundberg & Lee 2017 for the weighted least-squares characterisation). Efficiency is enforced
exactly by the additive normalisation

.. math::

    \\phi(x) = \\tilde g(x) + \\frac{1}{M}\\Bigl(v_x(N) - v_x(\\emptyset) - \\textstyle\\sum_j \\tilde g_j(x)\\Bigr),

which is the projection of the constrained least-squares problem, applied both in training and
when explaining. Coalitions are drawn in complementary pairs ``(S, N \\ S)`` (paired sampling,
Covert & Lee, 2021), which lowers the variance of the gradient.

The value function is interventional, ``v_x(S) = mean_b f(x_S, b_{-S})`` over background rows;
in training it may be estimated from a random subset of the background per coalition: the
estimate is unbiased, so the expected loss differs from the exact one only by a constant and
has the same minimiser. ``v_x(\\emptyset) = mean_b f(b)`` does not depend on ``x`` and
``v_x(N) = f(x)``, so both are exact.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import code_bits, shapley_kernels
from .._coalitions._kernel_sampling import Paired, smallest


def shapley_size_logits(n_features: int) -> np.ndarray:
    """Log-probabilities of coalition sizes ``s = 1..M-1`` under the Shapley kernel.

    Summed over the ``C(M, s)`` coalitions of one size the kernel is ``(M - 1) / (s (M - s))``,
    the mass of KernelSHAP's paired design (:class:`jaxshap.coalitions.Paired`).
    """
    mass = np.array([Paired().size_mass(n_features, s) for s in range(1, n_features)], dtype=np.float64)
    return np.log(mass / mass.sum())


def sample_paired_masks(key: jax.Array, n_features: int, n_pairs: int) -> jax.Array:
    """``2 n_pairs`` coalitions ``[2 P, M]``: ``P`` draws from the Shapley kernel, then their complements.

    A size ``s`` is drawn with probability proportional to ``(M - 1) / (s (M - s))`` and then a
    uniform subset of that size (the ``s`` smallest of ``M`` uniform keys).
    """
    k_size, k_set = jax.random.split(key)
    sizes = 1 + jax.random.categorical(k_size, jnp.asarray(shapley_size_logits(n_features)), shape=(n_pairs,))
    masks = smallest(jax.random.uniform(k_set, (n_pairs, n_features)), sizes)
    return jnp.concatenate([masks, ~masks], axis=0)


def init_mlp(key: jax.Array, sizes: Sequence[int], dtype=jnp.float32) -> list[dict]:
    """Parameters of an MLP with layer widths ``sizes``; He-normal hidden layers, a zero output layer.

    The zero output layer makes the untrained explainer return the normalisation alone,
    ``(f(x) - E f) / M`` for every feature.
    """
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        last = i == len(sizes) - 2
        w = jnp.zeros((fan_in, fan_out), dtype) if last else jax.random.normal(k, (fan_in, fan_out), dtype) * np.sqrt(2.0 / fan_in)
        params.append({"w": w, "b": jnp.zeros((fan_out,), dtype)})
    return params


def apply_mlp(params: list[dict], z: jax.Array) -> jax.Array:
    """``[n, d_in] -> [n, d_out]``, GELU between layers."""
    for layer in params[:-1]:
        z = jax.nn.gelu(z @ layer["w"] + layer["b"])
    return z @ params[-1]["w"] + params[-1]["b"]


def normalise(raw: jax.Array, gap: jax.Array) -> jax.Array:
    """Additive efficient normalisation: ``raw [n, M, K]`` shifted so each row sums to ``gap [n, K]``."""
    m = raw.shape[1]
    return raw + ((gap - raw.sum(axis=1)) / m)[:, None, :]


def fastshap_loss(
    phi: jax.Array,
    x: jax.Array,
    masks: jax.Array,
    f: Callable[[jax.Array], jax.Array],
    background: jax.Array,
    base: jax.Array,
    bg_index: jax.Array,
    weights: jax.Array | None = None,
) -> jax.Array:
    """Mean squared residual of the coalition values of a batch of rows (the FastSHAP loss).

    Args:
      phi: normalised attributions ``[n, M, K]``.
      x: rows ``[n, M]``.
      masks: coalitions ``[n, C, M]`` (each row its own).
      f: model ``[..., M] -> [..., K]``.
      background: ``[B, M]``.
      base: ``v(emptyset) = mean_b f(b)``, ``[K]``.
      bg_index: background rows per coalition, ``[n, C, b]`` indices into ``background``.
      weights: probabilities of the coalitions ``[C]`` when they are enumerated rather than
        sampled (:func:`all_coalitions`); ``None`` weighs the sampled coalitions equally.

    Returns:
      The scalar loss: over rows and outputs, the mean of the (weighted) mean over coalitions
      of ``(v(S) - v0 - z_S . phi)^2``.
    """
    refs = background[bg_index]  # [n, C, b, M]
    inputs = jnp.where(masks[:, :, None, :], x[:, None, None, :], refs)
    values = jax.lax.stop_gradient(f(inputs).mean(axis=2))  # [n, C, K]
    fitted = jnp.einsum("ncm,nmk->nck", masks.astype(phi.dtype), phi)
    squares = (values - base - fitted) ** 2
    if weights is None:
        return squares.mean()
    return jnp.einsum("c,nck->", weights.astype(squares.dtype), squares) / (squares.shape[0] * squares.shape[2])


def all_coalitions(n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Every coalition with ``0 < |S| < M`` and its probability under the Shapley kernel.

    Returns ``(masks [2**M - 2, M] bool, probabilities [2**M - 2])``; training on all of them
    with these weights removes the coalition-sampling noise from the objective (small ``M``).
    """
    m = n_features
    masks = code_bits(np.arange(1, 2**m - 1), m)
    kernel = shapley_kernels(m)[masks.sum(1)]
    return masks, kernel / kernel.sum()
