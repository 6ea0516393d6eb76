"""trajaudit/run_budget.py, robustness class 12: a rule whose z3 question cannot be decided costs its 2 s solver limit at every guarded
step (84 s for a run of 40 agent steps, over an hour for 2,500).

Now rule evaluation has a per-run time budget (``--run-timeout``, ``AuditConfig.run_timeout``,
default ``DEFAULT_RUN_TIMEOUT``); z3 queries take at most what is left of it; when it is used up the
checks left are ``unknown`` ("run time budget … exceeded") and the diagnosis is marked degraded."""

from __future__ import annotations

import json
import math
import random

import pytest
from hostile_kit import cli, diagnoses, good_run, snapshot, write_json

from trajaudit import compile_rules, load, load_pack, run_budget
from trajaudit.checkers.relational import SOLVER_TIMEOUT_MS
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.validation.rule_eval import evaluate


def _hard_pack(tmp_path):
    """A rule asking z3 an undecidable-in-time subset sum (60 large even integers, an odd target that
    depends on the step, so it is not folded when the pack compiles) at every agent step."""
    rng = random.Random(1)
    vals = [rng.randint(10**8, 10**9) * 2 for _ in range(60)]
    pack = tmp_path / "slow.yaml"
    pack.write_text("pack: slow\nrules:\n  - id: undecidable\n    type: RELATIONAL_POST\n    severity: warning\n"
                    "    guard: step.kind == 'agent'\n"
                    f"    assert: subset_sum({json.dumps(vals)}, step.index * 2 + {sum(vals[:30]) + 1}) == null\n"
                    "    message: m\n  - id: later\n    type: PROTOCOL\n    guard: step.kind == 'agent'\n"
                    "    assert: step.index >= 0\n")
    return pack


def _long_run(tmp_path):
    run = good_run("long")
    for i in range(20):  # 20 more agent steps
        run["messages"].insert(-1, {"role": "assistant", "content": f"Still checking, {i}."})
    return write_json(tmp_path / "long.json", run)


def test_the_budget_stops_evaluation_and_marks_the_diagnosis(tmp_path):
    pack, run = _hard_pack(tmp_path), _long_run(tmp_path)
    out = tmp_path / "d.jsonl"
    before = snapshot(tmp_path)
    r = cli("audit", run, "--rules", pack, "--no-default-packs", "--run-timeout", "0.5", "-q", "-o", out)
    assert r.exit_code == 0, r.output
    assert {k: v for k, v in snapshot(tmp_path).items() if k != str(out)} == before
    (d,) = diagnoses(out)
    (note,) = d["metadata"]["degraded"]
    assert note.startswith("run time budget of 0.5 s exceeded (--run-timeout) at rule slow.undecidable")
    assert "1 later rule(s) (1 with candidate steps) not evaluated" in note


def test_remaining_checks_are_unknown_and_z3_time_counts(tmp_path):
    t = load(_long_run(tmp_path))
    rules = compile_rules(load_pack(str(_hard_pack(tmp_path))))
    log = evaluate(t, rules, config=AuditConfig(run_timeout=0.3))
    budget = [r for r in log.records if r.reason and r.reason.startswith("run time budget of 0.3 s exceeded")]
    assert {r.rule_id for r in budget} == {"slow.undecidable", "slow.later"}
    assert all(r.verdict == "unknown" for r in budget)
    assert len([r for r in log.records if r.rule_id == "slow.undecidable"]) < len(t.decision_steps)
    with run_budget.deadline(0.25):
        assert 0 < run_budget.remaining_ms(SOLVER_TIMEOUT_MS) <= 250  # z3 gets what is left, not 2 s
    assert run_budget.remaining_ms(SOLVER_TIMEOUT_MS) == SOLVER_TIMEOUT_MS  # no budget open: its own limit


def test_no_budget_hit_leaves_the_diagnosis_unmarked(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    out = tmp_path / "d.jsonl"
    assert cli("audit", run, "-q", "-o", out).exit_code == 0
    assert "degraded" not in diagnoses(out)[0]["metadata"]
    assert AuditConfig().run_timeout == run_budget.DEFAULT_RUN_TIMEOUT


# Fresh-user pass: the Python API took any run_timeout — AuditConfig(run_timeout=nan) and inf meant no
# budget at all, 0 and -1 were accepted — where the CLI's --run-timeout refuses them (options.RunTimeout).
# AuditConfig now checks the field against the same range (run_budget.check_run_timeout).

# A huge int (10**400) raised OverflowError from float(); 1e-320 (a denormal) was accepted and echoed
# as "9.99989e-321 s". Both are refused with the ValueError naming the field; a microsecond is the least.

@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0, 0.0, -1, 86400.5, 10**400, -10**400, 1e-320,
                                 9e-7])
def test_audit_config_refuses_a_run_timeout_out_of_range(bad):
    with pytest.raises(ValueError, match=r"AuditConfig\.run_timeout must be a number of seconds from 1e-06 to "
                                         r"86400, or None for no budget \(default 60\); got "):
        AuditConfig(run_timeout=bad)
    assert AuditConfig(run_timeout=1e-6).run_timeout == 1e-6


def test_audit_config_names_a_huge_integer_run_timeout_by_its_size():
    with pytest.raises(ValueError, match=r"AuditConfig\.run_timeout must be .*; got an integer of 16610 bits$"):
        AuditConfig(run_timeout=10**5000)  # its repr() would raise (more than 4300 digits)


def test_audit_config_takes_a_run_timeout_in_range_or_none():
    assert AuditConfig(run_timeout=None).run_timeout is None
    assert AuditConfig(run_timeout=2).run_timeout == 2.0 and isinstance(AuditConfig(run_timeout=2).run_timeout, float)
    assert AuditConfig(run_timeout=86400).run_timeout == 86400.0
    for bad in ("60", True):
        with pytest.raises(TypeError, match=r"AuditConfig\.run_timeout must be a number of seconds or None"):
            AuditConfig(run_timeout=bad)
