"""Equal lets and guards of different rules evaluated once per unit (``validation.unit_memo``) give
the reference's logs exactly: every record (verdict, message, evidence, bindings with witnesses),
the skip count and the budget notes — with budgets small enough to stop rules mid-run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajaudit import load_many, load_path
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.dsl import columnar as rule_columnar
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.packs.tool_rules import rules_from_tools
from trajaudit.engine.validation import stepper, unit_memo
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.engine.validation.stepper import RunState, evaluate_run

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
TAU = DATA / "tau_retail" / "trajectories.json"
TOOLS = DATA / "tau_retail" / "tools.json"

RECOVERED = "exists c in calls(later) where c.output != null and not c.output.is_error and c.name == call.name"
GUARD = "call.name in params.writes and (exists s in earlier where s.kind == \"user\")"
LATEST_ERR = "latest o in earlier where o.kind == \"tool\" and o.content ~ /Error/"
COND = "call.args != null and len(keys(call.args)) > 1 and (exists c in calls(later) where c.name == \"lookup\")"
NESTED = "exists d in earlier where d.kind == \"agent\" and (exists c in d.calls where c.name == \"cancel\")"


def _twins(writes: list[str], prefix: str = "") -> dict:
    """A pack whose rules share lets (quantifiers with closed filters, witnesses, nested quantifiers,
    comprehensions over other lets, lets that raise) and guards, with asserts of their own."""
    return {
        "pack": f"twins{prefix}", "version": 1,
        "params": {"writes": writes, "schemas": {"cancel": {"required": ["order_id", "reason"]},
                                                 "modify": {"required": ["order_id"]}}},
        "rules": [
            {"id": "c", "title": "t", "type": "SCHEMA", "severity": "info",
             "guard": "call.name in params.writes",
             "let": {"recovered": RECOVERED, "e": LATEST_ERR, "n": NESTED,
                     "u": "count u in earlier where u.kind == \"user\"", "m": "[u] + captures(content, /\\d+/)"},
             "assert": "recovered or e == null or n", "message": "{e.content} {m}"},
            {"id": "f", "title": "t", "type": "PROTOCOL", "severity": "info", "guard": "call.name in params.writes",
             "let": {"later_ok": COND},
             "assert": "not later_ok", "message": "{later_ok} {c}"},
            {"id": "a", "title": "t", "type": "PROTOCOL", "severity": "error", "guard": GUARD,
             "let": {"recovered": RECOVERED, "S": "params.schemas[call.name]",
                     "args": "select(call.args, \"@ || `{}`\")",
                     "missing": "[r for r in default(S.required, []) where r not in keys(args)]",
                     "e": LATEST_ERR},
             "assert": "len(missing) == 0 or recovered", "message": "{missing} {e.address} {o}"},
            {"id": "b", "title": "t", "type": "PROTOCOL", "severity": "warning", "guard": GUARD,
             "let": {"args": "select(call.args, \"@ || `{}`\")", "S": "params.schemas[call.name]",
                     "missing": "[r for r in default(S.required, []) where r not in keys(args)]",
                     "recovered": RECOVERED, "n": NESTED, "bad": "len(call.args.order_id)"},
             "assert": "len(missing) > 0 or not recovered or n", "message": "{missing} {c} {d}"},
            {"id": "d", "title": "t", "type": "PROTOCOL", "severity": "warning",
             "guard": "step.kind == \"agent\"",
             "let": {"u": "count u in earlier where u.kind == \"agent\"", "m": "[u] + captures(content, /\\d+/)",
                     "e": LATEST_ERR, "bad": "u > 2 and len(step.index) > 0"},
             "assert": "m[0] < 5", "message": "{m} {o}"},
            {"id": "g", "title": "t", "type": "PROTOCOL", "severity": "info", "guard": GUARD,
             "let": {"later_ok": COND}, "assert": "later_ok or true", "message": "{c}"},
            {"id": "e", "title": "t", "type": "PROTOCOL", "severity": "warning",
             "guard": "step.kind == \"agent\"",
             "let": {"u": "count u in earlier where u.kind == \"user\"", "m": "[u] + captures(content, /\\d+/)", "e": LATEST_ERR},
             "assert": "m[0] < 3 or e != null", "message": "{m} {e.address}"},
        ],
    }


def _msgs(seed: int, n: int) -> list[dict]:
    rnd = random.Random(seed)
    out: list[dict] = [{"role": "system", "content": "policy"}]
    i = 0
    for _ in range(n):
        r = rnd.random()
        if r < 0.2:
            out.append({"role": "user", "content": rnd.choice(["yes", "cancel #W1", "hmm"])})
        elif r < 0.35:
            out.append({"role": "assistant", "content": rnd.choice(["Shall I?", "ok"])})
        else:
            i += 1
            name = rnd.choice(["cancel", "modify", "lookup"])
            args = rnd.choice([{"order_id": "#W1", "reason": "x"}, {"order_id": 7}, {}, None])
            out.append({"role": "assistant", "content": rnd.choice([None, "calling"]), "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args) if args is not None else "null"}}]})
            out.append({"role": "tool", "tool_call_id": f"c{i}", "name": name,
                        "content": rnd.choice(["ok", "Error: failed", json.dumps({"order_id": "#W1"})])})
    return out


def _run(tmp_path: Path, msgs: list[dict]):
    p = tmp_path / "run.json"
    p.write_text(json.dumps([{"task_id": 1, "traj": msgs}]))
    return load_path(p).trajectories[0]


_RULES: dict = {}


def _rules(columnar: bool) -> list:
    if columnar not in _RULES:
        old = rule_columnar.ENABLED
        rule_columnar.ENABLED = columnar
        try:  # two packs with equal let texts but different params: not shared across them
            _RULES[columnar] = compile_rules(load_pack(_twins(["cancel", "modify"]))) + \
                compile_rules(load_pack(_twins(["cancel"], "2")))
        finally:
            rule_columnar.ENABLED = old
    return _RULES[columnar]


def _compare(traj, rules_ref, rules, budget: int) -> dict:
    cfg = AuditConfig(rule_budget=budget)
    ref = evaluate(traj, rules_ref, config=cfg).to_dict()
    shared = evaluate_run(traj, rules, config=cfg).to_dict()
    old = stepper.SHARE_UNITS
    stepper.SHARE_UNITS = False
    try:
        own = evaluate_run(traj, rules, config=cfg).to_dict()
    finally:
        stepper.SHARE_UNITS = old
    assert own == ref
    assert shared == ref
    return ref


def test_plan_shares_equal_definitions_only() -> None:
    rules = _rules(True)
    plans = unit_memo.shared_plans(rules)
    by = {r.id: (r, p) for r, p in zip(rules, plans, strict=True)}
    pa, pb = by["twins.a"][1], by["twins.b"][1]
    key = {r.id: {n: m for (n, _, _), m in zip(r.lets, p.lets, strict=True)} for r, p in (by[i] for i in by)}
    # recovered, args, missing, the nested quantifier and the latest error: shared within the pack
    assert key["twins.a"]["recovered"][0] == key["twins.b"]["recovered"][0] == key["twins.c"]["recovered"][0]
    assert key["twins.a"]["missing"][0] == key["twins.b"]["missing"][0]
    assert key["twins.b"]["n"][0] == key["twins.c"]["n"][0]
    assert pa.guard is not None and pa.guard[0] == pb.guard[0]
    # another pack's params: another key for what reads them (S, so missing); the same for what does not
    assert key["twins2.a"]["missing"][0] != key["twins.a"]["missing"][0]
    assert key["twins2.a"]["recovered"][0] == key["twins.a"]["recovered"][0]
    # `m` reads `u`, defined differently in d and e: never the same key; in c and e equal definitions
    assert key["twins.d"]["m"] is None or key["twins.d"]["m"][0] != key["twins.e"]["m"][0]
    assert key["twins.c"]["m"][0] == key["twins.e"]["m"][0]
    # a plain path is not worth recording
    assert key["twins.a"]["S"] is None


@pytest.mark.parametrize("seed", range(5))
def test_shared_lets_equal_reference(tmp_path: Path, seed: int) -> None:
    traj = _run(tmp_path, _msgs(seed, 30))
    ref = _compare(traj, _rules(False), _rules(True), 200_000)
    assert len(ref["records"]) > 10
    assert any(r["bindings"].get("o") for r in ref["records"] if r["rule_id"] in ("twins.d", "twins.e"))  # witnesses bound


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), budget=st.sampled_from([5, 20, 60, 200, 1000, 200_000]))
def test_shared_lets_with_budgets(tmp_path: Path, seed: int, n: int, budget: int) -> None:
    """Small budgets stop rules mid-run (a replayed charge that does not fit is evaluated instead)."""
    _compare(_run(tmp_path, _msgs(seed, n)), _rules(False), _rules(True), budget)


@pytest.mark.skipif(not TAU.exists(), reason="tau-retail data not present")
@pytest.mark.parametrize("budget", [50, 400, 200_000])
def test_tau_with_the_shipped_packs_and_tools(budget: int) -> None:
    """The default packs with the --tools pack on tau runs: the rules that share most."""
    runs = load_many([TAU]).trajectories[:6]
    packs = [load_pack("generic"), load_pack("tau_retail"), rules_from_tools(json.loads(TOOLS.read_text()))]
    rules = [r for p in packs for r in compile_rules(p)]
    old = rule_columnar.ENABLED
    rule_columnar.ENABLED = False
    try:
        ref_rules = [r for p in packs for r in compile_rules(p)]
    finally:
        rule_columnar.ENABLED = old
    assert sum(p is not None for p in unit_memo.shared_plans(rules)) >= 10
    for t in runs:
        _compare(t, ref_rules, rules, budget)


def test_monitor_runs_do_not_share(tmp_path: Path) -> None:
    """A run that grows (lazy) evaluates every rule's own lets: its prefix state is charged as extended."""
    traj = _run(tmp_path, _msgs(3, 20))
    state = RunState(traj, _rules(True), lazy=True)
    assert all(st.shared is None for st in state.steppers)
    complete = RunState(traj, _rules(True))
    assert any(st.shared is not None for st in complete.steppers)


@pytest.mark.parametrize("seed", [0, 2])
def test_every_budget_stops_where_the_reference_does(tmp_path: Path, seed: int) -> None:
    """Every budget from 1 to 150 operations: a rule whose own quantifier has not filed its per-run
    index is charged for it, replayed or not, so each rule stops at the reference's unit."""
    traj = _run(tmp_path, _msgs(seed, 24))
    ref_rules, rules = _rules(False), _rules(True)
    for budget in range(1, 150):
        _compare(traj, ref_rules, rules, budget)
