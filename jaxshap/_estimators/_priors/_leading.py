r"""The leading-terms prior: the isotropic prior, plus the hierarchical prior's excess on a row's
largest third-order terms.

The hierarchical prior (:class:`~jaxshap._estimators._priors._hierarchical.Hierarchical`) gives
third-order term :math:`T` the variance :math:`(\mu + (1 - \mu) a_T / \bar a) / \lambda` with
:math:`a_T = \prod_{j \in T} a_j` and :math:`a_j \propto |\hat\phi_j|^p`, so most of its
row-dependent part sits on a few terms among the features with the largest estimates. This prior
gives every term a shared variance :math:`\tau / \lambda` (the *tail*; ``tau = 1``, the default,
is the isotropic prior's) and adds the hierarchical variance's excess over it,
:math:`\max(\mu + (1 - \mu) a_T / \bar a - \tau, 0) / \lambda`, on the ``r`` terms with the largest
:math:`a_T` among the triples of the row's ``k`` strongest features:

.. math::

    C = \underbrace{W^{-1} + \frac{\tau}{\lambda} K_3}_{C_0\ \text{(shared by the rows)}}
        + V \Lambda V^\top, \qquad V = [r_T]_{T \in \mathcal T_r}, \quad
        \Lambda_T = \frac{1}{\lambda} \max\Big(\mu + (1 - \mu) \frac{a_T}{\bar a} - \tau,\ 0\Big).

With ``tau = mu`` the kept terms have the hierarchical prior's variances and the others its
isotropic share; with ``tau = 1`` the terms off the row's leading set keep the isotropic prior's
variance, and only terms above the average weight (``a_T > bar a``) get more. The per-row
covariance is a rank-``r`` update of a shared one, so its inverse follows from the Woodbury
identity: with :math:`A_0 = (I + W^{1/2} \frac{\tau}{\lambda} K_3 W^{1/2})^{-1}` computed once per
draw of coalitions and :math:`B = W^{1/2} V \Lambda^{1/2}`,

.. math::

    (I + W^{1/2} K W^{1/2})^{-1} = A_0 - A_0 B (I_r + B^\top A_0 B)^{-1} B^\top A_0 ,

and a row costs one ``[U, U] x [U, r]`` product and an ``r x r`` inverse, about
``U^2 r`` multiply-adds, where the hierarchical prior factorises and inverts its own ``U x U``
matrix (about ``U^3``; ``U`` the regression rows, about half the coalitions). ``r`` is held to
at most ``U / 5`` (``rows_per_term``), where the update and its ``U x r`` products, about
``U^2 r + 2 U r^2`` in all, cost at most ``0.28 U^3``. With
``k = M``, every triple kept and ``tau = mu`` it is the hierarchical prior exactly.
The choice of terms follows OddSHAP (Fumagalli et al., 2026), which fits a few odd interactions
picked from a proxy of the game; here they are picked from the row's own first-order estimate and
shrunk, not fitted freely, and the other terms keep a shared variance (without it, ``tau = mu =
0``, the error at 20 M coalitions per row rose several-fold on tree ensembles' games). Like every
prior it leaves the estimand alone (exact values with every coalition enumerated); the standard
error is the row operator's leave-one-unit-out sandwich
(:func:`jaxshap._estimators._kernel_solve.gls_finish`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..._coalitions._kernel_design import plan_rows
from ..._core._validate import integer, number
from .._control_variates import odd_kernel
from .._kernel_solve import _safe_sqrt, _spd_inverse, gls_finish, plan_stderr, regression_rows
from .._sweep import sweep_inverse
from .._precision import full_precision
from ._hierarchical import Hierarchical, HierarchyParts, first_order_penalty, own_rows, third_order_rho

FEATURES = 16
"""The default number ``k`` of leading features among whose triples the terms are chosen."""

TERMS = 120
"""The default number ``r`` of terms with the row's own variances."""

TAIL = 1.0
"""The default share ``tau`` of the isotropic variance that every term keeps (the isotropic prior's)."""

ROWS_PER_TERM = 5
"""The fewest regression rows per kept term, ``r <= U / 5``: the row's update then costs at most
``0.28 U^3`` multiply-adds (the measurements behind the choice are in ``CHANGELOG.md``)."""


def residualised_triples(z, triples):
    r"""``[U, r]``: the residualised third-order terms of ``triples [r, 3]`` at the coalitions
    ``z [U, M]`` (0 or 1), :math:`r_T(z) = s_i s_j s_k - (s_i + s_j + s_k) / 3` with ``s = 2 z - 1``.

    :math:`r_T` depends on ``z`` only through :math:`c = |T \cap z|`: it is 0, 4/3, -4/3, 0 for
    ``c = 0, 1, 2, 3``, the cubic :math:`\tfrac{2}{3} c (c - 3)(2 c - 3)`. So one product of ``z``
    with the triples' indicator columns gives every term, where gathering three columns per term
    from ``z`` would cost a gather of ``3 U r`` elements per row.
    """
    members = jax.nn.one_hot(triples, z.shape[-1], dtype=z.dtype).sum(-2)  # [r, M], three ones a row
    c = z @ members.T  # [U, r], exact: sums of at most three ones
    return (2.0 / 3.0) * c * (c - 3.0) * (2.0 * c - 3.0)


class LeadingParts(NamedTuple):
    """The arrays of one draw that :class:`Leading`'s per-row update needs.

    Attributes:
      rows: the hierarchical prior's parts (regression rows, ``lambda``, curvature), without its
        isotropic kernel.
      shared: ``[U, U]`` ``A_0``, the inverse of the shared whitened covariance.
      white_design: ``[U, M]`` ``A_0 W^{1/2} D``.
      gram: ``[M, M]`` ``D^T W^{1/2} A_0 W^{1/2} D``, the shared covariance's Gram matrix.
    """

    rows: HierarchyParts
    shared: Any
    white_design: Any
    gram: Any


@dataclasses.dataclass(frozen=True)
class Leading(Hierarchical):
    """The isotropic prior plus the hierarchical prior's excess on each row's ``terms`` largest
    third-order terms.

    See the module docstring: a rank-``r`` update of one factorisation shared by every row,
    instead of a ``U x U`` factorisation per row.

    Attributes:
      power: ``p``, the power of ``|phi_j|`` in the feature scales.
      mix: ``mu`` in ``[0, 1]``, the hierarchical variance's isotropic share.
      features: ``k``, the leading features whose triples are candidates (all ``M`` when larger).
      terms: ``r``, the candidates with the largest ``a_T`` that get the row's own variance
        (``None``: every triple of the ``k`` features).
      tail: ``tau`` in ``[0, 1]``, the share of the isotropic variance every term keeps (``1``: the
        isotropic prior's; ``mu``: the hierarchical prior's on the kept terms).
      rows_per_term: the fewest regression rows per kept term (``r <= U / rows_per_term``).
    """

    features: int = FEATURES
    terms: int | None = TERMS
    tail: float = TAIL
    rows_per_term: int = ROWS_PER_TERM
    name = "leading"
    solves_per_row = False  # its per-row inverses are sweeps (XLA operations), not LAPACK calls

    def __post_init__(self):
        super().__post_init__()
        integer(self.features, "features", least=3)
        if self.terms is not None:
            integer(self.terms, "terms", least=1)
        number(self.tail, "tail", least=0.0, most=1.0, rule="a share in [0, 1]")
        integer(self.rows_per_term, "rows_per_term", least=1)

    def n_terms(self, m: int, units: int | None = None) -> tuple[int, int]:
        """``(k, r)``: the leading features and the terms kept among their triples at ``M = m``,
        with ``units`` regression rows (``None``: no cap from the rows)."""
        k = min(self.features, m)
        r = math.comb(k, 3) if self.terms is None else min(self.terms, math.comb(k, 3))
        if units is not None:
            r = max(1, min(r, units // self.rows_per_term))
        return k, r

    def row_elements(self, units: int, features: int, shared: bool = True) -> int:
        """The kept terms' columns and their products (``units x r``), the design's, and without
        shared coalitions the draw's ``units x units`` parts."""
        r = self.n_terms(features, units)[1]
        own = 0 if shared else 4 * units**2  # the draw's kernel and A_0, per row
        return own + units * (6 * r + 4 * features) + r * r

    def parts(self, plan, masks, weights, controls, *, dtype, deps: Any = (), xp: Any = jnp) -> LeadingParts:
        """The draw's regression rows and ``A_0`` (one ``U x U`` inverse per draw)."""
        self.check_controls(controls)
        rw = regression_rows(masks, weights, plan_rows(plan), dtype, xp)
        lam = third_order_rho(controls) * rw.curvature / masks.shape[-1]
        signs = 2.0 * rw.z - 1.0
        s = xp.sqrt(rw.wu)
        shared = xp.eye(len(rw.wu), dtype=dtype)
        if self.tail > 0:
            shared = _spd_inverse(shared + (self.tail / lam) * (s[:, None] * odd_kernel(signs, signs, 3) * s[None, :]), deps, xp)
        white_design = shared @ (s[:, None] * rw.design)
        gram = rw.design.T @ (s[:, None] * white_design)
        return LeadingParts(HierarchyParts(signs, rw.design, rw.wu, None, lam, rw.curvature), shared, white_design, gram)

    def parts_shapes(self, plan, controls, dtype) -> LeadingParts:
        u, m = len(plan_rows(plan)[0]), plan.n_features
        real = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731
        return LeadingParts(HierarchyParts(real(u, m), real(u, m), real(u), None, real(), real()), real(u, u), real(u, m), real(m, m))

    @full_precision
    def apply(self, ops, parts: LeadingParts, plan, values, v_empty, v_full):
        """The row's feature scales, its leading triples' columns, the Woodbury-updated solve."""
        op, _, spans = ops
        dtype = values.dtype
        m = op.phi.shape[0]
        k, r = self.n_terms(m, parts.rows.wu.shape[0])
        scales, mass = self.row_scales(op, values, v_empty, v_full)
        lead = jax.lax.top_k(scales, k)[1]
        triples = lead[np.array(list(itertools.combinations(range(k), 3)), dtype=np.int32)]  # [C(k, 3), 3]
        products = scales[triples].prod(-1)  # a_T up to a common factor
        if r < len(triples):  # the r largest products among them
            products, largest = jax.lax.top_k(products, r)
            triples = triples[largest]
        own = parts.rows
        signs = own.signs.astype(dtype)
        lam, curvature = own.lam.astype(dtype), own.curvature.astype(dtype)
        wu, shared = own.wu.astype(dtype), parts.shared.astype(dtype)
        walsh = residualised_triples((signs + 1.0) / 2.0, triples)  # [U, r]
        # the kept terms' variance beyond the tail's, mu + (1 - mu) a_T / mean(a) - tau (never below 0)
        above = products * (math.comb(m, 3) / mass * (1.0 - self.mix)) + (self.mix - self.tail)
        var = jnp.maximum(above, 0.0) / lam
        b = jnp.sqrt(wu)[:, None] * walsh * _safe_sqrt(var)[None, :]  # [U, r]; a zero scale: a zero column
        e = shared @ b
        core = sweep_inverse(b.T @ e + jnp.eye(b.shape[1], dtype=dtype))  # XLA operations, no LAPACK call
        f = e @ core
        whiten = lambda x: shared @ x - f @ (e.T @ x)  # noqa: E731
        white_design = parts.white_design.astype(dtype)
        p = b.T @ white_design  # [r, M]: e^T W^{1/2} D, as e^T = b^T A_0
        white_design = white_design - f @ p  # A W^{1/2} D
        gram = parts.gram.astype(dtype) - p.T @ (core @ p)  # D^T W^{1/2} A W^{1/2} D, r x M work instead of U x M
        diag = jnp.diagonal(shared) - (f * e).sum(-1)
        h_first = first_order_penalty(plan, spans, curvature, m, dtype)
        rows = own_rows(op, own, curvature, dtype)
        phi, stderr = gls_finish(rows, whiten, white_design, diag, h_first, plan, values, v_empty, v_full, gram)
        return plan_stderr(ops, plan, values, v_empty, v_full, phi, stderr)
