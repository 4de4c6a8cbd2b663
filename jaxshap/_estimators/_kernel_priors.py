r"""Priors of KernelSHAP's third-order control variates: shared, or set row by row.

With the controls on (:func:`jaxshap.estimators.kernel_solve`), the regression holds every
residualised third-order Walsh term :math:`r_T` with a Gaussian prior :math:`\gamma_T \sim N(0,
v_T)` on its coefficient (ridge regression, or equally generalised least squares with
covariance :math:`W^{-1} + \sum_T v_T r_T r_T^\top`). A :class:`RowPrior` sets the :math:`v_T`:

* :class:`Isotropic`: ``1 / lambda`` for every term and row (``lambda = rho tr(D^T W D) / M``),
  so the solve is one linear operator of the values, shared by the rows of a draw;
* :class:`Hierarchical`: interactions follow main effects (the hierarchy principle of factorial
  designs; Hamada & Wu, 1992; Chipman, 1996), so term ``T`` gets

  .. math::

      v_T = \frac{1}{\lambda} \Bigl( \mu + (1 - \mu) \frac{a_T}{\bar a} \Bigr), \qquad
      a_T = \prod_{j \in T} a_j, \quad a_j = \frac{|\hat\phi_j|^p}{\operatorname{mean}_k |\hat\phi_k|^p},

  with :math:`\hat\phi` the row's isotropic estimate (automatic relevance determination read
  off the first-order fit, in the spirit of Tipping, 2001; OddSHAP, Fumagalli et al., 2026,
  picks odd terms from a proxy of the game for the same reason): a ``U x U`` solve per row;
* :class:`Leading`: the isotropic prior plus the hierarchical variance's excess on each row's
  ``r`` largest terms, a rank-``r`` Woodbury update of one shared solve.

Every prior leaves the estimand alone (exact values when every coalition is enumerated). A prior
has two steps: :meth:`RowPrior.parts` computes, once per draw, the arrays its per-row step needs
besides the shared operators; :meth:`RowPrior.apply` maps one row's values to ``(phi, stderr)``
(traced, under ``jax.vmap`` over rows). Like samplers, priors are frozen dataclasses registered
by ``name`` when defined (``prior="name"`` or an instance selects one).
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._kernel_sampling import plan_rows
from .._core._pytree import Registered
from .._core._validate import integer, number
from ._control_variates import odd_kernel, triple_mass, weighted_triple_kernel
from ._kernel_solve import (
    SMALL_RIDGE, RegressionRows, apply_plan, estimate, gls_apply, gls_finish, plan_stderr, regression_rows,
    safe_sqrt, spd_inverse, sweep_inverse,
)
from ._exact import full_precision


@dataclasses.dataclass(frozen=True)
class RowPrior(Registered, abc.ABC, family=("KernelSHAP prior", "prior", "jaxshap.estimators.RowPrior")):
    """How the variances of the third-order controls' coefficients are set (module docstring).

    Subclass it with ``@dataclasses.dataclass(frozen=True)`` (parameters with defaults), give it a
    ``name`` and define :meth:`apply` (and :meth:`parts` when the per-row step needs arrays of the
    draw); it is then selected by that name or by an instance.
    """

    def row_elements(self, units: int, features: int, shared: bool = True) -> int:
        """Array elements one row's :meth:`apply` holds besides the shared operators' (for the
        memory plan), with ``units`` regression rows; ``shared=False``: each row has its own draw."""
        return 0

    def parts(self, plan, masks, weights, controls: tuple, *, dtype, deps: Any = ()) -> Any:
        """Arrays of one draw (``masks [C, M]``, ``weights [C]`` of ``plan``) that :meth:`apply`
        needs besides the operators (``None``: none), computed after ``deps``."""
        return None

    @abc.abstractmethod
    def apply(self, ops, parts, plan, values, v_empty, v_full):
        """``(phi, stderr)``, both ``[M, K]``, of one game from its values ``[C, K]`` (``v_empty``,
        ``v_full``: ``[K]``), the draw's operators (:func:`jaxshap._estimators._kernel_solve.plan_operators`)
        and :meth:`parts`."""

    def check_controls(self, controls: tuple) -> None:
        """Raise ``ValueError`` when the prior cannot work with these control variates."""


@dataclasses.dataclass(frozen=True)
class Isotropic(RowPrior):
    """Every residualised third-order term has the prior variance ``1 / lambda``: the fit is one
    linear operator of the values (:func:`jaxshap._estimators._kernel_solve.kernel_operator`),
    applied to each row with two matrix products. Without controls it is plain KernelSHAP."""

    name = "isotropic"

    def apply(self, ops, parts, plan, values, v_empty, v_full):
        return apply_plan(ops, plan, values, v_empty, v_full)


def third_order_rho(controls: tuple) -> float | None:
    """The relative ridge of the third-order control in ``controls``, or ``None``."""
    return next((rho for k, rho in controls if k == 3), None)


class HierarchyParts(NamedTuple):
    """The arrays of one draw that a per-row solve needs: ``signs [U, M]`` (``2 z - 1`` of each
    row's first coalition), ``design [U, M]`` (``P z``), ``wu [U]`` (row weights), ``iso [U, U]``
    (the isotropic covariance ``K_3 / lambda``, or ``None``), ``lam`` and ``curvature``."""

    signs: Any
    design: Any
    wu: Any
    iso: Any
    lam: Any
    curvature: Any


@full_precision
def feature_scales(phi: jax.Array, power: float) -> jax.Array:
    """``a [M]``: ``|phi_j|^p`` over its mean across features, averaged over outputs (``phi [M, K]``);
    an output whose estimate is zero everywhere counts as all ones."""
    mag = jnp.abs(phi)
    pos = mag > 0
    mag = jnp.where(pos, jnp.where(pos, mag, 1.0) ** power, 0.0)  # finite gradients at 0
    mean = mag.mean(0, keepdims=True)
    ok = mean > jnp.finfo(phi.dtype).tiny
    return jnp.where(ok, mag / jnp.where(ok, mean, 1.0), 1.0).mean(-1)


def _own_rows(op, parts, dtype) -> RegressionRows:
    """The regression rows of a per-row solve: the shared operator's statics with the draw's parts."""
    curvature = parts.curvature.astype(dtype)
    return RegressionRows(None, tuple(op[:5]), None, parts.wu.astype(dtype), parts.design.astype(dtype), op.frac, curvature)


def _first_order_penalty(plan, spans, curvature, m: int, dtype):
    """``H_0 [M, M]``: the null-direction fix, plus the small ridge where the plan (or, for pooled
    plans, this draw: ``spans``) does not identify the regression."""
    ridge = (0.0 if plan.identified else SMALL_RIDGE) if spans is None else jnp.where(spans, 0.0, SMALL_RIDGE)
    return curvature / (m * (m - 1)) * jnp.ones((m, m), dtype) + ridge * curvature / m * jnp.eye(m, dtype=dtype)


@dataclasses.dataclass(frozen=True)
class Hierarchical(RowPrior):
    """Third-order variances in proportion to the product of the members' first-order sizes
    (module docstring): a ``U x U`` factorisation and triangular inverse per row
    (:func:`jaxshap._estimators._kernel_solve.gls_apply`, with the closed-form product-weighted
    kernel :func:`jaxshap._estimators._control_variates.weighted_triple_kernel`), ``U`` about half
    the coalitions. :class:`Leading` gets most of its gain as a low-rank update.

    Attributes:
      power: ``p``, the power of ``|phi_j|`` in the feature scales (``0``: the isotropic prior).
      mix: ``mu`` in ``[0, 1]``, the share of the variance kept isotropic (``1``: isotropic).
    """

    power: float = 1.0
    mix: float = 0.3
    name = "hierarchical"

    def __post_init__(self):
        number(self.power, "power", least=0.0)
        number(self.mix, "mix", least=0.0, most=1.0, rule="a share in [0, 1]")

    def check_controls(self, controls: tuple) -> None:
        if third_order_rho(controls) is None:
            raise ValueError(
                f"prior={self.name!r} sets the variances of the third-order control variates, which are off: "
                "pass third_order=True (or 'auto' with a budget that turns them on), or prior='isotropic'."
            )

    def row_elements(self, units: int, features: int, shared: bool = True) -> int:
        return 6 * units**2 + 4 * units * features

    def _rows(self, plan, masks, weights, controls, dtype):
        self.check_controls(controls)
        rw = regression_rows(masks, weights, plan_rows(plan), dtype)
        return rw, third_order_rho(controls) * rw.curvature / masks.shape[-1], 2.0 * rw.z - 1.0

    def parts(self, plan, masks, weights, controls, *, dtype, deps: Any = ()) -> HierarchyParts:
        rw, lam, signs = self._rows(plan, masks, weights, controls, dtype)
        iso = odd_kernel(signs, signs, 3) / lam if self.mix > 0 else None
        return HierarchyParts(signs, rw.design, rw.wu, iso, lam, rw.curvature)

    @full_precision
    def row_scales(self, op, values, v_empty, v_full):
        """``(scales [M], mass)``: the feature scales from the row's isotropic estimate, and their
        triple mass ``sum_T a_T``; all ones when fewer than three features have a value."""
        scales = feature_scales(estimate(op, values, v_empty, v_full)[0], self.power)
        mass = triple_mass(scales)
        n_terms = math.comb(op.phi.shape[0], 3)
        ok = mass > jnp.finfo(values.dtype).tiny * n_terms
        return jnp.where(ok, scales, 1.0), jnp.where(ok, mass, float(n_terms))

    @full_precision
    def apply(self, ops, parts: HierarchyParts, plan, values, v_empty, v_full):
        op, check, spans = ops
        dtype, m = values.dtype, op.phi.shape[0]
        scales, mass = self.row_scales(op, values, v_empty, v_full)
        signs, lam = parts.signs.astype(dtype), parts.lam.astype(dtype)
        kernel = weighted_triple_kernel(signs, signs, scales) * (math.comb(m, 3) / (mass * lam) * (1.0 - self.mix))
        if parts.iso is not None:
            kernel = kernel + self.mix * parts.iso.astype(dtype)
        rows = _own_rows(op, parts, dtype)
        h_first = _first_order_penalty(plan, spans, rows.curvature, m, dtype)
        # after the values and the draw's factorisations (one batched LAPACK call at a time)
        deps = (values, v_empty, v_full, check, spans)
        phi, stderr = gls_apply(rows, kernel, h_first, plan, values, v_empty, v_full, deps=deps)
        return plan_stderr(ops, plan, values, v_empty, v_full, phi, stderr)


def residualised_triples(z, triples):
    r"""``[U, r]``: the residualised third-order terms of ``triples [r, 3]`` at ``z [U, M]`` (0/1).

    :math:`r_T(z) = s_i s_j s_k - (s_i + s_j + s_k) / 3` with ``s = 2 z - 1`` depends only on
    :math:`c = |T \cap z|`: 0, 4/3, -4/3, 0 for ``c = 0..3``, the cubic ``2/3 c (c - 3)(2 c - 3)``;
    one product of ``z`` with the triples' indicators gives every term.
    """
    members = jax.nn.one_hot(triples, z.shape[-1], dtype=z.dtype).sum(-2)  # [r, M], three ones a row
    c = z @ members.T  # [U, r], exact: sums of at most three ones
    return (2.0 / 3.0) * c * (c - 3.0) * (2.0 * c - 3.0)


class LeadingParts(NamedTuple):
    """:class:`Leading`'s arrays of one draw: ``rows`` (the hierarchical parts without their kernel),
    ``shared [U, U]`` (``A_0``, the inverse of the shared whitened covariance), ``white_design``
    (``A_0 W^{1/2} D``) and ``gram`` (``D^T W^{1/2} A_0 W^{1/2} D``)."""

    rows: HierarchyParts
    shared: Any
    white_design: Any
    gram: Any


@dataclasses.dataclass(frozen=True)
class Leading(Hierarchical):
    r"""The isotropic prior plus the hierarchical prior's excess on each row's ``terms`` largest terms.

    Every term keeps the shared variance ``tau / lambda`` (``tau = 1``: the isotropic prior's);
    the ``r`` terms with the largest :math:`a_T` among the triples of the row's ``k`` strongest
    features add :math:`\max(\mu + (1 - \mu) a_T / \bar a - \tau, 0) / \lambda`. The covariance is
    then a rank-``r`` update :math:`C_0 + V \Lambda V^\top` of the shared :math:`C_0 = W^{-1} +
    \frac{\tau}{\lambda} K_3`, and with :math:`A_0 = (I + W^{1/2} \frac{\tau}{\lambda} K_3
    W^{1/2})^{-1}` (once per draw) and :math:`B = W^{1/2} V \Lambda^{1/2}` the Woodbury identity

    .. math::

        (I + W^{1/2} K W^{1/2})^{-1} = A_0 - A_0 B (I_r + B^\top A_0 B)^{-1} B^\top A_0

    costs a row about ``U^2 r`` multiply-adds, where :class:`Hierarchical` factorises ``U x U``.
    ``r`` is held to ``U / rows_per_term``. With ``k = M``, every triple kept and ``tau = mu`` it
    is the hierarchical prior exactly. (Without the shared variance, ``tau = mu = 0``, the error at
    20 M coalitions per row rose several-fold on tree ensembles' games.)

    Attributes:
      power, mix: as for :class:`Hierarchical`.
      features: ``k``, the leading features whose triples are candidates (all ``M`` when larger).
      terms: ``r``, the candidates that get the row's own variance (``None``: every triple of ``k``).
      tail: ``tau`` in ``[0, 1]``, the share of the isotropic variance every term keeps.
      rows_per_term: the fewest regression rows per kept term.
    """

    features: int = 16
    terms: int | None = 120
    tail: float = 1.0
    rows_per_term: int = 5
    name = "leading"

    def __post_init__(self):
        super().__post_init__()
        integer(self.features, "features", least=3)
        if self.terms is not None:
            integer(self.terms, "terms", least=1)
        number(self.tail, "tail", least=0.0, most=1.0, rule="a share in [0, 1]")
        integer(self.rows_per_term, "rows_per_term", least=1)

    def n_terms(self, m: int, units: int | None = None) -> tuple[int, int]:
        """``(k, r)``: the leading features and the terms kept at ``M = m`` with ``units`` rows."""
        k = min(self.features, m)
        r = math.comb(k, 3) if self.terms is None else min(self.terms, math.comb(k, 3))
        return k, r if units is None else max(1, min(r, units // self.rows_per_term))

    def row_elements(self, units: int, features: int, shared: bool = True) -> int:
        r = self.n_terms(features, units)[1]
        return (0 if shared else 4 * units**2) + units * (6 * r + 4 * features) + r * r

    def parts(self, plan, masks, weights, controls, *, dtype, deps: Any = ()) -> LeadingParts:
        rw, lam, signs = self._rows(plan, masks, weights, controls, dtype)
        s = jnp.sqrt(rw.wu)
        shared = jnp.eye(len(rw.wu), dtype=dtype)
        if self.tail > 0:
            shared = spd_inverse(shared + (self.tail / lam) * (s[:, None] * odd_kernel(signs, signs, 3) * s[None, :]), deps)
        white_design = shared @ (s[:, None] * rw.design)
        gram = rw.design.T @ (s[:, None] * white_design)
        return LeadingParts(HierarchyParts(signs, rw.design, rw.wu, None, lam, rw.curvature), shared, white_design, gram)

    @full_precision
    def apply(self, ops, parts: LeadingParts, plan, values, v_empty, v_full):
        op, _, spans = ops
        dtype, m = values.dtype, op.phi.shape[0]
        own = parts.rows
        k, r = self.n_terms(m, own.wu.shape[0])
        scales, mass = self.row_scales(op, values, v_empty, v_full)
        triples = jax.lax.top_k(scales, k)[1][np.array(list(itertools.combinations(range(k), 3)), dtype=np.int32)]
        products = scales[triples].prod(-1)  # a_T up to a common factor
        if r < len(triples):
            products, largest = jax.lax.top_k(products, r)
            triples = triples[largest]
        lam, wu, shared = own.lam.astype(dtype), own.wu.astype(dtype), parts.shared.astype(dtype)
        walsh = residualised_triples((own.signs.astype(dtype) + 1.0) / 2.0, triples)  # [U, r]
        above = products * (math.comb(m, 3) / mass * (1.0 - self.mix)) + (self.mix - self.tail)
        b = jnp.sqrt(wu)[:, None] * walsh * safe_sqrt(jnp.maximum(above, 0.0) / lam)[None, :]  # [U, r]
        e = shared @ b
        core = sweep_inverse(b.T @ e + jnp.eye(b.shape[1], dtype=dtype))  # XLA operations, no LAPACK call
        f = e @ core
        whiten = lambda x: shared @ x - f @ (e.T @ x)  # noqa: E731
        p = b.T @ parts.white_design.astype(dtype)  # [r, M]: e^T W^{1/2} D
        white_design = parts.white_design.astype(dtype) - f @ p  # A W^{1/2} D
        gram = parts.gram.astype(dtype) - p.T @ (core @ p)  # r x M work instead of U x M
        diag = jnp.diagonal(shared) - (f * e).sum(-1)
        rows = _own_rows(op, own, dtype)
        h_first = _first_order_penalty(plan, spans, rows.curvature, m, dtype)
        phi, stderr = gls_finish(rows, whiten, white_design, diag, h_first, plan, values, v_empty, v_full, gram)
        return plan_stderr(ops, plan, values, v_empty, v_full, phi, stderr)
