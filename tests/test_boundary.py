"""trajaudit/boundary.py, the per-run boundary (issue 18): any exception while loading, checking or judging one run becomes
that run's error record — file, record, stage, message — and the batch goes on; the traceback is
printed only with ``--debug``. The exceptions are planted (a bug in an adapter, in a judge)."""

from __future__ import annotations

import json
import sys

from hostile_kit import cli, good_run, ids, one_line, write_jsonl

import trajaudit.engine.strategies.offline_judge as judge
import trajaudit.engine.trace.adapters.openai_chat as openai_chat
from trajaudit.engine.run.batch import audit_paths
from trajaudit.engine.run.pipeline import AuditSpec


def _batch(tmp_path):
    return write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(i)) for i in ("a", "b", "c")])


def _plant_judge_bug(monkeypatch):
    real = judge.OfflineJudge.diagnose

    def diagnose(self, t, evidence, ctx):
        if t.id == "b":
            raise ZeroDivisionError("planted")
        return real(self, t, evidence, ctx)
    monkeypatch.setattr(judge.OfflineJudge, "diagnose", diagnose)


def test_a_bug_while_judging_one_run_is_its_error_record(tmp_path, monkeypatch):
    runs = _batch(tmp_path)
    _plant_judge_bug(monkeypatch)
    out = tmp_path / "d.jsonl"
    r = cli("audit", runs, "-q", "-o", out)
    assert r.exit_code == 1 and ids(out) == ["a", "c"]
    assert f"skipped: {runs}, record 1 (run b): internal error while judging: ZeroDivisionError: planted" \
        in one_line(r.stderr)
    assert "Traceback" not in r.output
    r = cli("audit", runs, "-q", "-o", out, "--debug")
    assert r.exit_code == 1 and "Traceback (most recent call last)" in r.stderr and "ZeroDivisionError: planted" in r.stderr
    res = audit_paths([runs], AuditSpec(), on_result=lambda i, r: None)
    (p,) = res.problems
    assert (p.file, p.record, p.stage) == (str(runs), 1, "judge") and "traceback" in p.details


def test_a_bug_while_loading_one_run_is_its_error_record(tmp_path, monkeypatch):
    runs = _batch(tmp_path)
    cls = next(v for v in vars(openai_chat).values() if isinstance(v, type) and hasattr(v, "convert")
               and getattr(v, "name", "") == "openai")
    real = cls.convert

    def convert(self, run, *, source, options):
        if isinstance(run, dict) and run.get("id") == "c":
            raise KeyError("planted")
        return real(self, run, source=source, options=options)
    monkeypatch.setattr(cls, "convert", convert)
    out = tmp_path / "d.jsonl"
    for cmd in (("audit", runs, "-q", "-o", out), ("check", runs, "--rules", "generic"), ("show", runs)):
        r = cli(*cmd)
        assert r.exit_code == (0 if cmd[0] == "show" else 1), (cmd, r.output)  # show lists what it could read
        assert f"skipped: {runs}, record 2: internal error while loading: KeyError: 'planted'" in one_line(r.stderr), cmd
        assert "Traceback" not in r.output
    assert ids(out) == ["a", "b"]


def test_a_bug_outside_any_run_is_one_error_line_without_debug(tmp_path, monkeypatch):
    runs = _batch(tmp_path)
    audit_cli = sys.modules["trajaudit.cli.audit"]  # the package exports the command under the module's name

    def broken(*a, **k):
        raise RuntimeError("planted outside the runs")
    monkeypatch.setattr(audit_cli, "audit_paths", broken)
    r = cli("audit", runs, "-q", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 2 and "error: internal error: RuntimeError: planted outside the runs (--debug shows the " \
        "traceback)" in one_line(r.stderr)
    assert "Traceback" not in r.output
    r = cli("audit", runs, "-q", "-o", tmp_path / "d.jsonl", "--debug")
    assert r.exit_code == 2 and "Traceback (most recent call last)" in r.stderr
