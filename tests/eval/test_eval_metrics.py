"""Metric primitives and evaluate() on small hand-made cases with known answers."""

from __future__ import annotations

import json

import pytest

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.eval import metrics as M
from trajaudit.eval.evaluate import evaluate
from trajaudit.eval.gold import GoldFailure, GoldItem, GoldSet, load_gold
from trajaudit.eval.runner import check_step_ranges


def test_step_accuracy_and_distances():
    assert M.step_within(7, 7) and not M.step_within(8, 7)
    assert M.step_within(8, 7, 1) and not M.step_within(10, 7, 2) and M.step_within(4, 7, 3)
    assert not M.step_within(None, 0, 5)
    assert M.step_distance(3, 10) == 7 and M.step_distance(None, 10) is None
    assert M.normalized_distance(3, 10, 20) == pytest.approx(0.35) and M.normalized_distance(None, 1, 5) is None
    with pytest.raises(ValueError):
        M.normalized_distance(1, 1, 0)
    # tie: 4 is equally far from 2 and 6 -> nearest distance 2 either way
    assert M.nearest_distance(4, [2, 6]) == 2 and M.nearest_distance(6, [2, 6]) == 0
    with pytest.raises(ValueError):
        M.nearest_distance(1, [])
    assert M.in_span(5, (4, 6)) and M.in_span(4, (4, 6)) and not M.in_span(7, (4, 6)) and not M.in_span(None, (0, 9))


def test_rates_means_and_empty_sets():
    assert M.rate([True, False, True, True]) == 0.75
    assert M.rate([]) is None and M.mean([]) is None and M.mean([None, None]) is None
    assert M.mean([1, None, 3]) == 2
    assert M.macro_f1([]) is None


def test_macro_f1_known_values():
    pairs = [("a", "a"), ("a", "b"), ("b", "b"), ("c", None)]
    per = M.per_class_prf(pairs)
    assert per["a"] == {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2}
    assert per["b"]["precision"] == 0.5 and per["b"]["recall"] == 1.0
    assert per["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert M.macro_f1(pairs) == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    # an explicit label set adds a never-seen class with F1 0
    assert M.macro_f1(pairs, labels=["a", "b", "c", "d"]) == pytest.approx((2 / 3 + 2 / 3) / 4)
    assert M.macro_f1([("a", "a"), ("b", "b")]) == 1.0


def test_span_prf_and_first_error():
    assert M.span_prf({1, 2}, {2, 3}) == (0.5, 0.5, 0.5)
    assert M.span_prf([4], [1, 4, 9]) == pytest.approx((1.0, 1 / 3, 0.5))
    assert M.span_prf([], []) == (1.0, 1.0, 1.0)
    assert M.span_prf([], [3]) == (0.0, 0.0, 0.0)
    assert M.span_prf([3], []) == (0.0, 1.0, 0.0)
    assert M.first_error_correct({3, 5}, {3, 9}) and not M.first_error_correct({5}, {3, 5})
    assert M.first_error_correct([], []) and not M.first_error_correct([], [2]) and not M.first_error_correct([2], [])


def test_earliest_and_terminal_with_ties():
    fails = [(6, "c"), (2, "a"), (2, "b")]
    assert M.earliest_categories(fails) == {"a", "b"}
    assert M.terminal_categories(fails) == {"c"}
    assert M.terminal_categories([(2, "a"), (2, "b")]) == {"a", "b"}
    assert M.earliest_categories([]) == set()


def test_agent_normalization_is_exact_not_substring():
    assert M.normalize_agent("Excel_Expert") == M.normalize_agent("excel expert") == "excel_expert"
    assert M.normalize_agent("Orchestrator (-> WebSurfer)") == "orchestrator"
    assert M.normalize_agent("Expert") != M.normalize_agent("Excel_Expert")
    assert M.normalize_agent(None) is None and M.normalize_agent("  ") is None


def test_bootstrap_is_seeded_and_sane():
    flags = [1.0] * 60 + [0.0] * 40
    a = M.bootstrap_ci(flags, resamples=2000, seed=3)
    assert a == M.bootstrap_ci(flags, resamples=2000, seed=3)
    lo, hi = a  # normal approximation: 0.6 ± 1.96 * 0.049
    assert 0.48 <= lo <= 0.53 and 0.67 <= hi <= 0.72
    assert M.bootstrap_ci([1.0] * 5) == (1.0, 1.0)
    assert M.bootstrap_ci([1.0]) is None and M.bootstrap_ci([]) is None


def test_expected_random_hit():
    ds = [1, 3, 5, 7]
    assert M.expected_random_hit(ds, 3) == 0.25
    assert M.expected_random_hit(ds, 3, 2) == 0.75
    assert M.expected_random_hit(ds, 4) == 0.0  # a user turn cannot be picked
    assert M.expected_random_hit([], 4) == 0.0


def _d(tid, step, cat="inconclusive", **kw):
    return Diagnosis(trajectory_id=tid, critical_step=step, category=cat, strategy="hand", **kw)


@pytest.fixture()
def gold():
    f = GoldFailure
    return GoldSet([
        GoldItem("a", 4, "invalid_invocation", "Assistant", tolerance_span=(3, 5), taxonomy="agentrx",
                 failures=(f(2, "instruction_adherence_failure"), f(2, "system_failure"), f(4, "invalid_invocation")),
                 error_steps=(2, 4), repair_rubrics=("retry with the item id",)),
        GoldItem("b", 10, "system_failure", "User", taxonomy="agentrx",
                 failures=(f(10, "system_failure"), f(12, "intent_not_supported")), error_steps=(10, 12),
                 repair_rubrics=("check the endpoint",)),
        GoldItem("c", 1, "underspecified_user_intent", "Assistant", taxonomy="agentrx",
                 failures=(f(1, "underspecified_user_intent"),), error_steps=(1,)),
        GoldItem("d", None, None, None, taxonomy="agentrx", problem="no root_cause.failure_id"),
    ], format="agentrx", source="hand-made", problems=["d: no root_cause.failure_id"])


def test_evaluate_hand_made(gold):
    preds = [
        _d("a", 5, "Invalid Invocation", agent="assistant", repair="retry"),  # in span, not exact; category ok
        _d("b", 10, "instruction_adherence_failure", agent="user", error_steps=(10, 11)),  # exact; category wrong
        _d("b", 3, "system_failure"),  # duplicate: ignored
        _d("zzz", 1),  # not in gold
    ]  # "c" has no prediction
    r = evaluate(gold, preds, resamples=200, seed=1)
    assert (r.n_gold, r.n_predictions, r.n_matched) == (4, 4, 2)
    assert r.metrics["step_exact"].value == pytest.approx(1 / 3) and r.metrics["step_exact"].n == 3
    assert r.value("step_within_1") == pytest.approx(2 / 3)
    assert r.value("cs_loose") == pytest.approx(2 / 3)
    assert r.value("step_distance_mean") == 0.5 and r.metrics["step_distance_mean"].n == 2
    assert r.value("step_exact_any_failure") == pytest.approx(1 / 3)
    assert r.value("category_critical") == pytest.approx(1 / 3)
    assert r.value("category_any") == pytest.approx(1 / 3)
    # b's earliest failure is system_failure, predicted instruction_adherence -> miss; a's earliest is a tie
    assert r.value("category_earliest") == 0.0
    assert r.value("category_terminal") == pytest.approx(1 / 3)
    assert r.value("agent_exact") == pytest.approx(2 / 3)
    assert r.value("diag") == pytest.approx(1 / 3)
    # span: a {5} vs {2,4} -> (0,0,0); b {10,11} vs {10,12} -> (.5,.5,.5); c missing -> (0,0,0)
    assert r.value("span_precision") == pytest.approx(0.5 / 3) and r.value("span_f1") == pytest.approx(0.5 / 3)
    assert r.value("first_error") == pytest.approx(1 / 3)
    assert r.metrics["rep_at_diag"].value is None and "needs an LLM grader and none is configured" in r.metrics["rep_at_diag"].note
    assert r.problems["missing_predictions"] == ["c", "d"]
    assert r.problems["unmatched_predictions"] == ["zzz (not in the gold set)"]
    assert r.problems["duplicate_predictions"] == ["b (2 predictions; the first was scored)"]
    assert r.problems["gold_without_critical_step"] == ["d: no root_cause.failure_id"]
    assert [m.key for m in r.misses] == ["a", "c"]
    assert r.confusion["system_failure"] == {"instruction_adherence_failure": 1}
    assert r.confusion["underspecified_user_intent"] == {"(none)": 1}
    assert r.expected_random is None and r.usage is None


def test_evaluate_repair_grading_and_usage(gold):
    class RubricWords:
        """Passes a repair when it contains the first word of every rubric."""

        def grade(self, repair, rubrics, *, gold):
            return all(r.split()[0] in repair for r in rubrics)

    preds = [_d("a", 4, "invalid_invocation", repair="retry the call", usage={"calls": 2, "input_tokens": 100}),
             _d("b", 10, "system_failure", repair="nothing", usage={"calls": 1, "input_tokens": 50, "model": "m"}),
             _d("c", 1, "underspecified_user_intent")]
    r = evaluate(gold, preds, grader=RubricWords(), resamples=100)
    assert r.value("diag") == 1.0
    assert r.value("rep_at_diag") == 0.5 and r.metrics["rep_at_diag"].n == 2
    assert r.value("fps") == 0.5 == r.value("diag") * r.value("rep_at_diag")
    assert r.usage == {"runs": 2, "totals": {"calls": 3, "input_tokens": 150}, "per_run": {"calls": 1.5, "input_tokens": 75.0}}
    assert r.value("rc_macro_f1") == 1.0


def test_report_serializes_and_renders(gold):
    r = evaluate(gold, [_d("a", 4, "invalid_invocation")], resamples=50)
    d = r.to_dict()
    assert d["metrics"]["step_exact"]["value"] == pytest.approx(1 / 3) and d["misses"] == ["b", "c"]
    md = r.to_markdown()
    assert "| Exact step (= CS-Strict) | 33.3% |" in md and "missing predictions (3): b; c; d" in md


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


_CATS = ["invalid_invocation", "system_failure", "intent_not_supported"]


@st.composite
def _cases(draw):
    n = draw(st.integers(1, 8))
    gold, preds = [], []
    for i in range(n):
        k = draw(st.integers(0, 30))
        lo, hi = draw(st.integers(0, k)), draw(st.integers(k, 35))
        cat = draw(st.sampled_from(_CATS))
        extra = draw(st.lists(st.tuples(st.integers(0, 35), st.sampled_from(_CATS)), max_size=2))
        fails = (GoldFailure(k, cat), *(GoldFailure(s, c) for s, c in extra))
        gold.append(GoldItem(str(i), k, cat, "A", tolerance_span=(lo, hi), taxonomy="agentrx", failures=fails,
                             error_steps=tuple(sorted({f.step for f in fails}))))
        if draw(st.booleans()):
            preds.append(_d(str(i), draw(st.none() | st.integers(0, 40)), draw(st.sampled_from(_CATS)),
                            agent=draw(st.sampled_from(["A", "a", "B", None]))))
    return GoldSet(gold), preds


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_metric_invariants(case):
    gold, preds = case
    r = evaluate(gold, preds, resamples=20)
    v = r.value
    assert v("step_exact") <= v("step_within_1") <= v("step_within_3") <= v("step_within_5")
    assert v("step_exact") <= v("cs_loose") and v("diag") <= min(v("cs_loose"), v("category_critical"))
    assert v("category_critical") <= v("category_any")
    for key in ("rc_macro_f1", "span_precision", "span_recall", "span_f1", "agent_exact"):
        assert 0.0 <= v(key) <= 1.0
    lo, hi = r.metrics["step_exact"].ci or (v("step_exact"),) * 2
    assert lo <= v("step_exact") <= hi
    assert len(r.misses) == round((1 - v("step_exact")) * len(gold))
    perfect = [_d(g.key, g.critical_step, g.category, agent=g.agent) for g in gold.values()]
    p = evaluate(gold, perfect, resamples=5)
    assert all(p.value(k) == 1.0 for k in ("step_exact", "cs_loose", "category_critical", "category_any", "diag",
                                            "agent_exact", "rc_macro_f1", "step_exact_any_failure"))


def test_a_few_unmatched_predictions_stay_a_note(tau_file, tmp_path):
    pred = _jsonl(tmp_path / "p.jsonl", [
        {"trajectory_id": "47", "file": str(tau_file), "record": 13, "critical_step": 18, "strategy": "x"},
        {"trajectory_id": "80", "file": str(tau_file), "record": 21, "critical_step": 25, "strategy": "x"},
        {"trajectory_id": "9999", "critical_step": 1, "strategy": "x"}])
    rep = evaluate(load_gold(tau_file.parent / "ground_truth.json"), [json.loads(x) for x in pred.read_text().split("\n")
                                                                      if x], resamples=10)
    assert rep.n_matched == 2 and "pairing" not in rep.problems
    assert rep.problems["unmatched_predictions"] == ["9999 (not in the gold set)"]


def test_negative_step_never_earns_a_tolerance_credit(tmp_path):
    gold = load_gold(_jsonl(tmp_path / "g.jsonl", [{"id": "a", "critical_step": 0, "n_steps": 4}]))
    # without check_step_ranges (library callers): -1 is 1 away from 0 but names no message
    rep = evaluate(gold, [{"trajectory_id": "a", "critical_step": -1}], resamples=10)
    assert rep.metrics["step_within_1"].value == 0
    assert rep.problems["predictions"] == ["a: critical_step -1 is negative (counted wrong)"]
    # the range check clears it even when the run's length is unknown
    (d,), warnings = check_step_ranges(
        [Diagnosis.from_dict({"trajectory_id": "b", "critical_step": -3})], gold)
    assert d.critical_step is None
    assert warnings == ["run b: critical_step -3 is outside the run (valid: 0 or more; steps are 0-based message "
                        "indexes); scored as wrong"]
