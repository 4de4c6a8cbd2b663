"""Run benchmark scenarios: ``python -m bench [SCENARIO ...] [--quick] [--out DIR]``.

Without scenario names every scenario runs. ``--quick`` shrinks every size so the whole set
finishes in about two minutes on a 2-core CPU (CI runs it to check that each scenario works and
produces sane numbers; its timings are not meant to be quoted). Each scenario prints a markdown
table and writes the same figures as JSON to ``DIR/<scenario>.json`` (default ``bench/results``).
Scenarios may return sanity checks (efficiency, agreement with the reference); the command exits
with status 1 when one fails.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time

from . import scenarios
from .harness import environment, markdown_table, save_json


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(scenarios.__path__) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenarios", nargs="*", help=f"scenario names (default: all of {available()})")
    parser.add_argument("--quick", action="store_true", help="small sizes, for checking that scenarios run")
    parser.add_argument("--out", default="bench/results", help="folder for the JSON results")
    args = parser.parse_args(argv)
    names = args.scenarios or available()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose from {available()}")
    env = environment()
    print(f"environment: {env}")
    failed = []
    for name in names:
        module = importlib.import_module(f"bench.scenarios.{name}")
        t0 = time.perf_counter()
        result = module.run(quick=args.quick)
        elapsed = time.perf_counter() - t0
        print(f"\n## {name}: {result['title']}  ({elapsed:.1f} s{', quick' if args.quick else ''})\n")
        for table_name, rows in result["tables"].items():
            print(f"### {table_name}\n\n{markdown_table(rows)}\n")
        for note in result.get("notes", []):
            print(f"- {note}")
        for check, ok in result.get("checks", {}).items():
            print(f"- check {'passed' if ok else 'FAILED'}: {check}")
            if not ok:
                failed.append(f"{name}: {check}")
        save_json(f"{args.out}/{name}.json", {"scenario": name, "quick": args.quick, "environment": env, **result})
    if failed:
        print("\nsanity checks failed:\n" + "\n".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
