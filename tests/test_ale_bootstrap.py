"""The bootstrap of accumulated local effects, drawn group by group, against a bootstrap written out.

The law: a resample's group counts are multinomial and its draws uniform within each group, which
is a resample of the rows with replacement; over many resamples, the replicate values' means and
standard deviations must agree with NumPy's resampling of the rows (``tests/ale_oracle.py``) within
sampling error. The mechanics: every group gets exactly its count of draws (also when a count
exceeds the group's slots and when draws are rejected), each row of a group equally often, and
Lemire's rule and the 64-bit product are checked against NumPy's integers.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ale_oracle import oracle_replicates_categorical, oracle_replicates_first, oracle_replicates_pair
from jaxshap._core._device_rows import device_rows
from jaxshap._core._model import wrap_model
from jaxshap._core._validate import DEFAULT_MEMORY_BUDGET
from jaxshap._effects import _ale, _ale_bootstrap as boot
from jaxshap._effects._ale_program import Layout, bootstrap_replicates, effects

RNG = np.random.default_rng(0)
W1 = RNG.normal(size=(4, 8))
W2 = RNG.normal(size=8)


def mlp_np(x):
    return np.tanh(np.asarray(x, np.float64) @ W1) @ W2


def mlp_jax(x):
    return jnp.tanh(x @ W1.astype(np.float32)) @ W2.astype(np.float32)


def data(n, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 1] = 0.7 * X[:, 0] + 0.5 * X[:, 1]  # dependent: a pair's grid has empty cells
    X[:, 2] = rng.integers(0, 4, size=n) + (X[:, 0] > 0.5)  # categorical codes 0..4
    return X.astype(np.float32)


def replicates(X, item, n_bins, n_boot, seed, categorical=frozenset()):
    """Our replicate values ``[B, *shape]`` (single output), through the functions the public call uses."""
    wrapped = wrap_model(mlp_jax, X.shape[1], X.dtype, X[:2])
    names = [f"x{j}" for j in range(X.shape[1])]
    diff = _ale.differences(wrapped, X, lambda: device_rows(X), item, n_bins, categorical, names,
                            DEFAULT_MEMORY_BUDGET)
    layout = Layout(diff.kind, diff.shape, n_boot)
    _, fallback = effects(diff.counts.astype(np.float64), diff.sums, diff.plan, layout, xp=np)
    inputs = _ale.bootstrap_inputs(diff, fallback, jax.random.key(seed), n_boot)
    return np.asarray(bootstrap_replicates(*inputs, diff.plan, layout), np.float64)[..., 0]


def agree(ours, theirs):
    """Means within 5 standard errors; standard deviations within 6 standard errors of their ratio."""
    B = ours.shape[0]
    m1, m2, s1, s2 = ours.mean(0), theirs.mean(0), ours.std(0, ddof=1), theirs.std(0, ddof=1)
    spread = s2 > 1e-6 * np.abs(theirs).max()
    assert spread.sum() >= 3  # the comparison is about something
    np.testing.assert_array_less(np.abs(m1 - m2), 5 * np.sqrt((s1**2 + s2**2) / B) + 1e-7)
    np.testing.assert_array_less(np.abs(np.log(s1[spread] / s2[spread])), 6 / np.sqrt(B))


@pytest.mark.parametrize("kind", ["numeric", "pair", "categorical"])
def test_replicates_have_the_law_of_resampled_rows(kind):
    B = 2000
    X = data(240)
    if kind == "numeric":
        ours = replicates(X, (0,), 6, B, seed=3)
        theirs = oracle_replicates_first(mlp_np, X, 0, 6, B, np.random.default_rng(4))
    elif kind == "pair":
        ours = replicates(X, (0, 1), 4, B, seed=5)
        theirs = oracle_replicates_pair(mlp_np, X, 0, 1, 4, B, np.random.default_rng(6))
    else:
        ours = replicates(X, (2,), 20, B, seed=7, categorical=frozenset({2}))
        theirs = oracle_replicates_categorical(mlp_np, X, 2, {2}, B, np.random.default_rng(8))
    assert ours.shape == theirs.shape
    agree(ours, theirs)


def test_every_group_gets_its_count_and_every_row_its_share():
    sizes = np.array([5, 0, 1, 40, 3, 200])
    slot = boot.slots(sizes)
    n = int(sizes.sum())
    group = np.repeat(np.arange(sizes.size), sizes)
    # columns: a one per draw, the group's id, and one column per row (how often it was drawn)
    values = jnp.asarray(np.concatenate([np.ones((n, 1)), group[:, None], np.eye(n)], axis=1), jnp.float32)
    draw = jax.jit(lambda seed, c: boot.group_draw_sums(seed, c, slot, values))
    rng = np.random.default_rng(0)
    hits = np.zeros(n)
    total = np.zeros(sizes.size)
    for trial in range(300):
        c = rng.multinomial(n, sizes / n)
        if trial % 3 == 0:  # a count far above its group's slots: drawn in further rounds
            c = np.zeros_like(sizes)
            c[2], c[0] = n - 7, 7
        sums = np.asarray(draw(jnp.asarray([trial, 11], jnp.uint32), jnp.asarray(c, jnp.int32)))
        np.testing.assert_array_equal(sums[:, 0], c)  # exactly c_g draws, whatever was rejected
        np.testing.assert_array_equal(sums[:, 1], c * np.arange(sizes.size))  # all from the group's own rows
        hits += sums[:, 2:].sum(0)
        total += c
    # each row of a group drawn equally often: hits / (group total / size) ~ 1, a binomial spread
    expected = (total / np.maximum(sizes, 1))[group]
    z = (hits - expected) / np.sqrt(expected * (1 - 1 / sizes[group]) + 1e-12)
    assert np.all(np.abs(z[sizes[group] > 1]) < 5)


def test_lemire_and_the_high_product_against_integers():
    rng = np.random.default_rng(1)
    words = rng.integers(0, 2**32, size=20000, dtype=np.uint64)
    sizes = rng.integers(1, 2**31, size=20000, dtype=np.uint64)
    sizes[:100] = [1, 2, 3, 7, 2**31 - 1] * 20
    product = words * sizes
    pick, accepted = boot.lemire(jnp.asarray(words, jnp.uint32), jnp.asarray(sizes, jnp.uint32),
                                 jnp.asarray((2**32 - sizes) % sizes, jnp.uint32))
    np.testing.assert_array_equal(np.asarray(pick), product >> 32)
    np.testing.assert_array_equal(np.asarray(accepted), (product & 0xFFFFFFFF) >= (2**32 - sizes) % sizes)
    assert np.all(np.asarray(pick) < sizes)


def test_stderr_reproducible_from_the_key_and_sensitive_to_it():
    import jaxshap

    X = data(300)
    a = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.key(2))
    b = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.key(2))
    c = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.key(3))
    np.testing.assert_array_equal(a.stderr, b.stderr)
    assert not np.array_equal(np.asarray(a.stderr), np.asarray(c.stderr))
    legacy = jaxshap.accumulated_local_effects(mlp_jax, X, (0, 1), n_bins=4, n_bootstrap=30, key=jax.random.PRNGKey(2))
    assert np.all(np.isfinite(np.asarray(legacy.stderr)))


def test_threefry_written_out_gives_jax_words():
    from jax.extend.random import threefry_2x32

    from jaxshap._core._threefry import threefry_words

    for key, n in (([0, 0], 2), ([0x12345678, 0x9ABCDEF0], 1000), ([7, 2**32 - 1], 2**16)):
        key = jnp.asarray(key, jnp.uint32)
        count = jnp.arange(n, dtype=jnp.uint32) * jnp.uint32(2654435761)  # spread over the counters' range
        np.testing.assert_array_equal(np.asarray(jax.jit(threefry_words)(key, count)), np.asarray(threefry_2x32(key, count)))
