"""Categorical columns and DataFrames: which columns hold category codes, frames read as those
codes, and frames rebuilt from them for models fitted on DataFrames.

A categorical feature is a column of integer codes. A function that supports them takes
``categorical=``: column indices, or names of a DataFrame's columns (or of ``feature_names``).
pandas ``category`` columns are found by themselves and replaced by their codes.

A scikit-learn pipeline, or any host model fitted on a DataFrame, expects the frame itself: its
columns by name and in its order, its categorical columns as labels. Handed a NumPy matrix such a
model warns, fails, or (a model fitted on another column order) silently reads one column as
another. :class:`FrameModel` rebuilds the frame from each block of rows, so the model sees what
it was fitted on, and the explanation keeps the background's columns.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ._inputs import column_names
from ._validate import is_integer


def _is_category(dtype: Any) -> bool:
    return str(dtype) == "category"


def category_codes(data: Any) -> tuple[Any, tuple[int, ...]]:
    """``(data, found)``: a DataFrame with its ``category`` columns replaced by their codes
    (float, a missing value as NaN), and the indices of those columns; anything else as given."""
    dtypes = getattr(data, "dtypes", None)
    if dtypes is None or column_names(data) is None:
        return data, ()
    found = tuple(j for j, d in enumerate(list(dtypes)) if _is_category(d))
    if not found:
        return data, ()
    data = data.copy()
    for j in found:
        codes = np.asarray(data.iloc[:, j].cat.codes, np.float64)
        data.isetitem(j, np.where(codes < 0, np.nan, codes))
    return data, found


def categorical_columns(
    categorical: Any, n_features: int, names: Sequence[str] | None, found: Sequence[int] = ()
) -> tuple[int, ...]:
    """The sorted indices of the categorical columns: ``categorical`` (indices or names, one or
    several) together with ``found`` (the DataFrame's ``category`` columns).

    Raises:
      ValueError: naming ``categorical``, for an index out of range or a name not among ``names``.
    """
    chosen = set(int(j) for j in found)
    if categorical is None:
        return tuple(sorted(chosen))
    if isinstance(categorical, (str, int, np.integer)):
        categorical = [categorical]
    for item in categorical:
        if is_integer(item):
            if not -n_features <= int(item) < n_features:
                raise ValueError(
                    f"`categorical` holds column {item}, but the data has {n_features} columns (0 to {n_features - 1})."
                )
            chosen.add(int(item) % n_features)
        elif isinstance(item, str) and names is not None and item in names:
            chosen.add(list(names).index(item))
        else:
            known = "" if names is None else f" (columns: {', '.join(map(repr, names))})"
            raise ValueError(
                f"`categorical` must list column indices or column names; {item!r} is neither{known}."
            )
    return tuple(sorted(chosen))


def check_codes(values: np.ndarray, columns: Sequence[int], names: Sequence[str] | None, name: str = "data") -> None:
    """Raise unless the ``columns`` of ``values`` hold integer codes.

    Raises:
      ValueError: naming the argument and the first column that holds other numbers.
    """
    for j in columns:
        col = values[:, j]
        if not np.array_equal(col, np.round(col)):
            label = repr(names[j]) if names is not None else str(j)
            raise ValueError(
                f"`{name}` column {label} is listed in `categorical` but holds values that are not integer "
                "codes; encode its categories as integers (pandas: .cat.codes)."
            )


# --- rows to explain: labels to the codes a masker was built with ------------------------------------


def frame_categories(data: Any) -> dict[int, tuple]:
    """``{column index: categories}`` for a DataFrame's pandas ``category`` columns, each in the
    order that fixes its codes (``.cat.categories``: code ``k`` is label ``categories[k]``);
    ``{}`` for anything else."""
    dtypes = getattr(data, "dtypes", None)
    if dtypes is None or column_names(data) is None:
        return {}
    return {
        j: tuple(_plain(v) for v in data.iloc[:, j].cat.categories)
        for j, d in enumerate(list(dtypes))
        if _is_category(d)
    }


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python scalar it holds (labels compare and print alike)."""
    return value.item() if isinstance(value, np.generic) else value


def _is_missing(value: Any) -> bool:
    """``None``, NaN and pandas' ``NA``/``NaT`` (anything unequal to itself, or that cannot say)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pd.NA: its comparisons are ambiguous
        return True


def _holds_labels(dtype: Any) -> bool:
    """A pandas ``category`` column, or one of text or Python objects (labels, not numbers)."""
    return _is_category(dtype) or getattr(dtype, "kind", "O") in ("O", "U", "S", "T")


def _label_codes(column: Any, categories: tuple, label: str, name: str) -> np.ndarray:
    """Codes (float; missing values NaN) of a column of labels, from ``categories``.

    Raises:
      ValueError: naming the column and the labels that are not among ``categories``.
    """
    values = np.asarray(column.astype(object), dtype=object)
    lookup = {c: float(k) for k, c in enumerate(categories)}
    codes = np.empty(len(values))
    unseen = []
    for i, v in enumerate(values):
        code = lookup.get(_plain(v))
        if code is None:
            if not _is_missing(v):
                unseen.append(v)
            code = np.nan
        codes[i] = code
    if unseen:
        shown = ", ".join(repr(_plain(v)) for v in list(dict.fromkeys(unseen))[:5])
        raise ValueError(
            f"`{name}` column {label} holds categories the masker never saw: {shown}. Its codes are fixed by the "
            f"data the masker was built on, whose categories are {list(categories)}; build the masker from data "
            "that holds every category (pandas: .cat.set_categories on the training frame), or drop these rows."
        )
    return codes


def _ambiguous_numbers(categories: tuple) -> bool:
    """Whether numeric values could be read both as codes and as labels: the labels are numbers
    other than the codes ``0, 1, ...``."""
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in categories)
    return numeric and list(categories) != list(range(len(categories)))


def encode_categories(x: Any, categories: dict[int, tuple], names: Sequence[str] | None = None, name: str = "X") -> Any:
    """A DataFrame's label columns as the codes of ``categories`` (a masker's), other input as given.

    Column ``j`` of ``x`` in ``categories`` (columns already in the masker's order) that holds
    labels (a pandas ``category`` column, or text) becomes the float codes ``k`` with
    ``categories[j][k]`` its label, missing values NaN. The codes come from ``categories``, never
    from ``x``'s own categories: a frame holding fewer categories, or the same ones in another
    order, has other pandas codes. Numeric columns are taken to hold codes already.

    Raises:
      ValueError: naming the column, for a label not in ``categories``, or for numbers in a
        column whose labels are numbers other than their codes (labels or codes? pass the
        column as ``category``).
      TypeError: naming the column, for a ``category`` column the masker knows no categories of.
    """
    dtypes = getattr(x, "dtypes", None)
    if dtypes is None or column_names(x) is None:
        return x
    names = list(column_names(x)) if names is None else list(names)
    out = None
    for j, dtype in enumerate(list(dtypes)):
        label = repr(str(names[j])) if j < len(names) else str(j)
        known = categories.get(j)
        if known is None:
            if _is_category(dtype):
                raise TypeError(
                    f"`{name}` column {label} is a pandas category column, but the masker knows no categories for "
                    "it, so its labels have no codes: build the masker (maskers.Independent, Empirical or Generative) "
                    "from a DataFrame whose column has dtype category, or pass the column as the masker's codes."
                )
            continue
        if not _holds_labels(dtype):
            if _ambiguous_numbers(known):
                raise ValueError(
                    f"`{name}` column {label} holds numbers, but the masker read it as a category column whose "
                    f"labels {list(known)} are numbers other than their codes 0..{len(known) - 1}; pass the column "
                    "with dtype category (its labels are mapped to the masker's codes), or X as an array of codes."
                )
            continue
        out = x.copy() if out is None else out
        out.isetitem(j, _label_codes(x.iloc[:, j], known, label, name))
    return x if out is None else out


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
