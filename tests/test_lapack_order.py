"""No two batched LAPACK calls side by side in the programs the explainers compile.

On a CPU, jaxlib 0.10 splits a batched LAPACK call over XLA's intra-op pool and blocks a pool
thread until its parts finish; two such calls that XLA runs side by side deadlock a pool of two
threads (a 2-core machine). See tests/lapack_audit.py and jaxshap/_core/_platform.py
(the workaround, with the upstream references). The audit fails without the workaround: with
``after`` made the identity, five of the eight configurations below hold batched calls side by
side (the three others have no pair to order).
"""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import cho_factor

import jaxshap
from conftest import make_mlp
from jaxshap._core._platform import after
from jaxshap.estimators import kernel_shapley
from lapack_audit import audit, audit_call


def _problem(m, seed=0):
    rng = np.random.default_rng(seed)
    params, apply = make_mlp(seed, m, hidden=8)
    background = rng.normal(size=(16, m)).astype(np.float32)
    X = rng.normal(size=(3, m)).astype(np.float32)
    return (lambda Z: apply(params, Z)), background, X


def _gaussian(background):
    m = background.shape[1]
    return jaxshap.maskers.Gaussian(background.mean(0), np.cov(background.T) + 0.1 * np.eye(m), n_samples=8, key=0)


def _kernel_pooled_per_row():
    f, bg, X = _problem(12)  # 2M + 2 coalitions: a pooled plan, with third-order controls
    return lambda: jaxshap.KernelExplainer(f, bg, 26, third_order=True, shared_coalitions=False)(X, key=1).values


def _kernel_gaussian(shared, **options):
    f, bg, X = _problem(6)
    explainer = jaxshap.KernelExplainer(f, _gaussian(bg), 14, third_order=True, shared_coalitions=shared, **options)
    return lambda: explainer(X, key=1).values


def _permutation_gaussian_controls():
    f, bg, X = _problem(6)
    return lambda: jaxshap.PermutationExplainer(f, _gaussian(bg), n_permutations=16, control_variates=True)(X, key=1).values


def _exact_gaussian():
    f, bg, X = _problem(5)
    return lambda: jaxshap.ExactExplainer(f, _gaussian(bg))(X).values


def _linear_correlated():
    _, bg, X = _problem(5)
    coef = np.arange(1, 6, dtype=np.float32)
    return lambda: jaxshap.LinearExplainer((coef, 0.5), bg, feature_perturbation="correlation_dependent")(X).values


def _kernel_estimator_vmapped():
    m = 12
    w = jnp.asarray(np.random.default_rng(0).normal(size=(m, 4)), jnp.float32)
    X = jnp.asarray(np.random.default_rng(1).normal(size=(4, m)), jnp.float32)

    def one(k, x):
        return kernel_shapley(k, lambda s: jnp.tanh(jnp.where(s, x, 0.0) @ w).sum(-1), m, 2 * m + 2, third_order=True)[0]

    return lambda: jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), 4), X)


CONFIGS = {
    "kernel-pooled-third-order-per-row": _kernel_pooled_per_row,
    # the shared draw's factorisations (unbatched) before the masker's batched ones
    "kernel-gaussian-shared": lambda: _kernel_gaussian(True),
    "kernel-gaussian-per-row": lambda: _kernel_gaussian(False),
    # each row's own A_0 (the leading-terms prior's parts) besides the masker's and the draw's factorisations
    "kernel-gaussian-per-row-leading": lambda: _kernel_gaussian(False, prior="leading"),
    "kernel-estimator-vmapped": _kernel_estimator_vmapped,
    "permutation-gaussian-controls": _permutation_gaussian_controls,
    "exact-gaussian": _exact_gaussian,
    "linear-correlation-dependent": _linear_correlated,
}


def test_audit_flags_side_by_side_batched_calls_and_after_orders_them():
    """The checker sees two independent batched factorisations (the pattern of the old
    permutation controls), and :func:`after` orders them without changing a bit."""
    a = jnp.asarray(np.random.default_rng(0).normal(size=(3, 5, 5)), jnp.float32)
    a = a @ jnp.swapaxes(a, 1, 2) + 5 * jnp.eye(5)
    b = a + 1.0

    def side_by_side(a, b):
        return cho_factor(a, lower=True)[0], cho_factor(b, lower=True)[0]

    def ordered(a, b):
        fa = cho_factor(a, lower=True)[0]
        return fa, cho_factor(after(b, fa), lower=True)[0]

    pairs = audit(side_by_side, a, b)
    assert len(pairs) == 1 and pairs[0].batched and "potrf" in pairs[0].first.target
    assert audit(ordered, a, b) == []
    for x, y in zip(jax.jit(side_by_side)(a, b), jax.jit(ordered)(a, b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert [p.batched for p in audit(side_by_side, a[0], b[0])] == [False]  # one matrix each: not split


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_no_batched_lapack_calls_side_by_side(name):
    """Every program the call compiles runs its batched LAPACK calls one at a time.

    Unbatched calls side by side are allowed (jaxlib runs a single matrix on the calling
    thread, so no pool thread waits), but none of these configurations has any."""
    pairs, n_calls = audit_call(CONFIGS[name]())
    assert n_calls > 0, "the audit saw no LAPACK call: the configuration no longer exercises it"
    batched = [str(p) for p in pairs if p.batched]
    assert not batched, "\n".join(batched)
    assert not pairs, "\n".join(map(str, pairs))


_TWO_THREADS = """
import os, sys
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])  # XLA sizes its CPU pool from this
import numpy as np, jax, jax.numpy as jnp
from jaxshap.estimators import kernel_shapley
m, rows = 60, 64
rng = np.random.default_rng(0)
w = jnp.asarray(rng.normal(size=(m, 8)), jnp.float32)
X = jnp.asarray(rng.normal(size=(rows, m)), jnp.float32)
def one(k, x):
    return kernel_shapley(k, lambda s: jnp.tanh(jnp.where(s, x, 0.0) @ w).sum(-1), m, 170, third_order=True)[0]
f = jax.jit(jax.vmap(one))
for r in range(10):
    out = f(jax.random.split(jax.random.key(r), rows), X)
assert np.isfinite(np.asarray(out)).all()
print("finished")
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs and Linux affinity")
def test_pooled_kernel_shapley_finishes_on_a_two_thread_pool():
    """A pooled plan with third-order controls once ran the span check's eigensolver and two
    operators' Cholesky factorisations side by side; batched over 64 rows on a two-thread
    pool it hung (3 of 3 runs, gdb: a pool thread in ParallelBatchMap under syevd)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", _TWO_THREADS], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0 and "finished" in result.stdout, result.stderr[-2000:]
