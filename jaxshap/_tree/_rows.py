"""Reading the rows a tree model is explained on: arrays, DataFrames, DMatrix, sparse matrices.

Every input becomes a float64 NumPy matrix with NaN for missing values, read the way the model's
library reads it:

* pandas DataFrames column by column: float, int and bool columns as numbers (``True`` is 1),
  the nullable dtypes (``Float64``, ``Int64``, ``boolean``, ...) with ``pd.NA`` as missing,
  categorical columns as their category codes (missing as NaN), or, for a feature whose model
  names its categories (the ensemble's ``categories``), by their labels, or by their values for a
  model trained on the values (``category_values``: CatBoost), which must then be numbers;
* a model library's own containers (``xgboost.DMatrix``: its stored entries, absent entries
  missing) by the registered tree readers (:meth:`._reader.TreeReader.input_rows`);
* ``scipy.sparse`` matrices: absent entries are missing when the ensemble says so
  (``sparse_missing``: XGBoost), zeros otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core._inputs import as_rows, object_numbers
from ._reader import readers


def _by_label(s: Any, labels: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """A ``category`` column read as the number each label has in the model (NaN for a label
    the model does not know, and for a missing entry)."""
    number_of = dict(zip(np.asarray(labels, dtype=object).tolist(), np.asarray(numbers, np.float64).tolist()))
    per_category = np.asarray([number_of.get(c, np.nan) for c in s.cat.categories.tolist()] + [np.nan])
    return per_category[np.asarray(s.cat.codes, dtype=np.int64)]  # code -1 (missing) picks the last entry


def _frame_to_numpy(df: Any, name: str, categories: dict | None = None,
                    category_values: bool = False) -> np.ndarray:
    cols = []
    for j, col in enumerate(df.columns):
        s = df[col]
        dtype = s.dtype
        if str(dtype) == "category" and category_values:
            try:
                values = np.asarray(s.cat.categories.to_numpy(), dtype=np.float64)
            except (TypeError, ValueError) as err:
                raise TypeError(
                    f"`{name}` column {col!r} is a 'category' column with categories that are not numbers; "
                    "this model reads a category column by its values: pass the integer categories it was trained on."
                ) from err
            codes = np.asarray(s.cat.codes)
            cols.append(np.where(codes < 0, np.nan, values[np.maximum(codes, 0)] if len(values) else np.nan))
            continue
        if str(dtype) == "category":
            if categories and j in categories:
                cols.append(_by_label(s, *categories[j]))
                continue
            codes = np.asarray(s.cat.codes, dtype=np.float64)
            cols.append(np.where(codes < 0, np.nan, codes))
            continue
        try:
            cols.append(s.to_numpy(dtype=np.float64, na_value=np.nan))
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"`{name}` column {col!r} has dtype {dtype} that is not numeric; pass numbers, booleans or a "
                "pandas 'category' column (for a model trained with categorical features)."
            ) from err
    if not cols:
        raise ValueError(f"`{name}` has no feature columns; pass an array of shape [rows, features].")
    return np.stack(cols, axis=1)


def sparse_to_numpy(x: Any, fill: float) -> np.ndarray:
    """A sparse matrix as a dense float64 array, ``fill`` where no entry is stored."""
    csr = x.tocsr()
    out = np.full(csr.shape, fill, dtype=np.float64)
    rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    out[rows, csr.indices] = csr.data
    return out


def host_rows(x: Any, name: str, *, sparse_missing: bool, categories: dict | None = None,
              category_values: bool = False) -> tuple[np.ndarray, list[str] | None]:
    """``x`` as a float64 matrix ``[n, M]`` (a single row ``[M]`` is promoted) and its column
    names when it has them; ``categories`` (the ensemble's, ``{j: (labels, numbers)}``) reads a
    DataFrame's ``category`` column ``j`` by its labels, ``category_values`` every ``category``
    column by its values (see :class:`._ensemble.TreeEnsemble`).

    Raises:
      TypeError: for input that cannot be read as numbers (naming the argument and column).
      ValueError: for input that is not one- or two-dimensional.
    """
    names = None
    for reader in readers():
        read = reader.input_rows(x)
        if read is not None:
            return as_rows(np.asarray(read[0], np.float64), name), read[1]
    if hasattr(x, "tocsr") and hasattr(x, "nnz"):  # scipy.sparse matrix or array
        out = sparse_to_numpy(x, np.nan if sparse_missing else 0.0)
    elif hasattr(x, "columns") and hasattr(x, "dtypes") and hasattr(x, "to_numpy"):
        names = [str(c) for c in x.columns]
        out = _frame_to_numpy(x, name, categories, category_values)
    else:
        try:
            out = np.asarray(x)
        except Exception as err:  # pragma: no cover - depends on the object
            raise TypeError(f"`{name}` must be an array-like of numbers; got {type(x).__name__}.") from err
        out = object_numbers(out)  # None is a missing value, as in shap
        if not (np.issubdtype(out.dtype, np.number) or np.issubdtype(out.dtype, np.bool_)):
            raise TypeError(
                f"`{name}` must hold numbers; got dtype {out.dtype}. Pass a DataFrame with 'category' "
                "columns for categorical features, or encode them as numbers."
            )
        out = out.astype(np.float64)
    return as_rows(out, name), names
