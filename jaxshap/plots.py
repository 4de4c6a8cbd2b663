"""shap's plots, called on jaxshap results: each converts its arguments with ``to_shap()`` first.

``jaxshap.plots.beeswarm(expl)`` is ``shap.plots.beeswarm(expl.to_shap())``: every
:class:`~jaxshap.Explanation` or cohorts object among the arguments (also inside a dict, list or
tuple, as ``shap.plots.bar`` takes them) is converted, JAX arrays become NumPy and floating
arrays float64 (as shap's own results), everything else is passed through unchanged, so
``jaxshap.plots.heatmap(expl, instance_order=expl.sum(1))`` and
``jaxshap.plots.bar(expl.cohorts(2).abs.mean(0))`` draw what shap draws. shap's legacy names
(``jaxshap.summary_plot``, ``force_plot``, ``dependence_plot``, ``decision_plot``,
``waterfall_plot``, ``initjs``) forward the same way. shap (the ``plots`` extra) must be installed.

shap's own plots take jaxshap results too: ``shap.plots.beeswarm(expl)``. shap's plots check
``isinstance(x, shap.Explanation)`` against its own class (a plain metaclass: nothing can be
registered with it), so once both are imported jaxshap wraps shap's public plot functions
(``shap.plots.*`` and the top-level ``shap.*_plot``) to convert jaxshap results, as above, and
pass everything else through untouched (see :func:`convert_in_shap`).

:func:`ale` draws an :class:`~jaxshap.ALE` result and :func:`component` one component of a
:class:`~jaxshap.Decomposition` itself, with matplotlib (also in the ``plots`` extra).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from ._result._interop import convert as _convert, convert_in_shap

PLOTS = ("bar", "beeswarm", "decision", "force", "heatmap", "scatter", "violin", "waterfall")
LEGACY = ("summary_plot", "force_plot", "dependence_plot", "decision_plot", "waterfall_plot", "initjs")
"""shap's top-level names, forwarded by ``jaxshap.summary_plot`` etc."""

__all__ = ["ale", "component", "convert_in_shap", *PLOTS]


def _shap(name: str) -> Any:
    try:
        import shap
    except ImportError as err:
        raise ImportError(f"jaxshap.{name} draws with shap: install the `plots` extra, "
                          "`pip install 'jaxshap[plots]'`.") from err
    return shap


def _forward(name: str, legacy: bool = False) -> Callable[..., Any]:
    def plot(*args: Any, **kwargs: Any) -> Any:
        shap = _shap(name if legacy else f"plots.{name}")
        fn = getattr(shap, name) if legacy else getattr(shap.plots, name)
        return fn(*_convert(args), **_convert(kwargs))

    plot.__name__ = name
    where = f"shap.{name}" if legacy else f"shap.plots.{name}"
    plot.__doc__ = (f"``{where}`` on jaxshap results and arrays (converted: ``to_shap()``, NumPy, float64); "
                    "same arguments.")
    return plot


bar = _forward("bar")
beeswarm = _forward("beeswarm")
decision = _forward("decision")
force = _forward("force")
heatmap = _forward("heatmap")
scatter = _forward("scatter")
violin = _forward("violin")
waterfall = _forward("waterfall")
summary_plot = _forward("summary_plot", legacy=True)
force_plot = _forward("force_plot", legacy=True)
dependence_plot = _forward("dependence_plot", legacy=True)
decision_plot = _forward("decision_plot", legacy=True)
waterfall_plot = _forward("waterfall_plot", legacy=True)
initjs = _forward("initjs", legacy=True)




def _pick_output(array: Any, n_axes: int, output: int | None) -> Any:
    """One output's values from an array with ``n_axes`` grid axes and maybe a trailing output axis."""
    a = None if array is None else np.asarray(array, np.float64)
    if a is None or a.ndim == n_axes:
        return a
    if output is None:
        raise ValueError(f"`output`: the result has {a.shape[-1]} outputs; pass output=k to draw one of them.")
    if not -a.shape[-1] <= output < a.shape[-1]:
        raise ValueError(f"`output` must be an output from 0 to {a.shape[-1] - 1}; got {output!r}.")
    return a[..., output]


def ale(result: Any, ax: Any = None, *, output: int | None = None, band: float = 1.96, contour: bool = True,
        show: bool = False) -> Any:
    """Draw accumulated local effects (a :class:`~jaxshap.ALE` from :func:`jaxshap.accumulated_local_effects`).

    A numeric feature is a line through the values at the bin edges with a band of
    ``values +- band * stderr`` (when the result has standard errors) and a rug of the bin
    edges; a categorical one is points with error bars at its categories, in the order the
    effects accumulate along; a pair is a heatmap of the values on the two features' bin edges
    (with labelled contour lines when ``contour``).

    Args:
      result: an :class:`~jaxshap.ALE`.
      ax: matplotlib axes to draw in (default: a new figure's).
      output: which output of a multi-output model to draw (required when there are several).
      band: the half-width of the band in standard errors (1.96: a pointwise 95% normal band).
      contour: draw contour lines over a pair's heatmap.
      show: call ``matplotlib.pyplot.show()`` at the end.

    Returns:
      The matplotlib axes.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("jaxshap.plots.ale draws with matplotlib: install it with `pip install 'jaxshap[plots]'`.") from err
    if ax is None:
        _, ax = plt.subplots()
    names = result.feature_names
    if len(result.features) == 2:
        x, y = (np.asarray(g, np.float64) for g in result.grid)
        v = _pick_output(result.values, 2, output)
        mesh = ax.pcolormesh(y, x, v, shading="gouraud", cmap="RdBu_r")
        if contour:
            ax.clabel(ax.contour(y, x, v, colors="black", linewidths=0.6), fontsize=7)
        ax.figure.colorbar(mesh, ax=ax, label="ALE (second order)")
        ax.set_xlabel(names[1])
        ax.set_ylabel(names[0])
    else:
        v = _pick_output(result.values, 1, output)
        s = _pick_output(result.stderr, 1, output)
        grid = np.asarray(result.grid, np.float64)
        x = np.arange(grid.size) if result.categorical else grid
        if result.categorical:
            ax.errorbar(x, v, yerr=None if s is None else band * s, fmt="o", capsize=3)
            ax.set_xticks(x, [f"{c:g}" for c in grid] if result.labels is None else [str(c) for c in result.labels])
        else:
            ax.plot(x, v, marker=".")
            if s is not None:
                ax.fill_between(x, v - band * s, v + band * s, alpha=0.25, linewidth=0)
            ax.plot(x, np.full_like(x, np.min(v if s is None else v - band * s)), "|", color="k", alpha=0.5)
        ax.axhline(0.0, color="grey", linewidth=0.5)
        ax.set_xlabel(names[0])
        ax.set_ylabel("ALE")
    if show:
        plt.show()
    return ax


def component(result: Any, features: Any, ax: Any = None, *, output: int | None = None, show: bool = False) -> Any:
    """Draw one component ``m_S`` of a :class:`~jaxshap.Decomposition` at the decomposed rows
    (glex's ``plot_main_effect`` and ``plot_twoway_effects``).

    A main effect (one feature ``j``) is the line through the points ``(x_j, m_j(x))`` in the
    order of ``x_j``; a pair ``(j, k)`` is the rows at ``(x_j, x_k)`` coloured by ``m_jk(x)``
    (a diverging scale centred on 0). A set that no tree path uses jointly has no component: it
    is drawn as zeros.

    Args:
      result: a :class:`~jaxshap.Decomposition` with its rows (``data``; a grouped one has none).
      features: one feature or a pair (positions or names).
      ax: matplotlib axes to draw in (default: a new figure's).
      output: which output of a multi-output model to draw (required when there are several).
      show: call ``matplotlib.pyplot.show()`` at the end.

    Returns:
      The matplotlib axes.

    Raises:
      ValueError: for more than two features, unknown ones, or a result without rows.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("jaxshap.plots.component draws with matplotlib: install it with `pip install 'jaxshap[plots]'`.") from err
    items = [features] if isinstance(features, (str, int, np.integer)) else list(features)
    if not 1 <= len(items) <= 2:
        raise ValueError(f"`features` names one feature (a main effect) or two (a pair); got {len(items)}.")
    if result.data is None:
        raise ValueError("this decomposition has no rows to draw against (a grouped one has none): "
                         "draw the components of the decomposition before grouping.")
    positions = [sorted(result._positions(f))[0] for f in items]
    S = tuple(sorted(positions))
    values = result.components.get(S)
    m = np.zeros(result.n_rows) if values is None else _pick_output(values, 1, output)
    x = np.asarray(result.data, np.float64)
    names = [result.feature_names[j] for j in positions]
    if ax is None:
        _, ax = plt.subplots()
    if len(positions) == 1:
        order = np.argsort(x[:, positions[0]], kind="stable")
        ax.plot(x[order, positions[0]], m[order], marker=".", linewidth=1)
        ax.axhline(0.0, color="grey", linewidth=0.5)
        ax.set_xlabel(names[0])
        ax.set_ylabel(f"m({names[0]})")
    else:
        bound = float(np.max(np.abs(m))) or 1.0
        points = ax.scatter(x[:, positions[0]], x[:, positions[1]], c=m, cmap="RdBu_r", vmin=-bound, vmax=bound, s=12)
        ax.figure.colorbar(points, ax=ax, label=f"m({names[0]}, {names[1]})")
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
    if show:
        plt.show()
    return ax
