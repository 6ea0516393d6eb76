"""`rules lint`: planted unsatisfiable guards, contradictions, tautologies, conflicting pairs, bad names."""

from __future__ import annotations

from pathlib import Path

from cli_kit import NEVER_FIRING_PACK
from click.testing import CliRunner
from hostile_kit import cli, one_line

from trajaudit.cli import main
from trajaudit.engine.packs.lint import lint_pack

PLANTED = Path(__file__).resolve().parents[2] / "rules_data" / "planted_lint.yaml"


def _by_rule(findings):
    return {(f.rule_id.split(".")[-1] if f.rule_id else None, f.code) for f in findings if f.code != "no-examples"}


def test_planted_findings():
    findings = lint_pack(str(PLANTED))
    got = _by_rule(findings)
    assert got == {
        ("typo", "compile"),
        ("never-applies", "unsatisfiable-guard"),
        ("call-twice", "unsatisfiable-guard"),
        ("always-fails", "contradiction"),
        ("always-passes", "tautology"),
        ("threshold", "contradiction"),
        ("lists-differ", "conflicting-rules"),
    }
    unsat = next(f for f in findings if f.code == "unsatisfiable-guard")
    assert unsat.location.endswith("planted_lint.yaml:5:12") and unsat.level == "error"
    taut = next(f for f in findings if f.code == "tautology")
    assert taut.level == "warning"
    typo = next(f for f in findings if f.code == "compile")
    assert "unknown name 'stp'; did you mean step" in typo.message


def test_clean_and_broken_packs():
    ok = "pack: ok\nrules:\n  - id: a\n    type: PROTOCOL\n    guard: step.kind == 'agent'\n    assert: not content ~ /x/\n"
    (f,) = lint_pack(ok)  # issue 18: a rule without examples is named
    assert (f.level, f.code, f.rule_id) == ("warning", "no-examples", "ok.a")
    with_examples = ok + "    examples:\n      - {messages: [{role: assistant, content: x}], expect: fail}\n"
    assert lint_pack(with_examples) == []
    bad_schema = "pack: b\nrules:\n  - id: a\n    type: NOPE\n    colour: red\n    assert: x\n"
    found = lint_pack(bad_schema)
    assert [(f.code, f.location) for f in found] == [("schema", "<rules>:4:11"), ("schema", "<rules>:5:5")]
    assert "type 'NOPE' is not one of" in found[0].message and "unknown field 'colour'" in found[1].message
    (f,) = lint_pack("pack: [unclosed\n")
    assert f.code == "yaml"


def test_lint_cli_exit_codes():
    r = CliRunner()
    res = r.invoke(main, ["rules", "lint", str(PLANTED)])
    assert res.exit_code == 1
    assert "unsatisfiable-guard [planted.never-applies]" in res.stdout
    rules = len(lint_pack(str(PLANTED))) - 7  # the 7 planted findings; the rest: no-examples warnings
    assert f"6 error(s), {1 + rules} warning(s)" in res.stderr


def test_supersedes_names_must_be_known_rules():
    """A typo in metadata.supersedes would silently keep both rules: lint warns, with a suggestion;
    shipped ids, ids of the pack itself and the shipped tau_retail declaration are accepted."""
    text = ("pack: mine\nrules:\n  - id: a\n    type: PROTOCOL\n    assert: step.index >= 0\n    metadata:\n"
            "      supersedes: [{}]\n")
    found = [f for f in lint_pack(text.format("generic.protocol.confirmation-before-writes")) if f.code == "unknown-superseded"]
    assert len(found) == 1 and found[0].level == "warning" and found[0].rule_id == "mine.a"
    assert "did you mean generic.protocol.confirmation-before-write" in found[0].message
    for ok in ("generic.system.tool-traceback", "mine.a2"):
        pack = text.format(ok) + "  - id: a2\n    type: PROTOCOL\n    assert: step.index >= 0\n"
        assert not [f for f in lint_pack(pack) if f.code == "unknown-superseded"]
    bad_shape = [f for f in lint_pack(text.format("").replace("[]", "7")) if f.code == "unknown-superseded"]
    assert bad_shape and "should be a list" in bad_shape[0].message
    assert not [f for f in lint_pack("tau_retail") if f.code == "unknown-superseded"]


def test_lint_warns_on_the_rule_without_examples(tmp_path):
    pack = tmp_path / "p.yaml"
    pack.write_text(NEVER_FIRING_PACK)
    r = cli("rules", "lint", pack)
    assert r.exit_code == 0, r.output
    assert "no-examples [mine.never]" in one_line(r.stdout) and "[mine.fires]" not in r.stdout
    assert "0 error(s), 1 warning(s)" in r.stderr


def test_a_duplicate_rule_id_does_not_hide_the_other_errors(tmp_path):
    """``rules lint`` stopped at a duplicate rule id (fresh-user pass): the other rules' compile errors
    were hidden until it was renamed. All errors come in one pass, each at file:line — the duplicate
    (naming the first definition), the second definition's own compile error, the others' — and a
    duplicate in an included pack too; loading the pack still fails on it."""
    import pytest

    from trajaudit.engine.packs.pack import load_pack
    from trajaudit.errors import RulePackError

    pack = tmp_path / "p.yaml"
    pack.write_text("pack: p\nrules:\n"
                    "  - id: a\n    type: PROTOCOL\n    assert: step.kind = 'user'\n"
                    "  - id: b\n    type: PROTOCOL\n    assert: step.index >= 0\n"
                    "  - id: b\n    type: PROTOCOL\n    assert: len(1 +)\n"
                    "  - id: c\n    type: PROTOCOL\n    assert: nosuchfn(1)\n", encoding="utf-8")
    errors = [(f.code, f.rule_id, f.location.rsplit("/", 1)[-1]) for f in lint_pack(str(pack)) if f.level == "error"]
    assert errors == [("compile", "p.a", "p.yaml:5:23"), ("pack", "p.b", "p.yaml:9:9"),
                      ("compile", "p.b", "p.yaml:11:20"), ("compile", "p.c", "p.yaml:14:13")]
    dup = next(f for f in lint_pack(str(pack)) if f.code == "pack")
    assert "duplicate rule id 'p.b' (also at " in dup.message and "p.yaml:6:5)" in dup.message
    top = tmp_path / "top.yaml"
    top.write_text(f"pack: top\ninclude: [{pack}]\nrules:\n  - id: d\n    type: PROTOCOL\n    assert: nope(\n",
                   encoding="utf-8")
    codes = sorted((f.code, f.rule_id) for f in lint_pack(str(top)) if f.level == "error")
    assert codes == [("compile", "p.a"), ("compile", "p.b"), ("compile", "p.c"), ("compile", "top.d"), ("pack", "p.b")]
    with pytest.raises(RulePackError, match="duplicate rule id 'p.b'"):
        load_pack(str(pack))
    res = CliRunner().invoke(main, ["rules", "lint", str(pack)])
    assert res.exit_code == 1 and "4 error(s)" in res.stderr


def test_schema_problems_of_one_rule_do_not_hide_the_other_rules_errors(tmp_path):
    """Fresh-user pass: a pack with ``severity: fatal`` in one rule and a misspelled ``asert:`` in another
    got only those two schema errors; the duplicate id and the compile error of the other rules came
    after they were fixed. All in one pass now; loading the pack still stops at the schema problem."""
    import pytest

    from trajaudit.engine.packs.pack import load_pack
    from trajaudit.errors import RulePackError

    pack = tmp_path / "p.yaml"
    pack.write_text("pack: p\nrules:\n"
                    "  - id: a\n    type: PROTOCOL\n    severity: fatal\n    assert: step.index >= 0\n"
                    "  - id: b\n    type: PROTOCOL\n    asert: step.index >= 0\n"
                    "  - id: c\n    type: PROTOCOL\n    assert: step.index >= 0\n"
                    "  - id: c\n    type: PROTOCOL\n    assert: step.index >= 1\n"
                    "  - id: d\n    type: PROTOCOL\n    assert: nosuchfn(1)\n", encoding="utf-8")
    errors = [(f.code, f.rule_id, f.location.rsplit("/", 1)[-1]) for f in lint_pack(str(pack)) if f.level == "error"]
    assert errors == [("schema", "a", "p.yaml:5:15"), ("schema", "b", "p.yaml:9:5"), ("pack", "p.c", "p.yaml:13:9"),
                      ("compile", "p.d", "p.yaml:18:13")]
    with pytest.raises(RulePackError, match="schema: "):
        load_pack(str(pack))
    res = CliRunner().invoke(main, ["rules", "lint", str(pack)])
    assert res.exit_code == 1 and "4 error(s)" in res.stderr


def test_a_pack_level_schema_problem_still_stops_the_lint_at_the_schema():
    """A problem outside the rules (here ``rules`` is no list) leaves nothing to lint rule by rule."""
    found = lint_pack("pack: p\nrules: 5\n")
    assert [f.code for f in found] == ["schema"]


def test_an_override_of_a_rule_with_schema_problems_falls_back_to_the_schema_problems():
    """Leaving a rule out would make ``overrides`` name an unknown id: the schema problems are reported alone."""
    text = ("pack: p\nrules:\n  - id: a\n    type: PROTOCOL\n    severity: fatal\n    assert: step.index >= 0\n"
            "overrides:\n  a:\n    severity: warning\n")
    found = lint_pack(text)
    assert [(f.code, f.rule_id) for f in found if f.level == "error"] == [("schema", "a")]
