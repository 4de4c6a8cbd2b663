"""The middle KernelSHAP design, for the third-order control variates."""

from __future__ import annotations

import dataclasses

from ..._core._validate import number
from ._base import Sampler
from ._leverage import Leverage

MIDDLE_SHARE = 0.9
"""The default share of :class:`Middle`'s mass on the two innermost layers."""


def innermost(n_features: int, size: int) -> bool:
    """Whether the layer ``{s, M - s}`` is one of the two nearest ``M / 2``."""
    return size >= n_features // 2 - 1


@dataclasses.dataclass(frozen=True)
class Middle(Sampler):
    """``share`` of the mass on the two innermost layers (the sizes nearest ``M / 2``), the rest uniform.

    Meant for the third-order control variates while their ``C(M, 3)`` terms outnumber the
    sampled pairs: the surrogate then interpolates the sample, and a residualised third-order
    term, zero on most coalitions of size 1 or ``M - 1``, varies most near ``M / 2``, so a
    middle-sized pair determines more of its coefficients. Every layer keeps a share that grows
    with the budget, so the estimate stays consistent. Layers are enumerated as by
    :class:`~jaxshap._coalitions._samplers._leverage.Leverage` (the design's own mass would leave
    a small layer that the budget nearly covers to a few heavily weighted pairs).

    Attributes:
      share: the mass of the two innermost layers, in ``[0, 1)``.
    """

    share: float = MIDDLE_SHARE
    name = "middle"

    def __post_init__(self):
        number(self.share, "share", least=0.0, below=1.0)

    def size_mass(self, n_features: int, size: int) -> float:
        """``(1 - share) / (M - 1)``, plus ``share`` spread evenly over the sizes of the two innermost layers."""
        m = n_features
        inner = sum(1 for t in range(1, m) if innermost(m, min(t, m - t)))  # sizes in the two layers
        return (1 - self.share) / (m - 1) + (self.share / inner if innermost(m, min(size, m - size)) else 0.0)

    def enumeration_mass(self, n_features: int, size: int) -> float:
        """Leverage's mass (see the class docstring)."""
        return Leverage().size_mass(n_features, size)
