r"""The hierarchical prior: each row's third-order terms weighted by its features' first-order sizes.

Interactions tend to live among the features that matter (the *hierarchy* or *heredity*
principle of factorial designs: an interaction is rarely strong where its features' main
effects are weak; Hamada & Wu, 1992; Chipman, 1996), and a tree ensemble's interactions are
sparse and follow the features that its trees split on together. The isotropic prior
(:class:`~jaxshap._estimators._priors._isotropic.Isotropic`) spreads its variance evenly over
all :math:`\binom M3` terms; this one gives term :math:`T` the variance

.. math::

    v_T = \frac{1}{\lambda} \Bigl( \mu + (1 - \mu) \frac{a_T}{\bar a} \Bigr), \qquad
    a_T = \prod_{j \in T} a_j, \quad a_j = \frac{|\hat\phi_j|^p}{\operatorname{mean}_k |\hat\phi_k|^p},
    \quad \bar a = \operatorname{mean}_T a_T,

with :math:`\hat\phi` the row's estimate under the isotropic prior (the shared operator; for
several outputs, the scales averaged over the outputs), :math:`\lambda` the isotropic ridge,
``power`` :math:`p` and ``mix`` :math:`\mu`. Both priors put the same total variance on the
third-order part; this one moves it to the terms among the row's strongest features (a
per-feature, automatic-relevance-determination form of the prior, in the spirit of sparse
Bayesian learning, Tipping, 2001, with the relevances read off the first-order fit; OddSHAP,
Fumagalli et al., 2026, selects a few odd terms from a tree proxy of the game for the same reason).

Each row then solves its own generalised least-squares problem, covariance
:math:`W^{-1} + \sum_T v_T r_T r_T^\top` (:func:`jaxshap._estimators._kernel_solve.gls_apply`),
whose product-weighted kernel has a closed form
(:func:`jaxshap._estimators._control_variates.weighted_triple_kernel`): ``O(U^2 M)`` for the
kernel and a ``U x U`` factorisation and triangular inverse per row (``U`` the regression rows,
about half the coalitions). Like every prior it leaves the estimand alone: with every coalition enumerated the
residualised terms are kernel-orthogonal to the first-order fit and the values are exact. The
standard error is the row operator's (leave-one-unit-out sandwich, as for the shared operator),
with the prior held at its fitted value.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..._coalitions._kernel_design import plan_rows
from ..._core._validate import number
from .._control_variates import odd_kernel, triple_mass, weighted_triple_kernel
from .._kernel_solve import SMALL_RIDGE, RegressionRows, estimate, gls_apply, plan_stderr, regression_rows
from .._precision import full_precision
from ._base import RowPrior

POWER = 1.0
"""The default power ``p`` of the first-order sizes in the feature scales."""

MIX = 0.3
"""The default share ``mu`` of the prior variance kept isotropic."""


class HierarchyParts(NamedTuple):
    """The arrays of one draw that the per-row solve needs (see :meth:`Hierarchical.parts`).

    Attributes:
      signs: ``[U, M]`` ``2 z - 1`` of each regression row's first coalition.
      design: ``[U, M]`` the projected indicators ``P z``.
      wu: ``[U]`` the row weights.
      iso: ``[U, U]`` the isotropic prior's covariance ``K_3 / lambda`` (``None`` when ``mix = 0``).
      lam: ``lambda``, the isotropic ridge.
      curvature: ``tr(D^T W D)``.
    """

    signs: Any
    design: Any
    wu: Any
    iso: Any
    lam: Any
    curvature: Any


def third_order_rho(controls: tuple) -> float | None:
    """The relative ridge of the third-order control in ``controls``, or ``None``."""
    return next((rho for k, rho in controls if k == 3), None)


@full_precision
def feature_scales(phi: jax.Array, power: float) -> jax.Array:
    """``a [M]``: ``|phi_j|^p`` over its mean across features, averaged over outputs (``phi [M, K]``).

    An output whose estimate is zero everywhere counts as all ones (no preference).
    """
    mag = jnp.abs(phi)
    pos = mag > 0
    mag = jnp.where(pos, jnp.where(pos, mag, 1.0) ** power, 0.0)  # finite gradients at 0
    mean = mag.mean(0, keepdims=True)
    ok = mean > jnp.finfo(phi.dtype).tiny
    return jnp.where(ok, mag / jnp.where(ok, mean, 1.0), 1.0).mean(-1)


@dataclasses.dataclass(frozen=True)
class Hierarchical(RowPrior):
    """Third-order variances in proportion to the product of the members' first-order sizes.

    See the module docstring for the formula. Costs a ``U x U`` factorisation and triangular
    inverse per row on top of the shared operator, ``U`` about half the coalitions; the default
    (``prior="auto"``) takes :class:`~jaxshap._estimators._priors._leading.Leading`, the same
    variances on each row's largest terms as a low-rank update, at budgets of up to
    :attr:`jaxshap.coalitions.Auto.prior_units` coalitions per feature and
    :attr:`jaxshap.coalitions.Auto.prior_coalitions` in all.

    Attributes:
      power: ``p``, the power of ``|phi_j|`` in the feature scales (``0``: the isotropic prior).
      mix: ``mu`` in ``[0, 1]``, the share of the variance kept isotropic (``1``: isotropic).
    """

    power: float = POWER
    mix: float = MIX
    name = "hierarchical"
    solves_per_row = True

    def __post_init__(self):
        number(self.power, "power", least=0.0)
        number(self.mix, "mix", least=0.0, most=1.0, rule="a share in [0, 1]")

    def check_controls(self, controls: tuple) -> None:
        if third_order_rho(controls) is None:
            raise ValueError(
                "prior='hierarchical' sets the variances of the third-order control variates, which are off: "
                "pass third_order=True (or 'auto' with a budget that turns them on), or prior='isotropic'."
            )

    def row_elements(self, units: int, features: int, shared: bool = True) -> int:
        """Its kernel, factor, inverse and residual terms (``units x units``) and the design's products."""
        return 6 * units**2 + 4 * units * features

    def parts(self, plan, masks, weights, controls, *, dtype, deps: Any = (), xp: Any = jnp) -> HierarchyParts:
        """The draw's regression rows (:func:`~jaxshap._estimators._kernel_solve.regression_rows`)
        and, when ``mix > 0``, the isotropic covariance ``K_3 / lambda``."""
        self.check_controls(controls)
        rw = regression_rows(masks, weights, plan_rows(plan), dtype, xp)
        lam = third_order_rho(controls) * rw.curvature / masks.shape[-1]
        signs = 2.0 * rw.z - 1.0
        iso = odd_kernel(signs, signs, 3) / lam if self.mix > 0 else None
        return HierarchyParts(signs, rw.design, rw.wu, iso, lam, rw.curvature)

    def parts_shapes(self, plan, controls, dtype) -> HierarchyParts:
        u, m = len(plan_rows(plan)[0]), plan.n_features
        real = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731
        return HierarchyParts(real(u, m), real(u, m), real(u), real(u, u) if self.mix > 0 else None, real(), real())

    @full_precision
    def row_scales(self, op, values, v_empty, v_full):
        """``(scales [M], mass)``: the row's feature scales ``a`` from its estimate under the shared
        (isotropic) operator ``op``, and their triple mass ``sum_T a_T``; all ones when fewer than
        three features have a non-zero value."""
        m = op.phi.shape[0]
        phi, _ = estimate(op, values, v_empty, v_full)
        scales = feature_scales(phi, self.power)
        mass = triple_mass(scales)
        n_terms = math.comb(m, 3)
        ok = mass > jnp.finfo(values.dtype).tiny * n_terms
        return jnp.where(ok, scales, 1.0), jnp.where(ok, mass, float(n_terms))

    @full_precision
    def apply(self, ops, parts: HierarchyParts, plan, values, v_empty, v_full):
        """The row's estimate under the isotropic prior, its feature scales, the row's own solve."""
        op, check, spans = ops
        dtype = values.dtype
        m = op.phi.shape[0]
        scales, mass = self.row_scales(op, values, v_empty, v_full)
        signs = parts.signs.astype(dtype)
        lam, curvature = parts.lam.astype(dtype), parts.curvature.astype(dtype)
        kernel = weighted_triple_kernel(signs, signs, scales) * (math.comb(m, 3) / (mass * lam) * (1.0 - self.mix))
        if parts.iso is not None:
            kernel = kernel + self.mix * parts.iso.astype(dtype)
        rows = own_rows(op, parts, curvature, dtype)
        # after the values and every factorisation of the draw's operators (one LAPACK call at a
        # time; see jaxshap._platform._lapack_order): the kernel follows op's through phi already
        deps = (values, v_empty, v_full, check, spans)
        h_first = first_order_penalty(plan, spans, curvature, m, dtype)
        phi, stderr = gls_apply(rows, kernel, h_first, plan, values, v_empty, v_full, deps=deps)
        return plan_stderr(ops, plan, values, v_empty, v_full, phi, stderr)


def own_rows(op, parts, curvature, dtype) -> RegressionRows:
    """The regression rows of a per-row solve: the shared operator's statics with the draw's parts."""
    return RegressionRows(None, tuple(op[:5]), None, parts.wu.astype(dtype), parts.design.astype(dtype), op.frac, curvature)


def first_order_penalty(plan, spans, curvature, m: int, dtype):
    """``H_0 [M, M]`` of a per-row solve: the null-direction fix, plus the small ridge where the
    plan (or, for pooled plans, this draw: ``spans``) does not identify the regression."""
    ridge = 0.0 if plan.identified else SMALL_RIDGE
    if spans is not None:
        ridge = jnp.where(spans, 0.0, SMALL_RIDGE)
    return curvature / (m * (m - 1)) * jnp.ones((m, m), dtype) + ridge * curvature / m * jnp.eye(m, dtype=dtype)
