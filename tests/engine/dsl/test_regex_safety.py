"""Catastrophic-backtracking regexes are refused at compile time, in every pack."""

from __future__ import annotations

import pytest

from trajaudit import compile_rules, load_pack
from trajaudit.engine.dsl.regex.safety import nested_unbounded
from trajaudit.errors import RulePackError


@pytest.mark.parametrize("pattern, risky", [
    ("(A+)+B", True), (r"(\w*\s?)*", True), (r"(a|\s+)*", True),
    (r"(\d+,)*", False), (r"(?:currently\s+|still\s+)*x", False), (r"\d{3}-\d{4}", False),
])
def test_nested_unbounded(pattern, risky):
    assert nested_unbounded(pattern) is risky


def test_pack_with_redos_regex_is_rejected_with_location():
    pack = load_pack({"pack": "r", "rules": [{"id": "redos", "type": "PROTOCOL", "severity": "error",
                                              "targets": ["system_failure"], "guard": 'step.kind == "tool"',
                                              "assert": 'not (content ~ "(A+)+B")', "message": "m"}]})
    with pytest.raises(RulePackError, match="catastrophic backtracking") as e:
        compile_rules(pack)
    assert e.value.rule_id == "r.redos"


def test_shipped_packs_compile():
    for name in ("generic", "tau_retail"):
        assert len(compile_rules(load_pack(name))) > 10


def test_lint_warns_on_unknown_targets_and_empty_packs():
    from trajaudit.engine.packs.lint import lint_pack

    rule = {"id": "x", "type": "PROTOCOL", "severity": "error", "targets": ["no_such_category", "system_failure"],
            "guard": 'step.kind == "tool"', "assert": "not output.is_error", "message": "m"}
    (f,) = [f for f in lint_pack({"pack": "p", "rules": [rule]}) if f.code != "no-examples"]
    assert (f.level, f.code, f.rule_id) == ("warning", "unknown-target", "p.x") and "no_such_category" in f.message
    (e,) = lint_pack({"pack": "p"})
    assert (e.level, e.code) == ("warning", "empty-pack")
