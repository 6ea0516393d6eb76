"""`audit --jobs`: worker results equal the serial ones (fork: runs inherited, not shipped; spawn:
runs shipped as dicts), logs shipped as rows; the strategy registry builds LLM strategies lazily."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest

from trajaudit import load_path
from trajaudit.engine.run import parallel as parallel_mod
from trajaudit.engine.run.batch import audit_trajectories
from trajaudit.engine.run.pipeline import AuditSpec
from trajaudit.engine.strategies.registry import LLM_STRATEGIES, default_strategies
from trajaudit.engine.validation_log import Evidence, LazyRecord, Record, ValidationLog
from trajaudit.registry import Registry


def _same(serial, parallel):
    assert [r.trajectory.id for r in serial.results] == [r.trajectory.id for r in parallel.results]
    for a, b in zip(serial.results, parallel.results, strict=True):
        assert a.diagnosis.to_dict() == b.diagnosis.to_dict()
        assert a.log == b.log and a.log.to_dict() == b.log.to_dict()
        assert a.claims == b.claims


def test_forked_workers_give_the_serial_results(tau_file):
    runs = load_path(tau_file).trajectories
    spec = AuditSpec(tools=str(tau_file.parent / "tools.json"))
    serial = audit_trajectories(runs, spec)
    parallel = audit_trajectories(runs, spec, jobs=2)
    assert len(serial.results) == 29 and not parallel.problems
    assert sum(len(r.log.violations()) for r in serial.results) > 29  # failures and passes both travel
    # the workers' pass records came without evidence (run 0 was audited in the parent): derived on read
    shipped_bare = [rec for r in parallel.results[1:] for rec in r.log.records
                    if isinstance(rec, LazyRecord) and not rec.rendered]
    assert len(shipped_bare) > 28 * 100
    assert all(rec.verdict == "pass" and rec.origin == "rules" for rec in shipped_bare)
    _same(serial, parallel)
    assert all(rec.rendered for rec in shipped_bare)


def test_spawned_workers_get_the_runs_as_dicts_and_give_the_serial_results(tau_file, monkeypatch):
    if "spawn" not in multiprocessing.get_all_start_methods():
        pytest.skip("no spawn start method on this platform")
    runs = load_path(tau_file).trajectories[:2]
    shipped = []
    real = parallel_mod.Trajectory.to_dict
    monkeypatch.setattr(parallel_mod.Trajectory, "to_dict", lambda self: shipped.append(self.id) or real(self))
    spawn = multiprocessing.get_context("spawn")
    monkeypatch.setattr(parallel_mod.multiprocessing, "get_context", lambda: spawn)
    parallel = audit_trajectories(runs, AuditSpec(), jobs=2)
    assert shipped == [r.id for r in runs]
    monkeypatch.undo()
    _same(audit_trajectories(runs, AuditSpec()), parallel)


def test_log_rows_round_trip_keeps_every_field_and_type():
    lazy = LazyRecord(3, "p.lazy", "pass", "warning", "PROVENANCE", ("x",), "t",
                      thunk=lambda: ((Evidence("steps.3.content", ("a", 1), "seen"),), {"v": [1, 2]}))
    log = ValidationLog("run-1", [
        Record(1, "p.fail", "fail", "error", "PROTOCOL", ("a", "b"), "boom",
               (Evidence("steps.1", {"k": 1.5}), Evidence("steps.0.content[0:4]", None, "n")), {"n": 2}),
        lazy,
        Record(4, "p.unknown", "unknown", reason="budget", origin="claims"),
    ], skipped=7, incomplete=["cut"])
    back = ValidationLog.from_rows(log.to_rows())
    assert back == log and back.skipped == 7 and back.incomplete == ["cut"]
    assert back.records[1].evidence[0].value == ("a", 1)  # a tuple stays a tuple (to_dict would list it)
    assert back.records[0].evidence[0].value == {"k": 1.5} and back.records[2].reason == "budget"


def test_log_rows_ship_deferred_pass_records_bare_and_derive_them_on_read():
    def lazy(step, ev):
        return LazyRecord(step, "p.r", "pass", thunk=lambda: ((Evidence(f"steps.{step}", ev),), {"x": ev}))
    log = ValidationLog("run-2", [lazy(1, "a"), Record(2, "p.r", "fail", message="m"), lazy(3, "b"),
                                  lazy(4, "c")])
    _ = log.records[3].evidence  # rendered already: travels with its evidence
    rows = log.to_rows(deferred={"p.r"})
    assert [r[7] is None for r in rows[3]] == [True, False, True, False]
    assert [r[8] for r in rows[3] if r[7] is None] == [0, 2]  # ordinals among the rule's records
    with pytest.raises(ValueError, match="run-2: record p.r at step 1 has no evidence to derive"):
        ValidationLog.from_rows(rows)
    asked = []
    back = ValidationLog.from_rows(rows, lambda rid, k, step: asked.append((rid, k, step)) or log.records[k]._force())
    assert asked == [] and back == log and asked == [("p.r", 0, 1), ("p.r", 2, 3)]


def test_llm_strategies_are_listed_without_being_imported():
    code = ("import sys\n"
            "from trajaudit.engine.strategies.registry import default_strategies\n"
            "reg = default_strategies()\n"
            "assert 'hybrid' in reg and len(reg) == 12, list(reg)\n"
            "assert reg.get('offline').name == 'offline'\n"
            "print(any(m.startswith('trajaudit.engine.strategies.llm') for m in sys.modules))\n"
            "reg.get('drift')\n"
            "print(any(m.startswith('trajaudit.engine.strategies.llm') for m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_every_lazy_llm_strategy_builds_under_its_name():
    reg = default_strategies()
    for name in LLM_STRATEGIES:
        s = reg.get(name)
        assert s.name == name and s.needs_llm is True and reg.get(name) is s
    assert [n for n, s in reg.items()][:5] == ["offline", "first", "last", "random", "first-violation"]


def test_lazy_registration_errors():
    reg: Registry[object] = Registry("thing")
    reg.register_lazy("a", lambda: type("A", (), {"name": "b"})())
    with pytest.raises(ValueError, match="thing 'a' is already registered"):
        reg.register("a", object())
    with pytest.raises(ValueError, match="its factory built 'b'"):
        reg.get("a")
    with pytest.raises(ValueError, match="its factory built 'b'"):
        reg.get("a")  # still refused on the next lookup, not a None left behind
    with pytest.raises(LookupError, match="unknown thing 'c'"):
        reg.get("c")
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first build fails")
        return type("D", (), {"name": "d"})()
    reg.register_lazy("d", flaky)
    with pytest.raises(RuntimeError):
        reg.get("d")
    assert reg.get("d").name == "d" and len(calls) == 2


def test_pass_evidence_is_derived_only_when_it_matches_and_never_for_llm_strategies(tau_file):
    from trajaudit.engine.run.evidence import gather
    from trajaudit.engine.run.parallel import _deferrable, _PassEvidence
    from trajaudit.engine.run.pipeline import build_context
    from trajaudit.errors import TrajauditError

    t = load_path(tau_file).trajectories[0]
    ctx = build_context(AuditSpec())
    log = gather(t, ctx).log
    rec = next(r for r in log.records if isinstance(r, LazyRecord) and r.rule_id.startswith("generic."))
    ordinal = [r for r in log.records if r.rule_id == rec.rule_id].index(rec)
    derive = _PassEvidence(t, ctx)
    assert derive(rec.rule_id, ordinal, rec.step) == (rec.evidence, rec.bindings)
    with pytest.raises(TrajauditError, match=f"the evidence of {rec.rule_id} at step {rec.step + 1} could not"):
        derive(rec.rule_id, ordinal, rec.step + 1)
    memo = {}
    assert rec.rule_id in _deferrable(t, ctx, memo) and list(memo) == [("tau_retail",)]
    assert parallel_mod._defers("offline") and not parallel_mod._defers("agentrx")
