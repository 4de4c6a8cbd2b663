"""The one array form every imported tree ensemble takes.

A model is a sum of ``T`` binary trees plus a constant: ``f(x) = base + sum_t tree_t(x)``, with
outputs of width ``K`` (one per class for multi-class models). Each tree is stored in flat
node arrays padded to a common node count ``N``, so the trees stack into ``[T, N]`` arrays.

Split semantics are unified when importing: an internal node sends ``x`` to its left child
when ``x <= threshold``, where ``x`` is first rounded to the ``precision`` the library itself
compares in (float32 for XGBoost and scikit-learn's classic trees, float64 for LightGBM and
HistGradientBoosting) and the threshold is held exactly in float64 (XGBoost's strict float32
``x < t`` is rewritten as ``x <= nextafter(t, -inf)``, which routes every float32 ``x``
identically). Missing values follow ``missing``:

* ``MISSING_NAN`` (0): a NaN goes to the default child (XGBoost, scikit-learn, LightGBM's
  ``NaN`` missing type);
* ``MISSING_AS_ZERO`` (1): a NaN is read as ``0.0`` and compared (LightGBM's ``None`` type);
* ``MISSING_ZERO`` (2): a NaN or a zero (``|x| <= 1e-35``) goes to the default child
  (LightGBM's ``Zero`` type).

A value equal to ``missing_value`` (XGBoost's ``missing=``, compared in ``precision``) is a
missing value too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MISSING_NAN = 0
"""Missing rule 0: a NaN goes to the node's default child (XGBoost, scikit-learn, LightGBM's NaN type)."""
MISSING_AS_ZERO = 1
"""Missing rule 1: a NaN is read as ``0.0`` and compared (LightGBM's ``None`` type)."""
MISSING_ZERO = 2
"""Missing rule 2: a NaN or a zero (``|x| <= 1e-35``) goes to the default child (LightGBM's ``Zero`` type)."""
MISSING_CATEGORICAL = 3
"""Rule 3: a categorical (set membership) split; a NaN goes to the default child."""
ZERO_THRESHOLD = 1e-35  # LightGBM's kZeroThreshold


@dataclasses.dataclass(frozen=True)
class TreeEnsemble:
    """A tree ensemble as stacked NumPy arrays (host side, float64 thresholds and values).

    Attributes:
      feature: ``[T, N]`` int32 split feature, ``-1`` at leaves (and at padding).
      threshold: ``[T, N]`` float64; ``x <= threshold`` goes left.
      left, right: ``[T, N]`` int32 child indices, ``-1`` at leaves.
      default_left: ``[T, N]`` bool, where a missing value goes.
      missing: ``[T, N]`` int8 missing-value rule (``MISSING_*``).
      value: ``[T, N, K]`` float64 node values; only leaves' values are used. Scaled so that
        ``base + sum_t value[t, leaf_t(x)]`` is the model's raw output (margin).
      cover: ``[T, N]`` float64 training cover (hessian sum or sample count) of each node; NaN
        where the format records none (ONNX without usable ``nodes_hitrates``): the
        path-dependent game and Saabas values need covers (see :attr:`has_cover`).
      base: ``[K]`` float64 constant added to the trees' sum.
      n_features: ``M``.
      source: a short description of the imported model.
      precision: the float type the library rounds inputs to before comparing them with the
        thresholds (``np.float32`` or ``np.float64``).
      missing_value: a value read as missing besides NaN (``nan`` when there is none).
      sparse_missing: whether entries absent from a sparse matrix are missing (XGBoost) rather
        than zeros (LightGBM, scikit-learn).
      category_values: whether a DataFrame's ``category`` columns hold the categories the model
        was trained on as their values (CatBoost reads ``3`` as the category ``"3"``) rather than
        as their codes (LightGBM, scikit-learn).
      tree_round: ``[T]`` int boosting round (iteration) of each tree, for ``tree_limit``.
      default_rounds: the number of rounds the model's own ``predict`` uses (early stopping's
        best iteration), or ``None`` for all of them.
      output_transform: the function the model's library applies to the raw output to predict:
        ``"identity"``, ``"sigmoid"`` (binary log-odds to a probability), ``"softmax"``
        (multi-class scores to probabilities) or ``None`` when unknown. (The explainers'
        ``link="logit"`` is the inverse of ``"sigmoid"``: it maps a probability to log-odds.)
      loss: the training loss for ``model_output="log_loss"``: ``"squared_error"``,
        ``"binary_crossentropy"``, ``"multiclass_crossentropy"`` or ``None``.
      cat_left: ``[T, N, W]`` uint32 bit sets, or ``None`` when no split is categorical: at a
        categorical split (``missing == MISSING_CATEGORICAL``) the input is a category code
        and goes left iff its bit is set (a NaN goes the default way; a negative or
        out-of-range code goes right).
      cat_invalid_left: ``[T, N]`` bool, where a negative or out-of-range code goes at each
        categorical split (``None`` with ``cat_left``).
      categories: ``{j: (labels, numbers)}`` for categorical features whose library reads only
        the categories it was fitted on (scikit-learn's HistGradientBoosting), or ``None``:
        :meth:`prepare` reads a value of feature ``j`` outside ``numbers`` as missing (so an
        unseen category goes where a NaN goes), and a DataFrame's ``category`` column ``j`` is
        read as ``numbers[i]`` for its label ``labels[i]`` (NaN for other labels) rather than as
        its codes (see :func:`jaxshap._tree._rows.host_rows`).
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    default_left: np.ndarray
    missing: np.ndarray
    value: np.ndarray
    cover: np.ndarray
    base: np.ndarray
    n_features: int
    source: str = ""
    precision: type = np.float32
    missing_value: float = float("nan")
    sparse_missing: bool = False
    category_values: bool = False
    tree_round: np.ndarray | None = None
    default_rounds: int | None = None
    output_transform: str | None = None
    loss: str | None = None
    cat_left: np.ndarray | None = None
    cat_invalid_left: np.ndarray | None = None
    categories: dict | None = None

    @property
    def n_trees(self) -> int:
        return self.feature.shape[0]

    @property
    def has_cover(self) -> bool:
        """Whether every node's cover is known (the path-dependent game needs them)."""
        return bool(np.isfinite(self.cover).all())

    @property
    def n_outputs(self) -> int:
        return self.value.shape[-1]

    @property
    def rounds(self) -> np.ndarray:
        """``[T]`` the boosting round of each tree (each tree its own round when not recorded)."""
        return np.arange(self.n_trees) if self.tree_round is None else self.tree_round

    @property
    def n_rounds(self) -> int:
        return int(self.rounds.max()) + 1 if self.n_trees else 0

    def first_rounds(self, n_rounds: int | None) -> "TreeEnsemble":
        """The ensemble of the trees of the first ``n_rounds`` rounds (``None``: all of them)."""
        if n_rounds is None or n_rounds >= self.n_rounds:
            return self
        keep = self.rounds < n_rounds
        cut = {f: getattr(self, f)[keep] for f in ("feature", "threshold", "left", "right", "default_left",
                                                    "missing", "value", "cover")}
        if self.cat_left is not None:
            cut["cat_left"], cut["cat_invalid_left"] = self.cat_left[keep], self.cat_invalid_left[keep]
        return dataclasses.replace(self, tree_round=self.rounds[keep], **cut)

    def prepare(self, X) -> np.ndarray:
        """Rows as the library reads them: float64 holding values rounded to ``precision``, with
        ``missing_value`` and the values outside a feature's ``categories`` replaced by NaN
        (idempotent: prepared rows come back unchanged)."""
        X = np.asarray(X, dtype=np.float64)
        rounded = X.astype(self.precision)
        if not np.isnan(self.missing_value):
            rounded = np.where(rounded == self.precision(self.missing_value), np.nan, rounded)
        out = np.asarray(rounded, dtype=np.float64)
        for j, (_, numbers) in (self.categories or {}).items():
            if out.ndim == 2 and j < out.shape[1]:
                out[:, j] = np.where(np.isin(out[:, j], numbers), out[:, j], np.nan)
        return out

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Raw output ``[n, K]`` by walking every tree (a NumPy reference, for tests)."""
        X = self.prepare(X)
        out = np.tile(self.base, (X.shape[0], 1))
        rows = np.arange(X.shape[0])
        for t in range(self.n_trees):
            node = np.zeros(X.shape[0], dtype=np.int64)
            for _ in range(self.feature.shape[1]):
                node, inner = self.descend(X, rows, t, node)
                if not inner.any():
                    break
            out += self.value[t, node]
        return out

    def descend(self, X: np.ndarray, rows, trees, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One level of routing: ``(next node, whether the current node splits)`` of rows
        ``X[rows]`` at nodes ``node`` of trees ``trees`` (index arrays that broadcast together);
        leaves stay where they are."""
        f = self.feature[trees, node]
        inner = f >= 0
        x = X[rows, np.maximum(f, 0)]
        cats = None if self.cat_left is None else (self.cat_left[trees, node], self.cat_invalid_left[trees, node])
        left = go_left(x, self.threshold[trees, node], self.default_left[trees, node], self.missing[trees, node], cats)
        return np.where(inner, np.where(left, self.left[trees, node], self.right[trees, node]), node), inner


def in_category_set(words: np.ndarray, x: np.ndarray, invalid: np.ndarray) -> np.ndarray:
    """Whether category codes ``x`` (float, not NaN) are in the bit sets ``words`` ``[..., W]``;
    ``invalid`` for negative codes and codes past the sets."""
    n_bits = 32 * words.shape[-1]
    with np.errstate(invalid="ignore"):
        valid = (x >= 0) & (x < n_bits)
    code = np.where(valid, x, 0).astype(np.int64)
    word = np.take_along_axis(words, (code // 32)[..., None], axis=-1)[..., 0].astype(np.int64)
    return np.where(valid, ((word >> (code % 32)) & 1) == 1, invalid)


def go_left(x, threshold, default_left, missing, cat_left=None):
    """Whether values ``x`` go to the left child of nodes with these split parameters (NumPy)."""
    nan = np.isnan(x)
    xv = np.where(nan, 0.0, x)
    is_missing = np.where(missing == MISSING_ZERO, np.abs(xv) <= ZERO_THRESHOLD, nan)
    is_missing = np.where(missing == MISSING_AS_ZERO, False, is_missing)
    numeric = xv <= threshold
    if cat_left is not None:
        words, invalid_left = cat_left
        numeric = np.where(missing == MISSING_CATEGORICAL, in_category_set(words, xv, invalid_left), numeric)
    return np.where(is_missing, default_left, numeric)


@dataclasses.dataclass
class Tree:
    """One tree in flat node arrays, as a loader builds it (before padding and stacking)."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    default_left: np.ndarray
    missing: np.ndarray
    value: np.ndarray  # [N, K]
    cover: np.ndarray
    cat_left: np.ndarray | None = None  # [N, W] uint32 bit sets of categories that go left
    cat_invalid_left: np.ndarray | None = None  # [N] where invalid codes go


def node_category_sets(words: list, invalid_left) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(cat_left [N, W], cat_invalid_left [N])`` for :func:`make_tree` from each node's bit set
    (uint32 words, ``None`` at numeric splits and leaves) and where each node sends invalid codes
    (``[N]`` or one bool for all), or ``(None, None)`` when no node has a set. A node's set shorter
    than ``W`` words is padded the way its invalid codes go, so that a code past its own words
    goes where a code past every word does (as :func:`stack_trees` pads across trees)."""
    if all(w is None for w in words):
        return None, None
    invalid = np.broadcast_to(np.asarray(invalid_left, bool), (len(words),)).copy()
    n_words = max(w.size for w in words if w is not None)
    cat_left = np.where(invalid[:, None], np.uint32(0xFFFFFFFF), np.uint32(0)).repeat(n_words, axis=1)
    for i, w in enumerate(words):
        if w is not None:
            cat_left[i, : w.size] = w
    return cat_left, invalid


def make_tree(feature, threshold, left, right, default_left, value, cover, missing=None, cat_left=None,
              cat_invalid_left=None) -> Tree:
    """Build a :class:`Tree`, normalising dtypes and marking leaves with ``feature = -1``."""
    left = np.asarray(left, dtype=np.int32)
    right = np.asarray(right, dtype=np.int32)
    leaf = left < 0
    feature = np.where(leaf, -1, np.asarray(feature)).astype(np.int32)
    n = feature.shape[0]
    value = np.asarray(value, dtype=np.float64).reshape(n, -1)
    if missing is None:
        missing = np.zeros(n, dtype=np.int8)
    return Tree(
        feature,
        np.where(leaf, 0.0, np.asarray(threshold, dtype=np.float64)),
        np.where(leaf, -1, left).astype(np.int32),
        np.where(leaf, -1, right).astype(np.int32),
        np.asarray(default_left, dtype=bool),
        np.asarray(missing, dtype=np.int8),
        value,
        np.asarray(cover, dtype=np.float64),
        None if cat_left is None else np.asarray(cat_left, dtype=np.uint32).reshape(n, -1),
        None if cat_left is None else np.asarray(cat_invalid_left, dtype=bool).reshape(n),
    )


def stack_trees(trees: list[Tree], base, n_features: int, source: str, **attributes) -> TreeEnsemble:
    """Pad trees to a common node count (padding nodes are unreachable leaves) and stack them.

    Args:
      trees: the trees, each as :func:`make_tree` builds it.
      base: ``[K]`` (or a scalar) constant added to the trees' sum.
      n_features: ``M``.
      source: a short description of the model, for messages.
      **attributes: the other fields of :class:`TreeEnsemble` (``precision``, ``output_transform``,
        ``loss``, ``tree_round``, ...).
    """
    if not trees:
        raise ValueError(f"The {source} model has no trees; fit it before explaining it.")
    n = max(t.feature.shape[0] for t in trees)
    k = max(t.value.shape[1] for t in trees)

    def pad(a, fill):
        width = [(0, n - a.shape[0])] + [(0, 0)] * (a.ndim - 1)
        return np.pad(a, width, constant_values=fill)

    for t in trees:
        if t.value.shape[1] != k:
            raise ValueError("Every tree must have the same number of outputs.")
    base = np.broadcast_to(np.asarray(base, dtype=np.float64).reshape(-1), (k,)).copy()
    cat_left = cat_invalid_left = None
    if any(t.cat_left is not None for t in trees):
        w = max(t.cat_left.shape[1] for t in trees if t.cat_left is not None)
        cat_left = np.zeros((len(trees), n, w), np.uint32)
        cat_invalid_left = np.zeros((len(trees), n), bool)
        for i, t in enumerate(trees):
            if t.cat_left is not None:
                m = t.cat_left.shape[0]
                # codes past a node's own words go where its invalid codes go
                cat_left[i, :m] = np.where(t.cat_invalid_left[:, None], np.uint32(0xFFFFFFFF), np.uint32(0))
                cat_left[i, :m, : t.cat_left.shape[1]] = t.cat_left
                cat_invalid_left[i, :m] = t.cat_invalid_left
    return TreeEnsemble(
        feature=np.stack([pad(t.feature, -1) for t in trees]),
        threshold=np.stack([pad(t.threshold, 0.0) for t in trees]),
        left=np.stack([pad(t.left, -1) for t in trees]),
        right=np.stack([pad(t.right, -1) for t in trees]),
        default_left=np.stack([pad(t.default_left, True) for t in trees]),
        missing=np.stack([pad(t.missing, 0) for t in trees]).astype(np.int8),
        value=np.stack([pad(t.value, 0.0) for t in trees]),
        cover=np.stack([pad(t.cover, 0.0) for t in trees]),
        base=base,
        n_features=int(n_features),
        source=source,
        cat_left=cat_left,
        cat_invalid_left=cat_invalid_left,
        **attributes,
    )


def one_hot_values(leaf_values: np.ndarray, k: int, n_outputs: int) -> np.ndarray:
    """Place a tree's scalar node values ``[N]`` in output column ``k`` of ``[N, n_outputs]``."""
    out = np.zeros((leaf_values.shape[0], n_outputs), dtype=np.float64)
    out[:, k] = leaf_values
    return out
