"""Added latency of ``trajaudit guard`` (issue 20): the official ``openai`` client sends the same chat
requests to the scripted local server directly and through the proxy (block mode, default packs),
interleaved in one process; the difference per request is the proxy's cost (forwarding, reading the
conversation, checking the answer).

The conversation grows like an agent's: request i carries the first 2 + 2i messages of a tau-retail
run (``--turns`` requests), the upstream answers a tool call. Reports p50 and p99 of the direct time,
the proxied time and their difference, per conversation length bucket.

Run: python benchmarks/bench_guard.py [--turns 30] [--repeat 3] [--out benchmarks/bench_guard.txt]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import openai  # noqa: E402
from guard_server import GuardServer, tool_call_completion  # noqa: E402
from llm_server import Raw, ScriptedLLMServer  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    runs = json.loads((args.data / "tau_retail" / "trajectories.json").read_text(encoding="utf-8"))
    run = max(runs, key=lambda r: len(r["traj"]))
    msgs = [{k: v for k, v in m.items() if k != "index"} for m in run["traj"]]
    answer = Raw(tool_call_completion("get_order_details", {"order_id": "#W0000001"}))
    rows: list[tuple[int, float, float]] = []
    with ScriptedLLMServer(lambda req: answer) as up, GuardServer(up.url, mode="block", log_path=None) as g:
        direct = openai.OpenAI(base_url=up.url, api_key="x", max_retries=0)
        proxied = openai.OpenAI(base_url=g.url, api_key="x", max_retries=0)
        for c in (direct, proxied):  # warm up: connections, pack compilation
            c.chat.completions.create(model="m", messages=msgs[:3])
        for _ in range(args.repeat):
            for i in range(min(args.turns, (len(msgs) - 2) // 1)):
                conv = msgs[: 2 + i]
                t0 = time.perf_counter()
                direct.chat.completions.create(model="m", messages=conv)
                t1 = time.perf_counter()
                proxied.chat.completions.create(model="m", messages=conv)
                t2 = time.perf_counter()
                rows.append((len(conv), t1 - t0, t2 - t1))
    lines = [f"trajaudit guard added latency (block mode, default packs), {len(rows)} requests "
             f"({args.repeat} x {args.turns} growing conversations of a tau run), bench_guard.py", "",
             "| messages per request | n | direct p50 (ms) | proxied p50 (ms) | added p50 (ms) | added p99 (ms) |",
             "|---|---|---|---|---|---|"]
    buckets = [(0, 10), (10, 20), (20, 40), (40, 10_000)]
    for lo, hi in buckets + [(0, 10_000)]:
        sel = [r for r in rows if lo <= r[0] < hi]
        if not sel:
            continue
        d = [1e3 * r[1] for r in sel]
        p = [1e3 * r[2] for r in sel]
        a = [1e3 * (r[2] - r[1]) for r in sel]
        label = "all" if (lo, hi) == (0, 10_000) else f"{lo}-{hi - 1}" if hi < 10_000 else f">= {lo}"
        lines.append(f"| {label} | {len(sel)} | {statistics.median(d):.2f} | {statistics.median(p):.2f} | "
                     f"{statistics.median(a):.2f} | {pct(a, 99):.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
