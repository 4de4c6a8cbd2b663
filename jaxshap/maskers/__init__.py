r"""Maskers: value functions that turn a model, a row and coalitions into coalition values.

Every masker subclasses :class:`Masker` (``n_features``, ``dtype``, ``evals_per_coalition``,
``probe_rows``, ``feature_names`` and ``coalition_values(f, x, masks) -> [C, K]``, plus the
attribution hooks whose defaults give Shapley values) and is a pytree by that alone, so that it
can be passed through ``jax.jit`` and ``jax.grad``. A new masker is one module defining a
subclass and one export line here. Wrappers change the game or its players on any masker:
:class:`Grouped` (groups of columns as players), :class:`Causal` (causal Shapley values over a
causal chain) and :class:`Asymmetric` (asymmetric Shapley values).

Observational value functions, :math:`v_x(S) = E[f(X) \mid X_S = x_S]` under a model of the data:
:class:`Gaussian`, :class:`GaussianCopula` (Gaussian dependence, empirical marginals),
:class:`GaussianMixture` (fitted by EM) and :class:`Empirical` (Aas et al.'s kernel-weighted
training rows; categorical columns too); interventional ones: :class:`Independent` and
:class:`Partition` (Owen values over a feature hierarchy).

Learned value functions, trained with optax on random coalitions of the data:
:class:`Surrogate` (a network predicting the model's output from ``x_S``, no model evaluations
per coalition) and :class:`Generative` (a masked variational autoencoder that draws
``X_{-S} | x_S``).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the public names; each is imported on its first use (jaxshap._lazy)
    from ._causal import Asymmetric
    from ._base import Masker
    from ._causal import Causal
    from ._gaussian import GaussianCopula
    from ._empirical import Empirical
    from ._gaussian import Gaussian
    from ._generative import Generative
    from ._grouped import Grouped
    from ._independent import Independent
    from ._mixture import GaussianMixture
    from ._independent import Partition
    from ._surrogate import Surrogate

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())

__all__ = [
    "Asymmetric", "Causal", "Empirical", "Gaussian", "GaussianCopula", "GaussianMixture", "Generative", "Grouped",
    "Independent", "Masker", "Partition", "Surrogate",
]
