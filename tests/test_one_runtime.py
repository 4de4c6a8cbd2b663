"""Every explainer on the shared runtime (RowExplainer): ``devices=``, ``progress=``,
``explain_batches``, padded row counts and one compiled program per configuration.

Compilations are counted through the model: a JAX model's Python body runs only while JAX
traces it, so a counter in it counts the programs built around it (as in test_runtime.py).
"""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
import jaxshap._core._chunking as chunking
from jaxshap._engine._rows import RowExplainer
from conftest import CountCompiles

# Different chunk and block shapes may reorder float32 sums inside the model (last-bit changes);
# a wrong key or a misplaced row would change values by about 1e-1.
CLOSE = dict(rtol=1e-5, atol=1e-6)
M, N_BG, N = 4, 8, 37
TRACES = {"n": 0}


def mlp(params, X):
    TRACES["n"] += 1
    return jnp.tanh(X @ params["w1"]) @ params["w2"]


def make_params(seed):
    rng = np.random.default_rng(seed)
    return {"w1": jnp.asarray(rng.normal(size=(M, 8)), jnp.float32), "w2": jnp.asarray(rng.normal(size=8), jnp.float32)}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    return rng.normal(size=(N_BG, M)).astype(np.float32), rng.normal(size=(N, M)).astype(np.float32)


@pytest.fixture
def small_blocks(monkeypatch):
    """Host-level blocks of a few rows, so short runs are cut into several blocks."""
    monkeypatch.setattr(chunking, "BLOCK_EVALS", 1)
    monkeypatch.setattr(chunking, "TARGET_BLOCKS", 5)


def check_runtime_options(ex, X, key, reference):
    """``progress=`` (blocks), ``devices=``, streams of uneven batches and an array stream all
    give the values of one plain call."""
    for kwargs in (dict(progress=True), dict(devices=jax.devices()), dict(devices="local"), dict(progress=True, devices="local")):
        np.testing.assert_allclose(np.asarray(ex(X, key=key, **kwargs).values), reference, **CLOSE)
    cuts = [0, 12, 24, 36, len(X)]
    out = list(ex.explain_batches((X[a:b] for a, b in zip(cuts, cuts[1:])), key=key))
    assert [len(e) for e in out] == [12, 12, 12, len(X) - 36]
    np.testing.assert_allclose(np.concatenate([np.asarray(e.values) for e in out]), reference, **CLOSE)
    np.testing.assert_array_equal(np.asarray(out[1].data), X[12:24])
    streamed = list(ex.explain_batches(X, key=key, batch_size=10, progress=True, devices=jax.devices()))
    assert [len(e) for e in streamed] == [10, 10, 10, 7]
    np.testing.assert_allclose(np.concatenate([np.asarray(e.values) for e in streamed]), reference, **CLOSE)


# --- GradientExplainer ---------------------------------------------------------------------------


def test_gradient_explainer_takes_the_runtime_options(data, small_blocks):
    background, X = data
    ex = jaxshap.GradientExplainer(lambda Z: mlp(make_params(0), Z), background, n_samples=16)
    assert isinstance(ex, RowExplainer)
    reference = np.asarray(ex(X, key=3, progress=False).values)
    other_key = np.asarray(ex(X, key=4, progress=False).values)
    assert np.abs(reference - other_key).max() > 1e-3  # the key matters, so the checks below can fail
    check_runtime_options(ex, X, 3, reference)
    # stderr travels through blocks and streams too
    a = ex(X, key=3, progress=False).stderr
    b = np.concatenate([np.asarray(e.stderr) for e in ex.explain_batches(X, key=3, batch_size=10)])
    np.testing.assert_allclose(b, np.asarray(a), **CLOSE)


def test_gradient_explainer_new_rows_and_second_instance_do_not_recompile(data):
    background, X = data
    from functools import partial

    ex = jaxshap.GradientExplainer(partial(mlp, make_params(1)), background, n_samples=8)
    ex(X[:30], key=1)
    before = TRACES["n"]
    out = {n: ex(X[:n], key=1) for n in (N, 20)}  # (far fewer rows may compile a smaller chunk)
    second = jaxshap.GradientExplainer(partial(mlp, make_params(2)), background + 1, n_samples=8)
    second_values = second(X[:20], key=1).values
    assert TRACES["n"] == before, "a new row count or a second instance recompiled the program"
    full = ex(X, key=1).values
    for n, expl in out.items():
        assert expl.values.shape == (n, M)
        np.testing.assert_allclose(np.asarray(expl.values), np.asarray(full[:n]), **CLOSE)
    # the second instance used its own arrays (no stale constants in the shared program)
    fresh = jaxshap.GradientExplainer(lambda Z: mlp(make_params(2), Z), background + 1, n_samples=8)
    np.testing.assert_allclose(np.asarray(second_values), np.asarray(fresh(X[:20], key=1).values), **CLOSE)


def linear(params, X):
    return X @ params["w"]


def test_gradient_explainer_is_a_pytree_for_jit_and_grad(data):
    from functools import partial

    background, X = data
    params = {"w": jnp.asarray(np.random.default_rng(5).normal(size=M), jnp.float32)}
    ex = jaxshap.GradientExplainer(partial(linear, params), background, n_samples=N_BG)  # exact: w (x - mean b)
    leaves = jax.tree_util.tree_leaves(ex)
    assert len(leaves) == 2 and any(leaf is params["w"] for leaf in leaves)  # background and w
    explain = jax.jit(lambda e, X: e(X, key=2).values)
    d = X - background.mean(0)
    np.testing.assert_allclose(np.asarray(explain(ex, X)), np.asarray(params["w"]) * d, rtol=1e-4, atol=1e-5)
    # the gradient with respect to the explainer reaches the model's parameters
    g = jax.grad(lambda e: (e(X, key=2).values ** 2).sum())(ex)
    assert isinstance(g, jaxshap.GradientExplainer)
    want = 2 * np.asarray(params["w"]) * (d**2).sum(0)
    np.testing.assert_allclose(np.asarray(g.model.model.args[0]["w"]), want, rtol=1e-4)


def test_gradient_explainer_zero_rows(data):
    background, _ = data
    ex = jaxshap.GradientExplainer(lambda Z: jnp.tanh(Z) @ jnp.ones((M, 2)), background, n_samples=4)
    expl = ex(np.zeros((0, M), np.float32))
    assert expl.values.shape == (0, M, 2) and expl.stderr.shape == (0, M, 2) and expl.base_values.shape == (0, 2)


# --- integrated_gradients ------------------------------------------------------------------------


def test_integrated_gradients_runtime_options_and_no_recompile(data, small_blocks):
    from functools import partial

    background, X = data
    model = partial(mlp, make_params(4))
    B = background[np.arange(N) % N_BG]  # one baseline per row
    reference = jaxshap.integrated_gradients(model, X, B, n_steps=8)
    shared = jaxshap.integrated_gradients(model, X, background[0], n_steps=8)
    assert np.abs(np.asarray(reference.values) - np.asarray(shared.values)).max() > 1e-3  # baselines matter
    for kwargs in (dict(progress=True), dict(devices=jax.devices()), dict(devices="local", progress=True)):
        out = jaxshap.integrated_gradients(model, X, B, n_steps=8, **kwargs)
        np.testing.assert_allclose(np.asarray(out.values), np.asarray(reference.values), **CLOSE)
        np.testing.assert_allclose(np.asarray(out.base_values), np.asarray(reference.base_values), **CLOSE)
    before = TRACES["n"]
    for n in (30, 20):  # a new row count, and a new baseline, reuse the program
        part = jaxshap.integrated_gradients(model, X[:n], background[1], n_steps=8)
    assert TRACES["n"] == before, "a new row count recompiled integrated_gradients"
    want = jaxshap.integrated_gradients(model, X, background[1], n_steps=8).values[:20]
    np.testing.assert_allclose(np.asarray(part.values), np.asarray(want), **CLOSE)
    empty = jaxshap.integrated_gradients(model, X[:0], n_steps=8)
    assert empty.values.shape == (0, M) and empty.base_values.shape == (0,)


# --- AmortizedExplainer --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def amortized(data):
    from functools import partial

    background, X = data
    model = partial(mlp, make_params(6))
    ex = jaxshap.AmortizedExplainer(model, background, hidden=(8,), n_coalitions=4)
    ex.fit(X, key=0, epochs=2, batch_size=16, validation=4, progress=False)
    return model, ex


def test_amortized_explainer_takes_the_runtime_options(data, amortized, small_blocks):
    _, X = data
    model, ex = amortized
    assert isinstance(ex, RowExplainer)
    plain = ex(X)
    # the values are the normalised network output: recompute them from the parameters
    want = ex._phi(ex.params, jnp.asarray(X), ex.model.fn(jnp.asarray(X)))[..., 0]
    np.testing.assert_allclose(np.asarray(plain.values), np.asarray(want), **CLOSE)
    np.testing.assert_allclose(np.asarray(plain.values.sum(1) + plain.base_values), np.asarray(model(X)), rtol=1e-5, atol=1e-5)
    check_runtime_options(ex, X, None, np.asarray(plain.values))


def test_amortized_new_rows_and_a_loaded_copy_do_not_recompile(data, amortized, tmp_path):
    _, X = data
    model, ex = amortized
    full = ex(X).values
    before = TRACES["n"]
    out = {n: ex(X[:n]) for n in (30, 20)}
    path = str(tmp_path / "ex.npz")
    ex.save(path)
    loaded = jaxshap.AmortizedExplainer.load(path, model)
    np.testing.assert_array_equal(np.asarray(loaded(X[:20]).values), np.asarray(out[20].values))
    assert TRACES["n"] == before, "a new row count or a loaded copy recompiled the program"
    for n, expl in out.items():
        np.testing.assert_allclose(np.asarray(expl.values), np.asarray(full[:n]), **CLOSE)
    # a retrained network of the same shapes: new leaves, the same program, its own values
    other = jaxshap.AmortizedExplainer.load(path, model)
    other.params = jax.tree_util.tree_map(lambda a: a * 1.5, ex.params)
    values = other(X[:20]).values
    assert TRACES["n"] == before
    want = other._phi(other.params, jnp.asarray(X[:20]), other.model.fn(jnp.asarray(X[:20])))[..., 0]
    np.testing.assert_allclose(np.asarray(values), np.asarray(want), **CLOSE)
    assert np.abs(np.asarray(values) - np.asarray(out[20].values)).max() > 1e-3
    with pytest.raises(ValueError, match="not trained"):
        next(jaxshap.AmortizedExplainer(model, X[:8], hidden=(8,)).explain_batches(X))


# --- TreeExplainer -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def forest(data):
    xgboost = pytest.importorskip("xgboost")
    background, X = data
    rng = np.random.default_rng(12)
    X_train = rng.normal(size=(200, M)).astype(np.float32)
    y = (X_train[:, 0] + X_train[:, 1] * X_train[:, 2] > 0).astype(np.float32)
    clf = xgboost.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(X_train, y)
    labels = (X[:, 0] > 0).astype(np.float32)
    return clf, background, X, labels


@pytest.mark.parametrize("mode", ["path", "interventional", "log_loss", "predict_proba"])
def test_tree_explainer_takes_the_runtime_options(forest, small_blocks, mode):
    clf, background, X, labels = forest
    kwargs = {"path": {}, "interventional": dict(data=background)}.get(mode, dict(data=background, model_output=mode))
    ex = jaxshap.TreeExplainer(clf, **kwargs)
    y = labels if mode == "log_loss" else None
    plain = ex(X, y=y)  # checks additivity against XGBoost's own output
    assert plain.values.shape == ((N, M, 2) if mode == "predict_proba" else (N, M))
    reference = np.asarray(plain.values)
    for options in (dict(progress=True), dict(devices=jax.devices()), dict(devices="local", progress=True)):
        out = ex(X, y=y, **options)
        np.testing.assert_allclose(np.asarray(out.values), reference, **CLOSE)
        np.testing.assert_allclose(np.asarray(out.base_values), np.asarray(plain.base_values), **CLOSE)
    streamed = list(ex.explain_batches(X, y=y, batch_size=10, progress=True, devices="local"))
    assert [len(e) for e in streamed] == [10, 10, 10, 7]
    np.testing.assert_allclose(np.concatenate([np.asarray(e.values) for e in streamed]), reference, **CLOSE)
    np.testing.assert_allclose(
        np.concatenate([np.asarray(e.base_values) for e in streamed]), np.asarray(plain.base_values), **CLOSE
    )
    cuts = [0, 12, 24, N]
    pieces = [X[a:b] for a, b in zip(cuts, cuts[1:])]
    label_pieces = None if y is None else [y[a:b] for a, b in zip(cuts, cuts[1:])]
    out = list(ex.explain_batches(iter(pieces), y=label_pieces))
    np.testing.assert_allclose(np.concatenate([np.asarray(e.values) for e in out]), reference, **CLOSE)
    np.testing.assert_array_equal(np.asarray(out[1].data), X[12:24])


def test_tree_explainer_new_rows_and_second_instance_do_not_recompile(forest):
    clf, background, X, _ = forest
    ex = jaxshap.TreeExplainer(clf, background)
    full = ex(X).values
    with CountCompiles() as compiles:
        out = {n: ex(X[:n]) for n in (30, 20)}
        second = jaxshap.TreeExplainer(clf, background[::-1])  # same tables' shapes, other values
        second_values = second(X[:20]).values
    assert compiles.names == [], compiles.names  # not even a small program for the new counts
    for n, expl in out.items():
        np.testing.assert_allclose(np.asarray(expl.values), np.asarray(full[:n]), **CLOSE)
    np.testing.assert_allclose(np.asarray(second_values), np.asarray(out[20].values), **CLOSE)  # same background set
    third = jaxshap.TreeExplainer(clf, background[:3])
    assert np.abs(np.asarray(third(X[:20]).values) - np.asarray(out[20].values)).max() > 1e-3
    assert ex(X[:0]).values.shape == (0, M)


# --- four devices (a subprocess: XLA flags must precede the jax import) ---------------------------

FOUR_DEVICES = """
import jax, jax.numpy as jnp, numpy as np, jaxshap, xgboost
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxshap._estimators._fastshap import init_mlp
assert jax.device_count() == 4, jax.devices()
rng = np.random.default_rng(0)
w1, w2 = rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32)
model = lambda X: jnp.tanh(X @ w1) @ w2
bg, X = rng.normal(size=(8, 4)).astype(np.float32), rng.normal(size=(42, 4)).astype(np.float32)
mesh = jax.make_mesh((4,), ("batch",))
Xs = jax.device_put(X[:40], NamedSharding(mesh, P("batch")))
close = lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
amortized = jaxshap.AmortizedExplainer(model, bg, hidden=(8,))
amortized.params = init_mlp(jax.random.key(0), (4, 8, 4), jnp.float32)
clf = xgboost.XGBRegressor(n_estimators=5, max_depth=3, n_jobs=1).fit(X, X[:, 0] * X[:, 1])
cases = {
    "gradient": lambda **kw: jaxshap.GradientExplainer(model, bg, n_samples=8)(kw.pop("X", X), key=5, **kw),
    "ig": lambda **kw: jaxshap.integrated_gradients(model, kw.pop("X", X), bg[0], n_steps=4, **kw),
    "amortized": lambda **kw: amortized(kw.pop("X", X), **kw),
    "tree": lambda **kw: jaxshap.TreeExplainer(clf, bg)(kw.pop("X", X), **kw),
}
for name, run in cases.items():
    one = np.asarray(jax.device_put(run(progress=False).values, jax.devices()[0]))
    close(run(devices="local").values, one)  # 42 rows: not a multiple of the devices
    e = run(X=Xs)  # rows sharded over a mesh are explained where they lie (trees route them on the host first)
    assert e.values.sharding.spec[0] == "batch", (name, e.values.sharding)
    close(e.values, one[:40])
    print(name, "OK", flush=True)
print("OK")
"""


def test_every_explainer_on_four_devices_matches_one_device():
    pytest.importorskip("xgboost")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    result = subprocess.run([sys.executable, "-c", FOUR_DEVICES], env=env, capture_output=True, text=True,
                            timeout=300, cwd=root)
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stderr[-3000:]
