"""Settings read from the environment: the package reads ``os.environ`` here and nowhere else.

* ``JAXSHAP_CACHE_DIR``: the folder of jaxshap's compilation caches, ``~/.cache/jaxshap/xla`` when
  unset or empty: jaxshap's own compiled programs (:mod:`jaxshap._platform._program_cache`) in its
  ``programs`` subfolder, and JAX's cache when :func:`jaxshap.enable_compilation_cache` turns it
  on. ``off`` turns jaxshap's own store off.
"""

from __future__ import annotations

import os

CACHE_DIR_VARIABLE = "JAXSHAP_CACHE_DIR"


def cache_dir() -> str:
    """The compilation cache's folder: ``$JAXSHAP_CACHE_DIR``, else ``~/.cache/jaxshap/xla``."""
    return os.environ.get(CACHE_DIR_VARIABLE) or os.path.join(os.path.expanduser("~"), ".cache", "jaxshap", "xla")


def program_cache_dir() -> str | None:
    """The folder of jaxshap's own compiled programs, ``None`` when ``JAXSHAP_CACHE_DIR=off``."""
    if os.environ.get(CACHE_DIR_VARIABLE, "").strip().lower() == "off":
        return None
    return os.path.join(cache_dir(), "programs")
