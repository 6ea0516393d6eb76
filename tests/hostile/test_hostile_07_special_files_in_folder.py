"""Class 7: a FIFO, a socket or a dangling ``*.json`` link inside an audited folder.

Was: silently dropped, exit 0. Now each is reported per path (what it is, never opened) and the
exit code is 1; the folder's regular runs are audited."""

from __future__ import annotations

import os
import socket

import pytest
from hostile_kit import cli_process, good_run, ids, one_line, snapshot, write_json

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


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
