"""The offline judge on hand-made validation logs: blame attribution, recovery, choice, category tie-break."""

from __future__ import annotations

from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.judge_features import FEATURES, features
from trajaudit.engine.strategies.offline_judge import OfflineJudge, blame, is_consequential_action
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory
from trajaudit.engine.validation_log import Evidence, Record


def _traj() -> Trajectory:
    steps = [
        Step(0, "system", "system", "policy"),
        Step(1, "user", "user", "cancel order #W1"),
        Step(2, "agent", "assistant", "", "assistant", (ToolCall("get_order", {"id": "#W1"}, "c1"),)),
        Step(3, "tool", "tool", "Error: not found", tool_output=ToolOutput("c1", "get_order", True)),
        Step(4, "agent", "assistant", "", "assistant", (ToolCall("get_order", {"id": "#W1"}, "c2"),)),
        Step(5, "tool", "tool", '{"status": "pending"}', tool_output=ToolOutput("c2", "get_order", False)),
        Step(6, "agent", "assistant", "", "assistant", (ToolCall("cancel_order", {"id": "#W1"}, "c3"),)),
        Step(7, "tool", "tool", '{"status": "cancelled"}', tool_output=ToolOutput("c3", "cancel_order", False)),
        Step(8, "agent", "assistant", "Done, 3 items cancelled.", "assistant"),
    ]
    return Trajectory(id="t", steps=tuple(steps), source=Source("openai"))


def _rec(step, rule, sev="error", targets=("invalid_invocation",), **b):
    return Record(step=step, rule_id=rule, verdict="fail", severity=sev, targets=targets,
                  evidence=(Evidence(f"steps.{step}", None),), bindings=b)


def test_blame_moves_tool_output_findings_to_the_calling_step_and_user_findings_forward():
    t = _traj()
    assert blame(t, _rec(3, "x")) == 2
    assert blame(t, _rec(1, "x")) == 2
    assert blame(t, _rec(1, "x", targets=("underspecified_user_intent",))) == 1
    assert blame(t, _rec(8, "x")) == 8


def test_recovered_error_is_discounted_and_later_failure_wins():
    t = _traj()
    table = features(t, [_rec(3, "sys.tool-error"), _rec(8, "claims.conflicting-evidence", targets=(
        "misinterpretation_of_tool_output",))])
    rows = {c.step: dict(zip(FEATURES, c.features, strict=True)) for c in table.candidates}
    # step 2's error was retried successfully: recovered, not a candidate for "first unrecoverable"
    assert rows[2]["error_recovered"] > 0 and rows[2]["error_unrecovered"] == 0 and rows[2]["first_error_step"] == 0
    assert rows[8]["error_unrecovered"] > 0 and rows[8]["first_error_step"] == 1
    assert [c.basis for c in table.candidates] == ["weak", "fallback", "fallback", "finding"]


def test_choice_category_and_confidence(monkeypatch):
    t = _traj()
    recs = [_rec(3, "sys.tool-error", sev="warning"),
            _rec(6, "policy.confirm-before-write", targets=("instruction_adherence_failure",)),
            _rec(6, "schema.extra-arg", sev="warning", targets=("invalid_invocation",)),
            _rec(8, "claims.conflicting-evidence", targets=("misinterpretation_of_tool_output",))]

    class Bundle:
        def __init__(self):
            from trajaudit.engine.validation_log import ValidationLog
            self.log = ValidationLog("t", list(recs))
            self.error_steps = (8,)

    bundle = Bundle()
    d = OfflineJudge().diagnose(t, bundle, AuditContext())
    assert d.critical_step == 6 and d.agent == "assistant"
    assert d.category == "instruction_adherence_failure"  # vote 2.0 beats invalid_invocation's 1.0
    assert [c.step for c in d.candidates][:2] == [6, 8]
    assert "policy.confirm-before-write" in d.rationale and 0.3 < d.confidence <= 0.95
    assert d.error_steps == (6, 8)


def test_tie_break_uses_category_precedence():
    t = _traj()
    table = features(t, [_rec(6, "a", targets=("system_failure",)), _rec(6, "b", targets=("invalid_invocation",))])
    (c,) = [c for c in table.candidates if c.findings]
    from trajaudit.engine.strategies.offline_judge import _category, _votes

    assert _category(_votes(c.findings, 1), None) == "invalid_invocation"


def test_fallback_is_first_consequential_action_then_last_decision():
    t = _traj()
    assert [s.index for s in t.steps if is_consequential_action(s)] == [6]
    step, cat, conf, ev, why = OfflineJudge()._prior(t)  # the shipped weights, no evidence
    assert (step, cat) == (6, "intent_plan_misalignment") and "fallback" in why and 0 < conf < 1
    code = Step(1, "agent", "assistant", "```python\nprint(1)\n```", "coder")
    assert is_consequential_action(code)


def test_warnings_alone_never_make_a_step_critical_and_final_user_turn_is_blamable(monkeypatch):
    t = _traj()
    from trajaudit.engine.validation_log import ValidationLog

    recs = [_rec(2, "w1", sev="warning"), _rec(2, "w2", sev="warning"), _rec(2, "w3", sev="warning"),
            _rec(6, "policy.status", targets=("instruction_adherence_failure",))]

    class Bundle:
        log = ValidationLog("t", recs)
        error_steps = ()

    bundle = Bundle()
    d = OfflineJudge().diagnose(t, bundle, AuditContext())
    assert d.critical_step == 6  # step 2 scores 3.0 from warnings only
    steps = list(t.steps) + [Step(9, "user", "user", "hello? are you there?")]
    t2 = Trajectory(id="t2", steps=tuple(steps), source=Source("openai"))
    assert blame(t2, _rec(9, "generic.protocol.run-ends-on-open-request", targets=("system_failure",))) == 9


def test_fallback_category_in_a_dialogue_is_the_users_request():
    """No evidence against the agent, and the user spoke again after the agent's first step: the first
    consequential action stays the critical step, the category is underspecified_user_intent and the
    request it carried out is quoted; without such a turn (the user only posed the task) it stays
    intent_plan_misalignment; JudgeSettings(user_prior=False) turns the prior off."""
    from dataclasses import replace

    from trajaudit.engine.strategies.offline_judge import JudgeSettings

    base = _traj()
    steps = list(base.steps)
    steps[4:4] = [Step(4, "agent", "assistant", "Which order do you mean?", "assistant"),
                  Step(5, "user", "user", "the pending one, cancel it", None)]
    steps = [replace(s, index=i) for i, s in enumerate(steps)]
    t = Trajectory(id="d", steps=tuple(steps), source=Source("openai"))
    step, cat, conf, ev, why = OfflineJudge()._prior(t)
    assert (step, cat) == (8, "underspecified_user_intent") and 0 < conf < 1
    assert [e.address for e in ev] == ["steps.8", "steps.5"] and "the pending one, cancel it" in why
    assert OfflineJudge(JudgeSettings(user_prior=False))._prior(t)[:2] == (8, "intent_plan_misalignment")
    assert OfflineJudge()._prior(base)[:2] == (6, "intent_plan_misalignment")  # the task only: no dialogue
