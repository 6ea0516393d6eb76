"""`trajaudit repair` (cli/repair.py): which run a diagnosis names, and its output format."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trajaudit.cli import main

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
