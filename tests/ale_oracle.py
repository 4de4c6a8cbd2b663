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
    sums, counts = [0.0] * nb, [0] * nb
    rows_bin = []
    for i in range(X.shape[0]):
        k = oracle_bin(X[i, j], edges)
        rows_bin.append(k)
        hi = f(moved(X[i], [j], [edges[k]])[None])[0]
        lo = f(moved(X[i], [j], [edges[k - 1]])[None])[0]
        sums[k - 1] = sums[k - 1] + (hi - lo)
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
    steps = []
    for s in range(K - 1):
        total, count = 0.0, 0
        for i in range(X.shape[0]):
            if pos[X[i, j]] in (s, s + 1):
                total = total + f(moved(X[i], [j], [order[s + 1]])[None])[0] - f(moved(X[i], [j], [order[s]])[None])[0]
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
    cell = []
    for i in range(X.shape[0]):
        a, b = oracle_bin(X[i, j], ez), oracle_bin(X[i, k], ew)
        cell.append((a, b))
        ev = lambda u, v: f(moved(X[i], [j, k], [u, v])[None])[0]
        d = ev(ez[a], ew[b]) - ev(ez[a - 1], ew[b]) - ev(ez[a], ew[b - 1]) + ev(ez[a - 1], ew[b - 1])
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
