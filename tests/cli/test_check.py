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


# Fresh-user pass: `check --run-timeout 0.000001` left every check 'unknown' and still said
# "0 violation(s)" and exited 0 (with -q it printed nothing): a CI gate passed on a run that was never
# evaluated. Now the summary counts the runs not fully evaluated, a warning names them (with -q too)
# and the exit code is 1, as for a skipped input.

def _two_runs(tmp_path):
    return write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])


def test_check_fails_the_gate_when_rule_evaluation_ran_out_of_time(tmp_path):
    runs, pack = _two_runs(tmp_path), tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    cut = run("check", runs, "--rules", pack, "--run-timeout", "0.000001")
    assert cut.exit_code == 1, cut.output
    err = one_line(cut.stderr)
    assert "2 run(s), 4 rule(s): 0 violation(s), 0 at or above error; 2 run(s) not fully evaluated (--run-timeout)" in err
    assert ("warning: 2 of 2 run(s) ran out of rule-evaluation time (--run-timeout 1e-06 s): 3 rule(s) were not "
            "evaluated to the end there, their checks left 'unknown' (runs: r1, r2); the result is incomplete, so the exit "
            "code is 1") in err
    quiet = run("check", runs, "--rules", pack, "--run-timeout", "0.000001", "-q")
    assert quiet.exit_code == 1 and quiet.stdout == ""
    assert one_line(quiet.stderr).startswith("warning: 2 of 2 run(s) ran out of rule-evaluation time")
    assert len(quiet.stderr.strip().splitlines()) == 1  # only the warning: no summary with -q
    whole = run("check", runs, "--rules", pack, "-q")  # in time: no warning, exit 0
    assert whole.exit_code == 0 and whole.stderr == ""
    defaults = run("check", runs, "--run-timeout", "0.000001", "--fail-on", "critical", "-q")  # the shipped packs
    assert defaults.exit_code == 1 and "ran out of rule-evaluation time" in defaults.stderr
    assert "when a run's rule evaluation ran out of time" in one_line(run("check", "--help").output)


def test_check_json_summary_counts_the_runs_and_rules_out_of_time(tmp_path):
    pack = tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    r = run("check", _two_runs(tmp_path), "--rules", pack, "--format", "json", "--run-timeout", "0.000001")
    assert r.exit_code == 1
    summary = json.loads(r.stderr.strip().splitlines()[-2])["summary"]  # the warning is the last line
    assert summary["runs_out_of_time"] == ["r1", "r2"]
    assert summary["rules_out_of_time"] == ["p4.fires", "p4.guard-false", "p4.guard-false-too"]
    assert summary["not_evaluated_out_of_time"] == ["p4.fires", "p4.guard-false", "p4.guard-false-too"]
    assert summary["never_fired"] == ["p4.no-such-tool"] and summary["never_evaluated"] == []


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


# Fresh-user pass: `check X --format sarif -q > out.sarif` wrote nothing to stdout (0 bytes, not a SARIF
# log): -q hid the machine output asked for with the human summary. -q hides the tables and the summary
# only (as `audit -q -o -` prints its JSONL).

def test_check_quiet_still_writes_the_machine_output_to_stdout(tmp_path):
    runs = _two_runs(tmp_path)
    sarif = run("check", runs, "--rules", "generic.system", "--format", "sarif", "-q")
    assert sarif.exit_code == 0 and sarif.stderr == ""
    assert json.loads(sarif.stdout)["version"] == "2.1.0"
    logs = run("check", runs, "--rules", "generic.system", "--format", "json", "--all-records", "-q")
    assert [lg["trajectory_id"] for lg in json.loads(logs.stdout)] == ["r1", "r2"] and logs.stderr == ""
    junit = run("check", runs, "--rules", "generic.system", "--format", "junit", "-q")
    assert junit.stdout.startswith("<?xml") and "<testsuites" in junit.stdout
    table = run("check", runs, "--rules", "generic.system", "-q")  # the table is for people: hidden
    assert table.exit_code == 0 and table.stdout == ""
    assert "a --format json/sarif/junit output is still written" in one_line(run("check", "--help").output)


# Fresh-user pass: a rule that raised at every step it applied (`10 / (len(x) - len(x))`, `len(steps)`
# "len() of a StepRange") left its checks 'unknown' ("evaluation error") and `check` passed the gate:
# exit 0, and with -q nothing at all (the "could not be evaluated" warning was part of the summary).
# The shipped packs leave no check 'unknown' on the dev data (tau_retail, who_and_when), so a rule that
# cannot be evaluated now fails the gate by default; --fail-on-unknown never/any tune it.

BROKEN_PACK = """pack: bad
rules:
  - id: div
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: 10 / (len(step.content) - len(step.content)) == 1
  - id: range
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: len(steps) > 0
  - id: sometimes
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: 10 / (step.index - 2) > -100
  - id: missing
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: step.tool
  - id: ok
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: step.index >= 0
"""


def test_check_fails_the_gate_when_a_rule_could_not_be_evaluated(tmp_path):
    runs, pack = _two_runs(tmp_path), tmp_path / "bad.yaml"
    pack.write_text(BROKEN_PACK)
    quiet = run("check", runs, "--rules", pack, "-q")
    assert quiet.exit_code == 1 and quiet.stdout == ""
    err = one_line(quiet.stderr)
    assert ("warning: rule bad.div could not be evaluated at 6 step(s) where it applied (never pass or fail; first "
            "reason: evaluation error: division by zero (10 / 0))") in err
    assert "warning: rule bad.range could not be evaluated at 6 step(s)" in err and "StepRange" in err
    assert ("warning: 14 check(s) could not be evaluated (bad.div at 6 step(s); bad.range at 6 step(s); "
            "bad.sometimes at 2 step(s), first reason: evaluation error: division by zero (10 / 0)); the result is "
            "incomplete, so the exit code is 1 (--fail-on-unknown error; 'never' lets unknown checks pass)") in err
    loud = run("check", runs, "--rules", pack)
    assert ("2 run(s), 5 rule(s): 0 violation(s), 0 at or above error; 20 check(s) unknown (14 could not be "
            "evaluated, 6 could not be decided)") in one_line(loud.stderr)
    assert ("warning: rule bad.missing could not be decided (left unknown) at 6 step(s) where it applied"
            in one_line(loud.stderr))  # a null assertion: the data lacks it, the rule is not broken
    never = run("check", runs, "--rules", pack, "-q", "--fail-on-unknown", "never")
    assert never.exit_code == 0 and "warning: rule bad.div could not be evaluated" in never.stderr
    assert "the exit code is 1" not in never.stderr
    summary = json.loads(run("check", runs, "--rules", pack, "--format", "json").stderr.splitlines()[1])["summary"]
    assert (summary["unknown_checks"], summary["evaluation_errors"]) == (20, 14)
    assert summary["rules_with_evaluation_errors"] == ["bad.div", "bad.range", "bad.sometimes"]


def test_check_fail_on_unknown_any_also_fails_on_unknowns_for_want_of_data(tmp_path):
    runs, pack = _two_runs(tmp_path), tmp_path / "m.yaml"
    pack.write_text(BROKEN_PACK.split("  - id: div")[0] + "  - id: missing" + BROKEN_PACK.split("  - id: missing")[1])
    assert run("check", runs, "--rules", pack, "-q").exit_code == 0  # null: the data lacks it, not a broken rule
    strict = run("check", runs, "--rules", pack, "-q", "--fail-on-unknown", "any")
    assert strict.exit_code == 1
    err = one_line(strict.stderr)
    assert ("warning: 6 check(s) are 'unknown' (6 could not be decided); the result is incomplete, so the exit code "
            "is 1 (--fail-on-unknown any;") in err
    assert "could not be evaluated" not in err  # no evaluation error: the words say so
    assert ("warning: rule bad.missing could not be decided (left unknown) at 6 step(s) where it applied (never pass "
            "or fail; first reason: ") in err
    loud = one_line(run("check", runs, "--rules", pack).stderr)
    assert "; 6 check(s) unknown (6 could not be decided)" in loud and "could not be evaluated" not in loud


# Fresh-user pass: the time-out warning named the runs in bare parentheses, "(10)", which read like a
# count. It says "runs: 10, 13" now, and "and N more" after the first five.

def test_check_timeout_warning_names_the_runs_as_runs(tmp_path):
    pack = tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    runs = write_json(tmp_path / "runs.json", [good_run(str(n)) for n in (10, 13)])
    err = one_line(run("check", runs, "--rules", pack, "--run-timeout", "0.000001", "-q").stderr)
    assert "their checks left 'unknown' (runs: 10, 13); the result is incomplete" in err
    many = write_json(tmp_path / "many.json", [good_run(f"r{n}") for n in range(7)])
    err = one_line(run("check", many, "--rules", pack, "--run-timeout", "0.000001", "-q").stderr)
    assert "(runs: r0, r1, r2, r3, r4 and 2 more); the result is incomplete" in err
