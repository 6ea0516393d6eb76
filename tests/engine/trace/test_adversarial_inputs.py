"""Hostile inputs outside the trace adapters: YAML alias bombs in data files and rule packs,
degenerate (deeply nested) text in agent messages and in LLM answers."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

import trajaudit
from trajaudit import load_path, safe_yaml
from trajaudit.engine.claims.patterns import json_ranges
from trajaudit.engine.packs.positions import YamlDoc
from trajaudit.errors import RulePackError
from trajaudit.llm.client import parse_json_answer


def _bomb(levels: int, indent: str = "") -> str:
    lines = [f'{indent}a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    prev = "a"
    for ch in "bcdefghijk"[: levels - 1]:
        lines.append(f"{indent}{ch}: &{ch} [" + ", ".join([f"*{prev}"] * 9) + "]")
        prev = ch
    return "\n".join(lines) + "\n"


def test_billion_laughs_in_a_data_yaml_is_refused():
    with pytest.raises(safe_yaml.YAMLAliasBomb, match="expand the document by more than 100000 nodes"):
        safe_yaml.load(_bomb(9))  # 9^9 expanded strings: walking them took minutes
    with pytest.raises(safe_yaml.YAMLAliasBomb, match="recursive"):
        safe_yaml.load("a: &a [1, *a]\n")
    # anchors that share a block stay allowed
    assert safe_yaml.load("x: &a {k: 1}\ny: [*a, *a]\n") == {"x": {"k": 1}, "y": [{"k": 1}, {"k": 1}]}


def test_billion_laughs_in_a_mapping_file_is_a_clear_error(tmp_path):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("name: chat\nmessages: '@'\ndescription:\n" + _bomb(9, "  "), encoding="utf-8")
    run = tmp_path / "run.json"
    run.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]),
                   encoding="utf-8")
    with pytest.raises(trajaudit.errors.TrajauditError, match="m.yaml.*anchors/aliases"):
        load_path(run, mapping=str(mapping))


def test_billion_laughs_in_a_rule_pack_is_refused_before_the_position_walk():
    # six levels already cost the position walk 531,441 paths (5 s, 420 MB); nine would exhaust memory
    text = "pack: bomb\nversion: 1\nrules: []\nmetadata:\n" + _bomb(9, "  ")
    with pytest.raises(RulePackError, match="anchors/aliases expand the document"):
        YamlDoc(text, "bomb.yaml")


def test_a_line_of_thousands_of_brackets_is_not_json_and_does_not_crash_the_audit():
    text = 'He said "yes".\n' + "[" * 5000
    assert json_ranges(text) == []
    run = [{"role": "user", "content": "Find X"}, {"role": "assistant", "content": text},
           {"role": "assistant", "content": "FINAL ANSWER: 42"}]
    assert trajaudit.audit(run).critical_step is not None


def test_a_degenerate_llm_answer_is_an_invalid_answer_not_a_recursion_error():
    v = jsonschema.Draft202012Validator({"type": "object"})
    value, err = parse_json_answer('{"step": ' + "[" * 100_000, v)
    assert value is None and "nested too deeply" in err
    assert parse_json_answer('{"step": [[1]]}', v) == ({"step": [[1]]}, None)


def test_yaml_error_class_hierarchy_keeps_callers_handling():
    assert issubclass(safe_yaml.YAMLAliasBomb, yaml.YAMLError)
