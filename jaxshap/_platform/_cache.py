"""JAX's persistent compilation cache behind one switch.

JAX can write every compiled program to a folder and load it in later processes instead of
compiling again. jaxshap's programs take their arrays as arguments (never as embedded
constants), so the same explainer configuration on the same shapes hits the cache across
processes (``python -m bench runtime`` measures what it saves).
"""

from __future__ import annotations

import os
from typing import Any

import jax

from ._config import cache_dir


def enable_compilation_cache(path: Any = None, *, min_compile_seconds: float = 0.0) -> str:
    """Turn on JAX's persistent compilation cache for this process, and return its folder.

    Call it once, best before the first explanation (programs compiled earlier are not written).
    Later processes that call it with the same folder load jaxshap's compiled programs
    instead of compiling them, which removes most of the first call's time.

    Args:
      path: the cache folder (created if needed); ``None`` means ``$JAXSHAP_CACHE_DIR`` or
        ``~/.cache/jaxshap/xla``.
      min_compile_seconds: only programs that took at least this long to compile are written
        (JAX's ``jax_persistent_cache_min_compile_time_secs``); the default 0 writes all.

    Raises:
      ValueError: for a negative ``min_compile_seconds``.
    """
    if isinstance(min_compile_seconds, bool) or not isinstance(min_compile_seconds, (int, float)) or min_compile_seconds < 0:
        raise ValueError(f"`min_compile_seconds` must be a number of seconds >= 0; got {min_compile_seconds!r}.")
    if path is None:
        path = cache_dir()
    path = os.path.abspath(os.fspath(path))
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    try:  # a cache already initialised (by an earlier compilation) would ignore the new folder
        from jax._src import compilation_cache

        compilation_cache.reset_cache()
    except Exception:  # pragma: no cover - JAX keeps this private; best effort
        pass
    return path
