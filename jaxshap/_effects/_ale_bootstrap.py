r"""The nonparametric bootstrap of accumulated local effects, drawn group by group.

The estimate depends on the rows only through sums over *groups* of rows (a numeric feature's
bins, a pair's cells, a categorical feature's categories): each group's number of rows and the
sum of its rows' differences. A resample of the ``n`` rows with replacement (Efron's bootstrap)
has the same law as

1. the groups' counts :math:`c \sim \mathrm{Multinomial}(n, (n_1, \dots, n_G) / n)`, then
2. :math:`c_g` draws with replacement, uniform over the :math:`n_g` rows of group :math:`g`,

since a draw's group has probability :math:`n_g / n` and, given its group, the draw is uniform
within it. Step 1 draws on the host (NumPy's multinomial, exact, in float64, seeded by the
key's words), with a key for each replicate's draws. Step 2 runs in the program with the rows
sorted by group once: group :math:`g` owns a fixed run of *slots*,
:math:`r_g = n_g + \lceil 4 \sqrt{n_g} \rceil` of them (its count's mean plus four standard
deviations, at most) rounded up to whole blocks, each slot draws one row of its group, and the
group's sum is read off a prefix sum over its first :math:`c_g` slots: no scatter over the rows,
and nothing per slot depends on the resample. A row is drawn by Lemire's method: with a 32-bit
word :math:`u` from Threefry-2x32 (the generator of :mod:`jax.random`, written out so that it
fuses with the draws: :mod:`jaxshap._core._threefry`) under the replicate's key, the draw is
:math:`\lfloor u n_g / 2^{32} \rfloor`, rejected when
:math:`u n_g \bmod 2^{32} < 2^{32} \bmod n_g`, which makes it exactly uniform. What a group
still lacks (rejections, rarely a count above its slots) is drawn in rounds of at most
:data:`EXTRA` further draws, a group at a time, until every group has its :math:`c_g`. The
values drawn are centred by their group's mean, so the prefix sums stay small and their
differences exact to rounding.

Lemire, "Fast random integer generation in an interval", ACM TOMACS 29(1), 2019.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from .._core._threefry import threefry_words

ROOM_SIGMAS = 4
"""Slots per group beyond its size, in (an upper bound of) standard deviations of its count."""

EXTRA = 64
"""Draws per round for what the slots did not give a group (rejections, a count above its slots)."""

MASKED_PREFIX = 2**20
"""Up to this many (boundary, block) pairs the sums before each boundary are masked sums over the
blocks; beyond, a cumulative sum (several times slower to compile on a CPU)."""


@jax.tree_util.register_pytree_node_class
class Slots:
    """Where each group's draws go: runs of whole blocks of slots, one run per group.

    Attributes:
      table: ``[blocks, 3]`` uint32 per block of slots: its group's size, first row (in the rows
        sorted by group) and Lemire's rejection bound ``2^32 mod size``.
      group: ``[G, 3]`` the same per group.
      first: ``[G]`` each group's first slot.
      room: ``[G]`` each group's number of slots (whole blocks).
      block: slots per block (static).
    """

    def __init__(self, table, group, first, room, block: int):
        self.table, self.group, self.first, self.room, self.block = table, group, first, room, int(block)

    def tree_flatten(self):
        return (self.table, self.group, self.first, self.room), self.block

    @classmethod
    def tree_unflatten(cls, block, children):
        return cls(*children, block)


def slots(sizes: np.ndarray) -> Slots:
    """The slots of groups of ``sizes`` rows (host arrays, small).

    A block holds a power of two of slots, at most 1024 and about ``n / (8 G)``, so that rounding
    each group's slots up to whole blocks adds at most an eighth; a slot's group, size and bound
    are then its block's, broadcast, and nothing per slot is read from memory.
    """
    sizes = np.asarray(sizes, np.int64)
    block = int(2 ** np.clip(np.floor(np.log2(max(sizes.sum() / (8 * sizes.size), 1))), 3, 10))
    room = np.where(sizes > 0, sizes + np.ceil(ROOM_SIGMAS * np.sqrt(sizes)).astype(np.int64), 0)
    room = -(-room // block) * block
    size = np.maximum(sizes, 1)
    per_group = np.stack([size, np.cumsum(sizes) - sizes, (2**32 - size) % size], axis=1).astype(np.uint32)
    table = np.repeat(per_group, room // block, axis=0)
    first = np.cumsum(room) - room
    return Slots(jnp.asarray(table), jnp.asarray(per_group), jnp.asarray(first.astype(np.int32)),
                 jnp.asarray(room.astype(np.int32)), block)


def resample_plan(key: jax.Array, sizes: np.ndarray, n_replicates: int) -> tuple[np.ndarray, np.ndarray]:
    """``(counts [B, G], seeds [B, 2])``: the groups' counts in ``B`` resamples of the
    ``n = sum(sizes)`` rows (step 1) and each resample's Threefry key (step 2), from NumPy's
    generator seeded with the key's words (drawn on the host: nothing to compile)."""
    words = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    rng = np.random.default_rng(np.asarray(words, np.uint32).ravel())
    n = int(sizes.sum())
    counts = rng.multinomial(n, sizes / n, size=n_replicates).astype(np.int32)
    return counts, rng.integers(0, 2**32, size=(n_replicates, 2), dtype=np.uint32)


def _mul_hi(a: jax.Array, b: jax.Array) -> jax.Array:
    """The high 32 bits of the 64-bit product of two uint32 arrays, in 16-bit halves."""
    al, ah, bl, bh = a & 0xFFFF, a >> 16, b & 0xFFFF, b >> 16
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    carry = ((ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF)) >> 16
    return hh + (lh >> 16) + (hl >> 16) + carry


def lemire(word: jax.Array, size: jax.Array, bound: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(floor(word size / 2^32), accepted)`` for uint32 arrays: accepted draws are exactly
    uniform on ``[0, size)`` (``bound = 2^32 mod size``)."""
    return _mul_hi(word, size), word * size >= bound


def _prefix_at(values: jax.Array, at: jax.Array, block: int) -> jax.Array:
    """``[len(at), Q]``: the sums of ``values[:x]`` for each ``x`` in ``at`` (``values`` in whole blocks)."""
    blocks = values.reshape(-1, block, values.shape[-1])
    n_blocks = blocks.shape[0]
    b = jnp.minimum(at // block, n_blocks - 1)
    if at.shape[0] * n_blocks <= MASKED_PREFIX:
        earlier = jnp.arange(n_blocks)[None, :] < b[:, None]
        before = jnp.sum(jnp.where(earlier[..., None], blocks.sum(axis=1)[None], 0), axis=1)
    else:
        before = jnp.concatenate([jnp.zeros_like(blocks[:1, 0]), jnp.cumsum(blocks.sum(axis=1), axis=0)])[b]
    inside = jnp.arange(block)[None, :] < (at - b * block)[:, None]
    return before + jnp.sum(jnp.where(inside[..., None], blocks[b], 0), axis=1)


def group_draw_sums(seed: jax.Array, counts: jax.Array, slot: Slots, values: jax.Array) -> jax.Array:
    """``[G, Q]``: for each group, the sum of ``values`` over ``counts[g]`` rows drawn uniformly with
    replacement among its rows (``values [n, Q]`` sorted by group, as :func:`slots` was given)
    (step 2)."""
    n_blocks, n_groups, block = slot.table.shape[0], slot.first.shape[0], slot.block
    n_slots = n_blocks * block
    size, start, bound = (slot.table[:, k : k + 1] for k in range(3))  # [blocks, 1]: one group per block
    counter = jnp.arange(n_slots, dtype=jnp.uint32)
    pick, accepted = lemire(threefry_words(seed, counter).reshape(n_blocks, block), size, bound)
    drawn = values[jnp.minimum(start.astype(jnp.int32) + pick.astype(jnp.int32), values.shape[0] - 1)]
    drawn = jnp.where(accepted[..., None], drawn, 0).reshape(n_slots, -1)
    used = jnp.minimum(counts, slot.room)
    at = jnp.concatenate([slot.first, slot.first + used])
    sums = _prefix_at(drawn, at, block)
    got = _prefix_at(accepted.astype(jnp.int32).reshape(n_slots, 1), at, block)[:, 0]
    sums, got = sums[n_groups:] - sums[:n_groups], got[n_groups:] - got[:n_groups]

    def more(state):  # a round of at most EXTRA draws for the first group still lacking some
        r, sums, need = state
        g = jnp.argmax(need > 0)
        size, start, bound = slot.group[g, 0], slot.group[g, 1].astype(jnp.int32), slot.group[g, 2]
        counter = (n_slots + r * EXTRA + jnp.arange(EXTRA)).astype(jnp.uint32)
        pick, accepted = lemire(threefry_words(seed, counter), size, bound)
        accepted = accepted & (jnp.arange(EXTRA) < need[g])  # no more draws than the group lacks
        drawn = values[jnp.minimum(start + pick.astype(jnp.int32), values.shape[0] - 1)]
        drawn = jnp.sum(jnp.where(accepted[:, None], drawn, 0), axis=0)
        return r + 1, sums.at[g].add(drawn), need.at[g].add(-jnp.sum(accepted, dtype=need.dtype))

    _, sums, _ = jax.lax.while_loop(lambda state: jnp.any(state[2] > 0), more, (0, sums, counts - got))
    return sums
