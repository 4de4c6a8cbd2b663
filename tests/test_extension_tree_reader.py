"""Adding a tree format is one reader: a tiny format and its reader, defined here, outside the package.

``TinyForest`` holds depth-2 trees as dictionaries of node arrays; ``TinyForestReader`` (a
``jaxshap.trees.TreeReader``) registers itself when it is defined. ``TreeExplainer`` and
``jaxshap.Explainer`` must then explain it, with values equal to brute-force oracles written from
the definitions (``tests/oracle.py``): exact Shapley values of ``v(S) = mean_b f(x_S, b_{-S})``
(interventional) and of the cover-weighted expectation (path-dependent), both enumerating every
coalition in NumPy with the format's own trees.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from oracle import interventional_shapley, shapley_from_game

import jaxshap
from jaxshap import trees

M = 4


class TinyForest:
    """A sum of binary trees plus a bias; each tree a dict of node arrays (``left = -1`` at
    leaves); ``x[feature] <= threshold`` goes left."""

    def __init__(self, trees_, bias: float):
        self.trees, self.bias, self.n_features = trees_, bias, M

    def tree_output(self, tree: dict, x: np.ndarray) -> float:
        node = 0
        while tree["left"][node] >= 0:
            go_left = x[tree["feature"][node]] <= tree["threshold"][node]
            node = tree["left"][node] if go_left else tree["right"][node]
        return tree["value"][node]

    def predict(self, X: np.ndarray, n_trees: int | None = None) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, np.float64))
        used = self.trees[:n_trees]
        return np.array([self.bias + sum(self.tree_output(t, x) for t in used) for x in X])


class TinyRows:
    """The format's own row container (read by the reader's ``input_rows``)."""

    def __init__(self, values: np.ndarray, names: list[str]):
        self.values, self.names = values, names


class TinyForestReader(trees.TreeReader):
    formats = "tests: TinyForest"

    def recognises(self, model):
        return isinstance(model, TinyForest)

    def read(self, model):
        stacked = [
            trees.make_tree(t["feature"], t["threshold"], t["left"], t["right"], np.ones(len(t["left"]), bool),
                            t["value"], t["cover"])
            for t in model.trees
        ]
        return trees.stack_trees(stacked, model.bias, model.n_features, "TinyForest", precision=np.float64,
                                 output_transform="identity", loss="squared_error")

    def raw_output(self, model, ensemble, X):
        return model.predict(X, ensemble.n_rounds)[:, None]

    def input_rows(self, x):
        return (np.asarray(x.values, np.float64), list(x.names)) if isinstance(x, TinyRows) else None


def _tree(feature, threshold, left, right, value, cover) -> dict:
    return {"feature": np.array(feature), "threshold": np.array(threshold), "left": np.array(left),
            "right": np.array(right), "value": np.array(value, np.float64), "cover": np.array(cover, np.float64)}


def _forest() -> TinyForest:
    # tree 1: x0 <= 0.5 ? (x1 <= 0.3 ? a : b) : (x2 <= 0.7 ? c : d)
    one = _tree([0, 1, 2, -1, -1, -1, -1], [0.5, 0.3, 0.7, 0, 0, 0, 0], [1, 3, 5, -1, -1, -1, -1],
                [2, 4, 6, -1, -1, -1, -1], [0, 0, 0, 1.5, -0.5, 2.0, -1.25], [10, 6, 4, 2, 4, 3, 1])
    # tree 2: x3 <= 0.2 ? e : (x3 <= 0.6 ? f : g) -- feature 3 twice on one path
    two = _tree([3, -1, 3, -1, -1], [0.2, 0, 0.6, 0, 0], [1, -1, 3, -1, -1], [2, -1, 4, -1, -1],
                [0, 0.75, 0, -2.0, 0.5], [10, 3, 7, 5, 2])
    return TinyForest([one, two], bias=0.25)


def path_dependent_oracle(model: TinyForest, x: np.ndarray) -> np.ndarray:
    """``v(S)``: each tree follows ``x`` at splits on features in ``S`` and averages both children
    by cover elsewhere (Lundberg et al. 2020)."""

    def expect(tree, node, s):
        if tree["left"][node] < 0:
            return tree["value"][node]
        left, right = tree["left"][node], tree["right"][node]
        if tree["feature"][node] in s:
            return expect(tree, left if x[tree["feature"][node]] <= tree["threshold"][node] else right, s)
        cl, cr = tree["cover"][left], tree["cover"][right]
        return (cl * expect(tree, left, s) + cr * expect(tree, right, s)) / (cl + cr)

    return shapley_from_game(lambda s: model.bias + sum(expect(t, 0, s) for t in model.trees), M)


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    return _forest(), rng.random((24, M)), rng.random((6, M))


def test_readers_register_themselves_newest_first():
    kinds = [type(r) for r in jaxshap.trees.readers()]
    assert TinyForestReader in kinds and BrokenTinyReader in kinds
    assert kinds.index(BrokenTinyReader) < kinds.index(TinyForestReader)


def test_interventional_values_equal_the_oracle_and_are_efficient(setup):
    model, bg, rows = setup
    expl = jaxshap.TreeExplainer(model, bg)(rows)
    assert expl.values.shape == (rows.shape[0], M)
    oracle = interventional_shapley(model.predict, rows, bg)
    np.testing.assert_allclose(np.asarray(expl.values), oracle, rtol=1e-5, atol=1e-5)
    total = np.asarray(expl.values).sum(1) + np.asarray(expl.base_values)
    np.testing.assert_allclose(total, model.predict(rows), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(expl.base_values), model.predict(bg).mean(), rtol=1e-5, atol=1e-6)
    assert jaxshap.TreeExplainer(model, bg)(rows[:0]).values.shape == (0, M)


def test_path_dependent_values_equal_the_oracle(setup):
    model, _, rows = setup
    ex = jaxshap.TreeExplainer(model)
    expl = ex(rows)
    oracle = np.stack([path_dependent_oracle(model, x) for x in rows])
    np.testing.assert_allclose(np.asarray(expl.values), oracle, rtol=1e-5, atol=1e-5)
    total = np.asarray(expl.values).sum(1) + np.asarray(expl.base_values)
    np.testing.assert_allclose(total, model.predict(rows), rtol=1e-5, atol=1e-5)
    # the base value is the empty coalition's value: each tree's cover-weighted mean leaf value
    np.testing.assert_allclose(float(ex.expected_value), 0.25 + (2 * 1.5 + 4 * -0.5 + 3 * 2.0 + 1 * -1.25) / 10
                               + (3 * 0.75 + 5 * -2.0 + 2 * 0.5) / 10, rtol=1e-6)


def test_auto_explainer_picks_tree_explainer(setup):
    model, bg, rows = setup
    ex = jaxshap.Explainer(model, bg)
    assert isinstance(ex, jaxshap.TreeExplainer) and "tree model" in ex.chosen_by_auto
    oracle = interventional_shapley(model.predict, rows, bg)
    np.testing.assert_allclose(np.asarray(ex(rows).values), oracle, rtol=1e-5, atol=1e-5)


def test_tree_limit_and_the_readers_raw_output(setup):
    model, bg, rows = setup
    first = TinyForest(model.trees[:1], model.bias)
    ours = jaxshap.TreeExplainer(model, bg)(rows, tree_limit=1)  # checked against raw_output's first tree
    np.testing.assert_allclose(np.asarray(ours.values),
                               interventional_shapley(first.predict, rows, bg), rtol=1e-5, atol=1e-5)


def test_the_formats_row_container_and_interactions(setup):
    model, bg, rows = setup
    names = ["a", "b", "c", "d"]
    ex = jaxshap.TreeExplainer(model, TinyRows(bg, names))
    expl = ex(TinyRows(rows, names), interactions=True)  # shap's layout: the values are the [n, M, M] matrices
    assert expl.feature_names == names
    plain = np.asarray(ex(TinyRows(rows, names)).values)
    np.testing.assert_array_equal(np.asarray(expl.values), np.asarray(expl.interaction_values))
    np.testing.assert_allclose(np.asarray(expl.interaction_values).sum(-1), plain, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(plain, np.asarray(ex(rows).values), rtol=1e-6, atol=1e-7)


class BrokenTinyForest(TinyForest):
    """The same trees; its reader's ``raw_output`` is off by one."""


class BrokenTinyReader(TinyForestReader):
    """Registered after ``TinyForestReader``, so it is asked first, and takes over its subclass."""

    def recognises(self, model):
        return isinstance(model, BrokenTinyForest)

    def raw_output(self, model, ensemble, X):
        return super().raw_output(model, ensemble, X) + 1.0


def test_additivity_is_checked_against_the_readers_raw_output(setup):
    model, bg, rows = setup
    broken = BrokenTinyForest(model.trees, model.bias)
    with pytest.raises(RuntimeError, match="Additivity"):
        jaxshap.TreeExplainer(broken, bg)(rows)
    values = jaxshap.TreeExplainer(broken, bg)(rows, check_additivity=False).values
    np.testing.assert_allclose(np.asarray(values), np.asarray(jaxshap.TreeExplainer(model, bg)(rows).values))


def test_pickles_and_unknown_models_name_the_format(setup, tmp_path):
    model, bg, rows = setup
    ex = jaxshap.TreeExplainer(model, bg)
    again = pickle.loads(pickle.dumps(ex))
    np.testing.assert_allclose(np.asarray(again(rows).values), np.asarray(ex(rows).values))
    with pytest.raises(TypeError, match="tests: TinyForest"):
        jaxshap.TreeExplainer(object())


class SpyReader(trees.TreeReader, register=False):
    """Reads nothing; records the models and rows it is asked about."""

    formats = "tests: nothing"

    def __init__(self):
        self.asked, self.rows = [], []

    def recognises(self, model):
        self.asked.append(type(model).__name__)
        return False

    def read(self, model):  # pragma: no cover - recognises nothing
        raise AssertionError

    def input_rows(self, x):
        self.rows.append(type(x).__name__)
        return None


class OtherLibrarySpy(SpyReader, register=False):
    modules = ("lightgbm",)


class OwnModuleSpy(SpyReader, register=False):
    modules = (TinyForest.__module__.split(".")[0],)


class AnywhereSpy(SpyReader, register=False):
    pass


def test_only_the_readers_of_the_models_module_are_asked(setup, monkeypatch):
    """A reader that names another library's module is not asked about this format's models nor
    rows; one that names the model's module, or none, is; an unknown model is offered to every
    reader before the error lists the supported formats."""
    from jaxshap._tree import _reader

    monkeypatch.setattr(_reader, "_REGISTRY", list(_reader._REGISTRY))  # the spies leave with the test
    other, own, anywhere = OtherLibrarySpy(), OwnModuleSpy(), AnywhereSpy()
    for spy in (other, own, anywhere):
        _reader.register_reader(spy)
    model, bg, rows = setup
    expl = jaxshap.TreeExplainer(model, bg)(rows)
    assert expl.values.shape == (rows.shape[0], M)
    assert other.asked == [] and other.rows == []
    assert "TinyForest" in own.asked and "TinyForest" in anywhere.asked
    assert anywhere.rows and not own.rows  # numpy rows: only the reader that names no module reads them

    class Unknown:
        pass

    with pytest.raises(TypeError, match="Supported models: .*tests: TinyForest"):
        jaxshap.TreeExplainer(Unknown())
    assert other.asked == ["Unknown"]  # asked once no reader of the model's own module recognised it
