"""`trajaudit cite` through click's runner: tables, JSON, HTML/log files, mappings, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.schema import schema_errors

EX = Path(__file__).resolve().parents[2] / "examples" / "citation"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def run_offline(*args):
    """``run`` with the LLM environment variables emptied (no endpoint configured by the machine)."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)



def test_table_prints_agent_rates_and_recall_precision():
    r = run("cite", EX / "ev_market.json")
    assert r.exit_code == 1, r.output  # errors found
    out = r.output
    assert "APPROXIMATE offline judge" in out
    assert "citation recall 16.7% (1/6 sentences), citation precision 20.0% (1/5 citations)" in out
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in out.splitlines() if line.startswith("│") and line.split("│")[1].strip() in
            ("searcher", "researcher", "orchestrator")}
    assert rows["searcher"] == ["3", "6", "16.7%", "1 (16.7%)", "0 (0.0%)", "0 (0.0%)", "0 (0.0%)", "0", "1 (20.0%)"]
    assert rows["researcher"] == ["1", "5", "40.0%", "0 (0.0%)", "1 (20.0%)", "0 (0.0%)", "1 (20.0%)", "0", "2 (40.0%)"]
    assert rows["orchestrator"] == ["1", "6", "33.3%", "1 (16.7%)", "0 (0.0%)", "1 (16.7%)", "0 (0.0%)", "0", "2 (40.0%)"]
    assert "searcher-2.outputs.1" in out and "orchestrator-1 → researcher-1 →" in out


def test_json_html_and_log_outputs(tmp_path):
    html, log = tmp_path / "c.html", tmp_path / "log.json"
    r = run("cite", EX / "aiq_like_trace.json", "--mapping", EX / "mappings" / "aiq_like.yaml",
            "--format", "json", "--html", html, "--log", log)
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["judge"]["approximate"] is True and d["format"] == "aiq-like"
    assert d["report"]["recall"] == 1 / 6 and d["report"]["precision"] == 0.2
    assert {t["origin"]: t["error_type"] for t in d["traced"]} == {
        "invocations.orchestrator-1.outputs.2": "uncited_output",
        "invocations.orchestrator-1.outputs.3": "hallucination",
        "invocations.searcher-2.outputs.1": "hallucination",
        "invocations.researcher-1.outputs.3": "insufficient_citations",
        "invocations.researcher-1.outputs.4": "uncited_input_reliance"}
    page = html.read_text()
    assert page.lower().startswith("<!doctype html>") and page.count('<div class="ta-trace">') == 5
    assert schema_errors("validation_log", json.loads(log.read_text())) == []


def test_clean_run_exits_zero(tmp_path):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps({
        "format": "trajaudit.citation-run", "documents": [{"id": "A", "text": "Sales grew 35% in 2023."}],
        "invocations": [{"id": "w", "agent": "writer", "inputs": [{"document": "A"}],
                         "outputs": ["Sales grew 35% in 2023 [A]."]}]}))
    r = run("cite", p)
    assert r.exit_code == 0 and "citation recall 100.0% (1/1 sentences)" in r.output


def test_bad_input_is_an_error_line_not_a_traceback(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"format": "trajaudit.citation-run", "invocations": [
        {"id": "w", "agent": "writer", "inputs": [{"document": "nope"}], "outputs": ["x"]}]}))
    r = run("cite", p)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert f"error: {p}, $.invocations[0].inputs[0].document: unknown document 'nope'" in r.output.replace("\n", "")
    r = run("cite", EX / "ev_market.json", "--mapping", EX / "ev_market.json")
    assert r.exit_code == 2 and "ev_market.json: unknown mapping keys: format, version" in r.output


NO_ENV = {"TRAJAUDIT_BASE_URL": None, "TRAJAUDIT_MODEL": None, "OPENAI_API_KEY": None,
          "TRAJAUDIT_LLM_CONFIG": None, "TRAJAUDIT_LLM_CACHE": None}


def run_llm(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_ENV)


def test_llm_judge_through_the_cli_then_from_the_cache(llm_server, tmp_path):
    from citation_oracle import Oracle

    llm_server.responder = Oracle()
    cache = tmp_path / "cache.sqlite3"
    args = ("cite", EX / "ev_market.json", "--llm", "--base-url", llm_server.url, "--model", "scripted",
            "--cache", cache, "--format", "json")
    r = run_llm(*args)
    assert r.exit_code == 1, r.output  # errors found
    d = json.loads(r.stdout)
    assert d["judge"]["approximate"] is False and d["judge"]["name"] == "llm" and "(scripted)" in d["judge"]["description"]
    assert d["report"]["recall"] == 1 / 6 and d["report"]["precision"] == 0.2  # the example's expected figures
    calls = llm_server.calls
    assert calls > 13 and f"LLM judge: {calls} requests, {calls} calls, 0 cache hits" in r.stderr
    llm_server.reset_counts()
    again = run_llm(*args)
    assert again.exit_code == 1 and json.loads(again.stdout)["report"] == d["report"]
    assert llm_server.calls == 0 and f"LLM judge: {calls} requests, 0 calls, {calls} cache hits" in again.stderr


def test_llm_judge_without_endpoint_or_with_one_down_is_a_clear_error(tmp_path):
    from llm_server import ScriptedLLMServer

    r = run_llm("cite", EX / "ev_market.json", "--llm")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "no LLM endpoint configured: pass --base-url URL and --model NAME" in r.stderr
    with ScriptedLLMServer() as gone:
        url = gone.url
    cfg = tmp_path / "llm.yaml"
    cfg.write_text(f"llm:\n  base_url: {url}\n  model: m\n  max_retries: 0\n  timeout: 2\n")
    r = run_llm("cite", EX / "ev_market.json", "--llm", "--llm-config", cfg, "--no-cache")
    assert r.exit_code == 2 and "Traceback" not in r.output
    # a closed port stops at the first sentence (LLMUnreachableError), instead of failing all 18 in turn
    assert f"error: citation.need-citation: cannot reach {url} (after 0 retries): [Errno 111] Connection refused" \
           in r.stderr.replace("\n", "")


def test_utf16_and_empty_files_are_named_like_trace_files(tmp_path):
    """cite reads its file as audit reads traces: a UTF-16 file gets the iconv hint, not a codec error."""
    wide = tmp_path / "wide.json"
    wide.write_bytes((EX / "ev_market.json").read_text(encoding="utf-8").encode("utf-16"))
    r = run("cite", wide)
    assert r.exit_code == 2 and "looks UTF-16 encoded" in r.output and "iconv -f UTF-16" in r.output
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"\xef\xbb\xbf  \n")
    r = run("cite", empty)
    assert r.exit_code == 2 and "empty.json: file is empty" in r.output


ROOT = Path(__file__).resolve().parents[2]


SAMPLE = ROOT / "examples" / "data" / "tau_retail_sample.json"  # 3 tau runs, the first with id "2"


NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def test_cite_on_another_trace_says_what_was_expected_and_found_briefly():
    r = run_offline("cite", SAMPLE)
    assert r.exit_code == 2 and "Traceback" not in r.output
    err = " ".join(r.stderr.split())
    assert len(err) < 600, err  # was ~3 KB of the input, the reason cut off
    assert 'not a citation run: expected a JSON object with "format": "trajaudit.citation-run"' in err
    assert "found a JSON list of 3 item(s) (the first an object with keys task_id, reward, traj, trial, records)" in err
    assert "pass --mapping M.yaml" in err
    assert "Retail agent policy" not in err


def test_cite_cuts_table_text_at_a_word_with_an_ellipsis():
    from trajaudit.cli.cite import _cut

    text = "Tesla's share fell to 19.9% while BYD gained two points, as smaller makers continued to drop another share"
    cut = _cut(text, 100)
    assert cut == "Tesla's share fell to 19.9% while BYD gained two points, as smaller makers continued to drop…"
    assert _cut("short", 100) == "short"


# Hostile-user pass: `cite --html -` (and `--log -`) wrote a file literally named '-' in the working
# folder ("wrote -"), where `-o -` means stdout for audit and check. Stdout already carries cite's
# report (the tables or the JSON), so '-' is refused before the run is read; ./- still names the file.

def test_html_and_log_dash_are_refused_as_stdout_carries_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for opt, what in (("--html", "the HTML page"), ("--log", "the validation log")):
        for fmt in ("table", "json"):
            r = run("cite", EX / "ev_market.json", opt, "-", "--format", fmt)
            assert r.exit_code == 2 and r.stdout == ""
            assert " ".join(r.stderr.split()) == (
                f"error: {opt} '-': {what} is written to a file (stdout carries the report: the tables, or the JSON "
                "of --format json), not to stdout; give a file name (./- for a file named '-')")
    assert list(tmp_path.iterdir()) == []
    named = run("cite", EX / "ev_market.json", "--log", "./-", "--format", "json")
    assert named.exit_code == 1 and json.loads(named.stdout)["run_id"] == "ev-market-2023"
    assert json.loads((tmp_path / "-").read_text())["trajectory_id"]
