"""The CLI (issue 21): one meaning per flag (--input-format / --format), --id next to --record, usage errors
before any write (exit 2), `check` with the default packs, 80-column tables, YAML hints, SARIF 2.1.0
and JUnit XML outputs, JSON from `rules lint/test`, `eval --report`, one stylesheet for every page."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
import report_page
from click.testing import CliRunner

from trajaudit.cli import main

SCHEMA = Path(__file__).resolve().parents[1] / "data" / "sarif" / "sarif-schema-2.1.0.json"
TAU_IDS = ["2", "3", "4"]


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


@pytest.fixture()
def tau3(tau_file, tmp_path):
    """The first three tau runs as a JSONL file (one run per line)."""
    runs = json.loads(tau_file.read_text(encoding="utf-8"))[:3]
    p = tmp_path / "tau3.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in runs), encoding="utf-8")
    return p


# --- usage errors before any output ------------------------------------------------------------------

def test_audit_of_a_missing_path_leaves_the_output_untouched_and_exits_2(tmp_path):
    keep = tmp_path / "keep.jsonl"
    keep.write_text('{"earlier": true}\n')
    for missing in (tmp_path / "nonexistnt", tmp_path / "runs" / "*.json"):
        r = run("audit", missing, "-o", keep, "--report", tmp_path / "r.html")
        assert r.exit_code == 2, r.output
        assert "no such file or folder" in r.output or "matches no file" in r.output
    assert keep.read_text() == '{"earlier": true}\n' and not (tmp_path / "r.html").exists()
    r = run("check", tmp_path / "nothing.json", "-o", keep)
    assert r.exit_code == 2 and keep.read_text() == '{"earlier": true}\n'
    assert run("audit", tmp_path, "--format", "xml").exit_code == 2  # a bad option value


# --- --input-format / --format ----------------------------------------------------------------------

def test_format_chooses_output_and_the_old_input_spelling_warns(tau3, tmp_path):
    r = run("show", tau3, "--format", "json")
    assert r.exit_code == 0
    assert [d["id"] for d in json.loads(r.stdout)] == TAU_IDS
    r = run("show", tau3, "--output-format", "json", "--input-format", "tau")
    assert [d["format"] for d in json.loads(r.stdout)] == ["tau"] * 3
    old = run("show", tau3, "--format", "tau", "--record", "0")  # deprecated: an input format given to --format
    assert old.exit_code == 0 and "deprecated" in old.stderr and "--input-format tau" in old.stderr
    assert "2  [tau]" in old.stdout
    assert run("show", tau3, "--format", "tau", "--input-format", "openai").exit_code == 2  # they disagree
    r = run("audit", tau3, "--format", "tau", "-s", "first", "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 0 and "deprecated" in r.stderr and len((tmp_path / "d.jsonl").read_text().splitlines()) == 3
    r = run("cite", tau3, "--format", "openai")
    assert r.exit_code == 2 and "is an input format" in r.output
    r = run("convert", tau3, "-o", tmp_path / "ir.json", "--format", "jsonl")
    assert r.exit_code == 0 and len((tmp_path / "ir.json").read_text().splitlines()) == 3


def test_eval_trace_format_alias_warns(tau_file, tau3):
    gold = tau_file.parent / "ground_truth.json"
    r = run("eval", tau3, "--gold", gold, "-s", "first", "--trace-format", "tau", "--format", "json",
            "--bootstrap", "10")
    assert r.exit_code == 0 and "--trace-format tau as the input format is deprecated" in r.stderr
    assert json.loads(r.stdout)["n_matched"] == 3


# --- --id next to --record ----------------------------------------------------------------------------

def test_a_run_is_chosen_by_id_or_by_record(tau3, tmp_path):
    by_id = run("show", tau3, "--id", "4")
    assert by_id.exit_code == 0 and by_id.stdout.startswith("4  [tau]")
    assert by_id.stdout == run("show", tau3, "--record", "2").stdout
    r = run("show", tau3, "--id", "99")
    assert r.exit_code == 2 and "no run with id '99'" in r.output and "ids: 2, 3, 4" in r.output
    assert run("show", tau3, "--id", "4", "--record", "2").exit_code == 2
    assert run("convert", tau3, "--id", "3", "-o", tmp_path / "one.json").exit_code == 0
    assert json.loads((tmp_path / "one.json").read_text())["id"] == "3"
    r = run("claims", tau3, "--id", "3", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["graph"]["trajectory_id"] == "3"
    r = run("repair", tau3, "--id", "3", "--strategy", "first", "--template", "-o", tmp_path / "resumed.json",
            env={"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""})
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("3: critical step")


# --- check ------------------------------------------------------------------------------------------

def test_check_uses_the_default_packs_and_shows_only_failing_runs(tau_file):
    r = run("check", tau_file, "--format", "json")
    assert r.exit_code == 1
    logs = json.loads(r.stdout)
    rules = {x["rule_id"] for lg in logs for x in lg["records"]}
    assert any(x.startswith("generic.") for x in rules) and any(x.startswith("tau_retail.") for x in rules)
    assert all(x["verdict"] == "fail" for lg in logs for x in lg["records"]) and len(logs) == 29  # every run's summary
    assert len([lg for lg in logs if lg["records"]]) == 26  # the failing records of the runs with failures
    every = json.loads(run("check", tau_file, "--format", "json", "--all-records").stdout)
    assert len(every) == 29 and {x["verdict"] for lg in every for x in lg["records"]} >= {"pass", "fail"}
    assert len(r.stdout) * 5 < len(json.dumps(every))  # failing records only: a fraction of the size
    table = run("check", tau_file)
    titles = [line for line in table.stdout.splitlines() if " fail, " in line and " pass, " in line]
    assert len(titles) == 26  # only the runs with findings
    verbose = run("check", tau_file, "--verbose")
    assert len([x for x in verbose.stdout.splitlines() if " fail, " in x and " pass, " in x]) == 29
    quiet = run("check", tau_file, "-q")
    assert quiet.exit_code == 1 and quiet.stdout == "" and quiet.stderr == ""


# --- 80 columns -------------------------------------------------------------------------------------

def test_audit_summary_fits_80_columns_without_cutting_the_category(tau_file, tmp_path):
    r = run("audit", tau_file, "-o", tmp_path / "d.jsonl", env={"COLUMNS": "80"})
    assert r.exit_code == 0
    lines = r.stderr.splitlines()
    assert max(len(x) for x in lines) <= 80
    cats = Counter(json.loads(x)["category"] for x in (tmp_path / "d.jsonl").read_text().splitlines())
    table = [x for x in lines if x[:4].strip().isdigit()]
    assert len(table) == 29  # one line per run: previews cut, never wrapped
    shown = Counter(c for x in table for c in cats if f" {c} " in x)
    assert shown == cats


def test_show_previews_are_one_line_at_80_columns(tau3):
    r = run("show", tau3, "--id", "2", env={"COLUMNS": "80"})
    body = [x for x in r.stdout.splitlines() if x.startswith("│")]
    assert max(len(x) for x in r.stdout.splitlines()) <= 80 and len(body) == 32  # 32 steps, one line each


# --- YAML errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("expr,word", [('step.content == "a: b" or x: y', "': '"),
                                      ('step.content == "see #tag"', "' #'")])
def test_unquoted_yaml_in_an_expression_says_quote_this_expression(tmp_path, expr, word):
    pack = tmp_path / "p.yaml"
    pack.write_text("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n    severity: error\n"
                    "    targets: [invention_of_new_information]\n    guard: step.kind == \"agent\"\n"
                    f"    assert: {expr}\n    message: m\n")
    r = run("rules", "lint", pack)
    assert r.exit_code == 1 and "quote this expression" in r.stdout and word in r.stdout
    assert f"{pack}:8:" in r.stdout
    pack.write_text(pack.read_text().replace(f"assert: {expr}", "assert: '" + expr.replace("'", "''") + "'"))
    assert "quote this expression" not in run("rules", "lint", pack).stdout


# --- SARIF and JUnit --------------------------------------------------------------------------------

def _sarif_validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_check_sarif_validates_and_has_one_result_per_violation(tau_file, tmp_path):
    out = tmp_path / "r.sarif"
    r = run("check", tau_file, "--format", "sarif", "-o", out)
    assert r.exit_code == 1
    log = json.loads(out.read_text())
    errors = [e.message for e in _sarif_validator().iter_errors(log)]
    assert errors == []
    fails = [(lg["trajectory_id"], x["step"], x["rule_id"], x["severity"])
             for lg in json.loads(run("check", tau_file, "--format", "json").stdout) for x in lg["records"]]
    results = log["runs"][0]["results"]
    assert sorted((x["properties"]["run"], x["properties"]["step"], x["ruleId"], x["properties"]["severity"])
                  for x in results) == sorted(fails)
    first = results[0]
    assert first["level"] in ("error", "warning", "note")
    loc = first["locations"][0]
    assert loc["physicalLocation"]["artifactLocation"]["uri"].endswith("trajectories.json")
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == f"{first['properties']['run']}/steps/" \
                                                             f"{first['properties']['step']}"
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [x["id"] for x in rules][first["ruleIndex"]] == first["ruleId"]
    bad = json.loads(out.read_text())
    del bad["runs"][0]["tool"]
    assert list(_sarif_validator().iter_errors(bad))  # the schema does catch a broken log


def test_sarif_file_uris_are_relative_to_srcroot_or_absolute(tmp_path):
    """A relative artifact URI carries a uriBaseId whose base the run declares (SARIF 2.1.0 §3.4.4,
    §3.14.14: a file:// URI ending in /); a file outside the root is an absolute file URI (a fresh-user
    pass found "../shared/…" with no base); URLs stay as they are."""
    from urllib.parse import urljoin

    from trajaudit.report.ci import RunFindings, Violation, sarif_log

    root = tmp_path / "repo"
    v = (Violation(2, "p.r", "error", "m"),)
    runs = [RunFindings("a", "runs/a b#1.json", None, v), RunFindings("b", "../shared/x.jsonl", 3, v),
            RunFindings("c", str(root / "in" / "c.json"), None, v), RunFindings("d", "s3://bucket/d.json", None, v),
            RunFindings("e", "", None, v), RunFindings("f", "./runs/../f.json", None, v)]
    log = sarif_log(runs, root=root)
    assert [e.message for e in _sarif_validator().iter_errors(log)] == []
    run_log = log["runs"][0]
    locs = [x["locations"][0].get("physicalLocation", {}).get("artifactLocation") for x in run_log["results"]]
    assert locs == [{"uri": "runs/a%20b%231.json", "uriBaseId": "%SRCROOT%"},
                    {"uri": (tmp_path / "shared" / "x.jsonl").as_uri()},
                    {"uri": "in/c.json", "uriBaseId": "%SRCROOT%"},
                    {"uri": "s3://bucket/d.json"}, None,
                    {"uri": "f.json", "uriBaseId": "%SRCROOT%"}]
    base = run_log["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == root.as_uri() + "/"
    assert urljoin(base, locs[0]["uri"]) == (root / "runs" / "a b#1.json").as_uri()
    only_outside = sarif_log([runs[1]], root=root)["runs"][0]
    assert "originalUriBaseIds" not in only_outside  # no relative URI, no base to declare


def test_audit_sarif_and_junit(tau3, tmp_path):
    sarif, junit = tmp_path / "a.sarif", tmp_path / "a.xml"
    assert run("audit", tau3, "--format", "sarif", "-o", sarif, "-q").exit_code == 0
    log = json.loads(sarif.read_text())
    assert list(_sarif_validator().iter_errors(log)) == []
    results = log["runs"][0]["results"]
    assert {x["properties"]["run"] for x in results} <= set(TAU_IDS) and results
    assert all(x["locations"][0]["physicalLocation"]["region"]["startLine"] == TAU_IDS.index(x["properties"]["run"]) + 1
               for x in results)  # the run's line in the JSONL file
    assert run("audit", tau3, "--format", "junit", "-o", junit, "-q").exit_code == 0
    from junitparser import Failure, JUnitXml

    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert [s.name.split(" ")[0] for s in suites] == TAU_IDS
    failed = {(c.classname, c.name) for s in suites for c in s if any(isinstance(x, Failure) for x in c.result)}
    errors = {(f"trajaudit.{x['properties']['run']}", x["ruleId"]) for x in results if x["level"] == "error"}
    assert failed == errors and failed


def test_check_junit_has_a_case_per_run_and_applied_rule(tau_file, tmp_path):
    out = tmp_path / "j.xml"
    r = run("check", tau_file, "--format", "junit", "-o", out, "--fail-on", "warning")
    assert r.exit_code == 1
    from junitparser import Failure, JUnitXml

    xml = JUnitXml.fromfile(str(out))
    every = json.loads(run("check", tau_file, "--format", "json", "--all-records").stdout)
    applied = {(lg["trajectory_id"], x["rule_id"]) for lg in every for x in lg["records"]}
    cases = {(c.classname.removeprefix("trajaudit."), c.name) for s in xml for c in s}
    assert cases == applied
    failing = {(lg["trajectory_id"], x["rule_id"]) for lg in every for x in lg["records"]
               if x["verdict"] == "fail" and x["severity"] in ("warning", "error", "critical")}
    got = {(c.classname.removeprefix("trajaudit."), c.name) for s in xml for c in s
           if any(isinstance(x, Failure) for x in c.result)}
    assert got == failing and xml.failures == len(failing) if hasattr(xml, "failures") else got == failing


def _hostile_check(tmp_path):
    """A pack whose rule title holds ESC, the 8-bit CSI and a right-to-left override, and a run whose
    user turn (quoted by the rule's message) holds ESC, CSI, NUL, RLM, a line separator, U+FFFF and a
    lone surrogate."""
    pack = tmp_path / "p.yaml"
    pack.write_text('pack: p\nrules:\n  - id: esc\n    type: PROTOCOL\n    severity: error\n'
                    '    title: "bad \\e[31mred \\u009b2J \\u202eflip"\n    guard: step.kind == "user"\n'
                    "    assert: 'len(step.content) < 3'\n    message: \"says {step.content}\"\n")
    runs = tmp_path / "m.json"
    runs.write_text(json.dumps({"id": "m\x1b]0;t\x07", "messages": [
        {"role": "user", "content": "a \x1b[1mb\x9b2J\x00 \u200f\u2028\uffff\ud800"},
        {"role": "assistant", "content": "ok"}]}))
    return pack, runs


SHOWN = "a ⟨U+001B⟩[1mb⟨U+009B⟩2J⟨U+0000⟩ ⟨U+200F⟩⟨U+2028⟩⟨U+FFFF⟩⟨U+D800⟩"


def test_sarif_shows_control_characters_of_titles_and_messages_by_name(tmp_path):
    """A rule's title (shortDescription) went into SARIF raw, and messages kept the C1 controls (the
    8-bit CSI U+009B), the bidi marks and the line separators: SARIF viewers render these strings, so
    they carry the names the reports use (⟨U+001B⟩), and the log stays schema-valid."""
    pack, runs = _hostile_check(tmp_path)
    for command in (["check"], ["audit", "-q"]):
        r = run(*command, runs, "--rules", pack, "--format", "sarif", "-o", "-")
        assert "\\ud8" not in r.stdout  # a lone surrogate's escape: strict JSON parsers (jq) refuse it
        log = json.loads(r.stdout)
        assert [e.message for e in _sarif_validator().iter_errors(log)] == []
        (rule,) = log["runs"][0]["tool"]["driver"]["rules"]
        assert rule["shortDescription"]["text"] == "bad ⟨U+001B⟩[31mred ⟨U+009B⟩2J ⟨U+202E⟩flip"
        (result,) = log["runs"][0]["results"]
        assert result["message"]["text"] == f"says {SHOWN} (run m⟨U+001B⟩]0;t⟨U+0007⟩, step 0)"


def test_junit_with_control_characters_and_noncharacters_parses(tmp_path):
    """XML 1.0 cannot hold U+FFFF (nor most C0 controls): a message quoting a trace text with it made
    the JUnit report unparsable. Every such character is shown by name."""
    import xml.etree.ElementTree as ET

    pack, runs = _hostile_check(tmp_path)
    for command in (["check"], ["audit", "-q"]):
        r = run(*command, runs, "--rules", pack, "--format", "junit", "-o", "-")
        root = ET.fromstring(r.stdout.encode("utf-8"))
        (suite,) = root
        assert suite.get("name") == f"m⟨U+001B⟩]0;t⟨U+0007⟩ ({runs})"
        failure = suite.find("testcase/failure")
        assert failure.get("message") == f"step 0: says {SHOWN}"
        assert failure.text == f"step 0 [error]: says {SHOWN}"


# --- rules lint / test --format json ----------------------------------------------------------------

def test_rules_lint_and_test_write_json(tmp_path):
    r = run("rules", "test", "generic", "--format", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["failed"] == 0 and doc["passed"] == len(doc["results"]) > 10
    pack = tmp_path / "p.yaml"
    pack.write_text("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n    severity: loud\n    assert: 'true'\n")
    r = run("rules", "lint", pack, "--format", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["errors"] >= 1 and doc["findings"][0]["level"] == "error"
    assert any("loud" in f["message"] for f in doc["findings"])


# --- eval --report, one stylesheet ------------------------------------------------------------------

def test_eval_report_puts_gold_next_to_the_prediction(tau_file, tau3, tmp_path):
    gold = tau_file.parent / "ground_truth.json"
    html, md = tmp_path / "e.html", tmp_path / "e.md"
    r = run("eval", tau3, "--gold", gold, "-s", "first", "--bootstrap", "10", "--format", "json", "--report", html)
    assert r.exit_code == 0, r.output
    rows = {x["key"]: x for x in json.loads(r.stdout)["rows"]}
    page = html.read_text()
    shown = report_page.runs(page)
    assert [x["id"] for x in shown] == list(rows)  # every gold run, the 26 without a prediction too
    assert {x["cat"] for x in shown if x["id"] not in TAU_IDS} == {"(no prediction)"}
    for x in (y for y in shown if y["id"] in TAU_IDS):
        g = rows[x["id"]]
        assert x["gold"]["step"] == g["gold_step"] and x["step"] == g["pred_step"]
        assert x["dist"] == abs(g["pred_step"] - g["gold_step"])
    assert '<table class="metrics">' in page and "95% CI" in page
    assert report_page.details(page)[0]["gold"]["step"] == rows["2"]["gold_step"]
    assert run("eval", tau3, "--gold", gold, "-s", "first", "--bootstrap", "10", "--report", md).exit_code == 0
    assert md.read_text().startswith("## Evaluation")


def test_every_page_uses_the_one_stylesheet(tau3, tmp_path):
    from trajaudit.report.page import static

    css = static("report.css")
    assert run("audit", tau3, "-o", tmp_path / "d.jsonl", "--report", tmp_path / "a.html", "-q").exit_code == 0
    run("cite", Path(__file__).resolve().parents[2] / "examples" / "citation" / "ev_market.json",
        "--html", tmp_path / "c.html")
    for page in (tmp_path / "a.html", tmp_path / "c.html"):
        text = page.read_text()
        assert text.count("<style>") == 1 and f"<style>{css}</style>" in text


def test_no_html_is_built_from_strings_in_python():
    """Every HTML page comes from the templates: no string literal of the report or citation modules
    holds a tag (docstrings aside)."""
    import ast
    import re

    root = Path(__file__).resolve().parents[2] / "trajaudit"
    tag = re.compile(r"<(/?)(html|head|body|div|section|table|tr|td|th|ul|ol|li|span|script|style|p|a|b|h\d|code|"
                     r"blockquote|details|summary|svg)[\s>]")
    found = []
    for path in [*sorted((root / "report").glob("*.py")), root / "citation" / "html.py"]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if tag.search(node.value):
                    found.append(f"{path.name}:{node.lineno}: {node.value[:60]!r}")
    assert found == []


def test_output_format_follows_the_output_name_when_format_is_not_given(tmp_path):
    """`-o x.sarif` writes SARIF and `-o x.xml` JUnit without --format (a fresh-user pass found JSONL in
    both); an explicit --format still wins; a name the command has no format for keeps the default."""
    from click.testing import CliRunner

    from trajaudit.cli import main

    ex = str(Path(__file__).resolve().parents[2] / "examples" / "data")
    run = CliRunner().invoke
    assert run(main, ["audit", ex, "-q", "-o", str(tmp_path / "a.sarif")]).exit_code == 0
    assert json.loads((tmp_path / "a.sarif").read_text())["version"] == "2.1.0"
    assert run(main, ["audit", ex, "-q", "-o", str(tmp_path / "a.xml")]).exit_code == 0
    assert (tmp_path / "a.xml").read_text().startswith("<?xml")
    assert run(main, ["audit", ex, "-q", "-o", str(tmp_path / "b.sarif"), "--format", "jsonl"]).exit_code == 0
    assert json.loads((tmp_path / "b.sarif").read_text().splitlines()[0])["trajectory_id"]
    assert run(main, ["audit", ex, "-q", "-o", str(tmp_path / "c.txt")]).exit_code == 0
    assert json.loads((tmp_path / "c.txt").read_text().splitlines()[0])["trajectory_id"]  # jsonl, the default
    r = run(main, ["check", ex, "-q", "-o", str(tmp_path / "k.sarif")])
    assert r.exit_code in (0, 1) and json.loads((tmp_path / "k.sarif").read_text())["version"] == "2.1.0"


def test_audit_to_a_json_name_warns_that_it_writes_json_lines(tau3, tmp_path):
    """`audit -o x.json` writes JSON Lines (audit has no one-document JSON output) and says so on stderr
    (a fresh-user pass found it silent); .jsonl, '-' and an explicit --format jsonl do not warn."""
    r = run("audit", tau3, "-q", "-o", tmp_path / "d.json")
    assert r.exit_code == 0
    assert "d.json: writing JSON Lines (one JSON document per line), not one JSON document" in " ".join(r.stderr.split())
    assert [json.loads(x)["trajectory_id"] for x in (tmp_path / "d.json").read_text().splitlines()] == TAU_IDS
    for args in (["-o", tmp_path / "d.jsonl"], ["-o", "-"], ["-o", tmp_path / "e.json", "--format", "jsonl"]):
        r = run("audit", tau3, "-q", *args)
        assert r.exit_code == 0 and "JSON Lines" not in r.stderr, args


# Fresh-user pass: runs cut by --run-timeout, skipped inputs and checks left 'unknown' were invisible in
# SARIF (invocations[0].executionSuccessful true, no toolExecutionNotifications). SARIF 2.1.0 §3.20: now
# a notification each (level, message, location) and executionSuccessful false when an input was skipped
# or a run ran out of time.

UNKNOWN_PACK = """pack: u
rules:
  - id: div
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: 10 / (len(step.content) - len(step.content)) == 1
  - id: ok
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: step.index >= 0
"""


def _sarif_runs(tmp_path):
    from hostile_kit import good_run

    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(good_run("r1")) + "\n" + "{not json\n", encoding="utf-8")
    pack = tmp_path / "u.yaml"
    pack.write_text(UNKNOWN_PACK)
    return runs, pack


def test_check_sarif_reports_skipped_inputs_unknown_checks_and_runs_out_of_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs, pack = _sarif_runs(tmp_path)
    r = run("check", "runs.jsonl", "--rules", pack, "--format", "sarif", "-q")
    assert r.exit_code == 1
    log = json.loads(r.stdout)
    assert [e.message for e in _sarif_validator().iter_errors(log)] == []
    inv = log["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False  # an input was skipped
    skipped, unknown = inv["toolExecutionNotifications"]
    assert skipped["level"] == "error" and skipped["message"]["text"].startswith("skipped: ")
    assert skipped["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "runs.jsonl", "uriBaseId": "%SRCROOT%"}, "region": {"startLine": 2}}
    assert unknown["level"] == "warning" and unknown["associatedRule"] == {"id": "u.div"}
    assert unknown["message"]["text"] == ("rule u.div could not be evaluated at 3 step(s) of run r1 (first at step 2: "
                                          "evaluation error: division by zero (10 / 0))")
    assert unknown["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "r1/steps/2"
    assert unknown["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}
    cut = json.loads(run("check", "runs.jsonl", "--rules", pack, "--format", "sarif", "--run-timeout", "0.000001",
                         "--fail-on-unknown", "never").stdout)
    assert [e.message for e in _sarif_validator().iter_errors(cut)] == []
    notes = cut["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    timed = [n for n in notes if "ran out of rule-evaluation time" in n["message"]["text"]]
    assert timed and timed[0]["level"] == "error" and timed[0]["properties"]["rules"] == ["u.div", "u.ok"]
    assert timed[0]["locations"][0]["logicalLocations"] == [{"fullyQualifiedName": "r1", "name": "r1"}]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(json.loads(runs.read_text().splitlines()[0])))
    whole = json.loads(run("check", good, "--rules", "generic.system", "--format", "sarif").stdout)
    assert whole["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_audit_sarif_reports_runs_out_of_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs, pack = _sarif_runs(tmp_path)
    r = run("audit", "runs.jsonl", "--rules", pack, "--format", "sarif", "-o", "-", "-q", "--run-timeout", "0.000001")
    assert r.exit_code == 1  # the skipped line
    log = json.loads(r.stdout)
    assert [e.message for e in _sarif_validator().iter_errors(log)] == []
    inv = log["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    texts = [n["message"]["text"] for n in inv["toolExecutionNotifications"]]
    assert texts[0].startswith("skipped: ") and any(t.startswith("run r1 ran out of rule-evaluation time") for t in texts)
