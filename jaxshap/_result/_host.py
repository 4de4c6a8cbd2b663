"""Where an :class:`~jaxshap.Explanation`'s arrays live: JAX leaves, NumPy for the user.

An explanation stores its arrays as they were computed (JAX arrays from the explainers; what the
user passed otherwise) and these are its pytree leaves. What a user reads from it outside traced
code is NumPy (:func:`to_host`), and what its methods compute on concrete arrays they compute with
NumPy, as ``shap.Explanation`` does, so that orders and reductions agree with shap's bit for bit
(:func:`apply`); inside ``jit``/``grad``/``vmap`` both hand tracers through ``jax.numpy``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core._inputs import is_traced


def to_host(a: Any) -> Any:
    """``a`` as NumPy when it is a concrete array on one device; anything else as it is.

    A concrete JAX array becomes a read-only NumPy view (no copy on the CPU); a 0-d array becomes
    a NumPy scalar, as in ``shap.Explanation``. Tracers pass (so traced code keeps differentiating),
    and so does an array sharded over several devices (gathering it would undo the sharding that
    placed it; ``np.asarray`` gathers it on request).
    """
    if isinstance(a, jax.Array) and not is_traced(a):
        if len(a.sharding.device_set) > 1:
            return a
        a = np.asarray(a)
    if isinstance(a, np.ndarray) and a.ndim == 0:
        return a[()]
    return a


def apply(fn: str, a: Any, *args: Any, **kwargs: Any) -> Any:
    """``numpy.<fn>(a, ...)`` on a concrete array, ``jax.numpy.<fn>(a, ...)`` on a traced one.

    The NumPy result is stored back as the kind of array ``a`` was (a JAX leaf stays a JAX leaf),
    so an explanation stays a pytree of JAX arrays through its methods. ``None`` passes.
    """
    if a is None:
        return None
    if is_traced(a):
        return getattr(jnp, fn)(a, *args, **kwargs)
    out = getattr(np, fn)(np.asarray(a), *args, **kwargs)
    return jnp.asarray(out) if isinstance(a, jax.Array) else out


class StaticArray:
    """A NumPy array carried as static pytree metadata (``display_data``), never a leaf.

    Compared by content and hashed by shape, so that a treedef holding one can be compared and a
    ``jit`` cache can key on it.
    """

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, StaticArray) and self.array.shape == other.array.shape and bool(
            np.all(self.array == other.array)
        )

    def __hash__(self) -> int:
        return hash(self.array.shape)
