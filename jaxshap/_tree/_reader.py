"""The tree-reader protocol: how one model format becomes a :class:`TreeEnsemble`; the registry
of readers and the lookup of a model's reader; and the readers of jaxshap's own
:class:`TreeEnsemble` and of shap's dictionary format.

A reader says, for its format:

* :meth:`TreeReader.recognises`: whether a model is of that format (by its type, without
  calling it, so that ``jaxshap.Explainer`` can pick ``TreeExplainer``);
* :meth:`TreeReader.read`: the model as a :class:`TreeEnsemble`;
* :meth:`TreeReader.raw_output`: the model's raw output as its own library computes it, which
  the additivity check compares the attributions with;
* :meth:`TreeReader.input_rows`: how to read the library's own input containers (XGBoost's
  ``DMatrix``) as rows;
* :attr:`TreeReader.modules`: the top-level modules of the model types (and input containers)
  it reads (``("xgboost",)``; empty: any).

Defining a concrete subclass registers an instance of it (``register=False`` in the class
statement opts out). ``TreeExplainer``, ``jaxshap.Explainer`` and :func:`import_model` ask the
registered readers, the most recently registered first, so a reader defined outside the package
can also take over a model type from a built-in one (:func:`reader_for`, :func:`find_reader`).
Only the readers that name the model's top-level module, and those that name none, are asked
first (:func:`readers_of`); the others are asked only when none of these recognises the model.
So explaining a model runs the code of its own library's reader and not the others'. The model
libraries stay optional: a reader imports its library only when it is handed one of its models.

shap's dictionary tree format (:class:`ShapDictReader`): shap's ``TreeExplainer`` reads a model
given as a dictionary (its "custom tree model" format):

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

import abc
import dataclasses
import inspect
from typing import Any

import numpy as np

from ._ensemble import TreeEnsemble, make_tree, stack_trees


_REGISTRY: list["TreeReader"] = []


class TreeReader(abc.ABC):
    """Base class of the readers of tree-model formats (see the module docstring).

    Attributes:
      formats: the models the reader reads, in words (listed when a model is not recognised),
        e.g. ``"XGBoost: Booster, XGBRegressor, XGBClassifier"``.
      modules: the top-level modules of the model types (and input containers) the reader reads,
        as :func:`root_module` names them, e.g. ``("xgboost",)``: a model of another module is
        offered to the reader only when no reader of its own module (nor one that names no
        module) recognises it, and an input container never. Empty (the default): the reader is
        asked about every model and every input.
      width_from_rows: the format names no number of features, so the rows tell it (features
        past the last split add nothing); the ensemble it reads counts up to its last split.
    """

    formats: str = ""
    modules: tuple[str, ...] = ()
    width_from_rows: bool = False

    def __init_subclass__(cls, register: bool = True, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if register and not inspect.isabstract(cls):
            register_reader(cls())

    @abc.abstractmethod
    def recognises(self, model: Any) -> bool:
        """Whether ``model`` is of this reader's format (decided from its type; never calls it)."""

    @abc.abstractmethod
    def read(self, model: Any) -> TreeEnsemble:
        """The fitted ``model`` as a :class:`TreeEnsemble`.

        Raises:
          ValueError: for an unfitted model (see :func:`require_fitted`).
          TypeError: for a variant of the format that cannot be read (naming it).
        """

    def raw_output(self, model: Any, ensemble: TreeEnsemble, X: np.ndarray) -> np.ndarray:
        """``[n, K]`` float64 raw output of the trees in ``ensemble`` (its ``n_rounds`` first
        rounds) on rows ``X`` (already through ``ensemble.prepare``), as the model's library
        computes it. The default walks the ensemble's trees (:meth:`TreeEnsemble.predict`)."""
        del model
        return ensemble.predict(X)

    def input_rows(self, x: Any) -> tuple[np.ndarray, list[str] | None] | None:
        """``(rows [n, M] float64 with NaN for missing, column names or None)`` when ``x`` is
        one of the library's own input containers, else ``None`` (the default)."""
        del x
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def register_reader(reader: TreeReader) -> TreeReader:
    """Put ``reader`` first among the registered readers, replacing one of the same class
    (by module and name, so that a class defined again replaces its earlier definition)."""
    name = (type(reader).__module__, type(reader).__qualname__)
    _REGISTRY[:] = [r for r in _REGISTRY if (type(r).__module__, type(r).__qualname__) != name]
    _REGISTRY.insert(0, reader)
    return reader


def readers() -> tuple[TreeReader, ...]:
    """The registered readers, in the order they are asked (the most recently registered first)."""
    return tuple(_REGISTRY)


def root_module(model: Any) -> str:
    """The top-level package a model's type comes from (``"xgboost"`` for ``xgboost.sklearn.XGBRegressor``)."""
    return (type(model).__module__ or "").split(".")[0]


def require_fitted(model: Any, fitted: bool | None = None) -> None:
    """Raise the one "not fitted" message when ``fitted`` is false; ``None`` asks the model's
    ``__sklearn_is_fitted__`` (the scikit-learn API; a model without one counts as fitted).

    Raises:
      ValueError: naming the model's type.
    """
    if fitted is None:
        check = getattr(model, "__sklearn_is_fitted__", None)
        fitted = check is None or bool(check())
    if not fitted:
        raise ValueError(f"`model`: the {type(model).__name__} is not fitted; call fit before explaining it.")


def readers_of(obj: Any) -> tuple[tuple[TreeReader, ...], tuple[TreeReader, ...]]:
    """``(own, others)``: the registered readers (the most recently registered first) whose
    ``modules`` name ``obj``'s top-level module or are empty, and the rest."""
    root = root_module(obj)
    own, others = [], []
    for reader in readers():
        (own if not reader.modules or root in reader.modules else others).append(reader)
    return tuple(own), tuple(others)


def reader_for(model: Any) -> TreeReader | None:
    """The first registered reader (the most recently registered first) that recognises
    ``model``, or ``None``: the readers of the model's own module (and those that name none)
    are asked, and only when none of them recognises it the others."""
    own, others = readers_of(model)
    for reader in own + others:
        if reader.recognises(model):
            return reader
    return None


def supported() -> str:
    """The models the registered readers read, in words, in the order they were registered."""
    return "; ".join(r.formats or type(r).__name__ for r in reversed(readers()))


def find_reader(model: Any) -> TreeReader:
    """The reader of ``model``.

    Raises:
      TypeError: when no registered reader recognises it (the message lists the supported models).
    """
    reader = reader_for(model)
    if reader is None:
        cls = type(model)
        raise TypeError(
            f"TreeExplainer cannot read a model of type {cls.__module__}.{cls.__name__}. Supported models: "
            f"{supported()}. For any other model use jaxshap.ExactExplainer, PermutationExplainer or "
            "KernelExplainer; or read it with a jaxshap.trees.TreeReader."
        )
    return reader


def import_model(model: Any) -> TreeEnsemble:
    """Convert a fitted tree model into a :class:`TreeEnsemble` with its registered reader.

    Raises:
      TypeError: for a model no registered reader recognises (the message lists the supported ones).
      ValueError: for an unfitted model.
    """
    return find_reader(model).read(model)


class EnsembleReader(TreeReader, register=False):
    """A :class:`TreeEnsemble` is read as it is; its raw output is its own walk."""

    formats = "jaxshap.trees.TreeEnsemble"
    modules = ("jaxshap",)

    def recognises(self, model: Any) -> bool:
        return isinstance(model, TreeEnsemble)

    def read(self, model: Any) -> TreeEnsemble:
        return model


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


class ShapDictReader(TreeReader, register=False):
    """shap's dictionary tree format; its raw output is the ensemble's own walk."""

    formats = ("shap's dictionary format ({'trees': [{'children_left', 'children_right', 'children_default', "
               "'features', 'thresholds', 'values', 'node_sample_weight'}, ...]})")
    modules = ("builtins",)  # a dict
    width_from_rows = True

    def recognises(self, model: Any) -> bool:
        return is_shap_dict(model)

    def read(self, model: Any) -> TreeEnsemble:
        return load_shap_dict(model)
