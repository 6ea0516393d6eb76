"""Offline-audit throughput (issue 6): audits per second on tau-retail and Who&When, one core.

For each data set, a *batch* is what ``trajaudit audit FILES`` does in one process: read and parse
the files, convert and schema-validate every run, build the audit context (compile rule packs), then
for every run evaluate the rules, build the claim graph and run the offline judge. Time is CPU time
of this single-threaded process (``time.process_time``), so the figure is per core and does not
depend on other load on the machine.

- *start-up* (excluded, reported): interpreter plus importing the pipeline's modules.
- *first batch*: also pays one-time work (compiling the schema fast path and rule regexes, loading
  the taxonomy).
- *batch (median)*: later batches, with the per-process text-analysis cache
  (``trajaudit.engine.evidence.clear_caches``) cleared before each one, so a batch gains only from texts
  repeated *within* it — as a real batch does — never from the previous repetition.
- *stage split* (ms per run, median over the repetitions): ``load`` (read, parse, convert,
  validate), ``rules``, ``claims`` (evidence index, extraction, support, graph, propagation),
  ``judge`` (offline judge + result), ``setup`` (audit context, per batch).

Run: ``python benchmarks/bench_audit.py [--repeat 7] [--rules PACK ...] [--profile N]``.
The numbers committed in benchmarks/bench_audit.txt come from the plain command.
"""

from __future__ import annotations

import time

_T_START = time.process_time()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import platform  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trajaudit.engine.claims  # noqa: E402,F401 - start-up: the stages' modules
import trajaudit.engine.judge  # noqa: E402,F401
import trajaudit.engine.rule_eval  # noqa: E402,F401
from trajaudit import load_many  # noqa: E402
from trajaudit.engine.evidence import clear_caches, gather  # noqa: E402
from trajaudit.engine.pipeline import AuditSpec, audit_one, audit_trajectories, build_context  # noqa: E402

_T_IMPORTS = time.process_time() - _T_START

DATA = ROOT.parent / "shared" / "data"
SETS = {
    "tau-retail (29 runs, 1 file)": DATA / "tau_retail" / "trajectories.json",
    "Who&When algorithm-generated (126 files)": DATA / "who_and_when" / "algorithm_generated",
}
STAGES = ("load", "setup", "rules", "claims", "judge")


def batch(path: Path, spec: AuditSpec) -> tuple[int, float]:
    """One plain batch (what the CLI does, serially): ``(runs audited, CPU seconds)``."""
    t0 = time.process_time()
    runs = load_many([path]).trajectories
    res = audit_trajectories(runs, spec)
    dt = time.process_time() - t0
    assert not res.problems, res.problems[:3]
    return len(res.results), dt


def staged(path: Path, spec: AuditSpec) -> dict[str, float]:
    """One instrumented batch: CPU seconds per stage (see the module docstring)."""
    out = dict.fromkeys(STAGES, 0.0)
    t0 = time.process_time()
    runs = load_many([path]).trajectories
    t1 = time.process_time()
    ctx = build_context(spec)
    out["load"], out["setup"] = t1 - t0, time.process_time() - t1
    for t in runs:
        bundle = gather(t, ctx)
        t2 = time.process_time()
        audit_one(t, spec.strategy, ctx)  # the judge reads the cached evidence
        out["judge"] += time.process_time() - t2
        out["rules"] += bundle.timings["rules"]
        out["claims"] += bundle.timings["claims"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7, help="batches per data set after the first (default 7)")
    ap.add_argument("--rules", nargs="*", default=[], help="rule packs to apply (paths or shipped names)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also print the N most expensive functions of one tau batch (cProfile)")
    args = ap.parse_args(argv)
    spec = AuditSpec(rules=tuple(args.rules))
    print(f"python {platform.python_version()} on {platform.machine()}; CPU time of one process (one core); "
          f"rules: {', '.join(args.rules) or 'none'}")
    print(f"start-up (interpreter + imports, excluded): {_T_IMPORTS * 1000:.0f} ms in imports")
    for label, path in SETS.items():
        if not path.exists():
            print(f"{label}: data not found at {path}; skipped")
            continue
        n, first = batch(path, spec)
        rates, split = [], {k: [] for k in STAGES}
        for _ in range(args.repeat):
            clear_caches()
            rates.append(n / batch(path, spec)[1])
            clear_caches()
            for k, v in staged(path, spec).items():
                split[k].append(v * 1000 / n)
        med = statistics.median(rates)
        print(f"\n{label}")
        print(f"  first batch : {n / first:7.1f} audits/s ({first * 1000:.0f} ms for {n} runs)")
        print(f"  batch median: {med:7.1f} audits/s ({1000 / med:.2f} ms/run; min {min(rates):.1f}, "
              f"max {max(rates):.1f}, {args.repeat} batches)")
        parts = {k: statistics.median(v) for k, v in split.items()}
        total = sum(parts.values())
        print("  stage split (ms/run): " + ", ".join(f"{k} {v:.2f} ({100 * v / total:.0f}%)" for k, v in parts.items()))
    if args.profile:
        tau = next(iter(SETS.values()))
        clear_caches()
        prof = cProfile.Profile()
        prof.runcall(batch, tau, spec)
        print(f"\nprofile of one tau batch (cProfile, top {args.profile} by own time):")
        pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
