"""Cutting a stream of rows into batches: arrays (memory-mapped or not), DataFrames, iterables.

An array is cut into host slices of ``batch_size`` rows; the last one is padded to the same
shape (with copies of its first row), so a whole stream compiles one program. Any other
iterable yields its own batches, each counted by its rows.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ._inputs import column_names, is_sparse
from ._validate import integer


def batch_rows(batch: Any) -> int:
    """Number of rows of a batch (a single row ``[M]`` counts as one)."""
    if is_sparse(batch):
        return int(batch.shape[0])
    shape = np.shape(batch.to_numpy() if hasattr(batch, "to_numpy") else batch)
    return 1 if len(shape) == 1 else int(shape[0])


def is_single_batch(batches: Any) -> bool:
    """True for a 2-D array or DataFrame (cut into batches), false for an iterable of batches."""
    return getattr(batches, "ndim", None) == 2 and hasattr(batches, "shape")


def total_rows(batches: Any) -> int | None:
    """Rows in the whole stream when known in advance (an array, a list or a tuple), else ``None``."""
    if is_single_batch(batches):
        return int(batches.shape[0])
    if isinstance(batches, (list, tuple)):
        return sum(batch_rows(b) for b in batches)
    return None


def check_batch_size(batch_size: Any) -> int | None:
    """Validate ``batch_size``: ``None`` or a positive integer.

    Raises:
      ValueError: naming ``batch_size``.
    """
    if batch_size is None:
        return None
    return integer(batch_size, "batch_size", least=1, rule="a positive number of rows")


def cut_batches(batches: Any, batch_size: int) -> Iterable[tuple[Any, int]]:
    """``(batch, real_rows)`` pairs: array batches are host slices padded to one shape."""
    if not is_single_batch(batches):
        for batch in batches:
            yield batch, batch_rows(batch)
        return
    n = int(batches.shape[0])
    batch_size = min(batch_size, max(n, 1))
    frame = hasattr(batches, "iloc")
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        batch = batches.iloc[start:stop] if frame else batches[start:stop]
        if stop - start < batch_size and start > 0:  # pad the last batch: no new compilation
            names = column_names(batch)
            part = np.asarray(batch.to_numpy() if frame else (batch.toarray() if is_sparse(batch) else batch))
            pad = np.broadcast_to(part[:1], (batch_size - (stop - start),) + part.shape[1:])
            batch = Named(np.concatenate([part, pad]), names) if names else np.concatenate([part, pad])
        yield batch, stop - start


class Named:
    """A padded DataFrame batch: the array plus the column names (duck-typed like a DataFrame)."""

    def __init__(self, array: np.ndarray, columns: list[str]):
        self._array, self.columns = array, columns

    def to_numpy(self) -> np.ndarray:
        return self._array
