"""Incremental evaluation of prefix-derived lists (``dsl.incremental``) gives the reference's answers.

- ``x in S`` on a :class:`PrefixSlice` (the series' index) equals :func:`runtime.member` on the
  plain list, for every prefix of generated series mixing strings, ints, floats a tolerance apart,
  booleans, nulls, NaN, infinities, large ints and nested values;
- rules whose lets chain ``flatten``, comprehensions (with nested comprehensions that charge the
  budget and raise) and ``in`` over prefix comprehensions give the reference's validation log
  (``dsl.columnar.ENABLED = False``) record for record, in one pass, step by step and as a monitor
  (``RunState(defer=True, lazy=True)``), with budgets small enough to stop rules mid-run.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajaudit import load_path
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.dsl import columnar as rule_columnar
from trajaudit.engine.dsl.incremental import PREFILL, Series, member_fast
from trajaudit.engine.dsl.live import LiveContext
from trajaudit.engine.dsl.runtime import PrefixSlice, member
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.engine.validation.stepper import RunState, evaluate_run

_NUMS = [0, 1, 2, 1.0, 0.0, -1, 285.66, 285.66 + 1e-10, 285.66 + 1e-6, 1e-10, -1e-10, 1e300, -1e300,
         2 ** 53 + 1, 2 ** 60, float(2 ** 60), 10 ** 400, math.inf, -math.inf, math.nan, 3, 3.0000000001]
_VALUES = st.one_of(st.sampled_from(_NUMS), st.floats(allow_nan=True), st.integers(-10, 10),
                    st.sampled_from(["a", "b", "1", "285.66", ""]), st.booleans(), st.none(),
                    st.just([1]), st.just({"a": 1}))


@settings(max_examples=300, deadline=None)
@given(vals=st.lists(_VALUES, max_size=30), needles=st.lists(_VALUES, min_size=1, max_size=8))
def test_membership_index_equals_member(vals: list, needles: list) -> None:
    src = Series()
    src.vals.extend(vals)
    for n in range(len(vals) + 1):
        plain = vals[:n]
        sl = PrefixSlice(plain, src)
        for x in needles + plain[:3]:
            try:
                want = member(x, plain)
            except Exception as e:  # noqa: BLE001 - the same error either way
                want = type(e)
            try:
                got = member_fast(x, sl)
            except Exception as e:  # noqa: BLE001
                got = type(e)
            assert got == want, (x, plain)


def test_membership_index_is_used_on_slices() -> None:
    src = Series()
    src.vals.extend([285.66, "a", 3, True])
    sl = PrefixSlice(src.vals[:3], src)
    assert member_fast(285.66 + 1e-10, sl) and member_fast("a", sl) and member_fast(3.0, sl)
    assert not member_fast(1, sl)  # True is past the slice
    assert src.index is not None and src.index.upto == 3
    assert member_fast(1, PrefixSlice(src.vals[:4], src))


INC_PACK = {
    "pack": "incremental", "version": 1,
    "params": {"writes": ["calculate", "modify"]},
    "rules": [
        {"id": "variant-prices", "title": "t", "type": "RELATIONAL_POST", "severity": "error",
         "guard": "call.name in params.writes",
         "let": {"used": "numbers(str(call.args))",
                 "variants": "flatten([values(p.json.variants) for p in outputs(earlier, \"details\") "
                             "where select(p.json, \"type(@)\") == \"object\"])",
                 "unavailable": "[v.price for v in variants where v.available == false]",
                 "available": "[v.price for v in variants where v.available == true]",
                 "ordered": "flatten([[i.price for i in default(o.json.items, [])] for o in outputs(earlier) "
                            "where select(o.json, \"type(@)\") == \"object\"])",
                 "bad": "[n for n in used where n in unavailable and n not in available and n not in ordered]"},
         "assert": "len(bad) == 0", "message": "{bad} {len(variants)} {len(ordered)}"},
        {"id": "ids-seen", "title": "t", "type": "PROTOCOL", "severity": "warning",
         "guard": "call.name in params.writes",
         "let": {"ids": "[c.args.order_id for c in calls(earlier) where c.name == \"details\"]",
                 "flat": "flatten(ids)",
                 "again": "[x for x in flat where x != null]"},
         "assert": "call.args.order_id in ids or call.args.order_id in again or len(again) > 3",
         "message": "{again}"},
        {"id": "join-and-filters", "title": "t", "type": "RELATIONAL_POST", "severity": "warning",
         "guard": "call.name in params.writes",
         "let": {"d": "latest o in earlier where o.kind == \"tool\" and o.json.items != null "
                      "and o.json.order_id == call.args.order_id",
                 "n": "count c in calls(earlier) where c.name == \"details\" and len([v for v in values(c.args)]) > 0",
                 "seen": "exists u in earlier where u.kind == \"user\" and u.content ~ /yes/"},
         "assert": "d == null or (seen and n > 3)", "message": "{d.address} {n}"},
        {"id": "nested-raise", "title": "t", "type": "PROTOCOL", "severity": "info",
         "guard": "step.kind == \"agent\"",
         "let": {"sizes": "[len([x for x in o.json.items]) for o in outputs(earlier) where o.json != null]",
                 "big": "[s * 2 for s in sizes where s > 1]"},
         "assert": "len(big) < 50", "message": "{big}"},
    ],
}


def _msgs(seed: int, n: int) -> list[dict]:
    """A run of product lookups (variants priced with ints, floats a tolerance apart, strings,
    booleans), orders with item lists (or not lists: a nested comprehension raises) and calculations."""
    rnd = random.Random(seed)
    prices = [285.66, 302.63, 285.66 + 1e-10, 50, 50.0, "50", True, None, 7]
    out: list[dict] = [{"role": "system", "content": "policy"}]
    for i in range(n):
        r = rnd.random()
        if r < 0.2:
            out.append({"role": "user", "content": rnd.choice(["yes", "hmm"])})
            continue
        name = rnd.choice(["details", "order", "calculate", "modify", "details"])
        if name == "details":
            args = {"order_id": rnd.choice(["#W1", "#W2", 7, None, ["#W1"]])}
            body = rnd.choice([
                {"variants": {str(j): {"available": rnd.choice([True, False, None]), "price": rnd.choice(prices)}
                              for j in range(rnd.randint(0, 3))}},
                {"variants": rnd.choice([[1, 2], "x", None])},
                [1, 2]])
        elif name == "order":
            args = {"order_id": rnd.choice(["#W1", "#W2"])}
            body = {"order_id": args["order_id"], "items": rnd.choice([[{"price": rnd.choice(prices)}], [], "xy", 5, [{"price": 1}, {"p": 2}]])}
        else:
            args = {"expression": f"{rnd.choice(prices)} + {rnd.choice(prices)}", "order_id": rnd.choice(["#W1", 7])}
            body = "1.0"
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": json.dumps(body)})
    return out


_COMPILED: dict = {}


def _rules(columnar: bool):
    if columnar not in _COMPILED:
        old = rule_columnar.ENABLED
        rule_columnar.ENABLED = columnar
        try:
            _COMPILED[columnar] = compile_rules(load_pack(INC_PACK))
        finally:
            rule_columnar.ENABLED = old
    return _COMPILED[columnar]


def _check(tmp_path: Path, seed: int, n: int, budget: int) -> dict:
    p = tmp_path / "run.json"
    p.write_text(json.dumps([{"task_id": 1, "traj": _msgs(seed, n)}]))
    traj = load_path(p).trajectories[0]
    cfg = AuditConfig(rule_budget=budget)
    ref = evaluate(traj, _rules(False), config=cfg).to_dict()
    assert evaluate_run(traj, _rules(True), config=cfg).to_dict() == ref
    state = RunState(traj, _rules(True), config=cfg, defer=True, lazy=True)
    for k in range(len(traj.steps)):
        state.advance(k)
    lazy = state.finish().to_dict()
    if budget == 200_000:
        assert lazy == ref
    # a monitor's context: the prefix state is prefilled at each append, the charges stay the lazy ones
    live = LiveContext(traj.id, budget=budget)
    state = RunState(None, _rules(True), config=cfg, defer=True, lazy=True, context=live)
    for s in traj.steps:
        live.append(s)
        state.advance(s.index)
    live.finalize(traj)
    assert state.finish().to_dict() == lazy
    # the quantifiers' prefix state created at the first step (LiveContext.warm, as a monitor does when
    # it selects the rules), before any query: the same log, the same charges
    live = LiveContext(traj.id, budget=budget)
    state = RunState(None, _rules(True), config=cfg, defer=True, lazy=True, context=live)
    for s in traj.steps:
        live.append(s)
        if s.index == 0:
            assert live.warm(e for r in _rules(True) for e in r.asts.values()) == 7  # the join, the count over calls, the exists, 4 prefix lists
        state.advance(s.index)
    live.finalize(traj)
    assert state.finish().to_dict() == lazy
    return ref


def test_incremental_lets_equal_reference(tmp_path: Path) -> None:
    verdicts = set()
    for seed in range(4):
        ref = _check(tmp_path, seed, 60, 200_000)
        verdicts |= {(r["rule_id"].split(".")[-1], r["verdict"]) for r in ref["records"]}
    # the pack applies, fails, passes and raises (a nested comprehension over a number)
    assert {("variant-prices", "fail"), ("variant-prices", "pass"), ("ids-seen", "pass"),
            ("nested-raise", "unknown"), ("join-and-filters", "pass"), ("join-and-filters", "fail")} <= verdicts


def test_prefill_is_registered_on_a_live_context(tmp_path: Path) -> None:
    p = tmp_path / "run.json"
    p.write_text(json.dumps([{"task_id": 1, "traj": _msgs(3, 40)}]))
    traj = load_path(p).trajectories[0]
    live = LiveContext(traj.id)
    state = RunState(None, _rules(True), config=AuditConfig(), defer=True, lazy=True, context=live)
    for s in traj.steps:
        live.append(s)
        state.advance(s.index)
    # filters, join keys, prefix comprehensions and the lists derived from them
    assert len(live.cache[PREFILL]) >= 6


def test_incremental_closures_are_used() -> None:
    by_id = {r.id.split(".")[-1]: r for r in _rules(True)}
    lets = {name: fn for name, _, fn in by_id["variant-prices"].lets}
    assert lets["unavailable"].__qualname__ == "derived_comprehension.<locals>.run"
    assert lets["variants"].__qualname__ == "flatten_call.<locals>.run"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), budget=st.sampled_from([5, 60, 300, 2_000, 200_000]),
       join_min=st.sampled_from([0, 12]))
def test_incremental_with_budgets(tmp_path: Path, seed: int, n: int, budget: int, join_min: int) -> None:
    """Budgets that stop rules mid-run: the charges of the incremental forms are the reference's
    (and a monitor's prefilled prefix state charges what the lazy one charges)."""
    old, rule_columnar.JOIN_MIN = rule_columnar.JOIN_MIN, join_min  # 0: joins read their key index
    try:
        _check(tmp_path, seed, n, budget)
    finally:
        rule_columnar.JOIN_MIN = old
