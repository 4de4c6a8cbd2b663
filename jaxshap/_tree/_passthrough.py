"""The reader of models already in jaxshap's own array form, :class:`TreeEnsemble`."""

from __future__ import annotations

from typing import Any

from ._ensemble import TreeEnsemble
from ._reader import TreeReader


class EnsembleReader(TreeReader):
    """A :class:`TreeEnsemble` is read as it is; its raw output is its own walk."""

    formats = "jaxshap.trees.TreeEnsemble"

    def recognises(self, model: Any) -> bool:
        return isinstance(model, TreeEnsemble)

    def read(self, model: Any) -> TreeEnsemble:
        return model
