"""The rule context that grows with the run (issue 20): ``dsl.live.LiveContext`` appended step by step
holds, at every prefix, what ``TrajContext`` builds at once from that prefix; ``RunState`` stepping it
(rules joining mid-run included) gives the batch log; a domain pack joins a monitored run at the
first call of one of its tools."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit import Monitor
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.dsl.live import LiveContext
from trajaudit.engine.dsl.runtime import TrajContext
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.run.evidence import gather
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.engine.validation.stepper import RunState, prefix_decidable

# -- the context's indexes ------------------------------------------------------------------------------------


def _norm(name: str, value):
    """A comparable form of one TrajContext attribute (views by the step they show)."""
    if name == "traj":
        return [id(s) for s in value.steps], dict(value.call_index)
    if name == "views":
        return [(id(v.step), v.address) for v in value]
    if name == "call_views":
        return [[(id(c.step), c.position, c.address) for c in cs] for cs in value]
    if name == "all_calls":
        return [(id(c.step), c.position) for c in value]
    if isinstance(value, defaultdict):
        return {k: list(v) for k, v in value.items() if v}
    return value


#: attributes that are not indexes of the run (caches filled by queries, budget, settings)
_NOT_INDEXES = {"cache", "shared", "_json", "_search", "ops", "budget", "lazy", "oracle", "tools", "checkers",
                "_outputs_by_caller", "final", "_unanswered"}  # _unanswered: the live context's own (checked below)


def _named_later(batch: TrajContext) -> set[int]:
    """Outputs without a name of their own whose call (the run's first with that id) comes after them:
    the batch names them from the whole run, a context growing step by step cannot (LiveContext.same_as)."""
    steps = batch.traj.steps
    return {i for i in batch._out_name if steps[i].tool_output.name is None
            and batch.traj.call_index.get(steps[i].tool_output.call_id, (-1,))[0] > i}


def _same_indexes(live: LiveContext, batch: TrajContext) -> None:
    steps = batch.traj.steps  # the prefix: its first call (with an id) still unanswered bounds the final outputs
    assert live.answered_until() == min((s.index for s in steps for c in s.tool_calls
                                         if c.id is not None and c.id not in batch._answer), default=len(steps))
    names = set(vars(batch)) | set(vars(live))
    later = _named_later(batch)
    for name in sorted(names - _NOT_INDEXES):
        assert name in vars(batch) and name in vars(live), \
            f"TrajContext.{name}: a new index the LiveContext must maintain in append()"
        want = _norm(name, getattr(batch, name))
        if name == "_out_name":
            want = {i: (None if i in later else n) for i, n in want.items()}
        if name == "by_output_name":
            want = {n: [i for i in pos if i not in later] for n, pos in want.items()}
            want = {n: pos for n, pos in want.items() if pos}
        assert _norm(name, getattr(live, name)) == want, name
    assert live.tool_positions() == batch.tool_positions()
    for name in set(batch.by_output_name):
        assert live.tool_positions(name) == [i for i in batch.tool_positions(name) if i not in later], name
    for i in range(len(batch.views)):
        c_live, c_batch = live.calling_call(i), batch.calling_call(i)
        assert (c_live and (c_live.step.index, c_live.position)) == (c_batch and (c_batch.step.index, c_batch.position))


@st.composite
def runs(draw) -> list[Step]:
    """IR steps: users, agents with 0-2 calls (ids unique, missing or repeated), tool outputs answering an
    earlier call, a later one, an unknown id or none, named or not (named then by their call)."""
    n = draw(st.integers(1, 25))
    steps: list[Step] = []
    ids = [f"c{i}" for i in range(12)]
    for i in range(n):
        kind = draw(st.sampled_from(["user", "agent", "agent", "tool", "tool", "system"]))
        if kind == "agent":
            k = draw(st.integers(0, 2))
            calls = tuple(ToolCall(draw(st.sampled_from(["login", "lookup", "cancel"])), {"x": i},
                                   draw(st.sampled_from([*ids, None]))) for _ in range(k))
            steps.append(Step(i, "agent", "assistant", draw(st.sampled_from(["", "ok ```py\nx\n```", "done"])),
                              tool_calls=calls))
        elif kind == "tool":
            out = ToolOutput(draw(st.sampled_from([*ids, None])), draw(st.sampled_from([None, None, "lookup"])),
                             draw(st.booleans()))
            steps.append(Step(i, "tool", "tool", draw(st.sampled_from(['{"a": 1}', "Error", "[1]"])), tool_output=out))
        else:
            steps.append(Step(i, kind, kind, "text"))
    return steps


def _traj(steps) -> Trajectory:
    return Trajectory(id="r", steps=tuple(steps), source=Source("test"))


@settings(max_examples=60, deadline=None)
@given(steps=runs())
def test_live_context_equals_batch_context_at_every_prefix(steps):
    live = LiveContext("r")
    for k, s in enumerate(steps):
        live.append(s)
        if k % 3 == 0:  # tool_positions lists handed out before a step arrives grow with it
            live.tool_positions()
            live.tool_positions("lookup")
        _same_indexes(live, TrajContext(_traj(steps[:k + 1])))
    full = _traj(steps)
    batch = TrajContext(full)
    late_named = bool(_named_later(batch))
    assert live.same_as(full) is not late_named  # an output named only by a later call: not the same run
    if not late_named:
        live.finalize(full)
        assert live.traj is full and live.final
        assert [[v.step.index for v in live.outputs_of(k)] for k in range(len(steps))] == \
            [[v.step.index for v in batch.outputs_of(k)] for k in range(len(steps))]
        with pytest.raises(ValueError, match="finalized"):
            live.append(Step(len(steps), "user", "user", "x"))


def test_append_out_of_order_and_foreign_run_rejected():
    live = LiveContext("r")
    with pytest.raises(ValueError, match="expected step 0"):
        live.append(Step(1, "user", "user", "x"))
    live.append(Step(0, "user", "user", "x"))
    other = _traj([Step(0, "user", "user", "x")])  # equal content, another object
    assert not live.same_as(other)
    with pytest.raises(ValueError, match="not the run appended"):
        live.finalize(other)


# -- RunState on a growing context ------------------------------------------------------------------------------

PACK = {
    "pack": "live", "version": 1,
    "params": {"auth": ["login"], "writes": ["cancel", "modify"]},
    "rules": [
        {"id": "auth-first", "title": "t", "type": "TEMPORAL", "severity": "error", "guard": "call.name in params.writes",
         "assert": "exists a in earlier where a.tool in params.auth and not a.is_error"},
        {"id": "join-latest", "title": "t", "type": "RELATIONAL_POST", "severity": "error",
         "guard": "call.name in params.writes",
         "let": {"d": "latest o in earlier where o.kind == \"tool\" and o.json.order_id == call.args.order_id"},
         "assert": "d == null or d.json.status == 'pending'", "message": "{d.address}"},
        # a closed filter with an open part of another form: QuantPlan's per-run index (_matches), grown in place
        {"id": "count-open", "title": "t", "type": "PROTOCOL", "severity": "info", "guard": "call.name in params.writes",
         "let": {"n": "count o in earlier where o.kind == \"tool\" and len(o.content) > len(call.name)"},
         "assert": "n < 3", "message": "{n}"},
        # the same closed filter over later steps (deferred): shares that index, which must cover the whole run
        {"id": "count-later", "title": "t", "type": "PROTOCOL", "severity": "info", "guard": "call.name in params.writes",
         "let": {"n": "count o in later where o.kind == \"tool\" and len(o.content) > len(call.name)"},
         "assert": "n < 2", "message": "{n}"},
        {"id": "prefix-list", "title": "t", "type": "PROTOCOL", "severity": "info", "guard": "step.kind == \"user\"",
         "let": {"named": "[o.tool for o in outputs(earlier, \"lookup\")]", "all": "[o.index for o in outputs(earlier)]"},
         "assert": "len(named) <= len(all)", "message": "{named}"},
    ],
}


def _msgs_run(seed: int, n: int) -> Trajectory:
    rnd = random.Random(seed)
    steps: list[Step] = []
    for i in range(n):
        r = rnd.random()
        if r < 0.25:
            steps.append(Step(i, "user", "user", rnd.choice(["yes", "cancel #W1", "hmm"])))
        elif r < 0.6:
            name = rnd.choice(["login", "lookup", "cancel", "modify"])
            steps.append(Step(i, "agent", "assistant", "", tool_calls=(
                ToolCall(name, {"order_id": rnd.choice(["#W1", "#W2", 7])}, f"c{i}"),)))
        else:
            prev = [s for s in steps if s.tool_calls]
            call = rnd.choice(prev).tool_calls[0] if prev else None
            body = rnd.choice([json.dumps({"order_id": rnd.choice(["#W1", "#W2", 7]),
                                           "status": rnd.choice(["pending", "delivered"])}), "alice", "Error: no"])
            steps.append(Step(i, "tool", "tool", body, tool_output=ToolOutput(
                call.id if call else None, None, body.startswith("Error"))))
    return _traj(steps)


@pytest.mark.parametrize("seed", range(8))
def test_runstate_on_a_live_context_equals_the_batch(seed):
    traj = _msgs_run(seed, 60)
    rules = compile_rules(load_pack(PACK))
    assert {prefix_decidable(r) for r in rules} == {True, False}
    cfg = AuditConfig()
    ref = evaluate(traj, rules, config=cfg).to_dict()
    # all rules from the start
    live = LiveContext(traj.id)
    state = RunState(None, rules, config=cfg, defer=True, lazy=True, context=live)
    for s in traj.steps:
        live.append(s)
        state.advance(s.index)
    live.finalize(traj)
    assert state.finish().to_dict() == ref
    # two rules join at step 20 (their records of steps 0..19 come then), one is dropped and rejoins
    live = LiveContext(traj.id)
    state = RunState(None, rules[:3], config=cfg, defer=True, lazy=True, context=live)
    order = [r.id for r in rules]
    caught = []
    for s in traj.steps:
        live.append(s)
        if s.index == 20:
            caught = state.add_rules(rules[3:], order)
            assert all(r.step < 20 for r in caught)
        if s.index == 30:
            gone = state.drop_rules({rules[0].id})
            assert gone and {r.rule_id for r in gone} == {rules[0].id}
            assert not any(r.rule_id == rules[0].id for r in state.log.records)
        if s.index == 40:
            state.add_rules([rules[0]], order)
        state.advance(s.index)
    assert any(r.rule_id == "live.prefix-list" for r in caught)
    live.finalize(traj)
    assert state.finish().to_dict() == ref
    with pytest.raises(ValueError):
        state.add_rules([rules[0]], order)


def test_runstate_context_needs_lazy():
    with pytest.raises(ValueError, match="lazy"):
        RunState(None, [], context=LiveContext("r"))
    with pytest.raises(ValueError, match="trajectory or a context"):
        RunState(None, [])


# -- a domain pack joining a monitored run -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx():
    return build_context(AuditSpec())


def _call(cid: str, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def test_domain_pack_joins_at_its_first_tool_call(ctx):
    msgs = [{"role": "system", "content": "You are a retail agent."},
            {"role": "user", "content": "Please cancel order #W1. Yes, I confirm."},
            _call("a1", "transfer_to_human_agents", {"summary": "x"}),  # a tool the domain shares: no pack yet
            {"role": "tool", "tool_call_id": "a1", "name": "transfer_to_human_agents", "content": "ok"},
            {"role": "assistant", "content": "Shall I cancel it?"},
            {"role": "user", "content": "yes"},
            _call("a2", "cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}),  # tau_retail joins
            {"role": "tool", "tool_call_id": "a2", "name": "cancel_pending_order", "content": '{"status": "cancelled"}'},
            {"role": "assistant", "content": "Done."}]
    m = Monitor(context=ctx, run_id="join")
    got: list = []
    for i, msg in enumerate(msgs):
        new = m.add(msg)
        got.append(new)
        if i < 6:
            assert not any(r.rule_id.startswith("tau_retail.") for r in m.log.records)
    joined = got[6]
    tau_early = [r for r in joined if r.rule_id.startswith("tau_retail.") and r.step < 6]
    assert tau_early, "the pack's records on the steps before it joined come with the joining step"
    assert any(r.rule_id == "tau_retail.authenticate-before-write" and r.verdict == "fail" and r.step == 6
               for r in joined)
    # the rules the pack supersedes (deferred ones: their queued units) are no longer stepped
    superseded = set(ctx.domain_packs[0].superseded)
    stepped = {st.rule.id for st in m._rules.state.steppers}
    assert superseded and not superseded & stepped
    assert {r.id for r in ctx.domain_packs[0].rules} <= stepped
    # the log is in the batch order at every point: by step, then rule order
    steps = [r.step for r in m.log.records]
    assert steps == sorted(steps)
    m.close()
    t = m.trajectory(final=True)
    assert m.log.to_dict() == gather(t, ctx).log.to_dict()
