"""Class 3: a --mapping with a deeply nested expression (thousands of parentheses, nested filters).

Was: ``RecursionError`` while it compiled. Now: refused when the mapping is loaded (size and depth
of each expression), exit 2 naming the file, the key and the limit, before any output is opened."""

from __future__ import annotations

from hostile_kit import cli, good_run, one_line, write_json

from trajaudit.engine.trace.adapters.mapping import MAX_EXPRESSION_CHARS, MAX_EXPRESSION_DEPTH


def test_deep_and_long_expressions_are_refused_before_any_output(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    out = tmp_path / "d.jsonl"
    out.write_text("old\n")
    cases = {
        "parens": ("(" * 3000 + "messages" + ")" * 3000, "expression too long"),
        "filters": ("messages" + "[?a" * 60 + "]" * 60, f"expression too deeply nested (60 levels; the limit is "
                                                           f"{MAX_EXPRESSION_DEPTH})"),
        "or-chain": (" || ".join(["messages"] * 150), "expression too deeply nested (150 levels"),  # the tree's depth
        "literal": ("`" + "9" * 5000 + "`", "expression too long"),
    }
    for name, (expr, said) in cases.items():
        mapping = tmp_path / f"{name}.yaml"
        mapping.write_text(f"messages: '{expr}'\n")
        for args in (("audit", run, "--mapping", mapping, "-q", "-o", out), ("show", run, "--mapping", mapping),
                     ("check", run, "--mapping", mapping, "--rules", "generic", "-o", out)):
            r = cli(*args)
            assert r.exit_code == 2, (name, args, r.output)
            text = one_line(r.stderr)
            assert f"error: {mapping}: bad jmespath for 'messages': {said}" in text, (name, text)
            assert "Traceback" not in r.output and "RecursionError" not in r.output
            assert out.read_text() == "old\n"
    assert MAX_EXPRESSION_CHARS >= 200  # real mappings (examples/mappings) stay far below


def test_a_nested_literal_within_the_size_limit_is_refused_by_depth(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    mapping = tmp_path / "m.yaml"
    mapping.write_text("messages: '`" + "[" * 80 + "]" * 80 + "`'\n")
    r = cli("show", run, "--mapping", mapping)
    assert r.exit_code == 2 and "expression too deeply nested (80 levels" in one_line(r.stderr)
