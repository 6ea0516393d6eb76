"""`trajaudit check` (cli/check.py): exit codes."""

from __future__ import annotations

import json

from cli_kit import NEVER_FIRING_PACK, TIMEOUT_PACK
from click.testing import CliRunner
from hostile_kit import cli, good_run, one_line, write_json

from trajaudit.cli import main

NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)


def test_check_exits_1_when_an_input_was_skipped(tmp_path, ww_dir):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    r = run("check", ww_dir / "1.json", empty, "--rules", "generic.system", "--fail-on", "critical")
    assert r.exit_code == 1, r.output
    assert f"skipped: {empty}: file is empty" in r.stderr
    assert "1 run(s), 3 rule(s): 0 violation(s), 0 at or above critical; 1 input(s) skipped" in r.stderr
    assert run("check", ww_dir / "1.json", "--rules", "generic.system", "--fail-on", "critical").exit_code == 0
    assert "exit 1 also when an input was skipped" in " ".join(run("check", "--help").output.split())


# Class 13: a rule whose guard never holds is named nowhere (``check`` only added to an aggregate
# skip count; ``rules lint`` flagged only a guard that contradicts its assertion).
#
# Now ``check`` and ``audit`` summaries name the rules that never applied on the data (``check
# --format json`` too, as a JSON summary on stderr), and ``rules lint`` warns on rules without examples.

def test_check_names_the_rule_that_never_fired(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    pack = tmp_path / "p.yaml"
    pack.write_text(NEVER_FIRING_PACK)
    r = cli("check", run, "--rules", pack)
    assert r.exit_code == 0, r.output
    assert "note: 1 rule(s) never applied on these 1 run(s) (their guard never held): mine.never" in one_line(r.stderr)
    r = cli("check", run, "--rules", pack, "--format", "json")
    summary = json.loads(r.stderr.strip().splitlines()[-1])["summary"]
    assert summary["never_fired"] == ["mine.never"] and summary["runs"] == 1
    assert isinstance(json.loads(r.stdout), list)  # stdout stays the list of logs


def _two_runs(tmp_path):
    return write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])


# Fresh-user pass: under the time budget the "rule(s) never applied" note listed 1 rule where 3 never
# applied: the budget puts an 'unknown' at the first candidate step of every rule it cut, which counted
# as the rule having applied. Now those rules are named apart as not evaluated; the note lists only
# the rules known never to apply (no candidate step, or every guard evaluated and false).

def test_check_names_the_rules_the_time_budget_left_unevaluated_apart_from_never_applied(tmp_path):
    pack = tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    runs = _two_runs(tmp_path)
    whole = one_line(run("check", runs, "--rules", pack).stderr)
    assert ("note: 3 rule(s) never applied on these 2 run(s) (their guard never held): p4.guard-false, "
            "p4.guard-false-too, p4.no-such-tool") in whole
    cut = one_line(run("check", runs, "--rules", pack, "--run-timeout", "0.000001").stderr)
    assert "note: 1 rule(s) never applied on these 2 run(s) (their guard never held): p4.no-such-tool" in cut
    assert ("note: 3 rule(s) not evaluated on these 2 run(s) (rule evaluation ran out of time first, --run-timeout; "
            "whether they apply is not known): p4.fires, p4.guard-false, p4.guard-false-too") in cut
    assert "rule p4.guard-false could not be evaluated" not in cut
