"""The check / rules CLI: exit codes, formats, explain, test output, bad input without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trajaudit.cli import main


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


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


def test_from_tools_rejects_an_invalid_parameter_type_like_check(tau_file, tmp_path):
    tools = json.loads((tau_file.parent / "tools.json").read_text())
    fn = tools[0].get("function", tools[0])
    prop = next(iter(fn["parameters"]["properties"]))
    fn["parameters"]["properties"][prop]["type"] = "strnig"
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps(tools))
    r = cli("rules", "from-tools", bad)
    assert r.exit_code == 2, r.output
    msg = " ".join(r.stderr.split())
    assert msg.startswith(f"error: {bad}, element 0: tool {fn['name']!r}: invalid JSON Schema at "
                          f"parameters.properties.{prop}.type: 'strnig' is not valid")
    c = cli("check", tau_file, "--tools", bad)
    assert c.exit_code == 2 and " ".join(c.stderr.split()) == msg


def test_rules_list_unknown_pack_names_the_argument():
    r = cli("rules", "list", "nonexistent")
    assert r.exit_code == 2
    err = " ".join(r.stderr.split())
    assert "<rules>" not in err
    assert err.startswith("error: rules list nonexistent: rule pack 'nonexistent' not found")


def test_rules_list_names_its_counts():
    r = cli("rules", "list")
    assert r.exit_code == 0 and "own)" not in r.output
    header = next(x for x in r.output.splitlines() if "pack" in x and "description" in x)
    assert [c.strip() for c in header.strip("┃ ").split("┃")][:6] == [
        "pack", "enabled", "defined", "included", "disabled", "includes"]
    row = next(x for x in r.output.splitlines() if x.startswith("│ generic.protocol "))
    assert [c.strip() for c in row.strip("│ ").split("│")][:5] == ["generic.protocol", "10", "11", "0", "1"]
    assert "enabled = defined + included - disabled" in r.output.replace("\n", "")
    one = cli("rules", "list", "generic.protocol")
    assert ("generic.protocol: 10 rule(s) enabled of 11 (11 defined in the pack, 0 from includes, 1 disabled)"
            in one.output)
