"""Offline-audit throughput (issue 6): audits per second on tau-retail and Who&When, one core.

For each data set, a *batch* is what ``trajaudit audit FILES`` does in one process: read and parse
the files, convert and schema-validate every run, build the audit context (compile rule packs), then
for every run evaluate the rules, build the claim graph and run the offline judge. Time is CPU time
of this single-threaded process (``time.process_time``), so the figure is per core and does not
depend on other load on the machine (contention for a shared core still slows it somewhat).

Two configurations: ``default`` is the CLI's (the shipped generic pack and the domain packs the
run's tools select, e.g. ``tau_retail``); ``no packs`` (``AuditSpec(default_packs=False)``) is the
evidence pipeline alone (loading, claim graph, judge) — where the claim graph is the only evidence.

- *start-up* (excluded, reported): interpreter plus importing the pipeline's modules.
- *fresh process*: the whole thing in a new interpreter, timed from after ``import trajaudit`` and the
  pipeline module (the issue's measurement): lazy imports and one-time work (compiling the schema
  fast path, the shipped packs and regexes, reading the taxonomy) are included.
- *batch (median)*: later batches, every per-process cache (``trajaudit.engine.run.evidence.clear_caches``:
  compiled shipped packs, shared regex results, text analyses) cleared before each, so a batch gains
  only from what repeats *within* it — as a real batch does — never from the previous repetition.
- *stage split* (ms per run, median): ``load`` (read, parse, convert, validate), ``setup`` (audit
  context: rule packs), ``rules``, ``claims`` (evidence index, extraction, support, graph,
  propagation), ``judge`` (the strategy's diagnosis from the evidence gathered once, as
  ``pipeline.audit_one`` hands it over).

Run: ``python benchmarks/bench_audit.py [--repeat 5] [--rules PACK ...] [--profile N]``.
The numbers in benchmarks/bench_audit.txt come from the plain command.
"""

from __future__ import annotations

import time

_T_START = time.process_time()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# a private pack cache (see the docstring), removed when the process ends
_CACHE = tempfile.TemporaryDirectory(prefix="trajaudit-bench-cache-")
os.environ["TRAJAUDIT_CACHE_DIR"] = _CACHE.name
os.environ.pop("TRAJAUDIT_NO_CACHE", None)

import trajaudit.engine.claims  # noqa: E402,F401 - start-up: the stages' modules
import trajaudit.engine.strategies.offline_judge  # noqa: E402,F401
import trajaudit.engine.validation.rule_eval  # noqa: E402,F401
from trajaudit import load_many  # noqa: E402
from trajaudit.engine.run.batch import audit_trajectories  # noqa: E402
from trajaudit.engine.run.evidence import clear_caches, gather  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, build_context  # noqa: E402
from trajaudit.engine.strategies.registry import default_strategies  # noqa: E402

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
    for dp in ctx.domain_packs:  # compiled on first use: count it here, as before
        if any(dp.applies({n for s in t.steps for n in s.tool_names}) for t in runs):
            dp.rules  # noqa: B018 - compiles the pack
    out["load"], out["setup"] = t1 - t0, time.process_time() - t1
    kept = []  # the results, kept to the end as audit_trajectories keeps them
    strategy = default_strategies().get(spec.strategy)
    gc.freeze()  # the collector regime of audit_trajectories (pipeline.freeze_long_lived)
    try:
        for t in runs:
            bundle = gather(t, ctx)
            t2 = time.process_time()
            gc.disable()  # as audit_one: no collection of the run's evidence while the strategy runs
            kept.append(strategy.diagnose(t, bundle, ctx))  # the evidence is passed in, as audit_one does
            gc.enable()
            gc.freeze()
            out["judge"] += time.process_time() - t2
            out["rules"] += bundle.timings["rules"]
            out["claims"] += bundle.timings["claims"]
    finally:
        gc.unfreeze()
    return out


FRESH = """
import sys, time
sys.path.insert(0, {root!r})
from trajaudit import load_many
from trajaudit.engine.run.batch import audit_trajectories
from trajaudit.engine.run.pipeline import AuditSpec
t0 = time.process_time()
ts = load_many([{path!r}]).trajectories
audit_trajectories(ts, AuditSpec(default_packs={packs}))
print(len(ts) / (time.process_time() - t0))
"""


def fresh_process(path: Path, packs: bool, times: int = 3, cold: bool = False) -> float:
    """Median audits/s of a batch run in a new interpreter, timed after the imports (see above);
    ``cold``: without the on-disk pack cache."""
    code = FRESH.format(root=str(ROOT), path=str(path), packs=packs)
    env = {**os.environ, **({"TRAJAUDIT_NO_CACHE": "1"} if cold else {})}
    rates = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                  cwd=ROOT, env=env).stdout.split()[-1]) for _ in range(times)]
    return statistics.median(rates)


class _NoCache:
    """``with _NoCache():`` the block runs without the on-disk pack cache (a cold load)."""

    def __enter__(self) -> None:
        os.environ["TRAJAUDIT_NO_CACHE"] = "1"

    def __exit__(self, *exc: object) -> None:
        os.environ.pop("TRAJAUDIT_NO_CACHE", None)


def report(label: str, path: Path, spec: AuditSpec, repeat: int) -> None:
    clear_caches()
    n, _ = batch(path, spec)  # warm-up: one-time work (regexes, schema fast path, taxonomy) done, cache written
    rates, split = [], {k: [] for k in STAGES}
    cold_rates, cold_setup = [], []
    for _ in range(repeat):
        clear_caches()
        rates.append(n / batch(path, spec)[1])
        clear_caches()
        for k, v in staged(path, spec).items():
            split[k].append(v * 1000 / n)
        if spec.default_packs or spec.rules:
            with _NoCache():
                clear_caches()
                cold_rates.append(n / batch(path, spec)[1])
                clear_caches()
                cold_setup.append(staged(path, spec)["setup"] * 1000)
    med = statistics.median(rates)
    print(f"  {label}")
    packs = bool(spec.default_packs or spec.rules)
    warm = " (warm pack cache)" if packs else ""
    print(f"    fresh process: {fresh_process(path, spec.default_packs):7.1f} audits/s{warm} (median of 3; "
          "one-time work included)")
    if packs:
        print(f"                   {fresh_process(path, spec.default_packs, cold=True):7.1f} audits/s cold (no pack "
              "cache)")
    print(f"    batch median : {med:7.1f} audits/s{warm} ({1000 / med:.2f} ms/run; min {min(rates):.1f}, "
          f"max {max(rates):.1f}, {repeat} batches)")
    if packs:
        cm = statistics.median(cold_rates)
        print(f"                   {cm:7.1f} audits/s cold ({1000 / cm:.2f} ms/run)")
    parts = {k: statistics.median(v) for k, v in split.items()}
    total = sum(parts.values())
    print("    stage split (ms/run): " + ", ".join(f"{k} {v:.2f} ({100 * v / total:.0f}%)" for k, v in parts.items()))
    if packs:
        print(f"    setup per batch: {parts['setup'] * n:.1f} ms warm, {statistics.median(cold_setup):.1f} ms cold")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="batches per configuration after the first (default 5)")
    ap.add_argument("--rules", nargs="*", default=[], help="extra rule packs to apply (paths or shipped names)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also print the N most expensive functions of one tau batch (cProfile)")
    args = ap.parse_args(argv)
    configs = {"default (shipped packs)": AuditSpec(rules=tuple(args.rules)),
               "no packs": AuditSpec(rules=tuple(args.rules), default_packs=False)}
    print(f"python {platform.python_version()} on {platform.machine()}; CPU time of one process (one core); "
          f"extra rules: {', '.join(args.rules) or 'none'}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores (a busy machine slows a process even in CPU time)")
    print(f"start-up (interpreter + imports, excluded): {_T_IMPORTS * 1000:.0f} ms in imports")
    for name, path in SETS.items():
        print(f"\n{name}")
        if not path.exists():
            print(f"  data not found at {path}; skipped")
            continue
        for label, spec in configs.items():
            report(label, path, spec, args.repeat)
    if args.profile:
        tau = next(iter(SETS.values()))
        clear_caches()
        prof = cProfile.Profile()
        prof.runcall(batch, tau, configs["default (shipped packs)"])
        print(f"\nprofile of one tau batch (cProfile, top {args.profile} by own time):")
        pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
