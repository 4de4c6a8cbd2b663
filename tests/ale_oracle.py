"""A brute-force oracle of accumulated local effects, written from Apley & Zhu (2020).

It shares no code with the implementation: explicit loops over rows, bins and cells, the
quantiles from the definition of the inverse empirical distribution function, and the category
distances from their definitions. ``f`` is a NumPy model of float64 rows ``[n, M] -> [n]``.
"""

import numpy as np


def oracle_edges(x, n_bins):
    """R type-1 quantiles at k / n_bins: the smallest order statistic x_(i) with i / n >= p."""
    xs = sorted(float(v) for v in x)
    n = len(xs)
    edges = []
    for k in range(n_bins + 1):
        i = max(1, -(-n * k // n_bins))  # ceil(n * k / n_bins), at least the first
        edges.append(xs[i - 1])
    return sorted(set(edges))


def oracle_bin(v, edges):
    """1-based bin of v: (z_{k-1}, z_k], the first bin closed below."""
    for k in range(1, len(edges)):
        if v <= edges[k]:
            return k
    raise AssertionError("value above the last edge")


def moved(X, cols, vals):
    Z = np.array(X, dtype=np.float64, copy=True)
    for c, v in zip(cols, vals):
        Z[..., c] = v
    return Z


def oracle_first(f, X, j, n_bins):
    edges = oracle_edges(X[:, j], n_bins)
    nb = len(edges) - 1
    rows_bin = [oracle_bin(X[i, j], edges) for i in range(X.shape[0])]
    # every row moved to its bin's upper and lower edge, evaluated in one call of f
    hi, lo = np.split(f(np.concatenate([np.stack([moved(X[i], [j], [edges[k]]) for i, k in enumerate(rows_bin)]),
                                        np.stack([moved(X[i], [j], [edges[k - 1]]) for i, k in enumerate(rows_bin)])])), 2)
    sums, counts = [0.0] * nb, [0] * nb
    for i, k in enumerate(rows_bin):
        sums[k - 1] = sums[k - 1] + (hi[i] - lo[i])
        counts[k - 1] += 1
    g = [0.0 * sums[0]]
    for k in range(nb):
        g.append(g[-1] + sums[k] / counts[k])
    centre = sum(g[k] for k in rows_bin) / len(rows_bin)
    return np.array(edges), np.array([v - centre for v in g])


def ks(a, b, points):
    return max(abs(np.mean(a <= t) - np.mean(b <= t)) for t in points)


def tv(a, b):
    levels = set(a.tolist()) | set(b.tolist())
    return 0.5 * sum(abs(np.mean(a == v) - np.mean(b == v)) for v in levels)


def oracle_order(X, j, categorical):
    codes = sorted(set(X[:, j].tolist()))
    K = len(codes)
    if K <= 2:
        return codes
    D = np.zeros((K, K))
    for m in range(X.shape[1]):
        if m == j:
            continue
        for a in range(K):
            for b in range(K):
                xa, xb = X[X[:, j] == codes[a], m], X[X[:, j] == codes[b], m]
                D[a, b] += tv(xa, xb) if m in categorical else ks(xa, xb, np.unique(X[:, m]))
    C = np.eye(K) - np.ones((K, K)) / K
    w, v = np.linalg.eigh(-0.5 * C @ (D**2) @ C)
    coord = v[:, np.argmax(w)]
    order = sorted(range(K), key=lambda a: (round(coord[a] / np.abs(coord).max(), 9), codes[a]))
    if codes[order[0]] > codes[order[-1]]:
        order = sorted(range(K), key=lambda a: (round(-coord[a] / np.abs(coord).max(), 9), codes[a]))
    return [codes[a] for a in order]


def oracle_categorical(f, X, j, categorical):
    order = oracle_order(X, j, categorical)
    K = len(order)
    pos = {c: p for p, c in enumerate(order)}
    # every row moved to each category, evaluated in one call of f: at[i, c] = f(x_i with x_j = order[c])
    at = f(np.stack([moved(X[i], [j], [c]) for i in range(X.shape[0]) for c in order]))
    at = at.reshape((X.shape[0], K) + at.shape[1:])
    steps = []
    for s in range(K - 1):
        total, count = 0.0, 0
        for i in range(X.shape[0]):
            if pos[X[i, j]] in (s, s + 1):
                total = total + at[i, s + 1] - at[i, s]
                count += 1
        steps.append(total / count)
    g = [0.0 * steps[0]]
    for s in steps:
        g.append(g[-1] + s)
    centre = sum(g[pos[X[i, j]]] for i in range(X.shape[0])) / X.shape[0]
    return order, np.array([v - centre for v in g])


def oracle_pair(f, X, j, k, n_bins):
    ez, ew = oracle_edges(X[:, j], n_bins), oracle_edges(X[:, k], n_bins)
    nz, nw = len(ez) - 1, len(ew) - 1
    sums = {}
    cell = [(oracle_bin(X[i, j], ez), oracle_bin(X[i, k], ew)) for i in range(X.shape[0])]
    # every row moved to its cell's four corners, evaluated in one call of f
    corners = [(1, 1), (0, 1), (1, 0), (0, 0)]  # (upper z?, upper w?)
    at = f(np.stack([moved(X[i], [j, k], [ez[a - 1 + u], ew[b - 1 + v]]) for i, (a, b) in enumerate(cell) for u, v in corners]))
    at = at.reshape((X.shape[0], 4) + at.shape[1:])
    for i, (a, b) in enumerate(cell):
        d = at[i, 0] - at[i, 1] - at[i, 2] + at[i, 3]
        sums.setdefault((a, b), []).append(d)
    mean, n = {}, {}
    for a in range(1, nz + 1):
        for b in range(1, nw + 1):
            n[a, b] = len(sums.get((a, b), []))
            if n[a, b]:
                mean[a, b] = sum(sums[a, b]) / n[a, b]
    rz, rw = ez[-1] - ez[0], ew[-1] - ew[0]
    mid = lambda a, b: ((ez[a - 1] + ez[a]) / 2 / rz, (ew[b - 1] + ew[b]) / 2 / rw)
    full = sorted(mean)  # row-major
    for a in range(1, nz + 1):
        for b in range(1, nw + 1):
            if not n[a, b]:
                best = min(full, key=lambda c: (mid(a, b)[0] - mid(*c)[0]) ** 2 + (mid(a, b)[1] - mid(*c)[1]) ** 2)
                mean[a, b] = mean[best]
    zero = 0.0 * mean[1, 1]
    h = {(a, b): zero for a in range(nz + 1) for b in range(nw + 1)}
    for a in range(1, nz + 1):
        for b in range(1, nw + 1):
            h[a, b] = sum(mean[p, q] for p in range(1, a + 1) for q in range(1, b + 1))
    main_z, main_w = [zero], [zero]
    for a in range(1, nz + 1):
        step = sum(n[a, m] * (h[a, m] - h[a - 1, m]) for m in range(1, nw + 1)) / sum(n[a, m] for m in range(1, nw + 1))
        main_z.append(main_z[-1] + step)
    for b in range(1, nw + 1):
        step = sum(n[m, b] * (h[m, b] - h[m, b - 1]) for m in range(1, nz + 1)) / sum(n[m, b] for m in range(1, nz + 1))
        main_w.append(main_w[-1] + step)
    g = {(a, b): h[a, b] - main_z[a] - main_w[b] for (a, b) in h}
    centre = sum(g[c] for c in cell) / len(cell)
    return np.array(ez), np.array(ew), np.array([[g[a, b] - centre for b in range(nw + 1)] for a in range(nz + 1)])


# --- the bootstrap, written out -----------------------------------------------------------------
#
# Each function resamples the n rows with replacement B times (NumPy's integers), keeps the bins,
# category order and grid of the full sample, and recomputes the estimate from each row's
# differences (computed once: a resample reuses them). A bin, step or cell that a resample leaves
# empty takes the full sample's mean (and a pair's bin row or column the full sample's step).


def oracle_replicates_first(f, X, j, n_bins, B, rng):
    """[B, n_bins + 1] replicate values of a numeric feature's first-order ALE."""
    edges = np.array(oracle_edges(X[:, j], n_bins))
    k = np.array([oracle_bin(v, edges) for v in X[:, j]])  # 1-based
    d = f(moved(X, [j], [edges[k]])) - f(moved(X, [j], [edges[k - 1]]))
    nb = edges.size - 1
    full = np.array([d[k == b].mean() for b in range(1, nb + 1)])
    out = []
    for _ in range(B):
        rows = rng.integers(0, X.shape[0], size=X.shape[0])
        steps = np.array([d[rows][k[rows] == b].mean() if np.any(k[rows] == b) else full[b - 1] for b in range(1, nb + 1)])
        g = np.concatenate([[0.0], np.cumsum(steps)])
        out.append(g - g[k[rows]].mean())
    return np.array(out)


def oracle_replicates_categorical(f, X, j, categorical, B, rng):
    """[B, C] replicate values of a categorical feature's ALE (order held fixed)."""
    order = oracle_order(X, j, categorical)
    pos = np.array([order.index(v) for v in X[:, j]])
    C = len(order)
    here = f(moved(X, [], []))
    # each row moved to the next and to the previous category, evaluated in one call of f each
    f_up = f(np.stack([moved(X[i], [j], [order[min(p + 1, C - 1)]]) for i, p in enumerate(pos)]))
    f_down = f(np.stack([moved(X[i], [j], [order[max(p - 1, 0)]]) for i, p in enumerate(pos)]))
    up = np.array([f_up[i] - here[i] if p < C - 1 else np.nan for i, p in enumerate(pos)])
    down = np.array([here[i] - f_down[i] if p > 0 else np.nan for i, p in enumerate(pos)])

    def steps(rows, full=None):
        out = []
        for s in range(C - 1):
            both = np.concatenate([up[rows][pos[rows] == s], down[rows][pos[rows] == s + 1]])
            out.append(both.mean() if both.size else full[s])
        return np.array(out)

    full = steps(np.arange(X.shape[0]))
    reps = []
    for _ in range(B):
        rows = rng.integers(0, X.shape[0], size=X.shape[0])
        g = np.concatenate([[0.0], np.cumsum(steps(rows, full))])
        reps.append(g - g[pos[rows]].mean())
    return np.array(reps)


def oracle_replicates_pair(f, X, j, k, n_bins, B, rng):
    """[B, n_j + 1, n_k + 1] replicate values of a pair's second-order ALE."""
    ez, ew = np.array(oracle_edges(X[:, j], n_bins)), np.array(oracle_edges(X[:, k], n_bins))
    a = np.array([oracle_bin(v, ez) for v in X[:, j]])
    b = np.array([oracle_bin(v, ew) for v in X[:, k]])
    ev = lambda u, w: f(moved(X, [j, k], [u, w]))
    d = ev(ez[a], ew[b]) - ev(ez[a - 1], ew[b]) - ev(ez[a], ew[b - 1]) + ev(ez[a - 1], ew[b - 1])
    nz, nw = ez.size - 1, ew.size - 1
    # the full sample's cell means, empty cells filled from the nearest non-empty cell (as oracle_pair)
    _, _, full_values = oracle_pair(f, X, j, k, n_bins)
    n_full = np.array([[np.sum((a == p) & (b == q)) for q in range(1, nw + 1)] for p in range(1, nz + 1)])
    mean_full = np.zeros((nz, nw))
    rz, rw = ez[-1] - ez[0], ew[-1] - ew[0]
    mid = lambda p, q: ((ez[p] + ez[p + 1]) / 2 / rz, (ew[q] + ew[q + 1]) / 2 / rw)
    filled = [(p, q) for p in range(nz) for q in range(nw) if n_full[p, q]]
    for p in range(nz):
        for q in range(nw):
            src = (p, q) if n_full[p, q] else min(filled, key=lambda c: (mid(p, q)[0] - mid(*c)[0]) ** 2 + (mid(p, q)[1] - mid(*c)[1]) ** 2)
            mean_full[p, q] = d[(a == src[0] + 1) & (b == src[1] + 1)].mean()

    def estimate(rows, full_steps=None):
        n = np.array([[np.sum((a[rows] == p) & (b[rows] == q)) for q in range(1, nw + 1)] for p in range(1, nz + 1)])
        s = np.array([[d[rows][(a[rows] == p) & (b[rows] == q)].sum() for q in range(1, nw + 1)] for p in range(1, nz + 1)])
        mean = np.where(n > 0, s / np.maximum(n, 1), mean_full)
        h = np.zeros((nz + 1, nw + 1))
        h[1:, 1:] = np.cumsum(np.cumsum(mean, 0), 1)
        nj, nk = n.sum(1), n.sum(0)
        sj = np.array([np.sum(n[p] * (h[p + 1, 1:] - h[p, 1:])) / nj[p] if nj[p] else full_steps[0][p] for p in range(nz)])
        sk = np.array([np.sum(n[:, q] * (h[1:, q + 1] - h[1:, q])) / nk[q] if nk[q] else full_steps[1][q] for q in range(nw)])
        g = h - np.concatenate([[0.0], np.cumsum(sj)])[:, None] - np.concatenate([[0.0], np.cumsum(sk)])[None, :]
        return g - g[a[rows], b[rows]].mean(), (sj, sk)

    values, full_steps = estimate(np.arange(X.shape[0]))
    np.testing.assert_allclose(values, full_values, atol=1e-9)  # the written-out estimate is oracle_pair's
    return np.array([estimate(rng.integers(0, X.shape[0], size=X.shape[0]), full_steps)[0] for _ in range(B)])
