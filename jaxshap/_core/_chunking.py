"""Cutting work into pieces: chunks under a memory budget inside a program, batches of a stream of
rows on the host, and the progress bar over the blocks of a long run.

A batch of work is cut along its leading axis into chunks that are mapped sequentially with
:func:`jax.lax.map` (a scan), so the working set grows with the chunk and not with the batch;
each chunk is vectorised, so the model sees one large batch at a time.

A stream of rows (arrays, memory-mapped or not, DataFrames, iterables) is cut into batches
(:func:`cut_batches`): an array into host slices of ``batch_size`` rows, the last one padded to
the same shape (with copies of its first row), so a whole stream compiles one program. Any other
iterable yields its own batches, each counted by its rows.

A long run is explained in host-level blocks (:func:`plan_blocks`), and a progress bar
(:class:`ProgressBar`) advances as each block finishes: tqdm's when it is installed, else a small
text bar. It counts explained rows and shows the rate and the time left::

    Explaining   42% |########            |  4200/10000 rows  1.3e+03 rows/s  3.2s elapsed  4.5s left

It appears only after ``delay`` seconds, so short runs print nothing, and never while JAX is
tracing (inside ``jax.jit``, ``jax.grad`` or ``jax.vmap`` nothing can be waited for). On the
default stream (``sys.stderr``) it is ``tqdm.auto``'s bar when tqdm is installed (a widget in a
notebook, as shap's), else the text bar above, redrawn in place at most a few times a second.

By default (``progress=None``) a call shows a bar as shap's explainers do: after
:data:`SHAP_DELAY` seconds, in a terminal, a notebook or piped output alike, for a run of at
least :data:`LONG_RUN_EVALS` model evaluations (a bar makes the rows run in host-level blocks,
which a short run should not pay for), and in a terminal for any run.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from ._inputs import column_names, is_sparse
from ._validate import integer


CPU_CHUNK_BYTES = 8 * 2**20
"""Working set of a chunk on a CPU backend: chunks that stay in cache evaluate fastest there.

Larger chunks fall out of cache and evaluate slower on a CPU (``python -m bench exact`` shows the
floor); on accelerators larger chunks are faster, so there only the budget limits them.
"""


def chunk_bytes(memory_budget: int) -> int:
    """The working set to plan one chunk for: the budget, capped at :data:`CPU_CHUNK_BYTES` on CPU."""
    if jax.default_backend() == "cpu":
        return min(memory_budget, CPU_CHUNK_BYTES)
    return memory_budget


def map_chunks(fn: Callable[[Any], Any], xs: Any, chunk: int, n_valid: Any = None) -> Any:
    """Apply a batched ``fn`` to ``xs`` in chunks of ``chunk`` along the leading axis.

    ``fn`` takes and returns pytrees whose leaves share a leading batch axis. The batch is
    padded (with copies of its first element, so padding never produces NaN) to a multiple
    of ``chunk``, mapped chunk by chunk, and the padding is dropped from the result.

    The chunk body is rematerialised (:func:`jax.checkpoint`): under ``jax.grad`` only each
    chunk's inputs are kept for the backward pass and its activations are recomputed, so the
    gradient's memory is bounded by one chunk too (without it the scan would keep every chunk's
    residuals). The forward pass is unchanged.

    Args:
      fn: batched function of a pytree with leading axis ``c`` to a pytree with leading axis ``c``.
      xs: pytree of arrays with a common leading axis ``n``.
      chunk: static chunk size (Python int, at least 1).
      n_valid: optional (traced) number of leading items that matter; chunks that start at or
        beyond it are skipped (:func:`jax.lax.cond`) and return zeros. This lets one compiled
        program serve every batch size up to ``n``.
    """
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    if chunk >= n:
        return fn(xs)
    n_chunks = -(-n // chunk)
    pad = n_chunks * chunk - n

    def split(a):
        if pad:
            a = jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad,) + a.shape[1:])], axis=0)
        return a.reshape((n_chunks, chunk) + a.shape[1:])

    body = jax.checkpoint(fn)
    chunks = jax.tree_util.tree_map(split, xs)
    if n_valid is None:
        out = jax.lax.map(body, chunks)
    else:
        first = jax.tree_util.tree_map(lambda a: a[0], chunks)
        # traced once: the shapes come from the same trace the branch below reuses (jit's cache)
        fn = jax.jit(fn)
        shapes = jax.eval_shape(fn, first)
        zeros = lambda _: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        live = (jnp.asarray(n_valid) + chunk - 1) // chunk

        # the branch is chosen inside the rematerialised body (not around it), which also keeps
        # older JAX versions' partial evaluation of `cond` out of the way of remat's residuals
        guarded = jax.checkpoint(lambda live_chunk, c: jax.lax.cond(live_chunk, fn, zeros, c))

        def step(carry, args):
            i, c = args
            return carry, guarded(i < live, c)

        _, out = jax.lax.scan(step, None, (jnp.arange(n_chunks), chunks))
    return jax.tree_util.tree_map(lambda a: a.reshape((n_chunks * chunk,) + a.shape[2:])[:n], out)


def plan_chunks(
    n_rows: int,
    coalitions_per_row: int,
    evals_per_coalition: int,
    bytes_per_eval: int,
    memory_budget: int,
    working_set_per_row: int = 0,
    bytes_per_coalition: int = 0,
    solve_set_per_row: int = 0,
) -> tuple[int, int]:
    """Choose ``(rows_per_chunk, coalitions_per_chunk)`` so one chunk fits the budget.

    One chunk evaluates the model on ``rows * coalitions * evals_per_coalition`` inputs and
    holds each row's estimator working set (``working_set_per_row`` bytes: its masks and values,
    and whatever else is alive beside the evaluations, which does not shrink with coalition
    chunks) and, per coalition, the value
    function's own working memory besides the model (``bytes_per_coalition``: a learned masker's
    network activations). What the estimator holds only once a row's evaluations are done
    (``solve_set_per_row``: its solve's temporaries) is counted against the budget alongside
    the working set, not alongside the evaluations. Whole rows are preferred (every coalition of
    a row in one chunk); when a single row does not fit, rows go one at a time and their
    coalitions are chunked instead. Chunks are then balanced (the fewest chunks that fit, made
    equal), so padding wastes less than one row or coalition per chunk. On a CPU the budget of
    the evaluations is further capped by :func:`chunk_bytes`.
    """
    rows, coalitions = chunk_capacity(
        coalitions_per_row, evals_per_coalition, bytes_per_eval, memory_budget, working_set_per_row, bytes_per_coalition,
        solve_set_per_row,
    )
    if coalitions < coalitions_per_row:
        return 1, coalitions
    return balanced(n_rows, rows), coalitions_per_row


def chunk_capacity(
    coalitions_per_row: int,
    evals_per_coalition: int,
    bytes_per_eval: int,
    memory_budget: int,
    working_set_per_row: int = 0,
    bytes_per_coalition: int = 0,
    solve_set_per_row: int = 0,
) -> tuple[int, int]:
    """The largest ``(rows_per_chunk, coalitions_per_chunk)`` that fits the budget, whatever ``n``.

    A row's evaluations and its solve are alive one after the other, so a chunk needs room for
    the larger of the two besides the working set: ``working + evaluations`` within
    :func:`chunk_bytes` (the cache-sized chunk on a CPU, where the model runs fastest) and
    ``working + solve`` within ``memory_budget`` itself.
    """
    evals_budget = chunk_bytes(memory_budget)
    working, solve = max(int(working_set_per_row), 0), max(int(solve_set_per_row), 0)
    per_coalition = max(evals_per_coalition * bytes_per_eval + max(int(bytes_per_coalition), 0), 1)
    per_row = per_coalition * coalitions_per_row + working
    if per_row <= evals_budget:
        rows = evals_budget // per_row
        if solve:
            rows = min(rows, memory_budget // (working + solve))
        return max(1, rows), coalitions_per_row
    room = max(evals_budget - working, per_coalition)
    return 1, balanced(coalitions_per_row, room // per_coalition)


MIN_CALL_ROWS = 256
"""Row capacity of the smallest compiled call. Calls on fewer rows are padded up to it and the
chunks beyond the real rows are skipped (a ``lax.cond`` each, about a microsecond), so every
call on up to this many rows (or chunks, when a chunk is one row) runs one compiled program."""

MAX_CALL_CHUNKS = 4096
"""Row capacity of the largest compiled call, in chunks; larger calls run it block by block."""

CHUNK_LEVELS = 8
"""Chunks of fewer rows than the planned largest are that size divided by a power of this."""


def bucket_rows(n_rows: int, rows_per_chunk: int, least_rows: int = MIN_CALL_ROWS) -> tuple[int, int]:
    """``(rows_per_chunk, rows per compiled call)`` for ``n_rows`` concrete rows.

    Programs are compiled for a few shapes only. Chunks hold ``rows_per_chunk`` rows (the
    largest that fits the budget), or, when all the rows fit in a smaller chunk, the largest
    divided by the smallest power of :data:`CHUNK_LEVELS` that still holds them all, so a
    single row does not pay for a whole accelerator-sized chunk. A call holds at least
    ``least_rows`` rows, in a power of four times the least number of chunks, and at most
    :data:`MAX_CALL_CHUNKS` chunks (larger calls go in blocks of that size). So a new number of
    rows rarely compiles a new program, and the padding costs the skipped chunks' branches,
    never their model evaluations.
    """
    n_rows = max(int(n_rows), 1)
    rows = max(int(rows_per_chunk), 1)
    while rows // CHUNK_LEVELS >= n_rows:
        rows //= CHUNK_LEVELS
    need = -(-n_rows // rows)
    chunks = max(1, -(-int(least_rows) // rows))
    while chunks < need and chunks < MAX_CALL_CHUNKS:
        chunks *= 4
    return rows, rows * min(chunks, MAX_CALL_CHUNKS)


def balanced(n: int, largest: int) -> int:
    """The chunk size that covers ``n`` items in the fewest chunks of at most ``largest``, evenly."""
    largest = max(1, min(n, largest))
    n_chunks = -(-n // largest)
    return -(-n // n_chunks)


BLOCK_EVALS = 2**22
"""Least model evaluations per host-level block (a few tens of ms of CPU work), so the Python
loop that runs blocks (for a progress bar or a stream) costs little next to the blocks."""

TARGET_BLOCKS = 100
"""Blocks a long run is cut into when they are larger than :data:`BLOCK_EVALS` (progress steps)."""


def plan_blocks(n_rows: int, rows_per_chunk: int, evals_per_row: int) -> int:
    """Rows per host-level block: whole chunks, about ``n_rows / 100`` rows but at least
    :data:`BLOCK_EVALS` model evaluations, and at most ``n_rows``.

    Blocks are what a progress bar counts and what a stream yields; each is one call of the same
    compiled program (chunked inside under the memory budget), so the block size changes how
    often the host steps in, never the memory a chunk uses.
    """
    rows_per_chunk = max(1, rows_per_chunk)
    least = -(-BLOCK_EVALS // max(evals_per_row, 1))
    rows = max(least, -(-n_rows // TARGET_BLOCKS))
    rows = -(-rows // rows_per_chunk) * rows_per_chunk
    return max(1, min(rows, n_rows))


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


SHAP_DELAY = 10.0
"""Seconds before the default bar appears: shap's explainers start their tqdm bar after 10 s."""

LONG_RUN_EVALS = 2**25
"""Model evaluations from which a call shows the default bar wherever its output goes (about 8
host-level blocks of :data:`BLOCK_EVALS`)."""


def _trace_state_clean() -> bool:
    """True outside every JAX transformation (best effort: JAX keeps this query private)."""
    try:
        from jax._src import core

        return bool(core.trace_state_clean())
    except Exception:  # pragma: no cover - depends on JAX internals
        return True


def wants_progress(progress: Any, evals: int | None = None) -> bool:
    """Resolve the ``progress`` argument of a call of ``evals`` model evaluations (``None``:
    unknown): ``None`` means a run of at least :data:`LONG_RUN_EVALS`, or ``sys.stderr`` being a
    terminal.

    Raises:
      TypeError: when ``progress`` is neither ``None`` nor a bool.
    """
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"`progress` must be True, False or None (automatic); got {progress!r}.")
    if not _trace_state_clean():
        return False
    if progress is None:
        if evals is not None and evals >= LONG_RUN_EVALS:
            return True
        stream = sys.stderr
        return bool(getattr(stream, "isatty", lambda: False)())
    return progress


def progress_bar(progress: Any, total: int | None, evals: int | None = None) -> "ProgressBar | None":
    """The bar of a call (see :func:`wants_progress`), or ``None``: shown after 1 s when asked
    for (``progress=True``), after :data:`SHAP_DELAY` by default."""
    if not wants_progress(progress, evals):
        return None
    return ProgressBar(total, delay=1.0 if progress else SHAP_DELAY)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class ProgressBar:
    """Rows done, rate and time left: tqdm's bar on ``sys.stderr`` when tqdm is installed, else
    redrawn in place on a text stream.

    Args:
      total: number of rows, or ``None`` when unknown (a stream): then no percentage or time left.
      desc: label in front of the bar.
      stream: where to draw the text bar (never tqdm's); ``sys.stderr`` (tqdm's when installed) by default.
      delay: seconds before the first draw (short runs stay silent).
      interval: least seconds between redraws.
    """

    def __init__(
        self,
        total: int | None,
        desc: str = "Explaining",
        stream: IO[str] | None = None,
        delay: float = 1.0,
        interval: float = 0.2,
        width: int = 20,
    ):
        self.total = total
        self.desc = desc
        self.own_stream = stream is not None
        self.stream = sys.stderr if stream is None else stream
        self.delay = delay
        self.interval = interval
        self.width = width
        self.done = 0
        self.start = time.perf_counter()
        self._wall_start = time.time()
        self._last_draw = None
        self._tqdm = None

    def _open_tqdm(self) -> bool:
        """On the default stream, open tqdm's bar (``tqdm.auto``) at the first draw, counting
        from this bar's start; ``False`` when tqdm is not installed or a stream was given."""
        if self.own_stream:
            return False
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return False
        self._tqdm = tqdm(total=self.total, initial=self.done, desc=self.desc, unit="rows")
        self._tqdm.start_t = self._wall_start
        self._tqdm.refresh()
        return True

    def update(self, rows: int) -> None:
        """Count ``rows`` more rows as explained and redraw when due."""
        self.done += int(rows)
        if self._tqdm is not None:
            self._tqdm.update(int(rows))
            return
        now = time.perf_counter()
        if now - self.start < self.delay:
            return
        if self._last_draw is not None and now - self._last_draw < self.interval:
            return
        if self._last_draw is None and self._open_tqdm():
            return
        self._draw(now)

    def close(self) -> None:
        """Draw the final state (if anything was drawn, or the run outlasted ``delay``) and end the line."""
        now = time.perf_counter()
        if self._tqdm is None and self._last_draw is None and now - self.start >= self.delay:
            self._open_tqdm()
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._last_draw is not None or now - self.start >= self.delay:
            self._draw(now)
            self.stream.write("\n")
            self.stream.flush()

    def line(self, now: float | None = None) -> str:
        """The text of the bar at time ``now``."""
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        parts = [self.desc]
        if self.total:
            fraction = min(self.done / self.total, 1.0)
            filled = int(round(fraction * self.width))
            parts.append(f"{100 * fraction:3.0f}% |{'#' * filled}{' ' * (self.width - filled)}|")
            parts.append(f"{self.done}/{self.total} rows")
        else:
            parts.append(f"{self.done} rows")
        parts.append(f"{rate:.3g} rows/s")
        parts.append(f"{_duration(elapsed)} elapsed")
        if self.total and rate > 0:
            parts.append(f"{_duration(max(self.total - self.done, 0) / rate)} left")
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        self._last_draw = now
        self.stream.write("\r" + self.line(now))
        self.stream.flush()

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
