"""The check / rules CLI: exit codes, formats, explain, test output, bad input without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trajaudit.cli import main

ROOT = Path(__file__).resolve().parents[2]
PACK = str(ROOT / "examples" / "rules" / "tau_retail_example.yaml")


def test_check_json_and_exit_codes(tau_file):
    r = CliRunner()
    res = r.invoke(main, ["check", str(tau_file), "--rules", PACK, "--format", "json", "--all-records"])
    assert res.exit_code == 1
    logs = json.loads(res.stdout)
    assert len(logs) == 29
    two = next(lg for lg in logs if lg["trajectory_id"] == "2")
    assert [(x["step"], x["rule_id"]) for x in two["records"] if x["verdict"] == "fail"] == \
        [(6, "example.tau.variant-count-matches")]
    res = r.invoke(main, ["check", str(tau_file), "--rules", PACK, "--fail-on", "critical"])
    assert res.exit_code == 0
    assert "variant-count-matches" in res.stdout and "steps.5" in res.stdout


def test_check_bad_inputs_exit_2(tmp_path, tau_file):
    r = CliRunner()
    bad = tmp_path / "bad.yaml"
    bad.write_text("pack: x\nrules:\n  - id: a\n    type: PROTOCOL\n    assert: step.kind = 'user'\n")
    res = r.invoke(main, ["check", str(tau_file), "--rules", str(bad)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "bad.yaml:5:23" in res.stderr and "'=' is not a comparison" in res.stderr
    res = r.invoke(main, ["check", str(tau_file), "--rules", "no-such-pack"])
    assert res.exit_code == 2 and "not found" in res.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    res = r.invoke(main, ["check", str(junk), "--rules", PACK])
    assert res.exit_code == 2 and "no trajectory could be loaded" in res.stderr


def test_rules_explain_and_test(tmp_path):
    r = CliRunner()
    res = r.invoke(main, ["rules", "explain", PACK, "variant-count-matches"])
    assert res.exit_code == 0, res.output
    assert "tau_retail_example.yaml:31:5" in res.stdout and "index: kinds=['agent']" in res.stdout
    assert "let.actual: (count v in out.json.variants where v.available)" in res.stdout
    res = r.invoke(main, ["rules", "explain", PACK, "no-such-rule"])
    assert res.exit_code == 2 and "no rule 'no-such-rule'" in res.stderr
    broken = tmp_path / "p.yaml"
    broken.write_text("""pack: p
rules:
  - id: r
    type: PROTOCOL
    guard: step.kind == "user"
    assert: content ~ /please/
    examples:
      - {name: polite, expect: pass, messages: [{role: user, content: please help}]}
      - {name: wrong, expect: pass, messages: [{role: user, content: help}]}
""")
    res = r.invoke(main, ["rules", "test", str(broken)])
    assert res.exit_code == 1
    assert "p.r::polite (expect pass) PASSED" in res.stdout
    assert "p.r::wrong (expect pass) FAILED" in res.stdout and "got fail@0" in res.stdout
    assert "1 passed, 1 failed" in res.stdout


def test_check_with_tools_runs_schema_checker(tmp_path, tau_file):
    pack = tmp_path / "s.yaml"
    pack.write_text("pack: s\nrules:\n  - id: args\n    type: SCHEMA\n    check: {checker: tool_args_schema}\n")
    tools = tau_file.parent / "tools.json"
    res = CliRunner().invoke(main, ["check", str(tau_file), "--rules", str(pack), "--tools", str(tools),
                                    "--format", "json", "--all-records"])
    assert res.exit_code == 0, res.stderr
    verdicts = {r["verdict"] for lg in json.loads(res.stdout) for r in lg["records"]}
    assert verdicts == {"pass"}


def test_rules_explain_shows_parameter_values_and_what_supersedes_the_rule():
    r = CliRunner().invoke(main, ["rules", "explain", "generic", "generic.protocol.confirmation-before-write"])
    assert r.exit_code == 0
    assert "    confirmation_request = (?i)\\b(?:confirm|proceed|shall i|should i|go ahead)\\b" in r.output
    assert "superseded by: tau_retail.explicit-yes-before-write" in r.output
    r = CliRunner().invoke(main, ["rules", "explain", "tau_retail", "explicit-yes-before-write"])
    assert "superseded by" not in r.output and '    write_tools = ["cancel_pending_order", ' in r.output
