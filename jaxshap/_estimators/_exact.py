"""Exact values of one game from the coalitions they need: Shapley values by enumerating every
coalition, Owen values over a binary hierarchy, Winter values over a nested one; and full
float32 precision for the estimators' own linear algebra.

Each exact value is one product ``phi = A (v(masks) - v(empty))`` of a plan's coefficients with
the coalition values, made in one batched call of the value function (:func:`exact_shapley`:
all ``2**M`` coalitions; :func:`owen_exact`: any plan of marginal contributions;
:func:`winter_values`: the Winter plan of a nested hierarchy).

Full precision (:func:`full_precision`): GPUs (and TPUs) evaluate float32 matrix products in
TF32 (or bfloat16 passes) by default, which keeps about 10 bits of mantissa. That is the model's
business when it is the model's product, but in an estimator it silently rounds Shapley
coefficients, kernel weights and Gram matrices to three decimal digits: efficiency then fails at
about 1e-4 relative and regressions lose their accuracy. The estimators therefore trace their own
products at full precision; the model's products (inside ``value_fn``) keep whatever precision
the user's configuration gives them.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_masks, exact_coefficients
from .._coalitions._nested import check_hierarchy, winter_plan


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
    :func:`jaxshap._estimators._exact.winter_values` and the asymmetric orders of
    :class:`jaxshap.maskers.Asymmetric` too.

    Returns:
      ``(phi [M, ...], v_empty, v_full)``; ``phi.sum(0) == v_full - v_empty`` (efficiency).
    """
    v = jnp.asarray(value_fn(jnp.asarray(masks)))
    v0 = v[0]
    # full float32 precision on GPUs (TF32 would round the coefficients): see exact_shapley
    phi = jnp.tensordot(jnp.asarray(coef, v.dtype), v - v0, axes=1, precision=jax.lax.Precision.HIGHEST)
    return phi, v0, v[-1]


def winter_values(value_fn: ValueFn, hierarchy: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Exact Winter values: Shapley values of the quotient game at every level of a hierarchy.

    The players are grouped into nested groups (any number of children per node, any depth).
    Every group's members arrive together, recursively, each node ordering its children
    uniformly at random; a player's value is its mean marginal contribution over those orders
    (Winter, 1989; Owen, 1977 for one level of groups). For player ``i`` whose ancestor at level
    ``k`` is one of ``n_k`` children with siblings ``G_k``,

    .. math::

        \phi_i = \sum_{T_1 \subseteq G_1} \cdots \sum_{T_d \subseteq G_d}
                 \prod_{k=1}^{d} \frac{|T_k|!\,(n_k - |T_k| - 1)!}{n_k!}
                 \bigl[v(U_T \cup \{i\}) - v(U_T)\bigr], \qquad U_T = \bigcup_k \bigcup_{g \in T_k} g.

    A flat hierarchy of single players gives the Shapley values, a binary one the Owen values.
    Each distinct coalition is evaluated once, in one batched call of ``value_fn``: ``2**n +
    sum_k 2**(n - 1) (c_k - 2)`` of them for a node with ``n`` children that need ``c_k`` each
    (:func:`jaxshap._coalitions._nested.coalition_count`), far fewer than ``2**M`` when groups
    are small. The result is ``phi = C (v - v(empty))`` with the plan's coefficients ``C``.

    Example::

        phi, v0, v1 = winter_values(v, [[0, 1], [2, [3, 4]]])   # groups {0, 1} and {2, {3, 4}}

    Args:
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      hierarchy: nested lists (or tuples) of the player positions ``0..M-1``, each exactly once;
        every inner list is a group (static).

    Returns:
      ``(phi, v_empty, v_full)``: ``phi`` of shape ``[M, ...]`` and the values of the empty and the
      full coalition (``phi.sum(0) == v_full - v_empty``: efficiency).

    Raises:
      ValueError: for a hierarchy whose leaves are not ``0..M-1`` each once, or with an empty group.
    """
    hierarchy, _ = check_hierarchy(hierarchy)
    return owen_exact(value_fn, *winter_plan(hierarchy))


F = TypeVar("F", bound=Callable)


def full_precision(fn: F) -> F:
    """Trace ``fn`` with float32 matrix products at full precision (``Precision.HIGHEST``).

    Only for functions that do not call the model: the setting applies to every product traced
    inside ``fn``.
    """

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return wrapped  # type: ignore[return-value]
