"""KernelSHAP's designs: how a budget's sampled pairs are shared among coalition sizes, and the
rule behind ``sampler="auto"``.

A plan (:func:`jaxshap.coalitions.kernel_plan`) enumerates the outermost layers ``{s, M - s}``
that its budget covers and samples complementary pairs from the others, each sampled coalition
carrying its Horvitz-Thompson weight: every design estimates the same kernel-weighted sums
without bias and differs only in its variance. A :class:`Sampler` says what differs:
:meth:`Sampler.size_mass`, the mass of one coalition size (the sampled layers share the pairs in
proportion to it, each keeping at least one), and :meth:`Sampler.enumeration_mass`, the mass
that decides which layers are enumerated (by default the same). A subclass that sets ``name``
is registered when defined, so ``sampler="its name"`` and ``sampler=TheClass()`` both select it.
Samplers are frozen dataclasses: hashable, immutable, equal by value (static configuration of
compiled programs). :class:`Auto` picks a design, the controls and their prior from the budget.
"""

from __future__ import annotations

import abc
import dataclasses
import math

from .._core._pytree import Registered
from .._core._validate import number
from ._combinatorics import shapley_kernel_mass

MIDDLE_SHARE = 0.9
"""The default share of :class:`Middle`'s mass on the two innermost layers."""


@dataclasses.dataclass(frozen=True)
class Sampler(Registered, abc.ABC, family=("KernelSHAP sampler", "sampler", "jaxshap.coalitions.Sampler")):
    """A KernelSHAP design: the mass of each coalition size (see the module docstring).

    Subclass it with ``@dataclasses.dataclass(frozen=True)`` (parameters with defaults: a name
    selects the class's default instance), give it a ``name`` and define :meth:`size_mass`. A
    subclass without a ``name`` of its own is not registered.
    """

    @abc.abstractmethod
    def size_mass(self, n_features: int, size: int) -> float:
        """The mass of coalition size ``s`` (``0 < s < M``; positive, in any unit)."""

    def enumeration_mass(self, n_features: int, size: int) -> float:
        """The mass of size ``s`` when deciding which layers to enumerate (:meth:`size_mass` by default)."""
        return self.size_mass(n_features, size)


@dataclasses.dataclass(frozen=True)
class Paired(Sampler):
    """Sizes in proportion to the Shapley kernel's mass, ``C(M, s) k(M, s) = (M - 1) / (s (M - s))``:
    KernelSHAP's own distribution, drawn in complementary pairs (Lundberg & Lee, 2017; Covert &
    Lee, 2021, "Improving KernelSHAP: practical Shapley value estimation via linear regression")."""

    name = "paired"

    def size_mass(self, n_features: int, size: int) -> float:
        return shapley_kernel_mass(n_features, size)


@dataclasses.dataclass(frozen=True)
class Leverage(Sampler):
    """Every size the same mass: the leverage scores of the efficiency-constrained Shapley
    regression are ``1 / C(M, s)`` up to a constant (Musco & Witter, 2025, "Provably accurate
    Shapley value estimation via leverage score sampling")."""

    name = "leverage"

    def size_mass(self, n_features: int, size: int) -> float:
        return 1.0


def innermost(n_features: int, size: int) -> bool:
    """Whether the layer ``{s, M - s}`` is one of the two nearest ``M / 2``."""
    return size >= n_features // 2 - 1


@dataclasses.dataclass(frozen=True)
class Middle(Sampler):
    """``share`` of the mass on the two innermost layers (the sizes nearest ``M / 2``), the rest uniform.

    For the third-order control variates while their ``C(M, 3)`` terms outnumber the sampled
    pairs: a residualised third-order term, zero on most coalitions of size 1 or ``M - 1``, varies
    most near ``M / 2``, so a middle-sized pair determines more of its coefficients. Every layer
    keeps a share that grows with the budget (consistent). Layers are enumerated as by
    :class:`Leverage` (this design's own mass would leave a small layer that the budget nearly
    covers to a few heavily weighted pairs).

    Attributes:
      share: the mass of the two innermost layers, in ``[0, 1)``.
    """

    share: float = MIDDLE_SHARE
    name = "middle"

    def __post_init__(self):
        number(self.share, "share", least=0.0, below=1.0)

    def size_mass(self, n_features: int, size: int) -> float:
        m = n_features
        inner = sum(1 for t in range(1, m) if innermost(m, min(t, m - t)))  # sizes in the two layers
        return (1 - self.share) / (m - 1) + (self.share / inner if innermost(m, min(size, m - size)) else 0.0)

    def enumeration_mass(self, n_features: int, size: int) -> float:
        return Leverage().size_mass(n_features, size)


@dataclasses.dataclass(frozen=True)
class Auto:
    """The rule behind ``sampler="auto"``, ``third_order="auto"`` and ``prior="auto"``.

    With the third-order control variates on: :class:`Middle` while the budget is at most
    ``middle_terms`` coalitions per third-order term (the surrogate interpolates the sample and a
    middle-sized pair determines most of it), then :class:`Leverage` from ``leverage_units``
    coalitions per feature; :class:`Paired` otherwise. Measured gains are in
    ``bench/scenarios/kernel_accuracy.py``.

    Attributes:
      controls_units: the controls are turned on once the plan samples (not enumerates) at least
        this many coalitions per feature (below that they barely help and their standard error
        loses coverage).
      leverage_units: coalitions per feature from which, with the controls on, leverage replaces paired.
      middle_terms: coalitions per third-order term up to which, with the controls on, middle is taken.
      prior_units, prior_coalitions: with the controls on, ``prior="auto"`` takes the leading-terms
        prior (:class:`jaxshap.estimators.Leading`, a rank-``r`` update per row of one shared
        solve) up to ``prior_units`` coalitions per feature and ``prior_coalitions`` in all, the
        isotropic one (one solve for every row) above. The update costs about
        ``(budget / 2)^2 r`` multiply-adds per row, which outgrows the row's model evaluations; the
        default 2048 keeps the default budget ``2 M + 2048`` on the shared solve for every ``M``.
      controls_coalitions: ``third_order="auto"`` leaves the controls off above this many coalitions
        when they would be solved in the dual form (more third-order terms than about half the
        coalitions, the regression rows ``U``): that form factorises ``U x U`` matrices, whose
        memory and cubic time outgrow the model evaluations (``M = 2048`` with 8192 coalitions
        peaked at 22.8 GB and took 125 s on 2 cores, against 0.8 GB and 4 s without), while so
        many terms share the prior variance of 16 features' and barely move the estimate.
    """

    controls_units: float = 2
    leverage_units: float = 10
    middle_terms: float = 1.5
    prior_units: float = 32
    prior_coalitions: float = 2048
    controls_coalitions: float = 4096
    name = "auto"

    def __post_init__(self):
        for field in dataclasses.fields(self):
            number(getattr(self, field.name), field.name, least=0.0)

    def choose(self, n_features: int, n_coalitions: int, controls: bool) -> Sampler:
        """The design for ``n_coalitions`` coalitions over ``M = n_features``, controls on or off."""
        m = n_features
        if not controls or m < 3:
            return Paired()
        if n_coalitions <= self.middle_terms * math.comb(m, 3):
            return Middle()
        return Leverage() if n_coalitions >= self.leverage_units * m else Paired()

    def prior(self, n_features: int, n_coalitions: int, controls: bool) -> str:
        """``"leading"`` with the controls on, at most ``prior_units`` coalitions per feature and
        ``prior_coalitions`` in all, and some coalitions left unevaluated; else ``"isotropic"``."""
        m = n_features
        small = n_coalitions <= min(self.prior_units * m, self.prior_coalitions)
        return "leading" if controls and m >= 3 and n_coalitions < 2**m - 2 and small else "isotropic"

    def wants_controls(self, n_features: int, n_coalitions: int, sampler: str | Sampler | None = None) -> bool:
        """Whether ``third_order="auto"`` turns the controls on: the plan of ``sampler`` (paired
        while the design is still to be chosen, ``None``) samples at least ``controls_units``
        coalitions per feature, and the dual form, if it is the one, has at most
        ``controls_coalitions`` coalitions to factorise."""
        from ._kernel_plan import kernel_plan  # the plan is built from a sampler: imported when used

        plan = kernel_plan(n_features, n_coalitions, Paired() if sampler is None else sampler)
        dual = n_features + math.comb(n_features, 3) > plan.n_coalitions / 2
        if dual and plan.n_coalitions > self.controls_coalitions:
            return False
        return plan.n_coalitions - len(plan.enum_weights) >= self.controls_units * n_features
