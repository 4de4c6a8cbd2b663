"""Threefry-2x32 with its 20 rounds written out, so XLA fuses it into the code that uses its words.

Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011: the
counter-based generator behind :mod:`jax.random`. A block of two 32-bit counters ``(x0, x1)``
under a key ``(k0, k1)`` goes through 20 rounds of ``x0 += x1; x1 = rotl(x1, r) ^ x0`` with the
rotations ``13 15 26 6`` and ``17 29 16 24`` in turn, and after every four rounds the key words
``k0, k1, k2 = k0 ^ k1 ^ 0x1BD11BDA``, in rotation, are added with the injection's number.

The words are exactly :func:`jax.extend.random.threefry_2x32`'s (a test checks it). JAX lowers
that function on a CPU to a loop over the rounds, which makes each round a pass over memory and
keeps the words out of the consumer's loop; written out here, the rounds, the words' use and
the reads they drive become one fused loop (about twice as fast for the bootstrap's draws).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
"""The rotation of each round, four rounds to a group, the two groups in turn."""

PARITY = np.uint32(0x1BD11BDA)
"""Threefish's key-schedule constant: the third key word is ``k0 ^ k1 ^ PARITY``."""


def _rotl(v: jax.Array, r: int) -> jax.Array:
    return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


def threefry2x32(key: jax.Array, x0: jax.Array, x1: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The two output words of the blocks ``(x0, x1)`` (uint32 arrays) under ``key`` (uint32 ``[2]``)."""
    k = (key[0], key[1], key[0] ^ key[1] ^ PARITY)
    x0, x1 = x0 + k[0], x1 + k[1]
    for group in range(5):
        for r in ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + k[(group + 1) % 3]
        x1 = x1 + k[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


def threefry_words(key: jax.Array, count: jax.Array) -> jax.Array:
    """``count.size`` words for the counters ``count`` (uint32, even size), paired as
    :func:`jax.extend.random.threefry_2x32` pairs them: the first half with the second."""
    half = count.shape[0] // 2
    y0, y1 = threefry2x32(key, count[:half], count[half:])
    return jnp.concatenate([y0, y1])
