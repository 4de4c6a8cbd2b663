r"""A call's shared KernelSHAP plan, drawn and factorised on the host.

With shared coalitions (the explainer's default) a call needs, once, its coalitions and the
solve operators of their design (:func:`._kernel_solve.plan_operators`); every row then costs
its model evaluations and a few matrix products. Built inside the compiled program, that once-per-call
work is cheap to *run* but expensive to *compile*: the sampler (threefry, Floyd's loop, the
unranking scan, a sort) and the factorisations take about a second of XLA compilation on a CPU,
paid again by every fresh process, which is most of a one-off job's time.

:func:`shared_plan` computes them on the host instead, with NumPy in float64, through
:func:`jax.pure_callback`: the compiled program only receives their arrays. It stays a pure
function of the key (the coalitions come from :func:`jaxshap._coalitions._host_sampling.host_coalitions`,
seeded from the key's bits), so eager calls, ``jax.jit``, ``jax.vmap`` over keys, gradients with
respect to the model (the plan does not depend on it) and every block, chunk and device of a call
see the same plan. Recent plans are kept (:data:`CACHE_SIZE`), so repeated calls with one key,
and the blocks of one call, reuse the draw and the factorisation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._host_sampling import host_coalitions
from .._coalitions._static_cache import static_cache
from ._kernel_solve import operator_shapes, plan_operators

CACHE_SIZE = 4
"""Plans kept on the host, most recently used first (each holds one call's coalitions and operators)."""

_cache: OrderedDict = OrderedDict()  # cache key -> leaves, or the Future of a prefetch
_lock = threading.Lock()
_worker: ThreadPoolExecutor | None = None


def _compute(bits: np.ndarray, plan, controls: tuple, dtype: np.dtype) -> list[np.ndarray]:
    masks, weights = host_coalitions(bits, plan)
    ops = plan_operators(plan, masks, weights, controls, dtype=np.float64, xp=np)
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves((masks, ops))]
    return [leaf.astype(dtype) if leaf.dtype.kind == "f" else leaf for leaf in leaves]


def _entry(key_bits, plan, controls: tuple, dtype, start: bool):
    """The cache entry of one plan (leaves or a Future), created (computed now, or started in
    the background with ``start``) when missing."""
    bits = np.asarray(key_bits, np.uint32)
    dtype = np.dtype(dtype)
    cache_key = (bits.tobytes(), bits.shape, plan, controls, dtype.str)
    global _worker
    with _lock:
        if cache_key in _cache:
            _cache.move_to_end(cache_key)
            return _cache[cache_key]
        if start:
            if _worker is None:
                _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxshap-plan")
            entry = _worker.submit(_compute, bits, plan, controls, dtype)
    if not start:
        entry = _compute(bits, plan, controls, dtype)
    with _lock:
        _cache[cache_key] = entry
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return entry


def host_plan(key_bits: np.ndarray, plan, controls: tuple, dtype) -> list[np.ndarray]:
    """The leaves of ``(masks, plan_operators(...))`` for one key, computed with NumPy (cached).

    Everything is computed in float64 and rounded to ``dtype`` (the model's floating dtype) at the end.
    """
    entry = _entry(key_bits, plan, controls, dtype, start=False)
    return entry.result() if isinstance(entry, Future) else entry


def prefetch(key: jax.Array, plan, controls: tuple = (), *, dtype=jnp.float32) -> None:
    """Start the host plan of a concrete ``key`` in a background thread, so that it overlaps the
    tracing and compilation of the program that will ask for it (NumPy's LAPACK and XLA's
    compiler both release the GIL). The caller passes a concrete key."""
    with jax.ensure_compile_time_eval():  # a concrete key closed over inside jax.jit stays concrete
        bits = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
        bits = np.asarray(bits)
    _entry(bits, plan, tuple(controls), jnp.dtype(dtype), start=True)


@static_cache(64)
def _structure(plan, controls: tuple, dtype: str):
    """The leaves' ``jax.ShapeDtypeStruct`` and the tree of ``(masks, plan_operators(...))``."""
    masks = jax.ShapeDtypeStruct((plan.n_coalitions, plan.n_features), jnp.bool_)
    return jax.tree_util.tree_flatten((masks, operator_shapes(plan, controls, jnp.dtype(dtype))))


def shared_plan(key: jax.Array, plan, controls: tuple = (), *, dtype=jnp.float32):
    """``(masks, ops)`` of one call: the coalitions of ``plan`` drawn from ``key`` and their
    operators (as :func:`._kernel_solve.plan_operators` returns them), computed on the host.

    The coalitions follow the plan's distribution (strata, pairs, weights) exactly as
    :func:`jaxshap._coalitions._kernel_sampling.sample_coalitions`, from another random stream;
    the operators are the same functions of the coalitions, computed in float64.

    Args:
      key: a PRNG key (typed, or raw ``uint32`` bits), concrete or traced.
      plan: the :class:`jaxshap._coalitions._kernel_sampling.KernelPlan`.
      controls: ``((order, rho), ...)``, as for :func:`._kernel_solve.kernel_operator`.
      dtype: floating dtype of the operators.
    """
    dtype = jnp.dtype(dtype)
    structs, treedef = _structure(plan, tuple(controls), dtype.str)
    bits = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key

    def callback(bits):
        leaves = host_plan(bits, plan, tuple(controls), dtype)
        return [leaf.astype(s.dtype, copy=False) for leaf, s in zip(leaves, structs)]

    leaves = jax.pure_callback(callback, structs, bits, vmap_method="sequential")
    return jax.tree_util.tree_unflatten(treedef, leaves)
