"""The observational maskers at scale: M = 30 features, 10^3 to 10^5 explained rows.

Every masker explains rows of a 30-feature Gaussian mixture through ``KernelExplainer`` (64
sampled coalitions, shared by the rows) at a budget that fits a 2-core CPU: 32 draws per
coalition for the Monte-Carlo maskers, at most 32 kept training rows for ``Empirical``, learned
maskers trained for a few epochs. Each (masker, rows) cell runs in its own subprocess (the
helpers of ``bench/scenarios/scaling.py``), so its memory is its own: the resident memory before
the call, the peak during it (the kernel's mark reset just before) and the process's peak. With
memory bounded by ``memory_budget`` the call's peak stays flat as rows grow, besides the inputs
and results (``[n, M]`` each); the time grows linearly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

TITLE = "Observational maskers at M = 30: time and peak memory for 10^3 .. 10^5 explained rows (KernelExplainer)"

M = 30
TRAIN_ROWS = 1000
COALITIONS = 64
DRAWS = 32
MASKERS = ("Gaussian", "GaussianCopula", "GaussianMixture", "Empirical", "Generative", "Surrogate")


def _build(name: str, train, model):
    import jaxshap

    m = jaxshap.maskers
    return {
        "Gaussian": lambda: m.Gaussian.fit(train, n_samples=DRAWS),
        "GaussianCopula": lambda: m.GaussianCopula(train, n_samples=DRAWS),
        "GaussianMixture": lambda: m.GaussianMixture(train, 3, key=0, n_samples=DRAWS),
        "Empirical": lambda: m.Empirical(train, max_samples=DRAWS),
        "Generative": lambda: m.Generative(train, key=0, hidden=(64, 64), epochs=3, n_samples=DRAWS),
        "Surrogate": lambda: m.Surrogate(model, train, key=0, hidden=(64, 64), epochs=3),
    }[name]()


def _worker(spec: dict) -> dict:
    """Build one masker and explain ``spec['rows']`` rows in this process; time and memory."""
    import jax
    import numpy as np

    import jaxshap
    from jaxshap._core._chunking import bucket_rows

    from ._conditional_truth import Distribution
    from .conditional import make_models
    from .scaling import _reset_peak, _status_mib

    dist = Distribution.make("mixture", M)
    rng = np.random.default_rng(0)
    train = dist.sample(rng, TRAIN_ROWS).astype(np.float32)
    X = dist.sample(rng, spec["rows"]).astype(np.float32)
    model, _ = make_models(M, train, 10, ("nonlinear",))["nonlinear"]
    t0 = time.perf_counter()
    masker = _build(spec["masker"], train, model)
    build_s = time.perf_counter() - t0
    ex = jaxshap.KernelExplainer(model, masker, n_coalitions=COALITIONS)
    largest = ex._plan(spec["rows"], exact=False)[0]
    warm = spec["rows"]  # the fewest rows whose call has the same capacity, so the same compiled program
    while warm > 1 and bucket_rows(warm // 2, largest)[1] == bucket_rows(spec["rows"], largest)[1]:
        warm //= 2
    t0 = time.perf_counter()
    jax.block_until_ready(ex(X[:warm], progress=False).values)  # compiles (and explains `warm` rows)
    compile_s = time.perf_counter() - t0
    before = _status_mib("VmRSS")
    reset = _reset_peak()
    t0 = time.perf_counter()
    expl = ex(X, progress=False)
    values = np.asarray(jax.block_until_ready(expl.values))
    seconds = time.perf_counter() - t0
    efficiency = float(np.abs(values.sum(1) + np.asarray(expl.base_values) - np.asarray(model(X))).max())
    return {"build_s": build_s, "compile_s": compile_s, "warm_rows": warm, "seconds": seconds, "rss_before_mib": before,
            "call_peak_mib": _status_mib("VmHWM") if reset else None, "peak_rss_mib": _status_mib("VmHWM"),
            "chunk": "{} x {}".format(*ex._plan(spec["rows"], exact=False)),
            "evals_per_row": ex._evals_per_row(), "efficiency_err": efficiency}


def _measure(spec: dict) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-m", "bench.scenarios.conditional_scale", json.dumps(spec)],
                         env=env, cwd=root, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"failed": out.stderr.strip().splitlines()[-1][:120] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict:
    sizes = (100, 1000) if quick else (1000, 10_000, 100_000)
    maskers = MASKERS[:2] if quick else MASKERS
    table, notes = [], []
    for name in maskers:
        cells = []
        for n in sizes:
            r = _measure({"masker": name, "rows": n})
            row = {"masker": name, "rows": n}
            if "failed" in r:
                table.append({**row, "failed": r["failed"]})
                continue
            row.update({
                "build s": r["build_s"], "first call s (rows)": f"{r['compile_s']:.1f} ({r['warm_rows']})",
                "s (warm)": r["seconds"],
                "ms / row": 1e3 * r["seconds"] / n, "model evals / row": r["evals_per_row"],
                "RSS before call MiB": r["rss_before_mib"], "peak RSS in call MiB": r["call_peak_mib"],
                "call peak - before MiB": (r["call_peak_mib"] or float("nan")) - (r["rss_before_mib"] or float("nan")),
                "process peak MiB": r["peak_rss_mib"], "X + results MiB": 2 * n * M * 4 / 2**20,
                "chunk (rows x coalitions)": r["chunk"], "efficiency err": r["efficiency_err"],
            })
            table.append(row)
            cells.append(row)
        if len(cells) == len(sizes):
            first, last = cells[0], cells[-1]
            notes.append(
                f"{name}: {last['rows'] // first['rows']}x the rows: {last['s (warm)'] / first['s (warm)']:.0f}x the time; "
                f"peak during the call {first['call peak - before MiB']:.0f} -> {last['call peak - before MiB']:.0f} MiB "
                f"above the memory before it (X and results grow by {last['X + results MiB'] - first['X + results MiB']:.1f} MiB)."
            )
    notes.append(f"M = {M}, {TRAIN_ROWS} training rows (a 3-component Gaussian mixture), nonlinear JAX model; "
                 f"KernelExplainer(n_coalitions={COALITIONS}) with {DRAWS} draws per coalition (Empirical: at most {DRAWS} "
                 "kept rows); default memory_budget. 2 shared CPU cores (loaded): times are indicative.")
    return {"title": TITLE, "tables": {"scale (M = 30)": table}, "notes": notes}


if __name__ == "__main__":
    print(json.dumps(_worker(json.loads(sys.argv[1]))))
