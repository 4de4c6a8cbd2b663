"""The paired (kernel-proportional) KernelSHAP design."""

from __future__ import annotations

import dataclasses

from .._combinatorics import shapley_kernel_mass
from ._base import Sampler


@dataclasses.dataclass(frozen=True)
class Paired(Sampler):
    """Sizes in proportion to the Shapley kernel's mass, ``C(M, s) k(M, s) = (M - 1) / (s (M - s))``.

    KernelSHAP's own distribution, drawn in complementary pairs (Lundberg & Lee, 2017; Covert &
    Lee, 2021, "Improving KernelSHAP: practical Shapley value estimation via linear regression").
    """

    name = "paired"

    def size_mass(self, n_features: int, size: int) -> float:
        """``(M - 1) / (s (M - s))``: the kernel summed over the ``C(M, s)`` coalitions of size ``s``."""
        return shapley_kernel_mass(n_features, size)
