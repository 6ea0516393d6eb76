"""Class 9: the disk fills up (here: a small ``RLIMIT_FSIZE``) while ``-o`` replaces an earlier file.

Was: ``open(path, "wb")`` truncated the old diagnoses first; the new file ended in a torn line and the
old one was gone. Now outputs are written to a temporary file in the same folder, fsynced and renamed:
the write fails (exit 2, the error named), the old file survives byte for byte, no temporary file is
left. With ``--resume`` the lines are appended as runs finish: a write cut by the limit leaves a torn
last line, which the next ``--resume`` cuts away before finishing the batch."""

from __future__ import annotations

import json
import resource

import pytest
from hostile_kit import cli, cli_process, comparable, diagnoses, good_run, one_line, write_jsonl

LIMIT = 8192  # bytes: far less than the new diagnoses


def _limited():
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.fixture
def batch(tmp_path):
    return write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}", item=f"F{i}")) for i in range(12)])


@pytest.mark.parametrize("option,name", [("-o", "d.jsonl"), ("--report", "r.html"), ("--report", "r.md")])
def test_the_old_output_survives_a_full_disk(tmp_path, batch, option, name, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")  # the pack cache would write too
    out = tmp_path / "out"
    out.mkdir()
    old = out / name
    old.write_bytes(b"the earlier file\n" * 20)
    before = old.read_bytes()
    args = ["audit", batch, "-q", option, old] + (["-o", out / "d2.jsonl"] if option == "--report" else [])
    r = cli_process(*args, preexec=_limited, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "File too large" in one_line(r.stderr) and "Traceback" not in r.stderr
    assert old.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == sorted({name, *(["d2.jsonl"] if option == "--report" else [])}) \
        or sorted(p.name for p in out.iterdir()) == [name]  # no temporary file left behind


def test_resume_cuts_the_torn_line_a_full_disk_left_and_finishes(tmp_path, batch, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")
    whole = tmp_path / "whole.jsonl"
    assert cli("audit", batch, "-q", "-o", whole).exit_code == 0
    out = tmp_path / "d.jsonl"
    r = cli_process("audit", batch, "-q", "--resume", "-o", out, preexec=_limited, timeout=120)
    assert r.returncode == 2 and "File too large" in one_line(r.stderr), r.stderr
    cut = out.read_bytes()
    assert 0 < len(cut) <= LIMIT and not cut.endswith(b"\n")  # complete lines, then a torn one
    end = cut.rfind(b"\n") + 1
    complete = cut[:end].count(b"\n")
    r = cli("audit", batch, "-q", "--resume", "-o", out)
    assert r.exit_code == 0, r.output
    assert f"a torn last line ({len(cut) - end} bytes" in one_line(r.stderr)
    assert f"{complete} run(s) already diagnosed there were skipped" in one_line(r.stderr)
    got = sorted(json.dumps(comparable(d), sort_keys=True) for d in diagnoses(out))
    assert got == sorted(json.dumps(comparable(d), sort_keys=True) for d in diagnoses(whole))
