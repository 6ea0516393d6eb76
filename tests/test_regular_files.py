"""Class 6: a FIFO given as an input path.

Was: the batch blocked forever (``show`` too): ``open`` waits for a writer. Now only regular files are
read: the FIFO is reported (never opened) and the other inputs are audited. Run in a child process
with a timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os

import pytest
from hostile_kit import cli_process, diagnoses, good_run, one_line, snapshot, write_json

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def test_audit_reports_the_fifo_and_audits_the_rest(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    good = write_json(tmp_path / "good.json", good_run("good"))
    before = snapshot(tmp_path)
    out = tmp_path / "out" / "d.jsonl"
    out.parent.mkdir()
    for jobs in ("1", "2"):
        r = cli_process("audit", fifo, good, "-q", "-o", out, "--jobs", jobs, timeout=60)
        assert r.returncode == 1, r.stderr
        assert [d["trajectory_id"] for d in diagnoses(out)] == ["good"]
        assert f"skipped: {fifo}: cannot read: a FIFO (named pipe), not a regular file (not opened)" \
            in one_line(r.stderr)
    assert snapshot(tmp_path) == before | {str(out): out.read_bytes()}


@pytest.mark.parametrize("cmd", [("show",), ("claims",), ("convert", "-o", "{tmp}/ir.json"), ("check", "--rules", "generic")])
def test_single_file_commands_refuse_the_fifo_at_once(tmp_path, cmd):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    args = [a.format(tmp=tmp_path) for a in cmd[1:]]
    r = cli_process(cmd[0], fifo, *args, timeout=60)
    assert r.returncode in (1, 2), r.stderr
    assert "a FIFO (named pipe), not a regular file (not opened)" in one_line(r.stderr)
    assert not (tmp_path / "ir.json").exists()


def test_a_fifo_as_mapping_pack_or_tools_file_is_refused(tmp_path):
    good = write_json(tmp_path / "good.json", good_run("good"))
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for opt in ("--mapping", "--rules", "--tools"):
        r = cli_process("audit", good, opt, fifo, "-q", "-o", tmp_path / "d.jsonl", timeout=60)
        assert r.returncode == 2, (opt, r.stderr)
        assert "not a regular file" in one_line(r.stderr) and str(fifo) in one_line(r.stderr), (opt, r.stderr)
        assert not (tmp_path / "d.jsonl").exists()
