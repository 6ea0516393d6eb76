"""The rule stage per unit: where a warm batch's rule time goes, and what sharing equal lets saves.

Evaluates the default packs (tau retail: with the ``--tools`` pack of its tool schemas; Who&When:
without) over the runs exactly as the audit pipeline does (``validation.stepper.evaluate_run`` with the
rules ``run.evidence.rules_for`` selects), after one warm-up batch, and reports:

- ms of CPU per run, alternating batches with ``stepper.SHARE_UNITS`` on (equal guards and lets of
  different rules evaluated once per unit, ``validation.unit_memo``) and off (every rule evaluates
  its own), in one process — the minimum of each, and their ratio;
- with ``--per-rule``: each rule's µs per run and per unit (a timer around ``Stepper.run_units``).

Instruction counts (load-independent): ``--instructions`` runs this script under
``valgrind --tool=cachegrind`` with ``--shared-only`` (the pipeline's path: sharing on, every batch)
and ``--rounds 1`` and ``--rounds 5``, with one hash seed and ``TRAJAUDIT_NO_CACHE=1``; the difference
of the two totals divided by the four extra batches' runs is the rule stage per run (imports, pack
compilation and the warm-up batch cancel out). ``--against CHECKOUT`` counts another checkout's code
the same way beside this one's (``--code`` imports trajaudit from a checkout).

Run: ``python benchmarks/bench_rule_units.py [--data tau|ww] [--rounds 10] [--per-rule]
[--instructions [--against CHECKOUT]]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", choices=("tau", "ww"), default="tau")
    ap.add_argument("--rounds", type=int, default=10, help="batches per setting (alternating)")
    ap.add_argument("--per-rule", action="store_true", help="also print each rule's time per run and unit")
    ap.add_argument("--shared-only", action="store_true", help="only batches with sharing on (the pipeline's path)")
    ap.add_argument("--code", type=Path, default=ROOT, help="import trajaudit from this checkout")
    ap.add_argument("--instructions", action="store_true", help="instructions per run of the rule stage (cachegrind)")
    ap.add_argument("--against", type=Path, help="with --instructions: also count this checkout's code")
    a = ap.parse_args(argv)
    if a.instructions:
        for code in ([a.against] if a.against else []) + [ROOT]:
            print(f"{a.data}: {code.name}: rule stage {instructions(code.resolve(), a.data):.3f}M instructions per run")
        return 0
    sys.path.insert(0, str(a.code.resolve()))
    from trajaudit import load_many, load_path
    from trajaudit.engine.run.evidence import rules_for
    from trajaudit.engine.run.pipeline import AuditSpec, build_context
    from trajaudit.engine.validation import stepper
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
    n = len(work)
    if a.shared_only:
        best = min(batch() for _ in range(a.rounds))
        print(f"{a.data}: {n} runs, {a.rounds} batches; rule stage {best * 1000 / n:.3f} ms/run (min)")
        return 0
    old = stepper.SHARE_UNITS
    try:
        for i in range(2 * a.rounds):
            stepper.SHARE_UNITS = bool(i % 2)
            times[stepper.SHARE_UNITS].append(batch())
    finally:
        stepper.SHARE_UNITS = old
    own, shared = min(times[False]) * 1000 / n, min(times[True]) * 1000 / n
    print(f"{a.data}: {n} runs, {a.rounds} batches each; rule stage ms/run (min): every rule its own lets "
          f"{own:.3f}, equal lets shared {shared:.3f} ({own / shared:.2f}x)")
    if a.per_rule:
        per_rule(work, batch, n)
    return 0


def instructions(code: Path, data: str) -> float:
    """The rule stage's instructions per run (millions) with ``code``'s trajaudit: cachegrind totals of
    ``--shared-only --rounds 5`` minus ``--rounds 1``, divided by the runs of the four extra batches
    (two gave ±0.1M per tau run between repeated measurements)."""
    totals, runs = [], 0
    with tempfile.TemporaryDirectory(prefix="rule-units-cg-") as td:
        env = {**os.environ, "PYTHONHASHSEED": "0", "TRAJAUDIT_NO_CACHE": "1"}
        for rounds in (1, 5):
            cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={td}/cg.out",
                   sys.executable, str(Path(__file__).resolve()), "--code", str(code), "--data", data,
                   "--shared-only", "--rounds", str(rounds)]
            got = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
            totals.append(int(re.search(r"I\s+refs:\s+([\d,]+)", got.stderr).group(1).replace(",", "")))
            runs = int(re.search(r"(\d+) runs", got.stdout).group(1))
    return (totals[1] - totals[0]) / (4 * runs) / 1e6


def per_rule(work: list, batch, n: int) -> None:
    """Each rule's µs per run and per unit, from a timer around ``Stepper.run_units`` (sharing on)."""
    acc: collections.Counter[str] = collections.Counter()
    units: collections.Counter[str] = collections.Counter()
    from trajaudit.engine.validation import stepper

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
