"""Timing helpers shared by the benchmark scenarios.

Every scenario runs jaxshap and its reference in one process on identical inputs. jaxshap is
timed after a warm-up call (its compile time is reported separately); the *floor* is the bare
model evaluated on the same number of rows in large jitted batches, the time no model-agnostic
explainer can beat on a CPU, where model evaluations dominate.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np


def block(x: Any) -> Any:
    """Wait for every JAX array in ``x``."""
    return jax.block_until_ready(x)


def timed(fn: Callable[[], Any], repeat: int = 3, clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """Return ``(first_call_s, best_warm_s)`` of ``fn`` (the first call includes compilation).

    ``clock`` is wall time by default; ``time.process_time`` gives the process's CPU seconds,
    which other processes' load on a shared machine disturbs far less.
    """
    first, best = timed_together({"fn": fn}, repeat, clock)
    return first["fn"], best["fn"]


def timed_together(fns: dict[str, Callable[[], Any]], repeat: int = 5,
                   clock: Callable[[], float] = time.perf_counter) -> tuple[dict[str, float], dict[str, float]]:
    """``(first_call_s, best_warm_s)`` of each of ``fns`` (as :func:`timed`), the warm calls taken
    in turn (one of each per round, ``repeat`` rounds), so that a slow spell of a shared machine
    falls on every one of them alike, where back-to-back repeats of one and then the next would
    put it on one alone."""
    first, best = {}, {k: float("inf") for k in fns}
    for k, fn in fns.items():
        t0 = clock()
        block(fn())
        first[k] = clock() - t0
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = clock()
            block(fn())
            best[k] = min(best[k], clock() - t0)
    return first, best


def time_host(fn: Callable[[], Any], repeat: int = 1) -> float:
    """Best wall time of a host (non-JAX) call such as a shap explainer."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def model_floor(
    model: Callable, n_rows: int, n_features: int, batches: tuple[int, ...] = (1 << 12, 1 << 14, 1 << 16, 1 << 18),
    repeat: int = 3, clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Seconds to evaluate the bare ``model`` on ``n_rows`` rows in jitted batches.

    The rows are generated on the device beforehand; only the model's work is timed. Each batch
    size in ``batches`` is tried and the fastest counts (small batches stay in cache on a CPU,
    large ones fill an accelerator), so the floor is the model's best throughput. ``clock`` as
    in :func:`timed`.
    """
    best = float("inf")
    for batch in batches:
        batch = min(batch, n_rows)
        n_batches = -(-n_rows // batch)
        xs = jax.random.normal(jax.random.key(0), (n_batches, batch, n_features), jnp.float32)
        run = jax.jit(lambda xs: jax.lax.map(lambda x: jnp.sum(model(x)), xs))
        _, seconds = timed(lambda: run(xs), repeat, clock)
        best = min(best, seconds * n_rows / (n_batches * batch))
    return best


def speed_columns(warm: float, first: float, reference_s: float, floor: float, reference: str = "shap") -> dict:
    """The timing columns every side-by-side scenario reports, in one order.

    Args:
      warm: jaxshap's best warm time (compiled), seconds.
      first: jaxshap's first call, compilation included, seconds.
      reference_s: the reference implementation's time on the same work, seconds.
      floor: the bare model on the same number of evaluations (:func:`model_floor`), seconds.
      reference: the reference's name, used in the column titles.
    """
    return {
        "jaxshap s (warm)": warm,
        "jaxshap compile+first s": first,
        f"{reference} s": reference_s,
        f"{reference} / jaxshap": reference_s / warm,
        "floor s": floor,
        "jaxshap / floor": warm / floor,
    }


def mlp_params(key: jax.Array, n_features: int, hidden: int = 64, n_outputs: int | None = None) -> dict:
    """Random two-layer tanh MLP parameters (the benchmarks' standard non-linear model)."""
    k1, k2 = jax.random.split(key)
    out = () if n_outputs is None else (n_outputs,)
    return {
        "w1": jax.random.normal(k1, (n_features, hidden)) / np.sqrt(n_features),
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k2, (hidden,) + out) / np.sqrt(hidden),
    }


def mlp(params: dict, x: jax.Array) -> jax.Array:
    """``tanh(x W1 + b1) W2``: ``[n, M] -> [n]`` (or ``[n, K]``).

    The products run at full float32 precision on every backend (GPUs otherwise default to
    TF32 for float32 matrix products), so the model is the same function as its NumPy twin that
    shap explains, and the efficiency and agreement checks compare like with like.
    """
    dot = lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
    return dot(jnp.tanh(dot(x, params["w1"]) + params["b1"]), params["w2"])


def markdown_table(rows: list[dict]) -> str:
    """Render a list of flat dicts (same keys) as a markdown table."""
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def environment() -> dict:
    """What the figures were measured on."""
    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
    }


def save_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        json.dump(payload, fh, indent=2, default=float)
