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
