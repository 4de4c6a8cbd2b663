"""Building TreeExplainer's kernels: the model's paths, their router, path blocks and base value.

A *build* is everything one choice of trees (``tree_limit``) and kind (exact or Saabas) needs:
the ensemble cut to those rounds is decomposed into root-to-leaf paths
(:func:`jaxshap._tree._paths.decompose`), a :class:`~jaxshap._tree._rows.Router` turns path
bounds and rows into ranks among the thresholds, and the paths are grouped by their number of
distinct features ``U`` (at most :data:`MAX_GROUPS` groups, widths chosen to minimise the padded
work) and cut into blocks (see :mod:`._tree_kernels`). Path-dependent groups hold the quadrature
factors of :mod:`jaxshap._tree._quadrature`, except for oblivious trees, which are tables read by
leaf index (:mod:`jaxshap._tree._oblivious`; trees of more than :data:`EAGER_LEAVES` leaves wait
for a call of as many rows, which remakes the build's groups); interventional groups of short paths hold the
values of every pattern of followed slots (``2**U`` rows per path, for ``U <=``
:data:`MAX_TABLE_SLOTS` and within half of ``memory_budget``), built from the background's
pattern histogram. For a transformed single output (probability, loss) the background's weights
differ per explained row, so paths of up to :data:`MAX_HISTOGRAM_SLOTS` slots carry the pattern
game's table instead (``"S"``), contracted with each row's weighted histogram of the background's
patterns. Longer paths meet the background in chunks. Builds are cached per
``(rounds, approximate)``.

"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from .._core._inputs import put
from .._core._validate import DEFAULT_MEMORY_BUDGET, integer
from .._tree._ensemble import TreeEnsemble
from .._tree._interventional import pattern_values, shapley_tables, tables_host
from .._tree._oblivious import MAX_BRANCHES, level_paths, n_branches, oblivious_trees, tables
from .._tree._paths import Paths, decompose, follows_host, host_slots, pattern
from .._tree._quadrature import expected_value, interior_nodes, rule, shapley_arrays
from .._tree._rows import Router
from ._tree_kernels import CPU_CHUNK_ROWS, TreeRows, pad_blocks, plan_block


MAX_TABLE_SLOTS = 10
"""Interventional groups of paths with at most this many distinct features are tabulated (``2**U`` rows per path)."""

MAX_GROUPS = 3
"""Paths are grouped by their number of distinct features into at most this many groups (one loop each)."""

MAX_HISTOGRAM_SLOTS = 6
"""Widest paths whose values for a transformed single output come from each row's histogram of
the background's patterns (``(U + 1) 2**U`` work a row, against the pair kernel's ``O(U)`` a
background row)."""

EAGER_LEAVES = 256
"""Oblivious trees of up to this many leaves are tabulated when built (:mod:`jaxshap._tree._oblivious`);
deeper ones at the first call with at least as many rows as a tree has leaves (the tables cost
about as much as that many rows through the path kernel)."""

BLOCK_ELEMENTS = 2**20
"""Elements of a path block's largest temporary (4 MiB in float32: it stays in cache on a CPU)."""

BACKGROUND_CHUNK = 128
"""Background rows per chunk of the interventional pair kernel."""

SLOT_FILL = {"feature": 0, "lower": -np.inf, "upper": np.inf, "nan_ok": True, "zero_missing": False, "zero_ok": True,
             "cat": False, "cat_words": 0xFFFFFFFF, "cat_invalid_ok": True, "z": 1.0}
"""A padding path's slots: always followed, null players (its value is 0)."""


def rows_per_chunk() -> int:
    """Rows per chunk the path blocks are sized for: :data:`CPU_CHUNK_ROWS` on a CPU, more elsewhere."""
    return CPU_CHUNK_ROWS if jax.default_backend() == "cpu" else 4 * CPU_CHUNK_ROWS


def width_groups(lengths: np.ndarray, cost, max_groups: int = MAX_GROUPS) -> list[tuple[int, int]]:
    """``[(lo, hi)]``: groups of paths with ``lo < length <= hi``, at most ``max_groups``, chosen to
    minimise ``sum cost(paths in group, hi)`` (dynamic programming over the distinct lengths);
    each further group must save a tenth of the work to be kept."""
    widths = np.unique(lengths[lengths > 0])
    if widths.size == 0:
        return []
    counts = np.array([(lengths == w).sum() for w in widths])
    n = widths.size
    prefix = np.concatenate([[0], np.cumsum(counts)])
    span = lambda i, j: cost(prefix[j + 1] - prefix[i], int(widths[j]))  # noqa: E731  paths i..j padded to widths[j]
    best = {(0, j): (span(0, j), [(0, j)]) for j in range(n)}
    for g in range(1, max_groups):
        for j in range(n):
            options = [(best[(g - 1, i)][0] + span(i + 1, j), best[(g - 1, i)][1] + [(i + 1, j)])
                       for i in range(j) if (g - 1, i) in best]
            if options:
                best[(g, j)] = min(options, key=lambda o: o[0])
    chosen = best[(0, n - 1)]
    for g in range(1, max_groups):
        if (g, n - 1) in best and best[(g, n - 1)][0] < 0.9 * chosen[0]:
            chosen = best[(g, n - 1)]
    return [(0 if i == 0 else int(widths[i - 1]), int(widths[j])) for i, j in chosen[1]]


def groups_of(paths: Paths, cost) -> list[Paths]:
    """The paths cut into the groups of :func:`width_groups` (slots cut to each group's width)."""
    out = []
    for lo, hi in width_groups(paths.length, cost):
        keep = (paths.length > lo) & (paths.length <= hi)
        if keep.any():
            out.append(paths.subset(keep, hi))
    return out


def path_cost(n: int, width: int) -> float:
    """Work of ``n`` paths of ``width`` slots in the path-dependent kernel (products at ``ceil(U/2)`` nodes)."""
    return n * width * ((width + 1) // 2 + 2)


@dataclasses.dataclass
class Build:
    """Everything one (tree limit, kind) needs: the router, the groups of path blocks and the base."""

    ensemble: TreeEnsemble
    router: Router
    groups: list
    base: np.ndarray  # [K] float64 (raw base for transformed outputs)
    fb: np.ndarray | None = None  # [B, K] background margins (transformed outputs)
    paths: Any = None  # the routed paths (for interaction values)
    background: np.ndarray | None = None  # the routed background rows (interventional)
    chunks: Any = None  # the background in chunks, on the device (interventional)
    weights: np.ndarray | None = None  # [B] the background rows' weights (interventional)
    deferred: int = 0  # leaves of the smallest oblivious trees left to the path kernel until a larger call (0: none)


def require_cover(ensemble: TreeEnsemble, what: str) -> None:
    """Raise unless the ensemble knows its node covers, which ``what`` needs.

    Raises:
      ValueError: saying how to go on (background rows, or covers counted on them).
    """
    if not ensemble.has_cover:
        raise ValueError(
            f"{what} needs the trees' node covers (training sample counts), and this {ensemble.source} model "
            "records none. Pass background rows `data` [B, M] for interventional values, or `data` with "
            "feature_perturbation='tree_path_dependent' to count the covers on those rows."
        )


def cover_from_data(e: TreeEnsemble, X: np.ndarray, weights: np.ndarray | None = None) -> TreeEnsemble:
    """The ensemble with each node's cover replaced by the number (or the total ``weights``) of
    rows of ``X`` (already prepared) that pass through it, counted for all trees at once, one
    level per step."""
    t, n = e.feature.shape
    rows = np.arange(X.shape[0])[:, None]
    node = np.zeros((X.shape[0], t), dtype=np.int64)
    trees = np.arange(t)[None, :]
    w = np.broadcast_to((np.ones(X.shape[0]) if weights is None else weights)[:, None], node.shape)
    counts = np.bincount((trees * n + node).reshape(-1), w.reshape(-1), minlength=t * n)
    while True:
        node, inner = e.descend(X, rows, trees, node)
        if not inner.any():
            break
        flat = (trees * n + node)[inner]
        counts += np.bincount(flat, w[inner], minlength=t * n)
    return dataclasses.replace(e, cover=counts.reshape(t, n))


def routed_paths(e: TreeEnsemble, memory_budget: int, approximate: bool) -> tuple[Paths, Router]:
    """The ensemble's paths with their bounds as ranks, and the router that gives rows as ranks."""
    paths = decompose(e, max_bytes=max(memory_budget, DEFAULT_MEMORY_BUDGET), saabas=approximate)
    categorical = None
    if paths.cat is not None:
        categorical = np.zeros(e.n_features, bool)
        categorical[paths.feature[paths.cat]] = True
    router = Router.from_bounds(paths.feature, paths.lower, paths.upper, e.n_features, categorical)
    return ranked(paths, router), router


def ranked(paths: Paths, router: Router) -> Paths:
    """The paths with their bounds as the router's ranks (the form the kernels compare rows in)."""
    return dataclasses.replace(paths, lower=router.bounds(paths.feature, paths.lower),
                               upper=router.bounds(paths.feature, paths.upper))


def background_chunks(codes: np.ndarray, weights: np.ndarray, fb: np.ndarray | None, dtype,
                      size: int = BACKGROUND_CHUNK) -> tuple:
    """The routed background rows as chunks ``([C, b, M] codes, [C, b] weights, [C, b, K]
    margins or None)`` of ``size`` rows, on the device; the last chunk is padded with weight 0."""
    n = codes.shape[0]
    b = min(n, size)
    c = -(-n // b)
    pad = c * b - n
    idx = np.concatenate([np.arange(n), np.zeros(pad, np.int64)])
    weight = np.concatenate([weights, np.zeros(pad)])
    margins = None if fb is None else put(fb[idx].reshape(c, b, -1), dtype)
    return put(codes[idx].reshape(c, b, -1), dtype), put(weight.reshape(c, b), dtype), margins


def block_arrays(g: Paths, dtype, extra: dict, per_path: int, memory_budget: int) -> dict:
    """One group's blocks on the device: slot tests, scatter index, value, output and ``extra``;
    a block's largest temporary (``per_path`` elements a path) is at most :data:`BLOCK_ELEMENTS`
    elements and a quarter of ``memory_budget``."""
    k = g.n_outputs
    arrays = {"slots": host_slots(g, dtype), "index": (g.feature * k + g.output[:, None]).astype(np.uint32),
              "value": np.asarray(g.value, dtype), "output": g.output.astype(np.int32), **extra}
    block = plan_block(g.n_paths, per_path, min(BLOCK_ELEMENTS, memory_budget // (4 * np.dtype(dtype).itemsize)))
    return jax.tree_util.tree_map(jax.device_put, pad_blocks(arrays, g.n_paths, block, SLOT_FILL))


class TreeBuilder:
    """The builds of one explainer (see the module docstring), cached per ``(rounds, approximate)``.

    Args:
      ensemble: the model's trees (covers recounted on the background when asked for).
      background_rows: ``[B, M]`` prepared background rows, or ``None``.
      interventional: the interventional game (else path-dependent).
      transform: the output transform (``"identity"`` for the raw output).
      n_outputs: outputs of the explained output (two for a doubled binary ``predict_proba``).
      dtype: compute dtype.
      memory_budget: bytes.
      background_weights: ``[B]`` weights of the background rows summing to 1 (``None``: ``1 / B``).
    """

    def __init__(self, ensemble, background_rows, interventional, transform, n_outputs, dtype, memory_budget,
                 background_weights=None):
        self.ensemble, self.background_rows = ensemble, background_rows
        if background_rows is not None and background_weights is None:
            background_weights = np.full(background_rows.shape[0], 1.0 / background_rows.shape[0])
        self.background_weights = background_weights
        self.interventional, self.transform = interventional, transform
        self.n_outputs, self.dtype, self.memory_budget = n_outputs, dtype, memory_budget
        self.rows = rows_per_chunk()
        self.builds: dict = {}

    def rounds(self, tree_limit: Any) -> int | None:
        """The boosting rounds to explain: ``tree_limit``, or the model's default (``None``: all)."""
        if tree_limit is None:
            return self.ensemble.default_rounds
        tree_limit = integer(tree_limit, "tree_limit", least=1, rule="a positive number of boosting rounds")
        n = self.ensemble.n_rounds
        if tree_limit > n:
            raise ValueError(f"`tree_limit` is {tree_limit} but the model has {n} rounds; pass at most {n}.")
        return tree_limit

    def build(self, rounds: int | None, approximate: bool, n_rows: int = 0) -> Build:
        """The (cached) build of the first ``rounds`` rounds, Saabas' when ``approximate``, for a
        call on ``n_rows`` rows (its groups remade when the call is large enough to tabulate
        deferred oblivious trees)."""
        key = (rounds, approximate)
        cached = self.builds.get(key)
        if cached is None:
            self.builds[key] = self._build(rounds, approximate, n_rows)
        elif cached.deferred and n_rows >= cached.deferred:
            groups, deferred = self._path_dependent_groups(cached.ensemble, cached.paths, cached.router, n_rows)
            self.builds[key] = dataclasses.replace(cached, groups=groups, deferred=deferred)
        return self.builds[key]

    def _build(self, rounds: int | None, approximate: bool, n_rows: int = 0) -> Build:
        e = self.ensemble.first_rounds(rounds)
        paths, router = routed_paths(e, self.memory_budget, approximate)
        transformed = self.transform != "identity"
        background = chunks = fb = None
        deferred = 0
        if not self.interventional or approximate:
            base = expected_value(paths.zero_fraction, paths.value, paths.output, paths.base)
        else:
            background = router.encode(self.background_rows, np.float32)
            fb = e.predict(self.background_rows)
            base = self.background_weights @ fb
            if transformed:  # the kernels add the paths' leaves to the raw constant (single-leaf trees included)
                stump = paths.length == 0
                base = paths.base + np.bincount(paths.output[stump], paths.value[stump], minlength=paths.n_outputs)
            chunks = background_chunks(background, self.background_weights, fb if transformed else None, self.dtype)
        if approximate:
            groups = [self._saabas(g) for g in groups_of(paths, lambda n, w: n * w)]
        elif background is None:
            groups, deferred = self._path_dependent_groups(e, paths, router, n_rows)
        else:
            groups = self._interventional(paths, background, transformed)
        return Build(e, router, groups, np.asarray(base, np.float64), fb if transformed else None, paths, background,
                     chunks, self.background_weights, deferred)

    def _path_dependent_groups(self, e: TreeEnsemble, paths: Paths, router: Router, n_rows: int) -> tuple[list, int]:
        """``(groups, deferred)``: the oblivious trees' tables and the other trees' path groups."""
        groups, tabled, deferred = self._oblivious(e, router, n_rows)
        rest = paths.subset(~tabled[paths.tree], paths.n_slots)
        return [self._path_dependent(g) for g in groups_of(rest, path_cost)] + groups, deferred

    def _oblivious(self, e: TreeEnsemble, router: Router, n_rows: int) -> tuple[list, np.ndarray, int]:
        """``(groups, tabled [T], deferred)``: the oblivious trees' table groups (one per depth, read
        by leaf index; :mod:`jaxshap._tree._oblivious`), which trees they hold, and the leaves of the
        smallest trees deferred to a call of as many rows (0: none). Tables take at most half of
        ``memory_budget``; trees needing more than :data:`MAX_BRANCHES` branch choices stay paths."""
        tabled = np.zeros(e.n_trees, bool)
        groups, deferred = [], 0
        room = self.memory_budget // 2
        for ob in oblivious_trees(e):
            leaves = 2**ob.depth
            if leaves > EAGER_LEAVES and n_rows < leaves:
                deferred = min(deferred or leaves, leaves)
                continue
            ob = ob.take(n_branches(ob.feature) <= MAX_BRANCHES)
            each = e.n_outputs * leaves * ob.depth * np.dtype(self.dtype).itemsize
            ob = ob.take(slice(0, min(ob.tree.size, room // each)))
            if ob.tree.size == 0:
                continue
            room -= ob.tree.size * each
            g = ranked(level_paths(e, ob), router)
            table = np.asarray(tables(ob).reshape(g.n_paths, leaves, ob.depth), self.dtype)
            groups.append({"blocks": block_arrays(g, self.dtype, {"table": table}, ob.depth * self.rows,
                                                  self.memory_budget)})
            tabled[ob.tree] = True
        return groups, tabled, deferred

    def _saabas(self, g: Paths) -> dict:
        return {"blocks": block_arrays(g, self.dtype, {"saabas": np.asarray(g.saabas, self.dtype)},
                                       g.n_slots * self.rows, self.memory_budget)}

    def _path_dependent(self, g: Paths) -> dict:
        host = shapley_arrays(g.zero_fraction, g.value)
        extra = {name: np.asarray(a, self.dtype) for name, a in host.items()}
        extra["zpos"] = host["zpos"]
        extra["z"] = np.asarray(g.zero_fraction, self.dtype)
        nodes = host["vw"].shape[1]
        return {"blocks": block_arrays(g, self.dtype, extra, (g.n_slots + 1) * nodes * self.rows, self.memory_budget)}

    def _interventional(self, paths: Paths, background: np.ndarray, transformed: bool) -> list:
        """Tabulated groups of short paths (raw output, within half the budget) and pair groups."""
        itemsize = np.dtype(self.dtype).itemsize
        tabled = np.zeros(paths.n_paths, bool)
        if not transformed:  # the shortest paths first, as many as half the budget holds
            short = np.flatnonzero((paths.length <= MAX_TABLE_SLOTS) & (paths.length > 0))
            short = short[np.argsort(paths.length[short], kind="stable")]
            cost = np.cumsum(2.0 ** paths.length[short] * paths.length[short] * itemsize)
            tabled[short[cost <= self.memory_budget // 2]] = True
        groups = []
        for g in groups_of(paths.subset(tabled, paths.n_slots), lambda n, w: n * 2**w * w):
            table = tables_host(self._pattern_shares(g, background), g.n_slots) * g.value[:, None, None]
            groups.append({"blocks": block_arrays(g, self.dtype, {"table": np.asarray(table, self.dtype)},
                                                  g.n_slots * self.rows, self.memory_budget)})
        b = min(background.shape[0], BACKGROUND_CHUNK)
        if transformed and paths.n_outputs == 1:  # short paths: each row's weighted pattern histogram
            tabled = (paths.length <= MAX_HISTOGRAM_SLOTS) & (paths.length > 0)
            for g in groups_of(paths.subset(tabled, paths.n_slots), lambda n, w: n * 2**w * (w + 1)):
                size = 2**g.n_slots
                per_path = self.rows * size * (g.n_slots + 1) + b * size
                groups.append({"blocks": block_arrays(g, self.dtype, {}, per_path, self.memory_budget),
                               "S": put(pattern_values(g.n_slots), self.dtype)})
        rest = paths.subset(~tabled, paths.n_slots)
        for g in groups_of(rest, lambda n, w: n * w):
            wa, wb = shapley_tables(g.n_slots)
            per_path = self.rows * b * (self.n_outputs + 2)  # the [paths, rows, background, K] pair weights
            blocks = block_arrays(g, self.dtype, {}, per_path, self.memory_budget)
            groups.append({"blocks": blocks, "wa": put(wa, self.dtype), "wb": put(wb, self.dtype)})
        return groups

    def _pattern_shares(self, g: Paths, background: np.ndarray) -> np.ndarray:
        """``[P, 2**U]``: the weighted share of the background rows that follow each pattern of
        each path's slots, counted in chunks of background rows (no ``[B, P, U]`` array)."""
        size = 2**g.n_slots
        shares = np.zeros(g.n_paths * size)
        step = max(1, self.memory_budget // max(1, 16 * g.n_paths * g.n_slots))
        offset = np.arange(g.n_paths)[None, :] * size
        for i in range(0, background.shape[0], step):
            codes = pattern(follows_host(g, background[i : i + step]), np)  # [b, P]
            w = np.broadcast_to(self.background_weights[i : i + step, None], codes.shape)
            shares += np.bincount((offset + codes).reshape(-1), w.reshape(-1), minlength=shares.size)
        return shares.reshape(g.n_paths, size)

    def interaction_groups(self, build: Build, index: str, order: int) -> tuple:
        """``(groups, (nodes, weights, interior nodes), rows per chunk, background chunks)`` for an
        index's terms of orders ``1..order``: path blocks, rows and background rows sized for
        ``[paths, U**t, nodes, rows, background]`` temporaries of about :data:`BLOCK_ELEMENTS` elements."""
        paths = build.paths
        nodes, weights = rule(index, order, max(1, paths.n_slots))
        each = max(1, paths.n_slots) ** order * nodes.size
        pairs = build.background is not None
        b = 1 if not pairs else max(1, min(build.background.shape[0], 32, BLOCK_ELEMENTS // each))
        rows = max(1, min(self.rows, BLOCK_ELEMENTS // (each * b)))
        groups = []
        for g in groups_of(paths, lambda n, w: n * w**order):
            extra = {} if pairs else {"z": np.asarray(g.zero_fraction, self.dtype)}
            per_path = g.n_slots**order * nodes.size * rows * b
            groups.append({"blocks": block_arrays(g, self.dtype, extra, per_path, self.memory_budget)})
        chunks = background_chunks(build.background, self.background_weights, None, self.dtype, b) if pairs else None
        return groups, (put(nodes, self.dtype), put(weights, self.dtype), interior_nodes(nodes)), rows, chunks

    def bytes_per_row(self, build: Build) -> int:
        """Working memory of one explained row in a build's kernels (its accumulator, a block's share
        and, for a transformed output, its ``[B, K, K]`` rescaling of the background rows)."""
        itemsize = np.dtype(self.dtype).itemsize
        rescaling = 0 if build.fb is None else build.fb.shape[0] * build.fb.shape[1] ** 2
        return int(itemsize * (self.ensemble.n_features * self.n_outputs + BLOCK_ELEMENTS // self.rows + rescaling))

    def runner(self, build: Build, approximate: bool) -> TreeRows:
        """The build's kernels as a :class:`TreeRows` (made per call: cheap, and always current
        with the build's base value)."""
        transform = "identity" if approximate else self.transform
        return TreeRows(
            build.groups, self.ensemble.n_features, build.ensemble.n_outputs, put(build.base, self.dtype),
            None if approximate else build.chunks, transform, self.bytes_per_row(build), self.memory_budget, self.rows,
        )
