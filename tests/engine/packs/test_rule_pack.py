"""Rule packs: includes, parameters and their overrides, disable/severity, locations, bad packs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trajaudit import compile_rules, evaluate, load, load_pack
from trajaudit.engine.packs import pack as rule_pack
from trajaudit.errors import RulePackError

BASE = """pack: base
params:
  refusal_words: ["I cannot", "I'm unable"]
  max_words: 50
rules:
  - id: no-refusal
    type: CAPABILITY
    severity: warning
    targets: [guardrails_triggered]
    guard: step.kind == "agent"
    assert: not contains_any(content, params.refusal_words)
    message: "refusal: {content}"
  - id: short
    type: PROTOCOL
    guard: step.kind == "agent"
    assert: len(captures(content, /\\S+/)) <= params.max_words
"""


def _write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def test_includes_params_override_disable_and_severity(tmp_path):
    _write(tmp_path, "base.yaml", BASE)
    top = _write(tmp_path, "top.yaml", """pack: top
include:
  - pack: base.yaml
    params: {refusal_words: ["sorry"]}
    severity: {no-refusal: error}
params:
  max_words: 3
disable: [base.short]
overrides:
  base.no-refusal: {severity: critical}
rules:
  - id: own
    type: PROTOCOL
    assert: "true"
""")
    pack = load_pack(top)
    assert [r.id for r in pack.rules] == ["base.no-refusal", "base.short", "top.own"]
    refusal, short, own = pack.rules
    assert refusal.params == {"refusal_words": ["sorry"], "max_words": 3}  # outer pack's params win by name
    assert refusal.severity == "critical" and short.disabled and not own.disabled
    assert refusal.loc.file.endswith("base.yaml") and refusal.loc.line == 6
    rules = compile_rules(pack)
    assert [r.id for r in rules] == ["base.no-refusal", "top.own"]
    traj = load([{"role": "assistant", "content": "Sorry, I cannot do that."}], format="openai")
    (rec,) = [r for r in evaluate(traj, rules).records if r.rule_id == "base.no-refusal"]
    assert (rec.verdict, rec.severity, rec.message) == ("fail", "critical", "refusal: Sorry, I cannot do that.")
    assert load_pack(top, params={"refusal_words": ["nope"]}).rules[0].params["refusal_words"] == ["nope"]


@pytest.mark.parametrize("text,where,message", [
    ("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n    asert: x\n", (5, 5), "unknown field 'asert' (did you mean 'assert'?)"),
    ("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n    severity: fatal\n    assert: x\n", (5, 15), "'fatal' is not one of"),
    ("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n", (3, 5), "rule 'a': give exactly one of assert: or check:"),
    ("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n    assert: x\n  - id: a\n    type: PROTOCOL\n    assert: y\n",
     (6, 9), "duplicate rule id 'p.a'"),
    ("pack: p\ndisable: [nope]\nrules: []\n", (2, 11), "unknown rule id 'nope'"),
    ("pack: p\nrules:\n  - id: a\n   type: x\n", (4, 4), "YAML syntax error"),
    ("pack: p\ninclude: [missing.yaml]\n", (2, 11), "rule pack 'missing.yaml' not found"),
    ("- just\n- a list\n", (1, 1), "a rule pack is a mapping"),
    ("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n    assert: yes\n", (5, 13), "quote it"),
])
def test_bad_packs_are_located(text, where, message):
    with pytest.raises(RulePackError) as ei:
        load_pack(text)
    assert (ei.value.line, ei.value.column) == where, str(ei.value)
    assert message in ei.value.message


def test_include_cycle_and_unknown_include_param(tmp_path):
    _write(tmp_path, "a.yaml", "pack: a\ninclude: [b.yaml]\n")
    _write(tmp_path, "b.yaml", "pack: b\ninclude: [a.yaml]\n")
    with pytest.raises(RulePackError, match="include cycle: a.yaml → b.yaml → a.yaml"):
        load_pack(tmp_path / "a.yaml")
    _write(tmp_path, "base.yaml", BASE)
    _write(tmp_path, "c.yaml", "pack: c\ninclude:\n  - {pack: base.yaml, params: {refusal_wrds: []}}\n")
    with pytest.raises(RulePackError, match="unknown parameter.*refusal_wrds") as ei:
        load_pack(tmp_path / "c.yaml")
    assert ei.value.line == 3


def test_unknown_checker_and_bad_checker_args():
    text = "pack: p\nrules:\n  - id: a\n    type: SCHEMA\n    check: {checker: regex_serch, args: {pattern: x}}\n"
    with pytest.raises(RulePackError, match="unknown checker 'regex_serch'; did you mean regex_search") as ei:
        compile_rules(load_pack(text))
    assert ei.value.line == 3 and ei.value.rule_id == "p.a"
    text = "pack: p\nrules:\n  - id: a\n    type: SCHEMA\n    check: {checker: regex_search, args: {pattern: '('}}\n"
    with pytest.raises(RulePackError, match="invalid regex"):
        compile_rules(load_pack(text))


def test_shipped_pack_names_resolve(tmp_path, monkeypatch):
    (tmp_path / "generic").mkdir()
    _write(tmp_path / "generic", "demo.yaml", BASE.replace("pack: base", "pack: generic.demo"))
    monkeypatch.setattr(rule_pack.resources, "files", lambda pkg: tmp_path)
    assert rule_pack.shipped_packs() == ["generic.demo"]
    pack = load_pack("generic.demo")
    assert pack.name == "generic.demo" and len(pack.rules) == 2
    with pytest.raises(RulePackError, match="shipped packs: generic.demo"):
        load_pack("generic.nope")


def test_dict_source_keeps_rule_locations():
    pack = load_pack({"pack": "d", "rules": [{"id": "x", "type": "PROTOCOL", "assert": "step.kind == 'user'"}]})
    (r,) = pack.rules
    assert r.id == "d.x" and r.loc.line == 3 and r.field_locs["assert"].line == 5
