"""Maskers: value functions that turn a model, a row and coalitions into coalition values.

A masker exposes ``n_features``, ``dtype``, ``evals_per_coalition``, ``probe_rows``,
``feature_names`` and ``coalition_values(f, x, masks) -> [C, K]``, and is a pytree so that it
can be passed through ``jax.jit``.
"""

from ._gaussian import Gaussian
from ._independent import Independent

__all__ = ["Gaussian", "Independent"]
