"""Categorical columns: which columns hold category codes, and DataFrames read as those codes.

A categorical feature is a column of integer codes. A function that supports them takes
``categorical=``: column indices, or names of a DataFrame's columns (or of ``feature_names``).
pandas ``category`` columns are found by themselves and replaced by their codes.
"""

from __future__ import annotations

from typing import Any, Sequence

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
