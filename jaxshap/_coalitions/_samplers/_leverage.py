"""The leverage-score KernelSHAP design."""

from __future__ import annotations

import dataclasses

from ._base import Sampler


@dataclasses.dataclass(frozen=True)
class Leverage(Sampler):
    """Every size the same mass: the leverage scores of the efficiency-constrained Shapley regression.

    All coalitions of one size have the same leverage score, ``1 / C(M, s)`` up to a constant, so
    every size carries the same mass (Musco & Witter, 2025, "Provably accurate Shapley value
    estimation via leverage score sampling").
    """

    name = "leverage"

    def size_mass(self, n_features: int, size: int) -> float:
        """``1`` for every size."""
        return 1.0
