"""The interventional value function: features outside the coalition come from background rows."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._runtime._inputs import as_matrix, check_finite, column_names, is_traced


@jax.tree_util.register_pytree_node_class
class Independent:
    r"""Interventional (marginal) coalition values over a background data set.

    .. math::

        v_x(S) = \frac{1}{B} \sum_{b=1}^{B} f(x_S, b_{\bar S}),

    the expectation of the model with the features in ``S`` fixed to the explained row and the
    others drawn independently of them from the background (Janzing et al., 2020, "Feature
    relevance quantification in explainable AI: a causal problem"; Lundberg & Lee, 2017).

    Args:
      data: background rows ``[B, M]`` (array or DataFrame). Every row is used; pass a sample
        (100 to 1000 rows is usual) to bound the cost, or set ``max_samples``.
      max_samples: when given and ``B`` is larger, keep a random sample of this many rows
        (drawn with ``key``), as ``shap.maskers.Independent`` does.
      key: PRNG key for the subsample; ``None`` means ``jax.random.key(0)``.

    Raises:
      ValueError: for an empty background or one holding NaN or inf.
    """

    def __init__(self, data: Any, max_samples: int | None = None, key: Any = None):
        names = column_names(data)
        self.feature_names = None if names is None else tuple(names)
        data = as_matrix(data, "background")
        if data.shape[0] == 0:
            raise ValueError("`background` is empty; pass at least one background row (100 or more is usual).")
        check_finite(data, "background")
        if max_samples is not None:
            if not isinstance(max_samples, (int, np.integer)) or max_samples < 1:
                raise ValueError(f"`max_samples` must be a positive integer; got {max_samples!r}.")
            if data.shape[0] > max_samples:
                key = jax.random.key(0) if key is None else key
                pick = jax.random.choice(key, data.shape[0], (int(max_samples),), replace=False)
                data = data[pick]
        self.data = data

    @property
    def n_features(self) -> int:
        return self.data.shape[1]

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def evals_per_coalition(self) -> int:
        """Model evaluations that one coalition value costs: one per background row."""
        return self.data.shape[0]

    @property
    def probe_rows(self) -> jax.Array:
        """Valid input rows for probing a model's output shape."""
        return self.data

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S)`` for each coalition in ``masks``.

        Args:
          f: model mapping ``[..., M]`` to ``[..., K]``.
          x: the explained row, ``[M]``.
          masks: ``[C, M]`` boolean coalitions.

        Returns:
          ``[C, K]`` coalition values.
        """
        inputs = jnp.where(masks[:, None, :], x[None, None, :], self.data[None, :, :])
        return f(inputs).mean(axis=1)

    def tree_flatten(self):
        return (self.data,), (self.feature_names,)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        (obj.data,) = children
        (obj.feature_names,) = aux
        return obj

    def __repr__(self) -> str:
        shape = tuple(self.data.shape) if not is_traced(self.data) else "traced"
        return f"Independent(data: {shape})"
