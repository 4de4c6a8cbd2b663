"""Maskers whose coalition value is a Monte-Carlo mean over draws of ``X`` given ``X_S = x_S``."""

from __future__ import annotations

import abc
from typing import Callable

import jax

from ._base import Masker


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
