"""Precision of the evidence: how often an error-level finding lands where the root cause cannot be.

Run: python benchmarks/precision.py [--data ../shared/data] [--code CHECKOUT] [--json OUT]

The gold critical step is the *first* unrecoverable failure (AgentRx), so a decision step before it
is, by the annotation's definition, not the root cause. An error-level finding there is a false
alarm as far as the diagnosis goes (it may still describe a real, recovered slip). Measured per dev
set (tau-retail with its tool schemas, Who&When algorithm-generated):

- ``early_error``: share of runs with at least one ``fail`` record of severity error or critical,
  attributed (:func:`blame`, as the judge attributes it) to a decision step before the gold step.
- ``early_unrecovered``: the same, counting only findings the judge does not discount as recovered
  (its candidates' ``has_error``).
- ``task_claims_step0``: runs that open with a decision step restating the task (its first 60
  characters, case and spacing ignored: a manager's hand-off brief) and get an error-level claim
  finding on that step. The brief is the task as the team received it: what it says was handed to
  the run, so no value in it is an invention of the run.
- ``brief_invention``: runs opening with a decision step (the run's input as handed over) whose
  offline diagnosis is that step, as ``invention_of_new_information`` (issue 17 counted 27 of 126
  Who&When runs).

``--code`` imports trajaudit from another checkout (e.g. a worktree of the commit before a change),
so "before" and "after" are measured by the same script. :func:`measure` is what
``benchmarks/make_results.py`` calls; :func:`render` writes the Markdown table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def _use_checkout(code: Path) -> None:
    sys.path.insert(0, str(code.resolve()))


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def measure_set(name: str, paths: list[Path], gold_path: Path, tools: str | None) -> dict[str, Any]:
    """Measure one data set. Returns ``{"name", "runs", "early_error", "early_unrecovered",
    "task_claims_step0", "brief_invention", "per_run"}`` where the four measures are run counts and ``runs`` the number
    of runs with a gold step; ``per_run`` maps run id to ``{"gold", "early": [steps], ...}``."""
    from benchmarks_api import api as _api  # noqa: PLC0415 - resolved against the measured checkout
    from benchmarks_api import diagnose  # noqa: PLC0415

    api = _api()
    gold = api["load_gold"](gold_path)
    res = api["load_many"](paths)
    ctx = api["build_context"](api["AuditSpec"](strategy="offline", tools=tools, config=api["AuditConfig"](seed=0)))
    judge = api["OfflineJudge"]()
    blame = api["blame"]
    per_run: dict[str, Any] = {}
    n = early_any = early_unrec = task0 = brief_blamed = 0
    for t in res.trajectories:
        g = gold.get(str(t.id))
        if g is None or g.critical_step is None:
            continue
        n += 1
        gstep = g.critical_step
        bundle = api["gather"](t, ctx)
        records = bundle.log.records
        early: set[int] = set()
        for rec in records:
            if rec.verdict != "fail" or rec.severity not in ("error", "critical"):
                continue
            b = blame(t, rec)
            if b is not None and b < gstep and t.steps[b].is_decision:
                early.add(b)
        cands = judge.candidates(t, records, ctx.config.min_violation_severity)
        unrec = sorted(c.step for c in cands if c.has_error and c.step < gstep and t.steps[c.step].is_decision)
        head = _norm(t.task or "")[:60]
        brief = bool(t.steps) and t.steps[0].is_decision and bool(head) and head in _norm(t.steps[0].content)
        tclaims = [str(rec.bindings.get("value")) for rec in records
                   if brief and rec.origin == "claims" and rec.verdict == "fail"
                   and rec.severity in ("error", "critical") and rec.step == 0]
        diag = diagnose(judge, t, bundle, ctx)
        opening = bool(t.steps) and t.steps[0].is_decision
        blamed_brief = opening and diag.critical_step == 0 and diag.category == "invention_of_new_information"
        brief_blamed += blamed_brief
        early_any += bool(early)
        early_unrec += bool(unrec)
        task0 += bool(tclaims)
        per_run[str(t.id)] = {"gold": gstep, "early": sorted(early), "early_unrecovered": unrec,
                              "task_claims_step0": tclaims, "brief_blamed_as_invention": blamed_brief}
    return {"name": name, "runs": n, "early_error": early_any, "early_unrecovered": early_unrec,
            "task_claims_step0": task0, "brief_invention": brief_blamed, "per_run": per_run}


def measure(data: Path = DATA) -> dict[str, dict[str, Any]]:
    """Both dev sets: ``{"tau": measure_set(...), "who&when": measure_set(...)}``."""
    tau = data / "tau_retail"
    ww = data / "who_and_when" / "algorithm_generated"
    return {
        "tau": measure_set("tau-retail", [tau / "trajectories.json"], tau / "ground_truth.json", str(tau / "tools.json")),
        "who&when": measure_set("Who&When algorithm-generated", [ww], ww, None),
    }


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100.0 * k / n:.1f}%)" if n else "—"


def render(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Markdown lines: one row per data set and measure, ``before → after`` when ``before`` is given
    (a JSON written by ``--json`` from the earlier checkout)."""
    rows = ["| data set | measure | before | after |", "|---|---|---|---|"]
    labels = [("early_error", "error-level finding before the gold step"),
              ("early_unrecovered", "unrecovered error-level finding before the gold step"),
              ("task_claims_step0", "claim flagged on an opening brief that restates the task"),
              ("brief_invention", "offline diagnosis: the run's opening message, as invention_of_new_information")]
    for key, a in after.items():
        b = (before or {}).get(key)
        for m, label in labels:
            old = _pct(b[m], b["runs"]) if b and m in b else "—"
            rows.append(f"| {a['name']} | {label} | {old} | {_pct(a[m], a['runs'])} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    ap.add_argument("--code", type=Path, default=ROOT, help="the trajaudit checkout to measure")
    ap.add_argument("--json", type=Path, help="write the figures (with per-run detail) to this file")
    ap.add_argument("--before", type=Path, help="a --json file of an earlier checkout, shown beside")
    args = ap.parse_args()
    _use_checkout(args.code)
    out = measure(args.data)
    before = json.loads(args.before.read_text(encoding="utf-8")) if args.before else None
    print("\n".join(render(out, before)))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, sort_keys=True), encoding="utf-8")


if __name__ == "__main__":
    main()
