"""The ONNX reader: an ``onnx.ModelProto`` whose graph holds one ``TreeEnsembleRegressor`` or
``TreeEnsembleClassifier`` node (domain ``ai.onnx.ml``).

Contract. The explained raw output is the tree node's scores before its ``post_transform``:

* ``TreeEnsembleRegressor``: ``K = n_targets`` outputs, ``base_values + sum_t tree_t(x)``
  (``aggregate_function="SUM"``) or ``base_values + mean_t tree_t(x)`` (``"AVERAGE"``);
* ``TreeEnsembleClassifier``: one output per class, ``base_values[k]`` plus the class's leaf
  weights; a binary classifier whose weights name one class only (as converters write it, with
  at most one base value) has one output, the score onnxruntime reports for the second class.

``post_transform`` becomes the output transform (``LOGISTIC`` on one output: ``"sigmoid"``,
``SOFTMAX`` on several: ``"softmax"``, ``NONE``: the identity; others are left unknown, so only
``model_output="raw"`` is available). Nodes compare as onnxruntime does: ``BRANCH_LEQ``,
``BRANCH_LT``, ``BRANCH_GTE`` and ``BRANCH_GT`` become ``x <= t`` splits (a strict ``x < t`` as
``x <= nextafter(t, -inf)``, ``>`` and ``>=`` with the branches swapped) on inputs and
thresholds rounded to the precision the node reads them in (float32 when the graph input or a ``Cast`` between it
and the node is float, float64 when all are double); a NaN takes the true
branch where ``nodes_missing_value_tracks_true`` is set, else the false one.

Covers. ``nodes_hitrates`` are used as covers when they add up (each split's equals its
children's sum); converters usually write none, or 1.0 everywhere, and then the covers are NaN:
the path-dependent game needs background rows (``TreeExplainer(model, data)``).

Unsupported (``TypeError``, naming it): equality splits (``BRANCH_EQ`` / ``BRANCH_NEQ``), the
``MIN`` / ``MAX`` aggregates, the opset-5 ``TreeEnsemble`` operator, graphs with no tree node or
several, tree nodes whose input is computed from the graph input by other operators than
``Cast`` and ``Identity``, and inputs other than float and double.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._ensemble import TreeEnsemble, make_tree, stack_trees
from ._reader import TreeReader, root_module

_OPS = ("TreeEnsembleRegressor", "TreeEnsembleClassifier")
_PASS_THROUGH = ("Cast", "Identity")
_PRECISION = {1: np.float32, 11: np.float64}  # TensorProto.FLOAT, DOUBLE: the input types read


def _unsupported(what: str) -> TypeError:
    return TypeError(
        f"TreeExplainer cannot read this ONNX model: {what}. Explain the original model if jaxshap reads it "
        "(XGBoost, LightGBM, scikit-learn), or explain the ONNX model as a function (an onnxruntime "
        "InferenceSession's run) with jaxshap.PermutationExplainer or KernelExplainer."
    )


def _tree_node(graph):
    nodes = [n for n in graph.node if n.op_type in _OPS and n.domain == "ai.onnx.ml"]
    if any(n.op_type == "TreeEnsemble" for n in graph.node):
        raise _unsupported("the ai.onnx.ml opset-5 TreeEnsemble operator is not read (only TreeEnsembleRegressor "
                           "and TreeEnsembleClassifier)")
    if len(nodes) != 1:
        raise _unsupported(f"its graph has {len(nodes)} TreeEnsembleRegressor/TreeEnsembleClassifier nodes, not one")
    return nodes[0]


def _input(graph, node) -> tuple[type, int | None]:
    """(precision the tree node compares in, number of features from the graph input's shape)."""
    producers = {o: n for n in graph.node for o in n.output}
    inputs = {i.name: i for i in graph.input}
    name, casts = node.input[0], []
    while name not in inputs:
        prev = producers.get(name)
        if prev is None or prev.op_type not in _PASS_THROUGH:
            raise _unsupported(f"the tree node's input is computed by a {getattr(prev, 'op_type', 'missing')} "
                               "node, and only Cast / Identity may stand between it and the graph input")
        if prev.op_type == "Cast":
            casts.append(next(a.i for a in prev.attribute if a.name == "to"))
        name = prev.input[0]
    tensor = inputs[name].type.tensor_type
    types = [tensor.elem_type] + casts
    if any(t not in _PRECISION for t in types):
        raise _unsupported(f"the tree node reads ONNX element type {[t for t in types if t not in _PRECISION][0]} "
                           "on the way from the graph input; only float and double inputs are read")
    precision = np.float32 if any(_PRECISION[t] is np.float32 for t in types) else np.float64
    dims = tensor.shape.dim
    width = dims[1].dim_value if len(dims) == 2 and dims[1].dim_value > 0 else None
    return precision, width


def _attributes(node) -> dict:
    from onnx import helper, numpy_helper  # the model is an ONNX object, so onnx is installed

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.name.endswith("_as_tensor"):
            out[a.name[: -len("_as_tensor")]] = numpy_helper.to_array(v).reshape(-1)
        elif a.name not in out:
            if isinstance(v, list):
                v = [x.decode() if isinstance(x, bytes) else x for x in v]
            out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _covers(hit: np.ndarray | None, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The hit rates when they add up at every split (so they are covers), else NaN."""
    inner = left >= 0
    if hit is None or not np.all(hit > 0):
        return np.full(left.shape, np.nan)
    sums = hit[np.maximum(left, 0)] + hit[np.maximum(right, 0)]
    ok = np.allclose(hit[inner], sums[inner], rtol=1e-5, atol=0)
    return hit.astype(np.float64) if ok else np.full(left.shape, np.nan)


def _one_tree(a: dict, rows: np.ndarray, weights: tuple, precision, n_outputs: int):
    """One tree from the node entries ``rows`` (positions in the ``nodes_*`` arrays), root first."""
    ids = np.asarray(a["nodes_nodeids"], np.int64)[rows]
    modes = np.asarray(a["nodes_modes"], dtype=object)[rows]
    inner = modes != "LEAF"
    if bad := sorted(set(modes[inner]) - {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"}):
        raise _unsupported(f"nodes_modes {', '.join(map(str, bad))} (equality or unknown splits) are not supported")
    pos = {int(n): i for i, n in enumerate(ids)}
    try:
        true = np.asarray([pos[int(c)] if f else -1 for c, f in zip(np.asarray(a["nodes_truenodeids"])[rows], inner)])
        false = np.asarray([pos[int(c)] if f else -1 for c, f in zip(np.asarray(a["nodes_falsenodeids"])[rows], inner)])
    except KeyError as err:
        raise ValueError(f"The ONNX tree node names a child node id {err} that its tree does not have.") from None
    children = np.concatenate([true[inner], false[inner]])
    roots = np.setdiff1d(np.arange(ids.size), children)
    if roots.size != 1 or np.unique(children).size != children.size:
        raise ValueError("An ONNX tree's nodes do not form one tree (each node one parent, one root).")
    order = [int(roots[0])]  # breadth first from the root: every node reached once
    for i in order:
        if inner[i]:
            order += [int(true[i]), int(false[i])]
    if len(order) != ids.size:
        raise ValueError("An ONNX tree holds nodes its root does not reach.")
    new = np.empty(ids.size, np.int64)
    new[order] = np.arange(ids.size)
    t = np.asarray(a["nodes_values"], np.float64)[rows].astype(precision)
    if np.any(np.isnan(t[inner])):
        raise _unsupported("a split threshold is NaN")
    strict = np.isin(modes, ["BRANCH_LT", "BRANCH_GTE"])  # x < t goes left of the x <= t split below
    threshold = np.where(strict, np.nextafter(t, precision(-np.inf)), t).astype(np.float64)
    swap = np.isin(modes, ["BRANCH_GTE", "BRANCH_GT"])  # the true branch is the right one
    left, right = np.where(swap, false, true), np.where(swap, true, false)
    tracks = np.asarray(a.get("nodes_missing_value_tracks_true") or np.zeros(len(a["nodes_modes"])), bool)[rows]
    value = np.zeros((ids.size, n_outputs))
    leaf_of, out, w = weights
    at = np.asarray([pos.get(int(n), -1) for n in leaf_of], np.int64)
    if np.any(at < 0) or np.any(inner[at]):
        raise ValueError("The ONNX tree node gives a weight to a node that is not one of its tree's leaves.")
    np.add.at(value, (at, out), w)
    hit = a.get("nodes_hitrates")
    cover = _covers(None if hit is None or len(hit) == 0 else np.asarray(hit, np.float64)[rows],
                    np.where(inner, left, -1), np.where(inner, right, -1))
    remap = lambda c: np.where(c >= 0, new[np.maximum(c, 0)], -1)  # noqa: E731
    keep = np.asarray(order)
    return make_tree(np.asarray(a["nodes_featureids"], np.int64)[rows][keep], threshold[keep],
                     remap(np.where(inner, left, -1))[keep], remap(np.where(inner, right, -1))[keep],
                     (tracks != swap)[keep], value[keep], cover[keep])


def _leaf_weights(a: dict, classifier: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """``(tree ids, node ids, output columns, weights, K)`` of the leaf weights."""
    p = "class" if classifier else "target"
    trees, nodes = np.asarray(a.get(f"{p}_treeids", []), np.int64), np.asarray(a.get(f"{p}_nodeids", []), np.int64)
    ids, w = np.asarray(a.get(f"{p}_ids", []), np.int64), np.asarray(a.get(f"{p}_weights", []), np.float64)
    if not classifier:
        return trees, nodes, ids, w, int(a.get("n_targets", 1) or 1)
    labels = a.get("classlabels_int64s") or a.get("classlabels_strings") or []
    n_classes = len(labels)
    if n_classes == 2 and np.unique(ids).size == 1:  # binary, one column of weights: the second class's score
        return trees, nodes, np.zeros_like(ids), w, 1
    return trees, nodes, ids, w, n_classes


def load_onnx(model) -> TreeEnsemble:
    """Read an ONNX tree ensemble (see the module docstring for the contract).

    Raises:
      TypeError: for the variants listed in the module docstring.
      ValueError: for a malformed tree (a child id its tree lacks, a weight on a split, a node
        set that is not one tree, a feature past the input's width).
    """
    graph = model.graph
    node = _tree_node(graph)
    precision, width = _input(graph, node)
    a = _attributes(node)
    classifier = node.op_type == "TreeEnsembleClassifier"
    aggregate = a.get("aggregate_function", "SUM")
    if aggregate not in ("SUM", "AVERAGE"):
        raise _unsupported(f"aggregate_function={aggregate!r} (only SUM and AVERAGE are sums of trees)")
    trees, nodes, out, w, k = _leaf_weights(a, classifier)
    if out.size and (out.min() < 0 or out.max() >= k):
        raise ValueError(f"The ONNX tree node's leaf weights name output {out.max()} of {k}.")
    node_tree = np.asarray(a.get("nodes_treeids", []), np.int64)
    tree_ids = np.unique(node_tree)
    if not np.all(np.isin(trees, tree_ids)):
        raise ValueError("The ONNX tree node gives leaf weights to a tree id it has no nodes for.")
    scale = 1.0 / max(tree_ids.size, 1) if aggregate == "AVERAGE" else 1.0
    read = []
    for t in tree_ids:
        sel = trees == t
        read.append(_one_tree(a, np.flatnonzero(node_tree == t), (nodes[sel], out[sel], w[sel] * scale), precision, k))
    base = np.asarray(a.get("base_values", []) if len(a.get("base_values", [])) else np.zeros(k), np.float64)
    if base.size != k:
        raise _unsupported(f"{base.size} base_values for {k} outputs")
    splits = np.asarray(a.get("nodes_featureids", []), np.int64)[np.asarray(a.get("nodes_modes", []), object) != "LEAF"]
    n_features = width or (int(splits.max()) + 1 if splits.size else 1)
    if splits.size and (splits.min() < 0 or splits.max() >= n_features):
        raise ValueError(f"The ONNX tree node splits on feature {splits.max()}, but its input has {n_features}.")
    post = a.get("post_transform", "NONE")
    transform = {("NONE", True): "identity", ("NONE", False): "identity", ("LOGISTIC", True): "sigmoid",
                 ("SOFTMAX", False): "softmax"}.get((post, k == 1))  # others: raw output only
    return stack_trees(read, base, n_features, f"ONNX {node.op_type}", precision=precision, output_transform=transform)


class OnnxReader(TreeReader):
    """ONNX models (``onnx.ModelProto``) with one tree-ensemble node; the raw output is the
    ensemble's own walk, which routes as onnxruntime does (onnxruntime is not needed)."""

    formats = "ONNX: ModelProto with a TreeEnsembleRegressor or TreeEnsembleClassifier node"
    modules = ("onnx",)

    def recognises(self, model: Any) -> bool:
        return root_module(model) == "onnx" and type(model).__name__ == "ModelProto"

    def read(self, model: Any) -> TreeEnsemble:
        return load_onnx(model)
