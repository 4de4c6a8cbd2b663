"""Turn ``python -m bench`` JSON results into the site's benchmarks page.

``render()`` (called by ``docs/hooks.py`` at build time) reads the newest results it finds:
the folder named by ``JAXSHAP_BENCH_RESULTS`` (CI points it at the quick run it just made),
else ``bench/results/`` (a local ``python -m bench`` run), else the committed snapshot in
``docs/bench_results/``. Every figure on the page comes from those files; each scenario says
whether it was a ``--quick`` run, when it ran and on what machine.

``python docs/gen_bench.py --snapshot DIR`` copies the JSON files of ``DIR`` into
``docs/bench_results/``, adding the run's date (the files' modification time, UTC).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "docs" / "bench_results"


def results_dir() -> Path:
    for candidate in (os.environ.get("JAXSHAP_BENCH_RESULTS"), ROOT / "bench" / "results", SNAPSHOT):
        if candidate and any(Path(candidate).glob("*.json")):
            return Path(candidate)
    return SNAPSHOT


def _date(path: Path, payload: dict) -> str:
    if "date" in payload:
        return payload["date"]
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def _table(rows: list[dict]) -> list[str]:
    if not rows:
        return ["(no rows)"]
    keys = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(_cell(k) for k in keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_cell(row.get(k, "")) for k in keys) + " |" for row in rows]
    return lines


def _machine(env: dict) -> str:
    devices = ", ".join(env.get("devices", [])) or "?"
    return f"JAX {env.get('jax', '?')}, backend {env.get('backend', '?')} ({devices}), {env.get('cpu_count', '?')} CPU cores"


def render() -> str:
    folder = results_dir()
    files = sorted(folder.glob("*.json"))
    out = ["# Benchmarks", "",
           "This page is generated at build time by `docs/gen_bench.py` from the JSON that "
           "`python -m bench` writes; no figure on it is typed by hand. Reproduce them with:", "",
           "```bash", 'python -m pip install -e ".[bench]" && python -m bench [SCENARIO ...] [--quick]', "```", "",
           "Each scenario runs jaxshap and its reference (shap; shapiq for KernelSHAP accuracy) in one "
           "process on identical inputs, after a warm-up call that compiles jaxshap's program (reported "
           "separately). The *floor* is the bare model evaluated on the same rows in jitted batches.", ""]
    if not files:
        return "\n".join(out + ["No results found: run `python -m bench --quick` and build again."])
    payloads = [(f, json.loads(f.read_text())) for f in files]
    if any(p.get("quick") for _, p in payloads):
        out += ['!!! warning "Quick runs"',
                "    Scenarios marked *quick* ran with `--quick`: small sizes that check every scenario "
                "works and gives sane numbers. Their timings are dominated by overheads and are not "
                "the headline figures; the README quotes full runs.", ""]
    for path, payload in payloads:
        mode = "quick" if payload.get("quick") else "full"
        out += [f"## `{payload.get('scenario', path.stem)}`: {payload.get('title', '')}", "",
                f"*{mode} run, {_date(path, payload)}; {_machine(payload.get('environment', {}))}.*", ""]
        for name, rows in payload.get("tables", {}).items():
            out += [f"**{name}**", ""] + _table(rows) + [""]
        out += [f"- {note}" for note in payload.get("notes", [])]
        out += [f"- check {'passed' if ok else 'FAILED'}: {check}" for check, ok in payload.get("checks", {}).items()]
        out += [""]
    return "\n".join(out)


def snapshot(source: Path) -> None:
    SNAPSHOT.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.json")):
        payload = json.loads(path.read_text())
        payload.setdefault("date", _date(path, payload))
        (SNAPSHOT / path.name).write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, help="copy these bench results into docs/bench_results/")
    args = parser.parse_args()
    if args.snapshot:
        snapshot(args.snapshot)
    else:
        print(render())
