r"""Orders that a structure of the players restricts: binary hierarchies for Owen values
(clustering, exact Owen coefficients, consistent orders) and causal chains for asymmetric
Shapley values.

A binary hierarchy (a linkage matrix in SciPy's format: row ``t`` merges clusters ``Z[t, 0]``
and ``Z[t, 1]`` into cluster ``M + t``) restricts the orders in which players may arrive: every
cluster's members arrive together. The Owen value (Owen, 1977, "Values of games with a priori
unions") is the mean marginal contribution over those orders, each internal node choosing which
of its two children comes first with probability 1/2. For feature ``i`` with the sibling
clusters ``s_1, ..., s_d`` on its path from the root,

.. math::

    \phi_i = 2^{-d} \sum_{T \subseteq \{1..d\}}
             \bigl[v(\textstyle\bigcup_{k \in T} s_k \cup \{i\}) - v(\bigcup_{k \in T} s_k)\bigr],

since ``s_k`` precedes ``i`` exactly when node ``k`` puts the sibling first. This is what
``shap``'s explainers compute with a ``shap.maskers.Partition`` masker.

Asymmetric Shapley values (Frye, Rowat & Feige, 2020, "Asymmetric Shapley values: incorporating
causal knowledge into model-agnostic explainability") average marginal contributions only over
the orders consistent with a partial causal order: the players are split into components
:math:`\tau_1, \dots, \tau_K` and every player of :math:`\tau_k` comes after every player of
:math:`\tau_{<k} = \tau_1 \cup \dots \cup \tau_{k-1}`. Such an order is a uniform order of each
component, one after another, so a player :math:`i \in \tau_k` always finds all of
:math:`\tau_{<k}` before it and a uniformly ordered part of its own component: its value is its
Shapley value in the game :math:`w_k(T) = v(\tau_{<k} \cup T)` over the players of
:math:`\tau_k`,

.. math::

    \phi_i = \sum_{T \subseteq \tau_k \setminus \{i\}} \frac{|T|!\,(|\tau_k| - |T| - 1)!}{|\tau_k|!}
             \bigl[v(\tau_{<k} \cup T \cup \{i\}) - v(\tau_{<k} \cup T)\bigr],

which needs :math:`1 + \sum_k (2^{|\tau_k|} - 1)` coalitions instead of :math:`2^M`
(:func:`asymmetric_plan`). The values of component ``k`` sum to
:math:`v(\tau_{\le k}) - v(\tau_{<k})`, so all of them sum to :math:`v(N) - v(\emptyset)`
(efficiency).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._combinatorics import all_codes_bits, permutation_ranks, shapley_weights
from ._nested import winter_plan


LINKAGES = ("single", "complete", "average")


def correlation_distances(data: np.ndarray) -> np.ndarray:
    """``[M, M]`` correlation distances ``1 - corr(x_i, x_j)`` between the columns of ``data``.

    Columns are centred; a constant column has distance 1 to every other (no correlation).
    NaN is replaced by its column's mean first (as shap does).
    """
    x = np.array(data, np.float64)
    means = np.nanmean(x, axis=0)
    x = np.where(np.isnan(x), means, x) - np.where(np.isnan(means), 0.0, means)
    norms = np.sqrt((x * x).sum(axis=0))
    safe = np.where(norms > 0, norms, 1.0)
    corr = (x.T @ x) / np.outer(safe, safe)
    corr[norms == 0, :] = 0.0
    corr[:, norms == 0] = 0.0
    d = 1.0 - corr
    np.fill_diagonal(d, 0.0)
    return np.maximum(d, 0.0)


def linkage(distances: np.ndarray, method: str = "single") -> np.ndarray:
    """Agglomerative clustering of ``M`` items from a ``[M, M]`` distance matrix.

    The two closest clusters are merged, ``M - 1`` times; the distance from a merged cluster to
    another is the minimum (``"single"``), maximum (``"complete"``) or size-weighted mean
    (``"average"``, UPGMA) of its parts' distances (Lance & Williams, 1967). Ties go to the
    lowest-numbered pair.

    Returns:
      ``[M - 1, 4]`` linkage matrix in SciPy's format: merged cluster ids (smaller first), their
      distance, and the size of the new cluster.
    """
    if method not in LINKAGES:
        raise ValueError(f"`linkage` must be one of {LINKAGES}; got {method!r}.")
    d = np.array(distances, np.float64)
    m = d.shape[0]
    out = np.zeros((max(m - 1, 0), 4))
    ids = list(range(m))
    sizes = [1] * m
    active = np.ones(m, bool)
    np.fill_diagonal(d, np.inf)
    for t in range(m - 1):
        masked = np.where(active[:, None] & active[None, :], d, np.inf)
        a, b = np.unravel_index(np.argmin(masked), masked.shape)
        a, b = (a, b) if ids[a] < ids[b] else (b, a)
        dist = masked[a, b]
        na, nb = sizes[a], sizes[b]
        out[t] = (ids[a], ids[b], dist, na + nb)
        if method == "single":
            new = np.minimum(d[a], d[b])
        elif method == "complete":
            new = np.maximum(d[a], d[b])
        else:
            new = (na * d[a] + nb * d[b]) / (na + nb)
        d[a, :] = new
        d[:, a] = new
        d[a, a] = np.inf
        active[b] = False
        ids[a], sizes[a] = m + t, na + nb
    return out


def check_linkage(Z: np.ndarray, n_features: int) -> np.ndarray:
    """Validate a linkage matrix for ``n_features`` leaves.

    Raises:
      ValueError: for a wrong shape or ids that do not form one binary tree.
    """
    Z = np.asarray(Z, np.float64)
    if Z.shape != (n_features - 1, 4):
        raise ValueError(
            f"`clustering` must be a linkage matrix of shape [M - 1, 4] = [{n_features - 1}, 4] "
            f"(as scipy.cluster.hierarchy.linkage returns); got shape {Z.shape}."
        )
    children = Z[:, :2].astype(np.int64)
    seen = np.zeros(2 * n_features - 1, bool)
    for t, (a, b) in enumerate(children):
        if not (0 <= a < n_features + t and 0 <= b < n_features + t) or a == b or seen[a] or seen[b]:
            raise ValueError(
                f"`clustering` row {t} merges clusters {a} and {b}, which is not a valid binary tree step; "
                "pass a linkage matrix from scipy.cluster.hierarchy.linkage or shap.utils.hclust."
            )
        seen[a] = seen[b] = True
    return Z


def leaf_sets(Z: np.ndarray, n_features: int) -> list[np.ndarray]:
    """The leaves under every cluster id (``0..M-1`` leaves, ``M + t`` merged clusters)."""
    sets = [np.array([i]) for i in range(n_features)]
    for a, b in Z[:, :2].astype(np.int64):
        sets.append(np.concatenate([sets[a], sets[b]]))
    return sets


def leaf_paths(Z: np.ndarray, n_features: int) -> list[list[tuple[int, int, int]]]:
    """For every leaf, its path from the root: ``(node t, side 0/1, sibling cluster id)`` per level."""
    m = n_features
    paths: list[list[tuple[int, int, int]]] = [[] for _ in range(m)]
    if m == 1:
        return paths
    sets = leaf_sets(Z, m)
    for t in range(m - 2, -1, -1):  # the root (last row) first, so paths come out root-first
        a, b = (int(c) for c in Z[t, :2])
        for side, (here, sibling) in enumerate(((a, b), (b, a))):
            for leaf in sets[here]:
                paths[leaf].append((t, side, sibling))
    return paths


def linkage_hierarchy(Z: np.ndarray, n_features: int) -> tuple:
    """The binary hierarchy of a linkage matrix as nested pairs of feature positions (the
    hierarchies of :mod:`jaxshap._coalitions._nested`; a single feature is ``(0,)``)."""
    clusters: list = list(range(n_features))
    for a, b in Z[:, :2].astype(np.int64):
        clusters.append((clusters[a], clusters[b]))
    root = clusters[-1]
    return root if isinstance(root, tuple) else (root,)


def owen_plan(Z: np.ndarray, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """The coalitions exact Owen values need and their coefficients: the Winter plan
    (:func:`jaxshap._coalitions._nested.winter_plan`) of the binary hierarchy, where every node
    has two children and each sibling precedes with weight ``w(2, 0) = w(2, 1) = 1/2``.

    Returns:
      ``(masks [C, M] bool, coef [M, C])`` with ``phi = coef @ v(masks)``; the coalitions are
      distinct, the empty one is first and the full one last.
    """
    return winter_plan(linkage_hierarchy(Z, n_features))


def order_tables(Z: np.ndarray, n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrays to draw hierarchy-consistent orders as ranks (see :func:`consistent_ranks`).

    Returns:
      ``(node [M, D], side [M, D], size [M, D])``: per leaf and level, the internal node, the
      side of the leaf, and the size of the sibling cluster (0 past the end of a path).
    """
    m = n_features
    paths = leaf_paths(Z, m)
    depth = max(1, max(len(p) for p in paths))
    sets = leaf_sets(Z, m)
    node = np.zeros((m, depth), np.int32)
    side = np.zeros((m, depth), np.int32)
    size = np.zeros((m, depth), np.int32)
    for i, path in enumerate(paths):
        for k, (t, s, sibling) in enumerate(path):
            node[i, k], side[i, k], size[i, k] = t, s, sets[sibling].size
    return node, side, size


def consistent_ranks(flips, node, side, size):
    """Ranks ``[..., M]`` of the order in which every node with ``flips[t] = 1`` swaps its children.

    A leaf's rank is the total size of the sibling clusters that come before it on its path:
    the sibling comes first when the leaf is the right child (``side = 1``) of an unflipped node,
    or the left child of a flipped one. Flipping every node reverses the order.
    """
    import jax.numpy as jnp

    first = jnp.bitwise_xor(side, flips[..., node])  # [..., M, D]: sibling first
    return (first * size).sum(axis=-1)


def balanced_flips(key, n_orders: int, n_nodes: int):
    r"""``[n_orders, n_nodes]`` int32 flip bits, blocks of a randomly scrambled Hadamard design.

    Row ``r`` of a block flips node ``t`` when :math:`\langle r, c_t \rangle \oplus s_t = 1`
    (the parity of ``r & c_t``), for ``R`` rows ``r = 0..R-1`` (``R`` the smallest power of two
    above ``n_nodes``), distinct nonzero codes ``c_t`` and signs ``s_t`` drawn per block, and the
    rows in a random order. Each node flips in half of a block's rows and each pair of nodes in
    every combination equally often (an orthogonal array of strength 2; with every order's
    reverse also walked, strength 3). A feature's rank depends only on the bits of the nodes on
    its path, so every Walsh term of up to three of them averages out exactly: a walk's
    estimate of a feature at depth 3 or less is exact after a whole block, where independent
    fair bits (each order drawn alone) leave sampling noise in every term. A block cut short
    (``n_orders`` not a multiple of ``R``) is a random subset of its rows. Marginally each row
    is a uniform draw of the bits, so the estimate stays unbiased.
    """
    import jax
    import jax.numpy as jnp

    size = 1 << max(1, int(n_nodes).bit_length())
    blocks = -(-int(n_orders) // size)

    def block(k):
        k_rows, k_codes, k_signs = jax.random.split(k, 3)
        rows = jax.random.permutation(k_rows, size)
        codes = jax.random.permutation(k_codes, jnp.arange(1, size, dtype=jnp.int32))[:n_nodes]
        signs = jax.random.bernoulli(k_signs, 0.5, (n_nodes,)).astype(jnp.int32)
        parity = jax.lax.population_count(rows[:, None].astype(jnp.int32) & codes[None, :]) & 1
        return parity ^ signs

    flips = jax.vmap(block)(jax.random.split(key, blocks)).reshape(blocks * size, n_nodes)
    return flips[:n_orders]


Components = tuple[tuple[int, ...], ...]


def chain_coalition_count(components: Components) -> int:
    """Coalitions the exact asymmetric values need: ``1 + sum_k (2**|tau_k| - 1)``."""
    return 1 + sum(2 ** len(c) - 1 for c in components)


def asymmetric_plan(components: Components, n_players: int) -> tuple[np.ndarray, np.ndarray]:
    r"""``(masks [C, M], coef [M, C])`` with the exact asymmetric Shapley values ``coef @ v(masks)``.

    ``masks[0]`` is the empty coalition and ``masks[-1]`` the full one; component ``k``
    contributes the coalitions :math:`\tau_{<k} \cup T` for the non-empty :math:`T \subseteq
    \tau_k` (the empty ``T`` is the previous component's full one), in the order of their bit
    codes.

    Args:
      components: the chain components, a partition of ``range(n_players)``, first to last.
      n_players: ``M``.
    """
    masks = [np.zeros(n_players, bool)]
    coef_blocks = []
    before = np.zeros(n_players, bool)
    for comp in components:
        comp = np.asarray(comp, np.int64)
        n = comp.shape[0]
        bits = all_codes_bits(n)  # [2**n, n]
        block = np.repeat(before[None, :], 2**n, axis=0)
        block[:, comp] = bits
        start = len(masks) - 1  # row of T = empty: the last coalition so far
        rows = np.concatenate([[start], start + np.arange(1, 2**n)])
        masks.extend(block[1:])
        codes = np.arange(2**n)
        sizes = bits.sum(axis=1)
        weights = shapley_weights(n)
        coef_k = {}
        for p in range(n):
            without = codes[(codes >> p) & 1 == 0]
            w = weights[sizes[without]]
            coef_k[p] = (rows[without | (1 << p)], rows[without], w)
        coef_blocks.append((comp, coef_k))
        before = before.copy()
        before[comp] = True
    masks = np.stack(masks)
    coef = np.zeros((n_players, masks.shape[0]))
    for comp, coef_k in coef_blocks:
        for p, (plus, minus, w) in coef_k.items():
            np.add.at(coef[comp[p]], plus, w)
            np.add.at(coef[comp[p]], minus, -w)
    return masks, coef


def component_index(components: Components, n_players: int) -> np.ndarray:
    """``[M]`` int: the position of each player's component in the chain."""
    index = np.zeros(n_players, np.int32)
    for k, comp in enumerate(components):
        index[list(comp)] = k
    return index


def consistent_order_ranks(key: jax.Array, components: Components, n_players: int, n_orders: int) -> jax.Array:
    """Ranks ``[n_orders, M]`` of uniform orders consistent with the chain: the players of each
    component in a uniform order, components one after another (sorting by component, ties
    broken by uniform keys)."""
    index = jnp.asarray(component_index(components, n_players), jnp.float32)
    u = jax.random.uniform(key, (n_orders, n_players), jnp.float32, 0.0, 0.5)
    return permutation_ranks(jnp.argsort(index[None, :] + u, axis=1))


def reverse_within_components(ranks: jax.Array, components: Components, n_players: int) -> jax.Array:
    """The antithetic partner of consistent orders: each component's players reversed in place
    (the partner is again consistent, and as likely)."""
    index = component_index(components, n_players)
    sizes = np.array([len(c) for c in components], np.int32)
    offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    lo, n = jnp.asarray(offset[index]), jnp.asarray(sizes[index])
    return lo + (n - 1 - (ranks - lo))
