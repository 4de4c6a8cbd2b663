"""Rows of a host matrix on the device without a copy: every run of rows reads back exactly,
whatever the buffer's alignment, and an aligned buffer is aliased rather than copied."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshap._core._device_rows import ALIGN, DeviceRows, device_rows, read_rows, take_rows


def at_offset(x: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``x`` whose buffer starts ``offset`` bytes past an ALIGN-byte boundary."""
    raw = np.empty(x.nbytes + 2 * ALIGN, np.uint8)
    skip = (-raw.ctypes.data % ALIGN) + offset
    out = raw[skip : skip + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (301, 7)])
def test_every_run_of_rows_reads_back(shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 0.5 - 3.0
    n = shape[0]
    for offset in (0, 4, 16, ALIGN - 4):  # aligned; 15, 12 and 1 elements before the boundary
        held = at_offset(x, offset)
        rows = device_rows(held)
        if jax.default_backend() == "cpu":  # the elements before the first aligned one go apart
            assert rows.head.shape[0] == min((ALIGN - offset) % ALIGN // x.itemsize, x.size)
        for size in sorted({1, max(1, n // 3), n}):
            starts = jnp.arange(n - size + 1)
            runs = jax.jit(jax.vmap(lambda s: read_rows(rows, s, size)))(starts)
            expected = np.stack([x[s : s + size] for s in range(n - size + 1)])
            np.testing.assert_array_equal(np.asarray(runs), expected)
        index = np.random.default_rng(offset).integers(0, n, size=2 * n)
        np.testing.assert_array_equal(np.asarray(jax.jit(take_rows)(rows, jnp.asarray(index))), x[index])


def test_jax_input_and_pytree():
    x = jnp.arange(60.0, dtype=jnp.float32).reshape(12, 5)
    rows = device_rows(x)
    assert rows.head.shape == (0,) and rows.shape == (12, 5)
    leaves, tree = jax.tree_util.tree_flatten(rows)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert isinstance(back, DeviceRows) and back.shape == (12, 5)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda r: read_rows(r, 3, 4))(back)), np.asarray(x[3:7]))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="aliasing of host buffers is the CPU client's")
def test_aligned_buffers_are_aliased_not_copied():
    x = at_offset(np.ones((1000, 8), np.float32), 0)
    rows = device_rows(x)
    assert rows.head.shape == (0,)
    assert np.shares_memory(np.asarray(rows.body), x)  # the device array is the host buffer
    y = at_offset(np.ones((1000, 8), np.float32), 16)
    unaligned = device_rows(y)
    assert unaligned.head.shape == (12,) and np.shares_memory(np.asarray(unaligned.body), y)
