"""The offline judge's stage as the audit runs it, alone: ``OfflineJudge.diagnose`` on each run of a batch
right after that run's evidence was gathered (``run.evidence.gather``: rules and claims, not timed), with
the garbage collector paused as ``pipeline.audit_one`` pauses it. Prints CPU ms/run of the judge, the
minimum over batches; every per-process cache of the audit is cleared before each batch
(``run.evidence.clear_caches``), so a batch gains only from what repeats within it (issue 22).

The judge reads each run's evidence for the first time, as in the pipeline: lazy parts of the evidence
(a record's rendered bindings, a run's indexes) are paid by whichever stage reads them first, so judging
the same gathered evidence again would flatter it; each batch gathers afresh.

Run: python benchmarks/judge_stage.py [--data tau|ww] [--batches N] [--code CHECKOUT]

``tau`` is the tau-retail file with ``--tools`` and the default packs (what ``bench_vs_release.py``
times), ``ww`` the 126 Who&When runs with the default packs. ``--code DIR`` imports trajaudit from
another checkout (e.g. ``git worktree add --detach /tmp/base 027f145``) instead of this one.

Side by side: ``--against CHECKOUT`` runs this script for both codes alternately, each in its own
subprocess, ``--rounds`` times per data set, and prints each round's ms/run and the median ratio;
``--instructions`` adds the instructions of the judge stage per run of each side, which the load of the
machine does not change: ``valgrind --tool=cachegrind`` runs the worker twice per side, with one batch
judged and with the same batch gathered but not judged (``--no-judge``); the difference of the two
"I refs" totals, divided by the runs, is the judge (imports, loading, the warm-up batch and the evidence
cancel out). Output recorded in ``benchmarks/judge_stage.txt`` and docs/perf.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PATHS = {"tau": DATA / "tau_retail" / "trajectories.json", "ww": DATA / "who_and_when" / "algorithm_generated"}
TOOLS = DATA / "tau_retail" / "tools.json"


def worker(data: str, batches: int, judge: bool) -> None:
    """Load the runs, one warm-up batch (imports, pack compilation, shipped weights), then ``batches``
    batches; prints the judge's min ms/run (nothing when ``judge`` is false: evidence only)."""
    from trajaudit import load_many
    from trajaudit.engine.run.evidence import clear_caches, gather
    from trajaudit.engine.run.pipeline import AuditSpec, build_context
    from trajaudit.engine.strategies.registry import default_strategies

    spec = AuditSpec(tools=str(TOOLS)) if data == "tau" else AuditSpec()
    runs = load_many([PATHS[data]]).trajectories
    ctx = build_context(spec)
    strategy = default_strategies().get(spec.strategy)

    def batch(judged: bool) -> float:
        clear_caches(packs=False)
        kept, spent = [], 0.0
        for t in runs:
            bundle = gather(t, ctx)
            if judged:
                t0 = time.process_time()
                kept.append(strategy.diagnose(t, bundle, ctx))
                spent += time.process_time() - t0
        return spent

    gc.disable()  # as audit_one (gather and diagnose) and the batch's freezes: no collection inside the stage
    batch(True)
    best = min((batch(judge) for _ in range(batches)), default=0.0)
    if judge and batches:
        print(f"{data}: {len(runs)} runs; judge stage {best * 1000 / len(runs):.3f} ms/run CPU "
              f"(min of {batches} batches, gc paused)")


def _run(code: Path, data: str, batches: int) -> float:
    """One side's worker in a subprocess; its printed ms/run."""
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--code", str(code), "--data", data,
                          "--batches", str(batches)], capture_output=True, text=True, check=True).stdout
    return float(re.search(r"([\d.]+) ms/run", out).group(1))


def _instructions(code: Path, data: str, runs: int) -> float:
    """Instructions of the judge stage per run (millions): one batch judged minus the same batch not judged."""
    refs = []
    with tempfile.TemporaryDirectory(prefix="judge-stage-cg-") as td:
        # one hash seed for both runs (string hashing changes the evidence stage's instruction count by
        # more than the judge's between two processes otherwise) and a private pack cache, filled first:
        # a run that compiled the packs would count their compilation
        env = {**os.environ, "PYTHONHASHSEED": "0", "TRAJAUDIT_CACHE_DIR": f"{td}/packs"}
        env.pop("TRAJAUDIT_NO_CACHE", None)
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--code", str(code), "--data", data,
                        "--batches", "0"], capture_output=True, text=True, check=True, env=env)
        for flag in ([], ["--no-judge"]):
            cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={td}/cg.out",
                   sys.executable, str(Path(__file__).resolve()), "--code", str(code), "--data", data,
                   "--batches", "1", *flag]
            got = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stderr
            refs.append(int(re.search(r"I\s+refs:\s+([\d,]+)", got).group(1).replace(",", "")))
    return (refs[0] - refs[1]) / runs / 1e6


def side_by_side(against: Path, rounds: int, batches: int, instructions: bool) -> None:
    """Both codes alternately (see the module docstring); prints per data set and the ratios."""
    if not (against / "trajaudit").is_dir():
        sys.exit(f"--against {against}: not a trajaudit checkout")
    for data in ("tau", "ww"):
        runs = {"tau": 29, "ww": 126}[data]
        base: list[float] = []
        cur: list[float] = []
        for r in range(rounds):
            order = ((against, base), (ROOT, cur)) if r % 2 == 0 else ((ROOT, cur), (against, base))
            for code, out in order:
                out.append(_run(code, data, batches))
        ratios = [b / c for b, c in zip(base, cur, strict=True)]
        if rounds:
            print(f"{data}: {runs} runs, judge stage ms/run CPU (min of {batches} batches, gc paused), {rounds} "
                  f"alternating rounds: base {' '.join(f'{x:.3f}' for x in base)} "
                  f"(median {statistics.median(base):.3f}); current {' '.join(f'{x:.3f}' for x in cur)} "
                  f"(median {statistics.median(cur):.3f}); ratio median {statistics.median(ratios):.2f}x "
                  f"(rounds {min(ratios):.2f}-{max(ratios):.2f})", flush=True)
        if instructions:
            if shutil.which("valgrind") is None:
                print("  instructions: valgrind not found, skipped")
                continue
            b, c = _instructions(against, data, runs), _instructions(ROOT, data, runs)
            print(f"  instructions per run (one batch, cachegrind): base {b:.3f}M, current {c:.3f}M "
                  f"({(c - b) / b * 100:+.1f}%, {b / c:.2f}x fewer)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=sorted(PATHS), default="tau")
    ap.add_argument("--batches", type=int, default=5, help="timed batches after one warm-up batch (default 5)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the trajaudit checkout to import (default: this one)")
    ap.add_argument("--no-judge", action="store_true", help="gather the evidence only (the instruction baseline)")
    ap.add_argument("--against", type=Path, help="another checkout: measure both alternately (tau and ww)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="alternating rounds per data set with --against (0: instructions only)")
    ap.add_argument("--instructions", action="store_true", help="with --against: also count instructions")
    args = ap.parse_args()
    if not PATHS[args.data].exists():
        print(f"data not found at {PATHS[args.data]}; nothing measured")
        return
    if args.against is not None:
        side_by_side(args.against.resolve(), args.rounds, args.batches, args.instructions)
        return
    sys.path.insert(0, str(args.code.resolve()))
    os.chdir(args.code)
    worker(args.data, args.batches, not args.no_judge)


if __name__ == "__main__":
    main()
