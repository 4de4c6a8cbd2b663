r"""Nested coalition structures (multi-level, non-binary hierarchies) and exact Winter values.

A nested coalition structure groups the features into named groups, groups into larger groups,
and so on, with any number of children per node (shap's ``partition_tree``). Here it is held as
a *hierarchy*: a nested tuple whose leaves are feature positions and whose inner tuples are the
groups, the root being the outermost tuple (``((0, 1), (2, (3, 4)))``: two top-level groups,
the second holding feature 2 and the subgroup ``{3, 4}``).

The Winter value (Winter, 1989, "A value for cooperative games with levels structure of
cooperation"; the Owen value, Owen, 1977, applied level by level) is the mean marginal
contribution of a feature over the orders in which every group's members arrive together,
recursively, each node putting its children in a uniformly random order. Feature ``i`` with
ancestors ``a_1, ..., a_d = i`` below the root, where ``a_k`` is one of the ``n_k`` children of
its parent with siblings ``G_k``, arrives after the union of the siblings that precede ``a_k``
at every level, and those are independent uniform-order draws, so

.. math::

    \phi_i = \sum_{T_1 \subseteq G_1} \cdots \sum_{T_d \subseteq G_d}
             \prod_{k=1}^{d} w(n_k, |T_k|)\,\bigl[v(U_T \cup \{i\}) - v(U_T)\bigr],
    \qquad U_T = \bigcup_k \bigcup_{g \in T_k} g,

with the Shapley weight ``w(n, s) = s! (n - s - 1)! / n!``. It costs
``prod_k 2**(n_k - 1)`` coalition pairs per feature instead of ``2**(M - 1)``. One flat level of
single features gives the Shapley values; a binary hierarchy gives the Owen values of
:mod:`jaxshap._coalitions._hierarchy`.
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from ._combinatorics import all_codes_bits, shapley_weights, static_cache

Hierarchy = tuple
"""A nested tuple of feature positions (see the module docstring)."""

# --- reading shap's partition_tree ----------------------------------------------------------
def _preview(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def read_partition_tree(tree: Any, n_features: int, names: Sequence[str] | None = None,
                        argument: str = "partition_tree") -> Hierarchy:
    """The hierarchy of a nested dict of group names (shap's ``partition_tree``).

    A dict maps group names to a list of members, another dict, or (for a leaf written as
    ``{"x": "x"}``, as in shap's examples) the feature's own name or ``None``; a list holds
    feature names, nested lists (unnamed groups) and dicts, whose entries join the list's group
    (as shap reads them). A member is a feature name from ``names`` or a column position (an int).
    Every feature must appear exactly once.

    Args:
      tree: the nested dict (or a list at the top level).
      n_features: ``M``.
      names: the features' names (``None``: members must be positions).
      argument: the argument's name in error messages.

    Returns:
      The hierarchy: a nested tuple of feature positions (groups as tuples, in the order given).

    Raises:
      TypeError: for a ``tree`` that is not a dict or a list.
      ValueError: for an empty group, an unknown feature name or position, a feature that
        appears twice or not at all, or a leaf entry ``{key: value}`` whose ``value`` names
        another feature.
    """
    if not isinstance(tree, (dict, list, tuple)):
        raise TypeError(
            f"`{argument}` must be a nested dict of group names to lists of feature names (or to further dicts), "
            f"such as {{'Demographics': ['Age', 'Sex'], 'Financial': {{'Income': ['Salary', 'Bonus']}}}}; "
            f"got {type(tree).__name__}."
        )
    index = None if names is None else {str(n): j for j, n in enumerate(names)}
    seen: dict[int, str] = {}
    unknown: list[str] = []

    def leaf(item: Any) -> int | None:
        if isinstance(item, (bool, np.bool_)):
            raise ValueError(f"`{argument}` holds {item!r}; members are feature names or column positions.")
        if isinstance(item, numbers.Integral):
            j = int(item)
            if not 0 <= j < n_features:
                raise ValueError(f"`{argument}` holds column position {j}, outside 0..{n_features - 1}.")
            label = f"column {j}" if names is None else repr(str(names[j]))
        else:
            label = repr(str(item))
            if index is None:
                raise ValueError(
                    f"`{argument}` names feature {label}, but the features have no names: pass feature_names=, "
                    "background rows as a DataFrame, or column positions (ints) in the tree."
                )
            if str(item) not in index:
                unknown.append(str(item))
                return None
            j = index[str(item)]
        if j in seen:
            raise ValueError(f"`{argument}` holds feature {label} more than once; each feature "
                             "belongs to exactly one group.")
        seen[j] = label
        return j

    def entries(d: dict) -> list:
        out = []
        for key, value in d.items():
            if isinstance(value, (dict, list, tuple)):
                if len(value) == 0:
                    raise ValueError(f"`{argument}` group {key!r} is empty; give it members or leave it out.")
                out.append(members(value))
            elif value is None or (isinstance(value, str) and value == str(key)):
                out.append(leaf(key))
            else:
                raise ValueError(
                    f"`{argument}` entry {key!r}: {value!r} is neither a group (a list or dict) nor the leaf {key!r} "
                    f"itself; write {value!r}: {value!r} for a feature, or {key!r}: [{value!r}] for a group of one."
                )
        return out

    def members(node: Any) -> tuple:
        if isinstance(node, dict):
            return tuple(entries(node))
        out: list = []
        for item in node:
            if isinstance(item, dict):
                out.extend(entries(item))  # a dict inside a list: its entries join the list's group (as shap)
            elif isinstance(item, (list, tuple)):
                if len(item) == 0:
                    raise ValueError(f"`{argument}` holds an empty group; give it members or leave it out.")
                out.append(members(item))
            else:
                out.append(leaf(item))
        return tuple(out)

    if len(tree) == 0:
        raise ValueError(f"`{argument}` is empty; it must hold every feature.")
    hierarchy = members(tree)
    _check_complete(argument, n_features, names, seen, unknown)
    return hierarchy


def _check_complete(argument: str, n_features: int, names: Sequence[str] | None, seen: dict, unknown: list) -> None:
    """Raise for the tree's ``unknown`` feature names, then for the features it left out (not ``seen``)."""
    if unknown:
        known = [str(n) for n in names]
        raise ValueError(f"`{argument}` names features that are not among the {n_features} features: "
                         f"{_preview(unknown)}. The features are {_preview(known)}.")
    missing = [j for j in range(n_features) if j not in seen]
    if missing:
        labels = [f"column {j}" if names is None else str(names[j]) for j in missing]
        raise ValueError(f"`{argument}` leaves out {len(missing)} of the {n_features} features: {_preview(labels)}. "
                         "Every feature must be a leaf of the tree (a group of its own is fine).")


def check_hierarchy(hierarchy: Any, argument: str = "hierarchy") -> tuple[Hierarchy, int]:
    """A hierarchy given as nested sequences of feature positions, as nested tuples, and ``M``.

    Raises:
      ValueError: unless the leaves are the positions ``0..M-1``, each once, and no group is empty.
    """
    def count(node: Any) -> int:
        if isinstance(node, (list, tuple)):
            return sum(count(c) for c in node)
        return 1

    if not isinstance(hierarchy, (list, tuple)):
        raise TypeError(f"`{argument}` must be nested lists of feature positions, such as [[0, 1], [2, [3, 4]]]; "
                        f"got {type(hierarchy).__name__}.")
    m = count(hierarchy)
    return read_partition_tree(hierarchy, m, None, argument), m


# --- the exact Winter plan ------------------------------------------------------------------
def leaf_paths(hierarchy: Hierarchy) -> list[list[list[Hierarchy | int]]]:
    """For every feature (by position), the siblings of its ancestors, root level first."""
    paths: dict[int, list] = {}

    def walk(children: tuple, above: list) -> None:
        for k, child in enumerate(children):
            level = above + [list(children[:k] + children[k + 1:])]
            if isinstance(child, tuple):
                walk(child, level)
            else:
                paths[child] = level

    walk(hierarchy, [])
    return [paths[j] for j in range(len(paths))]


def _leaves(node: Any) -> list[int]:
    return [j for c in node for j in _leaves(c)] if isinstance(node, tuple) else [node]


def _code(leaves: Sequence[int], words: int) -> np.ndarray:
    """The bit code ``[words]`` (``uint64``) of a set of features: bit ``j % 64`` of word ``j // 64``."""
    code = np.zeros(words, np.uint64)
    for j in leaves:
        code[j // 64] |= np.uint64(1) << np.uint64(j % 64)
    return code


def _unions(parts: np.ndarray) -> np.ndarray:
    """``[2**n, words]``: the unions of every subset of ``n`` disjoint sets coded ``parts [n, words]``
    (subset ``t`` holds part ``k`` when bit ``k`` of ``t`` is set; disjoint bits: the sum is the union)."""
    out = np.zeros((1, parts.shape[1]), np.uint64)
    for part in parts:  # doubling: the subsets without part k, then with it
        out = np.concatenate([out, out + part])
    return out


def _weights(n: int) -> np.ndarray:
    """``[2**(n - 1)]``: the Shapley weight ``w(n, |T|)`` of each subset ``T`` of a child's ``n - 1``
    siblings (subset ``t`` holds sibling ``k`` when bit ``k`` of ``t`` is set, as in :func:`_unions`)."""
    return shapley_weights(n)[all_codes_bits(n - 1).sum(axis=1)]


def coalition_count(hierarchy: Hierarchy) -> int:
    """Distinct coalitions exact Winter values evaluate: ``2**n + sum_k 2**(n - 1) (c_k - 2)`` over a
    node's ``n`` children ``c_k``, 2 for a feature (the empty and the full coalition included)."""
    if not isinstance(hierarchy, tuple):
        return 2
    n = len(hierarchy)
    return 2**n + sum(2 ** (n - 1) * (coalition_count(c) - 2) for c in hierarchy)


def _needed(node: Any, words: int) -> np.ndarray:
    """``[c, words]``: the distinct coalitions inside ``node`` that the Winter values of its
    features need (the empty one and ``node`` itself included). Unions of whole children, and for
    each child ``k``, its own coalitions other than empty and whole joined with every union of the
    other children; the child left partly in tells these apart, so none is repeated."""
    if not isinstance(node, tuple):
        return np.stack([np.zeros(words, np.uint64), _code([node], words)])
    parts = np.stack([_code(_leaves(c), words) for c in node])
    out = [_unions(parts)]
    for k, child in enumerate(node):
        inner = _needed(child, words)[1:-1]  # sorted: empty first, whole last (see _sorted)
        others = _unions(np.delete(parts, k, axis=0))
        out.append((others[:, None, :] + inner[None, :, :]).reshape(-1, words))
    return _sorted(np.concatenate(out))


def _keys(codes: np.ndarray) -> np.ndarray:
    """Sortable keys of codes ``[c, words]``: the ``uint64`` itself for one word, else the bytes."""
    if codes.shape[1] == 1:
        return codes[:, 0]
    return np.ascontiguousarray(codes).view(np.dtype((np.void, 8 * codes.shape[1]))).ravel()


def _sorted(codes: np.ndarray) -> np.ndarray:
    """Codes in the order of their keys: the empty coalition (all zero) first and the whole
    (every bit of its features set, so no other key is larger) last."""
    return codes[np.argsort(_keys(codes), kind="stable")]


def feature_terms(path: list, words: int) -> tuple[np.ndarray, np.ndarray]:
    """``(codes [P, words], weights [P])``: the coalitions ``U_T`` (without the feature) over every
    choice ``T`` of preceding siblings along ``path``, and their weights ``prod_k w(n_k, |T_k|)``."""
    codes = np.zeros((1, words), np.uint64)
    weights = np.ones(1)
    for siblings in path:
        if not siblings:  # an only child: w(1, 0) = 1, nothing precedes it
            continue
        level = _unions(np.stack([_code(_leaves(s), words) for s in siblings]))
        codes = (codes[:, None, :] + level[None, :, :]).reshape(-1, words)
        weights = (weights[:, None] * _weights(len(siblings) + 1)[None, :]).reshape(-1)
    return codes, weights


@static_cache(32)
def winter_plan(hierarchy: Hierarchy) -> tuple[np.ndarray, np.ndarray]:
    """The coalitions exact Winter values need and their coefficients.

    Args:
      hierarchy: nested tuples of feature positions ``0..M-1`` (see :func:`read_partition_tree`).

    Returns:
      ``(masks [C, M] bool, coef [M, C] float64)`` with ``phi = coef @ v(masks)``; the coalitions
      are distinct (:func:`coalition_count` of them), the empty one first and the full one last;
      every row of ``coef`` sums to 0. Building it costs time and memory in ``C`` (about 3 s for
      ``2**20`` coalitions); check :func:`coalition_count` first.
    """
    c = coalition_count(hierarchy)
    paths = leaf_paths(hierarchy)
    m = len(paths)
    words = -(-m // 64)
    codes = _needed(hierarchy, words)
    keys = _keys(codes)
    coef = np.zeros((m, c))
    for i, path in enumerate(paths):
        off, weights = feature_terms(path, words)
        on = off + _code([i], words)[None, :]
        coef[i] += np.bincount(np.searchsorted(keys, _keys(on)), weights, minlength=c)
        coef[i] -= np.bincount(np.searchsorted(keys, _keys(off)), weights, minlength=c)
    little = codes.astype("<u8", copy=False).view(np.uint8)  # [C, 8 words]: bit j of byte j // 8
    return np.unpackbits(little, axis=1, count=m, bitorder="little").astype(bool), coef
