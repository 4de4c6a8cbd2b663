"""Keeping the library's own host linear algebra on one BLAS thread.

On a CPU, XLA's linear algebra (``eigvalsh``, ``cholesky``, triangular solves) is not XLA code:
jaxlib hands it to LAPACK from SciPy, which runs on SciPy's OpenBLAS, and NumPy brings a second
OpenBLAS. Both start a pool of worker threads on the first large call, and those threads keep
spinning for a while after each call. On a machine with few cores that are also busy, the
spinning threads starve the XLA computation that follows (by orders of magnitude on a loaded
2-core machine; see ``CHANGELOG.md``).

:func:`single_threaded_blas` caps every OpenBLAS loaded in the process at one thread for the
duration of a block (the host plan's NumPy work), :func:`single_threaded_lapack` only the one
behind jaxlib's LAPACK (while compiled programs factorise a matrix per row), and both restore
the previous counts afterwards, through OpenBLAS's own
``openblas_get_num_threads`` / ``openblas_set_num_threads`` (also under the symbol prefixes
SciPy's and NumPy's wheels use). Where no OpenBLAS is loaded, or the platform has no
``/proc/self/maps`` (not Linux), it does nothing. Users who call NumPy or SciPy linear algebra
themselves between explanations can set ``OPENBLAS_NUM_THREADS=1`` (before Python starts) to
avoid the same hazard in their own code.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time
from typing import Iterator

_PREFIXES = ("", "scipy_")
_SUFFIXES = ("", "64_")
_LOCK = threading.RLock()
_HANDLES: dict[str, tuple | None] = {}


_SCAN: dict = {"key": None, "paths": []}
RESCAN_SECONDS = 30.0
"""The list of loaded libraries is re-read when modules were imported since, or after this long."""


def _loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS libraries mapped into this process (Linux), else ``[]``.

    Reading ``/proc/self/maps`` costs a few milliseconds, so the answer is cached until the
    set of imported modules grows (new extension modules bring new libraries) or
    :data:`RESCAN_SECONDS` pass.
    """
    key = (len(sys.modules), int(time.monotonic() // RESCAN_SECONDS))
    if _SCAN["key"] == key:
        return _SCAN["paths"]
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[-1].strip() for line in maps if "openblas" in line.lower()}
    except OSError:
        paths = set()
    _SCAN["paths"] = sorted(p for p in paths if p.startswith("/") and ".so" in os.path.basename(p))
    _SCAN["key"] = key
    return _SCAN["paths"]


def loaded_library(path: str) -> ctypes.CDLL | None:
    """A handle on a library the process has already loaded (never loads one), or ``None``."""
    try:
        return ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 1))
    except OSError:
        return None


def _functions(path: str) -> tuple | None:
    """``(get, set)`` thread-count functions of one loaded OpenBLAS, or ``None`` if it has none."""
    if path not in _HANDLES:
        found = None
        lib = loaded_library(path)
        for prefix in _PREFIXES if lib is not None else ():
            for suffix in _SUFFIXES:
                get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.restype, get.argtypes = ctypes.c_int, []
                    put.restype, put.argtypes = None, [ctypes.c_int]
                    found = (get, put)
                    break
            if found:
                break
        _HANDLES[path] = found
    return _HANDLES[path]


_CAPS: dict[str, list] = {}
"""``{path: [depth, saved count]}``: how many blocks hold each OpenBLAS at one thread, and its count before."""


def _cap(paths: list[str]) -> list[str]:
    """Hold each OpenBLAS in ``paths`` at one thread (the first holder saves its count); the ones held."""
    held = []
    with _LOCK:
        for path in paths:
            fns = _functions(path)
            if fns is None:
                continue
            get, put = fns
            state = _CAPS.setdefault(path, [0, None])
            if state[0] == 0:
                count = get()
                if count > 1:
                    put(1)
                state[1] = count if count > 1 else None
            state[0] += 1
            held.append(path)
    return held


def _release(held: list[str]) -> None:
    """Let go of :func:`_cap`'s hold; the last holder restores the saved count."""
    with _LOCK:
        for path in held:
            state = _CAPS[path]
            state[0] -= 1
            if state[0] == 0 and state[1] is not None:
                _functions(path)[1](state[1])
                state[1] = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run a block with every loaded OpenBLAS capped at one thread; restore the counts after.

    Blocks may nest and overlap across threads (a host plan drawn on a worker thread while a
    program runs): each library's count is saved by the first block that caps it and restored
    when the last one ends; the lock is held only while counting, never across the block.
    The block must wait for its results (``np.asarray`` or ``block_until_ready``): XLA dispatches
    asynchronously, and work still running after the block would use the restored thread counts.
    """
    held = _cap(_loaded_openblas())
    try:
        yield
    finally:
        _release(held)


def _initialize_lapack() -> None:
    """Load the LAPACK that jaxlib calls on a CPU (SciPy's, with its OpenBLAS), as lowering a
    linear-algebra operation would: so that it is loaded, and can be capped, before the program runs."""
    try:
        from jax._src.lax import linalg
    except ImportError:  # pragma: no cover - a JAX without the hook: the first call is not capped
        return
    init = getattr(linalg, "initialize_lapack", None)
    if init is not None:
        init()


def _numpy_own(path: str) -> bool:
    """Whether a library is NumPy's own OpenBLAS (bundled in its wheel)."""
    return f"{os.sep}numpy.libs{os.sep}" in path or f"{os.sep}numpy{os.sep}" in path


@contextlib.contextmanager
def single_threaded_lapack() -> Iterator[None]:
    """Run compiled programs with the OpenBLAS behind jaxlib's LAPACK calls held at one thread.

    jaxlib runs a batched LAPACK call (a Cholesky factor per row, say) by splitting the batch
    over XLA's thread pool; each part then calls SciPy's OpenBLAS, which starts its own threads.
    Both pools on the same cores oversubscribe them: on a 2-core machine, KernelSHAP's per-row
    solve (``prior="hierarchical"``, 40 rows of 300 unknowns) took 6x longer than with one
    OpenBLAS thread. NumPy's own OpenBLAS is left alone: a host model's matrix products use it.
    Where NumPy and SciPy share one OpenBLAS (some conda builds) that one is held too.

    Same contract as :func:`single_threaded_blas` (nesting, threads, waiting for the results).
    """
    _initialize_lapack()
    held = _cap([p for p in _loaded_openblas() if not _numpy_own(p)])
    try:
        yield
    finally:
        _release(held)
