"""Throughput of this code against the previous release, side by side in one run (issue 22).

The host is shared and loaded, so absolute audits/s drift from minute to minute; the reliable figure
is the *ratio* of two codes measured alternately in the same minutes. This script:

1. gets the previous release's code: ``--base DIR`` (a checkout, e.g. ``git worktree add /tmp/perf_base
   0a5dc19``), else ``git archive`` of ``--base-rev`` (default ``0a5dc19``, the commit before issue 22)
   into a temporary folder;
2. **warm batch** (``--rounds`` rounds, alternating base/current, each side in its own subprocess):
   the process imports the pipeline and audits the tau-retail file once (warm-up: the on-disk pack
   cache filled, lazy imports done), then audits it ``--batches`` times, each batch after
   ``clear_caches()`` (compiled packs, regex and text memos: a batch gains only from what repeats
   within it, as in ``bench_audit.py``), with the default packs **and** ``--tools``; CPU time of the
   process (one core). It reports the median audits/s and the per-stage split (ms per run: load,
   setup, rules, claims, judge; setup is the context built as ``audit_trajectories`` builds it —
   ``build_frozen_context`` where the code has one — plus the domain packs the runs select);
3. **fresh CLI** (``--cli-rounds`` alternating pairs): ``python -m trajaudit audit TAU --tools TOOLS -q
   -o FILE`` as a new process (pack cache warm), CPU time (user + system) of the child, in runs/s, in
   two regimes: trajaudit's modules compiled from source in every process (``PYTHONDONTWRITEBYTECODE=1``,
   how this host runs checkouts; installed libraries read pip's ``.pyc`` files) and everything from
   cached bytecode (how an installed package starts: pip writes the ``.pyc`` files at install time),
   each side's ``.pyc`` in its own temporary folder;
4. prints both and the ratios;
5. with ``--instructions``: the warm batch's instruction count per run of each side, which the load
   of the machine does not change: each side's worker runs under ``valgrind --tool=cachegrind
   --cache-sim=no`` twice, with 0 and with ``--batches`` timed batches (``--rounds`` and the stage
   split are not used); the difference of the two "I refs" totals, divided by the batches and the 29
   runs, is one warm batch per run (imports, warm-up and start-up cancel out).

Run: ``python benchmarks/bench_vs_release.py [--rounds 5] [--batches 3] [--cli-rounds 5]``.
Output is recorded in ``benchmarks/bench_vs_release.txt`` and docs/perf.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
TAU = DATA / "tau_retail" / "trajectories.json"
TOOLS = DATA / "tau_retail" / "tools.json"

WORKER = r"""
import gc, json, statistics, sys, time
sys.path.insert(0, {root!r})
from trajaudit import load_many
try:  # the layout after the redesign (issue 16)
    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.evidence import clear_caches, gather
    from trajaudit.engine.run.pipeline import AuditSpec, build_context
    from trajaudit.engine.strategies.registry import default_strategies
    try:  # as audit_trajectories builds it: frozen with the heap before the collector resumes
        from trajaudit.engine.run.pipeline import build_frozen_context as build_context
    except ImportError:
        pass

    def judge(t, ctx, bundle):
        return default_strategies().get(spec.strategy).diagnose(t, bundle, ctx)
except ImportError:  # the previous release's layout
    from trajaudit.engine.evidence import clear_caches, gather
    from trajaudit.engine.pipeline import AuditSpec, audit_one, audit_trajectories, build_context

    def judge(t, ctx, bundle):
        return audit_one(t, spec.strategy, ctx)  # reads the evidence gather cached on the context
path, spec = {path!r}, AuditSpec(tools={tools!r})

def batch():
    t0 = time.process_time()
    runs = load_many([path]).trajectories
    res = audit_trajectories(runs, spec)
    assert not res.problems and len(res.results) == len(runs)
    return len(runs), time.process_time() - t0

def staged():
    out = dict.fromkeys(("load", "setup", "rules", "claims", "judge"), 0.0)
    t0 = time.process_time()
    runs = load_many([path]).trajectories
    t1 = time.process_time()
    ctx = build_context(spec)
    for dp in (ctx.domain_packs if hasattr(ctx, "domain_packs") else ctx.extra.get("domain_packs", ())):
        if any(dp.applies({{n for s in t.steps for n in s.tool_names}}) for t in runs):
            dp.rules
    out["load"], out["setup"] = t1 - t0, time.process_time() - t1
    kept = []
    gc.freeze()
    try:
        for t in runs:
            b = gather(t, ctx)
            t2 = time.process_time()
            gc.disable()  # as audit_one: no collection of the run's evidence while the strategy runs
            kept.append(judge(t, ctx, b))
            gc.enable()
            gc.freeze()
            out["judge"] += time.process_time() - t2
            out["rules"] += b.timings["rules"]
            out["claims"] += b.timings["claims"]
    finally:
        gc.unfreeze()
    return {{k: v * 1000 / len(runs) for k, v in out.items()}}

clear_caches(); batch()  # warm-up
rates, splits = [], []
for _ in range({batches}):
    clear_caches(); n, dt = batch(); rates.append(n / dt)
    clear_caches(); splits.append(staged())
print(json.dumps({{"rate": statistics.median(rates) if rates else 0.0,
                  "split": {{k: statistics.median(s[k] for s in splits) for k in (splits[0] if splits else {{}})}}}}))
"""


def previous_release(base: str | None, rev: str, tmp: Path) -> Path:
    """The previous release's source tree: ``base`` when given, else ``git archive REV`` unpacked in ``tmp``."""
    if base:
        return Path(base).resolve()
    out = tmp / "base"
    out.mkdir()
    tar = tmp / "base.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), rev], check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(out, filter="data")
    return out


def warm(root: Path, batches: int, env: dict[str, str]) -> dict:
    code = WORKER.format(root=str(root), path=str(TAU), tools=str(TOOLS), batches=batches)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env)
    if res.returncode:
        raise SystemExit(f"worker failed for {root}:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def instructions(root: Path, batches: int, env: dict[str, str], tmp: Path) -> int:
    """Instructions executed by the warm worker with ``batches`` timed batches (cachegrind's ``I refs``)."""
    code = WORKER.format(root=str(root), path=str(TAU), tools=str(TOOLS), batches=batches)
    out = tmp / f"cg-{root.name}-{batches}.out"
    res = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                          sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env)
    if res.returncode:
        raise SystemExit(f"valgrind worker failed for {root}:\n{res.stderr[-2000:]}")
    for line in res.stderr.splitlines():
        if "I   refs:" in line or "I refs:" in line:
            return int(line.split(":")[1].strip().replace(",", ""))
    raise SystemExit(f"no instruction count in valgrind's output:\n{res.stderr[-1000:]}")


def cli(root: Path, env: dict[str, str], out: Path) -> float:
    """CPU seconds (user + system) of one fresh ``python -m trajaudit audit`` on the tau file with tools."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run([sys.executable, "-m", "trajaudit", "audit", str(TAU), "--tools", str(TOOLS), "-q",
                          "-o", str(out)], capture_output=True, text=True, cwd=root, env={**env, "PYTHONPATH": str(root)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode not in (0, 1):
        raise SystemExit(f"CLI failed for {root}:\n{res.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="a checkout of the previous release (default: git archive of --base-rev)")
    ap.add_argument("--base-rev", default="0a5dc19", help="the previous release's commit (default 0a5dc19)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating warm rounds (default 5)")
    ap.add_argument("--batches", type=int, default=3, help="timed batches per warm process (default 3)")
    ap.add_argument("--cli-rounds", type=int, default=5, help="alternating fresh-CLI pairs (default 5)")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions of a warm batch with valgrind (cachegrind) instead of timing")
    args = ap.parse_args(argv)
    if not TAU.exists():
        print(f"tau-retail data not found at {TAU}; nothing measured")
        return 0
    with tempfile.TemporaryDirectory(prefix="trajaudit-vs-release-") as td:
        tmp = Path(td)
        base = previous_release(args.base, args.base_rev, tmp)
        sides = {"previous": base, "current": ROOT}
        # one private pack cache per side (each side's code writes its own entries), warm after the first use
        envs = {name: {**os.environ, "TRAJAUDIT_CACHE_DIR": str(tmp / f"cache-{name}")} for name in sides}
        for env in envs.values():
            env.pop("TRAJAUDIT_NO_CACHE", None)
        n_runs = 29
        if args.instructions:
            print(f"instructions per run of a warm batch (valgrind cachegrind; batches {args.batches} minus 0)")
            per = {}
            for name, root in sides.items():
                warm(root, 0, envs[name])  # the pack cache entries written, outside the counts
                total = instructions(root, args.batches, envs[name], tmp) - instructions(root, 0, envs[name], tmp)
                per[name] = total / args.batches / n_runs
                print(f"  {name:9s}: {per[name] / 1e6:8.2f} M instructions per run")
            print(f"  ratio previous/current: {per['previous'] / per['current']:.2f}x")
            return 0
        print(f"python {platform.python_version()}; one process per measurement, CPU time (one core); "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print(f"previous release: {args.base or args.base_rev} ({base}); current: {ROOT}")
        print(f"tau-retail ({TAU.name}) with --tools {TOOLS.name}, default packs\n")
        warm_res: dict[str, list[dict]] = {k: [] for k in sides}
        for r in range(args.rounds):
            for name in (("previous", "current") if r % 2 == 0 else ("current", "previous")):
                warm_res[name].append(warm(sides[name], args.batches, envs[name]))
        print(f"warm batch ({args.rounds} alternating rounds x {args.batches} batches; median of round medians):")
        rate = {}
        for name in sides:
            rate[name] = statistics.median(x["rate"] for x in warm_res[name])
            split = {k: statistics.median(x["split"][k] for x in warm_res[name]) for k in warm_res[name][0]["split"]}
            print(f"  {name:9s}: {rate[name]:7.1f} audits/s ({1000 / rate[name]:.2f} ms/run); split ms/run: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
        ratios = [c["rate"] / p["rate"] for p, c in zip(warm_res["previous"], warm_res["current"], strict=True)]
        print(f"  ratio current/previous: {rate['current'] / rate['previous']:.2f}x (per round: "
              + ", ".join(f"{x:.2f}" for x in ratios) + ")")
        # two start-up regimes: "project compiled from source" is how this host runs checkouts
        # (PYTHONDONTWRITEBYTECODE=1: every trajaudit module is compiled in every process; installed
        # libraries still read the .pyc files pip wrote), "bytecode" reads cached .pyc files for every
        # module (what an installed trajaudit does: pip compiles them at install time)
        regimes = {
            "project compiled from source":
                {name: {**envs[name], "PYTHONDONTWRITEBYTECODE": "1"} for name in sides},
            "bytecode (cached .pyc, as installed)":
                {name: {**{k: v for k, v in envs[name].items() if k != "PYTHONDONTWRITEBYTECODE"},
                        "PYTHONPYCACHEPREFIX": str(tmp / f"pyc-{name}")} for name in sides},
        }
        stale = [str(p) for root in sides.values() for p in (root / "trajaudit").rglob("__pycache__")][:3]
        if stale:
            print(f"note: __pycache__ folders in a checkout ({', '.join(stale)} …): the 'from source' regime "
                  "reads them for that side")
        for regime, renvs in regimes.items():
            cpu: dict[str, list[float]] = {k: [] for k in sides}
            for name in sides:  # one unmeasured call each: the pack cache entries (and .pyc files) written
                cli(sides[name], renvs[name], tmp / f"{name}.jsonl")
            if args.cli_rounds <= 0:  # no timing (--cli-rounds 0): only the diagnoses are compared below
                continue
            for r in range(args.cli_rounds):
                for name in (("previous", "current") if r % 2 == 0 else ("current", "previous")):
                    cpu[name].append(cli(sides[name], renvs[name], tmp / f"{name}.jsonl"))
            print(f"\nfresh CLI `python -m trajaudit audit tau --tools tools -q`, {regime} ({args.cli_rounds} "
                  "alternating pairs; CPU time of the child, interpreter start-up included):")
            for name in sides:
                med = statistics.median(cpu[name])
                print(f"  {name:9s}: {med:.3f} s CPU -> {n_runs / med:6.1f} runs/s")
            a, b = statistics.median(cpu["previous"]), statistics.median(cpu["current"])
            print(f"  ratio current/previous: {a / b:.2f}x")
        same = (tmp / "previous.jsonl").read_text() == (tmp / "current.jsonl").read_text()
        print(f"\nthe two CLIs wrote {'identical' if same else 'DIFFERENT'} diagnoses")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
