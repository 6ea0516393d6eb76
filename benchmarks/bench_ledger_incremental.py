"""Per-added-step cost of the incremental claim ledger (issue 20: "the claim ledger is updated
incrementally"), beside rebuilding the ledger on the whole prefix, measured side by side in one process.

A long run repeats the turns of the longest tau-retail dev run (its steps after the system prompt,
call ids made unique per repetition) up to 5,000+ steps, in two variants:

- ``same``: the turns repeated verbatim (as ``bench_monitor.py`` builds them): after the first
  repetition every value is a reuse of an earlier claim;
- ``fresh``: every digit run of 4+ digits shifted per repetition (ids, emails, order numbers,
  amounts' integer parts), consistently in the user's, the tools' and the agent's texts and
  arguments: each repetition brings new claims, supported or not as in the original run, so claim
  assessment (evidence lookups, misses included) happens all along the run.

At each measured step k (10, 100, 1,000, 5,000) a :class:`ClaimGraphBuilder` holding the first k
steps takes the next ``L`` steps (``L`` = one repetition, so every window holds each turn's step
once) one ``add()`` at a time; each add is timed in CPU time of the thread (least of 3 builders)
and, in another pass, its function calls are counted (``sys.setprofile``: a count the shared
machine's load does not change). Beside it: ``finish()`` at step k (the claim graph of the prefix, what a
monitor's ``close()``/``diagnosis()`` pays) and ``build_claim_graph`` on the prefix (what
rebuilding per step would pay per added step). Target: flat (step 5,000 within 2x of step 10).

Run: python benchmarks/bench_ledger_incremental.py [--steps 10,100,1000,5000] [--out benchmarks/bench_ledger_incremental.txt]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit import load_path  # noqa: E402
from trajaudit.engine.claims import ClaimGraphBuilder, build_claim_graph  # noqa: E402
from trajaudit.engine.claims import clear_caches as clear_claim_caches  # noqa: E402
from trajaudit.engine.trace.ir import Step, Trajectory  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
_DIGITS = re.compile(r"\d{4,}")


def _shift(text: str, rep: int) -> str:
    """Digit runs of 4+ digits moved by ``rep`` * a large prime, same length (0 leaves the text)."""
    if not rep:
        return text
    return _DIGITS.sub(lambda x: str((int(x.group()) + rep * 104_729) % 10 ** len(x.group())).zfill(len(x.group())),
                       text)


def _shift_obj(obj: Any, rep: int) -> Any:
    if isinstance(obj, str):
        return _shift(obj, rep)
    if isinstance(obj, dict):
        return {k: _shift_obj(v, rep) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_shift_obj(v, rep) for v in obj]
    return obj


def _copy(s: Step, index: int, rep: int, fresh: bool) -> Step:
    sh = rep if fresh else 0
    calls = tuple(dataclasses.replace(c, id=f"{c.id}_{rep}" if c.id else c.id, arguments=_shift_obj(c.arguments, sh),
                                      raw_arguments=_shift(c.raw_arguments, sh) if c.raw_arguments else c.raw_arguments)
                  for c in s.tool_calls)
    out = s.tool_output
    if out is not None and out.call_id:
        out = dataclasses.replace(out, call_id=f"{out.call_id}_{rep}")
    return dataclasses.replace(s, index=index, content=_shift(s.content, sh), tool_calls=calls, tool_output=out)


def long_run(n: int, fresh: bool, data: Path = DATA) -> tuple[Trajectory, int]:
    """A run of ``n`` steps: the longest tau run's system prompt, then its other steps repeated.
    Returns (run, steps per repetition)."""
    runs = load_path(data / "tau_retail" / "trajectories.json").trajectories
    t = max(runs, key=lambda r: len(r.steps))
    head, body = t.steps[:1], t.steps[1:]
    steps = list(head)
    rep = 0
    while len(steps) < n:
        for s in body:
            if len(steps) >= n:
                break
            steps.append(_copy(s, len(steps), rep, fresh))
        rep += 1
    final = next((s.content for s in reversed(steps) if s.is_decision and s.content.strip() and not s.tool_calls), None)
    return dataclasses.replace(t, id=f"long-{'fresh' if fresh else 'same'}", steps=tuple(steps),
                               final_answer=final), len(body)


def _prefix(t: Trajectory, k: int) -> Trajectory:
    steps = t.steps[:k]
    final = next((s.content for s in reversed(steps) if s.is_decision and s.content.strip() and not s.tool_calls), None)
    return dataclasses.replace(t, steps=steps, final_answer=final)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def measure(steps: list[int], fresh: bool, trials: int = 3, data: Path = DATA) -> list[dict]:
    """One row per measured step (milliseconds). Each add is timed in CPU time of the thread
    (``time.thread_time``: the machine is shared, a wall-clock time would include preemption), the
    claim package's caches cleared before each window (its texts are analysed as in a fresh process),
    the cyclic collector off (as ``gather`` runs); per added step the least of ``trials`` builders."""
    t, cycle = long_run(max(steps) + cycle_len(data) + 10, fresh, data)
    per_step: dict[int, list[float]] = {k: [math.inf] * cycle for k in steps}
    extra: dict[int, dict] = {}
    gc.disable()
    try:
        for trial in range(trials):
            b = ClaimGraphBuilder(None, task=t.task, system_prompts=t.system_prompts)
            done = 0
            for k in steps:
                while done < k:
                    b.add(t.steps[done])
                    done += 1
                if trial == 0:
                    p = _prefix(t, k)
                    t0 = time.thread_time()
                    b.finish(p)
                    fin = time.thread_time() - t0
                    t0 = time.thread_time()
                    build_claim_graph(p)
                    extra[k] = {"finish_ms": 1e3 * fin, "rebuild_ms": 1e3 * (time.thread_time() - t0)}
                clear_claim_caches()
                for j in range(cycle):
                    t0 = time.thread_time()
                    b.add(t.steps[k + j])
                    per_step[k][j] = min(per_step[k][j], time.thread_time() - t0)
                done = k + cycle
                extra[k]["claims"] = len(b.ledger.claims)
        calls = _call_counts(t, steps, cycle)
    finally:
        gc.enable()
    rows = []
    for k in steps:
        adds = per_step[k]
        rows.append({"step": k, "add_mean_ms": 1e3 * statistics.fmean(adds), "add_p50_ms": 1e3 * statistics.median(adds),
                     "add_p99_ms": 1e3 * pct(adds, 99), "calls_per_add": calls[k] / cycle,
                     **extra[k]})
        r = rows[-1]
        print(f"{'fresh' if fresh else 'same'} step {k:>5}: add mean {r['add_mean_ms']:.3f} p50 {r['add_p50_ms']:.3f} "
              f"p99 {r['add_p99_ms']:.3f} ms | finish {r['finish_ms']:.2f} ms | rebuild {r['rebuild_ms']:.2f} ms",
              file=sys.stderr)
    return rows


def _call_counts(t: Trajectory, steps: list[int], cycle: int) -> dict[int, int]:
    """Function calls (Python and C, ``sys.setprofile`` events) made by the adds of each window: a
    count the machine's load does not change."""
    n = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal n
        if event in ("call", "c_call"):
            n += 1

    out = {}
    b = ClaimGraphBuilder(None, task=t.task, system_prompts=t.system_prompts)
    done = 0
    for k in steps:
        while done < k:
            b.add(t.steps[done])
            done += 1
        clear_claim_caches()
        n = 0
        sys.setprofile(count)
        try:
            for j in range(cycle):
                b.add(t.steps[k + j])
        finally:
            sys.setprofile(None)
        out[k] = n
        done = k + cycle
    return out


def cycle_len(data: Path = DATA) -> int:
    """Steps per repetition of the long run."""
    return long_run(2, False, data)[1]


def render(results: dict[str, list[dict]], cycle: int, trials: int) -> str:
    lines = [f"Incremental claim ledger: ClaimGraphBuilder.add per step, {cycle} adds (one repetition of the turns) "
             f"per measured step, CPU time of the thread, least of {trials} builders per add; finish() and "
             "build_claim_graph timed once (bench_ledger_incremental.py)", ""]
    for name, rows in results.items():
        lines += [f"### {name}", "",
                  "| step | claims so far | add mean (ms) | add p50 (ms) | add p99 (ms) | function calls per add "
                  "| finish() at step (ms) | build_claim_graph on the prefix (ms) |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['step']:,} | {r['claims']:,} | {r['add_mean_ms']:.3f} | {r['add_p50_ms']:.3f} | "
                         f"{r['add_p99_ms']:.3f} | {r['calls_per_add']:.0f} | {r['finish_ms']:.2f} | {r['rebuild_ms']:.2f} |")
        first, last = rows[0], rows[-1]
        lines += ["", f"flat (step {last['step']:,} mean add within 2x of step {first['step']:,}): "
                      f"{last['add_mean_ms'] <= 2 * first['add_mean_ms']} "
                      f"(ratio {last['add_mean_ms'] / first['add_mean_ms']:.2f}); p99 ratio "
                      f"{last['add_p99_ms'] / first['add_p99_ms']:.2f}; function calls ratio "
                      f"{last['calls_per_add'] / first['calls_per_add']:.2f}", ""]
    lines += ["finish() is linear in the number of claims (it copies the ledger and settles the end-of-run parts; "
              "no text is read again); build_claim_graph is the whole run's extraction and assessment. "
              "Monitor.close() calls finish() once, Monitor.diagnosis() once per call.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default="10,100,1000,5000")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    steps = [int(x) for x in args.steps.split(",")]
    results = {"fresh values per repetition": measure(steps, True, args.trials, args.data),
               "same turns repeated (as bench_monitor.py)": measure(steps, False, args.trials, args.data)}
    text = render(results, cycle_len(args.data), args.trials)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
