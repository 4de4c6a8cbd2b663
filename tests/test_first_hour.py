"""What a shap user meets in the first hour: a reloaded explainer computes as the original, a NaN
in X gives one clear error and nothing else, and a progress bar where shap shows one."""

import io
import pickle
import sys

import numpy as np
import pytest

import jaxshap
from jaxshap._core import _chunking as _progress


def host_model(Z):
    """A NumPy model (module level, so explainers on it pickle)."""
    Z = np.asarray(Z)
    return np.sin(Z[:, 0]) * Z[:, 1] + Z[:, 2] ** 2 / 3.0


def raising_on_nan(Z):
    Z = np.asarray(Z)
    if np.isnan(Z).any():
        raise ValueError("Input contains NaN.")
    return Z.sum(1)


RNG = np.random.default_rng(8)
BG = RNG.normal(size=(10, 3))  # float64: a host model computes in float64, as shap's
X = RNG.normal(size=(4, 3))


@pytest.mark.parametrize("make", [
    lambda: jaxshap.ExactExplainer(host_model, BG),
    lambda: jaxshap.KernelExplainer(host_model, BG),
    lambda: jaxshap.PermutationExplainer(host_model, BG, n_permutations=6),
], ids=["exact", "kernel", "permutation"])
def test_a_reloaded_float64_explainer_computes_exactly_as_the_original(make, tmp_path):
    ex = make()
    before = ex(X)
    assert np.asarray(before.values).dtype == np.float64
    for again in (pickle.loads(pickle.dumps(ex)), _saved_and_loaded(ex, tmp_path)):
        after = again(X)
        assert np.asarray(after.values).dtype == np.float64
        np.testing.assert_array_equal(np.asarray(after.values), np.asarray(before.values))
        np.testing.assert_array_equal(np.asarray(after.base_values), np.asarray(before.base_values))


def _saved_and_loaded(ex, tmp_path):
    path = tmp_path / "explainer.pkl"
    ex.save(path)
    return jaxshap.Explainer.load(path)


def test_nan_in_X_raises_one_error_before_the_model_runs_and_prints_nothing(capfd):
    ex = jaxshap.ExactExplainer(raising_on_nan, BG)
    Xn = X.copy()
    Xn[2, 1] = np.nan
    capfd.readouterr()
    with pytest.raises(ValueError, match=r"`X` holds NaN or inf in 1 row\(s\) \(rows 2; first at index \(2, 1\)\) "
                                         r"and the model raised ValueError \(Input contains NaN.\)"):
        ex(Xn)
    out, err = capfd.readouterr()
    assert out == "" and err == "", err


def test_progress_bar_is_tqdms_where_shap_shows_one(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal: piped output, a notebook
    assert not _progress.wants_progress(None, evals=10)  # a short run: no bar
    assert _progress.wants_progress(None, evals=_progress.LONG_RUN_EVALS)  # a long one: a bar, as shap's
    assert _progress.wants_progress(True) and not _progress.wants_progress(False)
    bar = _progress.ProgressBar(10, delay=0.0)
    bar.update(4)
    bar.update(6)
    bar.close()
    assert bar._tqdm is not None  # tqdm's bar, on the default stream
    shown = sys.stderr.getvalue()
    assert "10/10" in shown, shown
    with pytest.raises(TypeError, match="`progress`"):
        _progress.wants_progress("yes")


def test_text_bar_on_a_given_stream():
    stream = io.StringIO()
    bar = _progress.ProgressBar(8, stream=stream, delay=0.0, interval=0.0)
    bar.update(8)
    bar.close()
    assert bar._tqdm is None and "8/8 rows" in stream.getvalue()


def test_links_as_shaps():
    shap = pytest.importorskip("shap")
    p = np.array([0.1, 0.5, 0.93])
    np.testing.assert_allclose(np.asarray(jaxshap.links.logit(p)), shap.links.logit(p), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jaxshap.links.logit.inverse(jaxshap.links.logit(p))), p, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(jaxshap.links.identity(p)), shap.links.identity(p))
    f = lambda Z: 1.0 / (1.0 + np.exp(-np.asarray(Z).sum(1)))  # noqa: E731
    ours = jaxshap.ExactExplainer(f, BG, link=jaxshap.links.logit)(X)
    np.testing.assert_allclose(np.asarray(ours.values), [_logit_oracle(f, x) for x in X], atol=1e-6)  # logit clips p


def _logit_oracle(f, x):
    """Shapley values of v(S) = logit(mean_b f(x_S, b_-S)), by enumeration."""
    import itertools
    import math

    m = x.shape[0]

    def v(S):
        Z = BG.copy()
        Z[:, list(S)] = x[list(S)]
        p = f(Z).mean()
        return np.log(p / (1 - p))

    phi = np.zeros(m)
    for j in range(m):
        rest = [i for i in range(m) if i != j]
        for r in range(m):
            for S in itertools.combinations(rest, r):
                phi[j] += math.factorial(r) * math.factorial(m - r - 1) / math.factorial(m) * (v(S + (j,)) - v(S))
    return phi


def test_a_float64_explainers_masker_builds_a_float64_explainer():
    """An explainer built on another's masker (shap's ``explainer.masker`` idiom) computes in the
    same precision: a float64 background stays float64, with a link too."""
    f = lambda Z: 1.0 / (1.0 + np.exp(-np.asarray(Z).sum(1)))  # noqa: E731
    first = jaxshap.ExactExplainer(f, BG)
    second = jaxshap.ExactExplainer(f, first.masker, link="logit")
    got = second(X)
    assert np.asarray(got.values).dtype == np.float64
    np.testing.assert_allclose(np.asarray(got.values), [_logit_oracle(f, x) for x in X], atol=1e-6)
