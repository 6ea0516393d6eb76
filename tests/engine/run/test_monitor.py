"""Monitor (issue 20): a run fed one message at a time gives, after close(), the batch validation log
of the same run, record for record; every record is returned exactly once by add()/close(), at the
step that settles it (prefix-decidable rules: the step itself)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trajaudit import Monitor, load_many, load_path
from trajaudit.engine.run.evidence import gather
from trajaudit.engine.run.monitor import MonitorError, diagnosis_basis, prefix_decidable
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.validation_log import Record

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ctx():
    return build_context(AuditSpec())  # the default packs, as `trajaudit audit` uses them


def _rec(r: Record) -> dict:
    return r.to_dict()


def _replay(t, ctx) -> tuple[Monitor, list[Record], list[int]]:
    m = Monitor(context=ctx, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source)
    got: list[Record] = []
    at: list[int] = []
    for s in t.steps:
        new = m.add(s)
        got += new
        at += [s.index] * len(new)
    got += m.close()
    return m, got, at


def _check_equal(t, ctx) -> None:
    m, got, at = _replay(t, ctx)
    batch = gather(t, ctx).log
    assert m.log.to_dict() == batch.to_dict(), t.id
    # every record was handed out once; nothing handed out is missing from the final log
    assert sorted(json.dumps(_rec(r), sort_keys=True, default=str) for r in got) == \
        sorted(json.dumps(_rec(r), sort_keys=True, default=str) for r in batch.records)
    # a record of a prefix-decidable rule is returned by the add() of its own step, or later (catch-up)
    assert all(r.step <= k for r, k in zip(got, at, strict=False))


def test_equivalence_tau(tau_runs, ctx):
    assert len(tau_runs) == 29
    for t in tau_runs.values():
        _check_equal(t, ctx)


def test_equivalence_who_and_when(ww_runs, ctx):
    assert len(ww_runs) == 126
    for t in ww_runs.values():
        _check_equal(t, ctx)


def test_equivalence_examples(ctx):
    res = load_many([ROOT / "examples" / "traces", ROOT / "examples" / "data"])
    assert res.trajectories
    for t in res.trajectories:
        _check_equal(t, ctx)


def test_openai_messages_one_at_a_time(tau_file, ctx):
    """Raw tau messages (OpenAI chat), not IR steps: same log as the batch on the loaded run."""
    runs = json.loads(Path(tau_file).read_text())
    loaded = {t.id: t for t in load_path(tau_file).trajectories}
    for run in runs[:6]:
        t = loaded[str(run["task_id"])]
        m = Monitor(context=ctx, run_id=t.id, source=t.source)
        for msg in run["traj"]:
            m.add(msg)
        m.close()
        def ir(steps):  # the tau adapter keeps the dataset's own 1-based number; a live run has none
            return [{k: v for k, v in s.to_dict().items() if k != "source_number"} for s in steps]
        assert ir(m.trajectory(final=True).steps) == ir(t.steps)
        assert m.log.to_dict() == gather(t, ctx).log.to_dict()


def test_unanswered_call_settled_at_close(ctx):
    m = Monitor(context=ctx)
    m.add({"role": "user", "content": "cancel order #W1"})
    m.add({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "cancel_pending_order", "arguments": "{}"}}]})
    m.add({"role": "assistant", "content": "Done, the order is cancelled."})
    assert "unanswered_call" not in m.steps[1].flags
    given = [r.to_dict() for r in m.log.records]
    late = m.close()
    assert len(given) + len(late) == len(m.log.records)  # nothing handed out twice
    assert "unanswered_call" in m.trajectory(final=True).steps[1].flags
    assert m.log.to_dict() == gather(m.trajectory(final=True), ctx).log.to_dict()


def test_bad_messages_leave_state_unchanged(ctx):
    m = Monitor(context=ctx)
    m.add({"role": "user", "content": "hi"})
    for bad in (42, "text", {"content": "no role"}, {"role": "assistant", "tool_calls": "x"}):
        with pytest.raises(MonitorError, match="message 1"):
            m.add(bad)
    assert len(m.steps) == 1
    m.close()
    with pytest.raises(MonitorError, match="after close"):
        m.add({"role": "user", "content": "again"})


_CALL = {"id": "c1", "type": "function", "function": {"name": "cancel_pending_order", "arguments": "{}"}}
_MALFORMED = [
    ({"role": 5}, "'role' must be a string, got int"),
    ({"role": None, "content": "x"}, "'role' must be a string, got NoneType"),
    ({"role": "user", "content": 5}, "'content' must be a string, null or a list of parts, got int"),
    ({"role": "user", "content": {"text": "hi"}}, "'content' must be a string, null or a list of parts, got dict"),
    ({"role": "user", "content": ["ok", 7]}, r"content\[1\] must be a text or a content block \(object\), got int"),
    ({"role": "assistant", "content": None, "tool_calls": {"id": "c1"}}, "'tool_calls' must be a list, got dict"),
    ({"role": "assistant", "content": None, "tool_calls": [_CALL, 3]}, r"tool_calls\[1\] must be an object, got int"),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {"arguments": "{}"}}]},
     r"tool_calls\[0\] has no function name"),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "function": {"name": "  "}}]},
     r"tool_calls\[0\] has no function name"),
    ({"role": "assistant", "content": None, "function_call": {"arguments": "{}"}}, "function_call has no function name"),
]


@pytest.mark.parametrize(("bad", "why"), _MALFORMED)
def test_malformed_message_is_refused_and_the_run_goes_on(ctx, bad, why):
    """A malformed message raises naming its position and the fault; the monitor is unchanged, and the
    run fed on gives the batch log of its good messages."""
    good = [{"role": "user", "content": "cancel order #W1"},
            {"role": "assistant", "content": "", "tool_calls": [_CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "cancelled"},
            {"role": "assistant", "content": "Done, the order is cancelled."}]
    m = Monitor(context=ctx)
    m.add(good[0])
    m.add(good[1])
    before = (list(m.steps), set(m._calls), m.dialect, m.log.to_dict())
    with pytest.raises(MonitorError, match="^message 2: " + why):
        m.add(bad)
    assert (list(m.steps), set(m._calls), m.dialect, m.log.to_dict()) == before
    with pytest.raises(MonitorError, match="^message 3: " + why):
        m.add_history([good[2], bad])  # a bad message in a batch of messages: none of them is taken
    assert len(m.steps) == 2
    for msg in good[2:]:
        m.add(msg)
    m.close()
    batch = Monitor(context=ctx)
    batch.add_history(good)
    batch.close()
    assert [s.to_dict() for s in m.steps] == [s.to_dict() for s in batch.steps]
    assert m.log.to_dict() == gather(m.trajectory(final=True), ctx).log.to_dict() == batch.log.to_dict()
    assert m.log.to_dict()["records"]  # the good run is actually checked


def test_diagnosis_basis_and_alarm(tau_runs, ctx):
    t = next(iter(tau_runs.values()))
    m = Monitor(context=ctx, run_id=t.id, task=t.task)
    assert m.diagnosis() is None  # no decision step yet
    bases = set()
    for s in t.steps:
        m.add(s)
        d = m.diagnosis()
        if d is not None:
            assert d.metadata["basis"] == diagnosis_basis(d)
            bases.add(d.metadata["basis"])
            m.check_alarm()
    assert bases <= {"finding", "weak", "fallback"} and bases
    assert "fallback" in bases  # early in the run nothing is found yet


def test_prefix_decidable_splits_default_packs(ctx):
    kinds = {prefix_decidable(r) for r in ctx.rules}
    assert kinds == {True, False}


def test_anthropic_messages_one_at_a_time(ctx):
    """Anthropic Messages (tool_use / tool_result blocks) fed one by one read as the batch adapter reads them."""
    from trajaudit import load

    msgs = [
        {"role": "user", "content": "What is the status of order #W1?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                          {"type": "tool_use", "id": "tu1", "name": "get_order_details",
                                           "input": {"order_id": "#W1"}},
                                          {"type": "tool_use", "id": "tu2", "name": "get_user_details",
                                           "input": {"user_id": "u1"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": '{"status": "pending"}'},
                                     {"type": "tool_result", "tool_use_id": "tu2", "content": "Error: not found",
                                      "is_error": True}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Your order #W1 is delivered."}]},
    ]
    t = load({"id": "anth", "messages": msgs}, format="anthropic")
    m = Monitor(context=ctx, run_id=t.id, source=t.source)
    for msg in msgs:
        m.add(msg)
    m.close()

    def ir(steps):
        return [{k: v for k, v in s.to_dict().items() if k != "source_number"} for s in steps]
    assert ir(m.trajectory(final=True).steps) == ir(t.steps)
    assert m.log.to_dict() == gather(t, ctx).log.to_dict()


def test_freeze_gc_moves_settled_state_out_of_the_collector(tau_runs, ctx):
    import gc

    t = next(iter(tau_runs.values()))
    assert gc.get_freeze_count() == 0
    m = Monitor(context=ctx, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source,
                freeze_gc=True)
    try:
        for s in t.steps[:5]:
            m.add(s)
        frozen = gc.get_freeze_count()
        assert frozen > 0  # the steps, indexes and records so far
        for s in t.steps[5:]:
            m.add(s)
        assert gc.get_freeze_count() >= frozen
    finally:
        m.close()
    assert gc.get_freeze_count() == 0  # close() gives everything back to the collector
    assert m.log.to_dict() == gather(t, ctx).log.to_dict()


def _generation_of(obj) -> int | None:
    import gc

    return next((g for g in range(3) if any(o is obj for o in gc.get_objects(generation=g))), None)


def test_default_gc_promotes_an_adds_survivors_and_restores_the_collector(tau_runs, ctx):
    """The default monitor pauses the cyclic collector during an add and restores it; what the add
    kept (the new step, its views, records) is in the oldest generation afterwards (a generation-1
    collection), nothing is frozen; a collector the caller disabled, or objects the caller froze,
    are left as they are."""
    import gc

    t = next(iter(tau_runs.values()))
    assert gc.isenabled() and gc.get_freeze_count() == 0
    m = Monitor(context=ctx, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source)
    seen_disabled = []
    real_advance = m._rules.advance

    def advance(step):
        seen_disabled.append(not gc.isenabled())
        return real_advance(step)

    m._rules.advance = advance
    for s in t.steps[:6]:
        m.add(s)
        assert gc.isenabled() and gc.get_freeze_count() == 0
        assert _generation_of(m.steps[-1]) == 2  # promoted: no young collection traverses it again
        assert gc.get_count()[0] < 50  # the young generation was collected at the add's end
    assert seen_disabled == [True] * 6  # paused while the step was evaluated
    gc.disable()  # the caller's choice stands
    try:
        m.add(t.steps[6])
        assert not gc.isenabled()
        assert _generation_of(m.steps[-1]) == 0
    finally:
        gc.enable()
    keep = [object() for _ in range(3)] + [{"caller": i} for i in range(50)]
    gc.freeze()  # objects the caller froze (e.g. before forking workers) stay frozen
    try:
        m.add(t.steps[7])
        assert gc.get_freeze_count() > 0 and _generation_of(keep[-1]) is None  # still frozen (not unfrozen)
        assert _generation_of(m.steps[-1]) == 2
    finally:
        gc.unfreeze()
    del keep
    for s in t.steps[8:]:
        m.add(s)
    m.close()
    assert m.log.to_dict() == gather(t, ctx).log.to_dict()


def test_promote_gc_false_leaves_the_collector_alone(tau_runs, ctx):
    import gc

    t = next(iter(tau_runs.values()))
    m = Monitor(context=ctx, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source,
                promote_gc=False)
    gc.collect()
    m.add(t.steps[0])
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert _generation_of(m.steps[-1]) in (0, 1)


def test_prefix_state_is_created_at_selection_and_filled_step_by_step(tau_runs, ctx):
    """The stepped rules' quantifier state exists, filled to the current step, before any query
    reads it (a rule first firing late no longer files the prefix then); the log is the batch's."""
    from trajaudit.engine.dsl.columnar import PrefixFilter

    writes = {"cancel_pending_order", "modify_pending_order_items", "modify_pending_order_address",
              "modify_pending_order_payment", "return_delivered_order_items", "exchange_delivered_order_items"}
    t = max(tau_runs.values(), key=lambda r: next((s.index for s in r.steps if set(s.tool_names) & writes), -1))
    k = next(s.index for s in t.steps if set(s.tool_names) & writes)
    assert k > 10
    m = Monitor(context=ctx, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source)
    for s in t.steps[:k]:
        m.add(s)
    tc = m._rules.tc
    filters = [v for v in tc.cache.values() if isinstance(v, PrefixFilter)]
    assert len(filters) >= 10
    size = {id(tc.views): k, id(tc.all_calls): len(tc.all_calls)}  # a filter over the steps or over the calls
    for key, pf in tc.cache.items():
        if isinstance(pf, PrefixFilter) and not pf.stuck:
            assert pf.upto == size[key[2]]  # filled step by step, up to now
    unread = [pf for pf in filters if pf.charged == 0]  # created at selection, no query has read them yet
    assert len(unread) >= 5
    for s in t.steps[k:]:
        m.add(s)
    m.close()
    assert m.log.to_dict() == gather(t, ctx).log.to_dict()


def test_add_history_then_add_equals_batch(tau_runs, ctx):
    """A known prefix at once (add_history, as the guard reads a request), then one message at a time."""
    for t in list(tau_runs.values())[:5]:
        m = Monitor(context=ctx, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source)
        half = len(t.steps) // 2
        got = m.add_history(t.steps[:half])
        for s in t.steps[half:]:
            got += m.add(s)
        got += m.close()
        batch = gather(t, ctx).log
        assert m.log.to_dict() == batch.to_dict(), t.id
        assert len(got) == len(batch.records)


def test_monitor_error_is_public_api():
    """`from trajaudit import MonitorError` (the README and docs/api.md tell users to catch it)."""
    import trajaudit
    from trajaudit import MonitorError as Public

    assert "MonitorError" in trajaudit.__all__ and Public is MonitorError
    with pytest.raises(trajaudit.MonitorError, match=r"message 0: 'role' must be a string"):
        Monitor().add({"role": 5})


def test_claim_ledger_takes_each_step_once_when_diagnosis_or_close_needs_it(tau_runs, ctx, monkeypatch):
    """add() answers the rules only; the claim ledger receives the steps added since its last use when
    diagnosis() or close() asks (each step once, in order, the objects add() took), and the results are
    those of a diagnosis after every add and of the batch."""
    from trajaudit.engine.claims import ClaimGraphBuilder

    fed: list[int] = []
    real_add = ClaimGraphBuilder.add

    def counting_add(self, step):  # type: ignore[no-untyped-def]
        fed.append(step.index)
        return real_add(self, step)

    monkeypatch.setattr(ClaimGraphBuilder, "add", counting_add)
    t = max(tau_runs.values(), key=lambda r: len(r.steps))
    every = Monitor(context=ctx, run_id=t.id, task=t.task)
    lazy = Monitor(context=ctx, run_id=t.id, task=t.task)
    half = len(t.steps) // 2
    for s in t.steps[:half]:
        lazy.add(s)
    assert fed == []  # no claim work inside add()
    for s in t.steps[:half]:
        every.add(s)
        every.diagnosis()
    fed.clear()
    assert lazy.diagnosis() == every.diagnosis()  # memoized on `every`: only `lazy` feeds its ledger now
    assert fed == list(range(half))
    fed.clear()
    for s in t.steps[half:]:
        lazy.add(s)
    lazy.close()
    assert fed == list(range(half, len(t.steps)))
    assert lazy.log.to_dict() == gather(t, ctx).log.to_dict()


@pytest.mark.parametrize("bad", ["x", 1.5, -1, True, None])
def test_alarm_threshold_is_checked(ctx, bad):
    """Monitor(alarm_threshold=...) must be a confidence, 0 to 1 (the CLI checks its option; the API
    used to accept anything and fail later in check_alarm() with a TypeError)."""
    with pytest.raises(MonitorError, match="alarm_threshold must be a number from 0 to 1"):
        Monitor(context=ctx, alarm_threshold=bad)
    assert Monitor(context=ctx, alarm_threshold=0).alarm_threshold == 0
