"""The isotropic prior: one variance for every third-order term, one solve operator for every row."""

from __future__ import annotations

import dataclasses

from .._kernel_solve import apply_plan
from ._base import RowPrior


@dataclasses.dataclass(frozen=True)
class Isotropic(RowPrior):
    """Every residualised third-order term has the same prior variance ``1 / lambda``.

    ``lambda = rho * tr(D^T W D) / M`` with ``rho`` the control's relative ridge
    (:func:`jaxshap._estimators._kernel.third_order_ridge`). The fit is then a fixed linear
    operator of the coalition values (:func:`jaxshap._estimators._kernel_solve.kernel_operator`),
    built once per draw and applied to each row with two matrix products. Without controls it is
    plain KernelSHAP.
    """

    name = "isotropic"

    def apply(self, ops, parts, plan, values, v_empty, v_full):
        """:func:`jaxshap._estimators._kernel_solve.apply_plan`."""
        return apply_plan(ops, plan, values, v_empty, v_full)
