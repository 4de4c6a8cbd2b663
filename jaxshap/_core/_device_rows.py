"""Rows on devices: a host matrix's rows on the device without a copy.

On a CPU backend :func:`jax.device_put` hands a NumPy buffer to XLA without copying it only
when the buffer's address is a multiple of :data:`ALIGN` bytes; otherwise it copies, which can
take longer than a small model takes to evaluate those rows. NumPy's large allocations usually
start 16 bytes past such a boundary. So :func:`device_rows` splits the flattened matrix into its
first ``a < ALIGN / itemsize`` elements (a tiny copy) and the aligned rest (aliased), and
:func:`read_rows` rebuilds any run of rows from the two inside a compiled program. On other
backends the transfer is a copy whatever the alignment, and the rows go whole. The aliased
buffer is the caller's: a program that reads it must finish before the caller can change the
array, which holds for a call that waits for its results before returning.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


ALIGN = 64
"""Bytes of alignment under which XLA's CPU client aliases a host buffer instead of copying it."""

FLAT_LIMIT = 2**31
"""Flat element offsets are int32 inside a program: a larger matrix goes whole (one aligned copy)."""


@jax.tree_util.register_pytree_node_class
class DeviceRows:
    """Rows ``[n, M]`` held as ``head`` (the first ``a`` elements of the row-major matrix) and
    ``body`` (the rest: flat ``[n * M - a]``, or the whole ``[n, M]`` matrix when ``a == 0``).

    Attributes:
      head: ``[a]``, ``a`` below ``ALIGN / itemsize``.
      body: ``[n * M - a]`` or ``[n, M]``.
      shape: ``(n, M)`` (static).
    """

    def __init__(self, head: Any, body: Any, shape: tuple[int, int]):
        self.head, self.body, self.shape = head, body, (int(shape[0]), int(shape[1]))

    @property
    def dtype(self):
        return self.body.dtype

    def tree_flatten(self):
        return (self.head, self.body), self.shape

    @classmethod
    def tree_unflatten(cls, shape, children):
        return cls(*children, shape)


def _address(x: np.ndarray) -> int:
    """The address of ``x``'s first element (NumPy's array interface)."""
    return x.__array_interface__["data"][0]


def _aligned_copy(x: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``x`` whose buffer starts on an :data:`ALIGN`-byte boundary."""
    raw = np.empty(x.nbytes + ALIGN, np.uint8)
    skip = -_address(raw) % ALIGN
    out = raw[skip : skip + x.nbytes].view(x.dtype).reshape(x.shape)
    np.copyto(out, x)
    return out


def device_rows(x: Any) -> DeviceRows:
    """``x`` (``[n, M]``, NumPy or JAX) as :class:`DeviceRows`, aliasing a NumPy ``x`` where the
    backend allows it (see the module docstring)."""
    n, m = x.shape
    empty = np.zeros((0,), x.dtype)  # a jax.numpy array would be a device call
    if isinstance(x, jax.Array) or jax.default_backend() != "cpu":
        return DeviceRows(empty, jax.device_put(x), (n, m))
    x = np.ascontiguousarray(x)
    address = _address(x)
    if address % x.itemsize or x.size >= FLAT_LIMIT:
        x = x if address % ALIGN == 0 else _aligned_copy(x)
        return DeviceRows(empty, jax.device_put(x), (n, m))
    a = min((-address % ALIGN) // x.itemsize, x.size)
    if a == 0:
        return DeviceRows(empty, jax.device_put(x), (n, m))
    flat = x.reshape(-1)
    return DeviceRows(jax.device_put(flat[:a]), jax.device_put(flat[a:]), (n, m))


def read_rows(rows: DeviceRows, start: jax.Array, size: int) -> jax.Array:
    """Rows ``[start, start + size)`` as ``[size, M]``, inside a program (``start <= n - size``).

    On a CPU the run is a buffer of its own (the branch of a ``cond`` XLA materialises), also when
    the data is aligned: consumers then read it from cache, where a slice of the data read in place by
    several fusions streams it from memory each time (slower by about a fifth of a small model's
    time on a CPU, in a one-process A/B of the ALE's row pass).
    """
    n, m = rows.shape
    a = rows.head.shape[0]
    body = rows.body.reshape(-1)
    if a == 0 and jax.default_backend() != "cpu":  # an accelerator reads the slice where it lies
        return jax.lax.dynamic_slice_in_dim(body, start * m, size * m).reshape(size, m)
    # rows that start before the aligned body read from the head and the body's first run
    first = jnp.concatenate([rows.head, body[: min(body.shape[0], size * m)]])
    if body.shape[0] < size * m:  # a run longer than the body: ``first`` is the whole matrix
        return jax.lax.dynamic_slice_in_dim(first, start * m, size * m).reshape(size, m)
    offset = start * m - a
    flat = jax.lax.cond(
        offset >= 0,
        lambda: jax.lax.dynamic_slice_in_dim(body, jnp.maximum(offset, 0), size * m),
        lambda: jax.lax.dynamic_slice_in_dim(first, start * m, size * m),
    )
    return flat.reshape(size, m)


def take_rows(rows: DeviceRows, index: jax.Array) -> jax.Array:
    """The rows at ``index`` (``[k]``, in range) as ``[k, M]``, inside a program."""
    n, m = rows.shape
    a = rows.head.shape[0]
    if a == 0:
        return rows.body.reshape(n, m)[index]
    flat = index[:, None] * m + jnp.arange(m) - a  # element positions in the body; negative: in the head
    from_body = rows.body[jnp.clip(flat, 0, max(rows.body.shape[0] - 1, 0))] if rows.body.shape[0] else 0
    return jnp.where(flat >= 0, from_body, rows.head[jnp.clip(flat + a, 0, a - 1)])
