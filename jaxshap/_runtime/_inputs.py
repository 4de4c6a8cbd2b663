"""Turning user inputs (NumPy, JAX, pandas) into validated JAX matrices.

Validation that needs concrete values (NaN and inf checks) is skipped for traced arrays,
so that explainers stay usable inside ``jax.jit`` and ``jax.grad``.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np


def is_traced(x: Any) -> bool:
    """True when ``x`` is an abstract value inside a JAX transformation."""
    return isinstance(x, jax.core.Tracer)


def column_names(x: Any) -> list[str] | None:
    """Feature names of a pandas-like DataFrame (duck-typed), else ``None``."""
    columns = getattr(x, "columns", None)
    if columns is None or not hasattr(x, "to_numpy"):
        return None
    return [str(c) for c in columns]


def float_dtype(x: Any) -> np.dtype:
    """The floating dtype to compute in: the input's when it is floating, else JAX's default."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jnp.floating):
        return jax.dtypes.canonicalize_dtype(dtype)
    return jax.dtypes.canonicalize_dtype(jnp.float_)


def as_matrix(x: Any, name: str, *, dtype: Any = None) -> jax.Array:
    """Convert ``x`` to a floating ``[n, M]`` JAX array, promoting a single row to ``[1, M]``.

    Args:
      x: array-like, JAX array or pandas-like DataFrame.
      name: the argument's name, used in error messages.
      dtype: floating dtype to cast to; by default the input's own floating dtype, or
        float32 (float64 under ``jax_enable_x64``) for non-floating input.

    Raises:
      TypeError: when ``x`` cannot be read as a numeric array.
      ValueError: when ``x`` is not one- or two-dimensional, or has no columns.
    """
    if hasattr(x, "to_numpy") and column_names(x) is not None:
        x = x.to_numpy()
    if not is_traced(x) and not isinstance(x, (jax.Array, np.ndarray)):
        try:
            x = np.asarray(x)
        except Exception as err:  # pragma: no cover - depends on the object
            raise TypeError(f"`{name}` must be an array-like of numbers; got {type(x).__name__}.") from err
    if not (jnp.issubdtype(x.dtype, jnp.number) or jnp.issubdtype(x.dtype, jnp.bool_)):
        raise TypeError(
            f"`{name}` must hold numbers; got dtype {x.dtype}. Encode categorical columns as numbers first."
        )
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D array of shape [rows, features]; got shape {tuple(x.shape)}.")
    if x.shape[1] == 0:
        raise ValueError(f"`{name}` has no feature columns; pass an array of shape [rows, features].")
    return jnp.asarray(x, dtype=dtype if dtype is not None else float_dtype(x))


def check_finite(x: jax.Array, name: str) -> None:
    """Raise a ``ValueError`` when a concrete ``x`` holds NaN or inf (no-op for traced arrays)."""
    if is_traced(x):
        return
    finite = np.isfinite(np.asarray(x))
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        raise ValueError(
            f"`{name}` contains NaN or inf (first at index {tuple(int(i) for i in bad)}); "
            "impute or drop those values before explaining."
        )


def check_n_features(x: jax.Array, n_features: int, name: str, reference: str) -> None:
    """Raise a ``ValueError`` when ``x`` has a different number of columns than expected."""
    if x.shape[1] != n_features:
        raise ValueError(
            f"`{name}` has {x.shape[1]} features but {reference} has {n_features}; "
            f"pass rows with the same {n_features} columns, in the same order."
        )


def resolve_feature_names(
    names: Sequence[str] | None, n_features: int, *candidates: list[str] | None
) -> tuple[str, ...]:
    """Pick explicit names, else the first DataFrame's columns, else ``Feature 0`` ... ``Feature M-1``."""
    for option in (names, *candidates):
        if option is not None:
            option = [str(n) for n in option]
            if len(option) != n_features:
                raise ValueError(
                    f"`feature_names` has {len(option)} names but the data has {n_features} features."
                )
            return tuple(option)
    return tuple(f"Feature {j}" for j in range(n_features))


def as_key(key: Any) -> jax.Array:
    """Return a PRNG key: ``None`` means the fixed default ``jax.random.key(0)``; an int seeds one."""
    if key is None:
        return jax.random.key(0)
    if isinstance(key, (int, np.integer)):
        return jax.random.key(int(key))
    return key


def check_walks(n_permutations: Any, minimum: int) -> int:
    """Validate ``n_permutations``, a number of antithetic walks: an even integer of at least ``minimum``.

    Raises:
      ValueError: naming ``n_permutations`` and the rule.
    """
    if (
        isinstance(n_permutations, bool)
        or not isinstance(n_permutations, (int, np.integer))
        or n_permutations < minimum
        or n_permutations % 2
    ):
        raise ValueError(
            f"`n_permutations` must be an even integer of at least {minimum} (each antithetic pair is a "
            f"permutation and its reverse); got {n_permutations!r}."
        )
    return int(n_permutations)


def output_names(n_outputs: int) -> tuple[str, ...]:
    """The names of a multi-output model's ``K`` outputs, the one place they are made:
    ``Output 0`` ... ``Output K-1``."""
    return tuple(f"Output {k}" for k in range(int(n_outputs)))
