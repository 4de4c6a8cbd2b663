"""Objects as pytrees: arrays are leaves, everything else is static configuration.

An explainer (or a model such as ``functools.partial(mlp, params)``) is split, in the spirit of
equinox's ``filter``, into its *dynamic* part (every JAX or NumPy array it holds, the leaves that
flow through ``jax.jit`` and ``jax.grad``) and its *static* part (the tree structure and every
other value: functions, ints, strings), which becomes part of the compiled program's cache key.
Two objects whose static parts are equal and whose arrays have the same shapes share one
compiled program; arrays with different values never change the program.

Static values compare by value when they are hashable (ints, strings, tuples, functions by
identity) and by identity otherwise, so two distinct unhashable objects never share a program
(a shared program for different configurations would be a silent wrong answer).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import numpy as np


def is_array_leaf(x: Any) -> bool:
    """True for the values that are dynamic leaves: JAX arrays (and tracers) and NumPy arrays."""
    return isinstance(x, (jax.Array, np.ndarray, np.generic)) and not isinstance(x, (str, bytes))


class Static:
    """A hashable wrapper of a static value: equal by value when hashable, else by identity."""

    __slots__ = ("value", "_hash", "_by_id")

    def __init__(self, value: Any):
        self.value = value
        try:
            self._hash, self._by_id = hash(value), False
        except TypeError:
            self._hash, self._by_id = id(value), True

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Static):
            return NotImplemented
        a, b = self.value, other.value
        if a is b:
            return True
        if self._by_id or other._by_id or type(a) is not type(b) or self._hash != other._hash:
            return False
        try:
            return bool(a == b)
        except Exception:  # an __eq__ that returns arrays or raises: treat as different
            return False

    def __repr__(self) -> str:
        return f"Static({self.value!r})"


def split(obj: Any) -> tuple[tuple[Any, ...], tuple]:
    """Split ``obj`` into ``(dynamic leaves, static spec)``; :func:`merge` inverts it.

    A ``functools.partial`` (not a pytree in JAX) is opened: its function is static and its
    bound arguments are a pytree, so ``partial(mlp, params)`` exposes ``params`` as leaves.
    """
    func = None
    if type(obj) is functools.partial:
        func, obj = Static(obj.func), (obj.args, obj.keywords)
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    dynamic = tuple(leaf for leaf in leaves if is_array_leaf(leaf))
    static = tuple(None if is_array_leaf(leaf) else Static(leaf) for leaf in leaves)
    return dynamic, (func, treedef, static)


def merge(dynamic: Any, spec: tuple) -> Any:
    """Rebuild the object that :func:`split` took apart, with (possibly traced) ``dynamic`` leaves."""
    func, treedef, static = spec
    it = iter(dynamic)
    obj = jax.tree_util.tree_unflatten(treedef, [next(it) if s is None else s.value for s in static])
    if func is not None:
        args, keywords = obj
        return functools.partial(func.value, *args, **keywords)
    return obj


def avals(dynamic: Any) -> tuple:
    """Shapes and dtypes of dynamic leaves (hashable; works for tracers too)."""
    return tuple((tuple(np.shape(a)), np.dtype(a.dtype).str) for a in dynamic)


def register_fields(cls: type, skip: Callable[[str], bool] = lambda name: name.endswith("_")) -> type:
    """Register ``cls`` as a pytree over its instance attributes.

    Every attribute is split with :func:`split`: its arrays become children and the rest (the
    configuration) the static auxiliary data. Attributes for which ``skip(name)`` is true (by
    default fitted results such as ``last_rounds_``) are left out of the tree.
    """

    def flatten(obj):
        children, aux = [], []
        for name in sorted(vars(obj)):
            if skip(name):
                continue
            dynamic, spec = split(vars(obj)[name])
            children.extend(dynamic)
            aux.append((name, spec, len(dynamic)))
        return children, tuple(aux)

    def unflatten(aux, children):
        obj = object.__new__(cls)
        i = 0
        for name, spec, count in aux:
            setattr(obj, name, merge(children[i : i + count], spec))
            i += count
        return obj

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    return cls
