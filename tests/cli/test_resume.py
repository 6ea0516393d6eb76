"""trajaudit/cli/outputs.py's resume journal: ``audit --resume`` after ``kill -9`` of the whole process mid-batch (issue 18, "Must show"): the
killed run leaves a valid prefix of complete lines; resuming skips them and finishes the rest; the
diagnoses equal an uninterrupted run's (as a set; ``--resume`` appends in completion order and tags
each line with its options' fingerprint)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from hostile_kit import (
    ROOT,
    cli,
    cli_process,
    comparable,
    diagnoses,
    good_run,
    one_line,
    write_jsonl,
    write_keyless,
)

RUNS = 300


def _canon(path):
    return sorted(json.dumps(comparable(d), sort_keys=True) for d in diagnoses(path))


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume")
    path = write_jsonl(tmp / "runs.jsonl", [json.dumps(good_run(f"r{i}", item=f"F{i}")) for i in range(RUNS)])
    whole = tmp / "whole.jsonl"
    assert cli("audit", path, "-q", "-o", whole).exit_code == 0
    return path, whole


def _start(args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "trajaudit", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_kill_9_mid_batch_then_resume_gives_the_uninterrupted_diagnoses(tmp_path, batch, jobs):
    path, whole = batch
    out = tmp_path / "d.jsonl"
    proc = _start(["audit", path, "-q", "--resume", "-o", out, "--jobs", jobs])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait for some diagnoses on disk, then kill the whole process group
        if out.exists() and out.read_bytes().count(b"\n") >= 10:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    data = out.read_bytes()
    done = data.count(b"\n")
    assert 10 <= done < RUNS, "the kill came after the batch ended: nothing was resumed"
    with open(out, "ab") as f:  # what a kill in the middle of a write leaves: a torn last line
        f.write(b'{"schema_version": 1, "trajectory_id": "r')
    r = cli("audit", path, "-q", "--resume", "-o", out, "--jobs", jobs)
    assert r.exit_code == 0, r.output
    said = one_line(r.stderr)
    assert "a torn last line (41 bytes" in said and f"{done} run(s) already diagnosed there were skipped" in said
    assert _canon(out) == _canon(whole)
    assert len(diagnoses(out)) == RUNS  # each run once: none diagnosed twice


def test_resume_with_other_options_diagnoses_again(tmp_path, batch):
    path, _ = batch
    out = tmp_path / "d.jsonl"
    small = write_jsonl(tmp_path / "few.jsonl", path.read_text().splitlines()[:3])
    assert cli("audit", small, "-q", "--resume", "-o", out).exit_code == 0
    r = cli("audit", small, "-q", "--resume", "-o", out, "-s", "first")
    assert r.exit_code == 0 and "0 run(s) already diagnosed there were skipped" in one_line(r.stderr)
    got = diagnoses(out)
    assert [d["strategy"] for d in got] == ["offline"] * 3 + ["first"] * 3
    assert len({d["metadata"]["resume_key"] for d in got}) == 2


def test_a_whole_last_line_without_its_newline_is_kept(tmp_path, batch):
    """Final fresh-user pass: a file whose last diagnosis only lacked its newline (ended by an editor or
    `head -c`) had that line cut away as "a torn last line (… a run killed mid-write)" and its run
    audited again. A whole diagnosis is kept (its newline added); a line cut mid-write still goes."""
    path, _ = batch
    small = write_jsonl(tmp_path / "few.jsonl", path.read_text().splitlines()[:3])
    out = tmp_path / "d.jsonl"
    assert cli("audit", small, "-q", "-o", out).exit_code == 0
    whole = out.read_bytes()
    out.write_bytes(whole.rstrip(b"\n"))
    r = cli("audit", small, "-q", "--resume", "-o", out)
    assert r.exit_code == 0, r.output
    assert "3 run(s) already diagnosed there were skipped" in one_line(r.stderr) and "torn" not in r.stderr
    assert out.read_bytes().rstrip(b"\n") == whole.rstrip(b"\n")  # nothing appended: left as it was
    write_jsonl(small, path.read_text().splitlines()[:4])
    r = cli("audit", small, "-q", "--resume", "-o", out)  # one more run: appended on a line of its own
    assert "3 run(s) already diagnosed there were skipped" in one_line(r.stderr)
    assert out.read_bytes().startswith(whole) and len(diagnoses(out)) == 4
    out.write_bytes(whole[:-40])  # the last line cut mid-write
    r = cli("audit", small, "-q", "--resume", "-o", out)
    assert "a torn last line" in one_line(r.stderr) and "2 run(s) already diagnosed" in one_line(r.stderr)
    assert len(diagnoses(out)) == 4


def test_eval_resume_scores_the_same_as_an_uninterrupted_eval(tmp_path):
    data = ROOT / "examples" / "data" / "who_and_when"
    plain = cli("eval", data, "--gold", data, "-s", "offline", "--format", "json")
    assert plain.exit_code == 0, plain.output
    pred = tmp_path / "pred.jsonl"
    first = cli("eval", data, "--gold", data, "-s", "offline", "--format", "json", "--save-pred", pred, "--resume")
    assert first.exit_code == 0 and first.stdout == plain.stdout
    lines = pred.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    pred.write_bytes(lines[0] + lines[1][:30])  # killed while writing the second diagnosis
    again = cli("eval", data, "--gold", data, "-s", "offline", "--format", "json", "--save-pred", pred, "--resume")
    assert again.exit_code == 0, again.output
    assert "a torn last line (30 bytes" in one_line(again.stderr) and "1 run(s) already diagnosed" in one_line(again.stderr)
    assert again.stdout == plain.stdout and len(diagnoses(pred)) == 3
    r = cli("eval", data, "--gold", data, "-s", "offline", "--resume")
    assert r.exit_code == 2 and "--resume goes with --strategy and --save-pred" in one_line(r.stderr)


# `audit --resume` on a file it did not write: lines without a resume key (a plain `audit`) and lines
# made with other options are kept, their runs audited again, and the summary says so (a fresh-user pass
# found the duplicates appended silently).

def test_resume_warns_about_lines_it_cannot_recognise(tmp_path):
    runs = write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}")) for i in range(3)])
    plain = tmp_path / "plain.jsonl"
    assert cli("audit", runs, "-q", "-o", plain).exit_code == 0
    out = write_keyless(plain, tmp_path / "out.jsonl", 2)  # lines without the resume key
    r = cli("audit", runs, "-q", "-o", out, "--resume")
    assert r.exit_code == 0, r.output
    said = one_line(r.output)
    assert "warning: 2 diagnosis line(s) without a resume key" in said and "0 run(s) already diagnosed" in said
    assert len(out.read_text().splitlines()) == 5  # 2 kept + 3 audited
    r = cli("audit", runs, "-q", "-o", out, "--resume", "--seed", "7")  # other options: audited again
    assert "also holds diagnoses made with other options" in one_line(r.output)
    r = cli("audit", runs, "-q", "-o", out, "--resume")  # the same options again: nothing to do
    assert "3 run(s) already diagnosed there were skipped" in one_line(r.output)
    assert "other options" in one_line(r.output) and len(out.read_text().splitlines()) == 8


# Fresh-user pass: `eval --save-pred P --resume` on a file eval itself wrote without --resume warned
# about lines "written by an audit without --resume"; since plain runs write the resume key too, it
# goes on from them (tests/cli/test_resume_own_outputs.py); lines without a key do not blame an audit.

def test_eval_resume_on_lines_without_a_key_does_not_blame_an_audit(tmp_path):
    data = ROOT / "examples" / "data" / "who_and_when"
    pred = tmp_path / "pred.jsonl"
    assert cli("eval", data, "--gold", data, "-s", "offline", "--format", "json", "--save-pred", pred).exit_code == 0
    older = [json.loads(line) for line in pred.read_text().splitlines()]
    for d in older:
        del d["metadata"]["resume_key"]
    pred.write_text("".join(json.dumps(d) + "\n" for d in older))
    r = cli("eval", data, "--gold", data, "-s", "offline", "--format", "json", "--save-pred", pred, "--resume")
    assert r.exit_code == 0, r.output
    said = one_line(r.stderr)
    assert ("warning: 3 diagnosis line(s) without a resume key (written by an older version or another program) "
            "were kept and their runs diagnosed again") in said
    assert "audit" not in said


# `--resume` into an output that is not a regular file: the journal read the file back before appending,
# and reading the pipe it writes to waited forever (`audit 13.json -o /dev/stdout --resume -q | head`
# hung; the same with a FIFO and with `eval --save-pred /dev/stdout --resume`). Now a usage error (exit
# 2) before the output is opened.

@pytest.mark.parametrize("where", ["fifo", "/dev/stdout"])
def test_resume_into_a_pipe_or_device_is_refused_at_once(tmp_path, where):
    run = write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run("r1"))])
    if where == "fifo":
        out = tmp_path / "fifo"
        os.mkfifo(out)
    else:
        if not os.path.exists(where):
            pytest.skip(f"no {where} here")
        out = where  # the child's stdout is a pipe
    data = ROOT / "examples" / "data" / "who_and_when"
    for args, option in ((["audit", run, "-q", "-o", out, "--resume"], "-o"),
                         (["eval", data, "--gold", data, "-s", "offline", "--save-pred", out, "--resume"],
                          "--save-pred")):
        r = cli_process(*args, timeout=30)
        said = one_line(r.stderr)
        assert r.returncode == 2, said
        assert f"--resume reads {option} '{out}' back before appending to it, and it is not a regular file" in said
        assert r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == (["fifo", "runs.jsonl"] if where == "fifo" else ["runs.jsonl"])


def test_eval_resume_to_stdout_dash_is_refused(tmp_path):
    data = ROOT / "examples" / "data" / "who_and_when"
    r = cli("eval", data, "--gold", data, "-s", "offline", "--save-pred", "-", "--resume")
    assert r.exit_code == 2 and "--resume appends to the --save-pred file: give a file, not '-'" in one_line(r.stderr)
