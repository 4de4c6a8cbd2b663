"""``sampler="auto"``: the rule that picks KernelSHAP's design, whether the controls are on and their
prior, from the budget."""

from __future__ import annotations

import dataclasses
import math

from .._core._validate import number
from ._kernel_plan import kernel_plan
from ._samplers import Leverage, Middle, Paired, Sampler


@dataclasses.dataclass(frozen=True)
class Auto:
    """Picks a :class:`~jaxshap.coalitions.Sampler` from ``(M, budget, controls)``.

    With the third-order control variates on: :class:`~jaxshap.coalitions.Middle` while the
    budget is at most ``middle_terms`` coalitions per third-order term (fewer sampled pairs than
    terms: the surrogate interpolates the sample and a middle-sized pair determines most of it),
    then :class:`~jaxshap.coalitions.Leverage` from ``leverage_units`` coalitions per feature
    (the middle sizes it favours are where the surrogate's terms vary most);
    :class:`~jaxshap.coalitions.Paired` otherwise (plain KernelSHAP keeps shap's sampling).
    Measured gains are in ``bench/scenarios/kernel_accuracy.py``.

    Attributes:
      controls_units: ``third_order="auto"`` turns the controls on once the plan samples (not
        enumerates) at least this many coalitions per feature (below that they barely help and
        their standard error loses coverage).
      leverage_units: coalitions per feature from which, with the controls on, leverage replaces
        paired sampling.
      middle_terms: coalitions per third-order term up to which, with the controls on, the
        middle design is taken.
      prior_units: coalitions per feature up to which, with the controls on, ``prior="auto"``
        takes the leading-terms prior of the third-order terms (a rank-``r`` update per row of
        one shared solve, :class:`jaxshap.estimators.Leading`); above it, the isotropic one (one
        solve shared by every row). Its gain does not fade with the budget (measurements in
        ``CHANGELOG.md``, issue 32); its cost does not either, hence also ``prior_coalitions``.
      prior_coalitions: the most coalitions for which ``prior="auto"`` takes the leading-terms
        prior, whatever ``M``. Its per-row update costs about ``(budget / 2)^2 r`` multiply-adds
        (``r`` = 120 terms), which grows faster than the row's model evaluations (``budget``
        times the background). The default, 2048, keeps the default budget ``2 M + 2048`` on the
        shared solve for every ``M``.
    """

    controls_units: float = 2
    leverage_units: float = 10
    middle_terms: float = 1.5
    prior_units: float = 32
    prior_coalitions: float = 2048
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
        """The name of the prior ``prior="auto"`` takes: ``"leading"`` with the controls on, at
        most ``prior_units`` coalitions per feature and ``prior_coalitions`` in all, and some left
        unevaluated, else ``"isotropic"`` (a budget that covers every coalition is exact under
        either)."""
        m = n_features
        sampled = n_coalitions < 2**m - 2
        small = n_coalitions <= min(self.prior_units * m, self.prior_coalitions)
        if controls and m >= 3 and sampled and small:
            return "leading"
        return "isotropic"

    def wants_controls(self, n_features: int, n_coalitions: int, sampler: str | Sampler | None = None) -> bool:
        """Whether ``third_order="auto"`` turns the controls on: the plan of ``sampler`` (paired
        sampling while the design is still to be chosen, ``None``) samples at least
        ``controls_units`` coalitions per feature."""
        plan = kernel_plan(n_features, n_coalitions, Paired() if sampler is None else sampler)
        return plan.n_coalitions - len(plan.enum_weights) >= self.controls_units * n_features
