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
      interaction_values: ``[n, M, M]`` (or ``[n, M, M, K]``) pairwise interaction values when
        asked for (``interactions=True``), else ``None``: symmetric, the diagonal holds the main
        effects and each pair's interaction is split evenly between ``[i, j]`` and ``[j, i]``,
        so for the efficient indices (shap's SHAP interaction values, k-SII, STII, FSII) the
        rows sum to ``values``.
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
        interaction_values: Any = None,
    ):
        self.values = values
        self.base_values = base_values
        self.data = data
        self.stderr = stderr
        self.interaction_values = interaction_values
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
        children = (self.values, self.base_values, self.data, self.stderr, self.interaction_values)
        return children, (self._feature_names, self._output_names)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.values, obj.base_values, obj.data, obj.stderr, obj.interaction_values = children
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
            pick(self.interaction_values),
        )

    def __repr__(self) -> str:
        kind = "exact" if self.stderr is None else "sampled"
        return (
            f"Explanation(values: {self.shape}, base_values: {tuple(np.shape(self.base_values))}, "
            f"features: {len(self._feature_names)}, {kind})"
        )

    def to_shap(self, interactions: bool = False):
        """Convert to a ``shap.Explanation`` of NumPy arrays, ready for ``shap.plots``.

        Multi-output results keep the output axis last (``[n, M, K]``); slice one output with
        ``expl.to_shap()[:, :, k]`` before plotting, as with shap's own results. One row
        (``expl[i].to_shap()``) converts too, ready for ``shap.plots.waterfall``; ``stderr``
        becomes shap's ``error_std``.

        With ``interaction_values``, their diagonal becomes shap's ``main_effects``; with
        ``interactions=True`` the shap ``Explanation`` holds the ``[n, M, M]`` interaction values
        as its ``values``, as shap's ``ExactExplainer(..., interactions=2)`` returns them (for
        ``shap.plots.dependence``-style plots that take interaction values, pass
        ``np.asarray(expl.interaction_values)``).

        Args:
          interactions: put the interaction values, not the attributions, in ``values``.

        Raises:
          ValueError: ``interactions=True`` without interaction values.
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
        if interactions and self.interaction_values is None:
            raise ValueError(
                "to_shap(interactions=True) needs interaction values: explain with "
                "explainer(X, interactions=True) first."
            )
        values = np.asarray(self.interaction_values if interactions else self.values)
        if self.stderr is not None and not interactions:
            kwargs["error_std"] = np.asarray(self.stderr)
        if self.interaction_values is not None and not interactions:
            inter = np.asarray(self.interaction_values)
            axis = np.ndim(self.values) - (1 if self._output_names is None else 2)  # the feature axis
            kwargs["main_effects"] = np.moveaxis(np.diagonal(inter, axis1=axis, axis2=axis + 1), -1, axis)
        base = np.asarray(self.base_values)
        if base.ndim == 0:  # one row of a single-output result: a scalar, as shap's own expl[i]
            base = base[()]
        return shap.Explanation(
            values=values,
            base_values=base,
            data=np.asarray(self.data),
            feature_names=list(self._feature_names),
            **kwargs,
        )
