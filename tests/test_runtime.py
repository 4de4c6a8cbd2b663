"""The shared runtime: explainers as pytrees, one compiled program, row capacities, remat, cache.

Compilations are counted through the model: a JAX model's Python body runs only while JAX
traces it, so a counter in it counts the programs built around it.
"""

import os
import subprocess
import sys
import textwrap
from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap._core import _chunking as chunking
from jaxshap._core._pytree import Static, merge, split
from oracle import interventional_shapley
from conftest import CountCompiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M, B = 4, 6
TRACES = {"n": 0}


def mlp(params, X):
    TRACES["n"] += 1
    return jnp.tanh(X @ params["w1"] + params["b1"]) @ params["w2"]


def make_params(seed, dtype=jnp.float32):
    rng = np.random.default_rng(seed)
    return {
        "w1": jnp.asarray(rng.normal(size=(M, 5)), dtype),
        "b1": jnp.asarray(rng.normal(size=5), dtype),
        "w2": jnp.asarray(rng.normal(size=5), dtype),
    }


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    return rng.normal(size=(B, M)).astype(np.float32), rng.normal(size=(101, M)).astype(np.float32)


def numpy_model(params):
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    return lambda X: np.tanh(np.asarray(X, np.float64) @ p["w1"] + p["b1"]) @ p["w2"]


# --- pytrees -------------------------------------------------------------------------------------


def test_split_and_merge_a_partial_and_static_equality():
    params = make_params(0)
    dynamic, spec = split(partial(mlp, params))
    assert len(dynamic) == 3 and all(isinstance(a, jax.Array) for a in dynamic)
    rebuilt = merge(dynamic, spec)
    X = np.ones((2, M), np.float32)
    np.testing.assert_array_equal(rebuilt(X), mlp(params, X))
    assert split(partial(mlp, make_params(1)))[1] == spec  # other values, same structure
    assert split(partial(mlp, params, 2.0))[1] != split(partial(mlp, params, 3.0))[1]  # static floats
    a, b = [1], [1]  # unhashable: equal only when the same object
    assert Static(a) == Static(a) and Static(a) != Static(b)
    assert Static(lambda x: x) != Static(lambda x: x)


def test_explainer_is_a_pytree_with_background_and_params_as_leaves(data):
    background, _ = data
    params = make_params(0)
    ex = jaxshap.PermutationExplainer(partial(mlp, params), background, n_permutations=4, feature_names="abcd")
    leaves, treedef = jax.tree_util.tree_flatten(ex)
    assert len(leaves) == 4  # background + w1, b1, w2
    assert any(leaf is params["w1"] for leaf in leaves)
    again = jax.tree_util.tree_unflatten(treedef, leaves)
    assert type(again) is jaxshap.PermutationExplainer and again.n_permutations == 4
    other = jaxshap.PermutationExplainer(partial(mlp, make_params(1)), background + 1, n_permutations=4,
                                         feature_names="abcd")
    assert jax.tree_util.tree_structure(other) == treedef
    different = jaxshap.PermutationExplainer(partial(mlp, params), background, n_permutations=6, feature_names="abcd")
    assert jax.tree_util.tree_structure(different) != treedef


def test_jit_and_grad_take_the_explainer_as_an_argument(data):
    background, X = data
    X = X[:5]
    ex = jaxshap.ExactExplainer(partial(mlp, make_params(0)), background)
    explain = jax.jit(lambda ex, X: ex(X).values)
    np.testing.assert_allclose(explain(ex, X), ex(X).values, rtol=1e-5, atol=1e-6)
    # another explainer of the same configuration: same program, its own arrays (no stale constants)
    params = make_params(1)
    ex2 = jaxshap.ExactExplainer(partial(mlp, params), background + 0.5)
    expected = interventional_shapley(numpy_model(params), X, background + 0.5)
    np.testing.assert_allclose(explain(ex2, X), expected, rtol=1e-4, atol=1e-5)
    assert explain._cache_size() == 1
    # gradient with respect to the explainer: its model leaves carry d loss / d params
    loss = lambda e: (e(X).values ** 2).sum()
    g = jax.grad(loss)(ex2)
    assert isinstance(g, jaxshap.ExactExplainer)
    rebuilt = jax.grad(lambda p: loss(jaxshap.ExactExplainer(partial(mlp, p), background + 0.5)))(params)
    chex.assert_trees_all_close(g.model.model.args[0], rebuilt, rtol=1e-4, atol=1e-5)
    # jit of the explainer itself (a callable)
    np.testing.assert_allclose(jax.jit(ex)(X).values, ex(X).values, rtol=1e-5, atol=1e-6)


# --- compile once --------------------------------------------------------------------------------


def test_second_instance_and_new_row_counts_do_not_recompile(data):
    background, X = data
    params = make_params(2)
    kwargs = dict(n_coalitions=10, third_order=False)
    ex = jaxshap.KernelExplainer(partial(mlp, params), background, **kwargs)
    ex(X[:100], key=1)
    before = TRACES["n"]
    with CountCompiles() as compiles:
        out = {n: ex(X[:n], key=1) for n in (101, 37)}
        second = jaxshap.KernelExplainer(partial(mlp, make_params(3)), background * 2, **kwargs)
        second(X[:37], key=1)
    assert TRACES["n"] == before, "a new row count or a second instance recompiled the program"
    assert compiles.names == []  # not even a small program (slices of the results) for the new counts
    # and the padded, skipped rows do not leak into the results: row i is row i of the full call
    full = ex(X, key=1).values
    out[1] = ex(X[:1], key=1)  # (may compile a smaller chunk)
    for n, expl in out.items():
        chex.assert_shape(expl.values, (n, M))
        np.testing.assert_allclose(expl.values, full[:n], rtol=1e-5, atol=1e-6)


def test_bucket_rows():
    assert chunking.bucket_rows(100, 1) == chunking.bucket_rows(37, 1) == (1, 256)
    assert chunking.bucket_rows(100, 1100) == chunking.bucket_rows(37, 1100) == (137, 274)
    assert chunking.bucket_rows(3, 64) == (8, 256)  # all rows fit a smaller chunk
    rows, size = chunking.bucket_rows(10**7, 8)
    assert rows == 8 and size == 8 * chunking.MAX_CALL_CHUNKS  # large calls: blocks of the largest
    assert chunking.bucket_rows(300, 1) == (1, 1024)


def test_eager_grad_loop_rebuilding_the_explainer_compiles_once(data):
    background, X = data
    X = X[:8]
    loss = lambda p: (jaxshap.ExactExplainer(partial(mlp, p), background)(X).values ** 2).sum()
    p = make_params(4)
    g1 = jax.grad(loss)(p)
    before = TRACES["n"]
    p2 = jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, g1)
    g2 = jax.grad(loss)(p2)
    assert TRACES["n"] == before
    # the gradient is right: finite differences on one weight, in float64
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), p2)
        bg64, X64 = background.astype(np.float64), X.astype(np.float64)
        loss64 = lambda p: (jaxshap.ExactExplainer(partial(mlp, p), bg64)(X64).values ** 2).sum()
        g64 = jax.grad(loss64)(p64)
        eps = 1e-6
        bump = lambda s: {**p64, "w2": p64["w2"].at[1].add(s)}
        numeric = (loss64(bump(eps)) - loss64(bump(-eps))) / (2 * eps)
        np.testing.assert_allclose(g64["w2"][1], numeric, rtol=1e-6)
    np.testing.assert_allclose(g2["w2"][1], g64["w2"][1], rtol=1e-3)


def test_effects_compile_once_per_configuration(data):
    _, X = data
    params = make_params(5)
    model = partial(mlp, params)
    jaxshap.h_statistic(model, X[:20])
    jaxshap.partial_dependence(model, X[:20], 0)
    with CountCompiles() as compiles:
        h = jaxshap.h_statistic(partial(mlp, make_params(6)), X[20:40])
        jaxshap.partial_dependence(model, X[20:40], 0)
    assert compiles.names == []
    assert np.all(np.isfinite(np.asarray(h.overall)))


# --- memory --------------------------------------------------------------------------------------


def test_gradient_memory_is_bounded_by_the_chunk_not_the_rows(data):
    """XLA's buffer accounting of the gradient program: 8x more rows, about the same memory."""
    background, _ = data
    params = make_params(7)

    def temp_bytes(n):
        def loss(p, X):
            ex = jaxshap.ExactExplainer(partial(mlp, p), background, memory_budget=2**12)
            return (ex(X).values ** 2).sum()

        X = jax.ShapeDtypeStruct((n, M), jnp.float32)
        return jax.jit(jax.grad(loss)).lower(params, X).compile().memory_analysis().temp_size_in_bytes

    small, large = temp_bytes(16), temp_bytes(128)
    per_row_io = 4 * (M + M + 1) + 8  # a row, its values, its base value, its key
    per_row_activations = 2**M * B * 5 * 4  # one row's hidden activations over its coalitions (1920)
    growth = (large - small) / (128 - 16)
    assert growth <= 4 * per_row_io < per_row_activations  # kept: the inputs, not each chunk's activations
    # padded to a capacity of 256 one-row chunks: without remat the scan would keep 256 chunks' activations
    assert large < 256 * per_row_activations / 4


def test_planner_counts_the_kernel_working_set(data):
    background, _ = data
    rng = np.random.default_rng(0)
    m = 12
    w = jnp.asarray(rng.normal(size=m), jnp.float32)
    bg = rng.normal(size=(2, m)).astype(np.float32)
    make = lambda **kw: jaxshap.KernelExplainer(lambda X: X @ w, bg, n_coalitions=400, memory_budget=2**21, **kw)
    ex = make(third_order=True, shared_coalitions=False)  # each row factorises its own design
    solve = ex._solve_set_per_row()
    t = m * (m - 1) * (m - 2) // 6
    assert solve >= 4 * (402 * (m + t) + (m + t) ** 2)  # at least the design and the Gram matrix
    rows, coalitions = ex._plan(64)
    assert rows * (ex._working_set_per_row() + solve) <= 2**21 and rows < 64


def test_planner_does_not_count_a_shared_operator_per_row():
    """With shared coalitions the design is factorised once per block: the third-order controls
    must not shrink the model's chunks (they did, to one coalition per chunk, at M=16)."""
    rng = np.random.default_rng(0)
    m = 16
    w = jnp.asarray(rng.normal(size=m), jnp.float32)
    bg = rng.normal(size=(100, m)).astype(np.float32)
    make = lambda third: jaxshap.KernelExplainer(lambda X: X @ w, bg, third_order=third, memory_budget=2**24)
    with_controls, plain = make(True), make(False)
    assert with_controls.third_order and with_controls.shared_coalitions
    assert with_controls._plan(40) == plain._plan(40)
    assert with_controls._plan(40)[1] >= 64


def test_planner_counts_the_kernel_form_for_independent_draws():
    """Independent draws with the controls past as many third-order columns as coalitions solve
    in kernel form (rows x rows); counting the C(M, 3) columns instead (3 (M + 4060)^2 floats,
    about 200 MB at M = 30) made the planner explain one row per chunk."""
    rng = np.random.default_rng(0)
    m = 30
    w = jnp.asarray(rng.normal(size=m), jnp.float32)
    bg = rng.normal(size=(10, m)).astype(np.float32)
    ex = jaxshap.KernelExplainer(lambda X: X @ w, bg, 2 * m + 2, third_order=True, shared_coalitions=False)
    assert ex.third_order and ex._solve_set_per_row() < 2**20
    assert ex._plan(64)[0] >= 8


def test_planner_does_not_shrink_the_models_chunk_for_a_row_solve():
    """A per-row prior's arrays exist only once the row's evaluations are done, so they count
    against the budget but not against the evaluations' (cache-sized) chunk: they had cut it
    from 77 coalitions to 32 at M = 100 with 100 background rows, and the model then ran slower."""
    rng = np.random.default_rng(0)
    m = 100
    w = jnp.asarray(rng.normal(size=m), jnp.float32)
    bg = rng.normal(size=(100, m)).astype(np.float32)
    make = lambda **kw: jaxshap.KernelExplainer(lambda X: X @ w, bg, 2000, **kw)
    auto, plain = make(prior="auto"), make(third_order=False)
    assert auto._solve_set_per_row() > 10 * plain._solve_set_per_row() > 0
    assert auto._plan(40) == plain._plan(40) and auto._plan(40)[0] == 1
    # rows whose evaluations are small are cut by their solves: two rows' solves fit, not three
    one = lambda **kw: jaxshap.KernelExplainer(lambda X: X @ w, bg[:1], 2000, prior="auto", **kw)
    room = 2 * (one()._working_set_per_row() + one()._solve_set_per_row()) + 1
    assert one(third_order=False, memory_budget=room)._plan(40)[0] > 2
    assert one(memory_budget=room)._plan(40)[0] == 2


def test_chunk_capacity_counts_the_solve_against_the_budget_only():
    budget = 2**30
    evals = chunking.chunk_bytes(budget)
    rows, coalitions = chunking.chunk_capacity(10, 1, 100, budget, 24, 0, 0)
    assert coalitions == 10 and rows == evals // 1024  # the evaluations and the working set
    rows_solve, _ = chunking.chunk_capacity(10, 1, 100, budget, 24, 0, budget // 8)
    assert rows_solve == min(rows, budget // (24 + budget // 8))  # at most 7 rows' solves
    one, part = chunking.chunk_capacity(10, 1, 100, 2**30, 24, 0, 2**29)
    assert one == 1 and part == 10  # a large solve never shrinks a row's evaluations


# --- the persistent compilation cache ------------------------------------------------------------


def test_enable_compilation_cache_writes_and_a_second_process_reads(tmp_path):
    code = textwrap.dedent(
        f"""
        import time, jax, jax.numpy as jnp, numpy as np, jaxshap
        path = jaxshap.enable_compilation_cache({str(tmp_path)!r})
        events = []  # a program the cache cannot store (one with a host callback) records neither a hit nor a miss
        jax.monitoring.register_event_listener(lambda name, **kw: events.append(name.rsplit("/", 1)[-1]))
        rng = np.random.default_rng(0)
        w = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)
        model = lambda X: jnp.tanh(X @ w).sum(-1)
        ex = jaxshap.PermutationExplainer(model, rng.normal(size=(4, 3)), n_permutations=4)
        t = time.perf_counter()
        v = np.asarray(ex(rng.normal(size=(5, 3)), key=0).values)
        # KernelExplainer's shared plan is a program argument (no host callback), so it is cached too
        k = np.asarray(jaxshap.KernelExplainer(model, rng.normal(size=(4, 3)), 4)(rng.normal(size=(5, 3))).values)
        print(time.perf_counter() - t, float(v.sum()) + float(k.sum()), events.count("compile_requests_use_cache"),
              events.count("cache_hits"))
        """
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = lambda: subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    first = run()
    assert first.returncode == 0, first.stderr[-2000:]
    written = set(os.listdir(tmp_path))
    assert written, "nothing was written to the cache"
    second = run()
    assert second.returncode == 0, second.stderr[-2000:]
    assert first.stdout.split()[1] == second.stdout.split()[1]  # same values
    requests, hits = (int(x) for x in second.stdout.split()[2:4])
    assert requests > 0 and hits == requests  # every program came from the cache
    assert set(os.listdir(tmp_path)) == written
    with pytest.raises(ValueError, match="min_compile_seconds"):
        jaxshap.enable_compilation_cache(tmp_path, min_compile_seconds=-1)


# --- one runtime: LinearExplainer ----------------------------------------------------------------


def test_linear_explainer_runs_on_the_shared_runtime(data, monkeypatch):
    background, X = data
    rng = np.random.default_rng(8)
    coef, b = rng.normal(size=M).astype(np.float32), 0.5
    for perturbation in ("interventional", "correlation_dependent"):
        ex = jaxshap.LinearExplainer((coef, b), background, feature_perturbation=perturbation, memory_budget=64)
        assert isinstance(ex, jaxshap._engine._rows.RowExplainer)
        rows, _ = ex._plan(101)
        assert rows < 101  # the tiny budget really cuts the rows into chunks
        one = np.asarray(ex(X).values)
        expected_fx = X @ coef + b
        np.testing.assert_allclose(one.sum(1) + np.asarray(ex(X).base_values), expected_fx, rtol=1e-4, atol=1e-4)
        if perturbation == "interventional":
            np.testing.assert_allclose(one, coef * (X - background.mean(0)), rtol=1e-5, atol=1e-6)
        monkeypatch.setattr(chunking, "BLOCK_EVALS", 1)
        monkeypatch.setattr(chunking, "TARGET_BLOCKS", 4)
        np.testing.assert_allclose(np.asarray(ex(X, progress=True, devices="local").values), one, rtol=1e-6, atol=1e-6)
        streamed = np.concatenate([np.asarray(e.values) for e in ex.explain_batches(X, batch_size=30)])
        np.testing.assert_allclose(streamed, one, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(jax.jit(lambda e, X: e(X).values)(ex, X), one, rtol=1e-6, atol=1e-6)
        monkeypatch.undo()


def test_seed_keys_are_jax_keys():
    """An int seed (and the default None) gives exactly jax.random.key(seed), built without compiling."""
    from jaxshap._core._inputs import as_key

    for seed in (0, 1, 7, 2**31 - 1, 2**31, 2**40 + 3):
        want = np.asarray(jax.random.key_data(jax.random.key(seed)))
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(as_key(seed))), want)
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(as_key(None))), [0, 0])


def test_host_key_bits_are_the_keys_bits():
    """The bits a NumPy generator is seeded with are those of the key ``as_key`` makes, for the
    seeds read on the host and for the keys that go through JAX; bad keys are refused alike."""
    from jaxshap._core._inputs import as_key, host_key_bits

    for key in (None, 0, 7, np.int64(12), 2**31 - 1, 2**31, 2**40 + 3, -1, jax.random.key(5),
                jax.random.PRNGKey(9), np.array([3, 4], np.uint32)):
        got = host_key_bits(key)
        assert isinstance(got, np.ndarray) and got.dtype == np.uint32
        want = as_key(key)
        want = jax.random.key_data(want) if jnp.issubdtype(want.dtype, jax.dtypes.prng_key) else want
        np.testing.assert_array_equal(got, np.asarray(want))
    for bad in (1.5, True, "0", 2**63):
        with pytest.raises((TypeError, ValueError), match="`key`"):
            host_key_bits(bad)
