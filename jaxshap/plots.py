"""shap's plots, called on jaxshap results: each converts its arguments with ``to_shap()`` first.

``jaxshap.plots.beeswarm(expl)`` is ``shap.plots.beeswarm(expl.to_shap())``: every
:class:`~jaxshap.Explanation` or cohorts object among the arguments (also as the values of a dict,
as ``shap.plots.bar`` takes them) is converted, everything else is passed through unchanged, so
``jaxshap.plots.heatmap(expl, instance_order=expl.sum(1))`` and
``jaxshap.plots.bar(expl.cohorts(2).abs.mean(0))`` draw what shap draws. shap (the ``plots``
extra) must be installed.
"""

from __future__ import annotations

from typing import Any, Callable

PLOTS = ("bar", "beeswarm", "decision", "force", "heatmap", "scatter", "violin", "waterfall")

__all__ = list(PLOTS)


def _convert(arg: Any) -> Any:
    if isinstance(arg, dict):
        return {k: _convert(v) for k, v in arg.items()}
    return arg.to_shap() if hasattr(arg, "to_shap") else arg


def _forward(name: str) -> Callable[..., Any]:
    def plot(*args: Any, **kwargs: Any) -> Any:
        try:
            import shap
        except ImportError as err:
            raise ImportError(f"jaxshap.plots.{name} draws with shap: install it with `pip install 'jaxshap[plots]'`.") from err
        args = tuple(_convert(a) for a in args)
        kwargs = {k: _convert(v) for k, v in kwargs.items()}
        return getattr(shap.plots, name)(*args, **kwargs)

    plot.__name__ = name
    plot.__doc__ = f"``shap.plots.{name}`` on jaxshap results (converted with ``to_shap()``); same arguments."
    return plot


bar = _forward("bar")
beeswarm = _forward("beeswarm")
decision = _forward("decision")
force = _forward("force")
heatmap = _forward("heatmap")
scatter = _forward("scatter")
violin = _forward("violin")
waterfall = _forward("waterfall")
