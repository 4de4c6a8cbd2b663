"""An :class:`~jaxshap.Explanation`'s arrays: where they live (JAX leaves, NumPy for the user), and
selecting their rows, features and outputs as ``shap.Explanation`` does.

An explanation stores its arrays as they were computed (JAX arrays from the explainers; what the
user passed otherwise) and these are its pytree leaves. What a user reads from it outside traced
code is NumPy (:func:`to_host`), and what its methods compute on concrete arrays they compute with
NumPy, as ``shap.Explanation`` does, so that orders and reductions agree with shap's bit for bit
(:func:`apply`); inside ``jit``/``grad``/``vmap`` both hand tracers through ``jax.numpy``.

Each axis of ``values`` is named (rows, features, outputs) and indexed on its own (orthogonally,
:func:`select`); ``base_values``, ``data``, ``stderr``, ``interaction_values`` and
``display_data`` follow on the axes they have. Indices may be positions, slices, masks, names, a
one-element ``Explanation`` (``expl.abs.mean(0).argsort[-1]``) or one of shap's op chains.
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


ROWS, FEATURES, OUTPUTS = "rows", "features", "outputs"


def names_index(index: Any, names: Any, what: str) -> Any:
    """Turn names (a str or a list of str) into positions in ``names``; other indices pass."""
    if isinstance(index, str) or (isinstance(index, (list, tuple)) and index and all(isinstance(i, str) for i in index)):
        if names is None or isinstance(names, str):
            raise IndexError(f"this Explanation has no {what} names to look {index!r} up in.")
        names = list(names)

        def position(name):
            if name not in names:
                raise IndexError(f"{name!r} is not one of the {what} names {names}.")
            return names.index(name)

        return position(index) if isinstance(index, str) else np.asarray([position(n) for n in index])
    if isinstance(index, list):
        return np.asarray(index)
    return index


def is_scalar(index: Any) -> bool:
    return isinstance(index, (int, np.integer)) or (hasattr(index, "ndim") and index.ndim == 0 and not isinstance(index, slice))


def take(a: Any, axes: tuple[str, ...], picks: dict[str, Any]) -> Any:
    """Index ``a`` (whose axes are ``axes``) one axis at a time (orthogonal, not broadcast)."""
    if a is None:
        return None
    for pos in reversed(range(len(axes))):
        ix = picks.get(axes[pos], slice(None))
        if isinstance(ix, slice) and ix == slice(None):
            continue
        a = a[(slice(None),) * pos + (ix,)]
    return a


def plain_index(expl: Any, ix: Any) -> Any:
    """An index as NumPy: shap's op chains applied to ``expl``, an explanation replaced by its values."""
    if type(ix).__name__ == "OpChain" and hasattr(ix, "apply"):  # shap.Explanation.abs.mean(0).argsort[-1]
        ix = ix.apply(expl)
    if hasattr(ix, "_values") and hasattr(ix, "tree_flatten"):  # a jaxshap Explanation
        ix = np.asarray(ix._values)
        return int(ix) if ix.ndim == 0 and np.issubdtype(ix.dtype, np.integer) else ix
    if isinstance(ix, jax.Array) and not is_traced(ix):
        return np.asarray(ix)
    return ix


def _axis_picks(expl: Any, index: Any) -> dict[str, Any]:
    """``{axis name: index}`` from a user's index (a tuple, with at most one ``...``)."""
    index = tuple(plain_index(expl, i) for i in (index if isinstance(index, tuple) else (index,)))
    if sum(i is Ellipsis for i in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...').")
    if any(i is Ellipsis for i in index):
        at = next(k for k, i in enumerate(index) if i is Ellipsis)
        fill = len(expl._axes) - (len(index) - 1)
        index = index[:at] + (slice(None),) * max(fill, 0) + index[at + 1 :]
    if len(index) > len(expl._axes):
        raise IndexError(
            f"too many indices: this Explanation's values have {len(expl._axes)} axes {expl._axes}; got {len(index)}."
        )
    picks = {}
    for axis, ix in zip(expl._axes, index):
        if axis == FEATURES:
            ix = names_index(ix, expl._feature_names, "feature")
        elif axis == OUTPUTS:
            ix = names_index(ix, expl._output_names, "output")
        elif isinstance(ix, list):
            ix = np.asarray(ix)
        if isinstance(ix, str):
            raise IndexError(f"rows are indexed by position, not by name; got {ix!r}.")
        picks[axis] = ix
    return picks


def _pick_interactions(expl: Any, picks: dict[str, Any]) -> Any:
    """``interaction_values [n, M, M(, K)]`` (``[n] + [M] * k (+ [K])`` at order ``k``) under a pick:
    rows and outputs follow; a feature pick drops them."""
    extra = getattr(expl, "_interaction_values", None)
    if extra is None or (FEATURES in picks and not (isinstance(picks[FEATURES], slice) and picks[FEATURES] == slice(None))):
        return None
    lead = (ROWS,) if ROWS in expl._axes else ()
    tail = (OUTPUTS,) if OUTPUTS in expl._axes else ()
    features = tuple(f"f{i}" for i in range(np.ndim(extra) - len(lead) - len(tail)))  # 2, or k for order k
    return take(extra, lead + features + tail, {a: picks[a] for a in lead + tail if a in picks})


def select(expl: Any, index: Any) -> Any:
    """``expl[index]``: see :meth:`jaxshap.Explanation.__getitem__`."""
    picks = _axis_picks(expl, index)
    kept = tuple(a for a in expl._axes if not is_scalar(picks.get(a, slice(None))))
    new = expl._with(
        kept,
        ("__getitem__", (), {}, False),
        values=take(expl._values, expl._axes, picks),
        base_values=take(expl._base_values, expl._axes_of("base_values"), picks),
        data=take(expl._data, expl._axes_of("data"), picks),
        stderr=take(expl._stderr, expl._axes, picks),
        interaction_values=_pick_interactions(expl, picks),
    )
    if expl.display_data is not None:
        new._display = StaticArray(np.asarray(take(expl.display_data, expl._axes_of("data"), picks)))
    if FEATURES in picks and not isinstance(expl._feature_names, str):
        sel = np.asarray(expl._feature_names, dtype=object)[picks[FEATURES]]
        new._feature_names = str(sel) if is_scalar(picks[FEATURES]) else tuple(str(n) for n in sel)
    if OUTPUTS in picks and expl._output_names is not None and not isinstance(expl._output_names, str):
        sel = np.asarray(expl._output_names, dtype=object)[picks[OUTPUTS]]
        new._output_names = str(sel) if is_scalar(picks[OUTPUTS]) else tuple(str(n) for n in sel)
    return new
