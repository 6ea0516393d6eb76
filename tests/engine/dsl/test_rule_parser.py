"""Grammar, AST, compile-time checks and located errors of the rule expression language."""

from __future__ import annotations

import pytest

from trajaudit import compile_rules, evaluate, load, load_pack
from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.compiler import ExprCompiler
from trajaudit.engine.dsl.parser import CHARACTER_HINTS, COMMON_MISTAKES, Where, parse_expression
from trajaudit.errors import RulePackError


def test_ast_shapes_and_precedence():
    e = parse_expression("a or b and not c == 1 + 2 * 3")
    assert A.unparse(e) == "(a or (b and not (c == (1 + (2 * 3)))))"
    q = parse_expression('exists s in earlier where s.kind == "user" and s.content ~ /y\\/es/i')
    assert isinstance(q, A.Quant) and q.kind == "exists" and q.var == "s" and q.body is None
    assert isinstance(q.where, A.Binary) and q.where.op == "and"  # the body extends to the right
    assert q.where.right.right == A.Regex("y/es", "i")
    f = parse_expression("forall x in call.args.ids where x != null: x in seen")
    assert f.kind == "forall" and A.unparse(f.body) == "(x in seen)"
    assert A.unparse(parse_expression("x not in [1, 'a']")) == '(x not in [1, "a"])'
    assert A.unparse(parse_expression("[v.p for v in xs where v.ok]")) == "[v.p for v in xs where v.ok]"
    assert parse_expression("a / b").op == "/"  # division, not a regex, after an operand
    assert parse_expression("1.5e3").value == 1500.0 and parse_expression("'it\\'s'").value == "it's"


@pytest.mark.parametrize("label,examples", list(COMMON_MISTAKES.items()))
def test_common_mistakes_table(label, examples):
    for text in examples:
        with pytest.raises(RulePackError) as ei:
            parse_expression(text)
        assert label in ei.value.message, (text, ei.value.message)


@pytest.mark.parametrize("char,hint", list(CHARACTER_HINTS.items()))
def test_character_hints(char, hint):
    text = {"=": "a = b", "&": "a && b", "|": "a || b", "!": "!a", '"': 'x == "abc', "'": "x == 'abc",
            "/": "x ~ /abc", "$": "$.a", "`": "`a`"}[char]
    with pytest.raises(RulePackError) as ei:
        parse_expression(text)
    assert hint in ei.value.message


def test_errors_are_located_in_the_pack_file():
    text = """pack: p
rules:
  - id: r
    type: PROTOCOL
    guard: |
      step.kind == "agent" and
        content ~ /(unclosed/
    assert: "true"
"""
    with pytest.raises(RulePackError) as ei:
        compile_rules(load_pack(text))
    e = ei.value
    assert (e.line, e.column, e.rule_id) == (7, 19, "p.r")
    assert "invalid regex" in e.message and e.context.splitlines()[1].index("^") == 4 + 12
    assert str(e).startswith("<rules>:7:19 (rule p.r): in guard: invalid regex")


# Hostile-user pass: an integer literal of more than 4,300 digits in a rule expression was "error:
# internal error: VisitError: Error trying to process rule "number": Exceeds the limit (4300 digits)
# for integer string conversion" (Python's int() limit, raised inside lark's transformer). It is now a
# located error with the limit of JSON traces (safe_json.MAX_INT_DIGITS); a float literal of any length
# and an integer at the limit still parse.

def test_an_integer_literal_beyond_the_limit_is_a_located_error():
    text = "pack: p\nrules:\n  - id: big\n    type: PROTOCOL\n    assert: step.index < " + "9" * 5000 + "\n"
    with pytest.raises(RulePackError) as ei:
        compile_rules(load_pack(text))
    e = ei.value
    assert (e.line, e.column, e.rule_id) == (5, 26, "p.big")
    assert e.message == "in assert: integer literal too long (5000 digits): the limit is 4300 digits"
    assert parse_expression("9" * 4300).value == int("9" * 4300)
    assert parse_expression("1" * 5000 + ".5").value == float("inf")  # float() has no such limit


@pytest.mark.parametrize("expr,message", [
    ("step.knd == 'agent'", "a step has no field 'knd'; did you mean kind"),
    ("call.nam == 'x'", "a call has no field 'nam'; did you mean name"),
    ("step.kind == 'agnet'", "a step kind is one of system, user, agent, tool, not 'agnet'"),
    ("lenn(content) > 1", "unknown function 'lenn'; did you mean len"),
    ("len(content, 2) > 1", "len() takes 1 argument(s), got 2"),
    ("content ~ step.role", "a regex must be a /literal/, a string or a pack parameter"),
    ("select(call.args, 'a[') == 1", "invalid jmespath"),
    ("params.max_lne > 1", "unknown pack parameter 'max_lne'; did you mean max_len"),
    ("'a' + 1 == 2", "between a number and a string"),
    ("count x in 3 where x", "cannot quantify over a num"),
    ("step.kind > 3", "between a number and a string"),
    ("-'x' == 1", "cannot negate a string"),
    ("earlier.kind", "a sequence of steps has no fields"),
    ("foo == 1", "unknown name 'foo'"),
    ("/x/", "a regex literal can only be the right side of ~"),
])
def test_compile_errors(expr, message):
    where = Where("p.yaml", 3, 12, "p.r", "assert")
    with pytest.raises(RulePackError) as ei:
        ExprCompiler(expr, where, {"max_len": 3}).compile(parse_expression(expr, where))
    assert message in ei.value.message
    assert ei.value.file == "p.yaml" and ei.value.line == 3 and ei.value.column >= 12


TRACE = [
    {"role": "user", "content": "Please refund order #W1, total $30.30. Yes!"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_order_details", "arguments": '{"order_id": "#W1"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "get_order_details",
     "content": '{"order_id": "#W1", "status": "delivered", "items": [{"price": 10.1}, {"price": 20.2}, {"price": 3}]}'},
    {"role": "assistant", "content": "Your refund of $30.30 is on its way; eleven items remain."},
]


@pytest.mark.parametrize("expr,value", [
    ("numbers(content)", [30.30, 11]),
    ("num('eleven') + num('1,200.5')", 1211.5),
    ("capture(content, /refund of \\$([\\d.]+)/)", "30.30"),
    ("latest_output('get_order_details').json.status", "delivered"),
    ("select(latest_output('get_order_details').json, 'items[].price')", [10.1, 20.2, 3]),
    ("sum([i.price for i in latest_output('get_order_details').json.items])", 33.3),
    ("subset_sum([i.price for i in latest_output('get_order_details').json.items], 30.3)", [10.1, 20.2]),
    ("subset_sum([1, 2], 4)", None),
    ("count s in earlier where s.kind == 'tool'", 1),
    ("latest s in earlier where s.kind == 'user'", "steps.0"),
    ("exists c in calls(earlier) where c.name == 'get_order_details' and c.output.json.status == 'delivered'", True),
    ("forall c in calls(earlier): c.args.order_id == '#W1'", True),
    ("len(since(latest u in earlier where u.kind == 'user'))", "error"),
    ("count s in since(latest u in earlier where u.kind == 'user')", 2),
    ("'#W1' in latest_output('get_order_details').content", True),
    ("lower('AbC') == 'abc' and 2 ** 1", "syntax"),
])
def test_values_on_a_small_trace(expr, value):
    traj = load(TRACE, format="openai")
    pack = {"pack": "v", "rules": [{"id": "r", "type": "PROTOCOL", "guard": "step.index == 3",
                                    "let": {"v": expr} if value != "syntax" else {}, "assert": "true" if value != "syntax" else expr}]}
    if value == "syntax":
        with pytest.raises(RulePackError):
            compile_rules(load_pack(pack))
        return
    (rec,) = evaluate(traj, compile_rules(load_pack(pack))).records
    if value == "error":
        assert rec.verdict == "unknown" and "len()" in rec.reason
        return
    got = rec.bindings["v"]
    if isinstance(got, dict) and "address" in got:
        got = got["address"]
    assert got == pytest.approx(value) if isinstance(value, float) else got == value
