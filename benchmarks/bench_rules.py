"""Rule-engine throughput: rule×step evaluations per second, and growth with trajectory length.

Builds 1×, 10× and 100× copies of the 29 tau-retail runs, each run's steps concatenated N times into
one long trajectory (call ids renamed per copy), and evaluates two packs on them:

- ``simple``: 10 single-step assertions (kind/tool guards, field comparisons, regexes, lengths);
- ``example``: examples/rules/tau_retail_example.yaml (quantifiers over earlier steps, latest
  outputs, per-call rules, z3 subset sums, a semantic check answered "unknown").

The inputs are built first and moved out of the cyclic garbage collector (``gc.freeze``): otherwise
the collector's full scans of the 100× input (hundreds of thousands of objects), triggered by the
records being allocated, add a cost that grows with input size and is not the engine's.

Reports wall time, the nominal rule×step pairs per second (rules × steps), the units each rule
actually visited (after the guard index), and time per step — which stays flat when cost is linear.
Run: ``python benchmarks/bench_rules.py [--max-copies 100]`` (one process, one core).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit import compile_rules, evaluate, load_pack, load_path  # noqa: E402
from trajaudit.engine.dsl.runtime import TrajContext  # noqa: E402
from trajaudit.engine.trace.ir import Trajectory  # noqa: E402
from trajaudit.engine.validation.rule_eval import candidates  # noqa: E402

TAU = ROOT.parent / "shared" / "data" / "tau_retail" / "trajectories.json"
EXAMPLE = ROOT / "examples" / "rules" / "tau_retail_example.yaml"

SIMPLE = """
pack: bench
params: {writes: [cancel_pending_order, modify_pending_order_items, return_delivered_order_items]}
rules:
  - {id: agent-no-error-word, type: PROTOCOL, guard: 'step.kind == "agent"', assert: 'not content ~ /traceback|exception/i'}
  - {id: tool-ok, type: PROTOCOL, guard: 'step.kind == "tool"', assert: 'not output.is_error'}
  - {id: user-short, type: PROTOCOL, guard: 'step.kind == "user"', assert: 'len(content) < 5000'}
  - {id: lists, type: SCHEMA, guard: 'call.name in ["modify_pending_order_items", "exchange_delivered_order_items"]', assert: 'len(call.args.item_ids) == len(call.args.new_item_ids)'}
  - {id: order-id-format, type: SCHEMA, guard: 'call.name in params.writes', assert: 'call.args.order_id ~ /^#W\\d+$/'}
  - {id: has-role, type: PROTOCOL, assert: 'step.role != ""'}
  - {id: agent-named, type: PROTOCOL, guard: 'step.kind == "agent"', assert: 'step.agent != null'}
  - {id: json-outputs, type: PROTOCOL, guard: 'step.tool == "get_order_details"', assert: 'output.json != null'}
  - {id: no-dollar-zero, type: RELATIONAL_POST, guard: 'step.kind == "agent"', assert: '"$0.00" not in content'}
  - {id: decision-content, type: PROTOCOL, guard: 'step.is_decision', assert: 'content != "" or len(step.calls) > 0'}
"""


def concatenated(t: Trajectory, copies: int) -> Trajectory:
    """``t``'s steps repeated ``copies`` times as one trajectory (indices shifted, call ids renamed)."""
    steps = []
    n = len(t.steps)
    for c in range(copies):
        for s in t.steps:
            calls = tuple(dataclasses.replace(tc, id=f"{tc.id}~{c}" if tc.id else None) for tc in s.tool_calls)
            out = s.tool_output
            if out is not None and out.call_id is not None:
                out = dataclasses.replace(out, call_id=f"{out.call_id}~{c}")
            steps.append(dataclasses.replace(s, index=s.index + c * n, tool_calls=calls, tool_output=out))
    return Trajectory(id=f"{t.id}x{copies}", steps=tuple(steps), source=t.source, task=t.task,
                      final_answer=t.final_answer, agents=t.agents)


def run(name: str, rules, runs: list[Trajectory], copies: int) -> dict:
    trajs = [concatenated(t, copies) for t in runs]
    steps = sum(len(t.steps) for t in trajs)
    visited = 0
    for t in trajs:
        tc = TrajContext(t)
        visited += sum(len(candidates(r, tc)) for r in rules)
    gc.collect()
    gc.freeze()
    t0 = time.perf_counter()
    fails = 0
    for t in trajs:
        log = evaluate(t, rules)
        fails += len(log.violations())
    dt = time.perf_counter() - t0
    gc.unfreeze()
    pairs = steps * len(rules)
    row = {"pack": name, "copies": copies, "steps": steps, "rules": len(rules), "pairs": pairs,
           "visited": visited, "seconds": dt, "pairs_per_s": pairs / dt, "visited_per_s": visited / dt,
           "us_per_step": dt / steps * 1e6, "fails": fails}
    print(f"{name:8} {copies:>4}x  steps={steps:>7}  rules={len(rules):>2}  pairs={pairs:>8}  visited={visited:>7}  "
          f"time={dt:7.3f}s  pairs/s={pairs / dt:>10,.0f}  visited/s={visited / dt:>9,.0f}  "
          f"µs/step={dt / steps * 1e6:7.1f}  fails={fails}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-copies", type=int, default=100)
    args = ap.parse_args()
    runs = load_path(TAU).trajectories
    packs = {"simple": compile_rules(load_pack(SIMPLE)), "example": compile_rules(load_pack(EXAMPLE))}
    for name, rules in packs.items():
        rows = [run(name, rules, runs, c) for c in (1, 10, 100) if c <= args.max_copies]
        if len(rows) > 1:
            growth = ", ".join(f"{r['copies']}x: {r['seconds'] / rows[0]['seconds']:.1f}× time for "
                               f"{r['steps'] / rows[0]['steps']:.0f}× steps" for r in rows[1:])
            print(f"{name:8} growth: {growth}")


if __name__ == "__main__":
    main()
