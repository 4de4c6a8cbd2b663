"""Host models fitted on DataFrames: called with the frame they were fitted on, not with codes.

The explainers work on a matrix of numbers: a DataFrame's pandas ``category`` columns become
integer codes (:mod:`._categorical`). A scikit-learn pipeline, or any model fitted on a
DataFrame, expects the frame itself: its columns by name and in its order, its categorical
columns as labels. Handed a NumPy matrix such a model warns, fails, or (a model fitted on
another column order) silently reads one column as another. :class:`FrameModel` rebuilds the
frame from each block of rows, so the model sees what it was fitted on, and the explanation keeps
the background's columns.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


class FrameModel:
    """``model`` called on a pandas DataFrame rebuilt from rows ``[n, M]`` of numbers.

    Column ``j`` of the rows is named ``names[j]``; a column listed in ``categories`` holds codes
    (``k`` stands for ``categories[j][k]``, NaN for a missing value) and becomes a pandas
    ``category`` column with those categories. The frame's columns are put in ``order`` (the
    names the model was fitted on, in its order) before the model is called.

    Equal (and hashed) by the model, the names, the categories and the order, so explainers of
    one model share their compiled programs.
    """

    def __init__(self, model: Callable, names: Sequence[str], categories: dict[int, tuple], order: Sequence[str]):
        self.model = model
        self.names = tuple(str(n) for n in names)
        self.categories = tuple(sorted((int(j), tuple(c)) for j, c in categories.items()))
        self.order = tuple(str(n) for n in order)

    def _key(self) -> tuple:
        return (self.model, self.names, self.categories, self.order)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FrameModel) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def frame(self, rows: np.ndarray) -> Any:
        """The DataFrame the model is called with."""
        import pandas as pd

        rows = np.asarray(rows)
        columns: dict[str, Any] = {}
        labels = dict(self.categories)
        for j, name in enumerate(self.names):
            if j in labels:
                codes = np.where(np.isnan(rows[:, j]), -1, rows[:, j]).astype(np.int64)
                columns[name] = pd.Categorical.from_codes(codes, categories=list(labels[j]))
            else:
                columns[name] = rows[:, j]
        frame = pd.DataFrame(columns)
        return frame if self.order == self.names else frame[list(self.order)]

    def __call__(self, rows: np.ndarray) -> Any:
        return self.model(self.frame(rows))

    def __repr__(self) -> str:
        return f"FrameModel({self.model!r}, columns: {list(self.order)})"


def unwrap(model: Callable) -> Callable:
    """The user's model inside a :class:`FrameModel` (itself otherwise)."""
    return model.model if isinstance(model, FrameModel) else model


def fitted_names(model: Callable) -> tuple[str, ...] | None:
    """The column names a model's owner was fitted on (scikit-learn's ``feature_names_in_``), or ``None``."""
    owner = getattr(model, "__self__", model)
    names = getattr(owner, "feature_names_in_", None)
    if names is None:
        return None
    try:
        return tuple(str(n) for n in names)
    except TypeError:
        return None


def as_frame_model(model: Callable, names: Sequence[str] | None, categories: dict[int, tuple],
                   probe: np.ndarray, is_host: Callable[[], bool]) -> Callable:
    """``model`` as a :class:`FrameModel` when it is a host model that takes DataFrames, else itself.

    A model is called with frames when (a) its owner was fitted on a DataFrame with the
    background's column names (``feature_names_in_``, in any order: the frame follows the
    model's), or (b) it cannot take the background's rows as numbers but takes them as a frame
    with ``categories`` restored (a model of category labels). JAX models are never wrapped:
    they trace on arrays.

    Args:
      model: the user's model.
      names: the background's column names (``None``: no frame to rebuild, nothing changes).
      categories: ``{column: categories}`` of the background's category columns (codes in rows).
      probe: a few background rows, to try the model on.
      is_host: whether the model runs on the host (called only when a frame is in question).
    """
    if names is None or not callable(model) or isinstance(model, FrameModel):
        return model
    names = tuple(str(n) for n in names)
    fitted = fitted_names(model)
    if fitted is not None and (sorted(fitted) != sorted(names) or not is_host()):
        return model
    try:
        import pandas  # noqa: F401  (frames need pandas; without it the rows stay numbers)
    except ImportError:
        return model
    if fitted is not None:
        return FrameModel(model, names, categories, fitted)
    if not categories or not is_host():
        return model
    rows = np.asarray(probe[: min(len(probe), 2)])
    try:
        model(rows)
        return model  # takes the numbers: as today
    except Exception:
        pass
    wrapped = FrameModel(model, names, categories, names)
    try:
        wrapped(rows)
    except Exception:
        return model  # fails either way: wrap_model reports the call on numbers
    return wrapped
