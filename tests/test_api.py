"""The Python API's argument handling (fresh-user defects 3, 4, 9): a bare path or pack is ONE item,
and a bad argument raises a TrajauditError subclass naming the argument — never a TypeError from
pathlib or an AttributeError from deep inside the engine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import trajaudit
from trajaudit import compile_rules, evaluate, load, load_many, load_pack
from trajaudit.cli import main
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.errors import (
    ArgumentTypeError,
    ConfigError,
    DiagnosisFormatError,
    RulePackError,
    TraceFormatError,
    TrajauditError,
    UnknownStrategyError,
)

PACK = """pack: mine
rules:
  - id: long-answer
    type: PROTOCOL
    severity: error
    targets: [system_failure]
    guard: step.kind == "agent"
    assert: len(content) < 40
    message: "long answer"
"""


@pytest.fixture
def ww1(ww_dir) -> Path:
    return ww_dir / "1.json"


@pytest.fixture
def pack_file(tmp_path) -> Path:
    p = tmp_path / "mine.yaml"
    p.write_text(PACK)
    return p


# --- defect 3: load_many("x.json") is one path, not its characters ---------------------------------

def test_load_many_takes_a_bare_str_or_path_as_one_path(tmp_path, monkeypatch, ww1):
    (tmp_path / "other.json").write_text(ww1.read_text())  # '.' (a character of the name) would load it
    monkeypatch.chdir(tmp_path)
    res = load_many("nope.json")
    assert res.trajectories == []
    assert [(p.file, p.record) for p in res.problems] == [("nope.json", None)]
    assert "cannot read" in res.problems[0].message
    one = load_many(ww1)  # an os.PathLike (not iterable before)
    assert [t.id for t in one.trajectories] == ["1"] and not one.problems
    assert [t.id for t in load_many(str(ww1)).trajectories] == ["1"]


def test_load_many_refuses_what_is_not_paths(ww1):
    with pytest.raises(ArgumentTypeError, match=r"load_many\(\): argument 'paths' .* got int 42"):
        load_many(42)
    with pytest.raises(ArgumentTypeError, match=r"argument 'paths\[1\]' .* got NoneType None") as e:
        load_many([ww1, None])
    assert isinstance(e.value, TypeError)


# --- defect 4: audit(rules="my.yaml") is one pack -------------------------------------------------

def test_audit_rules_as_one_str_path_or_rulepack(ww1, pack_file):
    listed = trajaudit.audit(ww1, rules=[str(pack_file)]).to_dict()
    assert listed["category"] == "system_failure" and "mine.long-answer" in listed["rationale"]
    assert listed["error_steps"] == [0, 2, 4]
    assert trajaudit.audit(ww1, rules=str(pack_file)).to_dict() == listed
    assert trajaudit.audit(ww1, rules=pack_file).to_dict() == listed
    assert trajaudit.audit(ww1, rules=load_pack(pack_file)).to_dict() == listed
    assert trajaudit.audit(ww1, rules=[load_pack(pack_file)]).to_dict() == listed
    plain = trajaudit.audit(ww1).to_dict()
    assert plain != listed and trajaudit.audit(ww1, rules=None).to_dict() == plain


def test_audit_rules_of_the_wrong_type(ww1):
    with pytest.raises(ArgumentTypeError, match=r"argument 'rules\[0\]' .* got int 3"):
        trajaudit.audit(ww1, rules=[3])
    with pytest.raises(ArgumentTypeError, match=r"argument 'rules' .* got int 5"):
        trajaudit.audit(ww1, rules=5)


# --- defect 9: clear errors at the entry points -----------------------------------------------------

def test_audit_tools_as_the_schema_list_equals_the_file(tau_file):
    tools = tau_file.parent / "tools.json"
    by_file = trajaudit.audit(tau_file, record=0, tools=tools).to_dict()
    assert trajaudit.audit(tau_file, record=0, tools=json.loads(tools.read_text())).to_dict() == by_file
    without = trajaudit.audit(tau_file, record=0).to_dict()
    assert by_file["metadata"]["log_summary"] != without["metadata"]["log_summary"]  # SCHEMA rules ran


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"tools": 5}, r"argument 'tools' must be None, a tools JSON file path, or a list .* got int 5"),
    ({"tools": [1]}, r"argument 'tools\[0\]' must be an OpenAI function schema"),
    ({"record": "1"}, r"argument 'record' must be None or a 0-based int; got str '1'"),
    ({"record": True}, r"argument 'record'"),
    ({"strategy": None}, r"argument 'strategy' must be a name \(str\); got NoneType None"),
    ({"llm": "http://x"}, r"argument 'llm' must be None or a trajaudit.llm.LLMConfig .* got str 'http://x'"),
])
def test_audit_bad_argument_types(ww1, kwargs, pattern):
    with pytest.raises(ArgumentTypeError, match=pattern) as e:
        trajaudit.audit(ww1, **kwargs)
    assert isinstance(e.value, TypeError) and e.value.function == "audit"


@pytest.mark.parametrize("value", [42, None, b"[]"])
def test_audit_and_load_bad_source(value):
    with pytest.raises(ArgumentTypeError, match=r"audit\(\): argument 'trajectory' must be a Trajectory"):
        trajaudit.audit(value)
    with pytest.raises(ArgumentTypeError, match=r"load\(\): argument 'source' must be a Trajectory"):
        load(value)


def test_json_text_given_as_a_path_says_so():
    text = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    with pytest.raises(TraceFormatError, match=r"looks like JSON text, not a file path.*json.loads"):
        load(text)
    assert load(json.loads(text)).steps[1].content == "hello"


def test_unknown_strategy_is_a_config_error_and_a_lookup_error(ww1):
    with pytest.raises(UnknownStrategyError, match=r"unknown strategy 'ofline'; did you mean offline") as e:
        trajaudit.audit(ww1, strategy="ofline")
    assert isinstance(e.value, LookupError) and isinstance(e.value, ConfigError)


def test_load_path_checks_its_arguments(ww1):
    with pytest.raises(ArgumentTypeError, match=r"load_path\(\): argument 'path'"):
        trajaudit.load_path(3)
    with pytest.raises(ArgumentTypeError, match=r"load_path\(\): argument 'record'"):
        trajaudit.load_path(ww1, record="0")


def test_evaluate_arguments(ww1):
    t = load(ww1)
    pack = load_pack("generic")
    rules = compile_rules(pack)
    assert evaluate(t, pack).to_dict() == evaluate(t, rules).to_dict()  # a RulePack is compiled
    assert evaluate(t, tuple(rules)).to_dict() == evaluate(t, rules).to_dict()
    with pytest.raises(ArgumentTypeError, match=r"evaluate\(\): argument 'trajectory' must be a Trajectory "
                                                r"\(read one with trajaudit.load\(path\)\); got str"):
        evaluate(str(ww1), rules)
    # what compile_rules takes, evaluate takes (a shipped name raised ArgumentTypeError)
    assert evaluate(t, "generic").to_dict() == evaluate(t, rules).to_dict()
    assert evaluate(t, Path(pack.file)).to_dict() == evaluate(t, list(pack.rules)).to_dict() == evaluate(t, rules).to_dict()
    with pytest.raises(RulePackError, match="nope"):
        evaluate(t, "nope")
    with pytest.raises(ArgumentTypeError, match=r"argument 'rules' must be a list of compiled rules"):
        evaluate(t, b"generic")
    with pytest.raises(ArgumentTypeError, match=r"argument 'rules\[1\]' must be a CompiledRule"):
        evaluate(t, [rules[0], pack.rules[0]])
    with pytest.raises(ArgumentTypeError, match=r"argument 'tools' must be None or a list .* got int 42"):
        evaluate(t, rules, tools=42)


def test_a_missing_trace_file_is_a_file_not_found_error_and_a_trace_format_error(tmp_path):
    missing = tmp_path / "nope.json"
    for call in (lambda: trajaudit.audit(str(missing)), lambda: load(missing)):
        with pytest.raises(FileNotFoundError) as ei:
            call()
        e = ei.value
        assert isinstance(e, TraceFormatError) and e.file == str(missing) and e.filename == str(missing)
        assert e.errno == 2 and str(e) == f"{missing}: cannot read: No such file or directory"
    with pytest.raises(TraceFormatError) as ei:  # a folder is no trace file, but it exists
        trajaudit.load_path(tmp_path)
    assert not isinstance(ei.value, FileNotFoundError)


def test_load_pack_argument_types():
    with pytest.raises(ArgumentTypeError, match=r"load_pack\(\): argument 'params' must be None or a mapping"):
        load_pack("generic", params=[1])
    with pytest.raises(ArgumentTypeError, match=r"load_pack\(\): argument 'source' .* got int 1"):
        load_pack(1)


def test_diagnosis_from_dict_errors(ww1):
    d = trajaudit.audit(ww1)
    assert Diagnosis.from_dict(d.to_dict()) == d
    with pytest.raises(DiagnosisFormatError, match=r"not a diagnosis: no 'trajectory_id'") as e:
        Diagnosis.from_dict({})
    assert isinstance(e.value, KeyError) and isinstance(e.value, TrajauditError)
    with pytest.raises(DiagnosisFormatError, match=r"trajectory_id 'a'.*ValueError") as e:
        Diagnosis.from_dict({"trajectory_id": "a", "confidence": "high"})
    assert isinstance(e.value, ValueError)
    with pytest.raises(ArgumentTypeError, match=r"Diagnosis.from_dict\(\): argument 'd' must be a mapping"):
        Diagnosis.from_dict(None)


def test_pathlike_sources_still_work(ww1):
    class P(os.PathLike):
        def __fspath__(self) -> str:
            return str(ww1)

    assert load(P()).id == "1"
    assert trajaudit.audit(P()).to_dict() == trajaudit.audit(str(ww1)).to_dict()


def test_compile_rules_argument_types():
    pack = load_pack("generic")
    assert [r.id for r in compile_rules(list(pack.rules))] == [r.id for r in compile_rules(pack)]
    with pytest.raises(ArgumentTypeError, match=r"compile_rules\(\): argument 'pack\[0\]' must be a RuleSpec"):
        compile_rules(["generic"])
    with pytest.raises(ArgumentTypeError, match=r"compile_rules\(\): argument 'pack' .* got int 7"):
        compile_rules(7)


def test_in_memory_runs_without_an_id_get_distinct_reproducible_ids():
    import trajaudit

    a = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]
    b = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "y"}]
    ida, idb = trajaudit.load(a).id, trajaudit.load(b).id
    assert ida.startswith("trajectory-") and len(ida) == len("trajectory-") + 10
    assert ida != idb and trajaudit.load(list(a)).id == ida
    assert trajaudit.load({"id": "r7", "messages": a}).id == "r7"


def test_fresh_user_papercuts(tmp_path):
    """A multi-run file without record= names the file; LoadResult prints a summary, not every run;
    audit takes -s like eval; show marks a failed tool output."""
    from pathlib import Path

    import pytest

    import trajaudit
    from trajaudit.errors import TraceFormatError

    sample = Path(__file__).resolve().parents[1] / "examples" / "data" / "tau_retail_sample.json"
    with pytest.raises(TraceFormatError, match=r"tau_retail_sample\.json: input holds 3 runs; pass record=N"):
        trajaudit.load(sample)
    assert repr(trajaudit.load_many([sample])) == "LoadResult(3 trajectories [2, 34, 74], 0 problems)"
    r = CliRunner().invoke(main, ["audit", str(sample), "-s", "first", "-o", str(tmp_path / "d.jsonl"), "-q"])
    assert r.exit_code == 0 and [json.loads(x)["strategy"] for x in (tmp_path / "d.jsonl").read_text().splitlines()] == ["first"] * 3
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps([{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                                 {"role": "tool", "tool_call_id": "c", "name": "f", "content": "Error: boom"}]))
    out = CliRunner().invoke(main, ["show", str(trace), "--width", "60"]).output
    assert [ln for ln in out.splitlines() if "✗ failed" in ln] and "Error: boom" in out
