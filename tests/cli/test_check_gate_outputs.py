"""`trajaudit check --format junit|json` agree with the gate (exit 1): evaluation errors, runs cut by
--run-timeout and skipped inputs are in the output, not only in the exit code.

Fresh-user pass: a rule that could not be evaluated was a JUnit ``<skipped>`` "the rule applied but
could not be evaluated" with failures=0 errors=0 while check exited 1; rules cut by --run-timeout were
"skipped … the rule applied" (whether they apply is not known); a bad JSONL line was not in the report
at all (a CI view showed a green build). ``--format json`` printed ``[]`` with exit 1 (the unknown
records and the out-of-time facts never appeared) and left out the summary of the runs without
failures, which ``--all-records``'s help promised.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from cli_kit import TIMEOUT_PACK
from hostile_kit import good_run, write_json, write_jsonl
from test_check import BROKEN_PACK, run


def _cases(xml: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    """{(suite name's first word, case name): (tag, type, message)} of the cases that are not plain passes."""
    root = ET.fromstring(xml.encode())
    out = {}
    for suite in root.findall("testsuite"):
        for case in suite.findall("testcase"):
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    out[(suite.get("name").split(" ")[0], case.get("name"))] = (child.tag, child.get("type", ""),
                                                                               child.get("message"))
    return out


def _totals(xml: str) -> dict[str, int]:
    root = ET.fromstring(xml.encode())
    assert sum(int(s.get("errors")) for s in root.findall("testsuite")) == int(root.get("errors"))
    return {k: int(root.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def test_junit_reports_evaluation_errors_as_errors(tmp_path):
    runs = write_json(tmp_path / "runs.json", [good_run("r1")])
    pack = tmp_path / "bad.yaml"
    pack.write_text(BROKEN_PACK)
    r = run("check", runs, "--rules", pack, "--format", "junit", "-q")
    assert r.exit_code == 1
    cases = _cases(r.stdout)
    assert cases[("r1", "bad.div")] == ("error", "evaluation-error",
                                        "the rule could not be evaluated at 3 step(s) (first at step 2: evaluation "
                                        "error: division by zero (10 / 0))")
    assert cases[("r1", "bad.sometimes")][:2] == ("error", "evaluation-error")  # passes elsewhere: still an error
    assert cases[("r1", "bad.missing")] == ("skipped", "", cases[("r1", "bad.missing")][2])  # for want of data
    assert cases[("r1", "bad.missing")][2].startswith("the rule applied but could not be decided (unknown)")
    assert ("r1", "bad.ok") not in cases
    assert _totals(r.stdout) == {"tests": 5, "failures": 0, "errors": 3, "skipped": 1}
    never = run("check", runs, "--rules", pack, "--format", "junit", "-q", "--fail-on-unknown", "never")
    assert never.exit_code == 0 and _totals(never.stdout)["errors"] == 0
    strict = run("check", runs, "--rules", pack, "--format", "junit", "-q", "--fail-on-unknown", "any")
    assert _totals(strict.stdout)["errors"] == 4 and _cases(strict.stdout)[("r1", "bad.missing")][:2] == ("error",
                                                                                                         "unknown")


def test_junit_reports_runs_out_of_time_as_errors(tmp_path):
    runs = write_json(tmp_path / "runs.json", [good_run("r1")])
    pack = tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    r = run("check", runs, "--rules", pack, "--format", "junit", "-q", "--run-timeout", "0.000001")
    assert r.exit_code == 1
    cases = _cases(r.stdout)
    assert cases and all(tag == "error" and kind == "out-of-time" for tag, kind, _ in cases.values())
    msg = next(iter(cases.values()))[2]
    assert "ran out of rule-evaluation time (--run-timeout)" in msg and "whether it applies is not known" in msg
    assert "applied" not in msg.replace("whether it applies", "")
    assert _totals(r.stdout)["errors"] == len(cases) and _totals(r.stdout)["skipped"] == 0


def test_junit_reports_skipped_inputs_as_error_cases(tmp_path):
    runs = tmp_path / "mixed.jsonl"
    write_jsonl(runs, [json.dumps(good_run("a")), "{not json", json.dumps(good_run("b"))])
    r = run("check", runs, "--rules", "generic.system", "--format", "junit", "-q", "--fail-on", "critical")
    assert r.exit_code == 1
    root = ET.fromstring(r.stdout.encode())
    suites = root.findall("testsuite")
    assert [s.get("name").split(" ")[0] for s in suites] == ["a", "b", "skipped"]
    (case,) = suites[-1].findall("testcase")
    assert case.get("name") == f"{runs} line 2" and case.get("file") == str(runs)
    assert case.find("error").get("message").startswith("skipped: ")
    assert _totals(r.stdout)["errors"] == 1 and suites[-1].get("errors") == "1"


def test_json_lists_every_run_and_the_records_that_fail_the_gate(tmp_path):
    runs = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    pack = tmp_path / "bad.yaml"
    pack.write_text(BROKEN_PACK)
    r = run("check", runs, "--rules", pack, "--format", "json", "-q")
    assert r.exit_code == 1
    logs = json.loads(r.stdout)
    assert [lg["trajectory_id"] for lg in logs] == ["r1", "r2"]  # no failure: still listed, with its summary
    s = logs[0]["summary"]
    assert (s["unknown_checks"], s["evaluation_errors"], s["out_of_time"]) == (10, 7, False)
    recs = logs[0]["records"]
    assert len(recs) == 7 and {x["rule_id"] for x in recs} == {"bad.div", "bad.range", "bad.sometimes"}
    assert all(x["verdict"] == "unknown" for x in recs)
    pack.write_text(TIMEOUT_PACK)
    cut = json.loads(run("check", runs, "--rules", pack, "--format", "json", "-q", "--run-timeout", "0.000001").stdout)
    assert [lg["summary"]["out_of_time"] for lg in cut] == [True, True]
    assert cut[0]["summary"]["rules_out_of_time"] and cut[0]["records"]
    assert {x["rule_id"] for x in cut[0]["records"]} == set(cut[0]["summary"]["rules_out_of_time"])


# Hostile-user pass: `check --format json` on a batch with a skipped input (a bad JSONL line, an empty
# file) printed the logs of the runs it read and nothing of the others on stdout (they were only on
# stderr): a consumer of the JSON saw a clean batch. Now each skipped input is an entry after the logs,
# {"skipped": {file, record, stage, message}}, as in the stderr summary's "problems"; the logs unchanged.

def test_json_lists_the_skipped_inputs_after_the_logs(tmp_path):
    runs, empty = tmp_path / "mixed.jsonl", tmp_path / "empty.json"
    write_jsonl(runs, [json.dumps(good_run("a")), "{not json", json.dumps(good_run("b"))])
    empty.write_text("")
    r = run("check", runs, empty, "--rules", "generic.system", "--format", "json", "-q", "--fail-on", "critical")
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert [x.get("trajectory_id") for x in out] == ["a", "b", None, None]
    assert "skipped" not in out[0] and out[0]["summary"]["records"] > 0  # a log as before
    bad_line, empty_file = out[2]["skipped"], out[3]["skipped"]
    assert (bad_line["file"], bad_line["record"], bad_line["stage"]) == (str(runs), 1, "load")
    assert bad_line["message"].startswith(f"{runs}, record 1: invalid JSON on line 2")
    assert empty_file == {"file": str(empty), "record": None, "stage": "load", "message": f"{empty}: file is empty"}
    written = tmp_path / "out.json"  # -o with --format table: the same list
    assert run("check", runs, empty, "--rules", "generic.system", "-q", "-o", written).exit_code == 1
    assert json.loads(written.read_text())[2:] == out[2:]
    clean = json.loads(run("check", write_json(tmp_path / "r.json", good_run("c")), "--rules", "generic.system",
                           "--format", "json", "-q").stdout)
    assert [x["trajectory_id"] for x in clean] == ["c"]  # nothing skipped: the list of logs alone
