"""``KernelExplainer``: KernelSHAP with an exact efficiency constraint and standard errors."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._kernel_plan import kernel_plan
from .._coalitions._kernel_plan import max_coalitions as all_coalitions
from .._coalitions._kernel_plan import min_coalitions
from .._coalitions._kernel_sampling import Auto, Sampler
from .._core._inputs import is_traced
from .._core._validate import DEFAULT_MEMORY_BUDGET, flag, integer, interaction_order, number
from .._engine._explainer import ModelAgnosticExplainer
from .._estimators._kernel import draw_operators, kernel_shapley, third_order_ridge
from .._estimators._kernel_priors import RowPrior
from .._core._platform import after
from .._core._platform import cached_jit, one_blas_thread
from ..maskers._base import SHAPLEY


def default_coalitions(n_features: int) -> int:
    """The default budget, ``2 M + 2048`` (shap's default ``nsamples``), capped at ``2**M - 2``."""
    return min(2 * n_features + 2048, all_coalitions(n_features))


def _sampler_choice(sampler: Any) -> Sampler | Auto:
    """``sampler=`` as a design or the rule that picks one: ``"auto"`` or an :class:`Auto` gives the
    rule, a registered name or a :class:`Sampler` instance the design."""
    if isinstance(sampler, Auto):
        return sampler
    if isinstance(sampler, str) and sampler == "auto":
        return Auto()
    return Sampler.resolve(sampler, others=("auto",))


@cached_jit
def shared_draw(core: "KernelExplainer", key: jax.Array) -> tuple:
    """``core._draw(key)`` as a program of its own."""
    return core._draw(key)


class KernelExplainer(ModelAgnosticExplainer):
    r"""KernelSHAP: Shapley values as a weighted least-squares fit over sampled coalitions.

    Coalitions ``S`` are drawn under the Shapley kernel ``k(M, s) = (M - 1) / (C(M, s) s (M - s))``
    (small sizes enumerated, the others sampled in complementary pairs without replacement), by
    default once per call for all rows, and the Shapley values of each row are the solution of

    .. math::

        \min_\phi \sum_S w_S \bigl(v_x(S) - v_x(\emptyset) - \textstyle\sum_{j \in S} \phi_j\bigr)^2
        \quad \text{s.t.} \quad \textstyle\sum_j \phi_j = f(x) - v_x(\emptyset),

    with the constraint eliminated exactly and the normal equations solved by Cholesky
    (Lundberg & Lee, 2017; Covert & Lee, 2021). No L1 feature selection is applied. Efficiency
    holds for every estimate; ``stderr`` is the linearised (sandwich) standard error of each
    value under the stratified sampling design, with leave-one-pair-out residuals (see
    :mod:`jaxshap._estimators._kernel_solve`). A budget of ``2**M - 2`` or more enumerates
    every coalition and is exact (``stderr`` 0).

    **Shared coalitions** (default). The coalitions depend only on the key, so one draw serves
    every row of a call (and of every block, chunk and device: results do not depend on them);
    the regression, with its control variates, is factorised once inside the compiled program
    and each row's solve is a matrix product, so the controls cost little beyond the model
    evaluations (with ``prior="hierarchical"`` or ``"leading"``, which the default takes at small
    budgets, each row also solves or updates its own regression). The draw is the one row 0 makes
    with ``shared_coalitions=False`` (from ``fold_in(key, 0)``, by
    :func:`jaxshap.coalitions.sample_kernel_coalitions`): a one-row call gives the same values
    either way. Each row's estimate is the same estimator as with independent draws (its
    ``stderr`` is valid row by row), but errors are correlated across rows: pass
    ``shared_coalitions=False`` for independent draws (row ``i`` draws from ``fold_in(key, i)``
    and factorises its own design). Gradients flow through the values.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy).
      background: background rows ``[B, M]`` or a masker.
      n_coalitions: coalitions evaluated per row, *not counting* the empty and the full
        coalition (always evaluated, for the base value and ``f(x)``), as shap's ``nsamples``.
        An integer is honoured exactly (capped at ``2**M - 2``, where every coalition is
        enumerated); any budget of at least 2 (one complementary pair) is accepted. From
        ``2 M + 2 (floor(M/2) - 1)`` the plan is fully stratified; below that the size-1 layer
        is enumerated when ``2 M + 2`` fits (shap's least useful budget) and the other sizes are
        sampled together with replacement, with a small-sample (Student) widening of ``stderr``;
        below about ``2 (M - 1)`` the regression is not identified: the values are a
        ridge-regularised guess (still efficient) and ``stderr`` is infinite.
        ``None`` (default) means ``2 M + 2048`` like shap: it costs the same as shap's default
        and gives errors of a few percent of the spread of the values for typical models with
        tens of features. ``"auto"`` adds independent rounds of that size (averaged) until, for
        every row, ``max_j stderr_j / (max_j phi_j - min_j phi_j) < tolerance`` (Covert & Lee's
        convergence rule), or until ``max_coalitions`` per row are spent; it runs a Python loop
        over rounds and therefore needs concrete inputs (not inside ``jax.jit``).
      sampler: the design that shares the sampled pairs among coalition sizes: a
        :class:`jaxshap.coalitions.Sampler` (``Paired()``, ``Leverage()``, ``Middle(share=...)``
        or a subclass of your own) or the name of a registered one (``"paired"``: sizes in
        proportion to the kernel; ``"leverage"``: uniform over sizes, the leverage scores of the
        constrained regression, Musco & Witter, 2025; ``"middle"``: most pairs at the sizes
        nearest ``M / 2``, where the third-order controls learn most); or ``"auto"`` (default)
        or a :class:`jaxshap.coalitions.Auto`, the rule that picks one: with the third-order
        controls on, middle while the budget is at most ``Auto.middle_terms`` (1.5) coalitions
        per third-order term, then leverage from ``Auto.leverage_units`` (10) coalitions per
        feature; paired otherwise. The attribute ``sampler`` holds the choice: a name when a
        name (or ``"auto"``) was given, else the instance.
      third_order: include every third-order Fourier (Walsh) interaction term in the regression
        as a ridge-penalised control variate (see :func:`jaxshap.estimators.kernel_solve`): the
        same evaluations and the same estimand (exact under full enumeration). Up to ``C(M, 3)``
        explicit columns when they are fewer than the sampled pairs, else the same fit in
        kernel form (a factorisation of pairs x pairs, any ``M``; Pelegrina et al., 2023;
        Witter et al., 2025, regression-adjusted Monte Carlo). Its ridge grows with ``C(M, 3)``
        (:func:`jaxshap._estimators._kernel.third_order_ridge`), so the surrogate's effective
        size follows the budget rather than ``M``. ``"auto"`` (default) turns it on when the
        plan samples at least ``2 M`` coalitions (below that the few sampled pairs cannot fit
        it; :attr:`jaxshap.coalitions.Auto.controls_units`); ``True`` always. See
        ``bench/scenarios/kernel_accuracy.py`` for measured gains.
      prior: the prior of the third-order coefficients (with the controls on): ``"isotropic"``,
        one variance for every term and one solve for all rows; ``"hierarchical"``
        (:class:`jaxshap.estimators.Hierarchical`), variances that follow each row's own
        first-order estimate, so the terms among the row's strongest features carry most of
        them (interactions follow main effects; tree models' interactions are sparse), at the
        price of a solve per row; ``"leading"`` (:class:`jaxshap.estimators.Leading`), the
        isotropic prior plus the hierarchical variances' excess on each row's largest terms (120, at
        most one per 5 regression rows),
        a low-rank update of one shared solve instead of a solve per row; or a :class:`jaxshap.estimators.RowPrior`
        instance; or ``"auto"`` (default), the rule that picks one
        (:meth:`jaxshap.coalitions.Auto.prior`): the leading-terms prior up to
        ``Auto.prior_units`` (32) coalitions per feature and ``Auto.prior_coalitions`` (2048) in
        all, the isotropic one above, so the default budget (``2 M + 2048``) shares one solve. The
        leading-terms prior lowers the squared error at equal model evaluations for a low-rank
        update per row (measured in ``bench/scenarios/kernel_accuracy.py`` and ``kernel_speed.py``); the hierarchical prior's
        per-row solve costs more. The attribute ``prior`` holds the choice: a name when a name
        (or ``"auto"``) was given, else the instance.
      shared_coalitions: one draw of coalitions (and one factorisation) for all rows of a
        call (default ``True``), or an independent draw per row (``False``).
      tolerance: the convergence threshold of ``"auto"`` (default 0.01).
      max_coalitions: the cap of ``"auto"``, per row (default ``32`` rounds).
      feature_names: optional feature names.
      memory_budget: bytes one chunk of evaluations may use.
      link: ``"identity"`` or ``"logit"`` (explain the log-odds of a probability output, as
        shap's ``link``; see :class:`jaxshap._engine._explainer.ModelAgnosticExplainer`).
      groups, causal_ordering, confounding, asymmetric: groups of columns as the players, causal
        and asymmetric Shapley values (shapr's arguments; see
        :class:`jaxshap._engine._explainer.ModelAgnosticExplainer`); asymmetric values are refused
        (no regression form: ExactExplainer or PermutationExplainer computes them).

    Raises:
      ValueError: for a budget that is not an integer, ``None`` or ``"auto"``, or below the
        minimum; for an unknown sampler or prior, a ``third_order`` that is not a bool or
        ``"auto"``, a prior other than the isotropic one without the controls, a
        ``shared_coalitions`` that is not a bool, or a non-positive tolerance.
    """

    background_rows = None  # shap's KernelExplainer keeps every background row (and advises above 100)

    def __init__(
        self,
        model: Callable,
        background: Any,
        n_coalitions: int | str | None = None,
        *,
        sampler: str | Sampler | Auto = "auto",
        third_order: bool | str = "auto",
        prior: str | RowPrior = "auto",
        shared_coalitions: bool = True,
        tolerance: float = 0.01,
        max_coalitions: int | None = None,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        link: str = "identity",
        groups: Any = None,
        causal_ordering: Any = None,
        confounding: Any = None,
        asymmetric: bool = False,
    ):
        choice = _sampler_choice(sampler)
        if isinstance(n_coalitions, str) and n_coalitions != "auto":
            raise ValueError(f"`n_coalitions` must be an integer, None or 'auto'; got {n_coalitions!r}.")
        if n_coalitions is not None and n_coalitions != "auto":
            n_coalitions = integer(n_coalitions, "n_coalitions")
        self.tolerance = number(tolerance, "tolerance", above=0.0, rule="a positive number")
        if max_coalitions is not None:
            max_coalitions = integer(max_coalitions, "max_coalitions")
        super().__init__(
            model, background, feature_names=feature_names, memory_budget=memory_budget, link=link,
            groups=groups, causal_ordering=causal_ordering, confounding=confounding, asymmetric=asymmetric,
        )
        m = self.n_features
        self.auto = n_coalitions == "auto"
        budget = default_coalitions(m) if n_coalitions is None or self.auto else n_coalitions
        if budget < min_coalitions(m):
            raise ValueError(
                f"`n_coalitions` must be at least {min_coalitions(m)} (one complementary pair); got "
                f"{budget}. The default, 2 * M + 2048, suits most problems; 2 * M + 2 is the least that "
                f"covers every feature."
            )
        self.n_coalitions = min(budget, all_coalitions(m))
        if max_coalitions is None:
            max_coalitions = 32 * self.n_coalitions
        if max_coalitions < self.n_coalitions:
            raise ValueError(
                f"`max_coalitions` ({max_coalitions}) must be at least one round of {self.n_coalitions} coalitions."
            )
        self.max_coalitions = max_coalitions
        rule = choice if isinstance(choice, Auto) else Auto()
        if third_order == "auto":
            third_order = rule.wants_controls(m, self.n_coalitions, None if isinstance(choice, Auto) else choice)
        elif not isinstance(third_order, bool):
            raise ValueError(f"`third_order` must be True, False or 'auto'; got {third_order!r}.")
        if isinstance(choice, Auto):
            choice = choice.choose(m, self.n_coalitions, bool(third_order))
        # a name (or "auto") stays a name; an instance stays the instance
        self.sampler = choice.name if isinstance(sampler, str) else choice
        self.shared_coalitions = flag(shared_coalitions, "shared_coalitions")
        self.third_order = bool(third_order) and m >= 3
        self.controls = ((3, third_order_ridge(m)),) if self.third_order else ()
        self.prior, self._prior = self._prior_choice(prior, rule)

    def __call__(self, X: Any, key: Any = None, *, interactions: Any = False, **kwargs: Any):
        """Explain the rows of ``X`` (see :meth:`jaxshap.Explainer.__call__`). ``interactions``
        other than ``False`` is refused (``ValueError``): KernelExplainer computes Shapley values
        only; sampled Faith-SHAP interactions are :func:`jaxshap.estimators.kernel_interactions`,
        exact ones ``ExactExplainer`` and ``TreeExplainer``."""
        interaction_order(interactions, 0)
        return super().__call__(X, key, **kwargs)

    def _prior_choice(self, prior: Any, rule: Auto) -> tuple[Any, RowPrior]:
        """``(attribute, instance)`` of ``prior=``: ``"auto"`` asks the rule (a name), a name stays a
        name, an instance stays the instance; without the controls the prior is isotropic."""
        if isinstance(prior, str) and prior == "auto":
            prior = rule.prior(self.n_features, self.n_coalitions, self.third_order)
        chosen = RowPrior.resolve(prior, others=("auto",))
        if self.third_order:
            chosen.check_controls(self.controls)
        elif chosen.name != "isotropic":
            raise ValueError(
                f"`prior` {prior!r} sets the variances of the third-order control variates, which are off: "
                "pass third_order=True (or 'auto' with a budget of at least 2 M sampled coalitions), or prior='isotropic'."
            )
        return (chosen.name if isinstance(prior, str) else chosen), chosen

    def _check_n_features(self, n_features: int) -> None:
        if self.masker.attribution != SHAPLEY:  # the regression estimates Shapley values only
            raise ValueError(
                f"KernelExplainer computes Shapley values and has no {self.masker.attribution} form for a "
                f"maskers.{type(self.masker).__name__} masker; use jaxshap.ExactExplainer or "
                "jaxshap.PermutationExplainer with that masker, or maskers.Independent(data) for Shapley values."
            )

    def _coalitions_per_row(self) -> int:
        return self.n_coalitions + 2

    def _working_set_per_row(self) -> int:
        """Bytes a row holds beside its model evaluations: its coalition values and, with
        independent draws, its masks."""
        c, m, k = self._coalitions_per_row(), self.n_features, self.model.n_outputs
        values = np.dtype(self.masker.dtype).itemsize * k * c
        return values if self.shared_coalitions else values + c * m

    def _solve_set_per_row(self) -> int:
        """Bytes a row's solve holds once its model evaluations are done.

        With shared coalitions the design and its factorisation exist once per block, not per
        row: a row holds the paired responses and residuals of its values, and its per-unit
        influence terms ``[C / 2, M, K]`` for the standard error. With independent draws each
        row also holds the design (with the ``C(M, 3)`` third-order columns when on), its
        weighted copy and the Gram matrix with its factor. Past as many third-order columns as
        coalitions the solve is in kernel form, whose matrices are rows x rows. A prior with a
        per-row solve holds its own arrays in every case
        (:meth:`jaxshap.estimators.RowPrior.row_elements`).
        """
        c, m, k = self._coalitions_per_row(), self.n_features, self.model.n_outputs
        itemsize = np.dtype(self.masker.dtype).itemsize
        own = itemsize * self._prior.row_elements(c // 2 + 1, m, self.shared_coalitions)
        if self.shared_coalitions:
            return itemsize * k * (2 * c + c * m // 2) + own
        t = m * (m - 1) * (m - 2) // 6 if self.third_order else 0
        if t and m + t > c:
            # kernel form (jaxshap._estimators._kernel_solve.kernel_operator): matrices of
            # regression rows x rows (at most C of them) instead of the C(M, 3) columns
            return itemsize * (c * (4 * m + 2 * k) + 5 * c * c) + own
        return itemsize * (c * (4 * m + 3 * t + 2 * k) + 3 * (m + t) ** 2) + own

    def _estimate(self, key, value_fn):
        phi, stderr, v0, _ = kernel_shapley(
            key, value_fn, self.n_features, self.n_coalitions, sampler=self.sampler, controls=self.controls,
            prior=self._prior,
        )
        return phi, v0, stderr

    def _explain_keyed(self, X, key, index, rows_per_chunk, coalitions_per_chunk, n_valid=None):
        """Shared coalitions: one draw, and one factorisation, for every row (traced).

        The draw comes from ``fold_in(key, 0)`` alone, so every row in every block, chunk and
        device sees the same coalitions (:func:`jaxshap._estimators._kernel.draw_operators`);
        each row then costs its model evaluations and the prior's per-row step
        (:meth:`jaxshap.estimators.RowPrior.apply`). The rows' evaluations start after the draw's
        factorisations, so a masker's batched LAPACK calls never run beside them
        (:mod:`jaxshap._core._platform`). ``shared_coalitions=False`` draws each row's own
        coalitions from ``fold_in(key, row)`` instead (the base class's path).
        """
        m = self.n_features
        if not self.shared_coalitions or m == 1:
            return super()._explain_keyed(X, key, index, rows_per_chunk, coalitions_per_chunk, n_valid)
        plan = kernel_plan(m, self.n_coalitions, self.sampler)
        draw = vars(self).get("shared_draw")  # drawn once for the call by _with_shared_work, or here
        if draw is None:
            draw = self._draw(key)
        masks, ops, parts = draw
        every = after(jnp.concatenate([jnp.zeros((1, m), bool), jnp.ones((1, m), bool), masks], axis=0), draw)

        def one_row(value_fn, x):
            v = value_fn(every)
            tail = v.shape[1:]
            flat = v.reshape(v.shape[0], -1)
            phi, stderr = self._prior.apply(ops, parts, plan, flat[2:], flat[0], flat[1])
            return phi.reshape((m,) + tail), v[0], stderr.reshape((m,) + tail)

        return self._map_rows(one_row, X, (), rows_per_chunk, coalitions_per_chunk, n_valid)

    def _draw(self, key: jax.Array) -> tuple:
        """The shared coalitions of a call and their operators (see :meth:`_explain_keyed`)."""
        plan = kernel_plan(self.n_features, self.n_coalitions, self.sampler)
        return draw_operators(jax.random.fold_in(key, 0), plan, self.controls, self._prior, dtype=jnp.dtype(self.masker.dtype))

    def _with_shared_work(self, key: jax.Array) -> "KernelExplainer":
        """With shared coalitions: this explainer holding the call's draw and factorisations
        (``shared_draw``, computed once by its own compiled program), so that blocks of rows
        explained by separate programs do not factorise again."""
        if not self.shared_coalitions or self.n_features == 1:
            return self
        core = self._core()
        core.shared_draw = shared_draw(core, key)
        return core

    def _run(self, X, key, offset, devices, bar, blocked):
        """Explain validated rows (see :meth:`jaxshap.Explainer._run`), in rounds when ``"auto"``.

        With ``n_coalitions="auto"`` the rows are explained in rounds of independent coalitions
        (round ``r`` uses ``fold_in(key, r)``) until every row meets the tolerance or the cap.
        Overriding ``_run`` (not ``__call__``) gives the rounds to ``explain_batches`` too. The
        programs factorise on a CPU through SciPy's OpenBLAS, held at one thread meanwhile
        (:func:`jaxshap._core._platform.one_blas_thread`; XLA's pool already spreads the work).
        """
        if is_traced(X) or is_traced(key):
            return self._rounds(X, key, offset, devices, bar, blocked)
        with one_blas_thread(lapack=True):
            return jax.block_until_ready(self._rounds(X, key, offset, devices, bar, blocked))

    def _rounds(self, X, key, offset, devices, bar, blocked):
        """:meth:`_run` without the thread hold."""
        if not self.auto or self.n_coalitions >= all_coalitions(self.n_features):
            return super()._run(X, key, offset, devices, bar, blocked)
        if is_traced(X) or is_traced(key):
            raise ValueError(
                "n_coalitions='auto' decides the number of rounds from the results, which needs concrete "
                "inputs; inside jax.jit or jax.grad pass an integer n_coalitions instead."
            )
        rounds = []
        max_rounds = max(1, self.max_coalitions // self.n_coalitions)
        while True:
            rounds.append(super()._run(X, jax.random.fold_in(key, len(rounds)), offset, devices, None, blocked))
            r = len(rounds)
            phi = sum(out[0] for out in rounds) / r  # [n, M, K]
            stderr = jnp.sqrt(sum(out[2] ** 2 for out in rounds)) / r
            spread = phi.max(axis=1) - phi.min(axis=1)
            ratio = stderr.max(axis=1) / jnp.maximum(spread, jnp.finfo(phi.dtype).tiny)
            if r >= max_rounds or bool(jnp.all(ratio < self.tolerance)):
                break
        if bar is not None:
            bar.update(X.shape[0])
        self.last_rounds_ = r
        return phi, rounds[0][1], stderr
