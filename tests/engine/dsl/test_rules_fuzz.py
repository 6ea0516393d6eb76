"""hypothesis fuzzing of the rule language: only documented errors (RulePackError) at load/compile
time, and no internal errors at evaluation time (a bad value is an ``unknown`` record with a reason)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajaudit import compile_rules, evaluate, load, load_pack
from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.compiler import ExprCompiler
from trajaudit.engine.dsl.parser import Where, parse_expression
from trajaudit.engine.packs.pack import shipped_packs
from trajaudit.errors import RulePackError

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRACE = load([
    {"role": "system", "content": "policy"},
    {"role": "user", "content": "I want 2 shirts, yes"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_product_details", "arguments": '{"product_id": "7"}'}},
        {"id": "c2", "type": "function", "function": {"name": "broken", "arguments": "{oops"}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "get_product_details",
     "content": '{"variants": {"a": {"available": true, "price": 1.5}, "b": {"available": false, "price": 2}}}'},
    {"role": "tool", "tool_call_id": "c2", "name": "broken", "content": "Error: bad"},
    {"role": "assistant", "content": "There are 3 options, total $3.50."},
], format="openai")

ATOMS = ["step", "call", "output", "content", "earlier", "later", "steps", "traj", "params.words", "params.n",
         "1", "2.5", "0", "-3", '"a"', "'yes'", "true", "false", "null", "[1, 2]", "[]", '["a", "b"]',
         "step.kind", "step.index", "step.json", "call.args", "call.name", "call.args.product_id", "output.json",
         "output.json.variants", "step.calls", "call.output", "traj.id", "x", "v"]
FUNCS = ["len", "lower", "str", "num", "numbers", "json", "keys", "values", "leaves", "unique", "flatten",
         "sum", "min", "max", "any", "all", "calls", "since", "latest_output", "abs", "trim"]
REGEXES = ["/a|b/i", "/(\\d+)/", "params.pat", "/[/"]
KEYS = ["0", "-1", '"a"', "5"]
BINOPS = ["and", "or", "implies", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "+", "-", "*", "/", "%"]


@st.composite
def expressions(draw, depth=0):
    if depth > 3:
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.integers(0, 9))
    sub = lambda: draw(expressions(depth + 1))  # noqa: E731
    if kind == 0:
        return draw(st.sampled_from(ATOMS))
    if kind in (1, 2):
        return f"({sub()} {draw(st.sampled_from(BINOPS))} {sub()})"
    if kind == 3:
        return f"not {sub()}"
    if kind == 4:
        return f"{draw(st.sampled_from(FUNCS))}({sub()})"
    if kind == 5:
        q = draw(st.sampled_from(["exists", "count", "latest", "first"]))
        return f"({q} x in {sub()} where {sub()})"
    if kind == 6:
        return f"(forall v in {sub()}: {sub()})"
    if kind == 7:
        rx = draw(st.sampled_from(REGEXES))
        return f"{sub()} ~ {rx}"
    if kind == 8:
        return f"[{sub()} for x in {sub()} where {sub()}]"
    key = draw(st.sampled_from(KEYS))
    return f"{sub()}[{key}]"


@FAST
@given(st.text(max_size=80))
def test_random_text_only_documented_errors(text):
    try:
        parse_expression(text)
    except RulePackError:
        pass


@FAST
@given(st.binary(max_size=80))
def test_random_bytes_only_documented_errors(data):
    text = data.decode("utf-8", errors="replace")
    try:
        e = parse_expression(text)
        ExprCompiler(text, Where(), {}).compile(e)
    except RulePackError:
        pass


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_random_expressions_compile_or_fail_cleanly_and_never_crash_evaluation(expr):
    pack = {"pack": "f", "params": {"words": ["a", "b"], "n": 2, "pat": "x+"},
            "rules": [{"id": "r", "type": "PROTOCOL", "assert": expr, "message": "saw {step.index}"}]}
    try:
        rules = compile_rules(load_pack(pack))
    except RulePackError:
        return
    log = evaluate(TRACE, rules)
    for rec in log.records:
        assert rec.verdict in ("pass", "fail", "unknown")
        if rec.verdict == "unknown":  # a budget overrun (nested quantifiers over text) is a clean outcome too
            assert rec.reason.startswith(("evaluation error:", "the assertion evaluated to null",
                                          "evaluation budget of")), (expr, rec.reason)
            if rec.reason.startswith("evaluation budget of"):
                assert log.incomplete, "a budget overrun must say which candidate steps were not evaluated"


@FAST
@given(st.text(max_size=200))
def test_random_yaml_only_documented_errors(text):
    try:
        load_pack("pack: p\n" + text)
    except RulePackError:
        pass


def _quant_vars_reference(e):
    return {n.var for n in e.walk() if isinstance(n, A.Quant)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_quant_vars_equal_the_walk_definition(expr):
    # the witnesses compile_rule collects per let/assertion (rule_ast.quant_vars, no generator)
    try:
        e = parse_expression(expr)
    except RulePackError:
        return
    assert A.quant_vars(e) == _quant_vars_reference(e)


def test_quant_vars_of_the_shipped_packs():
    for name in shipped_packs():
        for r in compile_rules(load_pack(name)):
            for e in r.asts.values():
                assert A.quant_vars(e) == _quant_vars_reference(e)
