"""Loader benchmark: CPU time to load (parse, detect, convert, schema-validate) all 155 real runs.

Run: python benchmarks/bench_loader.py [--repeat N]
Target (issue 2): well under 1 s of CPU for the 29 tau-retail + 126 Who&When runs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from trajaudit import load_many
from trajaudit.engine.trace.adapters import LoadOptions

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PATHS = [DATA / "tau_retail" / "trajectories.json", DATA / "who_and_when" / "algorithm_generated"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for validate in (True, False):
        times = []
        for _ in range(args.repeat):
            t0 = time.process_time()
            res = load_many(PATHS, options=LoadOptions(validate=validate))
            times.append(time.process_time() - t0)
        n = len(res.trajectories)
        steps = sum(len(t.steps) for t in res.trajectories)
        print(f"validate={validate!s:5}  runs={n}  steps={steps}  best CPU {min(times):.3f} s  "
              f"median {sorted(times)[len(times) // 2]:.3f} s  ({n / min(times):.0f} runs/s)")


if __name__ == "__main__":
    main()
