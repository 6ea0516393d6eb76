"""`trajaudit cite` through click's runner: tables, JSON, HTML/log files, mappings, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.schema import schema_errors

EX = Path(__file__).resolve().parents[1] / "examples" / "citation"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


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
    assert page.startswith("<!doctype html>") and page.count('<div class="ta-trace">') == 5
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
