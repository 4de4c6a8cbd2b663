"""Maskers: value functions that turn a model, a row and coalitions into coalition values.

Every masker subclasses :class:`Masker` (``n_features``, ``dtype``, ``evals_per_coalition``,
``probe_rows``, ``feature_names`` and ``coalition_values(f, x, masks) -> [C, K]``, plus the
attribution hooks whose defaults give Shapley values) and is a pytree by that alone, so that it
can be passed through ``jax.jit`` and ``jax.grad``. A new masker is one module defining a
subclass and one export line here.
"""

from ._base import Masker
from ._gaussian import Gaussian
from ._independent import Independent
from ._mixture import GaussianMixture
from ._partition import Partition

__all__ = ["Gaussian", "GaussianMixture", "Independent", "Masker", "Partition"]
