"""Settings read from the environment: the package reads ``os.environ`` here and nowhere else.

* ``JAXSHAP_CACHE_DIR``: the folder of jaxshap's compilation cache
  (:func:`jaxshap.enable_compilation_cache`), ``~/.cache/jaxshap/xla`` when unset or empty.
"""

from __future__ import annotations

import os

CACHE_DIR_VARIABLE = "JAXSHAP_CACHE_DIR"


def cache_dir() -> str:
    """The compilation cache's folder: ``$JAXSHAP_CACHE_DIR``, else ``~/.cache/jaxshap/xla``."""
    return os.environ.get(CACHE_DIR_VARIABLE) or os.path.join(os.path.expanduser("~"), ".cache", "jaxshap", "xla")
