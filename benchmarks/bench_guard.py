"""Added latency of ``trajaudit guard`` (issue 20): the official ``openai`` client sends the same chat
requests to the scripted local server directly, through the proxy with its conversation cache, and
through a proxy that re-reads every conversation (``cache_size=0``), interleaved in one process
(block mode, then annotate mode; default packs); the difference per request is the proxy's cost (forwarding, reading the
conversation, checking the answer).

The conversation is an agent loop: a tau-retail dev run's messages repeated (call ids made unique per
repetition, ``bench_monitor.long_run``) to ``--length`` messages; request i carries the messages up
to the run's i-th assistant message, which the upstream answers (so the next request extends the
conversation exactly, as an agent's does). Reports p50 and p99 of the direct time and of the time
each proxy adds, per conversation length bucket. The process runs niced; the load average is written.

Run: python benchmarks/bench_guard.py [--length 400] [--repeat 2] [--modes block,annotate] [--out benchmarks/bench_guard.txt]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import openai  # noqa: E402
from bench_monitor import long_run  # noqa: E402
from guard_server import GuardServer  # noqa: E402
from llm_server import Raw, ScriptedLLMServer  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def answer_for(msgs: list[dict]):
    """The upstream: answers a request of n messages with message n of the run (an assistant message)."""
    def respond(req: dict) -> Raw:
        m = msgs[len(req["messages"])]
        return Raw(json.dumps({"id": "chatcmpl-b", "object": "chat.completion", "created": 0, "model": "scripted",
                               "choices": [{"index": 0, "finish_reason": "tool_calls" if m.get("tool_calls") else "stop",
                                            "message": m}]}))
    return respond


def measure(mode: str, args: argparse.Namespace) -> list[str]:
    """The table of one mode (block: answers that violate are replaced, so the client's next request —
    the run's own message — extends no conversation the proxy holds, and is read whole)."""
    load0 = os.getloadavg()
    msgs = long_run(args.length, args.data)
    cuts = [n for n in range(2, len(msgs)) if msgs[n].get("role") == "assistant"]
    rows: list[tuple[int, float, float, float]] = []
    stats: dict[str, tuple[int, int]] = {}
    with ScriptedLLMServer(answer_for(msgs)) as up, \
            GuardServer(up.url, mode=mode, log_path=None) as cached, \
            GuardServer(up.url, mode=mode, log_path=None, cache_size=0) as fresh:
        direct = openai.OpenAI(base_url=up.url, api_key="x", max_retries=0)
        via_cache = openai.OpenAI(base_url=cached.url, api_key="x", max_retries=0)
        via_fresh = openai.OpenAI(base_url=fresh.url, api_key="x", max_retries=0)
        for c in (direct, via_cache, via_fresh):  # warm up: connections, pack compilation
            c.chat.completions.create(model="m", messages=msgs[:cuts[0]])
        for _ in range(args.repeat):
            for n in cuts:
                conv = msgs[:n]
                t0 = time.perf_counter()
                direct.chat.completions.create(model="m", messages=conv)
                t1 = time.perf_counter()
                via_cache.chat.completions.create(model="m", messages=conv)
                t2 = time.perf_counter()
                via_fresh.chat.completions.create(model="m", messages=conv)
                t3 = time.perf_counter()
                rows.append((n, t1 - t0, t2 - t1, t3 - t2))
        cache = cached.guard.cache
        stats["cache"] = (cache.hits, cache.misses)
    load1 = os.getloadavg()
    lines = [f"trajaudit guard added latency ({mode} mode, default packs), {len(rows)} requests ({args.repeat} x an agent "
             f"loop over a tau run repeated to {len(msgs)} messages, one request per assistant message), bench_guard.py",
             "", "| messages per request | n | direct p50 (ms) | added p50, cache (ms) | added p99, cache (ms) | "
             "added p50, no cache (ms) | added p99, no cache (ms) |", "|---|---|---|---|---|---|---|"]
    buckets = [(0, 20), (20, 100), (100, 200), (200, 10_000)]
    for lo, hi in buckets + [(0, 10_000)]:
        sel = [r for r in rows if lo <= r[0] < hi]
        if not sel:
            continue
        d = [1e3 * r[1] for r in sel]
        a = [1e3 * (r[2] - r[1]) for r in sel]
        b = [1e3 * (r[3] - r[1]) for r in sel]
        label = "all" if (lo, hi) == (0, 10_000) else f"{lo}-{hi - 1}" if hi < 10_000 else f">= {lo}"
        lines.append(f"| {label} | {len(sel)} | {statistics.median(d):.2f} | {statistics.median(a):.2f} | "
                     f"{pct(a, 99):.2f} | {statistics.median(b):.2f} | {pct(b, 99):.2f} |")
    hits, misses = stats["cache"]
    why = ("the warm-up and the first request of each loop" if mode == "annotate" else
           "the warm-up, the first request of each loop, and each request after a blocked answer: the bench's client sends the "
           "run's own message on, which the proxy did not pass")
    lines += ["", f"Conversation cache: {hits} requests extended a cached conversation, {misses} read theirs whole ({why}).",
              f"Machine: 2 cores shared with other jobs; load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
              f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; run niced (+5); the three paths interleaved per request."]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--length", type=int, default=400, help="messages in the longest conversation")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--modes", default="block,annotate")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    os.nice(5)
    lines: list[str] = []
    for mode in args.modes.split(","):
        lines += [*measure(mode, args), ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
