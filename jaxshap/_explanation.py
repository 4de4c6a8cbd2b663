"""The :class:`Explanation` result: a pytree of JAX arrays with static metadata."""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np


@jax.tree_util.register_pytree_node_class
class Explanation:
    """Shapley values for a batch of rows, with what is needed to read and plot them.

    The arrays are pytree leaves (so an ``Explanation`` can be returned from ``jax.jit`` and
    differentiated through); ``feature_names`` and ``output_names`` are static metadata.
    Efficiency holds: ``values.sum(axis=1) + base_values == model(data)``.

    Attributes:
      values: ``[n, M]`` for a single-output model, ``[n, M, K]`` for ``K`` outputs.
      base_values: ``[n]`` or ``[n, K]``: the value of the empty coalition, ``E[f(X)]``.
      data: ``[n, M]``: the explained rows.
      stderr: standard errors of ``values`` for sampling estimators; ``None`` when exact.
      feature_names: list of ``M`` feature names.
      output_names: list of ``K`` output names, or ``None`` for a single output.
    """

    def __init__(
        self,
        values: Any,
        base_values: Any,
        data: Any,
        stderr: Any = None,
        feature_names: Sequence[str] | None = None,
        output_names: Sequence[str] | None = None,
    ):
        self.values = values
        self.base_values = base_values
        self.data = data
        self.stderr = stderr
        n_features = np.shape(values)[1] if np.ndim(values) >= 2 else np.shape(values)[-1]
        if feature_names is None:
            feature_names = [f"Feature {j}" for j in range(n_features)]
        self._feature_names = tuple(str(n) for n in feature_names)
        self._output_names = None if output_names is None else tuple(str(n) for n in output_names)

    @property
    def feature_names(self) -> list[str]:
        return list(self._feature_names)

    @property
    def output_names(self) -> list[str] | None:
        return None if self._output_names is None else list(self._output_names)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.values))

    def __len__(self) -> int:
        return self.shape[0]

    def tree_flatten(self):
        children = (self.values, self.base_values, self.data, self.stderr)
        return children, (self._feature_names, self._output_names)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.values, obj.base_values, obj.data, obj.stderr = children
        obj._feature_names, obj._output_names = aux
        return obj

    def __getitem__(self, index: Any) -> "Explanation":
        """Select rows, like ``expl[0]`` or ``expl[:10]``; metadata is kept."""
        if isinstance(index, tuple):
            raise TypeError(
                "Explanation supports row indexing only (expl[i] or expl[a:b]); for other slices "
                "use expl.to_shap()[...]."
            )
        pick = lambda a: None if a is None else a[index]
        return Explanation(
            pick(self.values),
            pick(self.base_values),
            pick(self.data),
            pick(self.stderr),
            self._feature_names,
            self._output_names,
        )

    def __repr__(self) -> str:
        kind = "exact" if self.stderr is None else "sampled"
        return (
            f"Explanation(values: {self.shape}, base_values: {tuple(np.shape(self.base_values))}, "
            f"features: {len(self._feature_names)}, {kind})"
        )

    def to_shap(self):
        """Convert to a ``shap.Explanation`` of NumPy arrays, ready for ``shap.plots``.

        Multi-output results keep the output axis last (``[n, M, K]``); slice one output with
        ``expl.to_shap()[:, :, k]`` before plotting, as with shap's own results. One row
        (``expl[i].to_shap()``) converts too, ready for ``shap.plots.waterfall``; ``stderr``
        becomes shap's ``error_std``.

        Raises:
          ImportError: when shap is not installed (``pip install 'jaxshap[plots]'``).
        """
        try:
            import shap
        except ImportError as err:
            raise ImportError(
                "Explanation.to_shap() needs shap: install it with `pip install 'jaxshap[plots]'`."
            ) from err
        kwargs = {}
        if self._output_names is not None:
            kwargs["output_names"] = list(self._output_names)
        if self.stderr is not None:
            kwargs["error_std"] = np.asarray(self.stderr)
        base = np.asarray(self.base_values)
        if base.ndim == 0:  # one row of a single-output result: a scalar, as shap's own expl[i]
            base = base[()]
        return shap.Explanation(
            values=np.asarray(self.values),
            base_values=base,
            data=np.asarray(self.data),
            feature_names=list(self._feature_names),
            **kwargs,
        )
