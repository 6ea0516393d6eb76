"""`trajaudit eval --strategy <LLM strategy>` through the scripted server: per-strategy accounting."""

from __future__ import annotations

import json

from click.testing import CliRunner
from llm_server import evidence_of

from trajaudit.cli import main

NO_ENV = {"TRAJAUDIT_BASE_URL": None, "TRAJAUDIT_MODEL": None, "OPENAI_API_KEY": None,
          "TRAJAUDIT_LLM_CONFIG": None, "TRAJAUDIT_LLM_CACHE": None}


def run(*args):
    return CliRunner().invoke(main, ["eval", *map(str, args)], catch_exceptions=False, env=NO_ENV)


def keep_offline(req):
    """A judge that keeps the offline choice (the hybrid prompt shows it)."""
    off = evidence_of(req)["offline"]
    return {"critical_step": off["critical_step"], "category": off["category"] if off["category"] != "inconclusive"
            else "intent_plan_misalignment", "confidence": 0.5, "reason": "kept", "agrees_with_offline": True}


def test_eval_runs_an_llm_strategy_and_prints_its_accounting(llm_server, tau_file, tmp_path):
    llm_server.responder = keep_offline
    gt, cache, saved, md = (tau_file.parent / "ground_truth.json", tmp_path / "c.sqlite3", tmp_path / "p.jsonl",
                            tmp_path / "r.md")
    llm = ("--base-url", llm_server.url, "--model", "scripted", "--cache", cache)
    res = run(tau_file, "--gold", gt, "-s", "hybrid", *llm, "--save-pred", saved, "--format", "markdown", "-o", md,
              "--bootstrap", "50")
    assert res.exit_code == 0, res.output
    preds = [json.loads(x) for x in saved.read_text().splitlines()]
    assert len(preds) == 29 == llm_server.calls and {p["strategy"] for p in preds} == {"hybrid"}
    chars = sum(p["usage"]["input_chars"] for p in preds)
    text = md.read_text()
    assert "### LLM usage by strategy" in text and "tokenizer-free character counts" in text
    row = next(line for line in text.splitlines() if line.startswith("| hybrid |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = [c.strip() for c in text.splitlines()[text.splitlines().index(row) - 2].strip("|").split("|")]
    got = dict(zip(header, cells, strict=True))
    assert got["runs"] == "29" and got["calls/run"] == "1.0" and got["cache hits/run"] == "0.0"
    assert got["total calls"] == "29" and got["total input chars"] == f"{chars:,}"
    assert got["input chars/run"] == f"{chars / 29:,.1f}" and float(got["input tokens/run"].replace(",", "")) > 0
    # the same evaluation again: every answer from the cache, 0 calls, same characters
    llm_server.reset_counts()
    res = run(tau_file, "--gold", gt, "-s", "hybrid", *llm, "--format", "json", "--bootstrap", "50")
    rep = json.loads(res.stdout)
    u = rep["usage_by_strategy"]["hybrid"]
    assert llm_server.calls == 0 and u["totals"]["calls"] == 0 and u["totals"]["cache_hits"] == 29
    assert u["totals"]["input_chars"] == chars and u["totals"]["input_tokens"] == 0


def test_eval_with_an_llm_strategy_and_no_endpoint_says_what_to_set(tau_file):
    res = run(tau_file, "--gold", tau_file.parent / "ground_truth.json", "-s", "searchauditor")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "no LLM endpoint configured: pass --base-url URL and --model NAME" in res.stderr
    assert "use --strategy offline" in res.stderr


def test_eval_with_an_endpoint_that_is_down_stops_at_the_first_run(tmp_path, ww_dir):
    from llm_server import ScriptedLLMServer

    with ScriptedLLMServer() as gone:
        url = gone.url
    cfg = tmp_path / "llm.yaml"
    cfg.write_text(f"llm:\n  base_url: {url}\n  model: m\n  max_retries: 0\n  timeout: 2\n")
    res = run(ww_dir / "1.json", ww_dir / "10.json", "--gold", ww_dir, "-s", "drift", "--llm-config", cfg,
              "--no-cache", "--format", "json", "--bootstrap", "10")
    # a closed port fails every run the same way: the batch stops at the first (exit 2), one message
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.count(f"drift-keeper: cannot reach {url}") == 1
    assert "Connection refused" in res.stderr
