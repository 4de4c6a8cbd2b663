"""An :class:`~jaxshap.Explanation` outside jaxshap: a NumPy ``.npz`` file (written and read back,
no pickle), a ``shap.Explanation`` of NumPy arrays (``Explanation.to_shap()``), and shap's own
plot functions taking jaxshap results (``shap.plots.beeswarm(ex(X))``).

shap's plots check ``isinstance(x, shap.Explanation)`` against shap's own class (a plain
metaclass: nothing can be registered with it). So once shap is imported (now, or later: a
finder on ``sys.meta_path`` waits for it) its public plot functions (``shap.plots.*``, the
top-level ``shap.*_plot`` and ``shap.initjs``) are wrapped to convert each jaxshap
:class:`~jaxshap.Explanation` or cohorts object among their arguments with ``to_shap()`` (float64,
as shap's own results) and each JAX array to NumPy; every other argument reaches shap's function
untouched. :func:`hook_shap` is called when the Explanation class is defined, so this holds for
every jaxshap result without importing :mod:`jaxshap.plots`.
"""

from __future__ import annotations

import functools
import importlib.abc
import inspect
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ._arrays import FEATURES


_ARRAYS = ("values", "base_values", "data", "stderr", "interaction_values")


def save(expl: Any, file: Any) -> None:
    """Write the arrays, names, axes and ``display_data`` of ``expl`` to ``file`` (``.npz``).

    ``display_data`` of Python objects (strings and numbers mixed, as from a DataFrame) is written
    as text, since an ``.npz`` without pickle holds no objects.
    """
    arrays = {}
    for name in _ARRAYS:
        leaf = getattr(expl, "_" + name, None)
        if leaf is not None:
            arrays[name] = np.asarray(leaf)
    arrays["feature_names"] = np.asarray(expl._feature_names, dtype=str)
    if expl._output_names is not None:
        arrays["output_names"] = np.asarray(expl._output_names, dtype=str)
    arrays["axes"] = np.asarray(expl._axes, dtype=str)
    display = expl.display_data
    if display is not None:
        arrays["display_data"] = display.astype(str) if display.dtype == object else display
    np.savez(file, **arrays)


def load(cls: type, file: Any) -> Any:
    """Read what :func:`save` wrote: arrays come back as JAX arrays, ``display_data`` as NumPy."""
    with np.load(file, allow_pickle=False) as z:
        get = lambda k: jnp.asarray(z[k]) if k in z.files else None  # noqa: E731
        names = z["feature_names"]
        outputs = z["output_names"] if "output_names" in z.files else None
        obj = cls(
            get("values"),
            get("base_values"),
            get("data"),
            get("stderr"),
            str(names) if names.ndim == 0 else [str(n) for n in names],
            None if outputs is None else (str(outputs) if outputs.ndim == 0 else [str(n) for n in outputs]),
            get("interaction_values"),
        )
        obj._axes = tuple(str(a) for a in z["axes"])
        if "display_data" in z.files:
            obj.display_data = z["display_data"]
    return obj


def _history(expl: Any, shap: Any) -> list:
    """The operations applied to ``expl`` as shap's ``OpHistoryItem`` records (``[]`` where this
    shap has none)."""
    item = getattr(getattr(shap, "_explanation", None), "OpHistoryItem", None)
    if item is None:
        return []
    return [
        item(name=name, prev_shape=shape, args=args, kwargs=dict(kwargs), collapsed_instances=collapsed)
        for name, shape, args, kwargs, collapsed in getattr(expl, "_history", ())
    ]


def _numpy(a: Any) -> Any:
    """``a`` as NumPy (gathered from any device), floating numbers as float64 (shap's own results
    are float64, and its plots place labels ``1e-8`` apart, which float32 cannot resolve), a 0-d
    array as a NumPy scalar; ``None`` passes."""
    if a is None:
        return None
    a = np.asarray(a)
    if np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64)
    return a[()] if a.ndim == 0 else a


def to_shap(expl: Any, interactions: bool = False) -> Any:
    """A ``shap.Explanation`` holding ``expl``'s arrays, names, display data and history.

    See :meth:`jaxshap.Explanation.to_shap` for the contract.
    """
    inter = getattr(expl, "_interaction_values", None)
    if interactions and inter is None:
        raise ValueError(
            "to_shap(interactions=True) needs interaction values: explain with "
            "explainer(X, interactions=True) first."
        )
    try:
        import shap
    except ImportError as err:
        raise ImportError(
            "Explanation.to_shap() needs shap: install it with `pip install 'jaxshap[plots]'`."
        ) from err
    kwargs = {}
    if expl._output_names is not None and not isinstance(expl._output_names, str):
        kwargs["output_names"] = expl.output_names
    if expl._stderr is not None and not interactions:
        kwargs["error_std"] = _numpy(expl._stderr)
    if inter is not None and not interactions and FEATURES in expl._axes:
        inter = _numpy(inter)
        axis = expl._axes.index(FEATURES)
        kwargs["main_effects"] = np.moveaxis(np.diagonal(inter, axis1=axis, axis2=axis + 1), -1, axis)
    names = expl.feature_names
    out = shap.Explanation(
        values=_numpy(inter if interactions else expl._values),
        base_values=_numpy(expl._base_values),  # one row of one output: a scalar, as shap's own expl[i]
        data=_numpy(expl._data),
        display_data=expl.display_data,
        feature_names=names if names else None,
        **kwargs,
    )
    out.op_history = _history(expl, shap)
    return out


def convert(arg: Any, widen: bool = True) -> Any:
    """``arg`` for shap: jaxshap results converted (``to_shap()``), JAX arrays as NumPy, and with
    ``widen`` NumPy floating arrays and scalars as float64; containers (dict, list, tuple) are
    converted item by item and returned as they were when nothing in them changed."""
    from ._cohorts import Cohorts  # imported here: this module is imported by the Explanation's
    from ._explanation import Explanation

    if isinstance(arg, (Explanation, Cohorts)):
        return arg.to_shap()
    if isinstance(arg, jax.Array):
        arg = np.asarray(arg)
        widen = True
    if widen and isinstance(arg, (np.ndarray, np.floating)) and np.issubdtype(arg.dtype, np.floating):
        return arg if arg.dtype == np.float64 else arg.astype(np.float64)
    if isinstance(arg, dict):
        new = {k: convert(v, widen) for k, v in arg.items()}
        return arg if all(new[k] is v for k, v in arg.items()) else new
    if type(arg) in (list, tuple):
        items = [convert(v, widen) for v in arg]
        return arg if all(a is b for a, b in zip(items, arg)) else type(arg)(items)
    return arg


def _converting(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def plot(*args: Any, **kwargs: Any) -> Any:
        return fn(*convert(args, widen=False), **convert(kwargs, widen=False))

    plot.converts_jaxshap = True
    return plot


def convert_in_shap(shap: Any) -> None:
    """Wrap shap's public plot functions (``shap.plots.*``, ``shap.*_plot``, ``shap.initjs``) so
    that they take jaxshap results: each :class:`~jaxshap.Explanation` or cohorts object among
    the arguments is converted with ``to_shap()`` and each JAX array with ``np.asarray``; every
    other argument reaches shap's function as it was given. Idempotent."""
    spaces = [(shap, [n for n in vars(shap) if n.endswith("_plot") or n == "initjs"])]
    plots = getattr(shap, "plots", None)
    if plots is not None:
        spaces.append((plots, [n for n in vars(plots) if not n.startswith("_")]))
    for space, names in spaces:
        for name in names:
            fn = getattr(space, name)
            if inspect.isfunction(fn) and not getattr(fn, "converts_jaxshap", False):
                setattr(space, name, _converting(fn))


class _AfterShapImport(importlib.abc.MetaPathFinder):
    """Finds ``shap`` with the other finders and calls :func:`convert_in_shap` once it is loaded."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "shap":
            return None
        for finder in [f for f in sys.meta_path if f is not self]:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            spec.loader = _ThenConvert(spec.loader)
        return spec


class _ThenConvert(importlib.abc.Loader):
    def __init__(self, loader: Any):
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader = module.__loader__ = self.loader  # shap sees its own loader
        self.loader.exec_module(module)
        convert_in_shap(module)


def hook_shap() -> None:
    """Convert in shap now if it is imported, else as soon as it is."""
    shap = sys.modules.get("shap")
    if shap is not None and hasattr(shap, "Explanation"):
        convert_in_shap(shap)
    elif not any(isinstance(f, _AfterShapImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterShapImport())
