r"""Exact routing in any precision: inputs and path bounds as ranks among the thresholds.

A path's test on feature ``j`` is ``lower < x_j <= upper`` with ``lower``, ``upper`` split
thresholds of that feature (or infinities), plus a zero test ``|x_j| <= 1e-35`` for LightGBM's
``Zero`` missing type. Such tests only depend on where ``x_j`` falls among the sorted distinct
thresholds ``t_0 < t_1 < ... < t_{k-1}`` of feature ``j``: with the rank
``r(x) = #{i : t_i < x}``,

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

import numpy as np

from ._ensemble import ZERO_THRESHOLD

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
