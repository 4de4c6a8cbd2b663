"""A host (NumPy) model evaluated between two compiled programs (``_engine/_host_model``):
the same values as the model run inside one program through a callback, the Shapley values of
the definition, the model's own errors, a check that both programs drew the same coalitions,
and programs a second process loads instead of compiling."""

import itertools
import math
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import jaxshap
import jaxshap._engine._explainer as engine
import jaxshap._engine._host_model as host_model

RNG = np.random.default_rng(0)
W1 = RNG.normal(size=(6, 8))
W2 = RNG.normal(size=(8, 2))


def numpy_model(x):
    """A two-output NumPy MLP (not traceable by JAX: evaluated on the host)."""
    return np.tanh(np.asarray(x, np.float64) @ W1) @ W2


X = RNG.normal(size=(40, 6)).astype(np.float32)
BACKGROUND = X[:12]


def _explain(cls, staged, monkeypatch, **kwargs):
    calls = []
    real = host_model.inputs_program

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    counted.prepare = real.prepare

    with monkeypatch.context() as m:
        m.setattr(host_model, "inputs_program", counted)
        if not staged:
            m.setattr(engine, "staged_rows", lambda *a: 0)
        background = kwargs.pop("masker", lambda: BACKGROUND)()
        explanation = cls(numpy_model, background, **kwargs)(X[20:31], key=jax.random.key(3))
    assert bool(calls) == staged  # the path asked for is the path taken
    return explanation


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (jaxshap.ExactExplainer, {}),
        (jaxshap.KernelExplainer, {"n_coalitions": 40}),
        (jaxshap.KernelExplainer, {"n_coalitions": 40, "shared_coalitions": False}),
        (jaxshap.KernelExplainer, {"n_coalitions": 40, "link": "identity", "groups": [[0, 1], [2], [3, 4, 5]]}),
        (jaxshap.PartitionExplainer, {}),
        (jaxshap.ExactExplainer, {"masker": lambda: jaxshap.maskers.Gaussian(X.mean(0), np.cov(X.T), n_samples=16)}),
        (
            jaxshap.KernelExplainer,
            {
                "n_coalitions": 40,
                "masker": lambda: jaxshap.maskers.Gaussian(X.mean(0), np.cov(X.T), n_samples=16),
                "causal_ordering": [[0, 1], [2, 3, 4, 5]],
                "confounding": [True, False],
            },
        ),
    ],
)
def test_the_stages_give_the_values_of_the_callback(cls, kwargs, monkeypatch):
    staged = _explain(cls, True, monkeypatch, **dict(kwargs))
    callback = _explain(cls, False, monkeypatch, **dict(kwargs))
    assert staged.values.shape == callback.values.shape
    np.testing.assert_allclose(np.asarray(staged.values), np.asarray(callback.values), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(staged.base_values), np.asarray(callback.base_values), rtol=1e-5, atol=1e-6)
    if callback.stderr is not None:
        np.testing.assert_allclose(np.asarray(staged.stderr), np.asarray(callback.stderr), rtol=1e-4, atol=1e-6)


def _shapley_oracle(f, x, background):
    """Interventional Shapley values from the definition: all subsets, NumPy only."""
    m = x.shape[0]
    value = {}
    for size in range(m + 1):
        for subset in itertools.combinations(range(m), size):
            rows = background.copy()
            rows[:, list(subset)] = x[list(subset)]
            value[frozenset(subset)] = f(rows).mean(axis=0)
    phi = np.zeros((m,) + value[frozenset()].shape)
    for j in range(m):
        for subset, v in value.items():
            if j in subset:
                continue
            s = len(subset)
            weight = math.factorial(s) * math.factorial(m - s - 1) / math.factorial(m)
            phi[j] += weight * (value[subset | {j}] - v)
    return phi


def test_the_stages_give_the_shapley_values_in_float64():
    X64, background = X.astype(np.float64), BACKGROUND.astype(np.float64)
    explanation = jaxshap.ExactExplainer(numpy_model, background)(X64[20:23])
    values = np.asarray(explanation.values)
    assert values.dtype == np.float64
    for i in range(3):
        np.testing.assert_allclose(values[i], _shapley_oracle(numpy_model, X64[20 + i], background), rtol=1e-10, atol=1e-12)


def test_more_rows_than_one_block_and_a_memory_budget(monkeypatch):
    # a budget that holds three rows' inputs and outputs: the 11 rows run in four blocks, the last
    # shifted back to end at the last row, and give the values of one call on every row
    full = jaxshap.ExactExplainer(numpy_model, BACKGROUND)(X[20:31])
    # per row: 64 coalitions x 12 background rows x float32 x (6 inputs + 2 x 2 outputs), and the
    # estimator's own 1408 bytes (masks and values): 32128 bytes
    ex = jaxshap.ExactExplainer(numpy_model, BACKGROUND, memory_budget=100_000)
    assert host_model.staged_rows(ex, jax.numpy.asarray(X[20:31]), jax.random.key(0), None) == 3
    np.testing.assert_allclose(np.asarray(ex(X[20:31]).values), np.asarray(full.values), rtol=1e-5, atol=1e-6)


def test_kernel_blocks_share_one_draw(monkeypatch):
    # blocks of a few rows: every block uses the call's one draw of coalitions (drawn once), so
    # the values equal one block's
    key = jax.random.key(5)
    full = jaxshap.KernelExplainer(numpy_model, BACKGROUND, 60)(X[20:31], key=key)
    draws = []
    real = jaxshap._explainers._kernel.shared_draw

    def counted(core, k):
        draws.append(1)
        return real(core, k)

    monkeypatch.setattr(jaxshap._explainers._kernel, "shared_draw", counted)
    monkeypatch.setattr(host_model, "BLOCK_EVALS", 3 * 62 * 12)  # three rows of 62 coalitions x 12 background rows
    ex = jaxshap.KernelExplainer(numpy_model, BACKGROUND, 60)
    assert host_model.staged_rows(ex, jax.numpy.asarray(X[20:31]), key, None) == 3
    blocked = ex(X[20:31], key=key)
    assert len(draws) == 1
    np.testing.assert_allclose(np.asarray(blocked.values), np.asarray(full.values), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(blocked.stderr), np.asarray(full.stderr), rtol=1e-4, atol=1e-6)


def test_the_model_s_own_error_reaches_the_caller():
    def broken(x):
        if len(x) > 50:
            raise KeyError("the model's own failure")
        return numpy_model(x)

    ex = jaxshap.ExactExplainer(broken, BACKGROUND)
    with pytest.raises(KeyError, match="the model's own failure"):
        ex(X[20:23])


def test_values_are_never_paired_with_other_coalitions(monkeypatch):
    real = host_model.inputs_program

    def other_coalitions(*args, **kwargs):
        rows, masks = real(*args, **kwargs)
        return rows, ~masks

    other_coalitions.prepare = real.prepare

    monkeypatch.setattr(host_model, "inputs_program", other_coalitions)
    with pytest.raises(RuntimeError, match="different coalitions"):
        jaxshap.KernelExplainer(numpy_model, BACKGROUND, 40, shared_coalitions=False)(X[20:23])


def test_permutation_keeps_the_callback():
    ex = jaxshap.PermutationExplainer(numpy_model, BACKGROUND, 8)
    assert host_model.staged_rows(ex, jax.numpy.asarray(X[:3]), jax.random.key(0), None) == 0
    values = np.asarray(ex(X[20:23]).values)
    np.testing.assert_allclose(values.sum(1) + np.asarray(ex.expected_value), numpy_model(X[20:23]), rtol=1e-4, atol=1e-4)


def test_a_masker_that_does_not_call_the_model_once_keeps_the_callback(monkeypatch):
    masker = jaxshap.maskers.Independent(BACKGROUND)
    ex = jaxshap.ExactExplainer(numpy_model, masker)
    assert host_model.staged_rows(ex, jax.numpy.asarray(X[:3]), jax.random.key(0), None) > 0
    monkeypatch.setattr(type(masker), "calls_model_once", False)
    assert host_model.staged_rows(ex, jax.numpy.asarray(X[:3]), jax.random.key(0), None) == 0
    assert host_model.staged_rows(ex, jax.numpy.asarray(X[:3]), jax.random.key(0), "local") == 0  # sharded: one program


JOB = """
import logging, numpy as np, jax, jaxshap
compiled = []
class Count(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("Finished XLA compilation of"):
            compiled.append(record.getMessage())
jax.config.update("jax_log_compiles", True)
logging.getLogger("jax").addHandler(Count())
rng = np.random.default_rng(0)
W = rng.normal(size=(5, 3))
model = lambda x: np.tanh(np.asarray(x) @ W)
X = rng.normal(size=(30, 5)).astype(np.float32)
v = jaxshap.KernelExplainer(model, X[:10])(X[10:14]).values
print(sum("_program" in c for c in compiled), repr(np.asarray(v).round(6).tolist()))
"""


@pytest.mark.slow
def test_a_second_process_loads_a_host_model_s_programs(tmp_path):
    env = {**os.environ, "JAXSHAP_CACHE_DIR": str(tmp_path)}

    def job():
        out = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, env=env, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        n, values = out.stdout.strip().splitlines()[-1].split(" ", 1)
        return int(n), values

    n1, v1 = job()
    assert n1 == 2  # the inputs program and the values program
    n2, v2 = job()
    assert n2 == 0 and v2 == v1


def test_inside_jit_the_callback_runs_and_gives_the_same_values():
    ex = jaxshap.ExactExplainer(numpy_model, BACKGROUND)
    eager = np.asarray(ex(X[20:24]).values)
    assert host_model.staged_rows(ex, jax.numpy.asarray(X[20:24]), jax.random.key(0), None) > 0
    in_jit = jax.jit(lambda e, rows: e(rows).values)(ex, X[20:24])  # traced rows and explainer: one program
    np.testing.assert_allclose(np.asarray(in_jit), eager, rtol=1e-5, atol=1e-6)
    closed = jax.jit(lambda e: e(X[20:24]).values)(ex)  # concrete rows, traced explainer
    np.testing.assert_allclose(np.asarray(closed), eager, rtol=1e-5, atol=1e-6)
