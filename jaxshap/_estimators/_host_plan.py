r"""One call's shared draw for KernelSHAP: the coalitions of a plan and their solve operators, made on the host.

Terms: a :class:`~jaxshap.coalitions.KernelPlan` is the static design (which sizes are
enumerated, how many pairs each stratum gets); a *shared draw* is one key's coalitions of that
plan together with the solve operators of their regression
(:func:`._kernel_solve.plan_operators`). With shared coalitions (the explainer's default) every
row of a call uses the same draw and then costs its model evaluations and a few matrix
products. :class:`SharedCoalitions` is the entry point for an explainer.

The draw is computed on the host, with NumPy in float64 (:func:`host_plan`), from the key's bits
(:func:`jaxshap._coalitions._host_sampling.host_coalitions`), so no process compiles the
sampler or the factorisations. When the caller holds the key concretely (an ordinary call) the
draw enters the program as arguments (:func:`plan_leaves`, or :func:`plan_leaves_soon` on a
worker thread while the program compiles); inside a user's ``jax.jit`` the program fetches it
through :func:`jax.pure_callback` (:func:`shared_plan`). Either way it is a pure function of the
key: eager calls, ``jax.jit``, ``jax.vmap`` over keys, gradients with respect to the model (the
draw does not depend on it) and every block, chunk and device of a call see the same draw. The
last :data:`CACHE_SIZE` draws are kept, so repeated calls with one key skip the work.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from collections import OrderedDict
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._platform._threads import single_threaded_blas
from .._coalitions._host_sampling import host_coalitions
from .._coalitions._kernel_design import KernelPlan
from .._coalitions._static_cache import static_cache
from .._core._inputs import key_bits
from ._kernel_solve import operator_shapes, plan_operators

CACHE_SIZE = 4
"""Shared draws kept, most recently used first (each holds one call's coalitions and operators)."""

_cache: OrderedDict = OrderedDict()
_lock = threading.Lock()
_worker: dict = {}
"""The worker thread's executor and the process it belongs to (a forked child starts its own)."""


def _key_bits(key: jax.Array) -> np.ndarray:
    """The raw bits of a concrete key, on the host."""
    with jax.ensure_compile_time_eval():  # a concrete key closed over inside jax.jit stays concrete
        return np.asarray(key_bits(key), np.uint32)


def _cache_key(bits: np.ndarray, plan, controls: tuple, dtype: np.dtype, prior=None) -> tuple:
    return (bits.tobytes(), bits.shape, plan, controls, dtype.str, prior)


def _cached(cache_key: tuple) -> list[jax.Array] | None:
    with _lock:
        if cache_key in _cache:
            _cache.move_to_end(cache_key)
            return _cache[cache_key]
    return None


def host_plan(key_bits: np.ndarray, plan: KernelPlan, controls: tuple, dtype, prior=None) -> list[jax.Array]:
    """The leaves of one key's shared draw, ``(masks, plan_operators(...), prior.parts(...))``, computed
    with NumPy (cached; the parts are ``None`` without a ``prior``, see :mod:`._priors`).

    Everything is computed in float64 and rounded to ``dtype`` (the model's floating dtype) at
    the end; the leaves are kept on the default device, so a repeated call transfers nothing.
    NumPy's BLAS runs on one thread meanwhile
    (:func:`jaxshap._platform._threads.single_threaded_blas`): its spinning worker threads would
    otherwise slow the XLA work that follows, or that runs beside it, on a machine with few cores.
    """
    bits = np.asarray(key_bits, np.uint32)
    dtype = np.dtype(dtype)
    cache_key = _cache_key(bits, plan, controls, dtype, prior)
    leaves = _cached(cache_key)
    if leaves is not None:
        return leaves
    with single_threaded_blas():
        masks, weights = host_coalitions(bits, plan)
        ops = plan_operators(plan, masks, weights, controls, dtype=np.float64, xp=np)
        parts = None if prior is None else prior.parts(plan, masks, weights, controls, dtype=np.float64, xp=np)
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves((masks, ops, parts))]
    structs, _ = _structure(plan, controls, dtype.str, prior)
    leaves = [jax.device_put(leaf.astype(s.dtype, copy=False)) for leaf, s in zip(leaves, structs)]
    with _lock:
        _cache[cache_key] = leaves
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return leaves


@static_cache(64)
def _structure(plan: KernelPlan, controls: tuple, dtype: str, prior=None):
    """The leaves' ``jax.ShapeDtypeStruct`` and the tree of ``(masks, plan_operators(...), parts)``."""
    masks = jax.ShapeDtypeStruct((plan.n_coalitions, plan.n_features), jnp.bool_)
    parts = None if prior is None else prior.parts_shapes(plan, controls, jnp.dtype(dtype))
    return jax.tree_util.tree_flatten((masks, operator_shapes(plan, controls, jnp.dtype(dtype)), parts))


def plan_leaves(key: jax.Array, plan: KernelPlan, controls: tuple = (), *, dtype=jnp.float32, prior=None) -> tuple[jax.Array, ...]:
    """The leaves of a concrete ``key``'s shared draw, to hand to the compiled program as arguments
    (:func:`shared_plan` rebuilds the draw from them): no callback in the program, so JAX's
    persistent compilation cache can store it."""
    return tuple(host_plan(_key_bits(key), plan, tuple(controls), jnp.dtype(dtype), prior))


def plan_leaves_soon(key: jax.Array, plan: KernelPlan, controls: tuple = (), *, dtype=jnp.float32, prior=None):
    """:func:`plan_leaves`, started on a worker thread unless the draw is cached.

    Returns ``(leaves, None)`` for a cached draw, else ``(placeholders, future)``: NumPy zeros
    of the leaves' shapes and dtypes (enough to compile the program that takes them) and a
    :class:`concurrent.futures.Future` of the leaves. The caller compiles while the host works
    (:class:`jaxshap._engine._program.Deferred`); the two overlap on a multi-core CPU.
    """
    bits, controls, dtype = _key_bits(key), tuple(controls), jnp.dtype(dtype)
    leaves = _cached(_cache_key(bits, plan, controls, np.dtype(dtype), prior))
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
            return tuple(host_plan(bits, plan, controls, dtype, prior))

    future = executor.submit(work)
    structs, _ = _structure(plan, controls, dtype.str, prior)
    return tuple(np.zeros(s.shape, s.dtype) for s in structs), future


def shared_plan(key: jax.Array, plan: KernelPlan, controls: tuple = (), *, dtype=jnp.float32, leaves=None, prior=None):
    """``(masks, ops, parts)``, the shared draw of one call: the coalitions of ``plan`` drawn from
    ``key``, their operators (as :func:`._kernel_solve.plan_operators` returns them) and the
    ``prior``'s parts (``None`` without one), computed on the host.

    The coalitions follow the plan's distribution (strata, pairs, weights) exactly as
    :func:`jaxshap.coalitions.sample_kernel_coalitions`, from another random stream; the
    operators are the same functions of the coalitions, computed in float64.

    Args:
      key: a PRNG key (typed, or raw ``uint32`` bits), concrete or traced.
      plan: the :class:`~jaxshap.coalitions.KernelPlan`.
      controls: ``((order, rho), ...)``, as for :func:`._kernel_solve.kernel_operator`.
      dtype: floating dtype of the operators.
      prior: a :class:`jaxshap.estimators.RowPrior` whose parts join the draw (``None``: none).
      leaves: the draw's leaves from :func:`plan_leaves` (program arguments), when the caller
        had the key concretely; otherwise the draw is fetched from the program through
        :func:`jax.pure_callback` (works for a traced key, but a program with a callback is not
        stored in the persistent compilation cache).
    """
    dtype = jnp.dtype(dtype)
    structs, treedef = _structure(plan, tuple(controls), dtype.str, prior)
    if leaves is None:

        def callback(bits):
            return [np.asarray(leaf) for leaf in host_plan(bits, plan, tuple(controls), dtype, prior)]

        leaves = jax.pure_callback(callback, structs, key_bits(key), vmap_method="sequential")
    return jax.tree_util.tree_unflatten(treedef, list(leaves))


@dataclasses.dataclass(frozen=True)
class SharedCoalitions:
    """The shared draws of one explainer configuration: the coalitions of ``plan`` and their operators, per key.

    An explainer's one entry point to this module: :meth:`prefetch` starts a concrete key's
    draw on the host before the program runs (on a worker thread while it compiles), and
    :meth:`draw` gives the program ``(masks, ops, parts)``, from those leaves or, for a traced
    key, through a callback.

    Attributes:
      plan: the :class:`~jaxshap.coalitions.KernelPlan` whose coalitions are drawn.
      controls: ``((order, rho), ...)``, the control variates of the operators.
      dtype: floating dtype of the operators (the model's).
      prior: the :class:`jaxshap.estimators.RowPrior` whose per-row step uses the draw (its
        :meth:`~jaxshap.estimators.RowPrior.parts` join the draw), or ``None``.
    """

    plan: KernelPlan
    controls: tuple = ()
    dtype: Any = np.dtype(np.float32)
    prior: Any = None

    def prefetch(self, key: jax.Array):
        """``(leaves, None)`` for a cached draw, else ``(placeholders, future)`` (:func:`plan_leaves_soon`)."""
        return plan_leaves_soon(key, self.plan, self.controls, dtype=self.dtype, prior=self.prior)

    def draw(self, key: jax.Array, leaves=None):
        """``(masks, ops, parts)`` for ``key``, from :meth:`prefetch`'s leaves when given (:func:`shared_plan`)."""
        return shared_plan(key, self.plan, self.controls, dtype=self.dtype, leaves=leaves, prior=self.prior)
