"""What the HTML report holds of a run: basis, short rationale, merged evidence, expressions apart."""

from __future__ import annotations

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.trace.ir import Source, Step, Trajectory
from trajaudit.engine.validation_log import Evidence, Record, ValidationLog
from trajaudit.report.rundata import basis_of, detail, short_rationale, summary


def _diag(**kw):
    base = {"trajectory_id": "r1", "critical_step": 1, "category": "invalid_invocation", "strategy": "offline",
            "confidence": 0.8, "rationale": "earliest unrecovered error-level failure: step 1 (a). more text here."}
    return Diagnosis(**{**base, **kw})


def test_basis_from_the_field_or_derived():
    assert basis_of({"basis": "weak", "rationale": "fallback: …"}) == "weak"  # the field wins
    assert basis_of(_diag()) == "finding"
    assert basis_of(_diag(rationale="no rule or claim evidence; fallback: the first consequential action")) == "fallback"
    assert basis_of(_diag(rationale="baseline: last decision step", confidence=0.0)) == "fallback"
    assert basis_of(_diag(rationale="x", evidence=(Evidence("steps.0", "v", "first action"),))) == "fallback"
    assert basis_of(_diag(rationale="no error-level failure; strongest weaker finding: step 5")) == "weak"
    assert basis_of(_diag(confidence=0.1)) == "weak"


def test_short_rationale_is_the_first_sentence():
    assert short_rationale("earliest unrecovered error-level failure: step 4 (V). claims.x (error) at steps.4: …") \
        == "earliest unrecovered error-level failure: step 4 (V)."
    long = "word " * 80
    cut = short_rationale(long, limit=60)
    assert len(cut) <= 60 and cut.endswith("…")


def test_violations_grouped_with_titles_values_and_expressions_apart():
    steps = (Step(index=0, kind="user", role="user", content="hi"),
             Step(index=1, kind="agent", role="assistant", agent="a", content="x \u202e y"))
    t = Trajectory(id="r1", steps=steps, source=Source(format="openai", file="r1.json"))
    expr = 'no match: (exists d in earlier where ((d.kind == "agent")))'
    recs = [Record(1, "claims.missing-support", "fail", "error", message=f"number '{n}' unsupported",
                   evidence=(Evidence(f"steps.1.content[{i}:{i + 2}]", n, "number claim"),))
            for i, n in enumerate(["12", "15", "12"])]
    recs.append(Record(1, "generic.p.rule", "fail", "warning", message="m",
                       evidence=(Evidence("steps.1", "v", expr), Evidence("steps.1", "v", expr))))
    recs.append(Record(0, "generic.p.rule", "pass", "warning"))
    log = ValidationLog("r1", records=recs)
    d = _diag(evidence=(Evidence("steps.1", "q", "o"), Evidence("steps.1", "q", "o"), Evidence("steps.1", "q", expr)))
    det = detail(t, d, log, titles={"generic.p.rule": "A readable title"})
    viol = {v["r"]: v for v in det["viol"]}
    ms = viol["claims.missing-support"]
    assert ms["title"] == "Missing support" and ms["n"] == 3 and ms["vals"] == ["12", "15"]
    assert ms["msgs"] == ["number '12' unsupported", "number '15' unsupported"]
    g = viol["generic.p.rule"]
    assert g["title"] == "A readable title" and g["vals"] == [] and g["expr"] == [expr]  # the expression apart
    (ev,) = det["ev"]  # three items of one address and value merged
    assert ev["n"] == 3 and ev["notes"] == [] and ev["expr"] == ["bound to o", expr]
    assert det["steps"][1]["x"] == "x ⟨U+202E⟩ y"  # control/bidi characters by name
    row = summary(t, d, log)
    assert row["rules"] == ["claims.missing-support", "generic.p.rule"] and row["nviol"] == 4
    assert row["basis"] == "finding" and row["rat"] == "earliest unrecovered error-level failure: step 1 (a)."
