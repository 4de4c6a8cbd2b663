"""DataFrames for the global effects: the rows as numbers, and the model called as it was fitted.

A model fitted on a pandas DataFrame (a scikit-learn pipeline that picks its columns by name, or
one-hot encodes a ``category`` column) cannot take a matrix of numbers. The explainers call such
a model with the frame rebuilt from each block of rows (:mod:`jaxshap._core._categorical`); the
global effects (partial dependence, accumulated local effects, functional ANOVA, H statistics)
do the same through :func:`frame_inputs`: the frame's ``category`` columns become their integer
codes, and the model sees labels again.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from .._core._categorical import category_codes, frame_categories
from .._core._categorical import as_frame_model
from .._core._inputs import as_matrix, check_finite, column_names, host_matrix, resolve_feature_names
from .._core._model import is_host_model, local_x64
from .._engine._shap_api import host64_arrays, host_model_float64


def prepare_data(
    X: Any, feature_names: Sequence[str] | None, *, on_host: bool = False
) -> tuple[Any, tuple[str, ...]]:
    """Validate ``X`` (``[n, M]``, finite, at least one row) and settle the feature names.

    With ``on_host``, the rows stay where they are (NumPy, not copied when already floating; a
    JAX array as it is) and the NaN/inf check is the caller's, so that it can fold the check
    into a pass it makes over the rows anyway.
    """
    columns = column_names(X)
    if X is None:
        raise ValueError("`X` is required: pass the data rows [n, M] to average the model over.")
    X = host_matrix(X, "X") if on_host else as_matrix(X, "X")
    if X.shape[0] == 0:
        raise ValueError("`X` has no rows; pass at least one data row (a few hundred is usual).")
    if not on_host:
        check_finite(X, "X")
    names = resolve_feature_names(feature_names, X.shape[1], columns)
    return X, names


class FrameInputs(NamedTuple):
    """What :func:`frame_inputs` makes of a model and its rows.

    Attributes:
      model: the model to evaluate on rows of numbers: the user's, or a
        :class:`~jaxshap._core._categorical.FrameModel` around it.
      X: the rows ``[n, M]``, a ``category`` column as its codes.
      names: the ``M`` feature names.
      found: the positions of the frame's ``category`` columns.
      categories: ``{position: labels}`` of those columns (code ``k`` is ``labels[k]``).
    """

    model: Callable
    X: Any
    names: tuple[str, ...]
    found: tuple[int, ...]
    categories: dict[int, tuple]


def frame_inputs(model: Callable, X: Any, feature_names: Sequence[str] | None, *, on_host: bool = False) -> FrameInputs:
    """The rows of ``X`` as numbers and a model that takes them.

    The model is wrapped to be called with a DataFrame when its owner was fitted on one with these
    columns (scikit-learn's ``feature_names_in_``), or when it fails on numbers but runs on a frame
    with the ``category`` columns' labels (:func:`~jaxshap._core._categorical.as_frame_model`);
    otherwise it is called with the numbers, as given. Without column names (a NumPy ``X`` and no
    ``feature_names``) nothing is wrapped.

    Args:
      model: the user's model.
      X: the data rows ``[n, M]``: an array or a DataFrame.
      feature_names: the user's names for the features, or ``None`` (a DataFrame's columns, else
        ``Feature j``).
      on_host: keep the rows where they are and leave the NaN/inf check to the caller
        (:func:`prepare_data`).
    """
    categories = frame_categories(X)
    named = column_names(X) is not None or feature_names is not None
    X, found = category_codes(X)
    X, names = prepare_data(X, feature_names, on_host=on_host)
    called = model
    if named:
        m = X.shape[1]
        called = as_frame_model(model, names, categories, np.asarray(X[:2]), lambda: is_host_model(model, m))
    return FrameInputs(called, X, tuple(names), found, categories)


def host_precision(fn: Callable) -> Callable:
    """``fn(model, X, ...)`` in float64 for a host model given float64 rows, as the explainers
    compute (:func:`jaxshap._engine._shap_api.host_float64`): outside JAX's x64 mode the rows
    would reach a NumPy model rounded to float32, and a tree's split between two data values
    can fall between a value and its rounding (an ALE moves rows to data values). The result's
    arrays come back as NumPy arrays (:func:`jaxshap._engine._shap_api.host64_arrays`)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs).arguments
        if not host_model_float64(bound.get("model"), bound.get("X")):
            return fn(*args, **kwargs)
        with local_x64():
            return host64_arrays(fn(*args, **kwargs))

    return run
