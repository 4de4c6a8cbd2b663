r"""The rows a tree model is explained on: read as the model's library reads them, and routed
exactly, in any precision, as ranks among the thresholds.

Reading (:func:`host_rows`). Every input becomes a float64 NumPy matrix with NaN for missing
values, read the way the model's library reads it:

* pandas DataFrames column by column: float, int and bool columns as numbers (``True`` is 1),
  the nullable dtypes (``Float64``, ``Int64``, ``boolean``, ...) with ``pd.NA`` as missing,
  categorical columns as their category codes (missing as NaN), or, for a feature whose model
  names its categories (the ensemble's ``categories``), by their labels, or by their values for a
  model trained on the values (``category_values``: CatBoost), which must then be numbers;
* a model library's own containers (``xgboost.DMatrix``: its stored entries, absent entries
  missing) by the registered tree readers of the container's module
  (:meth:`._reader.TreeReader.input_rows`);
* ``scipy.sparse`` matrices: absent entries are missing when the ensemble says so
  (``sparse_missing``: XGBoost), zeros otherwise.

Routing (:class:`Router`). A path's test on feature ``j`` is ``lower < x_j <= upper`` with
``lower``, ``upper`` split thresholds of that feature (or infinities), plus a zero test
``|x_j| <= 1e-35`` for LightGBM's ``Zero`` missing type. Such tests only depend on where ``x_j``
falls among the sorted distinct thresholds ``t_0 < t_1 < ... < t_{k-1}`` of feature ``j``: with
the rank ``r(x) = #{i : t_i < x}``,

.. math::

    x \le t_i \iff r(x) \le i, \qquad x > t_i \iff r(x) > i .

So the host computes ``r`` once per input value in float64 (after rounding the input to the
library's own precision), and the kernels compare small integers, which float32 holds exactly:
routing is exactly the library's, whatever precision the attributions are computed in. The
two bounds of the zero band (``-1e-35``, exclusive, and ``1e-35``) are added to every feature's
thresholds and ranks are shifted so that the band is rank ``0`` exactly; any other value has
rank ``|r| >= 1``, so the kernels' zero test ``|r| <= 1e-35`` keeps its meaning. NaN stays NaN.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._core._inputs import as_rows, object_numbers
from ._ensemble import ZERO_THRESHOLD
from ._reader import readers_of


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
    for reader in readers_of(x)[0]:
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


_ZERO_LOW = np.nextafter(-ZERO_THRESHOLD, -np.inf)  # x > _ZERO_LOW  <=>  x >= -1e-35
MAX_RANKS = 1 << 24  # float32 holds every integer up to 2**24 exactly


@dataclasses.dataclass(frozen=True)
class Router:
    """Per-feature sorted thresholds (float64) and the rank shift that puts zero at rank 0.

    Attributes:
      thresholds: one sorted array of distinct thresholds per feature.
      zero_rank: ``[M]`` the rank of ``0.0`` in each feature's thresholds.
    """

    thresholds: tuple
    zero_rank: np.ndarray
    categorical: np.ndarray | None = None  # [M] features passed through as category codes

    @classmethod
    def from_bounds(cls, feature: np.ndarray, lower: np.ndarray, upper: np.ndarray, n_features: int,
                    categorical: np.ndarray | None = None) -> "Router":
        """Collect every finite bound of the paths' slots, per feature."""
        f = np.concatenate([feature.reshape(-1), feature.reshape(-1)])
        v = np.concatenate([lower.reshape(-1), upper.reshape(-1)])
        ok = np.isfinite(v)
        f, v = f[ok], v[ok]
        order = np.lexsort((v, f))
        f, v = f[order], v[order]
        starts = np.searchsorted(f, np.arange(n_features + 1))
        out, zero = [], np.zeros(n_features, np.int64)
        band = np.asarray([_ZERO_LOW, ZERO_THRESHOLD])
        for j in range(n_features):
            t = np.unique(np.concatenate([v[starts[j] : starts[j + 1]], band]))
            if t.size >= MAX_RANKS:
                raise ValueError(
                    f"Feature {j} has {t.size} distinct split thresholds; exact routing in the kernels "
                    f"supports fewer than {MAX_RANKS}."
                )
            out.append(t)
            zero[j] = np.searchsorted(t, 0.0, side="left")
        return cls(tuple(out), zero, categorical)

    def bounds(self, feature: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Bounds (thresholds of their features, or infinities) as shifted ranks, float64."""
        out = np.array(values, dtype=np.float64, copy=True)
        finite = np.isfinite(out)
        f, v = feature[finite], out[finite]
        ranks = np.empty(v.shape, np.float64)
        for j in np.unique(f):
            sel = f == j
            t = self.thresholds[j]
            idx = np.searchsorted(t, v[sel], side="left")
            if not np.all(t[np.minimum(idx, t.size - 1)] == v[sel]):  # pragma: no cover - internal invariant
                raise AssertionError("A path bound is not among its feature's thresholds.")
            ranks[sel] = idx - self.zero_rank[j]
        out[finite] = ranks
        return out

    def encode(self, X: np.ndarray, dtype=np.float32) -> np.ndarray:
        """Rows ``[n, M]`` (float64, already rounded to the library's precision, NaN = missing)
        as shifted ranks in ``dtype``; NaN stays NaN."""
        X = np.asarray(X, dtype=np.float64)
        out = np.empty(X.shape, dtype)
        for j, t in enumerate(self.thresholds):
            col = X[:, j]
            if self.categorical is not None and self.categorical[j]:
                out[:, j] = col  # category codes, compared by set membership
                continue
            r = np.searchsorted(t, col, side="left").astype(np.float64) - self.zero_rank[j]
            out[:, j] = np.where(np.isnan(col), np.nan, r)
        return out
