"""The masker protocol: what an explainer asks of a value function, and of the attribution; the
base of the maskers whose coalition value is a Monte-Carlo mean over draws of ``X`` given
``X_S = x_S`` (:class:`ConditionalSampler`); and shap's function maskers, a callable
``masker(mask, x)`` that returns the masked rows (:class:`FunctionMasker`).
"""

from __future__ import annotations

import abc
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import permutation_ranks, sample_permutations
from .._core._inputs import as_matrix
from .._core._pytree import Static, register_fields
from .._estimators._exact import exact_shapley


ValueFn = Callable[[jax.Array], jax.Array]

SHAPLEY = "Shapley"
"""The :attr:`Masker.attribution` of a masker that leaves the attribution alone (the default)."""


class Masker(abc.ABC):
    r"""Abstract base of the maskers: turns a model, a row and coalitions into coalition values.

    A masker defines the game :math:`v_x(S)` that an explainer attributes: the expected model
    output when the features in ``S`` take the row's values and the others are filled in (from
    background rows, a fitted distribution, ...). The model-agnostic explainers (Exact,
    Permutation, Kernel) call :meth:`coalition_values`, read the properties below and call the
    attribution hooks; they never ask for a masker's class.

    Subclasses define:

    * ``n_features`` (``M``), ``dtype`` (the floating dtype rows are computed in);
    * ``evals_per_coalition``: model evaluations one coalition value costs (chunk planning);
    * ``probe_rows``: a few valid input rows ``[b, M]`` to probe a model's output shape;
    * ``feature_names``: names of the ``M`` features, or ``None``;
    * :meth:`coalition_values`;
    * optionally ``bytes_per_coalition`` (memory besides model evaluations) and
      :meth:`check_model` (refuse a model the masker cannot value).

    **Pytree, by rule.** Every subclass is registered as a JAX pytree when its class is defined
    (no decorator): each instance attribute is split by :func:`jaxshap._core._pytree.split`, so
    every JAX or NumPy array it holds (also inside tuples, dicts and NamedTuples) is a leaf,
    traced under ``jax.jit`` and differentiated by ``jax.grad``, and every other value (ints,
    strings, tuples of numbers, ``None``) is static configuration, part of the compiled
    program's cache key and compared by value. Two instances with equal configuration and
    arrays of the same shapes share one compiled program. Hence:

    * hold what the value function computes with (background rows, weights, moments, draws) as
      arrays;
    * hold what must stay concrete under tracing (sizes, a hierarchy the explainers enumerate on
      the host) as Python values, such as a tuple of floats, never as a NumPy array;
    * attributes whose name ends in ``_`` (caches) are left out of the tree.

    A subclass that defines ``tree_flatten`` and ``tree_unflatten`` (the protocol of
    ``jax.tree_util.register_pytree_node_class``) is registered with those instead.

    **Attribution hooks.** By default explainers attribute the game's Shapley values. A masker
    that changes the attribution, as :class:`jaxshap.maskers.Partition` does (Owen values over a
    feature hierarchy), names it in :attr:`attribution` and overrides the hooks:

    * :meth:`exact_coalition_count`, :meth:`check_exact_size` and :meth:`exact_attribution`:
      what ``ExactExplainer`` evaluates and how it combines the values;
    * :meth:`sample_order_ranks`: the orders ``PermutationExplainer`` walks;
    * :attr:`auto_exact_features`: up to how many features ``jaxshap.Explainer`` picks the
      exact explainer;
    * :meth:`antithetic_ranks`: the order walked beside each drawn one (default: its reverse).

    **Players and columns.** The players (``n_features``, ``feature_names``) are the model's
    input columns (``n_columns``, ``column_names``) unless a masker says otherwise, as
    :class:`jaxshap.maskers.Grouped` does (its players are groups of columns; ``coalition_values``
    then takes the explained row ``[n_columns]`` and player coalitions ``[C, n_features]``).

    Estimators that exist for Shapley values only (KernelSHAP's regression, the exact
    interaction indices, the permutation explainer's control variates) refuse, or turn off,
    when :attr:`attribution` is not :data:`SHAPLEY`.

    Concrete maskers are listed in :mod:`jaxshap.maskers`.
    """

    feature_names: tuple[str, ...] | None = None

    attribution: str = SHAPLEY
    """The value explainers compute with this masker, named in messages: ``"Shapley"`` or, for
    a masker whose hooks compute another one, its name (``"Owen"``)."""

    auto_exact_features: int = 10
    """``jaxshap.Explainer`` computes exact attributions up to this many features and samples
    beyond (shap's rule for Shapley values: 10)."""

    @property
    def n_columns(self) -> int:
        """Columns of the rows the model takes (``M`` unless the players are groups of columns,
        as with :class:`jaxshap.maskers.Grouped`)."""
        return self.n_features

    @property
    def column_names(self) -> tuple[str, ...] | None:
        """Names of the model's input columns (``feature_names`` unless the players are groups)."""
        return self.feature_names

    @property
    def column_categories(self) -> dict[int, tuple]:
        """``{column index: categories}`` for the columns this masker read from pandas ``category``
        columns (code ``k`` of column ``j`` stands for ``categories[j][k]``); ``{}`` when it read
        none. The explainers map such columns of a DataFrame ``X`` (labels) to these codes, so the
        model is called with the codes the masker's own rows hold."""
        return dict(getattr(self, "categories_", None) or {})

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if hasattr(cls, "tree_flatten") and hasattr(cls, "tree_unflatten"):
            jax.tree_util.register_pytree_node_class(cls)
        else:
            register_fields(cls)

    @property
    @abc.abstractmethod
    def n_features(self) -> int:
        """``M``, the number of features."""

    @property
    @abc.abstractmethod
    def dtype(self):
        """The floating dtype of the rows the model is evaluated on."""

    @property
    @abc.abstractmethod
    def evals_per_coalition(self) -> int:
        """Model evaluations that one coalition value costs."""

    @property
    @abc.abstractmethod
    def probe_rows(self) -> jax.Array:
        """A few valid input rows ``[b, M]``, to probe a model's output shape."""

    @property
    def fitted_rows(self) -> Any:
        """The data rows ``[N, M]`` the value function keeps and averages over (a background, or
        an empirical conditional's training rows), or ``None`` for a masker that keeps a fitted
        model instead. A row of ``X`` among them finds itself there: :func:`jaxshap.msev` warns
        that its score on such rows is optimistic."""
        return None

    calls_model_once: bool = False
    """Whether :meth:`coalition_values` calls ``f`` exactly once, on all the rows it masks, and
    outside any ``vmap``, ``scan`` or ``cond`` of its own. Such a masker lets a host (NumPy)
    model run between two compiled programs instead of inside one (see
    :mod:`jaxshap._engine._host_model`), so both programs can be kept across processes."""

    bytes_per_coalition: int = 0
    """Working memory that one coalition value needs besides its model evaluations (a learned
    masker's network activations), counted by the explainers' chunk planner."""

    def check_model(self, f: Callable[[jax.Array], jax.Array]) -> None:
        """Raise when ``f`` is not a model this masker can value; explainers call it when built.

        Default: every model is. A masker whose values do not come from ``f`` (a surrogate of
        the model it was trained on) checks here that ``f`` is that model.
        """

    @abc.abstractmethod
    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S)`` for each coalition.

        Args:
          f: model mapping ``[..., M]`` to ``[..., K]``.
          x: the explained row, ``[M]``.
          masks: ``[C, M]`` boolean coalitions (``True``: the feature takes the row's value).

        Returns:
          ``[C, K]`` coalition values.
        """

    # --- attribution hooks (defaults: Shapley values) -------------------------------------------
    def exact_coalition_count(self) -> int:
        """Coalitions per row that :meth:`exact_attribution` evaluates: all ``2**M`` of them."""
        return 2**self.n_features

    def check_exact_size(self, max_coalitions: int) -> None:
        """Raise when :meth:`exact_coalition_count` exceeds ``max_coalitions`` (``ExactExplainer``'s limit).

        Raises:
          ValueError: naming the feature count and the explainers that sample instead.
        """
        m = self.n_features
        if self.exact_coalition_count() > max_coalitions:
            raise ValueError(
                f"ExactExplainer enumerates 2**M coalitions and supports at most {max_coalitions.bit_length() - 1} "
                f"features; the data has {m} (2**{m} = {2**m:,} coalitions). "
                "Use jaxshap.KernelExplainer or jaxshap.PermutationExplainer instead."
            )

    def exact_attribution(self, value_fn: ValueFn) -> tuple[jax.Array, jax.Array]:
        r"""The exact attribution of one row's game: ``(phi [M, ...], v(empty) [...])``.

        Default: the Shapley values :math:`\phi_j = \sum_{S \not\ni j} \frac{|S|!(M-|S|-1)!}{M!}
        [v(S \cup \{j\}) - v(S)]` over all ``2**M`` coalitions (see
        :func:`jaxshap.estimators.exact_shapley`).

        Args:
          value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]`` (traced).
        """
        phi, v_empty, _ = exact_shapley(value_fn, self.n_features)
        return phi, v_empty

    def sample_order_ranks(self, key: jax.Array, n_orders: int) -> jax.Array:
        """Ranks ``[n_orders, M]`` of random feature orders for ``PermutationExplainer``'s walks.

        ``ranks[p, j]`` is feature ``j``'s position in order ``p``; the reverse of every order
        must be as likely as the order (the explainer walks both). Default: uniform orders,
        whose mean marginal contributions are the Shapley values.
        """
        return permutation_ranks(sample_permutations(key, self.n_features, n_orders))

    def antithetic_ranks(self, ranks: jax.Array) -> jax.Array | None:
        """Ranks ``[n_orders, M]`` of the orders ``PermutationExplainer`` walks beside those of
        :meth:`sample_order_ranks` (antithetic partners), or ``None`` (default): the reversed orders,
        walked as the complements of the drawn orders' prefixes, which :meth:`sample_order_ranks`
        must then make as likely as the orders. A masker whose reversed orders are not among the
        orders it averages over (asymmetric Shapley values) returns partners that are.
        """
        return None

    # --- conditional sampling (causal Shapley values and learned conditionals use it) -------------
    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        r"""One draw of :math:`X_{\bar G} \mid X_G = r_G` for each row ``r``: ``[N, M]``.

        The columns in ``given`` keep ``rows``' values; the others are drawn from this masker's
        model of the data's conditional distribution given them, independently for each row (the
        rows may differ in their given values, as when a causal chain draws one group after
        another). Maskers without a conditional distribution of their own raise.

        Args:
          key: PRNG key.
          rows: ``[N, M]`` rows holding the given values.
          given: ``[M]`` boolean, ``True`` where the value is given.

        Raises:
          NotImplementedError: naming the masker, for maskers that cannot draw conditionally.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no conditional distribution to draw from; causal Shapley values need "
            "a masker that has one (jaxshap.maskers.Gaussian, GaussianCopula, GaussianMixture, Empirical, Generative)."
        )


class ConditionalSampler(Masker):
    r"""Base of the maskers that estimate :math:`v_x(S) = E[f(X) \mid X_S = x_S]` by sampling.

    .. math::

        v_x(S) \approx \frac1N \sum_{n=1}^{N} f\bigl(X^{(n)}\bigr),\qquad
        X^{(n)} \sim p(X \mid X_S = x_S),\ X^{(n)}_S = x_S .

    A subclass defines :meth:`conditional_samples` (``[C, N, M]`` draws, one set per coalition,
    usually common random numbers shared by every coalition and row) and :attr:`n_samples`; one
    coalition value then costs ``N`` model evaluations. :class:`Gaussian`,
    :class:`GaussianCopula`, :class:`GaussianMixture` and :class:`Generative` are such maskers.
    """

    @property
    def n_samples(self) -> int:
        """``N``, the draws per coalition value (the first axis of the masker's ``noise``)."""
        return self.noise.shape[0]

    @property
    def evals_per_coalition(self) -> int:
        """Model evaluations that one coalition value costs: ``n_samples``."""
        return self.n_samples

    calls_model_once = True

    @abc.abstractmethod
    def conditional_samples(self, x: jax.Array, masks: jax.Array) -> jax.Array:
        """Draws of ``X`` given ``X_S = x_S`` for each coalition: ``[C, n_samples, M]``."""

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S)`` for each coalition in ``masks``.

        Args:
          f: model mapping ``[..., M]`` to ``[..., K]``.
          x: the explained row, ``[M]``.
          masks: ``[C, M]`` boolean coalitions.

        Returns:
          ``[C, K]`` coalition values: means of ``f`` over each coalition's draws.
        """
        return f(self.conditional_samples(x, masks)).mean(axis=1)


def is_function_masker(masker: Any) -> bool:
    """A plain callable given where a masker goes (shap's custom-masker API): not a masker,
    not rows, not a summary."""
    return callable(masker) and not hasattr(masker, "coalition_values") and not hasattr(masker, "shape")


class FunctionMasker(Masker):
    r"""A masking function as a masker: ``v_x(S) = mean_r f(masker(S, x)_r)``.

    shap's custom-masker API: ``masker(mask, x)`` takes a boolean mask ``[M]`` (``True``: the
    feature keeps the row's value) and one row ``x`` ``[M]`` (NumPy) and returns the masked
    rows ``[r, M]`` (or one row ``[M]``), over which the model's output is averaged. It runs on
    the host (through :func:`jax.pure_callback`), once per coalition; it must return the same
    number of rows ``r`` for every mask (``r`` is read from a first call on ``probe_x``).

    Args:
      fn: the masking function.
      probe_x: a row ``[M]`` (the first explained row) that fixes ``M``, ``r`` and the dtype.

    Raises:
      ValueError: when ``fn`` does not return rows of ``M`` columns.
    """

    def __init__(self, fn: Callable, probe_x: Any):
        x = np.asarray(as_matrix(probe_x, "X")[0])
        m = x.shape[0]
        rows = self._rows(fn, np.ones(m, bool), x)
        self.fn, self.m, self.r = Static(fn), m, rows.shape[0]
        self.rows = jnp.asarray(rows, x.dtype)

    @staticmethod
    def _rows(fn: Callable, mask: np.ndarray, x: np.ndarray) -> np.ndarray:
        out = np.asarray(fn(mask, x))
        if out.ndim not in (1, 2) or out.shape[-1] != x.shape[0]:
            raise ValueError(
                f"the masking function must return rows [r, {x.shape[0]}] (or one row [{x.shape[0]}]) for "
                f"masker(mask, x); it returned shape {out.shape}."
            )
        return out.reshape(-1, x.shape[0])

    @property
    def n_features(self) -> int:
        return self.m

    @property
    def dtype(self):
        return self.rows.dtype

    @property
    def evals_per_coalition(self) -> int:
        return self.r

    @property
    def probe_rows(self) -> jax.Array:
        return self.rows

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        fn, r, m, dtype = self.fn.value, self.r, self.m, np.dtype(self.dtype)

        def host(xv, mv):
            out = [self._rows(fn, np.asarray(k, bool), np.asarray(xv)) for k in np.asarray(mv)]
            if any(o.shape[0] != r for o in out):
                raise ValueError(f"the masking function returned a number of rows other than its first call's {r}.")
            return np.stack(out).astype(dtype).reshape(len(out), r, m)

        shape = jax.ShapeDtypeStruct((masks.shape[0], r, m), dtype)
        inputs = jax.pure_callback(host, shape, x, masks, vmap_method="sequential")
        return f(inputs).mean(axis=1)

    def __repr__(self) -> str:
        return f"FunctionMasker({getattr(self.fn.value, '__name__', 'masker')}, rows per coalition: {self.r})"
