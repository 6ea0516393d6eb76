"""Rule-engine fast paths give exactly the reference results: the literal prefilter of regexes never
hides a match (engine/dsl/regex/prefilter.py); comprehensions shared by rules log what unshared ones do."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit.engine.dsl.regex.prefilter import (
    _flatten,
    _search_branches,
    branch_plan,
    folded,
    info_of,
    memo_search,
    required_literals,
    ruled_out,
    span,
)
from trajaudit.engine.packs.pack import resolve_pack, shipped_packs

PATTERNS = [
    r"(?i:\btimed out\b|\b\w*Timeout(?:Error|Exception)\b|^\W*timeout\W*$|exitcode: 124\b)",
    r"(?i)\b40[13] (?:Client Error|Forbidden)\b|\bsocket\.timeout\b",
    r"Traceback \(most recent call last\)|exitcode: [1-9]\d*",
    r"(?:abc)+x|(?:abc)?yz",  # the optional group requires nothing: no set from the second branch
    r"(?i)(foo)\1bar",
    r"(?i)na[iï]ve|caf[eé]",
    r"(?i)\u212aelvin|kelvins",  # a non-ASCII literal (KELVIN SIGN) matches ASCII "k" under IGNORECASE
    r"ab",
    r"(?i)ab|abc|b\w+|X{4,}|(?:c|d(?-i:E))|^z$",  # overlapping branches: leftmost, then first branch wins
    r"(?m)^a[|)]b|(?:x|y)+z|(?s:q.r)|\bst\b",
    r"(?i)\w{0,3}(?:timed|abc)\W?out|x{1,2}yz",  # bounded prefixes before the literal: anchored searches
    r"(?i)\bstatus(?: code)?\W{0,3}4\d\b|#?[a-z]{0,3}\d{2,}\s+(?:is|was) (?:shipped|pending)",
]


@cache
def _shipped_regexes() -> list[str]:
    out = []
    for name in shipped_packs():
        params = yaml.safe_load(Path(resolve_pack(name)).read_text(encoding="utf-8")).get("params") or {}
        for v in params.values():
            for p in v if isinstance(v, list) else [v]:
                if isinstance(p, str):
                    try:
                        re.compile(p)
                    except re.error:
                        continue
                    out.append(p)
    return out


_fragments = st.sampled_from(["status", "STATUS code: 404", " 41", "#W12 is shipped", "ab12 was pending",
                              "xxyz", "timedout", "abcout", "ab",  "ABC", "bx", "xxxx", "XXXXX", "dE", "de", "z", "a|b", "a)b", "q\nr", "st", "yyz",
                              "timed out", "TIMED OUT", "TimeoutError", "timeout", "x", " ", "\n", "-",
                              "exitcode: 124", "40", "3", "1", " Forbidden", "CLIENT ERROR", "socket.timeout",
                              "Traceback (most recent call last)", "abc", "yz", "foo", "bar", "naïve", "café",
                              "Kelvin", "kelvin", "\u212aelvin", "captcha", "CAPTCHA", "access denied", "é",
                              "I’m", "—", "…", "“ok”", "ſtatus", "\u0130", "\u0131", "Straße", "°"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_fragments, max_size=8).map("".join), st.data())
def test_prefilter_never_hides_a_match(text, data):
    rx = re.compile(data.draw(st.sampled_from(PATTERNS + _shipped_regexes())))
    low = folded(text)
    if low is not None and ruled_out(info_of(rx), text, low):
        assert rx.search(text) is None
    memo: dict = {}
    assert memo_search(rx, text, memo) == span(rx.search(text))


def test_required_literals_of_examples():
    # the parser factors "E" out of Error|Exception, so "timeoute" is required by that branch
    assert required_literals(re.compile(PATTERNS[0])) == {"timed out", "timeoute", "timeout", "exitcode: 124"}
    assert required_literals(re.compile(r"(?:abc)+x|(?:abc)?yz")) is None
    assert required_literals(re.compile(r"ab")) is None  # too short to be worth it
    rx = re.compile(PATTERNS[2])
    assert ruled_out(info_of(rx), "all good", folded("all good"))
    assert not ruled_out(info_of(rx), "TRACEBACK (MOST RECENT CALL LAST)", folded("TRACEBACK (MOST RECENT CALL LAST)"))
    assert folded("\u212aELVINS") is None  # non-ASCII text that does not fold like ASCII: the regex decides
    assert all(required_literals(re.compile(p)) is not None for p in _shipped_regexes()[:3])
    info = info_of(re.compile(PATTERNS[0]))  # "timeoute" contains "timeout": testing the latter suffices
    assert info.probe == ("exitcode: 124", "timed out", "timeout")


@settings(max_examples=400, deadline=None)
@given(st.lists(_fragments, max_size=10).map("".join), st.data())
def test_branch_split_finds_exactly_the_match_of_the_alternation(text, data):
    rx = re.compile(data.draw(st.sampled_from(PATTERNS + _shipped_regexes())))
    plan = branch_plan(rx)
    low = folded(text)
    if plan is not None and low is not None:
        assert _search_branches(plan, text, low) == span(rx.search(text))


@settings(max_examples=400, deadline=None)
@given(st.lists(_fragments, max_size=10).map("".join), st.data())
def test_anchored_search_and_finditer_start_where_no_match_is_skipped(text, data):
    from trajaudit.engine.dsl.regex.prefilter import finditer_from, start_bound

    rx = re.compile(data.draw(st.sampled_from(PATTERNS + _shipped_regexes())))
    low = folded(text)
    if low is not None:
        assert span(rx.search(text, start_bound(info_of(rx).anchor, low))) == span(rx.search(text))
    assert [m.span() for m in finditer_from(rx, text)] == [m.span() for m in rx.finditer(text)]


def test_ascii_folding_set_is_every_non_ascii_match_of_an_ascii_character():
    import sys

    from trajaudit.engine.dsl.regex.prefilter import ASCII_FOLDING

    others = "".join(chr(c) for c in range(128, sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    found = {m.group(0) for m in re.finditer(r"[\x00-\x7f]", others, re.IGNORECASE)}
    for a in map(chr, range(128)):  # a literal compiles apart from a class: check each one alone
        found |= {m.group(0) for m in re.finditer(re.escape(a), others, re.IGNORECASE)}
    assert found == set(ASCII_FOLDING)
    assert folded("I’m — “ok”…") == "i’m — “ok”…" and folded("\u017ftatus") is None and folded("\u0130") is None


def test_ascii_mode_agrees_with_unicode_mode_on_every_ascii_character():
    """What the ASCII twins rest on (engine/dsl/regex/ascii.py): classes and case folding, char by char."""
    chars = [chr(c) for c in range(128)]
    for cls in (r"\w", r"\W", r"\d", r"\D", r".", r"[^\w.-]", r"(?s).", r"\S", r"\s"):
        uni, asc = re.compile(cls), re.compile(cls, re.ASCII)
        differ = [c for c in chars if bool(uni.fullmatch(c)) != bool(asc.fullmatch(c))]
        assert differ == ([] if "s" not in cls.lower().replace("(?s)", "") else ["\x1c", "\x1d", "\x1e", "\x1f"])
    for a in chars:
        uni, asc = re.compile(re.escape(a), re.I), re.compile(re.escape(a), re.I | re.ASCII)
        ucls, acls = re.compile(f"[{re.escape(a)}]", re.I), re.compile(f"[{re.escape(a)}]", re.I | re.ASCII)
        for b in chars:
            assert bool(uni.fullmatch(b)) == bool(asc.fullmatch(b)) and bool(ucls.fullmatch(b)) == bool(acls.fullmatch(b))
    for text in ("a_b c", "x1 y", "é", "", "ab"):
        assert [m.span() for m in re.finditer(r"\b", text)] == [m.span() for m in re.finditer(r"\b", text, re.A)] \
            or not text.isascii()


def test_ascii_mode_agrees_with_unicode_mode_on_every_inert_character():
    """Twins also run on text whose non-ASCII characters are inert (regex_ascii.ascii_like): no ASCII
    class, category or literal tells such a character apart in the two modes, case-insensitive or not."""
    import sys

    from trajaudit.engine.dsl.regex.ascii import ascii_like, inert

    others = "".join(chr(c) for c in range(128, sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    chars = "".join(c for c in re.sub(r"[\w\s]", "", others) if c.lower() == c == c.upper())  # what inert() says
    assert all(inert(c) for c in chars[::997]) and not any(inert(c) for c in "é٣\u00a0Kſ")
    assert "\u2019" in chars and "\u2014" in chars and "\u00e9" not in chars and "\u0663" not in chars
    pats = [(p, f) for p in (r"\w", r"\W", r"\d", r"\D", r"\s", r"\S", r".", r"[^a-z]", r"[\x00-\x7f]", r"\b.", r".\b")
            for f in (0, re.IGNORECASE)]
    pats += [(chr(a), re.IGNORECASE) for a in range(ord("a"), ord("z") + 1)]  # a literal compiles apart from a class
    for p, flags in pats:  # the same characters removed in both modes
        assert re.sub(p, "", chars, flags=flags) == re.sub(p, "", chars, flags=flags | re.ASCII), (p, flags)
    assert ascii_like("I’m — “ok”… 5°") and not ascii_like("café") and not ascii_like("x\u00a0y")


def test_ascii_twin_examples():
    from trajaudit.engine.dsl.regex.ascii import ascii_twin, twin_for

    assert ascii_twin(re.compile(r"(?i)\u212aelvin|kelvins"))[0] is None  # a non-ASCII literal folds to "k"
    assert ascii_twin(re.compile(r"caf[e\u00e9]"))[0] is None
    twin, space = ascii_twin(re.compile(r"(?i)\bstatus\s+\w+"))
    assert twin is not None and twin.flags & re.ASCII and space
    rx = re.compile(r"a\sb")
    assert twin_for(rx, ascii_twin(rx), "a\x1cb") is rx and twin_for(rx, ascii_twin(rx), "a b") is not rx
    assert twin_for(rx, ascii_twin(rx), "a\u00a0b") is rx  # non-ASCII text: the pattern itself


@settings(max_examples=400, deadline=None)
@given(st.lists(_fragments | st.sampled_from(["\x1c", "\x1f x", "\t", "_a1", "a-b.c/d", "x@y.com"]),
                max_size=10).map("".join), st.data())
def test_ascii_twins_match_exactly_what_the_patterns_match(text, data):
    from trajaudit.engine.dsl.regex.ascii import ascii_twin, twin_for
    from trajaudit.engine.dsl.regex.prefilter import info_of

    rx = re.compile(data.draw(st.sampled_from(PATTERNS + _shipped_regexes())))
    got = twin_for(rx, ascii_twin(rx), text)
    assert [(m.span(), m.groups()) for m in got.finditer(text)] == [(m.span(), m.groups()) for m in rx.finditer(text)]
    info, low = info_of(rx), folded(text)
    if info.plan is not None and low is not None:
        assert _search_branches(info.plan_for(text), text, low) == span(rx.search(text))


_token_text = st.text(alphabet="aZ_1x9@./-#: \n\x1cé٣", max_size=30)
_TOKEN_PATTERNS = [r"\d{3,}", r"(?i)[A-C]x|_[a-z]\d", r"a(?:/|@)b|[0-9]", r"(?:x|\d)+\.(?:é|y)", r"[^/]@?", r"\w+/\w"]


@settings(max_examples=500, deadline=None)
@given(_token_text, st.data())
def test_required_chars_never_hide_a_match(text, data):
    from trajaudit.engine.dsl.regex.chars import lacks_required, required_chars
    from trajaudit.engine.dsl.regex.prefilter import finditer_from

    rx = re.compile(data.draw(st.sampled_from(_TOKEN_PATTERNS + PATTERNS + _shipped_regexes())))
    sets = required_chars(rx)
    if sets is not None and lacks_required(sets, text, text.lower()):
        assert rx.search(text) is None
    assert [m.span() for m in finditer_from(rx, text)] == [m.span() for m in rx.finditer(text)]
    assert memo_search(rx, text, {}) == span(rx.search(text))


def test_required_chars_of_examples():
    from trajaudit.engine.dsl.regex.chars import lacks_required, required_chars

    token = _shipped_params()
    assert required_chars(re.compile(token["id_token"])) == (frozenset("0123456789@_"),)
    assert required_chars(re.compile(token["path_token"])) == (frozenset("."), frozenset("/"))
    assert required_chars(re.compile(r"\w+|x")) is None  # a branch with nothing required
    sets = required_chars(re.compile(r"\d{2}"))
    assert lacks_required(sets, "no digits", "no digits") and not lacks_required(sets, "\u0663\u0663", "\u0663\u0663")


def _shipped_params() -> dict:
    params = yaml.safe_load(Path(resolve_pack("generic.provenance")).read_text(encoding="utf-8"))["params"]
    return {k: v for k, v in params.items() if isinstance(v, str)}


def test_anchor_examples():
    from trajaudit.engine.dsl.regex.prefilter import start_bound

    assert info_of(re.compile(r"(?i)\bstatus(?: code)?\W{0,3}5\d\d\b")).anchor == ({"status"}, 0)
    assert info_of(re.compile(r"\w{0,5}(?:hello|world)x")).anchor == ({"hello", "world"}, 10)
    assert info_of(re.compile(r"\d+status")).anchor is None  # unbounded before the literal
    assert start_bound(({"status"}, 2), "the status: 500") == 2


def test_branch_plan_of_examples():
    assert _flatten(r"(?:(?i:a|b(?:c|d))|(?-i:x|[|)]y))|z\|w") == [
        "(?i:a)", "(?i:b(?:c|d))", "(?-i:x)", "(?-i:[|)]y)", r"z\|w"]
    assert branch_plan(re.compile(r"(a)|b|c")) is None  # a capturing group: numbering would change
    assert branch_plan(re.compile(r"a|b")) is None  # not worth it
    plan = branch_plan(re.compile(r"(?i)\bstatus\W5\d\d\b|timed out|X{4,}"))
    assert [lits for _, lits, _ in plan] == [{"status"}, {"timed out"}, {"xxxx"}]
    # "status" occurs but the status branch does not match; the later branch's match is returned
    assert _search_branches(plan, "status: ok, timed out", "status: ok, timed out") == (12, 21, "timed out")
    # earliest start wins over branch order; on a tie the earlier branch wins
    assert span(re.compile(r"bc|abc|xx").search("abc")) == _search_branches(
        branch_plan(re.compile(r"bc|abc|xx")), "abc", "abc") == (0, 3, "abc")


def test_rules_sharing_comprehensions_log_exactly_what_unshared_rules_log(tau_file, monkeypatch):
    from trajaudit import load_path
    from trajaudit.engine.dsl import compiler as rule_compiler
    from trajaudit.engine.packs.compile import compile_rules
    from trajaudit.engine.packs.pack import load_pack
    from trajaudit.engine.validation.rule_eval import evaluate

    runs = load_path(tau_file).trajectories[:6]
    packs = [load_pack(name) for name in ("generic", "tau_retail")]
    shared = [r for p in packs for r in compile_rules(p)]
    monkeypatch.setattr(rule_compiler, "shareable", lambda *a: False)
    monkeypatch.setattr(rule_compiler, "closed_share_key", lambda *a: None)  # quantifier filters too
    plain = [r for p in packs for r in compile_rules(p)]
    for t in runs:
        assert evaluate(t, shared).to_dict() == evaluate(t, plain).to_dict()
    # a small budget: replayed charges hit it exactly where the rules' own evaluations do
    from trajaudit.engine.config import AuditConfig

    cfg = AuditConfig(rule_budget=40)
    for t in runs[:3]:
        assert evaluate(t, shared, config=cfg).to_dict() == evaluate(t, plain, config=cfg).to_dict()


def test_lazy_pass_records_equal_eager_ones(tau_file, monkeypatch):
    import dataclasses

    from trajaudit import load_path
    from trajaudit.engine.packs.compile import compile_rules
    from trajaudit.engine.packs.pack import load_pack
    from trajaudit.engine.validation import rule_eval
    from trajaudit.engine.validation_log import Evidence, LazyRecord, Record

    calls = []
    lazy = LazyRecord(3, "p.r", "pass", "warning", "PROTOCOL", ("x",), "t",
                      thunk=lambda: calls.append(1) or ((Evidence("steps.3.content", "v"),), {"a": 1}))
    eager = Record(3, "p.r", "pass", "warning", "PROTOCOL", ("x",), "t", (Evidence("steps.3.content", "v"),), {"a": 1})
    assert calls == [] and lazy == eager and eager == lazy and lazy.to_dict() == eager.to_dict()
    assert lazy.evidence[0].address == "steps.3.content" and calls == [1]  # computed once
    assert lazy != dataclasses.replace(eager, step=4)
    assert dataclasses.replace(lazy, message="m").bindings == {"a": 1}

    run = load_path(tau_file).trajectories[0]
    rules = [r for name in ("generic", "tau_retail") for r in compile_rules(load_pack(name))]
    got = rule_eval.evaluate(run, rules)
    assert sum(isinstance(r, LazyRecord) for r in got.records) > 100
    # the same instance dict, field order included, from the shared fields as from the constructor
    thunk = lambda: ((), {})  # noqa: E731
    fields = LazyRecord.pass_fields("p.r", "warning", "PROTOCOL", ("x",), "t")
    built = LazyRecord.passed(fields, 3, thunk)
    assert built.__dict__ == LazyRecord(3, "p.r", "pass", "warning", "PROTOCOL", ("x",), "t", thunk=thunk).__dict__
    assert list(built.__dict__) == list(LazyRecord(3, "p.r", "pass", thunk=thunk).__dict__) and fields["step"] is None

    class Eager:  # what the evaluator built before pass records were lazy
        pass_fields = staticmethod(LazyRecord.pass_fields)

        @staticmethod
        def passed(f, step, thunk):
            return Record(step, f["rule_id"], "pass", f["severity"], f["rule_type"], f["targets"], f["message"],
                          *thunk())

    monkeypatch.setattr(rule_eval, "LazyRecord", Eager)
    monkeypatch.setattr(rule_eval, "_passed", Eager.passed)  # (the evaluator's binding of LazyRecord.passed)
    want = rule_eval.evaluate(run, rules)
    assert not any(isinstance(r, LazyRecord) for r in want.records)
    assert got.records == want.records and got.to_dict() == want.to_dict()


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                     max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_select_type_shortcut_is_jmespath_type(value):
    import jmespath

    from trajaudit.engine.dsl.builtins import _select

    expr = jmespath.compile("type(@)")
    assert _select(value, expr) == expr.search(value)


@settings(max_examples=300, deadline=None)
@given(_json, st.none() | st.booleans() | st.text(max_size=3))
def test_comparison_with_a_plain_constant_is_equal(value, const):
    """``x == "s"`` / ``x != null`` compile to Python's ==; the reference is rule_runtime.equal."""
    from trajaudit.engine.dsl.runtime import equal_reference as equal

    assert (value == const) == equal(value, const) == (const == value)
    assert (value != const) == (not equal(value, const))


def _views() -> list:
    from trajaudit.engine.dsl.runtime import CallView, StepView

    return [object.__new__(StepView), object.__new__(CallView)]  # compared by identity only


_values = _json | st.sampled_from(_views()) | st.lists(_json | st.sampled_from(_views()), max_size=4)


@settings(max_examples=500, deadline=None)
@given(_values, _values, st.text(max_size=3))
def test_equal_and_member_shortcuts_match_the_reference(a, b, s):
    """A string equals only an equal string: ``equal``'s shortcut and ``member``'s ``in`` on lists."""
    from trajaudit.engine.dsl.runtime import equal, equal_reference, member

    assert equal(a, b) == equal_reference(a, b) and equal(b, a) == equal_reference(b, a)
    assert equal(s, a) == equal_reference(s, a) and equal(a, s) == equal_reference(a, s)
    for container in (b, [b], [a, s], [1, 1.0000000001, s]) if isinstance(b, list) else ([b], [a, b, s]):
        assert member(s, container) == any(equal_reference(s, y) for y in container)
    assert member(1, [1.0000000001]) and not member("1", [1])


def test_conjunctions_of_two_or_three_parts_are_all():
    """``_conj``'s unrolled forms: short-circuit in order and a bool, as ``all(f(env) for f in fns)``."""
    import itertools

    from trajaudit.engine.dsl.compiler import ExprCompiler
    from trajaudit.engine.dsl.parser import Where

    for n in (2, 3, 4):
        for vals in itertools.product([0, 1, [], [0], "x", None], repeat=n):
            calls: list[int] = []
            comp = ExprCompiler("", Where(), {})
            comp.compile = lambda part, scope, v=vals, c=calls: type("C", (), {"fn": staticmethod(
                lambda env, j=part: c.append(j) or v[j])})
            got = comp._conj(list(range(n)), {})(None)
            want_calls: list[int] = []
            want = all(want_calls.append(i) or vals[i] for i in range(n))
            assert got is want and calls == want_calls


def test_outputs_of_is_the_comprehension_it_replaces(tau_file, ww_dir):
    from trajaudit import load_path
    from trajaudit.engine.packs.compile import compile_rules
    from trajaudit.engine.packs.pack import load_pack
    from trajaudit.engine.validation.rule_eval import evaluate

    pack = load_pack({"pack": "t", "rules": [{
        "id": "same", "type": "PROTOCOL",
        "let": {"a": "outputs_of()",
                "b": '[o for o in later where o.kind == "tool" and ((o.call != null and o.call.step == step) or '
                     '(o.call == null and o.index == step.index + 1))]'},
        "assert": "[o.address for o in a] == [o.address for o in b]"}]})
    rules = compile_rules(pack)
    runs = load_path(tau_file).trajectories[:8] + [load_path(p).trajectories[0] for p in sorted(ww_dir.glob("*.json"))[:8]]
    nonempty = 0
    for t in runs:
        log = evaluate(t, rules)
        assert {r.verdict for r in log.records} == {"pass"}, t.id
        assert len(log.records) == len(t.steps)
        nonempty += sum(1 for s in t.steps if any(o.tool_output for o in t.steps[s.index + 1:s.index + 2]))
    assert nonempty > 20


def test_unconditioned_quantifiers_over_ranges_match_the_scan(tau_file, monkeypatch):
    from trajaudit import load_path
    from trajaudit.engine.config import AuditConfig
    from trajaudit.engine.dsl import queries as Q
    from trajaudit.engine.packs.compile import compile_rules
    from trajaudit.engine.packs.pack import load_pack
    from trajaudit.engine.validation.rule_eval import evaluate

    exprs = ["exists s in earlier", "first s in earlier", "latest s in later", "count s in steps",
             "count c in calls(earlier)", "first c in calls(later)", "exists s in since(null)", "latest c in calls(steps)"]
    rules = compile_rules(load_pack({"pack": "t", "rules": [
        {"id": f"r{i}", "type": "PROTOCOL", "let": {"a": e}, "assert": "true"} for i, e in enumerate(exprs)]}))
    runs = load_path(tau_file).trajectories[:4]

    def logs():
        return [evaluate(t, rules, config=cfg).to_dict() for t in runs for cfg in (None, AuditConfig(rule_budget=7))]

    fast = logs()
    monkeypatch.setattr(Q.QuantPlan, "_bare", lambda self, env, seq, addr: self._scan(
        env, range(len(Q.as_items(env, seq))), None, {}, Q.as_items(env, seq), None, None,
        seq_addr=addr if addr is not None else seq))
    assert fast == logs()
    assert any(r["verdict"] == "unknown" for log in fast for r in log["records"])  # the budget was hit


def test_substring_quantifiers_match_the_scan(tau_file, ww_dir, monkeypatch):
    """``exists s in earlier where X in lower(s.content)`` finds its witness by plain substring tests;
    logs (evidence, witnesses, budget hits) equal the reference scan's."""
    from trajaudit import load_path
    from trajaudit.engine.config import AuditConfig
    from trajaudit.engine.dsl.compiler import ExprCompiler
    from trajaudit.engine.packs.compile import compile_rules
    from trajaudit.engine.packs.pack import load_pack
    from trajaudit.engine.validation.rule_eval import evaluate

    extra = {"pack": "t", "rules": [
        {"id": "a", "type": "PROTOCOL", "guard": "step.is_decision",
         "let": {"w": 'first s in earlier where "order" in lower(s.content)',
                 "x": "latest s in earlier where lower(step.kind) in s.content",
                 "y": "exists s in later where 7 in s.content",
                 "z": "exists s in earlier where null in s.content"},
         "assert": "w == null or x != null or y"}]}
    packs = [load_pack(name) for name in ("generic", "tau_retail")] + [load_pack(extra)]
    runs = load_path(tau_file).trajectories[:5] + [load_path(p).trajectories[0] for p in sorted(ww_dir.glob("*.json"))[:4]]

    def logs():
        rules = [r for p in packs for r in compile_rules(p)]
        return [evaluate(t, rules, config=cfg).to_dict() for t in runs for cfg in (None, AuditConfig(rule_budget=60))]

    fast = logs()
    monkeypatch.setattr(ExprCompiler, "_substring_test", lambda self, *a: None)
    slow = logs()
    assert fast == slow
    assert any(r["verdict"] == "unknown" for log in fast for r in log["records"])  # errors and budget hits too
