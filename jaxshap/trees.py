"""Tree ensembles as ``TreeExplainer`` reads them: the reader protocol and the array form.

A model format is read by a :class:`TreeReader`; defining a concrete subclass registers it, and
from then on ``jaxshap.TreeExplainer(model)`` and ``jaxshap.Explainer(model, data)`` accept the
models it recognises. A reader returns a :class:`TreeEnsemble`, best built with
:func:`make_tree` (one tree's flat node arrays) and :func:`stack_trees`::

    class MyReader(jaxshap.trees.TreeReader):
        formats = "mylib: Forest"
        modules = ("mylib",)  # asked about models of mylib (empty: about every model)

        def recognises(self, model):
            return isinstance(model, mylib.Forest)

        def read(self, model):
            trees = [jaxshap.trees.make_tree(t.feature, t.threshold, t.left, t.right,
                                             t.default_left, t.value, t.cover) for t in model.trees]
            return jaxshap.trees.stack_trees(trees, model.bias, model.n_features, "mylib",
                                             precision=np.float64, output_transform="identity")

Optionally a reader also gives the model's raw output as its own library computes it
(:meth:`TreeReader.raw_output`, for the additivity check) and reads the library's own input
containers (:meth:`TreeReader.input_rows`).
"""

from ._tree import readers
from ._tree._ensemble import (
    MISSING_AS_ZERO,
    MISSING_CATEGORICAL,
    MISSING_NAN,
    MISSING_ZERO,
    TreeEnsemble,
    make_tree,
    one_hot_values,
    stack_trees,
)
from ._tree._reader import TreeReader

__all__ = [
    "MISSING_AS_ZERO",
    "MISSING_CATEGORICAL",
    "MISSING_NAN",
    "MISSING_ZERO",
    "TreeEnsemble",
    "TreeReader",
    "make_tree",
    "one_hot_values",
    "readers",
    "stack_trees",
]
