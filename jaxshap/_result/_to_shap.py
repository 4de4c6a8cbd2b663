"""``Explanation.to_shap()``: the same explanation as a ``shap.Explanation`` of NumPy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._indexing import FEATURES


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
