"""The worked example pack (examples/rules/) on the 29 tau-retail runs reproduces its committed log."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trajaudit import compile_rules, evaluate, load_pack
from trajaudit.cli import main
from trajaudit.engine.schema import schema_errors

ROOT = Path(__file__).resolve().parents[3]
PACK = ROOT / "examples" / "rules" / "tau_retail_example.yaml"
EXPECTED = ROOT / "examples" / "rules" / "tau_retail_example.expected.json"


def test_example_pack_reproduces_expected_log(tau_runs):
    rules = compile_rules(load_pack(PACK))
    got = [json.loads(evaluate(t, rules).to_json()) for t in tau_runs.values()]
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert [g["trajectory_id"] for g in got] == [e["trajectory_id"] for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert g == e, f"run {g['trajectory_id']} differs from the committed log"
        assert not schema_errors("validation_log", g)
    fails = {(e["trajectory_id"], r["step"], r["rule_id"].split(".")[-1])
             for e in expected for r in e["records"] if r["verdict"] == "fail"}
    assert ("2", 6, "variant-count-matches") in fails
    assert ("34", 16, "item-lists-same-length") in fails
    assert ("98", 14, "order-status-allows-action") in fails
    assert sum(r["verdict"] == "fail" for e in expected for r in e["records"]) == 40


def test_example_pack_examples_and_lint_are_clean():
    runner = CliRunner()
    res = runner.invoke(main, ["rules", "test", str(PACK)])
    assert res.exit_code == 0, res.output
    assert "14 passed, 0 failed" in res.output
    res = runner.invoke(main, ["rules", "lint", str(PACK)])
    assert res.exit_code == 0, res.output
