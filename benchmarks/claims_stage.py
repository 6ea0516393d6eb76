"""The claims stage as the audit runs it, alone: ``build_claim_graph``, ``to_records``, ``propagate`` and the
unsupported-claim rows (``engine/evidence.gather``), per run of a batch, the claim caches cleared before
each batch (as ``bench_audit.py``'s batch figures are). Prints CPU ms/run, the minimum over batches with
the garbage collector off.

Run: python benchmarks/claims_stage.py [--data tau|ww] [--batches N]

Noise-free comparisons (a shared machine varies by ±15%): count instructions with
``valgrind --tool=cachegrind --cache-sim=no python benchmarks/claims_stage.py --data tau --batches N``
for N = 0 and N = 2; half the difference of the two "I refs" is one batch (loading, imports and the
warm-up batch cancel out). See docs/perf.md (claims stage, third pass).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's trajaudit wins

from trajaudit import load_many  # noqa: E402
from trajaudit.engine.claims import build_claim_graph, clear_caches  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
PATHS = {"tau": DATA / "tau_retail" / "trajectories.json", "ww": DATA / "who_and_when" / "algorithm_generated"}


def stage(t) -> int:
    """One run's claims stage (what ``gather`` does after the rules); returns the unsupported claims."""
    cg = build_claim_graph(t)
    cg.to_records()
    cg.propagate()
    rows = [(c.id, " ".join(c.text.split())[:80], c.status.value) for c in cg.claims if c.status.unsupported]
    return len(rows)


def batch(runs) -> int:
    clear_caches()
    return sum(stage(t) for t in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=sorted(PATHS), default="tau")
    ap.add_argument("--batches", type=int, default=7, help="timed batches after one warm-up batch (default 7)")
    args = ap.parse_args()
    runs = load_many([PATHS[args.data]]).trajectories
    unsupported = batch(runs)  # warm-up: imports, module regexes
    gc.disable()
    best = float("inf")
    for _ in range(args.batches):
        t0 = time.process_time()
        batch(runs)
        best = min(best, time.process_time() - t0)
    gc.enable()
    if args.batches:
        print(f"{args.data}: {len(runs)} runs, {unsupported} unsupported claims; claims stage "
              f"{best * 1000 / len(runs):.3f} ms/run CPU (min of {args.batches} batches, gc off)")


if __name__ == "__main__":
    main()
