"""The saved form of a trained ``AmortizedExplainer``: one NumPy ``.npz`` file.

The file (:mod:`jaxshap._core._pytree`) holds a JSON ``config`` entry (sizes, dtype, names, the
training record, ``kind`` and :data:`FORMAT_VERSION`) and the arrays explaining needs: the base
value ``base``, the input and output scales ``x_mean``, ``x_scale``, ``y_scale`` and, per layer
``i`` of the network, ``layer{i}_w`` and ``layer{i}_b``. Neither the model nor the background is saved.
"""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp

from .._core._model import wrap_model
from .._core._pytree import network_arrays, network_from_arrays, read_saved, write_saved
from .._core._validate import DEFAULT_MEMORY_BUDGET

FORMAT_VERSION = 1
"""Version of the saved file layout (``.npz`` arrays plus a JSON ``config``)."""

STATISTICS = ("base", "x_mean", "x_scale", "y_scale")
"""The explainer's scales saved beside the network."""


def save_explainer(explainer: Any, path: str) -> None:
    """Write a trained explainer to ``path`` (see the module docstring for the layout)."""
    ex = explainer
    names = ex._resolved_names()
    config = {
        "kind": "AmortizedExplainer",
        "format_version": FORMAT_VERSION,
        "n_features": ex.n_features,
        "n_outputs": ex.model.n_outputs,
        "single_output": ex.model.single_output,
        "hidden": list(ex.hidden),
        "n_coalitions": ex.n_coalitions,
        "background_samples": ex.background_samples,
        "dtype": str(jnp.dtype(ex._dtype)),
        "feature_names": None if names is None else list(names),
        "validation_error": ex.validation_error_,
        "fit_seconds": ex.fit_seconds_,
        "history": ex.history_,
    }
    arrays = {name: getattr(ex, name) for name in STATISTICS}
    write_saved(path, config, {**arrays, **network_arrays(ex.params)})


def load_explainer(cls: type, path: str, model: Callable) -> Any:
    """An explainer of class ``cls`` read from ``path``, explaining ``model`` (no background).

    Raises:
      ValueError: when the file is not a saved explainer, or ``model``'s output count differs.
    """
    config, arrays = read_saved(path, "AmortizedExplainer", FORMAT_VERSION)
    obj = object.__new__(cls)
    m = obj.n_features = int(config["n_features"])
    obj.hidden = tuple(config["hidden"])
    obj.n_coalitions = int(config["n_coalitions"])
    obj.background_samples = int(config["background_samples"])
    obj.memory_budget = DEFAULT_MEMORY_BUDGET
    obj.masker = None
    obj._names = config["feature_names"]
    obj._bg_names = None
    obj._dtype = jnp.dtype(config["dtype"])
    obj.model = wrap_model(model, m, obj._dtype, arrays["x_mean"][None, :])
    if obj.model.n_outputs != config["n_outputs"] or obj.model.single_output != config["single_output"]:
        raise ValueError(
            f"`model` returns {obj.model.n_outputs} output(s) but the saved explainer was trained for "
            f"{config['n_outputs']}; pass the model it was trained on."
        )
    obj._set_statistics(*(arrays[name] for name in STATISTICS))
    obj.params = network_from_arrays(arrays, len(obj.hidden) + 1)
    obj.history_ = config["history"]
    obj.validation_error_ = config["validation_error"]
    obj.fit_seconds_ = config["fit_seconds"]
    return obj
