r"""Hierarchies of features for Owen values: clustering, exact Owen coefficients, consistent orders.

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
"""

from __future__ import annotations

import numpy as np

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
