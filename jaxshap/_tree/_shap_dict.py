"""Import shap's dictionary tree format: ``{"trees": [{"children_left", ...}, ...], ...}``.

shap's ``TreeExplainer`` reads a model given as a dictionary (its "custom tree model" format):

* ``"trees"``: a list of trees, each a dict of node arrays of length ``N``:
  ``children_left``, ``children_right`` (negative at leaves), ``children_default`` (the child a
  missing value goes to), ``features``, ``thresholds`` (``x <= threshold`` goes left),
  ``values`` (``[N]`` or ``[N, K]``; leaves' values are summed over the trees) and
  ``node_sample_weight`` (the training cover); the older singular keys ``feature``,
  ``threshold`` and ``value`` are read too;
* optional ``"base_offset"`` (the constant added to the trees' sum, default 0);
* optional ``"tree_output"``: what the summed values are, ``"raw_value"`` (default),
  ``"log_odds"`` (a binary classifier's margin: ``model_output="probability"`` applies the
  logistic) or ``"probability"``;
* optional ``"objective"``: the training loss for ``model_output="log_loss"``
  (``"squared_error"`` or ``"binary_crossentropy"``);
* optional ``"input_dtype"``: the float type inputs are rounded to before comparing (default
  float64, as shap); ``"internal_dtype"`` is accepted (values are held in float64).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._ensemble import TreeEnsemble, make_tree, stack_trees
from ._reader import TreeReader

SOURCE = "shap tree dict"
"""The ensemble's ``source``, for messages."""

OUTPUT_TRANSFORMS = {"raw_value": "identity", "log_odds": "sigmoid", "probability": "identity"}
"""``tree_output`` -> the ensemble's output transform."""

LOSSES = ("squared_error", "binary_crossentropy")
"""The ``objective`` values read (the ensemble's training loss of the same name)."""

_KEYS = (("features", "feature"), ("thresholds", "threshold"), ("values", "value"))


def is_shap_dict(model: Any) -> bool:
    """A dictionary in shap's tree format (it has a ``"trees"`` list)."""
    return isinstance(model, dict) and "trees" in model


def _node_arrays(tree: Any, i: int) -> dict:
    """One tree's node arrays, under the plural names, checked for presence and length."""
    if not isinstance(tree, dict):
        raise TypeError(f"`model['trees'][{i}]` must be a dict of node arrays; got {type(tree).__name__}.")
    out = {}
    for plural, singular in _KEYS:
        key = plural if plural in tree else singular
        if key not in tree:
            raise ValueError(f"`model['trees'][{i}]` has no '{plural}' array (shap's dictionary tree format).")
        out[plural] = np.asarray(tree[key])
    for key in ("children_left", "children_right", "children_default", "node_sample_weight"):
        if key not in tree:
            raise ValueError(f"`model['trees'][{i}]` has no '{key}' array (shap's dictionary tree format).")
        out[key] = np.asarray(tree[key])
    n = out["children_left"].shape[0]
    for key, a in out.items():
        if a.shape[0] != n:
            raise ValueError(f"`model['trees'][{i}]['{key}']` has {a.shape[0]} entries; the tree has {n} nodes.")
    return out


def load_shap_dict(model: dict) -> TreeEnsemble:
    """Read a tree ensemble given in shap's dictionary format (see the module docstring).

    Raises:
      ValueError: for a missing node array, arrays of different lengths, an empty tree list,
        or an unknown ``tree_output`` or ``objective``.
      TypeError: for a tree that is not a dict.
    """
    trees = list(model["trees"])
    if not trees:
        raise ValueError("`model['trees']` is empty; a tree model needs at least one tree.")
    tree_output = model.get("tree_output", "raw_value")
    if tree_output not in OUTPUT_TRANSFORMS:
        raise ValueError(f"`model['tree_output']` must be one of {sorted(OUTPUT_TRANSFORMS)}; got {tree_output!r}.")
    objective = model.get("objective")
    if objective is not None and objective not in LOSSES:
        raise ValueError(f"`model['objective']` must be one of {sorted(LOSSES)} or absent; got {objective!r}.")
    read = []
    n_features = 0
    for i, tree in enumerate(trees):
        a = _node_arrays(tree, i)
        left, right = a["children_left"].astype(np.int64), a["children_right"].astype(np.int64)
        inner = left >= 0
        features = a["features"].astype(np.int64)
        if inner.any():
            n_features = max(n_features, int(features[inner].max()) + 1)
        default_left = inner & (a["children_default"].astype(np.int64) == left)
        values = np.asarray(a["values"], np.float64).reshape(left.shape[0], -1)
        read.append(make_tree(features, a["thresholds"], left, right, default_left, values, a["node_sample_weight"]))
    base = np.asarray(model.get("base_offset", 0.0), np.float64).reshape(-1)
    e = stack_trees(read, base, n_features, SOURCE)
    precision = np.dtype(model.get("input_dtype", np.float64)).type
    return dataclasses.replace(
        e, precision=precision, output_transform=OUTPUT_TRANSFORMS[tree_output], loss=objective
    )


class ShapDictReader(TreeReader):
    """shap's dictionary tree format; its raw output is the ensemble's own walk."""

    formats = ("shap's dictionary format ({'trees': [{'children_left', 'children_right', 'children_default', "
               "'features', 'thresholds', 'values', 'node_sample_weight'}, ...]})")
    width_from_rows = True

    def recognises(self, model: Any) -> bool:
        return is_shap_dict(model)

    def read(self, model: Any) -> TreeEnsemble:
        return load_shap_dict(model)
