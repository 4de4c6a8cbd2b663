"""A small text progress bar for long explanations (no third-party dependency).

The bar counts explained rows and shows the rate and the time left::

    Explaining   42% |########            |  4200/10000 rows  1.3e+03 rows/s  3.2s elapsed  4.5s left

It is drawn on ``sys.stderr`` with carriage returns, redrawn at most a few times a second, and
only after ``delay`` seconds, so short runs print nothing. By default it is shown only when
``sys.stderr`` is an interactive terminal and never while JAX is tracing (inside ``jax.jit``,
``jax.grad`` or ``jax.vmap`` nothing can be waited for, so there is nothing to report).
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any


def _trace_state_clean() -> bool:
    """True outside every JAX transformation (best effort: JAX keeps this query private)."""
    try:
        from jax._src import core

        return bool(core.trace_state_clean())
    except Exception:  # pragma: no cover - depends on JAX internals
        return True


def wants_progress(progress: Any) -> bool:
    """Resolve the ``progress`` argument: ``None`` means "when stderr is a terminal".

    Raises:
      TypeError: when ``progress`` is neither ``None`` nor a bool.
    """
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"`progress` must be True, False or None (automatic); got {progress!r}.")
    if not _trace_state_clean():
        return False
    if progress is None:
        stream = sys.stderr
        return bool(getattr(stream, "isatty", lambda: False)())
    return progress


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class ProgressBar:
    """Rows done, rate and time left, redrawn in place on a text stream.

    Args:
      total: number of rows, or ``None`` when unknown (a stream): then no percentage or time left.
      desc: label in front of the bar.
      stream: where to draw; ``sys.stderr`` by default.
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
        self.stream = sys.stderr if stream is None else stream
        self.delay = delay
        self.interval = interval
        self.width = width
        self.done = 0
        self.start = time.perf_counter()
        self._last_draw = None

    def update(self, rows: int) -> None:
        """Count ``rows`` more rows as explained and redraw when due."""
        self.done += int(rows)
        now = time.perf_counter()
        if now - self.start < self.delay:
            return
        if self._last_draw is not None and now - self._last_draw < self.interval:
            return
        self._draw(now)

    def close(self) -> None:
        """Draw the final state (if anything was drawn, or the run outlasted ``delay``) and end the line."""
        now = time.perf_counter()
        if self._last_draw is not None or now - self.start >= self.delay:
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
