"""TreeExplainer on ONNX tree ensembles (TreeEnsembleRegressor / TreeEnsembleClassifier).

Oracles: onnxruntime's outputs (when installed) and the original scikit-learn model's
predictions, for routing; jaxshap's TreeExplainer on the original scikit-learn model (itself
tested against shap) and brute-force Shapley values over all coalitions from the scikit-learn
model's predictions, for the attributions. Models come from skl2onnx (when installed) and from
``onnx.helper`` here, node by node, to reach every split mode, missing-value rule and attribute.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import jaxshap
from oracle import shapley_from_game

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier  # noqa: E402
from sklearn.ensemble import RandomForestRegressor  # noqa: E402
from sklearn.tree import DecisionTreeRegressor  # noqa: E402

from jaxshap._tree._reader import import_model  # noqa: E402

M = 4


def _data(n=300, nan=False, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, M)).astype(np.float32)
    y = 2 * X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 3]
    if nan:
        X[rng.random(X.shape) < 0.1] = np.nan
    return X, y


def _round_down(t):
    """The largest float32 not above each float64 threshold (routes every float32 as ``<= t``)."""
    r = np.asarray(t, np.float64).astype(np.float32)
    return np.where(r.astype(np.float64) > t, np.nextafter(r, np.float32(-np.inf)), r)


def _onnx_model(trees, *, classes=None, n_targets=1, mode="BRANCH_LEQ", hitrates=None, aggregate="SUM",
                post="NONE", base=None, input_type=TensorProto.FLOAT, cast_to=None, as_tensor=False, node_ids=None):
    """An ONNX model from scikit-learn trees ``[(tree_, leaf values [N], output)]``, built here node by node.

    ``mode``: the comparison every split uses (``BRANCH_GT`` / ``BRANCH_LEQ`` route as
    scikit-learn does; ``BRANCH_LT`` / ``BRANCH_GTE`` differ at the thresholds); NaN goes where
    scikit-learn sends it. ``hitrates``: ``"counts"``, ``"fractions"``, ``"ones"`` or None.
    ``node_ids``: a function of the node index giving its ONNX id.
    """
    ids = node_ids or (lambda i: i)
    a = {k: [] for k in ("treeids", "nodeids", "featureids", "values", "modes", "true", "false", "tracks", "hit")}
    leaves = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t, (tree, value, out) in enumerate(trees):
        greater = mode in ("BRANCH_GT", "BRANCH_GTE")  # the true branch is scikit-learn's right child
        for i in range(tree.node_count):
            leaf = tree.children_left[i] < 0
            mgl = bool(tree.missing_go_to_left[i]) if hasattr(tree, "missing_go_to_left") else False
            left, right = ids(int(tree.children_left[i])), ids(int(tree.children_right[i]))
            a["treeids"].append(t)
            a["nodeids"].append(ids(i))
            a["featureids"].append(0 if leaf else int(tree.feature[i]))
            a["values"].append(0.0 if leaf else float(_round_down(tree.threshold[i])))
            a["modes"].append("LEAF" if leaf else mode)
            a["true"].append(0 if leaf else (right if greater else left))
            a["false"].append(0 if leaf else (left if greater else right))
            a["tracks"].append(int(mgl != greater))
            w = tree.weighted_n_node_samples[i]
            a["hit"].append({"counts": w, "fractions": w / tree.weighted_n_node_samples[0], "ones": 1.0}.get(hitrates, 0))
            if leaf:
                for key, v in zip(leaves, (t, ids(i), out, float(value[i]))):
                    leaves[key].append(v)
    p = "class" if classes is not None else "target"
    attrs = dict(nodes_treeids=a["treeids"], nodes_nodeids=a["nodeids"], nodes_featureids=a["featureids"],
                 nodes_modes=a["modes"], nodes_truenodeids=a["true"], nodes_falsenodeids=a["false"],
                 nodes_missing_value_tracks_true=a["tracks"], post_transform=post,
                 **{f"{p}_treeids": leaves["treeids"], f"{p}_nodeids": leaves["nodeids"], f"{p}_ids": leaves["ids"]})
    if as_tensor:  # tensors of the type the node reads (onnxruntime requires it)
        dtype = np.float64 if (cast_to or input_type) == TensorProto.DOUBLE else np.float32
        attrs["nodes_values_as_tensor"] = onnx.numpy_helper.from_array(np.asarray(a["values"], dtype))
        attrs[f"{p}_weights_as_tensor"] = onnx.numpy_helper.from_array(np.asarray(leaves["weights"], dtype))
    else:
        attrs["nodes_values"], attrs[f"{p}_weights"] = a["values"], leaves["weights"]
    if hitrates:
        attrs["nodes_hitrates"] = a["hit"]
    if base is not None:
        attrs["base_values"] = list(np.asarray(base, np.float64).reshape(-1))
    if classes is None:
        attrs.update(n_targets=n_targets, aggregate_function=aggregate)
        op, outputs, out_info = "TreeEnsembleRegressor", ["variable"], [("variable", TensorProto.FLOAT, [None, n_targets])]
    else:
        attrs["classlabels_int64s"] = list(range(classes))
        op, outputs = "TreeEnsembleClassifier", ["label", "probabilities"]
        out_info = [("label", TensorProto.INT64, [None]), ("probabilities", TensorProto.FLOAT, [None, classes])]
    nodes = [helper.make_node(op, ["x" if cast_to is None else "xc"], outputs, domain="ai.onnx.ml", **attrs)]
    if cast_to is not None:
        nodes.insert(0, helper.make_node("Cast", ["x"], ["xc"], to=cast_to))
    graph = helper.make_graph(nodes, "trees", [helper.make_tensor_value_info("x", input_type, [None, M])],
                              [helper.make_tensor_value_info(*o) for o in out_info])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])


def _run(model, X):
    """onnxruntime's outputs, or a skip when it is not installed."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: X})


def _at_thresholds(model, X):
    """Rows with each split's threshold, and the float32 numbers either side of it, in its feature."""
    e = import_model(model)
    inner = e.feature >= 0
    rows = []
    for k, (f, t) in enumerate(zip(e.feature[inner], e.threshold[inner])):
        for v in (np.float32(t), np.nextafter(np.float32(t), np.float32(np.inf)), np.nextafter(np.float32(t), np.float32(-np.inf))):
            r = X[k % len(X)].copy()
            r[f] = v
            rows.append(r)
    return np.concatenate([X, np.stack(rows)]).astype(np.float32)


@functools.lru_cache(maxsize=None)
def _tree_model(nan=True):
    X, y = _data(nan=nan)
    return DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y), X


def _sklearn_trees(model):
    """``[(tree_, leaf values, output)]`` and the base of a scikit-learn regressor."""
    if isinstance(model, DecisionTreeRegressor):
        return [(model.tree_, model.tree_.value[:, 0, 0], 0)], 0.0
    if isinstance(model, RandomForestRegressor):
        return [(e.tree_, e.tree_.value[:, 0, 0], 0) for e in model.estimators_], 0.0
    trees = [(e.tree_, e.tree_.value[:, 0, 0] * model.learning_rate, k)
             for stage in model.estimators_ for k, e in enumerate(stage)]
    return trees, model._raw_predict_init(np.zeros((1, M), np.float32))[0]


@pytest.mark.parametrize("mode", ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"])
def test_split_modes_and_missing_values_route_as_onnxruntime(mode):
    tree, X = _tree_model()
    trees, _ = _sklearn_trees(tree)
    model = _onnx_model(trees, mode=mode)
    R = _at_thresholds(model, X[:40])
    e = import_model(model)
    assert e.precision is np.float32 and not e.has_cover
    if mode in ("BRANCH_LEQ", "BRANCH_GT"):  # the same splits as scikit-learn's
        np.testing.assert_allclose(e.predict(R)[:, 0], tree.predict(R), rtol=0, atol=1e-6)
    else:  # a value at a threshold goes the other way
        assert np.abs(e.predict(R)[:, 0] - tree.predict(R)).max() > 1e-3
    np.testing.assert_allclose(e.predict(R)[:, 0], _run(model, R)[0][:, 0], rtol=1e-6, atol=1e-6)


def test_node_ids_and_order_do_not_matter():
    tree, X = _tree_model()
    trees, _ = _sklearn_trees(tree)
    plain = import_model(_onnx_model(trees))
    renamed = _onnx_model(trees, node_ids=lambda i: -1 if i < 0 else 1000 - 7 * i)
    shuffled = onnx.ModelProto()
    shuffled.CopyFrom(renamed)
    node = shuffled.graph.node[0]
    perm = np.random.default_rng(0).permutation(tree.tree_.node_count)
    for att in node.attribute:
        if att.name.startswith("nodes_"):
            values = list(helper.get_attribute_value(att))
            att.CopyFrom(helper.make_attribute(att.name, [values[i] for i in perm]))
    np.testing.assert_array_equal(import_model(shuffled).predict(X), plain.predict(X))


def test_double_input_cast_and_tensor_attributes():
    """A double input compares in float64; a Cast to float in front of the node, in float32;
    ``*_as_tensor`` attributes are read."""
    model, X = _tree_model()
    trees, _ = _sklearn_trees(model)
    R = _at_thresholds(_onnx_model(trees), X[:20]).astype(np.float64)
    R[: len(R) // 2] += 1e-9  # float64 values that round to the float32 thresholds
    double = _onnx_model(trees, input_type=TensorProto.DOUBLE, as_tensor=True)
    cast = _onnx_model(trees, input_type=TensorProto.DOUBLE, cast_to=TensorProto.FLOAT, as_tensor=True)
    assert import_model(double).precision is np.float64 and import_model(cast).precision is np.float32
    assert np.abs(import_model(double).predict(R) - import_model(cast).predict(R)).max() > 1e-3
    for m in (double, cast):
        np.testing.assert_allclose(import_model(m).predict(R)[:, 0], _run(m, R)[0][:, 0], rtol=1e-6, atol=1e-6)


def test_average_aggregate_is_the_forest_mean():
    X, y = _data()
    forest = RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0).fit(X, y)
    trees, _ = _sklearn_trees(forest)
    model = _onnx_model(trees, aggregate="AVERAGE", base=[0.25])
    np.testing.assert_allclose(import_model(model).predict(X)[:, 0], forest.predict(X) + 0.25, rtol=0, atol=1e-5)


def _brute_force(predict, x, bg):
    def v(S):
        hybrid = bg.copy()
        hybrid[:, sorted(S)] = x[sorted(S)]
        return np.asarray(predict(hybrid), np.float64).reshape(len(bg), -1).mean(0)

    return shapley_from_game(v, x.size)


def test_interventional_equals_sklearn_model_and_brute_force():
    X, y = _data(nan=True)
    forest = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(X, y)
    model = _onnx_model(_sklearn_trees(forest)[0], aggregate="AVERAGE")
    rows, bg = X[:8], X[100:116]
    ours = jaxshap.TreeExplainer(model, bg)(rows)
    theirs = jaxshap.TreeExplainer(forest, bg)(rows)
    np.testing.assert_allclose(np.asarray(ours.values), np.asarray(theirs.values), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(ours.base_values), np.asarray(theirs.base_values), rtol=1e-5, atol=2e-6)
    for i in (0, 3):
        phi = _brute_force(forest.predict, rows[i], bg)[:, 0]
        np.testing.assert_allclose(np.asarray(ours.values)[i], phi, rtol=1e-5, atol=2e-6)
    with pytest.raises(ValueError, match="node covers.*Pass background rows `data`"):
        jaxshap.TreeExplainer(model)
    with pytest.raises(ValueError, match="approximate=True.*node covers"):
        jaxshap.TreeExplainer(model, bg)(rows, approximate=True)


@pytest.mark.parametrize("hitrates", ["counts", "fractions"])
def test_hitrates_as_covers_give_path_dependent_values(hitrates):
    X, y = _data(nan=True)
    forest = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(X, y)
    trees, base = _sklearn_trees(forest)
    model = _onnx_model(trees, aggregate="AVERAGE", hitrates=hitrates)
    assert import_model(model).has_cover
    ours, theirs = jaxshap.TreeExplainer(model)(X[:10]), jaxshap.TreeExplainer(forest)(X[:10])
    np.testing.assert_allclose(np.asarray(ours.values), np.asarray(theirs.values), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(ours.base_values), np.asarray(theirs.base_values), rtol=1e-5, atol=2e-6)
    assert not import_model(_onnx_model(trees, hitrates="ones")).has_cover  # not counts: no covers


def test_multiclass_classifier_scores_and_softmax():
    X, y = _data()
    target = np.digitize(y, [-1.0, 1.0])
    gbc = GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, target)
    trees = [(e.tree_, e.tree_.value[:, 0, 0] * gbc.learning_rate, k) for stage in gbc.estimators_
             for k, e in enumerate(stage)]
    base = gbc._raw_predict_init(X[:1])[0]
    model = _onnx_model(trees, classes=3, post="SOFTMAX", base=base)
    e = import_model(model)
    assert (e.n_outputs, e.output_transform) == (3, "softmax")
    np.testing.assert_allclose(e.predict(X), gbc.decision_function(X), rtol=0, atol=2e-6)
    bg, rows = X[100:112], X[:3]
    ours = jaxshap.TreeExplainer(model, bg)(rows)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(ours.values)[i], _brute_force(gbc.decision_function, rows[i], bg),
                                   rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["gbr", "gbc_binary", "rf_binary", "gbc_multi"])
def test_skl2onnx_models(kind):
    """Models converted by skl2onnx: onnxruntime's outputs, the scikit-learn model's own
    attributions, and the probability output through post_transform."""
    skl2onnx = pytest.importorskip("skl2onnx")
    X, y = _data()
    fit = {"gbr": lambda: GradientBoostingRegressor(n_estimators=4, max_depth=3).fit(X, y),
           "gbc_binary": lambda: GradientBoostingClassifier(n_estimators=4, max_depth=2).fit(X, y > 0),
           "rf_binary": lambda: RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y > 0),
           "gbc_multi": lambda: GradientBoostingClassifier(n_estimators=3, max_depth=2).fit(X, np.digitize(y, [-1, 1]))}
    sk = fit[kind]()
    options = {id(sk): {"zipmap": False}} if kind != "gbr" else None
    model = skl2onnx.to_onnx(sk, X[:1], options=options, target_opset={"": 17, "ai.onnx.ml": 3})
    outputs = _run(model, X)
    e = import_model(model)
    raw = e.predict(X)
    if kind == "gbr":
        np.testing.assert_allclose(raw[:, 0], outputs[0][:, 0], rtol=1e-5, atol=1e-5)
    elif kind == "rf_binary":
        assert (e.n_outputs, e.output_transform) == (1, "identity")
        np.testing.assert_allclose(raw[:, 0], outputs[1][:, 1], rtol=0, atol=1e-6)  # onnxruntime: (1 - s, s)
    else:
        prob = 1 / (1 + np.exp(-raw[:, 0])) if kind == "gbc_binary" else np.exp(raw) / np.exp(raw).sum(1, keepdims=True)
        np.testing.assert_allclose(prob, outputs[1][:, -1] if kind == "gbc_binary" else outputs[1], rtol=0, atol=1e-6)
    bg, rows = X[100:116], X[:6]
    if kind == "gbc_binary":  # the probability, through post_transform (raw values as for the others)
        expl = jaxshap.TreeExplainer(model, bg, model_output="probability")(rows)
        np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values),
                                   _run(model, rows)[1][:, 1], rtol=0, atol=2e-5)
        return
    ours = np.asarray(jaxshap.TreeExplainer(model, bg)(rows).values)
    theirs = np.asarray(jaxshap.TreeExplainer(sk, bg)(rows).values)
    np.testing.assert_allclose(ours, theirs[..., 1] if kind == "rf_binary" else theirs, rtol=1e-4, atol=2e-6)


def _edit(model, **changes):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    node = out.graph.node[-1]
    for name, value in changes.items():
        for att in node.attribute:
            if att.name == name:
                att.CopyFrom(helper.make_attribute(name, value))
    return out


def test_unsupported_variants_raise_naming_them():
    tree, _ = _tree_model(nan=False)
    trees, _ = _sklearn_trees(tree)
    model = _onnx_model(trees)
    modes = [helper.get_attribute_value(a) for a in model.graph.node[0].attribute if a.name == "nodes_modes"][0]
    with pytest.raises(TypeError, match="BRANCH_EQ"):
        import_model(_edit(model, nodes_modes=[b"BRANCH_EQ" if m != b"LEAF" else m for m in modes]))
    with pytest.raises(TypeError, match="aggregate_function='MAX'"):
        import_model(_onnx_model(trees, aggregate="MAX"))
    two = onnx.ModelProto()
    two.CopyFrom(model)
    two.graph.node.append(two.graph.node[0])
    with pytest.raises(TypeError, match="2 TreeEnsembleRegressor/TreeEnsembleClassifier nodes"):
        import_model(two)
    scaled = onnx.ModelProto()
    scaled.CopyFrom(model)
    scaled.graph.node[0].input[0] = "xs"
    scaled.graph.node.insert(0, helper.make_node("Scaler", ["x"], ["xs"], domain="ai.onnx.ml", scale=[2.0] * M))
    with pytest.raises(TypeError, match="computed by a Scaler node"):
        jaxshap.TreeExplainer(scaled)
    with pytest.raises(TypeError, match="element type 7 .*only float and double"):
        import_model(_onnx_model(trees, input_type=TensorProto.INT64))
    with pytest.raises(TypeError, match="element type 7 .*only float and double"):
        import_model(_onnx_model(trees, cast_to=TensorProto.INT64))
    with pytest.raises(ValueError, match="child node id"):
        import_model(_edit(model, nodes_truenodeids=[999 if m != b"LEAF" else 0 for m in modes]))
