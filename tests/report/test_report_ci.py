"""trajaudit/report/ci.py through the CLI: issue 18's output safety with issue 21's CI formats: ``--format sarif|junit`` of ``audit`` and
``check`` go through the same atomic writer as the JSONL (a full disk leaves the old file intact, no
temporary file behind), keep the good runs of a batch with a hostile line, and ``--resume`` — which
appends JSONL lines — is a usage error with them (exit 2, nothing written)."""

from __future__ import annotations

import json
import resource
import xml.etree.ElementTree as ET

import pytest
from hostile_kit import cli, cli_process, good_run, one_line, snapshot, write_jsonl

LIMIT = 8192  # bytes: far less than the SARIF / JUnit of the batch below
HUGE = "9" * 5000


def _limited():
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.fixture
def batch(tmp_path):
    return write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}", item=f"F{i}")) for i in range(12)])


@pytest.mark.parametrize("fmt", ["sarif", "junit"])
def test_resume_with_sarif_or_junit_is_a_usage_error_and_writes_nothing(tmp_path, batch, fmt):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / f"results.{fmt}"
    out.write_bytes(b"the earlier results\n")
    r = cli("audit", batch, "--format", fmt, "--resume", "-o", out, "--report", out_dir / "r.html")
    assert r.exit_code == 2, r.output
    assert f"--resume appends JSONL diagnoses to -o: it cannot continue a --format {fmt} file" in one_line(r.stderr)
    assert out.read_bytes() == b"the earlier results\n"
    assert [p.name for p in out_dir.iterdir()] == [out.name]  # no report, no temporary file


@pytest.mark.parametrize("command", ["audit", "check"])
@pytest.mark.parametrize("fmt", ["sarif", "junit"])
def test_sarif_and_junit_replace_the_old_file_atomically_on_a_full_disk(tmp_path, batch, monkeypatch, command, fmt):
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")  # the pack cache would write too
    whole = tmp_path / f"whole.{fmt}"
    r = cli(command, batch, "--format", fmt, "-q", "-o", whole)
    assert r.exit_code in (0, 1), r.output
    assert whole.stat().st_size > LIMIT  # the new file cannot fit under the limit
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    old = out_dir / f"results.{fmt}"
    old.write_bytes(b"the earlier results\n" * 20)
    before = old.read_bytes()
    r = cli_process(command, batch, "--format", fmt, "-q", "-o", old, preexec=_limited, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "File too large" in one_line(r.stderr) and "Traceback" not in r.stderr
    assert old.read_bytes() == before
    assert [p.name for p in out_dir.iterdir()] == [old.name]  # no temporary file left behind


@pytest.mark.parametrize("command", ["audit", "check"])
def test_junit_keeps_the_good_runs_of_a_batch_with_a_hostile_line(tmp_path, command):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_jsonl(runs / "mixed.jsonl", [json.dumps(good_run("a")), '{"messages": [], "n": ' + HUGE + "}",
                                       json.dumps(good_run("b"))])
    before = snapshot(runs)
    out = tmp_path / "results.xml"
    r = cli(command, runs, "--format", "junit", "-o", out)
    assert r.exit_code == 1, r.output  # a skipped input fails the gate
    assert "record 1: JSON on line 2: integer literal too long (5000 digits)" in one_line(r.stderr)
    *suites, skipped = ET.parse(out).getroot().findall("testsuite")
    assert sorted(s.get("name").split(" ")[0] for s in suites) == ["a", "b"]
    assert all(int(s.get("tests")) > 0 for s in suites)
    assert skipped.get("name") == "skipped inputs" and skipped.get("errors") == "1"  # the hostile line, red
    assert skipped.find("testcase").get("name").endswith("mixed.jsonl line 2")
    assert snapshot(runs) == before


def test_check_json_summary_names_never_fired_rules_with_default_packs(tmp_path, batch):
    r = cli("check", batch, "--format", "json")
    assert r.exit_code == 1, r.output  # the good runs book without asking: a confirmation violation
    summary = json.loads(r.stderr.strip().splitlines()[-1])["summary"]
    assert summary["runs"] == 12 and summary["runs_with_violations"] == 12
    assert "generic.provenance.invented-resource-not-found" in summary["never_fired"]
    fired = {rec["rule_id"] for lg in json.loads(r.stdout) for rec in lg["records"]}
    assert fired and not fired & set(summary["never_fired"])
    quiet = cli("check", batch, "--format", "json", "-q")
    assert quiet.exit_code == 1 and quiet.stderr == ""
    assert quiet.stdout == r.stdout  # -q hides the summary, not the JSON asked for
