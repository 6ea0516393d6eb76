"""The incremental claim ledger (issue 20): ``LedgerBuilder`` / ``ClaimGraphBuilder`` fed one step at a
time give, at every prefix, the ledger and claim graph that ``build_ledger`` / ``build_claim_graph``
give on that prefix — on every dev run, every bundled example, synthetic edge cases and generated
runs; and ``Monitor`` uses it (it never rebuilds the ledger)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit import Monitor, load, load_many
from trajaudit.engine.claims import ClaimConfig, ClaimGraphBuilder, LedgerBuilder, Support, build_claim_graph
from trajaudit.engine.claims.ledger import build_ledger
from trajaudit.engine.run import evidence
from trajaudit.engine.run.monitor import diagnosis_basis
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = (ClaimConfig(), ClaimConfig(brief_is_input=False), ClaimConfig(replies_are_final=False))


def _prefix(t: Trajectory, k: int) -> Trajectory:
    """The first ``k`` steps as ``Monitor.trajectory()`` gives them (final answer: last agent text without calls)."""
    steps = t.steps[:k]
    final = next((s.content for s in reversed(steps) if s.is_decision and s.content.strip() and not s.tool_calls), None)
    return dataclasses.replace(t, steps=steps, final_answer=final)


def _ledger_fields(led) -> dict:
    return {"claims": [c.to_dict() for c in led.claims], "ids": [c.id for c in led.claims],
            "mentions": {k: list(v) for k, v in led.mentions.items()},
            "by_key": {k: c.id for k, c in led.by_key.items()}, "final_step": led.final_step,
            "brief_step": led.brief_step, "write_steps": led.write_steps, "reply_steps": led.reply_steps,
            "incomplete": led.incomplete, "sources": list(led.index.sources)}


def _graph(cg) -> tuple:
    return cg.to_dict(), [r.to_dict() for r in cg.to_records()], cg.brief_step


def _check_run(t: Trajectory, config: ClaimConfig = ClaimConfig(), task_given: bool = True) -> None:
    """Fed step by step, the builder's ledger and graph equal the batch ones on the whole run."""
    b = ClaimGraphBuilder(config, task=t.task if task_given else None, system_prompts=t.system_prompts)
    for s in t.steps:
        b.add(s)
    assert _ledger_fields(b.ledger.finish(t)) == _ledger_fields(build_ledger(t, config)), t.id
    assert _graph(b.finish(t)) == _graph(build_claim_graph(t, config)), t.id


def _check_prefixes(t: Trajectory, config: ClaimConfig = ClaimConfig(), task: str | None = None) -> None:
    """At every prefix, finish() equals the batch graph of the prefix (and leaves the builder usable)."""
    b = ClaimGraphBuilder(config, task=task, system_prompts=t.system_prompts)
    for k, s in enumerate(t.steps, 1):
        b.add(s)
        p = _prefix(t, k)
        if task is None:  # the builder's task: the first user step's text
            p = dataclasses.replace(p, task=next((x.content for x in p.steps if x.kind == "user"), ""))
        assert b.ledger.run.task == p.task  # (not the fallback of finish(): a full build from p's steps)
        assert _graph(b.finish(p)) == _graph(build_claim_graph(p, config)), (t.id, k)


# -- every dev run and example ------------------------------------------------------------------------

def test_every_tau_run(tau_runs):
    assert len(tau_runs) == 29
    for t in tau_runs.values():
        for config in CONFIGS:
            _check_run(t, config)
        _check_run(t, task_given=False)  # the task read from the first user step (a tau run's task is that)


def test_every_who_and_when_run(ww_runs):
    assert len(ww_runs) == 126
    for t in ww_runs.values():
        for config in CONFIGS[:2]:  # (the hand-off policy matters here; replies: in tau's conversations)
            _check_run(t, config)


def test_every_example():
    res = load_many([ROOT / "examples" / "traces", ROOT / "examples" / "data"])
    assert res.trajectories
    for t in res.trajectories:
        for config in CONFIGS:
            _check_run(t, config)


def test_every_prefix_of_sampled_dev_runs(tau_runs, ww_runs):
    for t in list(tau_runs.values())[::6] + list(ww_runs.values())[::15]:
        _check_prefixes(t, task=t.task)
    for t in list(tau_runs.values())[::10]:
        _check_prefixes(t, task=None)


# -- edge cases -----------------------------------------------------------------------------------------

def _run(steps: list[Step], task: str = "", final: str | None = "auto") -> Trajectory:
    steps = [dataclasses.replace(s, index=i) for i, s in enumerate(steps)]
    if final == "auto":
        final = next((s.content for s in reversed(steps) if s.is_decision and s.content.strip() and not s.tool_calls),
                     None)
    return Trajectory(id="synthetic", steps=tuple(steps), source=Source(format="synthetic"), task=task,
                      final_answer=final)


def user(text: str) -> Step:
    return Step(index=0, kind="user", role="user", content=text)


def agent(text: str, *calls: ToolCall, name: str = "a") -> Step:
    return Step(index=0, kind="agent", role="assistant", agent=name, content=text, tool_calls=tuple(calls))


def tool(text: str, call_id: str | None = None, name: str | None = None, error: bool = False) -> Step:
    return Step(index=0, kind="tool", role="tool", content=text,
                tool_output=ToolOutput(call_id=call_id, name=name, is_error=error))


def test_final_answer_before_the_last_step_shifts_the_later_ids():
    """The answer is stated at step 2; a later call introduces a claim (no value in its text) and the
    run ends with TERMINATE: the final claim sits between them, ids follow it."""
    t = _run([user("Total the Q3 invoices."),
              agent("", ToolCall(id="1", name="sum_invoices", arguments={"quarter": "Q3-2024"})),
              tool('{"total": 48213.5}', "1", "sum_invoices"),
              agent("The Q3 total is $48,213.50."),
              agent("", ToolCall(id="2", name="save_report", arguments={"report_id": "R-99812-x"})),
              tool("saved", "2", "save_report"),
              agent("TERMINATE")])
    _check_run(t)
    _check_prefixes(t, task=t.task)
    g = build_claim_graph(t)
    assert g.final_step == 3
    final = next(c for c in g.claims if c.kind == "final")
    later = [c for c in g.claims if c.step > 3]
    assert later and all(int(c.id[1:]) > int(final.id[1:]) for c in later)


def test_brief_with_the_task_known_and_read_from_the_first_user_turn():
    task = "Find how many residents Lisbon had in the 2021 census and report the number."
    steps = [agent(f"Team, our task: {task} Start with https://census.example.net/pt/2021."),
             agent("Lisbon had 545,923 residents in 2021."),
             user(task), agent("The answer is 545,923.")]
    t = _run(steps, task=task)
    for config in CONFIGS:
        _check_run(t, config)
    _check_prefixes(t, task=task)
    _check_prefixes(t, task=None)  # the task arrives at step 2: steps 0-1 are settled again then
    assert build_ledger(t, ClaimConfig()).index.sources[1].kind == "task"  # the brief is evidence


def test_url_confirmed_by_its_own_step_and_refuted_where_reused_later():
    t = _run([user("Get the data files."),
              agent("Fetching https://files.example.net/a/sales.csv now.",
                    ToolCall(id="1", name="fetch", arguments={"url": "https://files.example.net/a/sales.csv"})),
              tool("id,amount\n1,20", "1", "fetch"),
              agent("Next I read /data/input/costs_2024.xlsx for the costs."),
              agent("Opening /data/input/costs_2024.xlsx.",
                    ToolCall(id="2", name="read_file", arguments={"path": "/data/input/costs_2024.xlsx"})),
              tool("Error: No such file or directory: costs_2024.xlsx", "2", "read_file", error=True),
              agent("Done.")])
    _check_run(t)
    _check_prefixes(t, task=t.task)
    g = build_claim_graph(t)
    url = next(c for c in g.claims if c.kind == "url")
    assert url.status is Support.WEAK and url.evidence_address == "steps.2.content"
    path = next(c for c in g.claims if c.kind == "path")
    assert path.step == 3 and path.status is Support.CONFLICTING and path.evidence_address == "steps.5.content"
    # at step 4 the path's use has no output yet: it is MISSING in the prefix's graph, and stays so
    b = ClaimGraphBuilder(task=t.task)
    for s in t.steps[:5]:
        b.add(s)
    early = next(c for c in b.finish(_prefix(t, 5)).claims if c.kind == "path")
    assert early.status is Support.MISSING


def test_values_confirmed_and_affirmed_by_later_user_turns():
    t = _run([user("I need to change my address."),
              agent("Your account email is maria.lopez@mail.example.net, right?"),
              user("Yes."),
              agent("I will ship to 1200 Harbour Road, unit 77."),
              user("ok and the zip is 94107-1200 Harbour Road"),
              agent("Updated.", ToolCall(id="1", name="update_address", arguments={"zip": "94107"})),
              tool('{"ok": true}', "1", "update_address"),
              agent("Your address has been updated.")])
    _check_run(t)
    _check_prefixes(t, task=t.task)


def test_runs_without_claims():
    for t in (_run([]), _run([user("hello")]), _run([user("hi"), agent("Hello! How can I help?")]),
              _run([user("hi"), agent("", ToolCall(id="1", name="ping", arguments={})), tool("pong", "1")], final=None)):
        _check_run(t)
        _check_run(t, task_given=False)
    b = ClaimGraphBuilder()
    empty = _run([])
    assert b.finish(empty).claims == [] and b.finish(empty).to_dict() == build_claim_graph(empty).to_dict()


def test_replies_finalize_once_the_run_is_a_conversation():
    """Agent replies made before the first user turn after the first decision finalize their claims
    only once that turn arrives (the run becomes a conversation)."""
    t = _run([agent("Order #W7712345 is pending and costs $231.40."), agent("I checked order #W7712345."),
              user("Thanks, cancel it."), agent("", ToolCall(id="1", name="cancel_pending_order",
                                                           arguments={"order_id": "#W7712345"})),
              tool('{"order_id": "#W7712345", "status": "cancelled"}', "1", "cancel_pending_order"),
              agent("Order #W7712345 has been cancelled.")], task="help with my order")
    _check_prefixes(t, task=t.task)
    for config in CONFIGS:
        _check_run(t, config)
    c = next(c for c in build_claim_graph(t).claims if c.value == "w7712345")
    assert c.final_steps == [0, 1, 3, 5]


def test_other_inputs_fall_back_to_a_full_build():
    """finish() on a trajectory whose task differs from the builder's: built from its steps."""
    t = _run([user("Find order #W1234567."), agent("Order #W1234567 is delivered.")], task="a task")
    b = LedgerBuilder(ClaimConfig(), task="another task")
    for s in t.steps:
        b.add(s)
    assert _ledger_fields(b.finish(t)) == _ledger_fields(build_ledger(t, ClaimConfig()))
    with pytest.raises(ValueError, match="steps.5: expected step 2"):
        b.add(dataclasses.replace(t.steps[0], index=5))


# -- generated runs --------------------------------------------------------------------------------------

_TEXTS = (
    "Order #W{n}123456 is {state}.", "The total is ${n}1,234.50 for {n}2 items.", "I found 12 available options:\n"
    "1. red\n2. blue", "See https://docs.example.net/v{n}/guide and /srv/data/file_{n}.csv.",
    "Your refund has been processed successfully.", "yes", "TERMINATE", 'The product "Blue Kettle {n}" costs 45.99.',
    "```python\nprint(open('/srv/data/file_{n}.csv').read())\n```", "Lisbon had 545,92{n} residents in 2021.",
    "The email is user{n}@mail.example.net.", "", "I will finalize now.",
)
_OUTPUTS = (
    '{{"order_id": "#W{n}123456", "status": "{state}", "total": {n}1234.5}}',
    '{{"variants": [{{"color": "red", "available": true}}, {{"color": "blue", "available": false}}]}}',
    "Error: not found /srv/data/file_{n}.csv", "ok", "545,92{n}", "{n}1,234.50",
    "Fetched https://docs.example.net/v{n}/guide (200)", "listing: /srv/data/file_{n}.csv",
)
_STATES = ("pending", "delivered", "cancelled")
_TOOLS = ("get_order_details", "cancel_pending_order", "python_exec", "fetch")


@st.composite
def runs(draw):
    n = draw(st.integers(0, 22))
    steps: list[Step] = []
    calls: list[str] = []
    for i in range(n):
        kind = draw(st.sampled_from(("user", "agent", "agent", "tool", "system")))
        fill = {"n": draw(st.integers(1, 3)), "state": draw(st.sampled_from(_STATES))}
        if kind == "tool":
            cid = draw(st.sampled_from([*calls, None, "late"])) if calls else draw(st.sampled_from([None, "late"]))
            steps.append(tool(draw(st.sampled_from(_OUTPUTS)).format(**fill), cid, None,
                              error=draw(st.booleans())))
        elif kind == "agent":
            made = []
            if draw(st.booleans()):
                cid = f"c{i}"
                calls.append(cid)
                made.append(ToolCall(id=cid, name=draw(st.sampled_from(_TOOLS)),
                                     arguments={"order_id": f"#W{fill['n']}123456", "note": "Blue Kettle"}))
            steps.append(agent(draw(st.sampled_from(_TEXTS)).format(**fill), *made,
                               name=draw(st.sampled_from(("a", "b")))))
        else:
            text = draw(st.sampled_from(("yes", "Please cancel #W{n}123456.", "My email is user{n}@mail.example.net",
                                         "", "Find the 2021 census figure for Lisbon.",
                                         "Use https://docs.example.net/v{n}/guide", "Blue Kettle {n}")))
            steps.append(dataclasses.replace(user(text.format(**fill)), kind=kind, role=kind))
    task = draw(st.sampled_from(("", "Find the 2021 census figure for Lisbon.", None)))
    return steps, task


@settings(max_examples=120)
@given(runs(), st.sampled_from(CONFIGS))
def test_generated_runs_at_every_prefix(run, config):
    steps, task = run
    t = _run(steps, task=task or "")
    if task is None:
        t = dataclasses.replace(t, task=next((s.content for s in t.steps if s.kind == "user"), ""))
    _check_prefixes(t, config, task=task)
    _check_run(t, config, task_given=task is not None)


# -- the growing evidence index -------------------------------------------------------------------------

def test_growing_index_answers_as_the_batch_index(tau_runs, ww_runs):
    """Every query of GrowingEvidenceIndex (postings) equals EvidenceIndex's (digest scans), at every
    position, for values, words, phrases, objects and misses."""
    from trajaudit.engine.claims.evidence_index import EvidenceIndex, GrowingEvidenceIndex

    for t in [tau_runs["2"], tau_runs["20"], *list(ww_runs.values())[:4]]:
        batch = EvidenceIndex(t)
        grow = GrowingEvidenceIndex(t.task, t.system_prompts)
        for s in t.steps:
            grow.add_step(s)
        assert grow.sources == batch.sources and grow.user_sources == batch.user_sources
        keys: list[str] = ["no-such-value", "zzzz qqqq"]
        objects: list[str] = ["no-such-object"]
        for sid in range(len(batch.sources)):
            d = batch._digest(sid)
            keys += list(d.values)[:6] + list(d.words)[:4] + [" ".join(list(d.words)[2:5])]
            objects += list(d.facts)[:3]
        attrs = ["status", "price", "available", "name"]
        for before in range(-1, len(t.steps) + 1):
            for key in keys:
                assert grow.latest(key, before) == batch.latest(key, before), (t.id, key, before)
                assert grow.after(key, before) == batch.after(key, before), (t.id, key, before)
                assert grow.phrase(key, before) == batch.phrase(key, before), (t.id, key, before)
            for obj in objects:
                assert grow.has_object(obj, before) == batch.has_object(obj, before)
                for attr in attrs:
                    assert grow.fact(obj, attr, before) == batch.fact(obj, attr, before), (t.id, obj, attr, before)
            assert [(c.address, c.size) for c in grow.latest_collections(before)] == \
                [(c.address, c.size) for c in batch.latest_collections(before)]
            assert grow.numbers_near(before) == batch.numbers_near(before)


# -- the monitor uses it ---------------------------------------------------------------------------------

def test_monitor_never_rebuilds_the_ledger(tau_runs, monkeypatch):
    """Monitor.diagnosis() at every step and close() take the claim graph from the incremental builder:
    with build_claim_graph disabled in the evidence stage, the log after close() is still the batch log."""
    ctx = build_context(AuditSpec())
    runs = [tau_runs["2"]]
    batch = {t.id: evidence.gather(t, ctx).log.to_dict() for t in runs}
    diagnoses = {t.id: [] for t in runs}  # the offline judge on each prefix, the ledger rebuilt on it
    judge = default_strategies().get("offline")
    for t in runs:
        m = Monitor(context=ctx, run_id=t.id, task=t.task)
        for s in t.steps:
            m.add(s)
            traj = m.trajectory()
            d = judge.diagnose(traj, evidence.gather(traj, ctx), ctx) if traj.decision_steps else None
            diagnoses[t.id].append(None if d is None else dataclasses.replace(
                d, metadata={**d.metadata, "basis": diagnosis_basis(d)}).to_dict())

    def boom(*a, **k):
        raise AssertionError("the monitor rebuilt the claim ledger")

    monkeypatch.setattr(evidence, "build_claim_graph", boom)
    for t in runs:
        m = Monitor(context=ctx, run_id=t.id, task=t.task)
        got = []
        for s in t.steps:
            m.add(s)
            d = m.diagnosis()
            got.append(None if d is None else d.to_dict())
        m.close()
        assert m.log.to_dict() == batch[t.id]
        assert got == diagnoses[t.id]  # and the same estimates as with the ledger rebuilt per call


def test_monitor_on_chat_messages_with_the_task_from_the_first_user_turn(tau_file):
    """Raw OpenAI messages, no task given: the monitor's ledger takes the task from the first user turn."""
    ctx = build_context(AuditSpec())
    raw = json.loads(Path(tau_file).read_text())[:3]
    for run in raw:
        t = load(run["traj"], format="openai")
        m = Monitor(context=ctx, run_id=t.id, source=t.source)
        for msg in run["traj"]:
            m.add(msg)
        m.close()
        traj = m.trajectory(final=True)
        assert m.log.to_dict() == evidence.gather(traj, ctx).log.to_dict()
