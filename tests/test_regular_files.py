"""trajaudit/regular_files.py: only regular files are read (robustness class 6: a FIFO given as an
input path; class 7, below: special files inside an audited folder).

Was: the batch blocked forever (``show`` too): ``open`` waits for a writer. Now only regular files are
read: the FIFO is reported (never opened) and the other inputs are audited. Run in a child process
with a timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import socket

import pytest
from hostile_kit import cli, cli_process, diagnoses, good_run, ids, one_line, snapshot, write_json

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


# Class 7: a FIFO, a socket or a dangling ``*.json`` link inside an audited folder.
#
# Was: silently dropped, exit 0. Now each is reported per path (what it is, never opened) and the
# exit code is 1; the folder's regular runs are audited.

def test_every_special_entry_is_reported(tmp_path):
    runs = tmp_path / "runs"
    (runs / "sub").mkdir(parents=True)
    write_json(runs / "a.json", good_run("a"))
    write_json(runs / "sub" / "b.json", good_run("b"))
    os.mkfifo(runs / "sub" / "pipe.jsonl")
    os.symlink(runs / "gone.json", runs / "dangling.json")
    sock = socket.socket(socket.AF_UNIX)
    sock_path = runs / "s.json"
    try:
        sock.bind(str(sock_path))
    except OSError:  # a path too long for AF_UNIX: the other kinds still make the point
        sock_path = None
    before = snapshot(runs)
    out = tmp_path / "d.jsonl"
    try:
        for given in (runs, str(runs / "**" / "*.json*")):
            r = cli_process("audit", given, "-q", "-o", out, timeout=60)
            assert r.returncode == 1, r.stderr
            assert ids(out) == ["a", "b"]
            err = one_line(r.stderr)
            assert f"skipped: {runs / 'sub' / 'pipe.jsonl'}: cannot read: a FIFO (named pipe), not a regular file" in err
            assert f"skipped: {runs / 'dangling.json'}: cannot read: a dangling symbolic link, not a regular file" in err
            if sock_path is not None:
                assert f"skipped: {sock_path}: cannot read: a socket, not a regular file" in err
    finally:
        sock.close()
    assert snapshot(runs) == before


def test_check_reports_them_too(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_json(runs / "a.json", good_run("a"))
    os.symlink(runs / "gone.json", runs / "dangling.json")
    r = cli_process("check", runs, "--rules", "generic", timeout=60)
    assert r.returncode == 1 and "a dangling symbolic link, not a regular file" in one_line(r.stderr)


# Hostile-user pass: `audit runs/` where runs/ also holds `c.json.gz` and `d.log` traces audited the
# .json files and said "2 run(s) audited, 0 skipped": the other files were left out without a word
# (only .json, .jsonl, .ndjson and .eval files are read from a folder). audit, check and eval now name
# them in a note before the batch (not with -q; hidden files such as .DS_Store or .git/ are not named).

def test_audit_and_check_name_the_files_of_a_folder_they_do_not_read(tmp_path):
    runs = tmp_path / "runs"
    (runs / "sub").mkdir(parents=True)
    (runs / ".git").mkdir()
    write_json(runs / "a.json", good_run("a"))
    write_json(runs / "sub" / "b.json", good_run("b"))
    for name in ("c.json.gz", "sub/d.log", ".DS_Store", ".git/config", "e.txt", "f.md"):
        (runs / name).write_text("x")
    # documentation (f.md) is not named: the bundled examples' NOTICE.md made the README's command print it
    note = (f"note: 3 file(s) in the input folder(s) not read (only .json, .jsonl, .ndjson, .eval files are traces "
            f"there; name a file to read it): {runs / 'c.json.gz'}, {runs / 'e.txt'}, {runs / 'sub' / 'd.log'}")
    for args in (("audit", runs, "-o", tmp_path / "d.jsonl"), ("check", runs)):
        r = cli(*args)
        assert r.exit_code in (0, 1) and note in one_line(r.stderr), args
        assert "not read" not in cli(*args, "-q").stderr
    assert ids(tmp_path / "d.jsonl") == ["a", "b"]
    alone = cli("check", runs / "a.json")
    assert "not read" not in alone.stderr
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "a", "critical_step": 4}\n{"id": "b", "critical_step": 4}\n')
    scored = cli("eval", runs, "--gold", gold, "-s", "offline", "--bootstrap", "10", "--format", "json")
    assert scored.exit_code == 0 and note in one_line(scored.stderr)  # eval's DATASET folders too
