"""The tree-reader protocol: how one model format becomes a :class:`TreeEnsemble`.

A reader says, for its format:

* :meth:`TreeReader.recognises`: whether a model is of that format (by its type, without
  calling it, so that ``jaxshap.Explainer`` can pick ``TreeExplainer``);
* :meth:`TreeReader.read`: the model as a :class:`TreeEnsemble`;
* :meth:`TreeReader.raw_output`: the model's raw output as its own library computes it, which
  the additivity check compares the attributions with;
* :meth:`TreeReader.input_rows`: how to read the library's own input containers (XGBoost's
  ``DMatrix``) as rows.

Defining a concrete subclass registers an instance of it (``register=False`` in the class
statement opts out). ``TreeExplainer``, ``jaxshap.Explainer`` and :func:`._import.import_model`
ask the registered readers, the most recently registered first, so a reader defined outside the
package can also take over a model type from a built-in one. The model libraries stay optional:
a reader imports its library only when it is handed one of its models.
"""

from __future__ import annotations

import abc
import inspect
from typing import Any

import numpy as np

from ._ensemble import TreeEnsemble

_REGISTRY: list["TreeReader"] = []


class TreeReader(abc.ABC):
    """Base class of the readers of tree-model formats (see the module docstring).

    Attributes:
      formats: the models the reader reads, in words (listed when a model is not recognised),
        e.g. ``"XGBoost: Booster, XGBRegressor, XGBClassifier"``.
      width_from_rows: the format names no number of features, so the rows tell it (features
        past the last split add nothing); the ensemble it reads counts up to its last split.
    """

    formats: str = ""
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
