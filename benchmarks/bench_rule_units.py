"""The rule stage per unit: where a warm batch's rule time goes, and what sharing equal lets saves.

Evaluates the default packs (tau retail: with the ``--tools`` pack of its tool schemas; Who&When:
without) over the runs exactly as the audit pipeline does (``validation.stepper.evaluate_run`` with the
rules ``run.evidence.rules_for`` selects), after one warm-up batch, and reports:

- ms of CPU per run, alternating batches with ``stepper.SHARE_UNITS`` on (equal guards and lets of
  different rules evaluated once per unit, ``validation.unit_memo``) and off (every rule evaluates
  its own), in one process — the minimum of each, and their ratio;
- with ``--per-rule``: each rule's µs per run and per unit (a timer around ``Stepper.run_units``).

Instruction counts (load-independent) come from running it under
``valgrind --tool=cachegrind`` with ``--rounds 1`` and ``--rounds 3`` and dividing the difference.

Run: ``python benchmarks/bench_rule_units.py [--data tau|ww] [--rounds 10] [--per-rule]``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit import load_many, load_path  # noqa: E402
from trajaudit.engine.run.evidence import rules_for  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, build_context  # noqa: E402
from trajaudit.engine.validation import stepper  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", choices=("tau", "ww"), default="tau")
    ap.add_argument("--rounds", type=int, default=10, help="batches per setting (alternating)")
    ap.add_argument("--per-rule", action="store_true", help="also print each rule's time per run and unit")
    a = ap.parse_args(argv)
    if a.data == "tau":
        runs = load_path(DATA / "tau_retail" / "trajectories.json").trajectories
        spec = AuditSpec(tools=str(DATA / "tau_retail" / "tools.json"))
    else:
        runs = load_many([DATA / "who_and_when" / "algorithm_generated"]).trajectories
        spec = AuditSpec()
    ctx = build_context(spec)
    work = [(t, rules_for(t, ctx)[0]) for t in runs]

    def batch() -> float:
        t0 = time.process_time()
        for t, rules in work:
            stepper.evaluate_run(t, rules, config=ctx.config, tools=ctx.tools)
        return time.process_time() - t0

    batch()  # warm-up: packs compiled, regex analyses, per-process memos
    times: dict[bool, list[float]] = {True: [], False: []}
    old = stepper.SHARE_UNITS
    try:
        for i in range(2 * a.rounds):
            stepper.SHARE_UNITS = bool(i % 2)
            times[stepper.SHARE_UNITS].append(batch())
    finally:
        stepper.SHARE_UNITS = old
    n = len(work)
    own, shared = min(times[False]) * 1000 / n, min(times[True]) * 1000 / n
    print(f"{a.data}: {n} runs, {a.rounds} batches each; rule stage ms/run (min): every rule its own lets "
          f"{own:.3f}, equal lets shared {shared:.3f} ({own / shared:.2f}x)")
    if a.per_rule:
        per_rule(work, batch, n)
    return 0


def per_rule(work: list, batch, n: int) -> None:
    """Each rule's µs per run and per unit, from a timer around ``Stepper.run_units`` (sharing on)."""
    acc: collections.Counter[str] = collections.Counter()
    units: collections.Counter[str] = collections.Counter()
    orig = stepper.Stepper.run_units

    def timed(self, tc, us, out, deadline=None):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return orig(self, tc, us, out, deadline)
        finally:
            acc[self.rule.id] += time.perf_counter() - t0
            units[self.rule.id] += len(us)

    stepper.Stepper.run_units = timed  # type: ignore[method-assign]
    try:
        batch()
    finally:
        stepper.Stepper.run_units = orig  # type: ignore[method-assign]
    print(f"per rule (one batch, timer included): {sum(units.values()) / n:.0f} units per run")
    for rid, v in acc.most_common(20):
        print(f"  {rid:58s} {v * 1e6 / n:7.1f} us/run {v * 1e6 / max(units[rid], 1):6.1f} us/unit")


if __name__ == "__main__":
    raise SystemExit(main())
