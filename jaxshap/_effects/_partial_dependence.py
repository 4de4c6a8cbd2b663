r"""Partial dependence: the model averaged over the data with some features held fixed; and the
families of feature sets, up to an order, whose partial dependences the global effects take.

The one kernel here, :func:`pd_units`, evaluates many partial dependences at once: each *unit*
is a pair (point, feature set) and its value is the model averaged over the background rows
with the features of the set taken from the point. Grids, data rows and the H statistics'
one-, two- and three-way partial dependences are all lists of units, mapped in chunks under
the memory budget with ``vmap`` inside a chunk.

Feature sets up to an order (:func:`sets_up_to`, :func:`check_set_count`) are the families over
which the global effects take the Möbius transform of centred partial dependences (the transform
itself: :func:`jaxshap._coalitions._combinatorics.mobius`). The functional ANOVA component of a
feature set ``S`` is the inclusion-exclusion (Möbius transform over the subset lattice) of the
centred partial dependences of its subsets,

.. math::

    g_S = \sum_{T \subseteq S} (-1)^{|S| - |T|} \hat F_T, \qquad \hat F_\emptyset = 0,

(Hooker, 2004, "Discovering additive structure in black box functions"; Friedman & Popescu,
2008, section 8, eqs. 45-47 for two and three features), and its inverse is
:math:`\hat F_U = \sum_{S \subseteq U} g_S`. Over a family of sets closed under taking subsets
the transform runs one feature at a time (the fast subset transform), in ``max |S|`` array
operations whatever the number of features.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any, Callable, Container, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core._chunking import map_chunks, plan_chunks
from .._core._inputs import as_key, as_matrix, check_finite, check_finite_outputs
from .._core._model import Model, wrap_model
from .._core._validate import DEFAULT_MEMORY_BUDGET, integer, is_integer, memory_budget as check_budget
from ._frames import frame_inputs, host_precision


# --- the kernel ---------------------------------------------------------------------------


def pd_units(
    f: Callable[[jax.Array], jax.Array],
    background: jax.Array,
    points: jax.Array,
    masks: jax.Array,
    point_index: jax.Array,
    mask_index: jax.Array,
    chunk: int,
) -> jax.Array:
    r"""Partial dependences for a batch of (point, feature set) units.

    .. math::

        \hat F_S(z) = \frac{1}{B} \sum_{b=1}^{B} f(z_S, x^{(b)}_{\bar S}),

    the Monte-Carlo estimate of :math:`E_{X_{\bar S}}[f(z_S, X_{\bar S})]` (Friedman, 2001,
    "Greedy function approximation: a gradient boosting machine", section 8.2), for unit
    ``u`` with ``z = points[point_index[u]]`` and ``S = masks[mask_index[u]]``.

    Args:
      f: model mapping ``[..., M]`` to ``[..., K]``.
      background: rows ``x^(b)`` to average over, ``[B, M]``.
      points: ``[P, M]``; only the features inside each unit's set are read.
      masks: ``[S, M]`` boolean feature sets.
      point_index: ``[U]`` integer index into ``points``.
      mask_index: ``[U]`` integer index into ``masks``.
      chunk: units per chunk (static); one chunk evaluates the model on ``chunk * B`` rows.

    Returns:
      ``[U, K]`` partial dependence values.
    """

    def one(p, s):
        rows = jnp.where(masks[s], points[p], background)
        return jnp.mean(f(rows), axis=0)

    return map_chunks(lambda idx: jax.vmap(one)(*idx), (point_index, mask_index), chunk)


def units_per_chunk(model: Model, n_units: int, n_background: int, n_features: int, itemsize: int, budget: int) -> int:
    """How many units one chunk may hold under ``budget`` bytes (each unit costs ``B`` model rows)."""
    rows, _ = plan_chunks(max(n_units, 1), 1, n_background, model.bytes_per_row + itemsize * n_features, budget)
    return int(rows)


MIXED_ROWS_HINT = (
    "some rows of `X` combined with other rows' values of the remaining features (as partial dependence "
    "does) fall where the model is undefined; fix the model, or drop or clip those rows."
)
"""What to do when a partial dependence is NaN or inf although the predictions at the rows are finite."""


def feature_index(feature: Any, names: Sequence[str], arg: str) -> int:
    """Resolve one feature given by position or by name."""
    n = len(names)
    if isinstance(feature, (bool, np.bool_)):
        raise TypeError(f"`{arg}` must hold feature positions (int) or names (str); got a bool {feature!r}.")
    if isinstance(feature, (int, np.integer)):
        j = int(feature)
        if not -n <= j < n:
            raise ValueError(f"`{arg}`: feature {j} is out of range for data with {n} features (0 to {n - 1}).")
        return j % n
    if isinstance(feature, str):
        if feature not in names:
            raise ValueError(f"`{arg}`: unknown feature name {feature!r}; the features are {list(names)}.")
        return list(names).index(feature)
    raise TypeError(f"`{arg}` must hold feature positions (int) or names (str); got {type(feature).__name__}.")


def feature_set(features: Any, names: Sequence[str], arg: str) -> tuple[tuple[int, ...], bool]:
    """Resolve ``features`` to distinct indices; also say whether a single scalar was given."""
    if isinstance(features, str) or is_integer(features):
        return (feature_index(features, names, arg),), True
    try:
        items = list(features)
    except TypeError:
        raise TypeError(
            f"`{arg}` must be a feature position, a name, or a sequence of them; got {type(features).__name__}."
        ) from None
    if not items:
        raise ValueError(f"`{arg}` is empty; name at least one feature.")
    idx = tuple(feature_index(v, names, arg) for v in items)
    if len(set(idx)) != len(idx):
        raise ValueError(f"`{arg}` names a feature twice: {items!r}.")
    return idx, False


def subsample(X: jax.Array, n_max: int | None, key: Any, *, return_index: bool = False) -> Any:
    """At most ``n_max`` rows of ``X`` drawn without replacement with ``key`` (kept in data order).

    With ``return_index``, also the rows' positions in ``X`` (for error messages).
    """
    if n_max is None or X.shape[0] <= n_max:
        rows, index = X, np.arange(X.shape[0])
    else:
        index = jnp.sort(jax.random.choice(as_key(key), X.shape[0], (int(n_max),), replace=False))
        rows = X[index]
    return (rows, index) if return_index else rows


def check_n_max(n_max: Any, allow_none: bool) -> int | None:
    if n_max is None and allow_none:
        return None
    return integer(n_max, "n_max", least=1, rule="a positive integer number of rows")


# --- the result -----------------------------------------------------------------------------


@jax.tree_util.register_pytree_node_class
class PartialDependence:
    """Partial dependence values on a grid.

    Attributes:
      grid: the evaluation points: ``[G]`` when one feature was given as a position or name,
        ``[G, s]`` when ``s`` features were given as a sequence.
      values: ``[G]`` for a single-output model, ``[G, K]`` for ``K`` outputs.
      features: the feature positions, a tuple of ``s`` ints (static).
      feature_names: their names (static).
      centered: whether ``values`` are centred (static).
    """

    def __init__(self, grid, values, features, feature_names, centered=False):
        self.grid = grid
        self.values = values
        self.features = tuple(int(j) for j in features)
        self.feature_names = tuple(str(n) for n in feature_names)
        self.centered = bool(centered)

    def tree_flatten(self):
        return (self.grid, self.values), (self.features, self.feature_names, self.centered)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def __repr__(self) -> str:
        return (
            f"PartialDependence(features={list(self.feature_names)}, grid: {tuple(np.shape(self.grid))}, "
            f"values: {tuple(np.shape(self.values))}{', centred' if self.centered else ''})"
        )


# --- grids ----------------------------------------------------------------------------------


def default_axis(column: np.ndarray, size: int) -> np.ndarray:
    """The distinct values when there are at most ``size``, else ``size`` evenly spaced quantiles."""
    unique = np.unique(column)
    if unique.size <= size:
        return unique
    return np.unique(np.quantile(column, np.linspace(0.0, 1.0, size), method="linear").astype(column.dtype))


def make_grid(X: jax.Array, idx: tuple[int, ...], grid: Any, grid_size: int, single: bool,
              categorical: Container[int] = ()) -> jax.Array:
    """The ``[G, s]`` evaluation points: the user's grid, the data rows, or the default grid
    (every code present of a ``categorical`` column, whatever ``grid_size``)."""
    s = len(idx)
    dtype = X.dtype
    if isinstance(grid, str):
        if grid != "data":
            raise ValueError(f'`grid` must be an array, "data" or None; got the string {grid!r}.')
        return X[:, jnp.asarray(idx)]
    if grid is None:
        host = np.asarray(X)
        axes = [np.unique(host[:, j]) if j in categorical else default_axis(host[:, j], grid_size) for j in idx]
        return jnp.asarray(np.array(list(itertools.product(*axes)), dtype=dtype).reshape(-1, s))
    if not isinstance(grid, jax.Array):
        try:
            grid = np.asarray(grid)
        except Exception as err:  # ragged lists and the like
            raise TypeError(f"`grid` must be an array of numbers, \"data\" or None; got {type(grid).__name__}.") from err
        if not (np.issubdtype(grid.dtype, np.number) or np.issubdtype(grid.dtype, np.bool_)):
            raise TypeError(
                f"`grid` must hold numbers; got dtype {grid.dtype}. Encode categories as numbers, as in `X`."
            )
    g = as_matrix(grid, "grid", dtype=dtype) if np.ndim(grid) == 2 else None
    if g is None:
        if np.ndim(grid) != 1:
            raise ValueError(f"`grid` must be [G] (one feature) or [G, {s}]; got shape {np.shape(grid)}.")
        if s != 1:
            raise ValueError(
                f"`grid` is one-dimensional but {s} features were given; pass a [G, {s}] array of points."
            )
        g = jnp.asarray(np.asarray(grid), dtype=dtype)[:, None]
    if g.shape[1] != s:
        raise ValueError(f"`grid` has {g.shape[1]} columns but {s} features were given; pass a [G, {s}] array.")
    if g.shape[0] == 0:
        raise ValueError("`grid` has no points; pass at least one value.")
    check_finite(g, "grid")
    return g


def check_category_grid(points: jax.Array, idx: tuple[int, ...], names: Sequence[str], categories: dict) -> None:
    """Refuse grid values of a pandas ``category`` column that are not among its codes.

    Raises:
      ValueError: naming ``grid``, the column and its categories.
    """
    for pos, j in enumerate(idx):
        if j not in categories:
            continue
        column, labels = np.asarray(points[:, pos]), categories[j]
        if not (np.array_equal(column, np.round(column)) and column.min() >= 0 and column.max() < len(labels)):
            raise ValueError(
                f"`grid`: feature {names[j]!r} is a pandas category column, whose grid values are its codes, "
                f"the integers 0 to {len(labels) - 1} standing for {list(labels)[:10]}"
                f"{' ...' if len(labels) > 10 else ''}; got {np.unique(column)[:10].tolist()}."
            )


# --- the public function --------------------------------------------------------------------


@host_precision
def partial_dependence(
    model: Callable,
    X: Any,
    features: Any,
    grid: Any = None,
    *,
    centered: bool = False,
    grid_size: int = 50,
    n_max: int | None = None,
    key: Any = None,
    feature_names: Sequence[str] | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> PartialDependence:
    r"""Partial dependence of the model on one feature or a set of features.

    .. math::

        \hat F_S(z_S) = \frac{1}{n} \sum_{i=1}^{n} f(z_S, x^{(i)}_{\bar S}),

    the Monte-Carlo estimate over the rows of ``X`` of :math:`E_{X_{\bar S}}[f(z_S, X_{\bar S})]`
    (Friedman, 2001, "Greedy function approximation: a gradient boosting machine", 8.2); this is
    scikit-learn's ``partial_dependence(..., kind="average")`` with the brute-force method.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable or a plain NumPy callable.
      X: data rows ``[n, M]`` (array or DataFrame) to average over. A pandas ``category`` column
        is read as its codes (its default grid is every code present; a grid gives codes), and a
        host model fitted on a DataFrame is called with the frame rebuilt from the rows, and a host
        model given float64 rows computes in float64, as the explainers do.
      features: one feature (position or name) or a sequence of them.
      grid: the points to evaluate at: ``[G]`` for one feature or ``[G, s]`` for ``s``
        features; ``"data"`` for the rows of ``X`` (their values of the features); ``None``
        for the default: for each feature its distinct values when there are at most
        ``grid_size`` of them, else ``grid_size`` evenly spaced quantiles (0 to 1), and the
        Cartesian product of these axes for several features.
      centered: subtract the mean of the partial dependence over the data rows,
        :math:`\frac{1}{n}\sum_i \hat F_S(x^{(i)}_S)`, as Friedman & Popescu (2008) centre it;
        this costs ``n^2`` extra model evaluations (bound it with ``n_max``).
      grid_size: points per feature axis of the default grid.
      n_max: average over at most this many rows of ``X``, drawn with ``key``; ``None`` uses all.
      key: PRNG key (or int seed) for that subsample; ``None`` means ``jax.random.key(0)``.
      feature_names: names of the ``M`` features (default: DataFrame columns, else ``Feature j``).
      memory_budget: bytes of working memory one chunk of model evaluations may use.

    Returns:
      A :class:`PartialDependence` with ``grid`` and ``values`` (``[G]`` or ``[G, K]``).

    Raises:
      ValueError: for NaN/inf in ``X`` or ``grid``, a grid of the wrong shape, grid values of a
        category column that are not its codes, features out of range, unknown names or
        repeated features.
      TypeError: for a model that cannot be called, or features of the wrong type.
    """
    model, X, names, _, categories = frame_inputs(model, X, feature_names)
    idx, single = feature_set(features, names, "features")
    grid_size = integer(grid_size, "grid_size", least=1)
    budget = check_budget(memory_budget)
    n_max = check_n_max(n_max, allow_none=True)
    points = make_grid(X, idx, grid, int(grid_size), single, categories)
    check_category_grid(points, idx, names, categories)
    background, row_ids = subsample(X, n_max, key, return_index=True)
    n, m = background.shape
    wrapped = wrap_model(model, m, X.dtype, background[:2])

    mask = np.zeros((1, m), dtype=bool)
    mask[0, list(idx)] = True
    full = jnp.zeros((points.shape[0], m), X.dtype).at[:, jnp.asarray(idx)].set(points)
    n_units = points.shape[0] + (n if centered else 0)
    chunk = units_per_chunk(wrapped, n_units, n, m, X.dtype.itemsize, budget)

    values, finite = _pd_program(wrapped, background, full, jnp.asarray(mask), chunk, bool(centered))
    g = points.shape[0]
    hint = "fix the model, or drop those grid points or the rows of `X` that make it undefined there."
    check_finite_outputs(finite[:g], "`model`", unit="grid point", source=" of `grid`", hint=hint)
    check_finite_outputs(finite[g:], "`model`", row_ids=row_ids, source=" of `X` (centring)", hint=MIXED_ROWS_HINT)
    if wrapped.single_output:
        values = values[:, 0]
    grid_out = points[:, 0] if single else points
    return PartialDependence(grid_out, values, idx, [names[j] for j in idx], centered)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _pd_program(model: Model, background: jax.Array, full: jax.Array, mask: jax.Array, chunk: int, centered: bool):
    """The compiled body of :func:`partial_dependence`: module-level, so it compiles once per
    configuration (the model's static part, shapes, chunk, centring), not once per call."""
    pts = jnp.concatenate([full, background], axis=0) if centered else full
    u = pts.shape[0]
    vals = pd_units(model.fn, background, pts, mask, jnp.arange(u), jnp.zeros(u, jnp.int32), chunk)
    out = vals[: full.shape[0]]
    if centered:
        out = out - jnp.mean(vals[full.shape[0] :], axis=0)
    return out, jnp.isfinite(vals).all(-1)


MAX_SETS = 2**16 - 1
"""The most feature sets one exact decomposition computes: every non-empty set of 16 features."""


def count_sets(n_features: int, max_order: int) -> int:
    """The number of non-empty feature sets of at most ``max_order`` features: ``sum_j C(M, j)``."""
    return sum(math.comb(n_features, j) for j in range(1, max_order + 1))


def check_set_count(n_features: int, max_order: int, n_rows: int, arg: str) -> None:
    """Refuse an order above 2 whose sets are too many to compute exactly, naming the cost.

    Orders 1 and 2 (main effects and all pairs: ``M (M + 1) / 2`` sets, the H statistics'
    default) pass whatever ``M``, their cost growing as ``M^2``.

    Raises:
      ValueError: when ``max_order > 2`` and ``sum_{j <= max_order} C(M, j)`` exceeds :data:`MAX_SETS`.
    """
    if max_order <= 2:
        return
    n_sets = count_sets(n_features, max_order)
    if n_sets > MAX_SETS:
        raise ValueError(
            f"`{arg}={max_order}` with {n_features} features needs the partial dependences of {n_sets:,} "
            f"feature sets, {n_rows}^2 = {n_rows**2:,} model evaluations each ({n_sets * n_rows**2:.2e} in all); "
            f"at most {MAX_SETS:,} sets (every set of 16 features) are computed exactly. Lower `{arg}`."
        )


def sets_up_to(n_features: int, max_order: int) -> list[tuple[int, ...]]:
    """Every sorted feature tuple with 1 to ``max_order`` features, by size, then lexicographically."""
    out: list[tuple[int, ...]] = []
    for size in range(1, max_order + 1):
        out.extend(itertools.combinations(range(n_features), size))
    return out


def by_size(sets: Sequence[tuple[int, ...]]) -> dict[int, np.ndarray]:
    """The rows of ``sets`` grouped by set size: ``{size: [rows]}``, sizes ascending."""
    out: dict[int, list[int]] = {}
    for r, s in enumerate(sets):
        out.setdefault(len(s), []).append(r)
    return {k: np.asarray(v, dtype=np.int32) for k, v in sorted(out.items())}


def split_rows(values: jax.Array, sets: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], jax.Array]:
    """``{set: values[r]}`` for the rows ``r`` of ``sets`` (one host copy, then one array per set)."""
    host = np.asarray(values)
    return {s: jnp.asarray(host[r]) for r, s in enumerate(sets)}
