"""The protocol of a prior on KernelSHAP's odd control variates: shared, or set row by row.

With the third-order control variates on (:func:`jaxshap.estimators.kernel_solve`), the
regression holds every residualised third-order Walsh term :math:`r_T` with a Gaussian prior
:math:`\\gamma_T \\sim N(0, v_T)` on its coefficient (ridge regression, or equally generalised least
squares with covariance :math:`W^{-1} + \\sum_T v_T r_T r_T^\\top`). A :class:`RowPrior` says how
the variances :math:`v_T` are set:

* :class:`~jaxshap._estimators._priors._isotropic.Isotropic`: one variance for every term, the
  same for every row, so the whole solve is one linear operator of the coalition values,
  factorised once per draw of coalitions and shared by the rows;
* :class:`~jaxshap._estimators._priors._hierarchical.Hierarchical`: variances that follow the
  row's own first-order estimate (a second, per-row solve).

A prior has two steps. :meth:`RowPrior.parts` computes, once per draw of coalitions (on the
host in NumPy, or traced), the arrays its per-row step needs besides the shared operators;
:meth:`RowPrior.apply` maps one row's coalition values to ``(phi, stderr)``, traced (it runs
under ``jax.vmap`` over rows and ``jax.jit``). Like samplers, priors are frozen dataclasses
registered by ``name`` when defined (``prior="name"`` or an instance selects one), hashable and
equal by value: they are static configuration of compiled programs.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

from ..._core._registry import Registered


@dataclasses.dataclass(frozen=True)
class RowPrior(Registered, abc.ABC, family=("KernelSHAP prior", "prior", "jaxshap.estimators.RowPrior")):
    """How the variances of the third-order controls' coefficients are set (module docstring).

    Subclass it with ``@dataclasses.dataclass(frozen=True)`` (parameters with defaults), give it a
    ``name`` and define :meth:`apply` (and :meth:`parts` / :meth:`parts_shapes` when the per-row
    step needs arrays of the draw); it is then selected by that name or by an instance.
    """

    solves_per_row = False
    """Whether :meth:`apply` factorises a matrix per row (then LAPACK runs on one OpenBLAS thread)."""

    def row_elements(self, units: int, features: int, shared: bool = True) -> int:
        """Array elements one row's :meth:`apply` holds besides the shared operators' (for the
        explainer's memory plan), with ``units`` regression rows and ``features`` features;
        ``shared=False``: each row draws its own coalitions, and computes its own :meth:`parts`."""
        return 0

    def parts(self, plan, masks, weights, controls: tuple, *, dtype, deps: Any = (), xp: Any = None) -> Any:
        """Arrays of one draw that :meth:`apply` needs besides the shared operators (``None``: none).

        Args:
          plan: the :class:`~jaxshap.coalitions.KernelPlan`.
          masks, weights: ``[C, M]`` coalitions and ``[C]`` weights of the draw.
          controls: ``((order, rho), ...)``, the control variates (as for the operators).
          dtype: floating dtype of the arrays.
          deps: arrays to compute after (see :func:`jaxshap._platform._lapack_order.after`).
          xp: ``numpy`` (on the host) or ``jax.numpy`` (traced).
        """
        return None

    def parts_shapes(self, plan, controls: tuple, dtype) -> Any:
        """``jax.ShapeDtypeStruct`` leaves of :meth:`parts`, from the plan alone."""
        return None

    @abc.abstractmethod
    def apply(self, ops, parts, plan, values, v_empty, v_full):
        """``(phi, stderr)``, both ``[M, K]``, of one game from its coalition values ``[C, K]``.

        Args:
          ops: the draw's operators (:func:`jaxshap._estimators._kernel_solve.plan_operators`).
          parts: :meth:`parts` of the draw.
          plan: the :class:`~jaxshap.coalitions.KernelPlan`.
          values: ``[C, K]``; v_empty, v_full: ``[K]``.
        """

    def check_controls(self, controls: tuple) -> None:
        """Raise ``ValueError`` when the prior cannot work with these control variates."""
