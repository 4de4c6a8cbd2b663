"""Progress bars for long explanations: tqdm's when it is installed, else a small text bar.

The bar counts explained rows and shows the rate and the time left::

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
from typing import IO, Any

SHAP_DELAY = 10.0
"""Seconds before the default bar appears: shap's explainers start their tqdm bar after 10 s."""

LONG_RUN_EVALS = 2**25
"""Model evaluations from which a call shows the default bar wherever its output goes (about 8
host-level blocks of :data:`jaxshap._core._chunking.BLOCK_EVALS`)."""


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
