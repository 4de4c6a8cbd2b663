"""What every model-agnostic explainer shares: input handling, chunking, results.

An explainer binds a model and a masker once; calling it validates the rows, plans chunks
under the memory budget and runs one compiled program that maps a per-row estimator over
the rows (``vmap`` inside each chunk, a scan across chunks). Subclasses only say how many
coalitions a row needs and which estimator kernel turns coalition values into attributions.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._chunking import DEFAULT_MEMORY_BUDGET, map_chunks, plan_chunks
from ._explanation import Explanation
from ._inputs import as_key, as_matrix, check_finite, check_n_features, column_names, resolve_feature_names
from ._model import wrap_model
from .maskers import Independent

ValueFn = Callable[[jax.Array], jax.Array]


def as_masker(masker: Any) -> Any:
    """A masker as given, or ``Independent(masker)`` for a background array or DataFrame."""
    if hasattr(masker, "coalition_values"):
        return masker
    if masker is None:
        raise ValueError(
            "`background` is required: pass background rows [B, M] (for example 100 training rows) "
            "or a masker such as jaxshap.maskers.Independent(data)."
        )
    return Independent(masker)


class Explainer:
    """Base class of the model-agnostic explainers (not used directly).

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable, or a plain NumPy callable
        such as a scikit-learn ``predict`` (evaluated on the host, in batches).
      background: background rows ``[B, M]`` (array or DataFrame), used through
        :class:`jaxshap.maskers.Independent`, or a masker.
      feature_names: optional names of the ``M`` features; by default the columns of a
        DataFrame background or of the explained rows, else ``Feature j``.
      memory_budget: bytes of working memory one chunk of evaluations may use.
    """

    def __init__(
        self,
        model: Callable,
        background: Any,
        *,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        self.masker = as_masker(background)
        if not isinstance(memory_budget, (int, np.integer)) or memory_budget <= 0:
            raise ValueError(f"`memory_budget` must be a positive number of bytes; got {memory_budget!r}.")
        self.memory_budget = int(memory_budget)
        self.n_features = self.masker.n_features
        self._check_n_features(self.n_features)
        self.model = wrap_model(model, self.n_features, self.masker.dtype, self.masker.probe_rows)
        self._names = feature_names
        self._explain = jax.jit(self._explain_rows, static_argnums=(3, 4))

    # --- what subclasses define ------------------------------------------------------------
    def _check_n_features(self, n_features: int) -> None:
        """Raise for feature counts this estimator cannot handle."""

    def _coalitions_per_row(self) -> int:
        raise NotImplementedError

    def _estimate(self, key: jax.Array, value_fn: ValueFn) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """Return ``(phi [M, K], base [K], stderr [M, K] or None)`` for one row."""
        raise NotImplementedError

    # --- shared machinery -------------------------------------------------------------------
    def _explain_rows(self, masker, X, key, rows_per_chunk, coalitions_per_chunk):
        f = self.model.fn
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(X.shape[0]))

        def one_row(k, x):
            def value_fn(masks):
                return map_chunks(lambda m: masker.coalition_values(f, x, m), masks, coalitions_per_chunk)

            return self._estimate(k, value_fn)

        return map_chunks(lambda args: jax.vmap(one_row)(*args), (keys, X), rows_per_chunk)

    def __call__(self, X: Any, key: Any = None) -> Explanation:
        """Explain the rows of ``X``.

        Args:
          X: rows to explain, ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted).
          key: PRNG key for sampling estimators; ``None`` means ``jax.random.key(0)``.

        Returns:
          An :class:`Explanation` with ``values`` ``[n, M]`` (or ``[n, M, K]``).
        """
        names = column_names(X)
        X = as_matrix(X, "X", dtype=self.masker.dtype)
        check_n_features(X, self.n_features, "X", "the background")
        check_finite(X, "X")
        rows, coalitions = plan_chunks(
            X.shape[0],
            self._coalitions_per_row(),
            self.masker.evals_per_coalition,
            self.model.bytes_per_row + X.dtype.itemsize * self.n_features,
            self.memory_budget,
        )
        phi, base, stderr = self._explain(self.masker, X, as_key(key), rows, coalitions)
        if self.model.single_output:
            phi, base = phi[..., 0], base[..., 0]
            stderr = None if stderr is None else stderr[..., 0]
        feature_names = resolve_feature_names(self._names, self.n_features, self.masker.feature_names, names)
        output_names = None if self.model.single_output else [f"Output {k}" for k in range(self.model.n_outputs)]
        return Explanation(phi, base, X, stderr, feature_names, output_names)
