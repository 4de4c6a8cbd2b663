"""One LAPACK call at a time: ordering independent factorisations by a data dependency.

A workaround for jaxlib 0.10 on a CPU, needed for correctness (without it a program can hang
forever). jaxlib 0.10.x runs a batched LAPACK custom call (Cholesky, triangular solve, symmetric
eigensolver, ...) by splitting its batch over XLA's intra-op thread pool
(``jax::ParallelBatchMap`` in ``jaxlib/cpu/lapack_kernels.cc``) and blocking the pool thread that
runs the call until the parts are done. XLA runs the independent operations of one program side
by side, so two batched calls that no data dependency orders can each hold a pool thread while
they wait for parts queued behind the other; on a pool of two threads (a 2-core machine) the
program then hangs with every thread idle. Upstream: this batch-splitting path is the one of
jax-ml/jax#39292 (batched ``eigh`` oversubscribing OpenBLAS, open) and jax-ml/jax#39383, whose
description says open-source builds of later jaxlib releases run the parts serially (not checked
here); no upstream report of the hang itself was found. On jax 0.10.2 two independent batched
Cholesky factorisations in one ``jax.jit`` still hang a two-thread pool (``tests/test_lapack_order.py``
runs that program with and without :func:`after`). Remove this module once the package requires
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

from typing import Any

import jax
import jax.numpy as jnp


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
