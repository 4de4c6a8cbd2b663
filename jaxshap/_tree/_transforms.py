r"""Explaining a transformed output (probability, loss) of a tree ensemble, per background row.

For ``model_output`` other than the raw margin, the output is ``g(f(x))`` with ``f`` the
ensemble's raw output (margin) and ``g`` the output transform (sigmoid, softmax) or the loss given the
label ``y``. As in shap's interventional TreeSHAP (Lundberg et al. 2020, Methods, "Explaining
transformed outputs"), each background row ``b`` gives the raw Shapley values
``phi^{(b)}(x)`` of the pair game ``S -> f(x_S, b_{-S})`` (exact, leaf by leaf, see
:mod:`._interventional`), whose sum is ``f(x) - f(b)``; they are rescaled per output ``k`` by

.. math::

    r_k(x, b) = \frac{g_k(f(x)) - g_k(f(b))}{f_k(x) - f_k(b)}

(the derivative ``g_k'`` when the two margins coincide) and averaged over ``b``. So each pair
sums to ``g_k(f(x)) - g_k(f(b))`` and the values sum to ``g_k(f(x)) - mean_b g_k(f(b))``:
efficiency holds in the transformed output's units, with base value ``mean_b g_k(f(b))``.

The softmax couples the classes: probability ``k`` changes when any class's margin does. Its
change between ``f(b)`` and ``f(x)`` is first shared among the classes' margins by the Shapley
values ``psi_{kj}`` of the ``K``-player game ``T -> softmax_k(m_T)``, where ``m_T`` takes the
margins of the classes in ``T`` from ``f(x)`` and the others from ``f(b)`` (so
``sum_j psi_{kj} = g_k(f(x)) - g_k(f(b))`` exactly); then class ``j``'s raw pair values are
rescaled by ``r_{kj} = psi_{kj} / (f_j(x) - f_j(b))``. For one output this is the rescaling
above; every pair still sums to the change in ``g_k``.

Transforms (``y`` the label of the explained row):

* ``"sigmoid"``: ``sigmoid(m)``; ``"softmax"``: ``softmax(m)_k`` (the margins of all classes
  enter; the rescaling is per class);
* ``"logistic_nlogloss"``: ``-(y log p + (1 - y) log(1 - p))`` with ``p = sigmoid(m)``;
* ``"squared_loss"``: ``(m - y)^2``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_codes_bits, shapley_weights

TRANSFORMS = ("identity", "sigmoid", "softmax", "logistic_nlogloss", "squared_loss")


def apply(transform: str, m: jax.Array, y: jax.Array) -> jax.Array:
    """``g(m)`` for margins ``m`` ``[..., K]`` and the label ``y`` (a scalar)."""
    if transform == "identity":
        return m
    if transform == "sigmoid":
        return jax.nn.sigmoid(m)
    if transform == "softmax":
        return jax.nn.softmax(m, axis=-1)
    if transform == "logistic_nlogloss":
        # -log sigmoid(m) = softplus(-m), -log(1 - sigmoid(m)) = softplus(m)
        return y * jax.nn.softplus(-m) + (1.0 - y) * jax.nn.softplus(m)
    if transform == "squared_loss":
        return (m - y) ** 2
    raise ValueError(f"Unknown transform {transform!r}.")  # pragma: no cover


def derivative(transform: str, m: jax.Array, y: jax.Array) -> jax.Array:
    """``d g_k / d m_k`` (the limit of the rescaling when the two margins coincide)."""
    if transform == "identity":
        return jnp.ones_like(m)
    if transform == "sigmoid":
        p = jax.nn.sigmoid(m)
        return p * (1.0 - p)
    if transform == "softmax":
        p = jax.nn.softmax(m, axis=-1)
        return p * (1.0 - p)
    if transform == "logistic_nlogloss":
        return jax.nn.sigmoid(m) - y
    if transform == "squared_loss":
        return 2.0 * (m - y)
    raise ValueError(f"Unknown transform {transform!r}.")  # pragma: no cover


def _class_game_tables(k: int):
    """For the ``K``-class Shapley values: per class ``j``, the coalitions ``T`` without ``j``,
    ``T | {j}``, and the Shapley weights ``|T|! (K-|T|-1)! / K!``; and all ``2**K`` coalition masks."""
    codes = np.arange(2**k)
    masks = all_codes_bits(k)
    without = np.stack([codes[~masks[:, j]] for j in range(k)])  # [K, 2**(K-1)]
    with_ = without | (1 << np.arange(k))[:, None]
    return masks, without, with_, shapley_weights(k)[masks.sum(1)[without]]


MAX_SOFTMAX_CLASSES = 12


def rescale_matrix(transform: str, fx: jax.Array, fb: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``R`` ``[B, K, K]`` and ``g(f(b))`` ``[B, K]``: output ``k``'s value is
    ``sum_j R[b, k, j]`` times class ``j``'s raw pair values (diagonal except for softmax)."""
    if transform != "softmax":
        r, gb = rescale(transform, fx, fb, y)
        return jax.vmap(jnp.diag)(r), gb
    k = fx.shape[-1]
    masks, without, with_, weight = _class_game_tables(k)
    m = jnp.where(jnp.asarray(masks)[None], fx[None, None, :], fb[:, None, :])  # [B, 2**K, K]
    v = jax.nn.softmax(m, axis=-1)  # [B, 2**K, K(k)]
    psi = jnp.einsum("bjtk,jt->bkj", v[:, with_] - v[:, without], jnp.asarray(weight, fx.dtype))
    d = fx[None, :] - fb  # [B, K(j)]
    tiny = jnp.abs(d) <= 1e-6 * (1.0 + jnp.abs(fx[None, :]))
    p = jax.nn.softmax(fx)
    grad = p[:, None] * (jnp.eye(k, dtype=fx.dtype) - p[None, :])  # d p_k / d m_j at f(x)
    r = jnp.where(tiny[:, None, :], grad[None], psi / jnp.where(tiny, 1.0, d)[:, None, :])
    return r, jax.nn.softmax(fb, axis=-1)


def rescale(transform: str, fx: jax.Array, fb: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per background row and output, the factor ``r_k(x, b)`` ``[B, K]`` and ``g_k(f(b))``.

    Args:
      fx: ``[K]`` the explained row's margins.
      fb: ``[B, K]`` the background rows' margins.
      y: the explained row's label (ignored by sigmoid and softmax).
    """
    gx = apply(transform, fx, y)
    gb = apply(transform, fb, y)
    d = fx[None, :] - fb
    tiny = jnp.abs(d) <= 1e-6 * (1.0 + jnp.abs(fx[None, :]))
    ratio = (gx[None, :] - gb) / jnp.where(tiny, 1.0, d)
    return jnp.where(tiny, derivative(transform, fx, y)[None, :], ratio), gb
