"""`trajaudit repair` (cli/repair.py): which run a diagnosis names, and its output format."""

from __future__ import annotations

import json
from pathlib import Path

from cli_kit import LONE, run_no_traceback
from click.testing import CliRunner

from trajaudit.cli import main

_run = run_no_traceback


ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "data" / "tau_retail_sample.json"  # 3 tau runs, the first with id "2"
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)


def diagnosis_line(file: str, record: int | None, step: int, agent: str) -> str:
    return json.dumps({"schema_version": 1, "trajectory_id": "2", "file": file, "record": record,
                       "critical_step": step, "agent": agent, "category": "intent_plan_misalignment",
                       "taxonomy": "agentrx", "confidence": 0.2, "rationale": "r", "strategy": "offline"}) + "\n"


def test_repair_refuses_a_diagnosis_of_another_data_sets_run_with_the_same_id(tmp_path):
    ww = tmp_path / "ww.jsonl"  # Who&When file 2.json has the trajectory id "2", like tau task 2
    ww.write_text(diagnosis_line("/data/who_and_when/algorithm_generated/2.json", None, 2, "Verification_Expert"))
    out = tmp_path / "r.json"
    r = run("repair", SAMPLE, "--record", "0", "--diagnosis", ww, "-o", out)
    assert r.exit_code == 2 and "Traceback" not in r.output
    err = r.stderr.replace("\n", "")
    assert f"{ww}: no diagnosis for run '2' (tau_retail_sample.json, record 0; 1 line(s) read)" in err
    assert "line 1: its file 2.json is not the run's tau_retail_sample.json" in err
    assert not out.exists()
    # another record of the same file is refused too; the run's own line (any folder) is used
    ww.write_text(diagnosis_line(str(SAMPLE), 1, 5, "assistant")
                  + diagnosis_line("elsewhere/tau_retail_sample.json", 0, 2, "assistant"))
    r = run("repair", SAMPLE, "--record", "0", "--diagnosis", ww, "-o", out)
    assert r.exit_code == 0, r.output
    assert "2: critical step 2 (assistant, intent_plan_misalignment, offline)" in r.stderr
    assert len(json.loads(out.read_text())) == 3  # messages 0..1 + the directive


def test_repair_output_must_be_json(tmp_path):
    r = run("repair", SAMPLE, "--record", "0", "-o", tmp_path / "r.txt")
    assert r.exit_code == 2
    assert "-o/--output must end in .json (the resumed run is one JSON document), got" in r.stderr
    assert not (tmp_path / "r.txt").exists()


def test_repair_with_a_diagnosis_of_the_wrong_field_types_is_a_usage_error(tmp_path):
    """Was: a diagnoses line with ``"critical_step": "6"`` or a non-string ``repair`` reached
    resume_document: TypeError/AttributeError tracebacks, exit 1."""
    src = tmp_path / "run.json"
    src.write_text(LONE.replace("\\ud800", "W1"))
    audit = _run("audit", src, "-q", "-o", tmp_path / "d.jsonl")
    d = json.loads((tmp_path / "d.jsonl").read_text())
    for field, value, why in (("critical_step", "2", "critical_step must be an integer or null, got '2'"),
                              ("critical_step", 2.5, "critical_step must be an integer or null, got 2.5"),
                              ("repair", 12345, "repair must be a string or null, got int")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps({**d, field: value}) + "\n")
        res = _run("repair", src, "--diagnosis", bad, "-o", tmp_path / "out.json")
        assert res.exit_code == 2, res.output
        said = " ".join(res.output.split())
        assert f"{bad}:1: not a diagnosis (trajectory_id '{d['trajectory_id']}'): ValueError: {why}" in said
    assert audit.exit_code == 0
