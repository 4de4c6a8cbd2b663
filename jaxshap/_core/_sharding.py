"""Which devices explain which rows: a mesh axis (or axes) along the rows of ``X``.

The per-row computation is embarrassingly parallel, so rows sharded over devices are explained
with :func:`jax.shard_map`: each device runs the same chunked program on its own rows, with no
communication. The mesh comes from the input (a ``NamedSharding`` whose spec partitions axis 0)
or from the ``devices`` argument.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

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
