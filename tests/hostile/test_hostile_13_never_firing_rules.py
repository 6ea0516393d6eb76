"""Class 13: a rule whose guard never holds is named nowhere (``check`` only added to an aggregate
skip count; ``rules lint`` flagged only a guard that contradicts its assertion).

Now ``check`` and ``audit`` summaries name the rules that never applied on the data (``check
--format json`` too, as a JSON summary on stderr), and ``rules lint`` warns on rules without examples."""

from __future__ import annotations

import json

from hostile_kit import cli, diagnoses, good_run, one_line, snapshot, write_json

PACK = """pack: mine
rules:
  - id: fires
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: step.index >= 0
    examples:
      - {messages: [{role: assistant, content: hi}], expect: pass}
  - id: never
    type: PROTOCOL
    guard: step.tool == 'no_such_tool'
    assert: step.index >= 0
"""


def test_check_names_the_rule_that_never_fired(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    pack = tmp_path / "p.yaml"
    pack.write_text(PACK)
    r = cli("check", run, "--rules", pack)
    assert r.exit_code == 0, r.output
    assert "note: 1 rule(s) never applied on these 1 run(s) (their guard never held): mine.never" in one_line(r.stderr)
    r = cli("check", run, "--rules", pack, "--format", "json")
    summary = json.loads(r.stderr.strip().splitlines()[-1])["summary"]
    assert summary["never_fired"] == ["mine.never"] and summary["runs"] == 1
    assert isinstance(json.loads(r.stdout), list)  # stdout stays the list of logs


def test_audit_summary_names_it(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    pack = tmp_path / "p.yaml"
    pack.write_text(PACK)
    before = snapshot(tmp_path)
    r = cli("audit", run, "--rules", pack, "--no-default-packs", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 0, r.output
    assert [d["trajectory_id"] for d in diagnoses(tmp_path / "d.jsonl")] == ["a"]
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.endswith("d.jsonl")} == before
    assert "note: 1 rule(s) never applied on these 1 run(s) (their guard never held): mine.never" in one_line(r.stderr)


def test_lint_warns_on_the_rule_without_examples(tmp_path):
    pack = tmp_path / "p.yaml"
    pack.write_text(PACK)
    r = cli("rules", "lint", pack)
    assert r.exit_code == 0, r.output
    assert "no-examples [mine.never]" in one_line(r.stdout) and "[mine.fires]" not in r.stdout
    assert "0 error(s), 1 warning(s)" in r.stderr
