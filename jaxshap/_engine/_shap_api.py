"""The calls shap users write on an explainer: ``shap_values``, ``expected_value``, ``save``, ``load``.

Every explainer (model-agnostic, linear, tree) mixes this in; each defines ``__call__`` (which
returns an :class:`~jaxshap.Explanation`) and ``expected_value``, which reads as NumPy here.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from .._result._host import to_host


def unpickle_explainer(file: Any, cls: type, what: str) -> Any:
    """Unpickle an explainer from a path or an open binary file, checking it is a ``cls``."""
    if hasattr(file, "read"):
        obj = pickle.load(file)
    else:
        with open(file, "rb") as handle:
            obj = pickle.load(handle)
    if not isinstance(obj, cls):
        raise TypeError(f"`file` holds a {type(obj).__name__}, not a {what}.")
    return obj


def _is_one_row(X: Any) -> bool:
    """True for a single row given as a 1-D array, list or pandas Series."""
    if hasattr(X, "columns"):  # a DataFrame, even of one row, keeps its row axis
        return False
    return np.ndim(X) == 1 if not hasattr(X, "ndim") else X.ndim == 1


class ShapAPI:
    """``shap_values(X)``, ``expected_value``, ``save(file)`` and ``load(file)`` as in shap's explainers.

    ``expected_value`` is NumPy outside traced code, as shap's: a NumPy scalar for one output,
    ``[K]`` for ``K`` (a tracer inside ``jit``/``grad``), whatever array the explainer keeps, so
    ``shap.force_plot(explainer.expected_value, ...)`` and ``shap.decision_plot`` take it.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        prop = cls.__dict__.get("expected_value")
        if isinstance(prop, property) and prop.fget is not None:
            get = prop.fget
            cls.expected_value = property(lambda self: to_host(get(self)), prop.fset, prop.fdel, prop.__doc__)

    def __repr__(self) -> str:
        chosen = getattr(self, "chosen_by_auto", None)
        note = f", chosen by jaxshap.Explainer: {chosen}" if chosen else ""
        return f"{type(self).__name__}(features={getattr(self, 'n_features', '?')}{note})"

    def shap_values(self, X: Any, key: Any = None, **kwargs: Any) -> np.ndarray:
        """SHAP values as a NumPy array with shap's shapes.

        Equivalent to ``np.asarray(explainer(X, key=key, **kwargs).values)``: ``[n, M]`` for a
        single-output model and ``[n, M, K]`` for ``K`` outputs (shap's layout since 0.45: the
        output axis last); one row given as a 1-D array or a pandas Series gives ``[M]`` (or
        ``[M, K]``). The base value is :attr:`expected_value`.

        Args:
          X: rows to explain (array, DataFrame, ``scipy.sparse`` matrix, or one row).
          key: PRNG key for the sampling explainers (``None``: ``jax.random.key(0)``).
          **kwargs: passed on to the explainer's call (for example ``progress=``).
        """
        expl = self(X, key=key, **kwargs) if key is not None else self(X, **kwargs)
        values = np.asarray(expl.values)
        return values[0] if _is_one_row(X) and values.shape[0] == 1 else values

    def save(self, file: Any) -> None:
        """Save the explainer with :mod:`pickle` (``file``: a path or a binary file object).

        The model must be picklable (a scikit-learn or XGBoost model's method, a module-level
        function; a ``lambda`` needs ``cloudpickle``); compiled programs are rebuilt on load.
        """
        if hasattr(file, "write"):
            pickle.dump(self, file)
        else:
            with open(file, "wb") as handle:
                pickle.dump(self, handle)

    @classmethod
    def load(cls, file: Any) -> Any:
        """Load an explainer saved with :meth:`save` (only load files you trust: this unpickles).

        Raises:
          TypeError: when the file holds something other than an explainer of this class.
        """
        return unpickle_explainer(file, cls, cls.__name__)
