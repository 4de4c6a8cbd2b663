"""Full float32 precision for the estimators' own linear algebra.

GPUs (and TPUs) evaluate float32 matrix products in TF32 (or bfloat16 passes) by default, which
keeps about 10 bits of mantissa. That is the model's business when it is the model's product,
but in an estimator it silently rounds Shapley coefficients, kernel weights and Gram matrices to
three decimal digits: efficiency then fails at about 1e-4 relative and regressions lose their
accuracy. The estimators therefore trace their own products at full precision; the model's
products (inside ``value_fn``) keep whatever precision the user's configuration gives them.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import jax

F = TypeVar("F", bound=Callable)


def full_precision(fn: F) -> F:
    """Trace ``fn`` with float32 matrix products at full precision (``Precision.HIGHEST``).

    Only for functions that do not call the model: the setting applies to every product traced
    inside ``fn``.
    """

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return wrapped  # type: ignore[return-value]
