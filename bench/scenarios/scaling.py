"""Throughput and peak memory against the number of rows (ExactExplainer, M=10, MLP(64)).

Each size runs in its own subprocess, so its peak resident memory (``ru_maxrss``) is its own.
The worker compiles first (timed apart: ``compile s``), then explains all rows in one call and
reports the warm time, the resident memory before the call, the peak during the call (Linux:
the kernel's peak mark is reset with ``/proc/self/clear_refs`` just before it) and the whole
process's peak (``VmHWM``, imports and compilation included; ``ru_maxrss`` where ``/proc`` is
missing, which on Linux also counts the parent's memory before ``exec``). The floor is
the bare model's best throughput in jitted batches (``bench.harness.model_floor``), measured
once and scaled to each size's number of model evaluations.

With ``jaxshap.KernelExplainer`` available (512 sampled coalitions), it is measured the same way.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

TITLE = "Scaling with rows: rows/s, peak memory and the model floor (M=10, MLP(64), 100 background rows)"

M, HIDDEN = 10, 64
KERNEL_COALITIONS = 512  # below 2**10 - 2, so KernelSHAP samples rather than enumerates
ROWS_ACCELERATOR = (1000, 10_000, 100_000)
ROWS_CPU = (1000, 4000, 16_000)
"""A full run's row counts. On a 2-core CPU, 100,000 rows are 10^10 model evaluations for Exact,
about 13 minutes at the model's floor, so a CPU run stops at 16,000 (16x the first size)."""


def _rss_mib() -> float:
    """Peak resident memory of this process so far (``ru_maxrss``; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _status_mib(field: str) -> float | None:
    """``VmRSS`` (now) or ``VmHWM`` (peak since the last reset) from ``/proc/self/status``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs``), so the call's own peak is seen."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _worker(spec: dict) -> dict:
    """Explain ``spec['rows']`` rows in this process and report time and memory."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxshap
    from jaxshap._core._chunking import bucket_rows

    from ._common import mlp_problem

    n, n_bg = spec["rows"], spec["background"]
    model, _, background, X = mlp_problem(M, n_bg, n, hidden=HIDDEN)
    if spec["explainer"] == "exact":
        ex = jaxshap.ExactExplainer(model, background)
    else:
        ex = jaxshap.KernelExplainer(model, background, n_coalitions=KERNEL_COALITIONS)
    X = jnp.asarray(X)
    key = jax.random.key(0)
    largest, coalitions = ex._plan(n, exact=False)
    rows, call_rows = bucket_rows(n, largest)
    t0 = time.perf_counter()
    jax.block_until_ready(ex(X[: min(n, call_rows)], key=key, progress=False).values)  # compiles the program
    compile_s = time.perf_counter() - t0  # (and explains up to one call's rows)
    setup_peak = _status_mib("VmHWM")
    before = _status_mib("VmRSS")
    reset = _reset_peak()
    t0 = time.perf_counter()
    expl = ex(X, key=key, progress=False)
    values = np.asarray(jax.block_until_ready(expl.values))
    seconds = time.perf_counter() - t0
    call_peak = _status_mib("VmHWM") if reset else None
    efficiency = float(np.abs(values.sum(1) + np.asarray(expl.base_values) - np.asarray(model(X))).max())
    return {
        "seconds": seconds,
        "compile_s": compile_s,
        "rss_before_mib": before,
        "call_peak_mib": call_peak,
        # the process's own peak (VmHWM, imports and compilation included); ru_maxrss also counts
        # the parent's peak before exec, so it is only the fallback
        "peak_rss_mib": max(setup_peak, call_peak) if setup_peak and call_peak else _rss_mib(),
        "rows_per_chunk": rows,
        "coalitions_per_chunk": coalitions,
        "coalitions_per_row": ex._coalitions_per_row(),
        "evals_per_coalition": ex.masker.evals_per_coalition,
        "efficiency_err": efficiency,
    }


def _measure(spec: dict) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-m", "bench.scenarios.scaling", json.dumps(spec)],
        env=env, cwd=root, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"scaling worker {spec} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict:
    import jaxshap

    from ..harness import mlp, mlp_params, model_floor

    import jax
    from functools import partial

    sizes = (100, 1000) if quick else ROWS_CPU if jax.default_backend() == "cpu" else ROWS_ACCELERATOR
    n_bg = 20 if quick else 100
    kinds = ["exact"] + (["kernel"] if hasattr(jaxshap, "KernelExplainer") else [])

    measured = {(kind, n): _measure({"explainer": kind, "rows": n, "background": n_bg}) for kind in kinds for n in sizes}

    # the floor last: its large batches would raise this process's memory, which workers inherit
    model = partial(mlp, mlp_params(jax.random.key(0), M, HIDDEN))
    probe = 2**20 if quick else 2**24
    floor_rate = probe / model_floor(model, probe, M)  # model evaluations per second, at best

    tables, notes = {}, []
    for kind in kinds:
        rows = []
        for n in sizes:
            r = measured[(kind, n)]
            evals = n * r["coalitions_per_row"] * r["evals_per_coalition"]
            floor = evals / floor_rate
            rows.append({
                "rows": n,
                "model evals": evals,
                "s (warm)": r["seconds"],
                "rows/s": n / r["seconds"],
                "floor s": floor,
                "s / floor": r["seconds"] / floor,
                "compile s": r["compile_s"],
                "RSS before call MiB": r["rss_before_mib"],
                "peak RSS in call MiB": r["call_peak_mib"],
                "call peak - before MiB": (r["call_peak_mib"] or float("nan")) - (r["rss_before_mib"] or float("nan")),
                "process peak RSS MiB": r["peak_rss_mib"],
                "results MiB": n * M * 4 / 2**20,
                "chunk (rows x coalitions)": f"{r['rows_per_chunk']} x {r['coalitions_per_chunk']}",
                "efficiency err": r["efficiency_err"],
            })
        tables[kind] = rows
        first, last = rows[0], rows[-1]
        notes.append(
            f"{kind}: {last['rows'] // first['rows']}x more rows: throughput x{last['rows/s'] / first['rows/s']:.2f}, "
            f"peak RSS during the call {first['peak RSS in call MiB']:.0f} -> {last['peak RSS in call MiB']:.0f} MiB, "
            f"whole process {first['process peak RSS MiB']:.0f} -> {last['process peak RSS MiB']:.0f} MiB "
            f"(results alone grow by {last['results MiB'] - first['results MiB']:.1f} MiB)."
        )
    notes.append(f"Model floor: {floor_rate:.3g} model evaluations/s (best jitted batch size).")
    if "kernel" not in kinds:
        notes.append("KernelExplainer is not in this tree: only ExactExplainer is measured.")
    return {"title": TITLE, "tables": tables, "notes": notes}


if __name__ == "__main__":
    print(json.dumps(_worker(json.loads(sys.argv[1]))))
