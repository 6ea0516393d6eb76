"""Per-added-step latency of ``trajaudit.Monitor`` on long runs (issue 20), beside re-evaluating the
whole prefix per step.

A long run repeats the turns of a tau-retail dev run (its messages after the system prompt, call ids
made unique per repetition) up to 5,000+ steps. One monitor takes the whole run one ``add()`` at a
time; each add is timed, in wall-clock time (``time.perf_counter``) and in the thread's CPU time
(``time.thread_time``: what the add computed, without the time the shared machine gave to other
processes). At each measured step k (10, 100, 1,000, 5,000) the statistics are over the adds of
steps k .. k + window - 1 (p99 of 200 adds: the 3rd slowest). The baseline evaluates the selected
rules on the whole prefix (``stepper.evaluate_run`` over steps 0..j, what a monitor without
incremental state does per step) for ``--base-window`` steps from k. Four monitors are measured,
each in a fresh interpreter (the same cold start: none inherits another's compiled patterns or
memoized texts): the default settings (``Monitor(...)``: the cyclic collector paused during an add,
the add's surviving objects promoted to the oldest generation by a generation-1 collection after it), ``freeze_gc=True`` (frozen
instead, as ``trajaudit watch`` runs it), ``promote_gc=False`` ("gc untouched": the collector
left alone, the default before this round) and "ledger per add" (the default monitor with its
claim ledger brought up to date inside each timed add: ``add()`` itself leaves the ledger to
``diagnosis()``/``close()``, which take the steps added since; this column is what a caller that asks
for ``diagnosis()`` after every add pays for the claim part, before the judge). The full collections that started during the measured
adds are counted; each message is parsed from its JSON line before its add (as ``watch`` reads a
file), and the collections that start between adds (the caller's allocations: the work an add's
paused collector leaves to the caller) are counted and timed. A fourth interpreter feeds the default monitor with every rule's evaluation timed
(it slows the adds: not the table's run) to name the rules behind the adds over 1 ms. Targets: p99
<= 1 ms per step and flat (step 5,000 p99 within 2x of step 10).

The process runs niced (``os.nice(5)``, inherited by the children); the load average before
and after is written with the table.

Run: python benchmarks/bench_monitor.py [--window 200] [--base-window 10] [--steps 10,100,1000,5000]
                                        [--rule-budget N] [--out benchmarks/bench_monitor.txt]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit.engine.config import AuditConfig  # noqa: E402
from trajaudit.engine.run.evidence import rules_for  # noqa: E402
from trajaudit.engine.run.monitor import Monitor  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, build_context  # noqa: E402
from trajaudit.engine.validation import stepper  # noqa: E402

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


class RuleClock:
    """CPU time per rule and step while installed (wraps ``Stepper.run_units``): which rules make the slow adds."""

    def __init__(self) -> None:
        self.cost: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
        self._orig = stepper.Stepper.run_units

    def __enter__(self) -> RuleClock:
        orig, cost = self._orig, self.cost

        def run_units(st, tc, units, out, deadline=None):  # type: ignore[no-untyped-def]
            t0 = time.thread_time()
            try:
                return orig(st, tc, units, out, deadline)
            finally:
                cost[len(tc.views) - 1][st.rule.id] += time.thread_time() - t0

        stepper.Stepper.run_units = run_units  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        stepper.Stepper.run_units = self._orig  # type: ignore[method-assign]


LEDGER = "ledger per add"
VARIANTS = {
    "default": {},  # Monitor(...): the collector paused per add, its survivors promoted by gc.collect(1) after it
    "freeze_gc": {"freeze_gc": True},  # Monitor(freeze_gc=True), as `trajaudit watch` runs it
    "gc untouched": {"promote_gc": False},  # the collector left alone (the default before issue 20's p99 round)
    # the default, with the claim ledger brought up to date inside each timed add (what add() did before the
    # ledger took its steps on demand: the claim work a caller asking for diagnosis() every step pays there)
    LEDGER: {},
}


def feed(ctx, msgs: list[dict], ledger: bool = False, **kw) -> tuple[list[float], list[float], list[int], Monitor, list[float]]:
    """One monitor fed every message, each parsed from its JSON line first (as ``watch`` reads a file:
    the caller allocates between adds, so the collector's automatic collections can start there):
    per add (wall s, cpu s), the steps where a full collection started, and the durations (s) of
    the collections that ran between adds (the collector work an add's pause leaves to the caller)."""
    full: list[int] = []
    outside: list[float] = []
    at = [0]
    state = {"in_add": False, "t0": 0.0, "outside": False}

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            state["t0"], state["outside"] = time.perf_counter(), not state["in_add"]
            if info.get("generation") == 2:
                full.append(at[0])
        elif state["outside"]:
            outside.append(time.perf_counter() - state["t0"])

    lines = [json.dumps(m) for m in msgs]
    gc.collect()
    gc.callbacks.append(on_gc)
    m = Monitor(context=ctx, run_id="long", **kw)
    wall, cpu = [], []
    try:
        for j, line in enumerate(lines):
            at[0] = j
            msg = json.loads(line)
            state["in_add"] = True
            c0, t0 = time.thread_time(), time.perf_counter()
            m.add(msg)
            if ledger:
                m._ledger_catch_up()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
            state["in_add"] = False
    finally:
        gc.callbacks.remove(on_gc)
    return wall, cpu, full, m, outside


def stats(xs: list[float]) -> tuple[float, float, float]:
    """(p50, p99, max) in ms."""
    return 1e3 * statistics.median(xs), 1e3 * pct(xs, 99), 1e3 * max(xs)


def measure_variant(variant: str, steps: list[int], window: int, base_window: int, data: Path = DATA,
                    rule_budget: int | None = None, attribute: bool = False) -> dict:
    """One variant's adds in this (fresh) process; with the default also the whole-prefix baseline.
    ``attribute``: the adds are fed with every rule's evaluation timed (:class:`RuleClock`, which
    costs time itself), for the rules behind the slow adds only — a run of its own, not the table's."""
    config = AuditConfig() if rule_budget is None else AuditConfig(rule_budget=rule_budget)
    ctx = build_context(AuditSpec(config=config))
    msgs = long_run(max(steps) + window + 1, data)
    if attribute:
        with RuleClock() as clock:
            _, cpu, _, _, _ = feed(ctx, msgs, **VARIANTS[variant])
        slow_rules = []
        for k in steps:
            slow: collections.Counter = collections.Counter()
            for j in range(k, k + window):
                if cpu[j] > 1e-3:
                    slow.update(clock.cost.get(j, {}))
            slow_rules.append([(r, 1e3 * t) for r, t in slow.most_common(2)])
        return {"slow_rules": slow_rules}
    default = variant == "default"
    wall, cpu, full, m, outside = feed(ctx, msgs, ledger=variant == LEDGER, **VARIANTS[variant])
    out: dict = {"variant": variant, "rows": [], "full_gc": len(full), "adds": len(msgs),
                 "outside": (len(outside), 1e3 * sum(outside), 1e3 * max(outside, default=0.0)),
                 "max_wall": 1e3 * max(wall), "budget": config.rule_budget,
                 "stopped": [(r.step, r.rule_id) for r in m.log.records if "budget of" in (r.message or "")]}
    whole = m.trajectory()
    for k in steps:
        sl = slice(k, k + window)
        row = {"step": k, "wall": stats(wall[sl]), "cpu": stats(cpu[sl]), "full_gc": sum(k <= j < k + window for j in full)}
        if default:
            base = []
            for j in range(k, k + base_window):
                t = dataclasses.replace(whole, steps=tuple(m.steps[:j + 1]))
                rules, _ = rules_for(t, ctx)
                t0 = time.perf_counter()
                stepper.evaluate_run(t, rules, config=ctx.config, tools=ctx.tools)
                base.append(time.perf_counter() - t0)
            row["prefix"] = stats(base)
        out["rows"].append(row)
    return out


def measure(steps: list[int], window: int, base_window: int, data: Path = DATA, rule_budget: int | None = None) -> dict:
    """Every variant, each in a fresh interpreter (the same cold start: no variant inherits another's
    compiled patterns or memoized texts), one after the other."""
    out: dict = {"load_before": os.getloadavg(), "variants": {}}

    def child(variant: str, *extra: str) -> dict:
        cmd = [sys.executable, __file__, "--child", variant, "--steps", ",".join(map(str, steps)),
               "--window", str(window), "--base-window", str(base_window), "--data", str(data), *extra]
        if rule_budget is not None:
            cmd += ["--rule-budget", str(rule_budget)]
        return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    for variant in VARIANTS:
        res = out["variants"][variant] = child(variant)
        for r in res["rows"]:
            print(f"{variant:>12} step {r['step']:>5}: add p50/p99 wall {r['wall'][0]:.3f}/{r['wall'][1]:.3f} ms, "
                  f"CPU {r['cpu'][0]:.3f}/{r['cpu'][1]:.3f} ms", file=sys.stderr)
    out["load_after"] = os.getloadavg()
    out["slow_rules"] = child("default", "--attribute")["slow_rules"]
    return out


def render(res: dict, window: int, base_window: int) -> str:
    var = res["variants"]
    d, f, u, g = var["default"], var["freeze_gc"], var["gc untouched"], var[LEDGER]
    lines = [f"Per-added-step latency of Monitor.add, default packs, a tau run repeated to {d['adds']:,} steps; "
             f"{window} adds per measured step (p99 = the 3rd slowest of them), {base_window} for the whole-prefix "
             "baseline; each monitor in a fresh interpreter (bench_monitor.py)", "",
             "| step | add p50 wall (ms) | add p99 wall (ms) | add p50 CPU (ms) | add p99 CPU (ms) | max wall (ms) | "
             "freeze_gc p99 wall / CPU (ms) | gc untouched p99 wall / CPU (ms) | ledger per add p99 wall / CPU (ms) | full GCs in window (default / "
             "freeze_gc / untouched) | whole prefix re-evaluated p50 (ms) | p99 (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, rf, ru, rg in zip(d["rows"], f["rows"], u["rows"], g["rows"], strict=True):
        lines.append(f"| {r['step']:,} | {r['wall'][0]:.3f} | {r['wall'][1]:.3f} | {r['cpu'][0]:.3f} | {r['cpu'][1]:.3f} | "
                     f"{r['wall'][2]:.1f} | {rf['wall'][1]:.3f} / {rf['cpu'][1]:.3f} | {ru['wall'][1]:.3f} / "
                     f"{ru['cpu'][1]:.3f} | {rg['wall'][1]:.3f} / {rg['cpu'][1]:.3f} | {r['full_gc']} / {rf['full_gc']} / {ru['full_gc']} | "
                     f"{r['prefix'][0]:.2f} | {r['prefix'][1]:.2f} |")
    lines.append("")
    for name in VARIANTS:
        rows = var[name]["rows"]
        first, last = rows[0], rows[-1]
        for label, key in (("wall-clock", "wall"), ("CPU", "cpu")):
            ok = all(r[key][1] <= 1.0 for r in rows)
            flat = last[key][1] <= 2 * first[key][1]
            lines.append(f"{name}, {label}: p99 <= 1 ms at every step: {ok}; flat (step {last['step']:,} p99 within "
                         f"2x of step {first['step']:,}): {flat}")
    lines += ["", "Full collections during all {:,} adds: {} (default), {} (freeze_gc), {} (gc untouched); the slowest "
                  "add of the whole run: {:.1f} ms (default), {:.1f} ms (freeze_gc), {:.1f} ms (gc untouched).".format(
                      d["adds"], d["full_gc"], f["full_gc"], u["full_gc"], d["max_wall"], f["max_wall"], u["max_wall"]),
              "Collections that ran between adds (started by the caller's allocations: the work an add's pause "
              "leaves to the caller): " + "; ".join(
                  "{} {} ({:.1f} ms in all, the longest {:.1f} ms)".format(name, *var[name]["outside"]) for name in VARIANTS)
              + ".",
              f"Rules stopped by their evaluation budget ({d['budget']:,} operations per rule and run, "
              "the batch's) during the run: " + (", ".join(f"{rid} at step {k:,}" for k, rid in d["stopped"]) or "none")
              + " (a stopped rule costs nothing at the later steps).",
              "Rules that made the default monitor's adds over 1 ms CPU (CPU ms summed over those adds, per window; "
              "a separate run with every rule's evaluation timed, which slows the adds):"]
    for r, slow in zip(d["rows"], res["slow_rules"], strict=True):
        if slow:
            lines.append(f"- step {r['step']:,}: " + ", ".join(f"{rid} {ms:.1f} ms" for rid, ms in slow))
    lb, la = res["load_before"], res["load_after"]
    lines += ["", f"Machine: 2 cores shared with other jobs; load average before {lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f}, "
                  f"after {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}; run niced (+5). Wall-clock tails include the time other "
                  "processes had the CPU; the CPU columns do not."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default="10,100,1000,5000")
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--base-window", type=int, default=10)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--rule-budget", type=int, help="evaluation budget per rule and run (default: AuditConfig's)")
    ap.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)  # one variant, JSON on stdout
    ap.add_argument("--attribute", action="store_true", help=argparse.SUPPRESS)  # (a child) the slow adds' rules
    args = ap.parse_args()
    if args.child:
        res = measure_variant(args.child, [int(x) for x in args.steps.split(",")], args.window, args.base_window,
                              args.data, args.rule_budget, args.attribute)
        print(json.dumps(res))
        return
    os.nice(5)
    res = measure([int(x) for x in args.steps.split(",")], args.window, args.base_window, args.data, args.rule_budget)
    text = render(res, args.window, args.base_window)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
