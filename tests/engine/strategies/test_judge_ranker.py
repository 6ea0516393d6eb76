"""The offline judge as a fitted ranker (issue 17): features, weights file, fitting, LODO, calibration,
basis, the `judge fit` command. Synthetic runs only (no dev data)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.judge_features import FEATURES, FeatureTable, features
from trajaudit.engine.strategies.judge_weights import (
    Calibration,
    JudgeWeights,
    JudgeWeightsError,
    load_weights,
    shipped_weights,
)
from trajaudit.engine.strategies.offline_judge import OfflineJudge
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory
from trajaudit.engine.validation_log import Evidence, Record
from trajaudit.eval.calibration import reliability
from trajaudit.eval.fit import LabelledRun, fit_calibration, fit_judge, fit_ranker, folds, predict

pytest.importorskip("sklearn")

ROOT = Path(__file__).resolve().parents[3]


def _run(rid: str, n_agent: int, planted: int | None, seed: int) -> tuple[Trajectory, list[Record]]:
    """A chat of ``n_agent`` agent turns (with tool calls and outputs) and a synthetic validation log:
    a planted error-level finding at agent turn ``planted`` plus random warning noise elsewhere."""
    rng = random.Random(seed)
    steps = [Step(0, "system", "system", "You are a helpful agent."), Step(1, "user", "user", f"task {rid}")]
    agent_steps = []
    for j in range(n_agent):
        i = len(steps)
        steps.append(Step(i, "agent", "assistant", f"step {j} of run {rid}: looking up item {j}", "assistant",
                          (ToolCall("get_item", {"id": f"{rid}-{j}"}, f"c{j}"),)))
        agent_steps.append(i)
        steps.append(Step(i + 1, "tool", "tool", '{"ok": true}', tool_output=ToolOutput(f"c{j}", "get_item", False)))
    steps.append(Step(len(steps), "agent", "assistant", f"done with {rid}", "assistant"))
    agent_steps.append(len(steps) - 1)
    t = Trajectory(id=rid, steps=tuple(steps), source=Source("openai", file=f"{rid}.json"))
    recs = []
    for k in agent_steps:
        if rng.random() < 0.3:
            recs.append(Record(step=k, rule_id="synthetic.noise", verdict="fail", severity="warning",
                               targets=("intent_plan_misalignment",), evidence=(Evidence(f"steps.{k}"),)))
    if planted is not None:
        k = agent_steps[planted]
        recs.append(Record(step=k, rule_id="synthetic.planted", verdict="fail", severity="error",
                           rule_type="RELATIONAL_POST", targets=("invalid_invocation",),
                           evidence=(Evidence(f"steps.{k}"),)))
    recs.sort(key=lambda r: r.step)
    return t, recs


def _labelled(dataset: str, n: int, seed: int) -> list[LabelledRun]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        n_agent = rng.randint(4, 9)
        gold = rng.randrange(n_agent)
        t, recs = _run(f"{dataset}{i}", n_agent, gold, seed * 1000 + i)
        table = features(t, recs, None)
        gold_step = [s.index for s in t.steps if s.is_decision][gold]
        out.append(LabelledRun(dataset, t.id, table, table.index_of(gold_step), "assistant"))
    return out


def test_feature_rows_match_the_feature_list_and_name_nothing_specific():
    t, recs = _run("r", 5, 2, 0)
    table = features(t, recs, None)
    assert [c.step for c in table.candidates] == [s.index for s in t.decision_steps]
    assert all(len(row) == len(FEATURES) for row in table.rows)
    planted = table.candidates[table.index_of([s.index for s in t.decision_steps][2])]
    row = dict(zip(FEATURES, planted.features, strict=True))
    assert row["error_unrecovered"] == pytest.approx(math.log(2)) and row["first_error_step"] == 1.0
    assert row["type_relational_post"] > 0 and planted.basis == "finding"
    # feature names are general properties: no dataset, framework, agent or tool vocabulary
    banned = ("tau", "retail", "who", "when", "magentic", "autogen", "assistant", "orchestrator", "websurfer", "get_")
    assert not [f for f in FEATURES if any(b in f for b in banned)]


def test_fit_recovers_a_planted_signal_and_scores_the_right_held_out_set():
    runs = _labelled("a", 40, 1) + _labelled("b", 40, 2)
    scheme_name, scheme = folds(runs)
    assert scheme_name == "leave-one-dataset-out"
    assert [(label, {runs[i].dataset for i in test}, {runs[i].dataset for i in train}) for label, train, test in scheme] \
        == [("a", {"a"}, {"b"}), ("b", {"b"}, {"a"})]
    result = fit_judge(runs, grid=(0.01, 1.0))
    w = result.weights.weights
    assert w["error_unrecovered"] > 0 and w["error_unrecovered"] > abs(w["warning_unrecovered"])
    summary = result.summary()
    assert set(summary["heldout"]) == {"a", "b"}
    assert all(f["exact"] >= 0.9 for f in summary["heldout"].values())  # the planted error is found on unseen sets
    # a weights file fitted on set a alone ranks set b as well
    wa = fit_ranker([r for r in runs if r.dataset == "a"], 0.01)
    assert sum(predict(wa, r).correct for r in runs if r.dataset == "b") >= 36


def test_single_dataset_uses_k_fold():
    runs = _labelled("only", 12, 3)
    name, scheme = folds(runs, k=4)
    assert name == "4-fold" and sorted(i for _, _, test in scheme for i in test) == list(range(12))
    assert all(not set(train) & set(test) for _, train, test in scheme)


def test_the_tuning_lines_say_they_average_the_folds_rates():
    """The per-C lines give the mean of the folds' rates (what chooses C); the summary's one-data-set row
    pools every held-out run. With folds of unequal sizes the two differ, so each line says which it is."""
    runs = _labelled("only", 7, 3)
    said: list[str] = []
    result = fit_judge(runs, grid=(0.01,), k=3, on_step=said.append)
    folds_ = result.grid[0.01]
    assert sorted(f["runs"] for f in folds_.values()) == [2, 2, 3]
    mean = [sum(f[k] for f in folds_.values()) / 3 for k in ("exact", "within3")]
    assert said == [f"C=0.01: held-out exact {mean[0]:.1%}, ±3 {mean[1]:.1%} (mean of the 3 folds' rates)"]
    pooled = result.summary()["heldout"]["all"]
    assert pooled["runs"] == 7 and pooled["exact"] == sum(p.correct for p in result.heldout) / 7
    two = _labelled("a", 4, 1) + _labelled("b", 4, 2)
    said.clear()
    fit_judge(two, grid=(0.01,), on_step=said.append)
    assert said[0].endswith("(mean of the 2 data sets' rates)")


def test_weights_file_round_trips_and_bad_files_name_themselves(tmp_path):
    w = JudgeWeights(weights={"error_unrecovered": 1.5, "position": -0.25}, intercept=-2.0,
                     calibration=Calibration(0.8, 0.3, -0.1), fit={"C": 0.01})
    p = tmp_path / "w.json"
    w.save(p)
    back = load_weights(p)
    assert back.weights == w.weights and back.intercept == -2.0 and back.calibration == w.calibration
    assert back.fit == {"C": 0.01} and back.source == str(p)
    assert json.loads(p.read_text())["format"] == "trajaudit-judge-weights"
    bad = tmp_path / "bad.json"
    for text, needle in [("{", "not JSON"), (json.dumps({"format": "x", "version": 1, "weights": {}}), "format"),
                         (json.dumps({"format": "trajaudit-judge-weights", "version": 1, "weights": {"nope": 1}}),
                          "unknown feature"),
                         (json.dumps({"format": "trajaudit-judge-weights", "version": 1, "weights": {"position": "x"}}),
                          "weights/position")]:
        bad.write_text(text)
        with pytest.raises(JudgeWeightsError) as e:
            load_weights(bad)
        assert str(bad) in str(e.value) and needle in str(e.value)
    with pytest.raises(JudgeWeightsError, match="cannot read"):
        load_weights(tmp_path / "missing.json")


def test_shipped_weights_are_valid_json_never_pickle():
    w = shipped_weights()
    assert set(w.weights) <= set(FEATURES) and w.fit["scheme"] == "leave-one-dataset-out"
    for path in list((ROOT / "trajaudit").rglob("*")) + list((ROOT / "benchmarks").rglob("*.py")):
        assert path.suffix not in (".pkl", ".pickle", ".joblib")
        if path.suffix == ".py":
            text = path.read_text(encoding="utf-8")
            # nothing is ever read back from pickle (a weights file or any other input); the Dask runner only
            # hashes a spec with pickle.dumps to key its per-worker context cache
            assert "pickle.load" not in text and "joblib" not in text, path


def test_calibration_maps_scores_to_probabilities_and_reliability_measures_it():
    rng = random.Random(0)
    runs = _labelled("c", 30, 5)
    preds = [predict(fit_ranker(runs, 0.01), r) for r in runs]
    for p in preds:  # make half of them wrong at low margins
        if rng.random() < 0.5:
            p.margin, p.score = 0.0, p.score - 3
            p.pick = (p.pick + 1) % len(p.run.table.candidates)
    cal = fit_calibration(preds)
    assert cal.score_coef > 0 or cal.margin_coef > 0  # a larger score or margin means more likely right
    assert 0.0 <= cal.probability(-50, 0) < cal.probability(50, 5) <= 1.0
    rel = reliability([(0.9, True), (0.9, True), (0.1, False), (0.1, True)], bins=10)
    assert rel["n"] == 4 and rel["accuracy"] == 0.75
    assert rel["ece"] == pytest.approx(0.5 * 0.1 + 0.5 * 0.4)
    assert rel["accuracy_at_50"] == 1.0 and [b["n"] for b in rel["table"]] == [2, 2]
    assert reliability([])["ece"] is None
    with pytest.raises(ValueError):
        reliability([(float("nan"), True)])


def _ctx(weights: JudgeWeights | None = None) -> AuditContext:
    return AuditContext(extra={"judge_weights": weights} if weights else {})


def test_basis_is_present_consistent_and_in_the_schema(monkeypatch):
    from trajaudit.engine.schema import schema_errors
    from trajaudit.engine.strategies import offline_judge as jm
    from trajaudit.engine.validation_log import ValidationLog

    t, recs = _run("b1", 5, 3, 7)

    class Bundle:
        def __init__(self, records):
            self.log = ValidationLog("b1", records)
            self.error_steps = ()
            self.graph = None

    bundle = Bundle(recs)
    d = OfflineJudge().diagnose(t, bundle, AuditContext())
    assert d.basis == "finding" and d.critical_step == [s.index for s in t.decision_steps][3]
    assert d.category == "invalid_invocation" and 0.0 < d.confidence < 1.0
    assert not schema_errors("diagnosis", d.to_dict())
    assert Diagnosis.from_dict(d.to_dict()).basis == "finding"
    warn_only = [r for r in recs if r.severity == "warning"] or [
        Record(step=2, rule_id="w", verdict="fail", severity="warning", targets=("system_failure",))]
    bundle = Bundle(warn_only)
    only_warning = OfflineJudge(jm.JudgeSettings(weights=JudgeWeights({"warning_unrecovered": 5.0}))).diagnose(t, bundle, AuditContext())
    assert only_warning.basis == "weak" and only_warning.category != "inconclusive"
    bundle = Bundle([])
    none = OfflineJudge().diagnose(t, bundle, AuditContext())
    assert none.basis == "fallback" and "fallback" in none.rationale
    # a fallback's category and agent agree: underspecified user intent names the user
    if none.category == "underspecified_user_intent":
        assert none.agent == "user"
    else:
        assert none.agent == t.steps[none.critical_step].agent
    with pytest.raises(Exception, match="basis"):
        Diagnosis.from_dict({**d.to_dict(), "basis": "guess"})
    assert schema_errors("diagnosis", {**d.to_dict(), "basis": "guess"})


def test_fallback_in_a_dialogue_names_the_user(monkeypatch):
    from trajaudit.engine.strategies import offline_judge as jm
    from trajaudit.engine.validation_log import ValidationLog

    steps = (Step(0, "user", "user", "hi, cancel my order"),
             Step(1, "agent", "assistant", "Which order?", "assistant"),
             Step(2, "user", "user", "the pending one"),
             Step(3, "agent", "assistant", "", "assistant", (ToolCall("cancel_order", {"id": "1"}, "c1"),)),
             Step(4, "tool", "tool", "ok", tool_output=ToolOutput("c1", "cancel_order", False)),
             Step(5, "agent", "assistant", "Cancelled.", "assistant"))
    t = Trajectory(id="dlg", steps=steps, source=Source("openai"))

    class Bundle:
        log = ValidationLog("dlg", [])
        error_steps = ()
        graph = None

    bundle = Bundle()
    w = JudgeWeights({"first_consequential_action": 3.0})
    d = OfflineJudge(jm.JudgeSettings(weights=w)).diagnose(t, bundle, AuditContext())
    assert (d.critical_step, d.basis, d.category, d.agent) == (3, "fallback", "underspecified_user_intent", "user")
    d2 = OfflineJudge(jm.JudgeSettings(weights=w, user_prior=False)).diagnose(t, bundle, AuditContext())
    assert (d2.category, d2.agent) == ("intent_plan_misalignment", "assistant")


def test_weights_decide_the_ranking():
    t, recs = _run("w", 6, None, 3)
    table = features(t, [], None)
    last = JudgeWeights({"last_decision": 2.0})
    first = JudgeWeights({"first_decision": 2.0})
    assert table.candidates[last.rank(table)[0][0]].step == t.decision_steps[-1].index
    assert table.candidates[first.rank(table)[0][0]].step == t.decision_steps[0].index
    assert isinstance(table, FeatureTable) and last.confidence(last.rank(table)) == pytest.approx(
        1 / (1 + math.exp(-(2.0 + 0.0 * 2.0))))


def _write_synthetic_set(folder: Path, n: int, seed: int) -> Path:
    """Runs as OpenAI chat files whose planted failure is a tool error the agent never recovers from,
    and a generic gold JSONL naming that step."""
    rng = random.Random(seed)
    folder.mkdir()
    gold = []
    for i in range(n):
        msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": f"task {i}"}]
        k_fail = rng.randint(1, 3)
        for j in range(5):
            msgs.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{j}", "type": "function", "function": {"name": f"lookup_{j}", "arguments": json.dumps({"q": j})}}]})
            if j == k_fail:
                crit = len(msgs) - 1
                msgs.append({"role": "tool", "tool_call_id": f"c{j}", "content": "Error: internal server error"})
            else:
                msgs.append({"role": "tool", "tool_call_id": f"c{j}", "content": json.dumps({"value": j})})
        msgs.append({"role": "assistant", "content": "I could not finish."})
        (folder / f"run{i}.json").write_text(json.dumps({"messages": msgs}))
        gold.append({"id": f"run{i}", "file": f"run{i}.json", "critical_step": crit})
    g = folder.parent / f"{folder.name}_gold.jsonl"
    g.write_text("".join(json.dumps(x) + "\n" for x in gold))
    return g


def test_cli_judge_fit_end_to_end_then_audit_with_the_weights(tmp_path):
    ga = _write_synthetic_set(tmp_path / "teamA", 8, 1)
    gb = _write_synthetic_set(tmp_path / "teamB", 8, 2)
    out = tmp_path / "w.json"
    runner = CliRunner()
    r = runner.invoke(main, ["judge", "fit", str(tmp_path / "teamA"), str(tmp_path / "teamB"), "--gold", str(ga),
                             "--gold", str(gb), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert "leave-one-dataset-out" in r.output and "teamA" in r.output and "teamB" in r.output and "ECE" in r.output
    w = load_weights(out)
    assert w.fit["scheme"] == "leave-one-dataset-out" and {d["label"] for d in w.fit["data"]} == {"teamA", "teamB"}
    diag = tmp_path / "d.jsonl"
    r = runner.invoke(main, ["audit", str(tmp_path / "teamA"), "--judge-weights", str(out), "-o", str(diag), "-q"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in diag.read_text().splitlines()]
    assert len(rows) == 8 and all(x["basis"] in ("finding", "weak", "fallback") for x in rows)
    assert all(x["metadata"]["weights"] == str(out) for x in rows)
    # one data set: k-fold
    r = runner.invoke(main, ["judge", "fit", str(tmp_path / "teamA"), "--gold", str(ga), "-o", str(tmp_path / "k.json"),
                             "--folds", "4", "-q"])
    assert r.exit_code == 0 and "4-fold" in r.output, r.output
    assert "all: the held-out runs of every fold pooled (the C= lines above give the mean of the folds' rates" \
        in " ".join(r.output.split())
    # eval with the weights prints the reliability table
    r = runner.invoke(main, ["eval", str(tmp_path / "teamB"), "--gold", str(gb), "-s", "offline", "--judge-weights",
                             str(out), "--misses", "0"])
    assert r.exit_code == 0, r.output
    assert "Reliability" in r.output and "ECE" in r.output and "50% coverage" in r.output


def test_cli_bad_weights_file_is_named(tmp_path):
    ga = _write_synthetic_set(tmp_path / "teamA", 2, 1)
    bad = tmp_path / "bad_weights.json"
    bad.write_text(json.dumps({"format": "trajaudit-judge-weights", "version": 1, "weights": {"nope": 1.0}}))
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "teamA"), "--judge-weights", str(bad), "-o",
                                  str(tmp_path / "d.jsonl"), "-q"])
    assert r.exit_code == 2 and "bad_weights.json" in r.output and "unknown feature" in r.output
    trace_list = tmp_path / "not_weights.json"  # a large document of another kind: the error quotes a part of it
    trace_list.write_text(json.dumps([{"task_id": i, "messages": ["x" * 100] * 5} for i in range(50)]))
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "teamA"), "--judge-weights", str(trace_list), "-o",
                                  str(tmp_path / "d.jsonl"), "-q"])
    assert r.exit_code == 2 and "not_weights.json: not a valid judge weights file at (top level)" in r.output
    assert len(r.output) < 600, len(r.output)
    r = CliRunner().invoke(main, ["judge", "fit", str(tmp_path / "teamA"), "--gold", str(ga), "--gold", str(ga),
                                  "--gold", str(ga), "-o", str(tmp_path / "x.json")])
    assert r.exit_code == 2 and "one --gold" in r.output


def test_audit_spec_loads_weights_from_a_path(tmp_path):
    p = tmp_path / "w.json"
    JudgeWeights({"last_decision": 1.0}).save(p)
    ctx = build_context(AuditSpec(judge_weights=str(p)))
    assert ctx.strategy_options["offline"]["judge_weights"].weights == {"last_decision": 1.0}
