"""Prompt cost of every LLM strategy on tau-retail (29 runs): calls and input characters per run.

Run: python benchmarks/bench_llm_cost.py [--data ../shared/data] [--context-chars 100000] [-o benchmarks/llm_cost.md]

Every registered LLM strategy (``needs_llm``) runs through the real ``openai`` client against the
scripted OpenAI-protocol server of the test suite (127.0.0.1, no network), in the context
``trajaudit audit`` builds (shipped default rule packs). The scripted judges blame the middle decision
step of each run, so the number of calls of step-by-step (stops at the first "yes") and binary-search
(log2 of the decision steps, + 1) is what a judge with that answer would cost; strategies without a
scripted judge here (e.g. a newly added one) get the smallest answer valid against their schema.
Prompt sizes are real. Sizes are characters (tokenizer-free; roughly 3-4 characters per token).

"× whole trajectory" = the strategy's input characters for a run divided by the characters of the
whole run quoted once as evidence (every step record, nothing cut — what one all-at-once call pays
for the trajectory, without its instructions); the mean and the largest per-run ratio are shown.
Sending the whole trajectory three times is 3× plus three prompts' instructions. A second pass over
the same cache shows the re-run cost (0 calls). This measures plumbing and prompt size, never accuracy.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from llm_server import ScriptedLLMServer, evidence_of, schema_name  # noqa: E402
from staged_judges import drift_judge, hybrid_judge, minimal, searchauditor_judge  # noqa: E402

from trajaudit import load_path  # noqa: E402
from trajaudit.engine.run.evidence import gather  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, build_context  # noqa: E402
from trajaudit.engine.strategies.llm.views import whole_chars  # noqa: E402
from trajaudit.engine.strategies.registry import default_strategies  # noqa: E402
from trajaudit.llm import LLMClient, LLMConfig  # noqa: E402


def judge(runs):
    """One responder for every strategy: scripted judges by schema name, else the minimal valid answer."""
    targets = {t.task: t.decision_steps[len(t.decision_steps) // 2].index for t in runs}
    staged = {"searchauditor": searchauditor_judge(runs), "drift": drift_judge(runs), "hybrid": hybrid_judge(runs)}

    def respond(req):
        name = schema_name(req) or ""
        ev = evidence_of(req)
        target = targets.get(ev.get("task"), 0)
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
        if name == "binary-search-classify":
            return {"category": "inconclusive", "confidence": 0.5, "reason": "scripted"}
        family = name.split("-")[0]
        if family in staged:
            return staged[family](req)
        return minimal(req["response_format"]["json_schema"]["schema"])

    return respond


def measure(name: str, runs, cfg: LLMConfig, extra: dict[str, Any]) -> dict[str, Any]:
    """Run strategy ``name`` over ``runs`` twice (cold, then from the cache); per-run figures."""
    strat = default_strategies().get(name)
    t0 = time.perf_counter()
    with LLMClient(cfg) as client:
        ctx = build_context(AuditSpec())
        ctx.llm, ctx.strategy_options = client, {**ctx.strategy_options, **extra}
        ds = [strat.diagnose(t, gather(t, ctx), ctx) for t in runs]
    took = time.perf_counter() - t0
    with LLMClient(cfg) as again:
        ctx = build_context(AuditSpec())
        ctx.llm, ctx.strategy_options = again, {**ctx.strategy_options, **extra}
        for t in runs:
            strat.diagnose(t, gather(t, ctx), ctx)
        rerun = again.usage.calls
    ratios = [d.usage["input_chars"] / whole_chars(t) for d, t in zip(ds, runs, strict=True)]
    return {"calls": statistics.mean(d.usage["calls"] for d in ds),
            "chars": statistics.mean(d.usage["input_chars"] for d in ds),
            "out": statistics.mean(d.usage["output_chars"] for d in ds),
            "ratio": statistics.mean(ratios), "max_ratio": max(ratios),
            "cut": sum(1 for d in ds if d.metadata.get("context", {}).get("prompts_cut")), "rerun": rerun, "s": took}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--context-chars", type=int, default=100_000)
    ap.add_argument("-o", "--output", help="also write the table (Markdown) to this file")
    args = ap.parse_args()
    runs = load_path(Path(args.data) / "tau_retail" / "trajectories.json").trajectories
    whole = [whole_chars(t) for t in runs]
    names = [n for n, s in default_strategies().items() if getattr(s, "needs_llm", False)]
    rows = [(n, n, {}) for n in names]
    if "searchauditor" in names:
        rows.insert(names.index("searchauditor") + 1, ("searchauditor +repair", "searchauditor",
                                                       {"searchauditor": {"repair": True}}))
    out = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(judge(runs)) as server:
        out.write(f"tau-retail, {len(runs)} runs; context budget {args.context_chars:,} chars; whole trajectory "
                  f"(all steps quoted as evidence) {statistics.mean(whole):,.0f} chars per run on average "
                  f"(min {min(whole):,}, max {max(whole):,}). Characters, not tokens (no tokenizer).\n\n")
        out.write("| strategy | calls/run | input chars/run | output chars/run | × whole trajectory (mean) | "
                  "× whole (max run) | runs with cuts | re-run calls | s |\n")
        out.write("|---|---|---|---|---|---|---|---|---|\n")
        for label, name, extra in rows:
            cfg = LLMConfig(base_url=server.base_url, model="scripted", cache_path=f"{tmp}/{label}.sqlite3",
                            context_chars=args.context_chars)
            m = measure(name, runs, cfg, extra)
            out.write(f"| {label} | {m['calls']:.2f} | {m['chars']:,.0f} | {m['out']:,.0f} | {m['ratio']:.2f} | "
                      f"{m['max_ratio']:.2f} | {m['cut']} | {m['rerun']} | {m['s']:.1f} |\n")
        out.write(f"\nunanswered requests: {server.exhausted}\n")
    print(out.getvalue(), end="")
    if args.output:
        head = ("# Cost of the LLM strategies on tau-retail (scripted server)\n\n"
                "Written by `python benchmarks/bench_llm_cost.py -o benchmarks/llm_cost.md` (see the script's "
                "docstring for what is measured). \"runs with cuts\" counts runs where some prompt showed a "
                "shortened view: the staged strategies (searchauditor, drift) compress on purpose.\n\n")
        Path(args.output).write_text(head + out.getvalue(), encoding="utf-8")


if __name__ == "__main__":
    main()
