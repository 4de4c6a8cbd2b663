r"""The MSEv criterion: how well a value function's coalition values predict the model's output.

For explicands :math:`x_1..x_n` and a set :math:`\mathcal P` of non-empty proper coalitions,

.. math::

    \mathrm{MSE}_v = \frac{1}{n} \sum_{i=1}^{n} \mathrm{MSE}_v(x_i), \qquad
    \mathrm{MSE}_v(x_i) = \frac{1}{|\mathcal P|} \sum_{S \in \mathcal P}
        \bigl(f(x_i) - \hat v(S; x_i)\bigr)^2,

with standard error :math:`\operatorname{sd}_i \mathrm{MSE}_v(x_i) / \sqrt n` (``ddof=1``). The
true conditional expectation :math:`E[f(X) \mid X_S]` minimises :math:`E[(f(X) - g(X_S))^2]`
over functions of :math:`X_S`, so on data whose true conditionals are unknown a lower MSEv marks a
value function closer to the observational game (Frye et al., 2021, "Shapley explainability on
the data manifold"; Olsen et al., 2022, 2024, and the R package shapr's ``MSEv``, whose default
weighs the coalitions uniformly, as here). The criterion compares approaches on the same
explicands; it is not an error against the truth (that part of the squared difference which is
the conditional variance of :math:`f` is common to all approaches).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_codes_bits
from .._core._chunking import map_chunks, plan_chunks
from .._core._categorical import encode_categories
from .._core._inputs import align_columns, as_key, as_matrix, check_n_features, is_traced
from .._engine._explainer import link_function
from .._core._model import model_errors, wrap_model
from .._core._validate import DEFAULT_MEMORY_BUDGET, integer
from .._core._validate import memory_budget as check_memory_budget
from ..maskers import Masker

ALL_COALITIONS_UP_TO = 10
"""With ``n_coalitions=None``, every non-empty proper coalition is used up to this many features."""

SAMPLED_COALITIONS = 1024
"""With ``n_coalitions=None`` and more features, this many coalitions are sampled."""


class MSEv(NamedTuple):
    """The result of :func:`jaxshap.msev` (NumPy values; ``[K]`` per output for a multi-output model).

    Attributes:
      msev: the mean over explicands of the per-explicand MSEv.
      stderr: its standard error, ``sd(per_explicand, ddof=1) / sqrt(n)``.
      per_explicand: ``[n]`` (or ``[n, K]``) MSEv of each explicand.
      coalitions: ``[P, M]`` boolean coalitions averaged over.
    """

    msev: Any
    stderr: Any
    per_explicand: np.ndarray
    coalitions: np.ndarray


def _resolve(explainer_or_masker: Any, model: Any) -> tuple[Masker, Any, str]:
    """``(masker, wrapped model, link name)`` from an explainer, or a masker and a model."""
    if isinstance(explainer_or_masker, Masker):
        if model is None:
            raise ValueError("msev got a masker but no `model`; pass model=... (or an explainer built on the masker).")
        masker = explainer_or_masker
        return masker, wrap_model(model, masker.n_features, masker.dtype, masker.probe_rows), "identity"
    masker = getattr(explainer_or_masker, "masker", None)
    wrapped = getattr(explainer_or_masker, "model", None)
    if not isinstance(masker, Masker) or not hasattr(wrapped, "fn"):
        raise TypeError(
            f"msev takes an explainer built on a masker (ExactExplainer, PermutationExplainer, KernelExplainer, "
            f"PartitionExplainer) or a jaxshap.maskers.Masker with model=...; got {type(explainer_or_masker).__name__}."
        )
    if model is not None:
        raise ValueError("msev got an explainer and a `model`; the explainer's own model is used, pass only one.")
    return masker, wrapped, getattr(explainer_or_masker, "link", "identity")


def evaluation_coalitions(n_features: int, n_coalitions: int | None, key: Any) -> np.ndarray:
    """The coalitions ``[P, M]``: every non-empty proper one, or a uniform sample of them.

    Every one of the ``2**M - 2`` coalitions is used when ``n_coalitions`` is ``None`` and
    ``M <= 10``, or when ``n_coalitions`` is at least ``2**M - 2``; otherwise ``n_coalitions``
    are drawn uniformly, with replacement, from them (each feature in with probability one half,
    empty and full draws redrawn), so the sampled MSEv is unbiased for the uniform average.
    """
    m = n_features
    if n_coalitions is None:
        n_coalitions = 2**m - 2 if m <= ALL_COALITIONS_UP_TO else SAMPLED_COALITIONS
    if m <= 62 and n_coalitions >= 2**m - 2:
        return all_codes_bits(m)[1:-1]
    key = as_key(key)
    masks = np.asarray(jax.random.bernoulli(key, 0.5, (n_coalitions, m)))
    attempt = 0
    while True:
        bad = masks.all(1) | ~masks.any(1)
        if not bad.any():
            return masks
        attempt += 1
        masks[bad] = np.asarray(jax.random.bernoulli(jax.random.fold_in(key, attempt), 0.5, (int(bad.sum()), m)))


def _warn_fitted_rows(masker: Masker, X: jax.Array) -> None:
    r"""Warn when rows of ``X`` are among the rows the masker keeps (:attr:`Masker.fitted_rows`).

    Such a row finds itself among them: an empirical conditional puts most of its weight on it
    (with the default bandwidth almost all), so :math:`\hat v(S; x) \approx f(x)` and the MSEv on
    those rows is optimistic, by far more than between approaches (on the air-quality data the
    empirical masker ranks first on its own rows and last of the conditional ones on held-out rows).
    """
    fitted = masker.fitted_rows
    if fitted is None or is_traced(fitted) or is_traced(X):
        return
    dtype = np.result_type(np.asarray(fitted[:1]).dtype, np.asarray(X[:1]).dtype)
    as_bytes = lambda a: {np.ascontiguousarray(r).tobytes() for r in np.asarray(a, dtype)}
    kept = as_bytes(fitted)
    rows = [np.ascontiguousarray(r).tobytes() for r in np.asarray(X, dtype)]
    shared = sum(r in kept for r in rows)
    if shared:
        warnings.warn(
            f"msev: {shared} of {len(rows)} rows of `X` are rows {type(masker).__name__} keeps and averages over; "
            "each finds itself there, so the MSEv on them is optimistic (an empirical conditional's most of all) "
            "and can rank approaches wrongly. Score rows held out from the masker's data.",
            UserWarning,
            stacklevel=3,
        )


@partial(jax.jit, static_argnames=("link", "rows_per_chunk", "coalitions_per_chunk"))
def _per_explicand(masker, model, X, masks, link: str, rows_per_chunk: int, coalitions_per_chunk: int):
    """``[n, K]`` mean over the coalitions of ``(g(f(x)) - g(v(S; x)))**2``, ``g`` the link."""
    g = link_function(link)

    def one(x):
        values = map_chunks(lambda part: masker.coalition_values(model.fn, x, part), masks, coalitions_per_chunk)
        full = model.fn(x[None, :])[0]
        return ((g(full)[None, :] - g(values)) ** 2).mean(0)

    return map_chunks(jax.vmap(one), X, rows_per_chunk)


def msev(
    explainer_or_masker: Any,
    X: Any,
    model: Any = None,
    *,
    n_coalitions: int | None = None,
    key: Any = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> MSEv:
    r"""The MSEv criterion of a value function on explicands ``X``, with its standard error.

    :math:`\mathrm{MSE}_v = \frac1n \sum_i \frac{1}{|\mathcal P|} \sum_{S \in \mathcal P} (f(x_i)
    - \hat v(S; x_i))^2` over the non-empty proper coalitions :math:`\mathcal P` (see
    :mod:`jaxshap._effects._msev` for the papers): lower is better; compare approaches on the
    same ``X`` and coalitions (the same ``key``), and read differences against ``stderr``.

    Accepted:

    * an explainer built on a masker (``ExactExplainer``, ``PermutationExplainer``,
      ``KernelExplainer``, ``PartitionExplainer``): its ``masker`` gives :math:`\hat v`, its model
      :math:`f`, and its ``link`` is applied to both (the game the explainer attributes);
    * a :class:`jaxshap.maskers.Masker` together with ``model`` (JAX or NumPy callable
      ``[n, M] -> [n]`` or ``[n, K]``), on the identity link.

    Explainers without a masker (``TreeExplainer``, ``LinearExplainer``, ``GradientExplainer``)
    are refused: build a masker for the approach instead.

    Args:
      explainer_or_masker: see above.
      X: explicands ``[n, M]`` (array or DataFrame; columns aligned to the masker's names).
      model: the model, with a masker only.
      n_coalitions: ``None``: all ``2**M - 2`` coalitions for ``M <= 10``, else 1024 sampled
        uniformly with ``key``; a number: that many sampled (all of them when it covers them).
      key: PRNG key (or int seed) for sampled coalitions; ``None`` means ``jax.random.key(0)``.
      memory_budget: bytes one chunk of model evaluations may use (as the explainers').

    Returns:
      :class:`MSEv` ``(msev, stderr, per_explicand, coalitions)``; ``msev`` and ``stderr`` are
      floats for a single-output model, ``[K]`` arrays otherwise. One explicand gives a NaN
      ``stderr``.

    Raises:
      TypeError: for an object that is neither (naming what is accepted).
      ValueError: for a masker without ``model``, an explainer with one, a non-positive
        ``n_coalitions``, or ``X`` with the wrong number of columns.
    """
    masker, wrapped, link = _resolve(explainer_or_masker, model)
    budget = check_memory_budget(memory_budget)
    if n_coalitions is not None:
        n_coalitions = integer(n_coalitions, "n_coalitions", least=1)
    X = align_columns(X, masker.feature_names, "X")
    X = encode_categories(X, masker.column_categories, masker.feature_names)  # labels: the masker's codes
    X = as_matrix(X, "X", dtype=masker.dtype)
    check_n_features(X, masker.n_features, "X", "the masker")
    _warn_fitted_rows(masker, X)
    masks = evaluation_coalitions(masker.n_features, n_coalitions, key)
    bytes_per_eval = wrapped.bytes_per_row + np.dtype(masker.dtype).itemsize * masker.n_features
    rows, coalitions = plan_chunks(X.shape[0], masks.shape[0], masker.evals_per_coalition, bytes_per_eval, budget)
    with model_errors():
        per = np.asarray(_per_explicand(masker, wrapped, X, jnp.asarray(masks), link, rows, coalitions), np.float64)
    n = per.shape[0]
    mean = per.mean(0)
    stderr = per.std(0, ddof=1) / np.sqrt(n) if n > 1 else np.full_like(mean, np.nan)
    if wrapped.single_output:
        return MSEv(float(mean[0]), float(stderr[0]), per[:, 0], masks)
    return MSEv(mean, stderr, per, masks)
