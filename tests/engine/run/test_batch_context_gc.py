"""A batch builds its audit context and freezes it with the rest of the heap before the collector runs
again (``pipeline.build_frozen_context``): no collection traverses the freshly compiled rules between
the context's build and the batch's first run (issue 22, setup). The context and the results are
those of ``build_context``."""

from __future__ import annotations

import gc

import pytest

import trajaudit.engine.run.batch as batch_mod
from trajaudit.engine.run.batch import audit_paths, audit_trajectories
from trajaudit.engine.run.pipeline import AuditSpec, build_context, build_frozen_context


def _collections() -> int:
    return sum(s["collections"] for s in gc.get_stats())


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.fixture
def first_run_collections(monkeypatch):
    """The collector's count of collections when the batch hands its first runs to ``audit_with``."""
    seen: list[int] = []
    real = batch_mod.audit_with

    def spy(ctx, runs, indices, strategy, finished):
        seen.append(_collections())
        return real(ctx, runs, indices, strategy, finished)

    monkeypatch.setattr(batch_mod, "audit_with", spy)
    return seen


def test_no_collection_between_the_context_and_the_first_run(tau_runs, collector_on, first_run_collections):
    runs = [tau_runs["105"], tau_runs["2"]]
    gc.collect()
    before = _collections()
    got = audit_trajectories(runs, AuditSpec())
    # the old path (build_context, then the batch's freeze) collected the whole context once here
    assert first_run_collections == [before]
    assert gc.get_freeze_count() == 0  # the batch unfreezes what it froze, the context included
    gc.disable()  # the same results with the collector off all along
    try:
        off = audit_trajectories(runs, AuditSpec())
    finally:
        gc.enable()
    assert [r.diagnosis.to_json() for r in got.results] == [r.diagnosis.to_json() for r in off.results]
    assert [r.log.summary() for r in got.results] == [r.log.summary() for r in off.results]


def test_streaming_batch_builds_without_collection(tau_file, collector_on, monkeypatch):
    """The streaming batch builds the context, then reads its first file: no collection in between."""
    at_load: list[int] = []
    real = batch_mod.iter_load

    def spy(*args, **kwargs):
        at_load.append(_collections())
        return real(*args, **kwargs)

    monkeypatch.setattr(batch_mod, "iter_load", spy)
    gc.collect()
    before = _collections()
    seen: dict[int, str] = {}
    audit_paths([tau_file], AuditSpec(), on_result=lambda i, r: seen.__setitem__(i, r.diagnosis.to_json()))
    assert at_load == [before] and len(seen) == 29
    assert gc.get_freeze_count() == 0


def test_frozen_context_is_the_built_context(collector_on):
    ref = build_context(AuditSpec())
    gc.collect()
    before = _collections()
    try:
        ctx = build_frozen_context(AuditSpec())
        after = _collections()
        assert gc.get_freeze_count() > 0  # frozen with the heap
    finally:
        gc.unfreeze()
    assert after == before
    assert [r.id for r in ctx.rules] == [r.id for r in ref.rules]
    assert [dp.name for dp in ctx.domain_packs] == [dp.name for dp in ref.domain_packs]
    # without freeze (or with the collector off) it is build_context, collector state restored
    gc.disable()
    try:
        off = build_frozen_context(AuditSpec())
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
    assert [r.id for r in off.rules] == [r.id for r in ref.rules]
    plain = build_frozen_context(AuditSpec(), freeze=False)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert [r.id for r in plain.rules] == [r.id for r in ref.rules]
