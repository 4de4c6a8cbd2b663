"""The bootstrap of accumulated local effects, from the groups' moments, against a bootstrap of the rows.

The law: over many replicates, the replicate values' means and standard deviations must agree with
NumPy's resampling of the rows (``tests/ale_oracle.py``) within sampling error. The premises the
moment-matched draw rests on are checked one by one: given the counts, a replicate is affine in
the groups' sums (numeric, pair with empty cells, categorical), and each group's draw has its
rows' population covariance.
"""

import jax
import numpy as np
import pytest

from ale_oracle import oracle_replicates_categorical, oracle_replicates_first, oracle_replicates_pair
from jaxshap._core._device_rows import device_rows
from jaxshap._core._model import wrap_model
from jaxshap._core._validate import DEFAULT_MEMORY_BUDGET
from jaxshap._effects import _ale, _ale_moments as moments_module
from jaxshap._effects._ale_program import Layout, effects

RNG = np.random.default_rng(0)
W1 = RNG.normal(size=(4, 8))
W2 = RNG.normal(size=8)


def mlp_np(x):
    return np.tanh(np.asarray(x, np.float64) @ W1) @ W2


def mlp_jax(x):
    return jax.numpy.tanh(x @ W1.astype(np.float32)) @ W2.astype(np.float32)


def data(n, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 1] = 0.7 * X[:, 0] + 0.5 * X[:, 1]  # dependent: a pair's grid has empty cells
    X[:, 2] = rng.integers(0, 4, size=n) + (X[:, 0] > 0.5)  # categorical codes 0..4
    return X.astype(np.float32)


def grouped(X, item, n_bins, n_boot, categorical=frozenset()):
    """The grouped differences, layout and full-sample fallback, through the functions the public call uses."""
    wrapped = wrap_model(mlp_jax, X.shape[1], X.dtype, X[:2])
    names = [f"x{j}" for j in range(X.shape[1])]
    diff = _ale.differences(wrapped, X, lambda: device_rows(X), item, n_bins, categorical, names,
                            DEFAULT_MEMORY_BUDGET)
    layout = Layout(diff.kind, diff.shape, n_boot)
    _, fallback = effects(diff.moments.counts.astype(np.float64), diff.moments.sums, diff.plan, layout)
    return diff, layout, fallback


def replicates(X, item, n_bins, n_boot, seed, categorical=frozenset()):
    """Our replicate values ``[B, *shape]`` (single output)."""
    diff, layout, fallback = grouped(X, item, n_bins, n_boot, categorical)
    args = (diff.moments, fallback, diff.plan, layout, jax.random.key(seed))
    return moments_module.replicates(*args)[..., 0]


def agree(ours, theirs):
    """Means within 5 standard errors; standard deviations within 6 standard errors of their ratio."""
    B = ours.shape[0]
    m1, m2, s1, s2 = ours.mean(0), theirs.mean(0), ours.std(0, ddof=1), theirs.std(0, ddof=1)
    spread = s2 > 1e-6 * np.abs(theirs).max()
    assert spread.sum() >= 3  # the comparison is about something
    np.testing.assert_array_less(np.abs(m1 - m2), 5 * np.sqrt((s1**2 + s2**2) / B) + 1e-7)
    np.testing.assert_array_less(np.abs(np.log(s1[spread] / s2[spread])), 6 / np.sqrt(B))


CASES = {"numeric": ((0,), 6, frozenset()), "pair": ((0, 1), 4, frozenset()), "categorical": ((2,), 20, frozenset({2}))}


@pytest.mark.parametrize("kind", list(CASES))
def test_replicates_have_the_law_of_resampled_rows(kind):
    B = 2000
    X = data(240)
    item, n_bins, categorical = CASES[kind]
    ours = replicates(X, item, n_bins, B, seed=3, categorical=categorical)
    rng = np.random.default_rng(4)
    if kind == "numeric":
        theirs = oracle_replicates_first(mlp_np, X, 0, n_bins, B, rng)
    elif kind == "pair":
        theirs = oracle_replicates_pair(mlp_np, X, 0, 1, n_bins, B, rng)
    else:
        theirs = oracle_replicates_categorical(mlp_np, X, 2, {2}, B, rng)
    assert ours.shape == theirs.shape
    agree(ours, theirs)


@pytest.mark.parametrize("kind", list(CASES))
def test_a_replicate_is_affine_in_the_sums_given_the_counts(kind):
    """What makes the normal draw's replicate variance the row bootstrap's: with the counts fixed
    (some groups empty, so the fallbacks are used), the values are an affine map of the sums."""
    item, n_bins, categorical = CASES[kind]
    diff, layout, fallback = grouped(data(240), item, n_bins, 1, categorical)
    rng = np.random.default_rng(5)
    counts = rng.multinomial(240, diff.moments.counts / 240).astype(np.float64)
    counts[rng.choice(counts.size, size=2, replace=False)] = 0
    s = [counts[:, None] * rng.normal(size=diff.moments.sums.shape) for _ in range(3)]  # means of about 1
    value = lambda sums: effects(counts, sums, diff.plan, layout, fallback)[0]
    a, b = 0.3, -1.7  # an affine map keeps every combination whose weights sum to one
    combined = value(a * s[0] + b * s[1] + (1 - a - b) * s[2])
    np.testing.assert_allclose(combined, a * value(s[0]) + b * value(s[1]) + (1 - a - b) * value(s[2]),
                               rtol=1e-10, atol=1e-10)
    assert np.abs(value(s[0]) - value(s[1])).max() > 0.1  # and the sums do move the values
    batched = effects(np.stack([counts, diff.moments.counts.astype(np.float64)]), np.stack(s[:2]), diff.plan, layout,
                      fallback)[0]
    np.testing.assert_allclose(batched[0], value(s[0]), rtol=1e-12, atol=1e-12)  # replicates run as one batch
    np.testing.assert_allclose(batched[1], effects(diff.moments.counts.astype(np.float64), s[1], diff.plan, layout,
                                                   fallback)[0],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("route", ["host", "device", "device in chunks"])
def test_within_group_roots_are_the_rows_population_covariance(route, monkeypatch):
    """Rows far from zero (uncentred moments would cancel): each group's square roots give back
    the population covariance of its rows' two differences per output, as NumPy computes it;
    on the device route also when the groups' rows are spread over chunks merged on the host."""
    rng = np.random.default_rng(2)
    sizes = np.array([7, 1, 30, 4, 0, 12])
    group = rng.permutation(np.repeat(np.arange(sizes.size), sizes))
    D = (1e4 + rng.normal(size=(sizes.sum(), 6)) @ rng.normal(size=(6, 6))).astype(np.float32)  # P = 2, K = 3
    D[group == 3] = D[group == 3][0]  # a group of equal rows
    if route == "device in chunks":
        monkeypatch.setattr(moments_module, "CHUNK_ROWS", 8)  # 7 chunks: every group of two or more rows split
    if route == "host":
        moments = moments_module.host_moments(group, D, sizes.size, 2, True)
    else:
        moments = moments_module.device_moments(jax.numpy.asarray(group), jax.numpy.asarray(D), sizes.size, 2, True)
    rtol = 1e-9 if route == "host" else 1e-6  # float32 partial sums on the device, about their own means
    np.testing.assert_array_equal(moments.counts, sizes)
    np.testing.assert_allclose(moments.sums, [D[group == g].astype(np.float64).sum(0) for g in range(sizes.size)],
                               rtol=1e-12 if route == "host" else 1e-10)  # float32 rounding about 1e4: 6e-8
    roots = moments_module.within_roots(moments)
    assert roots.shape == (6, 3, 2, 2)
    for g in range(sizes.size):
        rows = D[group == g].astype(np.float64).reshape(-1, 2, 3)
        for k in range(3):
            expected = np.cov(rows[:, :, k].T, ddof=0) if sizes[g] > 1 else np.zeros((2, 2))
            np.testing.assert_allclose(roots[g, k] @ roots[g, k].T, expected, rtol=rtol, atol=rtol * 5)
    assert np.abs(roots[3]).max() < 1e-6 and np.abs(roots[[1, 4]]).max() == 0.0  # equal rows; one row; none


def test_blocks_of_replicates_give_the_same_values_and_stderr(monkeypatch):
    """Replicates drawn in blocks (bounded memory) are the ones drawn at once, and the standard
    error merged block by block is NumPy's over all of them."""
    diff, layout, fallback = grouped(data(240), (0, 1), 4, 37)
    args = (diff.moments, fallback, diff.plan, layout, jax.random.key(9))
    whole = moments_module.replicates(*args)
    monkeypatch.setattr(moments_module, "BLOCK_VALUES", 5 * diff.moments.sums.size)  # blocks of 5 replicates
    assert len(list(moments_module.replicate_blocks(*args))) == 8
    np.testing.assert_array_equal(moments_module.replicates(*args), whole)
    np.testing.assert_allclose(moments_module.bootstrap_stderr(*args), np.std(whole, axis=0, ddof=1), rtol=1e-12, atol=1e-15)


def test_stderr_reproducible_from_the_key_and_sensitive_to_it():
    import jaxshap

    X = data(300)
    a = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.key(2))
    b = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.key(2))
    c = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.key(3))
    # exact on a CPU; an accelerator's scatter adds float32 partial sums in a varying order
    np.testing.assert_allclose(a.stderr, b.stderr, rtol=0 if jax.default_backend() == "cpu" else 1e-6, atol=0)
    assert not np.allclose(np.asarray(a.stderr), np.asarray(c.stderr), rtol=1e-3, atol=0)
    legacy = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.PRNGKey(2))
    assert np.all(np.isfinite(np.asarray(legacy.stderr)))
