"""Every example in docs/rules.md is a test: each `yaml` pack's examples pass, and each line of an
`expressions` block evaluates (at step 8 of the doc's sample trace) to the value it states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trajaudit import compile_rules, evaluate, load, load_pack
from trajaudit.engine.validation.rule_tests import run_examples
from trajaudit.errors import RulePackError

DOC = (Path(__file__).resolve().parents[3] / "docs" / "rules.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```([^\n]*)\n(.*?)^```", DOC, flags=re.S | re.M)
PARAMS = {"auth": ["find_user_id_by_email", "find_user_id_by_name_zip"], "max": 3}
LINES = [ln for info, body in BLOCKS if info.strip() == "expressions" for ln in body.splitlines() if ln.strip()]


def _sample():
    (body,) = [b for info, b in BLOCKS if info.strip() == "json sample-trace"]
    return load(json.loads(body), format="openai")


@pytest.mark.parametrize("text", [b for info, b in BLOCKS if info.strip() == "yaml"])
def test_doc_packs_examples_pass(text):
    rules = compile_rules(load_pack(text))
    results = run_examples(rules)
    assert results and all(r.ok for r in results), [r.detail for r in results if not r.ok]


def test_doc_has_many_expression_examples():
    assert len(LINES) >= 60


@pytest.mark.parametrize("line", LINES)
def test_doc_expression(line):
    expr, value = (x.strip() for x in line.split("⇒"))
    expected = json.loads(value)
    pack = {"pack": "doc", "params": PARAMS,
            "rules": [{"id": "x", "type": "PROTOCOL", "guard": "step.index == 8", "let": {"v": expr}, "assert": "true"}]}
    try:
        rules = compile_rules(load_pack(pack))
    except RulePackError as e:
        assert expected == "error", f"{expr}: {e}"
        return
    (rec,) = evaluate(_sample(), rules).records
    if expected == "error":
        assert rec.verdict == "unknown" and rec.reason.startswith("evaluation error"), rec
        return
    assert rec.verdict == "pass", rec.reason
    got = rec.bindings["v"]
    if isinstance(got, dict) and set(got) == {"address", "preview"}:
        got = got["address"]
    if isinstance(expected, float):
        assert got == pytest.approx(expected)
    elif isinstance(expected, list) and expected and isinstance(expected[0], float):
        assert got == pytest.approx(expected)
    else:
        assert got == expected
