"""Turn ``python -m bench`` JSON results into the site's benchmarks page.

``render()`` (called by ``docs/hooks.py`` at build time) reads the committed full runs in
``docs/bench_results/`` (``JAXSHAP_BENCH_RESULTS`` names another folder, to preview a local
run). Every figure on the page comes from those files; each scenario says when it ran and on
what machine, and its ratio columns (speed-ups, error ratios) are also drawn as bar charts on a
log scale; accuracy tables with a ``budget`` column are also drawn as squared error against
budget, one line per method. ``--quick`` runs (CI's check that every scenario runs) are never shown: a scenario
whose file is a quick run is listed as not yet run in full.

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
    preview = os.environ.get("JAXSHAP_BENCH_RESULTS")
    return Path(preview) if preview else SNAPSHOT


# ratio columns drawn as charts: (a test on the lower-cased column name, whether higher is better)
_RATIOS = (
    (lambda k: "speed-up" in k or k.startswith(("vs ", "shap / jaxshap", "shapiq / jaxshap", "xgboost / jaxshap",
                                                 "ref / jaxshap", "shap / default", "best other / default",
                                                 "shapiq mse / jaxshap", "shap / jaxshap cached")), True),
    (lambda k: k.startswith(("jaxshap / shap", "jaxshap / floor", "warm / floor", "s / floor")), False),
)


def _ratio_columns(rows: list[dict]) -> list[tuple[str, bool]]:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    out = []
    for key in keys:
        for test, higher in _RATIOS:
            values = [_number(row.get(key)) for row in rows]
            if test(key.lower()) and any(v is not None and v > 0 for v in values):
                out.append((key, higher))
                break
    return out


def _number(value) -> float | None:
    try:
        return float(str(value).rstrip("x"))
    except (TypeError, ValueError):
        return None


def _chart(rows: list[dict], key: str, higher_better: bool) -> str:
    """An inline SVG of horizontal bars on a log scale, one per row, with a line at 1x."""
    import math

    keys = [k for k in rows[0] if k != key]
    labelled = [(" · ".join(_cell(row.get(k, "")) for k in keys[:2]), _number(row.get(key))) for row in rows]
    labelled = [(label, v) for label, v in labelled if v is not None and v > 0]
    if not labelled:
        return ""
    lo = min(0.5, min(v for _, v in labelled) / 1.5)
    hi = max(2.0, max(v for _, v in labelled) * 1.5)
    left, width, bar, gap = 230, 380, 16, 6
    x = lambda v: left + width * (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))  # noqa: E731
    height = 28 + len(labelled) * (bar + gap)
    note = "higher is better" if higher_better else "lower is better"
    parts = [f'<svg class="bench-chart" role="img" viewBox="0 0 {left + width + 70} {height}" '
             f'width="{left + width + 70}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
             f'<title>{key} ({note})</title>',
             f'<text x="{left}" y="12" font-size="11">{key} ({note}, log scale)</text>']
    for i, (label, v) in enumerate(labelled):
        y = 20 + i * (bar + gap)
        good = (v >= 1) == higher_better
        colour = "#2e7d32" if good else "#c62828"
        parts.append(f'<text x="{left - 6}" y="{y + bar - 4}" font-size="11" text-anchor="end">{label[:40]}</text>')
        parts.append(f'<rect x="{min(x(1), x(v)):.1f}" y="{y}" width="{abs(x(v) - x(1)):.1f}" height="{bar}" fill="{colour}"/>')
        parts.append(f'<text x="{max(x(1), x(v)) + 4:.1f}" y="{y + bar - 4}" font-size="11">{v:.3g}x</text>')
    parts.append(f'<line x1="{x(1):.1f}" x2="{x(1):.1f}" y1="16" y2="{height}" stroke="#555" stroke-dasharray="3,2"/>')
    parts.append("</svg>")
    return "".join(parts)


_SERIES_COLOURS = ("#1b5e20", "#1565c0", "#6a1b9a", "#c62828", "#ef6c00", "#00838f", "#5d4037", "#ad1457",
                   "#558b2f", "#283593", "#9e9d24", "#4e342e")


def _budget_groups(rows: list[dict]) -> dict[tuple, list[dict]]:
    """Rows of an accuracy table with a ``budget`` column and ``mse ...`` columns, by their other keys."""
    if not rows or "budget" not in rows[0] or not any(k.startswith("mse ") for k in rows[0]):
        return {}
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        label = tuple((k, row[k]) for k in row if k in ("model", "M", "masker", "game"))
        groups.setdefault(label, []).append(row)
    return {label: group for label, group in groups.items() if len({r["budget"] for r in group}) > 1}


def _budget_chart(title: str, rows: list[dict]) -> str:
    """An inline SVG of squared error against budget (log-log), one line per method."""
    import math

    methods = [k for k in rows[0] if k.startswith("mse ")]
    points = {m: sorted((_number(r["budget"]), _number(r.get(m))) for r in rows) for m in methods}
    points = {m: [(b, v) for b, v in p if b and v and v > 0] for m, p in points.items()}
    points = {m: p for m, p in points.items() if len(p) > 1}
    if not points:
        return ""
    bs = [b for p in points.values() for b, _ in p]
    vs = [v for p in points.values() for _, v in p]
    b0, b1 = math.log(min(bs)), math.log(max(bs))
    v0, v1 = math.log(min(vs) / 1.3), math.log(max(vs) * 1.3)
    left, top, width, height, legend = 64, 24, 360, 220, 200
    x = lambda b: left + width * (math.log(b) - b0) / max(b1 - b0, 1e-12)  # noqa: E731
    y = lambda v: top + height * (v1 - math.log(v)) / max(v1 - v0, 1e-12)  # noqa: E731
    total_w, total_h = left + width + legend + 20, top + height + 40
    parts = [f'<svg class="bench-chart" role="img" viewBox="0 0 {total_w} {total_h}" width="{total_w}" '
             f'height="{total_h}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{title}: squared error against budget (lower is better)</title>",
             f'<text x="{left}" y="14" font-size="11">{title}: squared error against budget (log-log, lower is better)</text>',
             f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#999"/>']
    for b in sorted(set(bs)):
        parts.append(f'<text x="{x(b):.1f}" y="{top + height + 14}" font-size="10" text-anchor="middle">{b:g}</text>')
    parts.append(f'<text x="{left + width / 2}" y="{top + height + 30}" font-size="11" text-anchor="middle">'
                 "coalitions (budget)</text>")
    for e in range(math.ceil(v0 / math.log(10)), math.floor(v1 / math.log(10)) + 1):
        parts.append(f'<line x1="{left}" x2="{left + width}" y1="{y(10.0 ** e):.1f}" y2="{y(10.0 ** e):.1f}" '
                     'stroke="#ddd"/>')
        parts.append(f'<text x="{left - 4}" y="{y(10.0 ** e) + 4:.1f}" font-size="10" text-anchor="end">1e{e}</text>')
    for i, (method, p) in enumerate(points.items()):
        ours = method in ("mse default", "mse jaxshap default")  # jaxshap's default: a solid black line
        colour = "#000000" if ours else _SERIES_COLOURS[i % len(_SERIES_COLOURS)]
        stroke = f'stroke="{colour}" stroke-width="{3 if ours else 1.5}"' + ("" if ours else ' stroke-dasharray="5,3"')
        line = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in p)
        parts.append(f'<polyline points="{line}" fill="none" {stroke}/>')
        parts += [f'<circle cx="{x(b):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"/>' for b, v in p]
        ly = top + 10 + 16 * i
        parts.append(f'<line x1="{left + width + 14}" x2="{left + width + 34}" y1="{ly - 4}" y2="{ly - 4}" {stroke}/>')
        name = method[4:] if method[4:].startswith(("jaxshap", "shap")) else f"jaxshap {method[4:]}"
        parts.append(f'<text x="{left + width + 38}" y="{ly}" font-size="10">{name[:34]}</text>')
    parts.append("</svg>")
    return "".join(parts)


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
    waiting = [p.get("scenario", f.stem) for f, p in payloads if p.get("quick")]
    payloads = [(f, p) for f, p in payloads if not p.get("quick")]
    if waiting:
        out += ['!!! note "Not yet run in full"',
                "    These scenarios have no committed full run, so no figures are shown for them "
                "(CI runs every scenario with `--quick`, which only checks that it works): "
                + ", ".join(f"`{name}`" for name in waiting) + ".", ""]
    for path, payload in payloads:
        out += [f"## `{payload.get('scenario', path.stem)}`: {payload.get('title', '')}", "",
                f"*Full run, {_date(path, payload)}; {_machine(payload.get('environment', {}))}.*", ""]
        for name, rows in payload.get("tables", {}).items():
            out += [f"**{name}**", ""]
            for label, group in _budget_groups(rows).items():
                out += [_budget_chart(" ".join(f"{v}" if k == "model" else f"{k}={v}" for k, v in label), group), ""]
            for key, higher in _ratio_columns(rows) if rows else []:
                out += [_chart(rows, key, higher), ""]
            out += ['<div class="bench-table" markdown>', ""] + _table(rows) + ["", "</div>", ""]
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
