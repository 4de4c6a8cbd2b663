"""Running a compiled per-row program on successive equal blocks of rows (for a progress bar).

Used by the explainers that do not go through :class:`jaxshap._runtime._explainer.Explainer`
(gradients, amortized). The program is called from Python on blocks of one shape (the last
block shifted back to end at the last row, so none is ragged and one compilation serves all);
each block is dispatched before the previous one is waited for.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from .._runtime._progress import ProgressBar


def run_blocks(
    call: Callable[[jax.Array, int], Any], X: jax.Array, block: int, bar: ProgressBar | None
) -> Any:
    """``call(X_block, first_row)`` over blocks of ``block`` rows, concatenated.

    Args:
      call: compiled program of a block of rows and the index of its first row (traced),
        returning a pytree of arrays with the block's rows on the leading axis.
      X: all rows ``[n, M]``.
      block: rows per block (at least 1; capped at ``n``).
      bar: progress bar to advance after each block, or ``None``.
    """
    n = X.shape[0]
    block = max(1, min(block, n))
    if block == n:
        out = call(X, 0)
        if bar is not None:
            jax.block_until_ready(out)
            bar.update(n)
        return out
    starts = [min(s, n - block) for s in range(0, n, block)]
    parts, pending = [], None
    for i, start in enumerate(starts):
        out = call(jax.lax.dynamic_slice_in_dim(X, start, block), start)
        keep = i * block - start  # rows of a shifted last block that earlier blocks already did
        if pending is not None and bar is not None:
            jax.block_until_ready(pending[0])
            bar.update(pending[1])
        pending = (out, block - keep)
        parts.append(jax.tree_util.tree_map(lambda a: a[keep:], out))
    if bar is not None:
        jax.block_until_ready(pending[0])
        bar.update(pending[1])
    return jax.tree_util.tree_map(lambda *a: jnp.concatenate(a, axis=0), *parts)
