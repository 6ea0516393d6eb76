"""The offline judge's exact shortcuts (issue 22, judge stage) against their definitions: each fast path
gives bit-for-bit the same feature rows, scores and diagnoses as the reference code it replaces, on the
dev runs (with their real evidence) and on generated runs."""

from __future__ import annotations

import json
import re
import struct
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit.engine.claims import origin as og
from trajaudit.engine.run.evidence import gather
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.strategies import judge_features as jf
from trajaudit.engine.strategies import offline_judge as oj
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.strategies.judge_weights import JudgeWeights, shipped_weights
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory
from trajaudit.engine.validation_log import Evidence, Record, ValidationLog

_ORIGIN_OF = og.origin_of


def _reference_origin_of(t: Trajectory, step: int, graph: Any = None, max_depth: int = 8, *,
                         memo: Any = None) -> og.OriginTrace:
    return _ORIGIN_OF(t, step, graph, max_depth)  # every walk from scratch, no memo


class _DumpsEncoder:
    @staticmethod
    def encode(x: Any) -> str:
        return json.dumps(x, sort_keys=True, ensure_ascii=False, default=str)


def _reference_claim_facts(graph: Any) -> jf._ClaimFacts:
    """``judge_features._claim_facts`` as first written (issue 17)."""
    from collections import defaultdict

    if graph is None:
        return jf._ClaimFacts()
    stats: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    dependents: dict[int, set[int]] = defaultdict(set)
    for c in getattr(graph, "claims", ()):
        st = stats[c.step]
        status = getattr(c.status, "value", str(c.status))
        st[0] += status == "MISSING" and c.consequential
        st[1] += status == "CONFLICTING"
        st[2] += status == "WEAK"
        st[3] += 1
        st[4] += bool(c.reused_in)
        st[5] += c.consequential
        dependents[c.step].update(r for r in c.reused_in if r > c.step)
    prop_res = graph.propagate()
    return jf._ClaimFacts(stats, dependents, set(prop_res.error_steps), prop_res.first_error_step)


def _reference_diagnose(self: oj.OfflineJudge, t: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Any:
    """``OfflineJudge.diagnose`` reading the whole log (``self.table``) and its summary, as first written."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(oj, "features", lambda t, records, graph: jf.features(t, evidence.log.records, graph))
        mp.setattr(oj, "verdict_counts", lambda log, verdicts=None: log.summary()["verdicts"])
        return _DIAGNOSE(self, t, evidence, context)


_DIAGNOSE = oj.OfflineJudge.diagnose


def _reference_score_rows(self: JudgeWeights, rows: list[list[float]]) -> list[float]:
    w, b = self.vector, self.intercept
    return [b + sum(wi * xi for wi, xi in zip(w, row, strict=True)) for row in rows]


@pytest.fixture
def reference(monkeypatch):
    """Switch every shortcut of the judge stage to the code it replaces (the definitions)."""

    def use() -> None:
        monkeypatch.setattr(jf, "_repeat_keys", jf._repeat_keys_reference)
        monkeypatch.setattr(jf._Rows, "_repeats", jf._Rows._repeats_reference)
        monkeypatch.setattr(jf, "has_code", lambda text: bool(jf._CODE.search(text)))
        monkeypatch.setattr(jf, "_addresses", lambda text, low, address: address[0].search(text) is not None)
        monkeypatch.setattr(jf, "_ARGS_ENCODER", _DumpsEncoder)
        monkeypatch.setattr(jf._Rows, "row", jf._Rows.row_reference)
        monkeypatch.setattr(og, "_norm_name", og._norm_name_reference)
        monkeypatch.setattr(og, "origin_of", _reference_origin_of)
        monkeypatch.setattr(oj, "origin_of", _reference_origin_of)
        monkeypatch.setattr(oj.OfflineJudge, "diagnose", _reference_diagnose)
        monkeypatch.setattr(JudgeWeights, "score_rows", _reference_score_rows)
        monkeypatch.setattr(jf, "_claim_facts", _reference_claim_facts)

    return use


def _bits(rows: list[list[float]]) -> list[list[bytes]]:
    """Rows as the bytes of each double (``==`` would let 0.0 and -0.0 pass as equal)."""
    return [[struct.pack("<d", x) for x in row] for row in rows]


def _judge_all(runs: list[tuple[Trajectory, EvidenceBundle]], ctx: AuditContext) -> tuple[list[Any], list[Any]]:
    judge = oj.OfflineJudge()
    tables = [_bits(judge.table(t, b).rows) for t, b in runs]
    diagnoses = [judge.diagnose(t, b, ctx).to_dict() for t, b in runs]
    return tables, diagnoses


def _gathered(runs: list[Trajectory], spec: AuditSpec) -> tuple[list[tuple[Trajectory, EvidenceBundle]], AuditContext]:
    ctx = build_context(spec)
    return [(t, gather(t, ctx)) for t in runs], ctx


@pytest.mark.parametrize("data", ["tau", "ww"])
def test_dev_runs_rows_and_diagnoses_equal_the_reference(data, tau_file, tau_runs, ww_runs, reference):
    if data == "tau":
        tools = tau_file.parent / "tools.json"
        runs, ctx = _gathered(list(tau_runs.values()), AuditSpec(tools=str(tools) if tools.exists() else None))
    else:
        runs, ctx = _gathered(list(ww_runs.values()), AuditSpec())
    fast = _judge_all(runs, ctx)
    reference()
    ref = _judge_all(runs, ctx)
    assert fast[0] == ref[0]
    assert fast[1] == ref[1]
    assert any(len(rows) > 1 for rows in fast[0])


# --- generated runs -------------------------------------------------------------------------------

_AGENTS = ["Orchestrator", "WebSurfer", "web_surfer", "Computer Terminal", "Coder", "assistant", "KELVIN_bot",
           "\u017ftar", "\u0130nci", "ab", "Data-Analyst"]
_WORDS = ["please", "websurfer", "WEB SURFER", "Web-Surfer", "web_surfer", "computer   terminal", "coder", "Coder,",
          "kelvin bot", "\u212aelvin_bot", "star", "\u017ftar", "inci", "\u0130nci", "data analyst", "data_analyst",
          "assistant", "import os", "def f():", "SELECT *", "curl x", "pip install y", "```python\nprint(1)\n```",
          "  ```", "inline ``` fence", "\n", "\t", "  ", "\u00a0", "\u3000", "ß", "caf\u00e9", "order #W123",
          "the total is 42", "cancel it", "Already done.", "Cancel the PENDING order", "```cancel pending order```",
          "STRASSE gross", "stra\u00dfe gro\u00df", "order pending"]
_TARGETS = ["system_failure", "underspecified_user_intent", "invalid_invocation", "guardrails_triggered",
            "instruction_adherence_failure"]
_RULES = ["claims.unsupported", "generic.protocol.x", "generic.y", "tau.z", "pack.w", jf.PROPAGATION_RULE]


@st.composite
def _runs(draw) -> tuple[Trajectory, list[Record]]:
    n = draw(st.integers(2, 16))
    agents = draw(st.lists(st.sampled_from(_AGENTS), min_size=1, max_size=4, unique=True))
    texts = draw(st.lists(st.lists(st.sampled_from(_WORDS), max_size=7).map(" ".join), min_size=1, max_size=5))
    steps: list[Step] = [Step(0, "user", "user", "the task: " + draw(st.sampled_from(texts)))]
    open_calls: list[tuple[str, str]] = []
    for i in range(1, n):
        kind = draw(st.sampled_from(["agent", "agent", "agent", "tool", "user"]))
        if kind == "agent":
            calls = tuple(ToolCall(draw(st.sampled_from(["get_order", "cancel_order", "search", "update_x"])),
                                   draw(st.sampled_from([{"id": "W1"}, {"id": "W2", "q": ["a", 1]}, {"x": None}, None,
                                                         {"b": 1, "a": 2}, {"s": [1, 2.5]}, {"q": "cancel pending order"},
                                                         {"q": ["stra\u00dfe", "gro\u00df Order"]}, {"q": "order pending"}])),
                                   draw(st.sampled_from([f"c{i}", f"c{i}", None])))
                          for _ in range(draw(st.integers(0, 2))))
            open_calls += [(c.id, c.name) for c in calls if c.id is not None]
            meta = {"target": draw(st.sampled_from(agents))} if draw(st.integers(0, 5)) == 0 else {}
            steps.append(Step(i, "agent", "assistant", draw(st.sampled_from(texts)), draw(st.sampled_from(agents)),
                              calls, metadata=meta))
        elif kind == "tool":
            cid, name = open_calls.pop(0) if open_calls and draw(st.booleans()) else (None, None)
            steps.append(Step(i, "tool", "tool", draw(st.sampled_from(["ok", "Error: failed", "exitcode: 1"])),
                              tool_output=ToolOutput(cid, name, draw(st.booleans()))))
        else:
            steps.append(Step(i, "user", "user", draw(st.sampled_from(texts))))
    t = Trajectory(id="gen", steps=tuple(steps), source=Source("openai"), agents=tuple(agents))
    recs = []
    for _ in range(draw(st.integers(0, 12))):
        k = draw(st.integers(-1, n))
        rule = draw(st.sampled_from(_RULES))
        bindings = {"recovered": True} if draw(st.integers(0, 4)) == 0 else {}
        if rule == jf.PROPAGATION_RULE:
            bindings = {"root_step": draw(st.integers(0, n - 1))}
        recs.append(Record(step=k, rule_id=rule, verdict=draw(st.sampled_from(["fail", "fail", "pass", "unknown"])),
                           severity=draw(st.sampled_from(["info", "warning", "error", "critical"])),
                           rule_type=draw(st.sampled_from(["SCHEMA", "PROTOCOL", "TEMPORAL", "OTHER"])),
                           targets=tuple(draw(st.lists(st.sampled_from(_TARGETS), max_size=2))),
                           evidence=(Evidence(f"steps.{k}"),), bindings=bindings,
                           origin=draw(st.sampled_from(["rules", "claims"]))))
    return t, recs


def _judged(t: Trajectory, recs: list[Record]) -> tuple[list[list[bytes]], dict[str, Any]]:
    judge = oj.OfflineJudge()
    log = ValidationLog(t.id, list(recs), skipped=3)
    bundle = EvidenceBundle(log=log)
    rows = _bits(jf.features(t, recs).rows) + _bits(jf.features(t, recs, min_severity="warning").rows)
    return rows, judge.diagnose(t, bundle, AuditContext()).to_dict()


@settings(max_examples=300, deadline=None)
@given(_runs())
def test_generated_runs_rows_and_diagnoses_equal_the_reference(run):
    t, recs = run
    fast = _judged(t, recs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jf, "_repeat_keys", jf._repeat_keys_reference)
        mp.setattr(jf._Rows, "_repeats", jf._Rows._repeats_reference)
        mp.setattr(jf, "has_code", lambda text: bool(jf._CODE.search(text)))
        mp.setattr(jf, "_addresses", lambda text, low, address: address[0].search(text) is not None)
        mp.setattr(jf, "_ARGS_ENCODER", _DumpsEncoder)
        mp.setattr(jf._Rows, "row", jf._Rows.row_reference)
        mp.setattr(og, "_norm_name", og._norm_name_reference)
        mp.setattr(og, "origin_of", _reference_origin_of)
        mp.setattr(oj, "origin_of", _reference_origin_of)
        mp.setattr(oj.OfflineJudge, "diagnose", _reference_diagnose)
        mp.setattr(JudgeWeights, "score_rows", _reference_score_rows)
        mp.setattr(jf, "_claim_facts", _reference_claim_facts)
        ref = _judged(t, recs)
    assert fast == ref


_CALL_NAMES = ["get", "get\x00", "get\x00x", "x", "\x00x", "cancel", ""]
_CALL_ARGS = [{"id": "W1"}, {"id": "W1\x00"}, {"q": "\x00x"}, "x", "\x00", None, {"b": 1, "a": 2}, {"a": 2, "b": 1}]


@st.composite
def _calling_runs(draw) -> Trajectory:
    """Runs of decision steps with calls whose names and arguments hold NULs, repeat or stand alone, and
    steps without text (the cases :func:`_repeat_keys` leaves keys out for)."""
    steps: list[Step] = [Step(0, "user", "user", "the task")]
    for i in range(1, draw(st.integers(2, 12))):
        calls = tuple(ToolCall(draw(st.sampled_from(_CALL_NAMES)), draw(st.sampled_from(_CALL_ARGS)), f"c{i}.{j}")
                      for j in range(draw(st.integers(0, 3))))
        text = draw(st.sampled_from(["", " ", "\n\t", "cancel the pending order now please", "Cancel the  pending "
                                     "order now please", "ok"]))
        steps.append(Step(i, "agent", "assistant", text, draw(st.sampled_from(["a", "b"])), calls))
    return Trajectory(id="calls", steps=tuple(steps), source=Source("openai"), agents=("a", "b"))


@settings(max_examples=400, deadline=None)
@given(_calling_runs())
def test_repeat_features_equal_the_reference_with_every_key(t):
    """Call keys only for names another call carries, no text key for a step without text, three zeros
    for a candidate without keys: the same rows as every key and the per-key loop (bit for bit)."""
    fast = _bits(jf.features(t, []).rows)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jf, "_repeat_keys", jf._repeat_keys_reference)
        mp.setattr(jf._Rows, "_repeats", jf._Rows._repeats_reference)
        ref = _bits(jf.features(t, []).rows)
    assert fast == ref


def test_repeat_keys_leave_out_only_keys_carried_once():
    steps = [Step(0, "user", "user", "task"),
             Step(1, "agent", "assistant", "", "a", (ToolCall("get", {"id": 1}, "c1"), ToolCall("x", {}, "c2"))),
             Step(2, "agent", "assistant", "", "a", (ToolCall("get", {"id": 1}, "c3"),)),
             Step(3, "agent", "assistant", "", "a", (ToolCall("get\x00", {"id": 1}, "c4"),))]
    decisions = [s for s in steps if s.is_decision]
    keys_of, total = jf._repeat_keys(decisions)
    ref_of, ref_total = jf._repeat_keys_reference(decisions)
    # a name holding a NUL: every call key is kept (only the empty texts' keys, None anyway, are left out)
    assert keys_of == ref_of and total == ref_total
    keys_of, total = jf._repeat_keys(decisions[:2])
    assert keys_of == {1: ['c\x00get\x00{"id": 1}'], 2: ['c\x00get\x00{"id": 1}']}  # "x" is called once
    assert total == {'c\x00get\x00{"id": 1}': 2}
    assert jf._repeat_keys_reference(decisions[:2])[1] == {**total, 'c\x00x\x00{}': 1}


# --- the single shortcuts ----------------------------------------------------------------------------

_TEXT = st.lists(st.sampled_from(_WORDS + ["_", "-", "x", "A", "\u212a", "\u0131", "\u1680", "\x1c", "\x85"]),
                 max_size=10).map("".join)


def test_norm_name_equals_its_definition_on_every_code_point():
    for c in map(chr, range(sys.maxunicode + 1)):
        for text in (c, f"a{c}b", f"_{c}-", f"{c} {c}x"):
            assert og._norm_name(text) == og._norm_name_reference(text), repr(text)


@settings(max_examples=1000, deadline=None)
@given(_TEXT)
def test_norm_name_equals_its_definition(text):
    assert og._norm_name(text) == og._norm_name_reference(text)
    assert og._norm_name(None) == og._norm_name_reference(None) == ""


@settings(max_examples=1000, deadline=None)
@given(_TEXT)
def test_has_code_equals_the_code_regex(text):
    assert jf.has_code(text) == bool(jf._CODE.search(text))


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(_AGENTS + ["Mr. Smith", "a\\ b", "\u00df-man", "\u0130stanbul guide"]), _TEXT)
def test_address_prefilter_never_hides_a_mention(agent, text):
    address = jf._address(agent)
    if address is None:
        assert jf._address_pattern(agent) is None
        return
    low = text.lower()
    from trajaudit.engine.dsl.regex.prefilter import folds_like_ascii

    got = jf._addresses(text, low if folds_like_ascii(text, low) else None, address)
    assert got == (address[0].search(text) is not None)


@settings(max_examples=1000, deadline=None)
@given(_TEXT, _TEXT)
def test_equal_text_keys_have_equal_shapes(a, b):
    """:func:`_repeat_keys` leaves out text keys of steps with a shape of their own: sound only when equal
    keys (equal folded texts) imply equal shapes."""
    step_a, step_b = Step(0, "agent", "assistant", a, "x"), Step(1, "agent", "assistant", b, "x")
    if " ".join(a.casefold().split()) == " ".join(b.casefold().split()):
        assert jf._text_shape(a) == jf._text_shape(b)
        assert jf._text_key(step_a) == jf._text_key(step_b)
    assert jf._text_shape(a + " \n" + b) == jf._text_shape(a + b) or not (a + b).isascii()


def test_ascii_space_is_what_split_splits_at():
    assert jf._ASCII_SPACE == bytes(c for c in range(128) if not chr(c).split())


@settings(max_examples=500, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                    max_leaves=8))
def test_args_encoder_equals_dumps(value):
    try:
        want = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            jf._ARGS_ENCODER.encode(value)
        return
    assert jf._ARGS_ENCODER.encode(value) == want


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(st.floats(allow_nan=False, width=64, min_value=-1e6, max_value=1e6),
                         min_size=len(jf.FEATURES), max_size=len(jf.FEATURES)), max_size=5))
def test_scores_are_the_reference_scores_bit_for_bit(rows):
    w = shipped_weights()
    assert _bits([w.score_rows(rows)]) == _bits([_reference_score_rows(w, rows)])
    with pytest.raises(ValueError):
        w.score_rows([[0.0]])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["pass", "fail", "unknown"]), max_size=30), st.integers(0, 5), st.integers(0, 5))
def test_verdict_counts_equal_the_summary(verdicts, skipped, dropped):
    log = ValidationLog("x", [Record(step=0, rule_id="r", verdict=v) for v in verdicts], skipped=skipped,
                        dropped_passes=dropped)
    assert oj.verdict_counts(log) == log.summary()["verdicts"]
    assert list(oj.verdict_counts(log)) == list(log.summary()["verdicts"])


def test_weights_vector_follows_the_weights():
    w = JudgeWeights({"position": 1.5, "user_turn": -2.0})
    first = w.vector
    assert w.vector is first
    assert first[jf.FEATURE_INDEX["position"]] == 1.5 and sum(x != 0 for x in first) == 2
    w.weights["position"] = 0.25  # a caller changing the dict: the vector follows
    assert w.vector[jf.FEATURE_INDEX["position"]] == 0.25
    w.weights["loop_start"] = 3.0
    assert w.vector[jf.FEATURE_INDEX["loop_start"]] == 3.0
    assert w == JudgeWeights(dict(w.weights)) and "_vector_memo" not in repr(w)


def test_run_memo_claims_per_step_equal_the_filter(tau_file, tau_runs):
    ctx = build_context(AuditSpec(default_packs=False))
    checked = 0
    for t in list(tau_runs.values())[:10]:
        graph = gather(t, ctx).graph
        memo = og.RunMemo(t, graph)
        for s in t.steps:
            want = [c for c in graph.claims if c.step == s.index or s.index in c.reused_in]
            assert memo.claims_used_at(s.index) == want
            checked += len(want)
            assert memo.signature(s) == og._signature(s)
            assert memo.norm_content(s) == og._norm_name_reference(s.content)
            assert memo.prose_words(s) == og._prose_words(s)
    assert checked > 0


@settings(max_examples=300, deadline=None)
@given(_runs())
def test_origin_walks_with_a_memo_equal_walks_without(run):
    t, _ = run
    memo = og.RunMemo(t)
    for s in t.decision_steps:
        assert og.origin_of(t, s.index, memo=memo) == _ORIGIN_OF(t, s.index)
        assert og._sub_goal(t, s, memo) == og._sub_goal(t, s)


def test_origin_walk_ignores_another_runs_memo(tau_runs):
    a, b = list(tau_runs.values())[:2]
    memo = og.RunMemo(a)
    k = b.decision_steps[-1].index
    assert og.origin_of(b, k, memo=memo) == _ORIGIN_OF(b, k)


def test_code_literals_cover_every_branch():
    """Every branch of the code regex starts (after optional blanks) with one of the literals."""
    branches = re.sub(r"^\^\[ \\t\]\{0,3\}```\|", "", jf._CODE.pattern)
    assert jf._CODE.pattern.startswith("^[ \\t]{0,3}```|")
    for lit in jf._CODE_LITERALS[1:]:
        assert lit in branches
    assert len(jf._CODE_LITERALS) == branches.count("|") + 2


def test_sub_goal_prefilter_keeps_hits_and_misses():
    def run(plan: str) -> Trajectory:
        return Trajectory(id="g", source=Source("openai"), steps=(
            Step(0, "user", "user", "help"), Step(1, "agent", "assistant", plan, "a"),
            Step(2, "agent", "assistant", "", "a", (ToolCall("act", {"q": "cancel pending Straße order"}, "c1"),))))

    for plan, want in [("We should CANCEL the pending order (strasse)", 1), ("cancel pending STRASSE order", 1),
                       ("```\ncancel pending strasse order\n```", None), ("cancel the order", None)]:
        t = run(plan)
        assert og._sub_goal(t, t.steps[2]) == want
        assert og._sub_goal(t, t.steps[2], og.RunMemo(t)) == want
