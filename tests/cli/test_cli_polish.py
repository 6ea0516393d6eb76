"""User-facing CLI defects a fresh user found: prediction step ranges in `eval`, one `--input-format`
spelling everywhere, non-UTF-8 warnings, LLM advice naming real options, `rules list` counts, and
tool schemas checked against the JSON Schema metaschema."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from trajaudit.cli import main

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples"
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


@pytest.fixture(scope="module")
def tau_one(tau_file, tmp_path_factory):
    """The first tau-retail run (id '2', 32 steps) alone in a file: fast to audit."""
    p = tmp_path_factory.mktemp("tau1") / "tau1.json"
    p.write_text(json.dumps(json.loads(tau_file.read_text())[:1]))
    return p


# --- 1. eval --pred: negative steps and steps past the run's end ------------------------------------

def test_eval_pred_steps_outside_the_run_are_kept_warned_and_scored_wrong(tau_file, tmp_path):
    gold = tau_file.parent / "ground_truth.json"
    # run 80 has 26 steps and gold step 25: a prediction of 26 (no such message) was within ±1 before;
    # run 2's -1 used to drop the whole line (exit 1); both are now kept, warned, and the step is wrong
    pred = tmp_path / "d.jsonl"
    pred.write_text(json.dumps({"trajectory_id": "80", "critical_step": 26, "strategy": "x"}) + "\n"
                    + json.dumps({"trajectory_id": "2", "critical_step": -1, "strategy": "x"}) + "\n"
                    + json.dumps({"trajectory_id": "47", "critical_step": 18, "strategy": "x"}) + "\n")
    r = run("eval", tau_file, "--gold", gold, "--pred", pred, "--format", "json", "--bootstrap", "20")
    assert r.exit_code == 0, r.output  # a warning, the same for both ends of the range
    err = r.stderr.replace("\n", "")
    assert "warning: run 80: critical_step 26 is outside the run's 26 steps (valid: 0..25); scored as wrong" in err
    assert "warning: run 2: critical_step -1 is outside the run's 32 steps (valid: 0..31); scored as wrong" in err
    rep = json.loads(r.stdout)
    assert rep["n_predictions"] == 3 and rep["n_matched"] == 3
    m = rep["metrics"]
    assert m["step_exact"]["value"] == pytest.approx(1 / 29)  # run 47 at its gold step 18
    assert m["step_within_1"]["value"] == pytest.approx(1 / 29)  # 26 no longer counts as 25 ± 1


def test_read_diagnoses_keeps_a_negative_step_for_the_range_check(tmp_path):
    from trajaudit.eval.runner import read_diagnoses

    p = tmp_path / "d.jsonl"
    p.write_text('{"trajectory_id": "a", "critical_step": 3}\n\n{"trajectory_id": "b", "critical_step": -2}\n'
                 '{"trajectory_id": "c", "critical_step": "4"}\n')
    diags, problems = read_diagnoses(p)
    assert [(d.trajectory_id, d.critical_step) for d in diags] == [("a", 3), ("b", -2)]
    assert [pr.record for pr in problems] == [4]  # only the non-integer step is a bad line
    assert "line 4: not a diagnosis (needs trajectory_id and an integer or null critical_step)" in problems[0].message


# --- 2. --input-format on every command that reads traces -------------------------------------------

TRACE_COMMANDS = (["show"], ["convert"], ["audit"], ["repair"], ["check"], ["claims"], ["eval"])


@pytest.mark.parametrize("cmd", TRACE_COMMANDS, ids=lambda c: c[0])
def test_help_lists_input_format_first(cmd):
    r = run(*cmd, "--help")
    assert r.exit_code == 0
    lines = [x.strip() for x in r.output.splitlines() if "--input-format" in x]
    assert len(lines) == 1 and lines[0].startswith("--input-format")  # the new name first, aliases after


def test_input_format_and_old_spellings_select_the_adapter(tau_file, tau_one, tmp_path):
    for args in (["show", tau_file, "--record", "0"], ["claims", tau_file, "--record", "0"],
                 ["convert", tau_one, "-o", tmp_path / "ir.json"],
                 ["audit", tau_one, "--strategy", "first", "-o", tmp_path / "d.jsonl", "-q"],
                 ["check", tau_one, "--rules", "generic.protocol"]):
        ok = run(*args, "--input-format", "tau")
        assert ok.exit_code == 0, (args, ok.output)
        bad = run(*args, "--input-format", "openai")
        assert "not in the 'openai' format" in bad.output.replace("\n", ""), args
    assert run("show", tau_file, "--record", "0", "--format", "tau").exit_code == 0  # old alias
    assert "not in the 'openai' format" in run("show", tau_file, "--format", "openai").output
    r = run("repair", tau_one, "--input-format", "tau", "-o", tmp_path / "resumed.json", env=NO_LLM_ENV)
    assert r.exit_code == 0, r.output
    gold = tau_file.parent / "ground_truth.json"
    for opt in ("--input-format", "--trace-format"):  # eval: new name and old alias
        r = run("eval", tau_one, "--gold", gold, "-s", "first", opt, "openai", "--bootstrap", "10")
        assert r.exit_code == 2 and "not in the 'openai' format" in r.stderr.replace("\n", "")
    r = run("eval", tau_one, "--gold", gold, "-s", "first", "--input-format", "tau", "--format", "json",
            "--bootstrap", "10")
    assert r.exit_code == 0 and json.loads(r.stdout)["n_matched"] == 1


# --- 3. non-UTF-8 traces: one warning per file -----------------------------------------------------

def test_non_utf8_trace_warns_once_per_file_without_changing_the_exit_code(tmp_path):
    msgs = [{"role": "system", "content": "You help."}, {"role": "user", "content": "caf\udce9 order?"},
            {"role": "assistant", "content": "Let me look."}]
    bad = tmp_path / "latin1.json"
    bad.write_bytes(json.dumps(msgs, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    good = tmp_path / "ok.json"
    good.write_text(json.dumps(msgs[:1] + [{"role": "user", "content": "cafe"}] + msgs[2:]))
    warning = f"warning: {bad} is not valid UTF-8; undecodable bytes were replaced"
    for args, code in ((["show", bad], 0), (["check", bad, good, "--rules", "generic.protocol"], 0),
                       (["audit", bad, good, "-o", tmp_path / "d.jsonl", "-q"], 0)):
        r = run(*args)
        assert r.exit_code == code, (args, r.output)
        assert r.stderr.replace("\n", "").count(warning) == 1, (args, r.stderr)
        assert str(good) + " is not" not in r.stderr
    assert "not valid UTF-8" not in run("show", good).stderr


# --- 4. LLM advice names options the command has ----------------------------------------------------

def test_llm_missing_endpoint_advice_fits_the_command():
    r = run("cite", EXAMPLES / "citation" / "ev_market.json", "--llm", env=NO_LLM_ENV)
    text = r.stderr.replace("\n", "")
    assert r.exit_code == 2 and "--strategy" not in text
    assert "Without an LLM, run `trajaudit cite` without --llm (the approximate offline judge)." in text
    r = run("llm", "ping", env=NO_LLM_ENV)
    text = r.stderr.replace("\n", "")
    assert r.exit_code == 2 and "--strategy" not in text and "pass --base-url URL and --model NAME" in text
    assert "`llm ping` checks an endpoint, so it needs one." in text
    r = run("audit", EXAMPLES / "citation" / "ev_market.json", "--strategy", "agentrx", env=NO_LLM_ENV)
    assert r.exit_code == 2 and "--strategy offline" in r.stderr.replace("\n", "")  # audit has --strategy


# --- 5. rules list counts -------------------------------------------------------------------------

def test_rules_list_names_its_counts():
    r = run("rules", "list")
    assert r.exit_code == 0 and "own)" not in r.output
    header = next(x for x in r.output.splitlines() if "pack" in x and "description" in x)
    assert [c.strip() for c in header.strip("┃ ").split("┃")][:6] == [
        "pack", "enabled", "defined", "included", "disabled", "includes"]
    row = next(x for x in r.output.splitlines() if x.startswith("│ generic.protocol "))
    assert [c.strip() for c in row.strip("│ ").split("│")][:5] == ["generic.protocol", "10", "11", "0", "1"]
    assert "enabled = defined + included - disabled" in r.output.replace("\n", "")
    one = run("rules", "list", "generic.protocol")
    assert ("generic.protocol: 10 rule(s) enabled of 11 (11 defined in the pack, 0 from includes, 1 disabled)"
            in one.output)


# --- 6. --tools: parameters checked against the JSON Schema metaschema ------------------------------

@pytest.mark.parametrize(("params", "problem"), [
    ({"type": "object", "properties": {"order_id": {"type": "strng"}}},
     "invalid JSON Schema at parameters.properties.order_id.type: 'strng' is not valid under any of the given"),
    ({"type": "string"}, 'parameters must describe an object ("type": "object"), got "type": "string"'),
    (["order_id"], "parameters must be a JSON Schema object, got list"),
    ({"type": "object", "required": "order_id"}, "invalid JSON Schema at parameters.required: 'order_id' is not of"),
])
def test_invalid_tool_parameters_are_a_clear_error(tau_one, tmp_path, params, problem):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "ping"}},
                                 {"type": "function", "function": {"name": "get_order", "parameters": params}}]))
    for args in (["check", tau_one, "--tools", tools], ["audit", tau_one, "--tools", tools, "-o", tmp_path / "d.jsonl"]):
        r = run(*args)
        text = r.stderr.replace("\n", "")
        assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)
        assert f"error: {tools}, element 1: tool 'get_order': " in text and problem in text, (args, text)


def test_valid_tool_schemas_still_load(tau_one, tau_file):
    r = run("check", tau_one, "--tools", tau_file.parent / "tools.json", "--format", "json")
    assert r.exit_code in (0, 1) and json.loads(r.stdout)[0]["trajectory_id"] == "2"
