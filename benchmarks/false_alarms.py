"""False alarms on successful runs: error-level findings where nothing went wrong (issue 17).

Run: python benchmarks/false_alarms.py [--runs benchmarks/data/successful_runs] [--code CHECKOUT] [--json OUT]

A proxy for the "successful runs" measure of issue 17 (error-level findings on at most 10% of
successful runs of unseen domains): a handful of synthetic *successful* runs written for this
benchmark (not copied from any data set) in several formats — OpenAI chat (an airline-style and a
telecom-style tau-like domain sharing tau's generic tools, a bookshop, a recovered retry),
Anthropic (a coding assistant pasting a library warning), LangChain (a research agent with dates),
an AutoGen-style group chat opening with a manager's brief, and an orchestrator with a progress
ledger directing web and file agents. Each run is audited with the default packs (no ``--tools``);
a run counts as a false alarm when its validation log has a ``fail`` record of severity error or
critical. ``--code`` measures another checkout (e.g. the commit before a change) with this script.
:func:`measure` is what ``benchmarks/make_results.py`` calls.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "data" / "successful_runs"


def measure(runs: Path = RUNS) -> dict[str, Any]:
    """Audit every ``*.json`` run under ``runs``. Returns ``{"runs": n, "flagged": k, "per_run":
    {file name: [rule ids of error-level findings]}}``."""
    from benchmarks_api import api  # noqa: PLC0415 - resolved against the measured checkout

    a = api()
    ctx = a["build_context"](a["AuditSpec"](strategy="offline", config=a["AuditConfig"](seed=0)))
    per_run: dict[str, list[str]] = {}
    for path in sorted(runs.glob("*.json")):
        res = a["load_many"]([path])
        if res.problems or not res.trajectories:
            raise SystemExit(f"{path.name}: does not load: {res.problems[:1]}")
        t = res.trajectories[0]
        per_run[path.name] = sorted({f"{r.rule_id}@{r.step}" for r in a["gather"](t, ctx).log.records
                                     if r.verdict == "fail" and r.severity in ("error", "critical")})
    return {"runs": len(per_run), "flagged": sum(1 for v in per_run.values() if v), "per_run": per_run}


def render(after: dict[str, Any], before: dict[str, Any] | None = None) -> list[str]:
    """Markdown lines: one row per run (its error-level findings before and after), then the share."""
    rows = ["| successful run | error-level findings before | after |", "|---|---|---|"]
    for name, found in after["per_run"].items():
        old = (before or {}).get("per_run", {}).get(name)
        rows.append(f"| `{name}` | {', '.join(old) if old else ('none' if before else '—')} | "
                    f"{', '.join(found) if found else 'none'} |")
    b = f"{before['flagged']}/{before['runs']}" if before else "—"
    rows.append(f"| **runs with an error-level finding** | **{b}** | **{after['flagged']}/{after['runs']}** |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, default=RUNS, help="folder of successful runs (*.json)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the trajaudit checkout to measure")
    ap.add_argument("--json", type=Path, help="write the figures to this file")
    ap.add_argument("--before", type=Path, help="a --json file of an earlier checkout, shown beside")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    out = measure(args.runs)
    before = json.loads(args.before.read_text(encoding="utf-8")) if args.before else None
    print("\n".join(render(out, before)))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, sort_keys=True), encoding="utf-8")


if __name__ == "__main__":
    main()
