"""Maskers: value functions that turn a model, a row and coalitions into coalition values.

Every masker follows the protocol of :class:`Masker` (``n_features``, ``dtype``,
``evals_per_coalition``, ``probe_rows``, ``feature_names`` and
``coalition_values(f, x, masks) -> [C, K]``) and is a pytree so that it can be passed through
``jax.jit``.
"""

from ._base import Masker
from ._gaussian import Gaussian
from ._independent import Independent
from ._partition import Partition

Masker.register(Gaussian)

__all__ = ["Gaussian", "Independent", "Masker", "Partition"]
