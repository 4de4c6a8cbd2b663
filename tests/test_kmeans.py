"""``jaxshap.kmeans``: shap's weighted background summary, and every explainer taking it.

Oracles: shap.kmeans (scikit-learn's KMeans) for the centres where the clusters are well
separated; the within-cluster sum of squares against scikit-learn's on ordinary data; and the
weighted interventional Shapley values written from the definition
``v_x(S) = sum_c w_c f(x_S, mu_c,-S)`` (the centres enumerated with their weights).
"""

import itertools
import math

import numpy as np
import pytest

import jaxshap

shap = pytest.importorskip("shap")


def _separated(seed=0, k=4, per=30, m=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=20.0, size=(k, m))
    sizes = per + np.arange(k) * 5  # unequal clusters: unequal weights
    X = np.concatenate([c + rng.normal(scale=0.1, size=(s, m)) for c, s in zip(centres, sizes)])
    return X[rng.permutation(X.shape[0])]


def _sorted(summary):
    order = np.lexsort(np.asarray(summary.data).T[::-1])
    return np.asarray(summary.data)[order], np.asarray(summary.weights)[order]


def test_centres_and_weights_are_shaps_on_separated_clusters():
    X = _separated()
    ours, ref = jaxshap.kmeans(X, 4), shap.kmeans(X, 4)
    c1, w1 = _sorted(ours)
    c2, w2 = _sorted(ref)
    np.testing.assert_array_equal(c1, c2)  # rounded to values of X: the same numbers exactly
    np.testing.assert_allclose(w1, w2, rtol=1e-12)
    assert w1.sum() == pytest.approx(1.0)


def test_within_cluster_sum_of_squares_as_scikit_learns():
    from sklearn.cluster import KMeans

    X = np.asarray(jaxshap.datasets.load_diabetes()[0], np.float64)
    ours = jaxshap.kmeans(X, 8, round_values=False)
    labels = ((X[:, None, :] - ours.data[None]) ** 2).sum(-1).argmin(1)
    inertia = ((X - ours.data[labels]) ** 2).sum()
    theirs = KMeans(n_clusters=8, random_state=0, n_init=10).fit(X).inertia_
    assert inertia <= theirs * 1.02, (inertia, theirs)
    np.testing.assert_allclose(ours.weights, np.bincount(labels, minlength=8) / X.shape[0])


def _weighted_oracle(f, x, centres, weights):
    """Interventional Shapley values over a weighted background, by enumerating coalitions."""
    m = x.shape[0]
    phi = np.zeros(m)

    def v(S):
        Z = centres.copy()
        Z[:, list(S)] = x[list(S)]
        return float(weights @ f(Z))

    for j in range(m):
        rest = [i for i in range(m) if i != j]
        for r in range(m):
            for S in itertools.combinations(rest, r):
                w = math.factorial(r) * math.factorial(m - r - 1) / math.factorial(m)
                phi[j] += w * (v(S + (j,)) - v(S))
    return phi


def test_every_explainer_takes_the_summary_with_its_weights():
    rng = np.random.default_rng(3)
    X = _separated(seed=3, m=4)
    summary = jaxshap.kmeans(X, 3)
    beta = rng.normal(size=4)
    f = lambda Z: np.tanh(np.asarray(Z) @ beta)  # noqa: E731
    rows = X[:3]
    want = np.stack([_weighted_oracle(f, x, summary.data, summary.weights) for x in rows])
    for make in (lambda: jaxshap.ExactExplainer(f, summary), lambda: jaxshap.KernelExplainer(f, summary),
                 lambda: jaxshap.Explainer(f, summary)):
        got = np.asarray(make()(rows).values)
        np.testing.assert_allclose(got, want, atol=1e-6 if got.dtype == np.float64 else 2e-5)
    lin = jaxshap.LinearExplainer((beta, 0.0), summary)  # the summary's weighted mean
    want = beta * (rows - summary.weights @ summary.data)
    np.testing.assert_allclose(np.asarray(lin(rows).values), want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_bad_k_and_values_name_the_argument():
    X = _separated()
    with pytest.raises(ValueError, match="`k`"):
        jaxshap.kmeans(X, 0)
    with pytest.raises(ValueError, match="`k`"):
        jaxshap.kmeans(X, X.shape[0] + 1)
    with pytest.raises(TypeError, match="`X` must hold real numbers"):
        jaxshap.kmeans(np.array([["a", "b"]] * 4), 2)
