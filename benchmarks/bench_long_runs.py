"""A run 100x longer costs at most 100x, per stage (issue 22), measured in one process.

Each tau-retail run is repeated 1x, 10x and 100x as one trajectory (``bench_rules.concatenated``:
indices shifted, call ids renamed so every copy's calls answer within the copy), and audited as the
pipeline does — default packs with ``--tools`` — stage by stage: ``rules`` (validation log),
``claims`` (claim graph, its records, propagation) and ``judge`` (the offline strategy, reading the
cached evidence). CPU time of this process; for each copy count the cost relative to 1x is printed
next to the length ratio (per stage, and overall): a stage is linear when ``cost(Nx)/cost(1x) <= N``.
Caches that hold text analyses across runs are cleared before each measurement (a repeated run would
otherwise hit them for every copy after the first, which would flatter the long runs).

Run: ``python benchmarks/bench_long_runs.py [--runs 6] [--copies 1 10 100]``; output in
``benchmarks/bench_long_runs.txt``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_rules import concatenated  # noqa: E402

from trajaudit import load_many  # noqa: E402
from trajaudit.engine.run.evidence import clear_caches, gather  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, build_context  # noqa: E402
from trajaudit.engine.strategies.registry import default_strategies  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
TAU = DATA / "tau_retail" / "trajectories.json"
TOOLS = DATA / "tau_retail" / "tools.json"


def measure(runs: list, copies: int, spec: AuditSpec) -> dict[str, float]:
    """CPU seconds per stage over ``runs`` each repeated ``copies`` times."""
    trajs = [concatenated(t, copies) for t in runs]
    ctx = build_context(spec)
    out = {"rules": 0.0, "claims": 0.0, "judge": 0.0}
    clear_caches(packs=False)
    gc.collect()
    gc.freeze()
    try:
        strategy = default_strategies().get(spec.strategy)
        for t in trajs:
            b = gather(t, ctx)
            t0 = time.process_time()
            was = gc.isenabled()
            gc.disable()  # as pipeline.audit_one runs the strategy
            try:
                strategy.diagnose(t, b, ctx)
            finally:
                if was:
                    gc.enable()
            out["judge"] += time.process_time() - t0
            out["rules"] += b.timings["rules"]
            out["claims"] += b.timings["claims"]
    finally:
        gc.unfreeze()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=6, help="tau runs to repeat (default 6)")
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 10, 100])
    args = ap.parse_args(argv)
    if not TAU.exists():
        print(f"tau-retail data not found at {TAU}; nothing measured")
        return 0
    runs = load_many([TAU]).trajectories[: args.runs]
    spec = AuditSpec(tools=str(TOOLS))
    measure(runs, 1, spec)  # warm-up: packs compiled, regexes and lazy imports done
    base = None
    print(f"{len(runs)} tau-retail runs ({sum(len(t.steps) for t in runs)} steps), default packs + --tools; "
          "CPU seconds per stage, and cost relative to 1x (linear: <= the length ratio)")
    for c in args.copies:
        m = measure(runs, c, spec)
        total = sum(m.values())
        if base is None:
            base = {**m, "total": total}
        rel = {k: m[k] / base[k] if base[k] else float("nan") for k in m}
        print(f"  {c:>4}x: " + ", ".join(f"{k} {m[k]:8.3f}s ({rel[k]:6.1f}x)" for k in m)
              + f", total {total:8.3f}s ({total / base['total']:6.1f}x)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
