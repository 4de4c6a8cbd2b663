"""The host platform: settings read from the environment, BLAS threads, and the LAPACK call order.

Environment settings: the package reads ``os.environ`` here and nowhere else.

* ``JAXSHAP_CACHE_DIR``: the folder of jaxshap's compilation caches, ``~/.cache/jaxshap/xla`` when
  unset or empty (:func:`cache_dir`): jaxshap's own compiled programs
  (:mod:`jaxshap._core._program_cache`) in its ``programs`` subfolder (:func:`program_cache_dir`),
  and JAX's cache when :func:`jaxshap.enable_compilation_cache` turns it on. ``off`` turns
  jaxshap's own store off.

One BLAS thread while the library's linear algebra runs (:func:`one_blas_thread`). On a CPU,
XLA's linear algebra (``eigvalsh``, ``cholesky``, triangular solves) is handed to LAPACK from
SciPy, which runs on SciPy's OpenBLAS; NumPy brings its own. OpenBLAS starts worker threads on a
large call, and they keep spinning for a while after it: beside XLA's own thread pool on a
machine with few busy cores they starve the work around them, the factorisation itself included.
:func:`one_blas_thread` holds the BLAS libraries at one thread for a block and restores their
counts after, with ``threadpoolctl`` (scikit-learn depends on it); without it the block runs as
it is. Programs you compile yourself (a ``jax.jit`` around an explainer) are not covered: start
Python with ``OPENBLAS_NUM_THREADS=1``, or wrap the call in ``threadpoolctl.threadpool_limits(1)``.

One LAPACK call at a time, ordering independent factorisations by a data dependency
(:func:`after`). A workaround for jaxlib 0.10 on a CPU, needed for correctness (without it a
program can hang forever). jaxlib 0.10.x runs a batched LAPACK custom call (Cholesky, triangular
solve, symmetric eigensolver, ...) by splitting its batch over XLA's intra-op thread pool
(``jax::ParallelBatchMap`` in ``jaxlib/cpu/lapack_kernels.cc``) and blocking the pool thread that
runs the call until the parts are done. XLA runs the independent operations of one program side
by side, so two batched calls that no data dependency orders can each hold a pool thread while
they wait for parts queued behind the other; on a pool of two threads (a 2-core machine) the
program then hangs with every thread idle. Upstream: this batch-splitting path is the one of
jax-ml/jax#39292 (batched ``eigh`` oversubscribing OpenBLAS, open) and jax-ml/jax#39383, whose
description says open-source builds of later jaxlib releases run the parts serially (not checked
here); no upstream report of the hang itself was found. On jax 0.10.2 two independent batched
Cholesky factorisations in one ``jax.jit`` still hang a two-thread pool (``tests/test_lapack_order.py``
runs that program with and without :func:`after`). Remove :func:`after` once the package requires
a jaxlib whose test passes without it.

:func:`after` makes a value depend on others by adding a zero computed from them. The
dependency has to be arithmetic: ``jax.lax.optimization_barrier`` does not survive XLA's CPU
pipeline (it is expanded away before the thunks are scheduled, and the thunk executor orders
thunks by the buffers they share). The zero is ``-(0 * y)`` with ``y`` the sum of the largest
finite magnitudes of the dependencies (a reduction over all of their elements), which XLA
does not fold for floats (``0 * y`` is not ``0`` when ``y`` may be infinite or NaN), and adding
``-0.0`` leaves every float unchanged, signed zeros and NaNs included; so the result equals
``x`` bit for bit.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import jax
import jax.numpy as jnp


CACHE_DIR_VARIABLE = "JAXSHAP_CACHE_DIR"


def cache_dir() -> str:
    """The compilation cache's folder: ``$JAXSHAP_CACHE_DIR``, else ``~/.cache/jaxshap/xla``."""
    return os.environ.get(CACHE_DIR_VARIABLE) or os.path.join(os.path.expanduser("~"), ".cache", "jaxshap", "xla")


def program_cache_dir() -> str | None:
    """The folder of jaxshap's own compiled programs, ``None`` when ``JAXSHAP_CACHE_DIR=off``."""
    if os.environ.get(CACHE_DIR_VARIABLE, "").strip().lower() == "off":
        return None
    return os.path.join(cache_dir(), "programs")


def _initialize_lapack() -> None:
    """Load the LAPACK that jaxlib calls on a CPU (as lowering a linear-algebra operation would),
    so that its BLAS is loaded, and can be held, before the first program that uses it runs."""
    try:
        from jax._src.lax import linalg
    except ImportError:  # pragma: no cover - a JAX without the hook: the first call is not held
        return
    init = getattr(linalg, "initialize_lapack", None)
    if init is not None:
        init()


@contextlib.contextmanager
def one_blas_thread(lapack: bool = False) -> Iterator[None]:
    """Run a block with the loaded BLAS libraries at one thread, restored after.

    Args:
      lapack: hold only the BLAS behind jaxlib's LAPACK (loaded first), and leave NumPy's own
        to the block's other work (a host model's matrix products); by default every BLAS.

    The block must wait for its results (``np.asarray`` or ``block_until_ready``): work still
    running after it has the old counts.
    """
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        yield
        return
    if lapack:
        _initialize_lapack()
    controller = ThreadpoolController()
    if lapack:
        own = (f"{os.sep}numpy.libs{os.sep}", f"{os.sep}numpy{os.sep}")
        paths = [i["filepath"] for i in controller.info() if i["user_api"] == "blas" and not any(o in i["filepath"] for o in own)]
        controller = controller.select(filepath=paths) if paths else None
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def _zero(deps: Any) -> jax.Array | None:
    """A float32 ``-0.0`` that XLA computes from every element of ``deps`` (``None`` if empty).

    Every element, not one: XLA would trace a single element of a concatenation back to the
    one part it came from, and the dependency on the other parts would be lost.
    """
    leaves = [jnp.asarray(leaf) for leaf in jax.tree_util.tree_leaves(deps)]
    leaves = [leaf for leaf in leaves if leaf.size]
    if not leaves:
        return None
    total = jnp.zeros((), jnp.float32)
    for leaf in leaves:
        y = jnp.abs(leaf.astype(jnp.float32) if not jnp.iscomplexobj(leaf) else leaf).astype(jnp.float32)
        total = total + jnp.max(jnp.where(jnp.isfinite(y), y, 0.0))
    total = jnp.where(jnp.isfinite(total), total, 0.0)
    return jax.lax.stop_gradient(-(total * 0.0))


def after(x: Any, *deps: Any) -> Any:
    """``x`` unchanged (bit for bit), but computed only once ``deps`` are.

    Use it on the input of a LAPACK call (``cho_factor``, ``eigvalsh``, ...) that would
    otherwise be independent of an earlier one: ``after(matrix, earlier_output)``.

    Args:
      x: a pytree of arrays (floating, integer or boolean).
      *deps: pytrees of arrays that must be computed first (the outputs of the earlier call).

    Returns:
      ``x``, each leaf depending on ``deps`` through a zero added to it.
    """
    zero = _zero(deps)
    if zero is None:
        return x

    def tie(leaf):
        leaf = jnp.asarray(leaf)
        if jnp.issubdtype(leaf.dtype, jnp.floating) or jnp.issubdtype(leaf.dtype, jnp.complexfloating):
            return leaf + zero.astype(leaf.dtype)
        if leaf.dtype == jnp.bool_:
            return leaf | (zero != 0.0)
        return leaf + (zero != 0.0).astype(leaf.dtype)

    return jax.tree_util.tree_map(tie, x)
