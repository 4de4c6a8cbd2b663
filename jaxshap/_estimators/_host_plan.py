r"""A call's shared KernelSHAP plan, drawn and factorised on the host.

With shared coalitions (the explainer's default) a call needs, once, its coalitions and the
solve operators of their design (:func:`._kernel_solve.plan_operators`); every row then costs
its model evaluations and a few matrix products. Built inside the compiled program, that
once-per-call work is cheap to *run* but expensive to *compile*: the sampler (threefry, Floyd's
loop, the unranking scan, a sort) and the factorisations took about a second of XLA compilation
on a CPU, paid again by every fresh process, which was most of a one-off job's time.

Here they are computed on the host instead, with NumPy in float64 (:func:`host_plan`), from the
key's bits (:func:`jaxshap._coalitions._host_sampling.host_coalitions`). When the caller holds
the key concretely (an ordinary call) the plan enters the program as arguments
(:func:`plan_leaves`); inside a user's ``jax.jit`` the program fetches it through
:func:`jax.pure_callback` (:func:`shared_plan`). Either way it is a pure function of the key:
eager calls, ``jax.jit``, ``jax.vmap`` over keys, gradients with respect to the model (the plan
does not depend on it) and every block, chunk and device of a call see the same plan. The last
:data:`CACHE_SIZE` plans are kept, so repeated calls with one key skip the work.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections import OrderedDict
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._platform._threads import single_threaded_blas
from .._coalitions._host_sampling import host_coalitions
from .._coalitions._static_cache import static_cache
from ._kernel_solve import operator_shapes, plan_operators

CACHE_SIZE = 4
"""Plans kept, most recently used first (each holds one call's coalitions and operators)."""

_cache: OrderedDict = OrderedDict()
_lock = threading.Lock()
_worker: dict = {}
"""The worker thread's executor and the process it belongs to (a forked child starts its own)."""


def _raw_bits(key: jax.Array) -> jax.Array:
    """The raw ``uint32`` bits of a key (typed, or legacy ``uint32``), concrete or traced."""
    return jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key


def _key_bits(key: jax.Array) -> np.ndarray:
    """The raw bits of a concrete key, on the host."""
    with jax.ensure_compile_time_eval():  # a concrete key closed over inside jax.jit stays concrete
        return np.asarray(_raw_bits(key), np.uint32)


def _cache_key(bits: np.ndarray, plan, controls: tuple, dtype: np.dtype) -> tuple:
    return (bits.tobytes(), bits.shape, plan, controls, dtype.str)


def _cached(cache_key: tuple) -> list[jax.Array] | None:
    with _lock:
        if cache_key in _cache:
            _cache.move_to_end(cache_key)
            return _cache[cache_key]
    return None


def host_plan(key_bits: np.ndarray, plan, controls: tuple, dtype) -> list[jax.Array]:
    """The leaves of ``(masks, plan_operators(...))`` for one key, computed with NumPy (cached).

    Everything is computed in float64 and rounded to ``dtype`` (the model's floating dtype) at
    the end; the leaves are kept on the default device, so a repeated call transfers nothing.
    NumPy's BLAS runs on one thread meanwhile
    (:func:`jaxshap._platform._threads.single_threaded_blas`): its spinning worker threads would
    otherwise slow the XLA work that follows, or that runs beside it, on a machine with few cores.
    """
    bits = np.asarray(key_bits, np.uint32)
    dtype = np.dtype(dtype)
    cache_key = _cache_key(bits, plan, controls, dtype)
    leaves = _cached(cache_key)
    if leaves is not None:
        return leaves
    with single_threaded_blas():
        masks, weights = host_coalitions(bits, plan)
        ops = plan_operators(plan, masks, weights, controls, dtype=np.float64, xp=np)
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves((masks, ops))]
    structs, _ = _structure(plan, controls, dtype.str)
    leaves = [jax.device_put(leaf.astype(s.dtype, copy=False)) for leaf, s in zip(leaves, structs)]
    with _lock:
        _cache[cache_key] = leaves
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return leaves


@static_cache(64)
def _structure(plan, controls: tuple, dtype: str):
    """The leaves' ``jax.ShapeDtypeStruct`` and the tree of ``(masks, plan_operators(...))``."""
    masks = jax.ShapeDtypeStruct((plan.n_coalitions, plan.n_features), jnp.bool_)
    return jax.tree_util.tree_flatten((masks, operator_shapes(plan, controls, jnp.dtype(dtype))))


def plan_leaves(key: jax.Array, plan, controls: tuple = (), *, dtype=jnp.float32) -> tuple[jax.Array, ...]:
    """The leaves of a concrete ``key``'s plan, to hand to the compiled program as arguments
    (:func:`shared_plan` rebuilds the plan from them): no callback in the program, so JAX's
    persistent compilation cache can store it."""
    return tuple(host_plan(_key_bits(key), plan, tuple(controls), jnp.dtype(dtype)))


def plan_leaves_soon(key: jax.Array, plan, controls: tuple = (), *, dtype=jnp.float32):
    """:func:`plan_leaves`, started on a worker thread unless the plan is cached.

    Returns ``(leaves, None)`` for a cached plan, else ``(placeholders, future)``: NumPy zeros
    of the leaves' shapes and dtypes (enough to compile the program that takes them) and a
    :class:`concurrent.futures.Future` of the leaves. The caller compiles while the host works
    (:class:`jaxshap._engine._program.Deferred`); the two overlap on a multi-core CPU.
    """
    bits, controls, dtype = _key_bits(key), tuple(controls), jnp.dtype(dtype)
    leaves = _cached(_cache_key(bits, plan, controls, np.dtype(dtype)))
    if leaves is not None:
        return tuple(leaves), None
    with _lock:
        if _worker.get("pid") != os.getpid():
            _worker["pid"] = os.getpid()
            _worker["executor"] = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxshap-plan")
        executor = _worker["executor"]
    x64 = jax.config.jax_enable_x64  # the caller's precision (a thread-local setting): float64 leaves stay float64

    def work():
        with jax.enable_x64(x64):
            return tuple(host_plan(bits, plan, controls, dtype))

    future = executor.submit(work)
    structs, _ = _structure(plan, controls, dtype.str)
    return tuple(np.zeros(s.shape, s.dtype) for s in structs), future


def shared_plan(key: jax.Array, plan, controls: tuple = (), *, dtype=jnp.float32, leaves=None):
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
      leaves: the plan's leaves from :func:`plan_leaves` (program arguments), when the caller
        had the key concretely; otherwise the plan is fetched from the program through
        :func:`jax.pure_callback` (works for a traced key, but a program with a callback is not
        stored in the persistent compilation cache).
    """
    dtype = jnp.dtype(dtype)
    structs, treedef = _structure(plan, tuple(controls), dtype.str)
    if leaves is None:

        def callback(bits):
            return [np.asarray(leaf) for leaf in host_plan(bits, plan, tuple(controls), dtype)]

        leaves = jax.pure_callback(callback, structs, _raw_bits(key), vmap_method="sequential")
    return jax.tree_util.tree_unflatten(treedef, list(leaves))
