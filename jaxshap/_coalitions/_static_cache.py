"""A cache for host-side (NumPy) plans that is keyed on JAX's x64 mode.

Plans such as :func:`~jaxshap._coalitions._kernel_plan.kernel_plan` are pure functions of
static sizes, so they are memoised. Their NumPy arrays are then the *same objects* on every call,
and JAX (0.10) remembers the device buffer it made from a NumPy constant: an ``int64`` index array
first used with x64 off is stored as ``int32``, and the same object used later inside
``jax.enable_x64(True)`` fails (``lax.add requires arguments to have the same dtypes``). Keying
the cache on the x64 mode gives each mode its own arrays.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import jax

F = TypeVar("F", bound=Callable)


def static_cache(maxsize: int = 64) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)`` with JAX's x64 mode as a hidden part of the key."""

    def decorate(fn: F) -> F:
        @functools.lru_cache(maxsize=maxsize)
        def keyed(x64: bool, *args, **kwargs):
            del x64
            return fn(*args, **kwargs)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return keyed(bool(jax.config.jax_enable_x64), *args, **kwargs)

        wrapper.cache_clear = keyed.cache_clear  # type: ignore[attr-defined]
        wrapper.cache_info = keyed.cache_info  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
