"""Claim-graph localization on the annotated runs: does the gold critical step fall among the error steps?

Run: python benchmarks/claims_accuracy.py [--markdown OUT.md] [--details]
Reads gold labels only here (the eval side): tau-retail ``ground_truth.json`` (critical failure =
the failure whose ``failure_id`` equals ``root_cause.failure_id``, compared as strings; 0-based step =
``step_number - 1``) and each Who&When file's ``mistake_step`` (0-based).
Reports, per dataset: runs, runs with any error step, the fraction whose gold step is among the error
steps (recall@error-steps), the first-error exact-match rate, and the mean number of error steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's trajaudit wins

from trajaudit import load_many, load_path  # noqa: E402
from trajaudit.engine.claims import build_claim_graph  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TAU = DATA / "tau_retail"
WW = DATA / "who_and_when" / "algorithm_generated"


def tau_gold() -> dict[str, int]:
    """{trajectory id: 0-based critical step} from the AgentRx annotations."""
    out = {}
    for r in json.loads((TAU / "ground_truth.json").read_text()):
        rc = str(r["root_cause"]["failure_id"])
        crit = [f for f in r["failures"] if str(f["failure_id"]) == rc]
        if crit:
            out[str(r["trajectory_id"])] = int(crit[0]["step_number"]) - 1
    return out


def ww_gold() -> dict[str, int]:
    """{file stem: 0-based mistake step}."""
    return {p.stem: int(json.loads(p.read_text())["mistake_step"]) for p in sorted(WW.glob("*.json"))}


def evaluate(runs, gold: dict[str, int]) -> tuple[dict, list[dict]]:
    rows = []
    for t in runs:
        if t.id not in gold:
            continue
        p = build_claim_graph(t).propagate()
        g = gold[t.id]
        rows.append({"id": t.id, "gold": g, "gold_kind": t.steps[g].kind if g < len(t.steps) else "?",
                     "first": p.first_error_step, "errors": list(p.error_steps),
                     "hit": g in p.error_steps, "exact": p.first_error_step == g})
    n = len(rows)
    agg = {
        "runs": n,
        "runs_with_errors": sum(1 for r in rows if r["errors"]),
        "gold_in_error_steps": sum(r["hit"] for r in rows) / n if n else 0.0,
        "first_error_exact": sum(r["exact"] for r in rows) / n if n else 0.0,
        "first_error_precision": (sum(r["exact"] for r in rows) / sum(1 for r in rows if r["errors"])
                                  if any(r["errors"] for r in rows) else 0.0),
        "mean_error_steps": sum(len(r["errors"]) for r in rows) / n if n else 0.0,
        "gold_on_decision_step": sum(1 for r in rows if r["gold_kind"] == "agent") / n if n else 0.0,
    }
    return agg, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--markdown", help="also write the table to this Markdown file")
    ap.add_argument("--details", action="store_true", help="print one row per run")
    args = ap.parse_args()
    t0 = time.process_time()
    tau = load_path(TAU / "trajectories.json").trajectories
    ww = load_many([WW]).trajectories
    results = {"tau-retail (29)": evaluate(tau, tau_gold()), "Who&When algorithm-generated (126)": evaluate(ww, ww_gold())}
    cpu = time.process_time() - t0
    lines = ["| dataset | runs | runs with error steps | gold step among error steps | first-error exact match "
             "| first-error precision | mean error steps | gold on a decision step |", "|---|---|---|---|---|---|---|---|"]
    for name, (agg, rows) in results.items():
        lines.append(f"| {name} | {agg['runs']} | {agg['runs_with_errors']} | {agg['gold_in_error_steps']:.3f} "
                     f"({sum(r['hit'] for r in rows)}/{agg['runs']}) | {agg['first_error_exact']:.3f} "
                     f"({sum(r['exact'] for r in rows)}/{agg['runs']}) | {agg['first_error_precision']:.3f} "
                     f"({sum(r['exact'] for r in rows)}/{agg['runs_with_errors']}) | {agg['mean_error_steps']:.2f} "
                     f"| {agg['gold_on_decision_step']:.3f} |")
        if args.details:
            for r in rows:
                print(f"{name[:5]} {r['id']:>6} gold={r['gold']:>3} ({r['gold_kind']:5}) first={r['first']!s:>4} "
                      f"hit={r['hit']!s:5} errors={r['errors']}")
    table = "\n".join(lines)
    print(table)
    print(f"\n(total CPU incl. loading: {cpu:.2f} s)")
    if args.markdown:
        Path(args.markdown).write_text(
            "# Claim-graph localization on the annotated runs\n\n"
            "Produced by `python benchmarks/claims_accuracy.py --markdown benchmarks/claims_results.md` "
            "(deterministic; no LLM).\n\n"
            "- *gold step among error steps*: the run's gold critical step is one of the propagation's error steps.\n"
            "- *first-error exact match*: `Propagation.first_error_step` equals the gold step (0-based).\n"
            "- *first-error precision*: the same, among the runs where the graph reports any error step.\n"
            "- *gold on a decision step*: an upper bound — the claim graph only ever flags agent steps "
            "(tau gold often blames the simulated user).\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
