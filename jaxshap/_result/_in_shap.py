"""shap's own plot functions taking jaxshap results: ``shap.plots.beeswarm(ex(X))``.

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
import numpy as np


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

