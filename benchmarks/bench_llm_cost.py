"""Prompt cost of the LLM baselines on tau-retail (29 runs): calls and input characters per run.

Run: python benchmarks/bench_llm_cost.py [--data ../shared/data] [--context-chars 100000]

The strategies run through the real ``openai`` client against the scripted OpenAI-protocol server of
the test suite (127.0.0.1, no network). The scripted judge blames the middle decision step of each run,
so the number of calls of step-by-step (stops at the first "yes") and binary-search (log2 of the
decision steps, + 1) is what a judge with that answer would cost; prompt sizes are real. Sizes are
characters (tokenizer-free). A second pass over the same cache shows the re-run cost (0 calls).
This measures plumbing and prompt size, never accuracy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from llm_server import ScriptedLLMServer, evidence_of, schema_name  # noqa: E402

from trajaudit import load_path  # noqa: E402
from trajaudit.engine.strategy import AuditContext, default_strategies  # noqa: E402
from trajaudit.llm import LLMClient, LLMConfig  # noqa: E402

STRATEGIES = ("all-at-once", "step-by-step", "binary-search")


def judge(targets: dict[str, int]):
    def respond(req):
        ev = evidence_of(req)
        target = targets[ev["task"]]
        name = schema_name(req)
        if name == "all-at-once":
            return {"critical_step": target, "agent": "assistant", "category": "inconclusive", "confidence": 0.5,
                    "reason": "scripted"}
        if name == "step-by-step":
            return {"decisive": ev["current"]["step"] == target, "category": "inconclusive", "confidence": 0.5,
                    "reason": "scripted"}
        if name == "binary-search":
            import re
            b = int(re.search(r"First half: steps \d+ to (\d+)\.", req["messages"][-1]["content"]).group(1))
            return {"half": "first" if target <= b else "second", "reason": "scripted"}
        return {"category": "inconclusive", "confidence": 0.5, "reason": "scripted"}
    return respond


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--context-chars", type=int, default=100_000)
    args = ap.parse_args()
    runs = load_path(Path(args.data) / "tau_retail" / "trajectories.json").trajectories
    whole = [sum(len(s.content) for s in t.steps) for t in runs]
    targets = {t.task: t.decision_steps[len(t.decision_steps) // 2].index for t in runs}
    reg = default_strategies()
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(judge(targets)) as server:
        cfg = LLMConfig(base_url=server.base_url, model="scripted", cache_path=f"{tmp}/c.sqlite3",
                        context_chars=args.context_chars)
        print(f"tau-retail, {len(runs)} runs; context budget {args.context_chars} chars; "
              f"mean trajectory text {statistics.mean(whole):,.0f} chars\n")
        print("| strategy | calls/run | input chars/run | x trajectory text | runs with cuts | re-run calls | s |")
        print("|---|---|---|---|---|---|---|")
        for name in STRATEGIES:
            t0 = time.perf_counter()
            with LLMClient(cfg) as client:
                ds = [reg.get(name).diagnose(t, AuditContext(llm=client)) for t in runs]
            took = time.perf_counter() - t0
            with LLMClient(cfg) as again:
                for t in runs:
                    reg.get(name).diagnose(t, AuditContext(llm=again))
                rerun = again.usage.calls
            calls = statistics.mean(d.usage["calls"] for d in ds)
            chars = statistics.mean(d.usage["input_chars"] for d in ds)
            ratio = statistics.mean(d.usage["input_chars"] / w for d, w in zip(ds, whole, strict=True))
            cut = sum(1 for d in ds if d.metadata["context"]["prompts_cut"])
            print(f"| {name} | {calls:.2f} | {chars:,.0f} | {ratio:.2f} | {cut} | {rerun} | {took:.1f} |")


if __name__ == "__main__":
    main()
