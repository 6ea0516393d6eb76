"""The claims stage as the audit runs it, alone: ``build_claim_graph``, ``to_records``, ``propagate`` and the
unsupported-claim rows (``engine/evidence.gather``), per run of a batch, the claim caches cleared before
each batch (as ``bench_audit.py``'s batch figures are). Prints CPU ms/run, the minimum over batches with
the garbage collector off.

Run: python benchmarks/claims_stage.py [--data tau|ww] [--batches N]

Noise-free comparisons (a shared machine varies by ±15%): count instructions with
``valgrind --tool=cachegrind --cache-sim=no python benchmarks/claims_stage.py --data tau --batches N``
for N = 0 and N = 2; half the difference of the two "I refs" is one batch (loading, imports and the
warm-up batch cancel out). See docs/perf.md (claims stage, third pass).

Inside an audit: ``--after-rules`` runs each run's rule stage first (the shipped packs and, for tau,
``--tools``' tools.json: ``gather``'s order; untimed) and times the claims stage after it (what
``bench_audit.py``'s split calls claims; the two stages share memos, e.g. the parsed JSON of tool outputs,
``engine/trace/json_content.py``). Instructions: as above with ``--after-rules``, minus the same with
``--after-rules --rules-only`` (the batches without the claims stage).

Side by side: ``--against CHECKOUT`` (another checkout of trajaudit, e.g. ``git worktree add /tmp/base
283ae07``; its own ``benchmarks/claims_stage.py`` is run) measures both codes alternately, each in its own
subprocess, ``--rounds`` times per data set (tau and Who&When), and prints each round's ms/run and the
median ratio; ``--instructions`` adds the instruction count of one batch per run of each side
(cachegrind, as above; needs valgrind). Output recorded in ``benchmarks/claims_stage.txt``.
"""

from __future__ import annotations

import argparse
import gc
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's trajaudit wins

from trajaudit import load_many  # noqa: E402
from trajaudit.engine.claims import build_claim_graph, clear_caches  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
PATHS = {"tau": DATA / "tau_retail" / "trajectories.json", "ww": DATA / "who_and_when" / "algorithm_generated"}


def stage(t, config=None) -> int:
    """One run's claims stage (what ``gather`` does after the rules); returns the unsupported claims."""
    cg = build_claim_graph(t, config)
    cg.to_records()
    cg.propagate()
    rows = [(c.id, " ".join(c.text.split())[:80], c.status.value) for c in cg.claims if c.status.unsupported]
    return len(rows)


def batch(runs) -> int:
    clear_caches()
    return sum(stage(t) for t in runs)


def audit_batch(runs, ctx, rules_only: bool = False) -> tuple[int, float]:
    """One batch as ``gather`` orders it: per run the rule stage, then the claims stage (timed);
    ``rules_only`` leaves the claims stage out. Returns (unsupported claims, claims CPU seconds)."""
    from trajaudit.engine.run.evidence import clear_caches as clear_all
    from trajaudit.engine.run.evidence import evaluate_rules, rules_for

    clear_all(packs=False)
    unsupported, spent = 0, 0.0
    for t in runs:
        evaluate_rules(t, rules_for(t, ctx)[0], ctx)
        if rules_only:
            continue
        t0 = time.process_time()
        unsupported += stage(t, ctx.config)
        spent += time.process_time() - t0
    return unsupported, spent


def _ms_per_run(script: Path, data: str, batches: int) -> float:
    """Run one side's ``claims_stage.py`` in a subprocess; its printed ms/run."""
    out = subprocess.run([sys.executable, str(script), "--data", data, "--batches", str(batches)],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"([\d.]+) ms/run", out).group(1))


def _instructions(script: Path, data: str, runs: int) -> float:
    """Instructions of one batch per run (millions): cachegrind with 0 and 2 batches, half the difference."""
    refs = []
    for n in (0, 2):
        got = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                              sys.executable, str(script), "--data", data, "--batches", str(n)],
                             capture_output=True, text=True, check=True).stderr
        refs.append(int(re.search(r"I\s+refs:\s+([\d,]+)", got).group(1).replace(",", "")))
    return (refs[1] - refs[0]) / 2 / runs / 1e6


def side_by_side(against: Path, rounds: int, batches: int, instructions: bool) -> None:
    """Both codes alternately (see the module docstring); prints per data set and the ratios."""
    other = against / "benchmarks" / "claims_stage.py"
    if not other.exists():
        sys.exit(f"--against {against}: no benchmarks/claims_stage.py there")
    mine = Path(__file__).resolve()
    for data in ("tau", "ww"):
        runs = len(load_many([PATHS[data]]).trajectories)
        base, cur = [], []
        for _ in range(rounds):
            base.append(_ms_per_run(other, data, batches))
            cur.append(_ms_per_run(mine, data, batches))
        ratios = [b / c for b, c in zip(base, cur, strict=True)]
        print(f"{data}: {runs} runs, claims stage ms/run CPU (min of {batches} batches, gc off), {rounds} "
              f"alternating rounds: base {' '.join(f'{x:.2f}' for x in base)} (median {statistics.median(base):.2f}); "
              f"current {' '.join(f'{x:.2f}' for x in cur)} (median {statistics.median(cur):.2f}); "
              f"ratio median {statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})")
        if instructions:
            if shutil.which("valgrind") is None:
                print("  instructions: valgrind not found, skipped")
                continue
            b, c = _instructions(other, data, runs), _instructions(mine, data, runs)
            print(f"  instructions per run (one batch, cachegrind): base {b:.2f}M, current {c:.2f}M "
                  f"({(c - b) / b * 100:+.1f}%)")


def after_rules(runs, data: str, batches: int, rules_only: bool) -> None:
    """``--after-rules``: batches of :func:`audit_batch`, the collector paused as ``gather`` pauses it."""
    from trajaudit.engine.run.pipeline import AuditSpec, build_context

    tools = PATHS[data].parent / "tools.json" if data == "tau" else None
    ctx = build_context(AuditSpec(tools=str(tools) if tools else None))
    unsupported, _ = audit_batch(runs, ctx, rules_only)  # warm-up
    gc.disable()
    best = min((audit_batch(runs, ctx, rules_only)[1] for _ in range(batches)), default=0.0)
    gc.enable()
    if batches and not rules_only:
        print(f"{data}: {len(runs)} runs, {unsupported} unsupported claims; claims stage after the rules "
              f"{best * 1000 / len(runs):.3f} ms/run CPU (min of {batches} batches, gc off)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=sorted(PATHS), default="tau")
    ap.add_argument("--batches", type=int, default=7, help="timed batches after one warm-up batch (default 7)")
    ap.add_argument("--against", type=Path, help="another checkout: measure both alternately (tau and ww)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per data set with --against")
    ap.add_argument("--instructions", action="store_true", help="with --against: also count instructions")
    ap.add_argument("--after-rules", action="store_true", help="run each run's rule stage first (see above)")
    ap.add_argument("--rules-only", action="store_true", help="with --after-rules: leave the claims stage out")
    args = ap.parse_args()
    if args.against is not None:
        side_by_side(args.against, args.rounds, args.batches, args.instructions)
        return
    runs = load_many([PATHS[args.data]]).trajectories
    if args.after_rules:
        after_rules(runs, args.data, args.batches, args.rules_only)
        return
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
