"""Per-added-step latency of ``trajaudit.Monitor`` on long runs (issue 20), beside re-evaluating the
whole prefix per step, measured side by side in one process.

A long run repeats the turns of a tau-retail dev run (its messages after the system prompt, call ids
made unique per repetition) up to 5,000+ steps. At each measured step k (10, 100, 1,000, 5,000) a
monitor holding the first k steps (``add_history``, one pass) takes the next ``--window`` steps one
``add()`` at a time; each add is timed (``time.perf_counter``). The baseline evaluates the default
packs' rules on the whole prefix (``stepper.evaluate_run`` over steps 0..k, what a monitor without
incremental state does per step) for the same steps. Targets: p99 <= 1 ms per step and flat (step
5,000 within 2x of step 10).

Run: python benchmarks/bench_monitor.py [--window 20] [--steps 10,100,1000,5000] [--out benchmarks/bench_monitor.txt]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit.engine.run.evidence import rules_for  # noqa: E402
from trajaudit.engine.run.monitor import Monitor  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, build_context  # noqa: E402
from trajaudit.engine.validation.stepper import evaluate_run  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def long_run(n: int, data: Path = DATA) -> list[dict]:
    """OpenAI messages: a tau run's system prompt, then its other messages repeated to ``n`` messages."""
    runs = json.loads((data / "tau_retail" / "trajectories.json").read_text(encoding="utf-8"))
    run = max(runs, key=lambda r: len(r["traj"]))
    msgs = [{k: v for k, v in m.items() if k != "index"} for m in run["traj"]]
    head, body = msgs[:1], msgs[1:]
    out = list(head)
    rep = 0
    while len(out) < n:
        for m in body:
            m = dict(m)
            if m.get("tool_calls"):
                m["tool_calls"] = [{**c, "id": f"{c['id']}_{rep}"} for c in m["tool_calls"]]
            if m.get("tool_call_id"):
                m["tool_call_id"] = f"{m['tool_call_id']}_{rep}"
            out.append(m)
        rep += 1
    return out[:n]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def measure(steps: list[int], window: int, data: Path = DATA) -> list[dict]:
    ctx = build_context(AuditSpec())
    msgs = long_run(max(steps) + window + 1, data)
    rows = []
    for k in steps:
        m = Monitor(context=ctx, run_id="long")
        m.add_history(msgs[:k])
        mon, base = [], []
        gc.collect()
        for j in range(k, k + window):
            t0 = time.perf_counter()
            m.add(msgs[j])
            mon.append(time.perf_counter() - t0)
            traj = m.trajectory()
            t0 = time.perf_counter()
            rules, _ = rules_for(traj, ctx)
            evaluate_run(dataclasses.replace(traj), rules, config=ctx.config, tools=ctx.tools)
            base.append(time.perf_counter() - t0)
        rows.append({"step": k, "monitor_p50_ms": 1e3 * statistics.median(mon), "monitor_p99_ms": 1e3 * pct(mon, 99),
                     "prefix_p50_ms": 1e3 * statistics.median(base), "prefix_p99_ms": 1e3 * pct(base, 99)})
        print(f"step {k:>5}: monitor p50 {rows[-1]['monitor_p50_ms']:9.2f} ms p99 {rows[-1]['monitor_p99_ms']:9.2f} ms | "
              f"whole prefix p50 {rows[-1]['prefix_p50_ms']:9.2f} ms p99 {rows[-1]['prefix_p99_ms']:9.2f} ms", file=sys.stderr)
    return rows


def render(rows: list[dict], window: int) -> str:
    lines = [f"Per-added-step latency, default packs, {window} adds per measured step (bench_monitor.py)", "",
             "| step | Monitor.add p50 (ms) | p99 (ms) | whole prefix re-evaluated p50 (ms) | p99 (ms) |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['step']:,} | {r['monitor_p50_ms']:.2f} | {r['monitor_p99_ms']:.2f} | "
                     f"{r['prefix_p50_ms']:.2f} | {r['prefix_p99_ms']:.2f} |")
    first, last = rows[0], rows[-1]
    flat = last["monitor_p99_ms"] <= 2 * first["monitor_p99_ms"]
    lines += ["", f"p99 <= 1 ms at every step: {all(r['monitor_p99_ms'] <= 1.0 for r in rows)}; "
                  f"flat (step {last['step']:,} p99 within 2x of step {first['step']:,}): {flat}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default="10,100,1000,5000")
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = measure([int(x) for x in args.steps.split(",")], args.window, args.data)
    text = render(rows, args.window)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
