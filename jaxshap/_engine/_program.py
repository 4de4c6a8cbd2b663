"""The compiled program that explains a block of rows, and the host loop that feeds it blocks.

This is the runtime every explainer shares. An explainer is a pytree (see
:mod:`jaxshap._core._pytree`) with a method

    ``_explain_local(X [r, M], keys [r], rows_per_chunk, coalitions_per_chunk, n_valid)``

returning a pytree of per-row results (leading axis ``r``). :func:`run_rows` validates nothing
and plans nothing itself: given the rows and a planner, it pads the rows to one of a few
capacities, shards them over devices, cuts them into host-level blocks (for progress bars and
streams), and calls :func:`block_program`, one module-level ``jax.jit`` compiled with XLA's
default options. Because the explainer is
an argument of that one function, whose static configuration is part of its pytree structure,
every explainer instance with the same configuration and shapes shares one compiled program.

Which devices explain which rows (:func:`row_mesh`): a mesh axis (or axes) along the rows of
``X``. The per-row computation is embarrassingly parallel, so rows sharded over devices are
explained with :func:`jax.shard_map`: each device runs the same chunked program on its own rows,
with no communication. The mesh comes from the input (a ``NamedSharding`` whose spec partitions
axis 0) or from the ``devices`` argument.

Row ``i`` (counted from ``offset``) always uses the key ``fold_in(key, i)``, so results do not
depend on chunks, blocks, capacities or devices (beyond float rounding).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._core._chunking import ProgressBar, bucket_rows, plan_blocks
from .._core._inputs import is_traced
from .._core._platform import cached_jit


ROW_AXIS = "rows"
"""Name of the mesh axis built by ``devices=``."""


@dataclasses.dataclass(frozen=True)
class RowMesh:
    """A mesh and the axis names that split the rows (hashable: a static argument of ``jit``).

    Attributes:
      mesh: the device mesh.
      axes: mesh axis names along which rows are split, major to minor.
    """

    mesh: Mesh
    axes: tuple[str, ...]

    @property
    def size(self) -> int:
        """Number of row shards."""
        return int(np.prod([self.mesh.shape[a] for a in self.axes]))


def _from_sharding(x: Any) -> RowMesh | None:
    sharding = getattr(x, "sharding", None)
    if not isinstance(sharding, NamedSharding) or not sharding.spec:
        return None
    axes = sharding.spec[0]
    if axes is None:
        return None
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    found = RowMesh(sharding.mesh, axes)
    return found if found.size > 1 else None


def row_mesh(x: Any, devices: Any) -> RowMesh | None:
    """The mesh to explain ``x``'s rows on, or ``None`` for one device.

    Args:
      x: the validated rows (a JAX array, possibly sharded, or a tracer).
      devices: ``None`` (follow ``x``'s sharding), ``"local"`` (all of this process's devices)
        or a sequence of ``jax.Device``.

    Raises:
      ValueError: for an unknown ``devices`` value or an empty sequence.
    """
    if devices is None:
        return None if isinstance(x, jax.core.Tracer) else _from_sharding(x)
    if isinstance(devices, str):
        if devices != "local":
            raise ValueError(f'`devices` must be None, "local" or a sequence of jax devices; got {devices!r}.')
        devices = jax.local_devices()
    try:
        devices = list(devices)
    except TypeError:
        raise ValueError(f'`devices` must be None, "local" or a sequence of jax devices; got {devices!r}.') from None
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(
            f'`devices` must be None, "local" or a non-empty sequence of jax devices (e.g. jax.local_devices()); '
            f"got {devices!r}."
        )
    if len(devices) == 1:
        return None
    return RowMesh(Mesh(np.array(devices), (ROW_AXIS,)), (ROW_AXIS,))


@dataclasses.dataclass(frozen=True)
class Plan:
    """How one compiled call runs (hashable: a static argument of the program).

    Attributes:
      rows_per_chunk: rows evaluated together (``vmap``), chunk after chunk (a scan).
      coalitions_per_chunk: coalitions per chunk within a row, when one row does not fit.
      block_rows: rows of ``X`` one call explains, from a traced ``start``; ``None`` for all.
      mesh: the devices the rows are sharded over, or ``None`` for one device.
      skip: whether chunks past ``n_valid`` rows are skipped (padded calls).
    """

    rows_per_chunk: int
    coalitions_per_chunk: int | None
    block_rows: int | None = None
    mesh: RowMesh | None = None
    skip: bool = False


@cached_jit(static_argnames=("plan",))
def block_program(core: Any, X: jax.Array, key: jax.Array, first: Any, start: Any, n_valid: Any, plan: Plan):
    """Explain ``X[start : start + plan.block_rows]`` (per device shard, on a mesh).

    Row ``r`` of a device's block is global row ``first + shard * shard_rows + start + r`` and
    uses the key ``fold_in(key, that row)``. ``first``, ``start`` and ``n_valid`` are traced, so
    every block of a call, every batch of a stream and every call whose rows fit the capacity
    reuse one program.
    """
    mesh = plan.mesh

    def local(core, X, key, first, start, n_valid):
        rows = X.shape[0] if plan.block_rows is None else plan.block_rows
        first = first + start
        if mesh is not None:
            shard = jax.lax.axis_index(mesh.axes)
            first = first + shard * X.shape[0]
            n_valid = jnp.clip(n_valid - shard * X.shape[0], 0, rows)
        if plan.block_rows is not None and plan.block_rows != X.shape[0]:
            X = jax.lax.dynamic_slice_in_dim(X, start, rows)
        index = first + jnp.arange(rows, dtype=jnp.asarray(first).dtype)
        return core._explain_keyed(
            X, key, index, plan.rows_per_chunk, plan.coalitions_per_chunk, n_valid if plan.skip else None
        )

    if mesh is None:
        return local(core, X, key, first, start, n_valid)
    rows_spec, rep = PartitionSpec(mesh.axes), PartitionSpec()
    return jax.shard_map(
        local, mesh=mesh.mesh, in_specs=(rep, rows_spec, rep, rep, rep, rep), out_specs=rows_spec, check_vma=False
    )(core, X, key, first, start, n_valid)


@functools.partial(jax.jit, static_argnums=(2,))
def _take_rows(X: jax.Array, start: Any, size: int) -> jax.Array:
    """``size`` rows of ``X`` from ``start`` (padded with copies of row 0 when ``X`` is shorter)."""
    if X.shape[0] < size:
        X = jnp.concatenate([X, jnp.broadcast_to(X[:1], (size - X.shape[0],) + X.shape[1:])], axis=0)
    return jax.lax.dynamic_slice_in_dim(X, start, size)


def take_block(X: jax.Array, start: int, size: int) -> tuple[jax.Array, int]:
    """``(rows, valid)``: ``size`` rows of ``X`` from ``start``, padded with copies of row 0 when
    ``X`` is shorter (through NumPy for concrete rows on a CPU: no program compiled for a new
    number of rows), and how many of them are real."""
    n = X.shape[0]
    if n == size:
        return X, n
    if n < size and not is_traced(X) and all(d.platform == "cpu" for d in X.devices()):
        rows = np.asarray(X)
        padded = np.concatenate([rows, np.broadcast_to(rows[:1], (size - n,) + rows.shape[1:])])
        return jax.device_put(padded, next(iter(X.devices()))), n
    return _take_rows(X, _index(start), size), min(size, n - start)


def _index(i: int) -> np.ndarray:
    """An int32 scalar argument (a NumPy one: ``jnp.asarray`` would compile a conversion program)."""
    return np.asarray(i, dtype=np.int32)


Planner = Callable[[int, bool], "tuple[int, int | None]"]
"""``planner(n_rows, exact)`` -> ``(rows_per_chunk, coalitions_per_chunk)``: with ``exact`` the
chunks are balanced over exactly ``n_rows`` rows, else the largest that fit (any ``n``)."""


def run_rows(
    core: Any,
    X: jax.Array,
    key: jax.Array,
    *,
    planner: Planner,
    evals_per_row: int,
    offset: int = 0,
    devices: Any = None,
    bar: ProgressBar | None = None,
    blocked: bool = False,
) -> Any:
    """Explain validated rows ``X [n, M]`` as global rows ``offset, offset + 1, ...``.

    Args:
      core: the explainer pytree (its ``_explain_keyed`` does one device's rows).
      X: the rows (concrete or traced).
      key: the PRNG key; row ``i`` uses ``fold_in(key, i)``.
      planner: chunk sizes for a number of rows (see :data:`Planner`).
      evals_per_row: model evaluations per row, to size host-level blocks.
      offset: global index of the first row (streams).
      devices: ``None``, ``"local"`` or a sequence of devices (see :func:`row_mesh`).
      bar: progress bar to update after each block, or ``None``.
      blocked: run successive host-level blocks (for a progress bar or a stream) instead of
        one call.

    Returns:
      The pytree of per-row results, ``n`` rows each.
    """
    n = X.shape[0]
    mesh = row_mesh(X, devices)
    if mesh is None and n > 0:  # traced rows too: the same chunks as eagerly, so the same values
        return _run_bucketed(core, X, key, planner, evals_per_row, offset, devices, bar, blocked)
    return _run_exact(core, X, key, planner, evals_per_row, offset, devices, bar, blocked, mesh)


def _run_bucketed(core, X, key, planner, evals_per_row, offset, devices, bar, blocked):
    """One device: calls of a few fixed capacities, padded and skipped past ``n``.

    Traced rows (inside ``jax.jit``) take the same path, so a jitted call runs exactly the
    chunks of the eager one and gives the same values to the last bit.
    """
    n = X.shape[0]
    if devices is not None and not is_traced(X):
        X = jax.device_put(X, jax.local_devices()[0] if isinstance(devices, str) else list(devices)[0])
    largest, coalitions = planner(n, False)
    rows, size = bucket_rows(n, largest)
    if blocked:
        rows, size = bucket_rows(plan_blocks(n, rows, evals_per_row), largest, least_rows=1)
    plan = Plan(rows, coalitions, skip=True)
    parts, pending = [], None
    for begin in range(0, n, size):
        start = min(begin, max(n - size, 0))  # a last block shifted back to end at row n: no padding
        block, valid = take_block(X, start, size)
        args = (block, key, _index(offset), _index(start), _index(valid), plan)
        out = block_program(core, *args)
        keep = begin - start  # rows that the previous block already explained
        if pending is not None:
            _wait(pending, bar)
        pending = (out, min(size, n - begin))
        parts.append(_rows(out, keep, valid) if (keep or valid < size) else out)
    _wait(pending, bar)
    if len(parts) == 1:
        return parts[0]
    return jax.tree_util.tree_map(lambda *a: jnp.concatenate(a, axis=0), *parts)


def _on_host(tree: Any) -> bool:
    """True when every leaf is a concrete array on one CPU device (NumPy can view it for free;
    sharded results stay on the device path, so they keep their sharding)."""
    leaves = jax.tree_util.tree_leaves(tree)
    return all(
        isinstance(a, jax.Array) and not is_traced(a) and len(a.devices()) == 1
        and next(iter(a.devices())).platform == "cpu"
        for a in leaves
    )


def host_or_device(fn: Callable[[Any], Any], jitted: Callable[[Any], Any], tree: Any) -> Any:
    """``fn`` applied leaf by leaf through NumPy on a CPU (a copy, no program to compile for a
    new shape), else the ``jitted`` equivalent on the whole tree."""
    if _on_host(tree):
        return jax.tree_util.tree_map(
            lambda a: jax.device_put(np.ascontiguousarray(fn(np.asarray(a))), next(iter(a.devices()))), tree
        )
    return jitted(tree)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _rows_jit(out: Any, start: int, stop: int) -> Any:
    return jax.tree_util.tree_map(lambda a: a[start:stop], out)


def _rows(out: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of every leaf."""
    return host_or_device(lambda a: a[start:stop], lambda t: _rows_jit(t, start, stop), out)


def _run_exact(core, X, key, planner, evals_per_row, offset, devices, bar, blocked, mesh):
    """Several devices: programs shaped for exactly these rows, sharded."""
    n = X.shape[0]
    shards = 1 if mesh is None else mesh.size
    n_pad = -(-n // shards) * shards
    if n_pad != n:  # shard_map needs equal shards: pad with copies of the first row, dropped below
        X = jnp.concatenate([X, jnp.broadcast_to(X[:1], (n_pad - n, X.shape[1]))], axis=0)
    if devices is not None and not is_traced(X):
        place = jax.local_devices()[0] if isinstance(devices, str) else list(devices)[0]
        if mesh is not None:
            place = NamedSharding(mesh.mesh, PartitionSpec(mesh.axes))
        X = jax.device_put(X, place)
    local_rows = n_pad // shards
    rows, coalitions = planner(local_rows, True)
    if not blocked:
        plan = Plan(rows, coalitions, None, mesh)
        return _trim(block_program(core, X, key, _index(offset), _index(0), _index(n_pad), plan), n)
    block = plan_blocks(local_rows, rows, evals_per_row)
    rows, coalitions = planner(block, True)
    plan = Plan(rows, coalitions, block, mesh)
    starts = [min(s, local_rows - block) for s in range(0, local_rows, block)]
    parts, pending = [], None
    for i, start in enumerate(starts):
        out = block_program(core, X, key, _index(offset), _index(start), _index(n_pad), plan)
        keep = i * block - start  # rows of a shifted last block that earlier blocks already did
        if pending is not None:
            _wait(pending, bar)
        pending = (out, (block - keep) * shards)
        if shards == 1:
            parts.append(jax.tree_util.tree_map(lambda a: a[keep:], out))
        else:
            parts.append(jax.tree_util.tree_map(lambda a: a.reshape((shards, block) + a.shape[1:])[:, keep:], out))
    _wait(pending, bar)
    if len(parts) == 1:
        out = parts[0]
    else:
        axis = 0 if shards == 1 else 1
        out = jax.tree_util.tree_map(lambda *a: jnp.concatenate(a, axis=axis), *parts)
    if shards > 1:
        out = jax.tree_util.tree_map(lambda a: a.reshape((n_pad,) + a.shape[2:]), out)
    return _trim(out, n)


def _trim(out, n):
    return jax.tree_util.tree_map(lambda a: a if a.shape[0] == n else a[:n], out)


def _wait(pending, bar):
    out, rows = pending
    if bar is not None:
        jax.block_until_ready(out)
        bar.update(rows)
