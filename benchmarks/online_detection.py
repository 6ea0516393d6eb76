"""Online detection replayed on the dev sets (issue 20): each run is fed to a ``Monitor`` message by
message; after each message the prefix judge's estimate (``Monitor.diagnosis``) is read, and the
alarm is raised at the first step where its basis is ``finding`` with confidence >= the threshold.

Reported per set: runs alarmed, alarm step minus gold step (distribution), alarms before the gold
step (early), and the share of the run's tokens after the alarm that stopping there would have saved
(tokens ~ characters / 4 of each step's text and tool-call arguments). The threshold is chosen by
leave-one-dataset-out: the one that maximizes (alarmed at or after the gold step) - (early alarms)
on the other set.

Run: python benchmarks/online_detection.py [--data ../shared/data] [--json out.json]
(make_results.py calls :func:`measure` and :func:`render` for RESULTS.md.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit import load_many  # noqa: E402
from trajaudit.engine.run.monitor import DEFAULT_ALARM_THRESHOLD, Monitor  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, build_context  # noqa: E402
from trajaudit.eval import load_gold  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
THRESHOLDS = (0.4, 0.5, 0.6, 0.7, 0.8)


def _tokens(step: Any) -> int:
    chars = len(step.content) + sum(len(c.raw_arguments or "") + len(c.name) for c in step.tool_calls)
    return max(1, chars // 4)


def replay(trajectories: list[Any], gold: Any, context: Any) -> list[dict[str, Any]]:
    """Per run: gold step, per-step token counts, and the judge's (basis, confidence, step) after each message."""
    rows = []
    for t in trajectories:
        item = gold.get(t.id)
        if item is None or item.critical_step is None:
            continue
        m = Monitor(context=context, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source)
        trail = []
        for s in t.steps:
            m.add(s)
            d = m.diagnosis()
            trail.append((d.metadata["basis"], d.confidence, d.critical_step) if d is not None else ("none", 0.0, None))
        rows.append({"id": t.id, "gold": item.critical_step, "tokens": [_tokens(s) for s in t.steps], "trail": trail})
    return rows


def score(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """The table's figures for one threshold."""
    deltas, saved, early, alarmed = [], [], 0, 0
    total_tokens = sum(sum(r["tokens"]) for r in rows)
    saved_tokens = 0
    for r in rows:
        at = next((k for k, (basis, conf, _) in enumerate(r["trail"]) if basis == "finding" and conf >= threshold), None)
        if at is None:
            continue
        alarmed += 1
        deltas.append(at - r["gold"])
        early += at < r["gold"]
        after = sum(r["tokens"][at + 1:])
        saved.append(after / sum(r["tokens"]))
        saved_tokens += after
    n = len(rows)
    q = statistics.quantiles(deltas, n=4) if len(deltas) >= 2 else [float("nan")] * 3
    return {"runs": n, "threshold": threshold, "alarmed": alarmed, "early": early,
            "on_or_after": alarmed - early, "exact": sum(1 for d in deltas if d == 0),
            "delta_median": statistics.median(deltas) if deltas else None, "delta_q1": q[0], "delta_q3": q[2],
            "delta_min": min(deltas) if deltas else None, "delta_max": max(deltas) if deltas else None,
            "within_2": sum(1 for d in deltas if 0 <= d <= 2),
            "saved_mean": statistics.mean(saved) if saved else 0.0,
            "saved_pooled": saved_tokens / total_tokens if total_tokens else 0.0}


def _utility(s: dict[str, Any]) -> int:
    return s["on_or_after"] - s["early"]


def measure(data: Path = DATA) -> dict[str, Any]:
    """Replay both sets: ``{"sets": {name: {rows, scores per threshold, chosen, chosen_on}}, "pooled": the
    threshold with the best utility summed over both sets}`` (the leave-one-dataset-out choices per set)."""
    tau_dir, ww_dir = data / "tau_retail", data / "who_and_when" / "algorithm_generated"
    sets = {"tau-retail": ([tau_dir / "trajectories.json"], tau_dir / "ground_truth.json", str(tau_dir / "tools.json")),
            "Who&When": ([ww_dir], ww_dir, None)}
    out: dict[str, Any] = {}
    for name, (paths, gold_path, tools) in sets.items():
        t0 = time.perf_counter()
        res = load_many(paths)
        ctx = build_context(AuditSpec(tools=tools))
        rows = replay(res.trajectories, load_gold(gold_path), ctx)
        out[name] = {"rows": rows, "scores": {th: score(rows, th) for th in THRESHOLDS},
                     "seconds": time.perf_counter() - t0}
        print(f"{name}: {len(rows)} runs replayed in {out[name]['seconds']:.1f} s", file=sys.stderr)
    names = list(sets)
    for name in names:
        other = next(n for n in names if n != name)
        best = max(THRESHOLDS, key=lambda th: (_utility(out[other]["scores"][th]), -th))
        out[name]["chosen"] = best
        out[name]["chosen_on"] = other
    out_pooled = max(THRESHOLDS, key=lambda th: (sum(_utility(out[n]["scores"][th]) for n in names), -th))
    return {"sets": out, "pooled": out_pooled}


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:g}" if x == int(x) else f"{x:.1f}"
    return str(x)


def _default_note(sets: dict[str, Any], pooled: float) -> list[str]:
    """Where the shipped default threshold stands in the leave-one-dataset-out figures."""
    d = DEFAULT_ALARM_THRESHOLD
    per = "; ".join(f"on {n}: {_utility(r['scores'][d]) if d in r['scores'] else '–'} at {d}, best "
                    f"{max(_utility(s) for s in r['scores'].values())} at "
                    f"{max(r['scores'], key=lambda th: (_utility(r['scores'][th]), -th))}" for n, r in sets.items())
    return [
        f"Default threshold (`watch`/`guard --alarm-threshold`, `Monitor(alarm_threshold=)`): **{d}** "
        "(`trajaudit.engine.run.monitor.DEFAULT_ALARM_THRESHOLD`). One value for both folds: the threshold "
        "whose utility (alarms at or after the gold step minus early alarms) summed over the two sets is "
        f"highest is {pooled}; per set, {per}.",
    ]


def render(result: dict[str, Any]) -> list[str]:
    """The RESULTS.md section (markdown lines)."""
    sets = result["sets"]
    lines = [
        "## Online detection (issue 20)",
        "",
        "Each run replayed message by message through `trajaudit.Monitor`; the alarm is raised at the",
        "first step where the prefix judge's estimate has basis `finding` with confidence >= the",
        "threshold, chosen on the *other* set (leave one dataset out: the threshold maximizing alarms at",
        "or after the gold step minus early alarms). Δ = alarm step − gold step (0-based message",
        "indexes). Saved = tokens (chars/4) of the steps after the alarm that stopping there avoids:",
        "mean share per alarmed run, and pooled over all the set's tokens. `benchmarks/online_detection.py`.",
        "",
        "| set | threshold (chosen on) | runs | alarmed | early (before gold) | Δ = 0 | 0 ≤ Δ ≤ 2 | Δ median [q1, q3] (min..max) | saved, mean per alarmed run | saved, pooled |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sets.items():
        s = r["scores"][r["chosen"]]
        lines.append(
            f"| {name} | {r['chosen']} ({r['chosen_on']}) | {s['runs']} | {s['alarmed']} ({100 * s['alarmed'] / s['runs']:.0f}%) "
            f"| {s['early']} ({100 * s['early'] / s['runs']:.0f}%) | {s['exact']} | {s['within_2']} "
            f"| {_fmt(s['delta_median'])} [{_fmt(s['delta_q1'])}, {_fmt(s['delta_q3'])}] ({_fmt(s['delta_min'])}..{_fmt(s['delta_max'])}) "
            f"| {100 * s['saved_mean']:.0f}% | {100 * s['saved_pooled']:.0f}% |")
    lines += ["", *_default_note(sets, result["pooled"]), "", "Every threshold (same replay):", "",
              "| set | threshold | alarmed | early | Δ = 0 | Δ median | saved (mean) |", "|---|---|---|---|---|---|---|"]
    for name, r in sets.items():
        for th, s in r["scores"].items():
            lines.append(f"| {name} | {th} | {s['alarmed']} | {s['early']} | {s['exact']} | {_fmt(s['delta_median'])} "
                         f"| {100 * s['saved_mean']:.0f}% |")
    return lines + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--json", type=Path, help="also write the per-run trails here")
    args = ap.parse_args()
    result = measure(args.data)
    print("\n".join(render(result)))
    if args.json:
        args.json.write_text(json.dumps(result, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
