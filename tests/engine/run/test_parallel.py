"""trajaudit/engine/run/parallel.py, robustness class 8: with ``--jobs 2`` a worker process is killed (the OOM killer, ``kill -9``).

Was: ``BrokenProcessPool`` traceback; every diagnosis, finished ones included, was lost. Now the dead
worker is replaced and its run retried once in a fresh worker; a run that kills that one too is
reported as its own error (stage ``worker``); the finished diagnoses are kept.

The kill is real (``SIGKILL`` sent by the worker to itself while it audits a chosen run): the test
wraps the function a worker calls, before the pool forks."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

import pytest
from hostile_kit import good_run, write_jsonl

import trajaudit.engine.run.parallel as parallel
from trajaudit.engine.run.batch import audit_paths
from trajaudit.engine.run.pipeline import AuditSpec

pytestmark = pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="the kill hook needs fork")


def _batch(tmp_path, n=8):
    return write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}", item=f"F{i}")) for i in range(n)])


def _audit(path, jobs):
    got = {}
    res = audit_paths([path], AuditSpec(), jobs=jobs, on_result=lambda i, r: got.__setitem__(i, r.diagnosis.to_json()))
    return got, res.problems


def _killing(real, victim, marker):
    """``audit_one`` that SIGKILLs its own process on run ``victim`` — once if ``marker`` is a path
    (the marker file remembers it across processes), always if it is ``None``."""
    def audit_one(t, strategy, ctx):
        if t.id == victim and os.getpid() != PARENT and (marker is None or not os.path.exists(marker)):
            if marker is not None:
                open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return real(t, strategy, ctx)
    return audit_one


PARENT = os.getpid()


def test_a_killed_worker_is_replaced_and_its_run_retried(tmp_path, monkeypatch):
    path = _batch(tmp_path)
    serial, problems = _audit(path, 1)
    assert not problems and len(serial) == 8
    marker = tmp_path / "killed-once"
    monkeypatch.setattr(parallel, "audit_one", _killing(parallel.audit_one, "r5", str(marker)))
    got, problems = _audit(path, 2)
    assert marker.exists()  # the worker really was killed
    assert not problems
    assert got == serial  # the same diagnoses, byte for byte, as the uninterrupted serial run


def test_a_run_that_kills_every_worker_is_reported_alone(tmp_path, monkeypatch):
    path = _batch(tmp_path)
    serial, _ = _audit(path, 1)
    monkeypatch.setattr(parallel, "audit_one", _killing(parallel.audit_one, "r3", None))
    got, problems = _audit(path, 2)
    assert [(p.record, p.stage) for p in problems] == [(3, "worker")]
    assert "the worker process auditing this run died (killed by SIGKILL); retried once in a fresh worker, " \
           "which died too" in problems[0].message
    assert problems[0].message.startswith(f"{path}, record 3 (run r3): ")
    assert got == {i: line for i, line in serial.items() if i != 3}
