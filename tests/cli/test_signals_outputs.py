"""A signal at the end of a command leaves its output files all new or all as they were, never a mix,
and no temporary file behind; SIGTERM (``timeout``, systemd, ``docker stop``) is handled as Ctrl-C.

Before: ``audit -o X --report Y`` replaced ``-o``, then rendered and wrote the report, so a Ctrl-C in
between left new diagnoses beside the old report (exit 130, "interrupted"); SIGTERM killed the process
at once (exit -15, no message) and left the report's hidden ``.Y.*.tmp`` file, which no later run
removed.

Real processes get real signals. Where the moment matters, the documented debug hook
``TRAJAUDIT_DEBUG_COMMIT_PAUSE`` (``cli.signals.PAUSE_ENV``) makes the commit step say ``commit pause``
on stderr and wait: ``before`` the first rename, or ``between`` the first and the second (signals held
there). Two tests use no hook at all: the signal is sent the moment ``-o`` is replaced (as a fresh
user's script did), or while the report's temporary file exists.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from hostile_kit import good_run

#: the debug hook (``trajaudit.cli.signals.PAUSE_ENV``; spelled out so the file runs against older code too)
PAUSE_ENV = "TRAJAUDIT_DEBUG_COMMIT_PAUSE"
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

#: signal -> (exit code, the word stderr ends with)
STOPS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def _runs(folder: Path, n: int) -> Path:
    path = folder / "runs.jsonl"
    path.write_text("".join(json.dumps(good_run(f"r{i}", item=f"TP{i}")) + "\n" for i in range(n)))
    return path


def _start(args: list[str], cwd: Path, **env: str) -> subprocess.Popen:
    # SIGINT as the default action in the child: a background job (CI, `pytest &`) starts with it ignored
    return subprocess.Popen([sys.executable, "-m", "trajaudit", *args], cwd=cwd, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **NO_LLM_ENV, "PYTHONPATH": str(ROOT), **env},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_pause(p: subprocess.Popen) -> None:
    """Read the child's stderr up to the hook's ``commit pause`` line."""
    assert p.stderr is not None
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line.startswith("commit pause"):
            return
    p.wait()
    pytest.fail(f"the commit step never paused (exit {p.returncode}): {''.join(seen)}")


def _temporaries(folder: Path) -> list[str]:
    return sorted(f.name for f in folder.iterdir() if f.name.endswith(".tmp"))


def _old(tmp_path: Path, *names: str) -> dict[str, str]:
    old = {name: f"OLD {name}\n" for name in names}
    for name, text in old.items():
        (tmp_path / name).write_text(text)
    return old


@pytest.mark.parametrize("sig", list(STOPS), ids=lambda s: s.name)
def test_a_signal_before_the_renames_leaves_every_output_as_it_was(tmp_path, sig):
    runs = _runs(tmp_path, 4)
    old = _old(tmp_path, "d.jsonl", "r.html")
    p = _start(["audit", str(runs), "-o", "d.jsonl", "--report", "r.html", "-q"], tmp_path,
               **{PAUSE_ENV: "before:30"})
    _wait_for_pause(p)
    assert len(_temporaries(tmp_path)) == 2  # both outputs staged, neither renamed yet
    p.send_signal(sig)
    err = p.communicate(timeout=60)[1]
    code, word = STOPS[sig]
    assert (p.returncode, err.strip()) == (code, word)
    assert {name: (tmp_path / name).read_text() for name in old} == old
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("sig", list(STOPS), ids=lambda s: s.name)
def test_a_signal_between_the_renames_waits_until_every_output_is_new(tmp_path, sig):
    runs = _runs(tmp_path, 4)
    _old(tmp_path, "d.jsonl", "r.html")
    p = _start(["audit", str(runs), "-o", "d.jsonl", "--report", "r.html", "-q"], tmp_path,
               **{PAUSE_ENV: "between:1"})
    _wait_for_pause(p)
    p.send_signal(sig)  # held while the renames go on, acted on after the last
    err = p.communicate(timeout=60)[1]
    code, word = STOPS[sig]
    assert p.returncode == code, err
    assert err.strip() == f"{word} after the output files were written (all of them are new): d.jsonl, r.html"
    assert [json.loads(x)["trajectory_id"] for x in (tmp_path / "d.jsonl").read_text().splitlines()] == \
        ["r0", "r1", "r2", "r3"]
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert _temporaries(tmp_path) == []


def test_ctrl_c_the_moment_the_diagnoses_are_replaced_leaves_the_report_in_step(tmp_path):
    # the fresh user's race: SIGINT as soon as -o's inode changes (no hook). Before, the report was
    # rendered after -o was replaced: -o new, the report old, exit 130 "interrupted"
    runs = _runs(tmp_path, 150)
    out, rep = tmp_path / "d.jsonl", tmp_path / "r.html"
    _old(tmp_path, "d.jsonl", "r.html")
    inode = out.stat().st_ino
    p = _start(["audit", str(runs), "-o", "d.jsonl", "--report", "r.html", "-q"], tmp_path)
    deadline = time.monotonic() + 120
    while p.poll() is None and out.stat().st_ino == inode and time.monotonic() < deadline:
        pass
    assert p.poll() is None, "the command ended before -o was replaced was seen"
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    new_out, new_rep = not out.read_text().startswith("OLD"), not rep.read_text().startswith("OLD")
    assert new_out == new_rep, f"-o new: {new_out}, --report new: {new_rep}; {err}"
    assert new_out, err  # -o was seen replaced: the commit had begun, and it finishes
    if p.returncode == 130:  # the signal came during the renames (held) or after them
        assert err.strip().startswith("interrupted after the output files were written")
    else:  # the command had ended (0), or was ending: Python gives the signal its default action then (-2)
        assert p.returncode in (0, -signal.SIGINT), err
    assert _temporaries(tmp_path) == []


def test_sigterm_while_the_outputs_are_written_removes_their_temporary_files(tmp_path):
    # as `timeout -s TERM`: no hook, the signal lands the moment a temporary output file appears.
    # Before: exit -15 (killed), no message, the .r.html.*.tmp file left for good
    runs = _runs(tmp_path, 150)
    old = _old(tmp_path, "d.jsonl", "r.html")
    p = _start(["audit", str(runs), "-o", "d.jsonl", "--report", "r.html", "-q"], tmp_path)
    deadline = time.monotonic() + 120
    while p.poll() is None and not _temporaries(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert p.poll() is None, "the command ended before a temporary file was seen"
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=60)[1]
    now = {name: (tmp_path / name).read_text() for name in old}
    assert now == old or not any(text.startswith("OLD") for text in now.values()), now
    if now == old:
        assert (p.returncode, err.strip()) == (143, "terminated")
    else:  # the commit had begun: the command ended (0), or was ending (-15: the signal's default action then)
        assert p.returncode in (143, 0, -signal.SIGTERM), err
    assert _temporaries(tmp_path) == []


def test_eval_outputs_are_replaced_together(tmp_path):
    runs = _runs(tmp_path, 4)
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"id": f"r{i}", "critical_step": 4}) + "\n" for i in range(4)))
    old = _old(tmp_path, "pred.jsonl", "ev.json", "ev.html")
    args = ["eval", str(runs), "--gold", str(gold), "-s", "offline", "--save-pred", "pred.jsonl", "--format", "json",
            "-o", "ev.json", "--report", "ev.html", "--bootstrap", "10"]
    p = _start(args, tmp_path, **{PAUSE_ENV: "before:30"})
    _wait_for_pause(p)
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=60)[1]
    assert (p.returncode, err.strip()) == (143, "terminated")
    assert {name: (tmp_path / name).read_text() for name in old} == old
    p = _start(args, tmp_path, **{PAUSE_ENV: "between:1"})
    _wait_for_pause(p)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    assert err.strip().endswith("interrupted after the output files were written (all of them are new): "
                                "pred.jsonl, ev.json, ev.html")
    assert not any((tmp_path / name).read_text().startswith("OLD") for name in old)
    assert _temporaries(tmp_path) == []


def test_sigterm_stops_a_batch_of_workers_as_ctrl_c_does(tmp_path):
    # SIGTERM to the whole group (as `timeout` sends it) once runs are finishing: forked workers inherited
    # the command's handler; they leave the signal to the parent (no traceback of their own), the parent
    # says "terminated", 143. The --resume journal keeps the runs finished, one complete line each; the
    # report (written at the end) is left as it was
    runs = _runs(tmp_path, 3000)
    out = tmp_path / "d.jsonl"
    old = _old(tmp_path, "r.html")
    p = subprocess.Popen([sys.executable, "-m", "trajaudit", "audit", str(runs), "-o", "d.jsonl", "--resume",
                          "--report", "r.html", "-j", "2", "-q"],
                         cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, **NO_LLM_ENV, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    while p.poll() is None and not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert p.poll() is None, "the batch ended before the signal: make it larger"
    os.killpg(p.pid, signal.SIGTERM)
    err = p.communicate(timeout=60)[1]
    assert (p.returncode, err.strip()) == (143, "terminated")
    lines = out.read_text().splitlines(keepends=True)
    assert 0 < len(lines) < 3000 and all(line.endswith("\n") and json.loads(line)["trajectory_id"] for line in lines)
    assert (tmp_path / "r.html").read_text() == old["r.html"]
    assert _temporaries(tmp_path) == []


def test_temporary_files_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    # SIGKILL leaves the temporary file (no process can clean up after it): the next write of the same
    # output removes it, saying so, when the process named in it no longer runs; an older trajaudit's
    # temporary file (no process id in its name) is named in a warning, not removed
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    killed = tmp_path / f".d.jsonl.{dead}.abcd1234.tmp"
    older = tmp_path / ".d.jsonl.x9y8z7w6.tmp"
    running = tmp_path / f".d.jsonl.{os.getpid()}.qqqq1111.tmp"  # a writer that still runs: left alone
    other = tmp_path / f".other.jsonl.{dead}.abcd1234.tmp"  # another output's: not this write's to judge
    for f in (killed, older, running, other):
        f.write_text("partial")
    runs = _runs(tmp_path, 2)
    res = subprocess.run([sys.executable, "-m", "trajaudit", "audit", str(runs), "-o", str(tmp_path / "d.jsonl"),
                          "-q"], capture_output=True, text=True, env={**os.environ, **NO_LLM_ENV, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    assert not killed.exists() and older.exists() and running.exists() and other.exists()
    said = " ".join(res.stderr.split())
    assert f"removed 1 temporary file(s) beside {tmp_path / 'd.jsonl'} left by a trajaudit process that no longer " \
           f"runs (killed while writing): {killed.name}" in said
    assert f"{older.name}; remove them when no trajaudit is writing" in said


def test_serve_shuts_down_on_sigterm_as_on_ctrl_c(tmp_path):
    # `trajaudit serve` under systemd or Docker is stopped with SIGTERM: uvicorn shuts down cleanly (open
    # traces audited), then raised the signal again, which killed the process before its summary (exit
    # -15, the counters lost); now it ends as on Ctrl-C: summary, exit 0
    import socket

    pytest.importorskip("uvicorn")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = _start(["serve", "--otlp", str(port), "-o", "serve.jsonl"], tmp_path)
    deadline = time.monotonic() + 60
    while p.poll() is None and time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 0, err
    assert "0 spans and 0 log records in 0 requests; 0 trace(s) audited" in " ".join(err.split())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_command_ended_changes_nothing(tmp_path, sig):
    """Fresh-user pass: a signal in the ≈ 0.3 s of interpreter teardown after a batch wrote its outputs
    killed the process by the default action (no message, return code -15/-2) or printed a traceback
    from an exit handler. The command is over then: the signal is ignored and its exit code stands.
    Here the signal is sent from an exit handler, i.e. after ``run()`` returned, deterministically."""
    code = ("import atexit, os, signal, sys, time\n"
            "sys.argv = ['trajaudit', '--version']\n"
            "import trajaudit.__main__ as m\n"
            f"atexit.register(lambda: (os.kill(os.getpid(), {int(sig)}), time.sleep(0.2)))\n"
            "m.run()\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, **NO_LLM_ENV, "PYTHONPATH": str(ROOT)})
    assert (r.returncode, r.stderr) == (0, ""), (r.returncode, r.stderr)
    assert r.stdout.startswith("trajaudit, version ")
