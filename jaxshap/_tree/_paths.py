"""Root-to-leaf paths: the form both TreeSHAP kernels work on.

Every leaf of every tree becomes one path (as in GPUTreeShap, Mitchell et al. 2022). A path
reaches its leaf when each split on it goes the path's way. Splits on the same feature are
merged into one *slot* per distinct feature, so a path is a short list of ``U`` slots, padded
to a common ``U`` (the largest number of distinct features on a path) with dummy slots. Per slot:

* ``feature``: the feature tested;
* ``(lower, upper]``: the interval of values that follow the path through all its splits on
  that feature (``x <= t`` goes left, so a left turn lowers ``upper`` to ``t``, a right turn
  raises ``lower`` to ``t``);
* ``nan_ok`` / ``zero_ok``: whether a NaN (or, under LightGBM's ``Zero`` missing type, a zero)
  follows the path, given each split's default direction;
* ``zero_fraction``: the product over the slot's splits of ``cover(child) / cover(node)``,
  the share of training data that follows the path (Lundberg et al. 2020, Alg. 2).

A dummy slot is always satisfied and has ``zero_fraction = 1``: in both games below it is a
null player, so it changes no one's Shapley value and gets none itself. Multi-output trees
give one path per (leaf, output) that the tree writes to.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ._ensemble import MISSING_AS_ZERO, MISSING_ZERO, ZERO_THRESHOLD, TreeEnsemble


@dataclasses.dataclass(frozen=True)
class Paths:
    """The ensemble's paths as NumPy arrays ``[P, U]`` (slots) and ``[P]`` (per path).

    Attributes:
      feature, lower, upper, nan_ok, zero_missing, zero_ok, zero_fraction: ``[P, U]`` slots.
      value: ``[P]`` the leaf's value for output ``output``.
      output: ``[P]`` int32 output column the path adds to.
      base: ``[K]`` the ensemble's constant.
      n_features, n_outputs: ``M`` and ``K``.
      length: ``[P]`` number of real (non-dummy) slots of each path; they come first.
    """

    feature: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    nan_ok: np.ndarray
    zero_missing: np.ndarray
    zero_ok: np.ndarray
    zero_fraction: np.ndarray
    value: np.ndarray
    output: np.ndarray
    base: np.ndarray
    n_features: int
    n_outputs: int
    length: np.ndarray

    def subset(self, keep: np.ndarray, width: int) -> "Paths":
        """The paths ``keep`` (boolean ``[P]``), with slots cut to the first ``width`` columns
        (valid when those paths have at most ``width`` real slots)."""
        cut = lambda a: a[keep][:, :width]
        return dataclasses.replace(
            self,
            feature=cut(self.feature), lower=cut(self.lower), upper=cut(self.upper), nan_ok=cut(self.nan_ok),
            zero_missing=cut(self.zero_missing), zero_ok=cut(self.zero_ok), zero_fraction=cut(self.zero_fraction),
            value=self.value[keep], output=self.output[keep], length=self.length[keep],
        )

    @property
    def n_paths(self) -> int:
        return self.feature.shape[0]

    @property
    def n_slots(self) -> int:
        return self.feature.shape[1]


def _leaf_paths(e: TreeEnsemble, t: int):
    """Yield ``(leaf, [(node, went_left), ...])`` for every leaf of tree ``t`` (depth first)."""
    stack = [(0, [])]
    while stack:
        node, path = stack.pop()
        if e.feature[t, node] < 0:
            yield node, path
            continue
        stack.append((int(e.right[t, node]), path + [(node, False)]))
        stack.append((int(e.left[t, node]), path + [(node, True)]))


def _ratio(child: float, parent: float) -> float:
    return child / parent if parent > 0 else 0.0


def decompose(e: TreeEnsemble) -> Paths:
    """Split an ensemble into padded root-to-leaf paths with merged per-feature slots."""
    k_out = e.n_outputs
    rows = []  # (slots, value, output)
    for t in range(e.n_trees):
        outputs = [k for k in range(k_out) if np.any(e.value[t, :, k] != 0)] or [0]
        for leaf, path in _leaf_paths(e, t):
            slots: dict[int, list] = {}
            for node, went_left in path:
                f = int(e.feature[t, node])
                thr = float(e.threshold[t, node])
                child = e.left[t, node] if went_left else e.right[t, node]
                code = int(e.missing[t, node])
                s = slots.setdefault(f, [-np.inf, np.inf, True, code == MISSING_ZERO, True, 1.0, code])
                if (code == MISSING_ZERO) != s[3]:
                    raise ValueError("Mixed LightGBM missing-value types on one feature are not supported.")
                if went_left:
                    s[1] = min(s[1], thr)
                else:
                    s[0] = max(s[0], thr)
                default_way = bool(e.default_left[t, node]) == went_left
                zero_way = (0.0 <= thr) == went_left
                s[2] &= zero_way if code == MISSING_AS_ZERO else default_way  # where a NaN goes
                s[4] &= default_way if code == MISSING_ZERO else zero_way  # where a zero goes
                s[5] *= _ratio(float(e.cover[t, child]), float(e.cover[t, node]))
            for k in outputs:
                rows.append((list(slots.items()), float(e.value[t, leaf, k]), k))
    n_slots = max(1, max(len(r[0]) for r in rows))
    p = len(rows)
    feature = np.zeros((p, n_slots), np.int32)
    lower = np.full((p, n_slots), -np.inf)
    upper = np.full((p, n_slots), np.inf)
    nan_ok = np.ones((p, n_slots), bool)
    zero_missing = np.zeros((p, n_slots), bool)
    zero_ok = np.ones((p, n_slots), bool)
    zero_fraction = np.ones((p, n_slots))
    for i, (slots, _, _) in enumerate(rows):
        for u, (f, (lo, hi, nan, zmiss, zok, z, _)) in enumerate(slots):
            feature[i, u], lower[i, u], upper[i, u] = f, lo, hi
            nan_ok[i, u], zero_missing[i, u], zero_ok[i, u], zero_fraction[i, u] = nan, zmiss, zok, z
    return Paths(
        feature, lower, upper, nan_ok, zero_missing, zero_ok, zero_fraction,
        np.asarray([r[1] for r in rows]), np.asarray([r[2] for r in rows], np.int32),
        e.base.copy(), e.n_features, k_out, np.asarray([len(r[0]) for r in rows], np.int32),
    )


def round_down(a: np.ndarray, dtype) -> np.ndarray:
    """Largest values of ``dtype`` not above ``a``: ``x <= a`` and ``x <= round_down(a)`` agree
    (and so do ``x > a`` and ``x > round_down(a)``) for every ``x`` of that dtype."""
    d = np.asarray(a, dtype=np.float64)
    r = d.astype(dtype)
    with np.errstate(invalid="ignore"):
        too_big = r.astype(np.float64) > d
    return np.where(too_big, np.nextafter(r, dtype(-np.inf)), r).astype(dtype)


def slot_arrays(paths: Paths, dtype) -> dict:
    """The slot tests as JAX arrays in the compute dtype (bounds rounded down to it)."""
    dtype = np.dtype(dtype)
    host = {
        "feature": paths.feature.astype(np.int32),
        "lower": round_down(paths.lower, dtype.type),
        "upper": round_down(paths.upper, dtype.type),
        "nan_ok": paths.nan_ok,
        "zero_missing": paths.zero_missing,
        "zero_ok": paths.zero_ok,
    }
    return {name: jax.device_put(a) for name, a in host.items()}


def follows(slots: dict, x: jax.Array) -> jax.Array:
    """``[P, U]`` booleans: whether row ``x`` ``[M]`` follows each path through each slot."""
    v = x[slots["feature"]]
    nan = jnp.isnan(v)
    zero = slots["zero_missing"] & (jnp.abs(v) <= ZERO_THRESHOLD)
    inside = (v > slots["lower"]) & (v <= slots["upper"])
    return jnp.where(nan, slots["nan_ok"], jnp.where(zero, slots["zero_ok"], inside))


def follows_host(paths: Paths, X: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`follows` for many rows: ``[n, P, U]`` with bounds rounded to ``X``'s dtype."""
    dtype = X.dtype.type
    lower, upper = round_down(paths.lower, dtype), round_down(paths.upper, dtype)
    v = X[:, paths.feature]  # [n, P, U]
    nan = np.isnan(v)
    zero = paths.zero_missing & (np.abs(np.where(nan, 0, v)) <= ZERO_THRESHOLD)
    with np.errstate(invalid="ignore"):
        inside = (v > lower) & (v <= upper)
    return np.where(nan, paths.nan_ok, np.where(zero, paths.zero_ok, inside))


def pattern(bits: jax.Array) -> jax.Array:
    """Pack booleans ``[..., U]`` into integers ``[...]`` (slot ``u`` is bit ``u``)."""
    weights = jnp.left_shift(jnp.int32(1), jnp.arange(bits.shape[-1], dtype=jnp.int32))
    return jnp.sum(jnp.where(bits, weights, 0), axis=-1, dtype=jnp.int32)
