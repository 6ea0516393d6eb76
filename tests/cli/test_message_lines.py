"""Message lines (errors, ``skipped:`` lines, warnings, notes) stay one line each off a terminal
(a CI log, ``2>err.txt``): rich wrapped them at 160 columns, mid-sentence (fresh-user pass:
``audit 13.json -o wwp.jsonl --resume -q 2>err.txt`` gave a 160-character line and the rest on the
next one), and are wrapped between words at a terminal's width."""

from __future__ import annotations

import io
import json

from cli_kit import TIMEOUT_PACK
from click.testing import CliRunner
from hostile_kit import good_run, write_json, write_jsonl, write_keyless

from trajaudit.cli import main
from trajaudit.cli.common import PIPE_WIDTH, console, print_line

LOG_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": "", "COLUMNS": ""}


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], env=LOG_ENV)


def test_an_error_to_a_log_stays_one_line(tmp_path):
    runs = write_json(tmp_path / "runs.json", [good_run("r1")])
    r = _run("audit", runs, "-o", tmp_path / "missing" / ".." / "zz.jsonl")
    lines = r.stderr.splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and len(lines[0]) > PIPE_WIDTH
    assert lines[0].startswith("error: -o/--output") and lines[0].endswith("create it or drop the '..'")


def test_a_skipped_line_to_a_log_stays_one_line(tmp_path):
    bad, runs = write_json(tmp_path / "bad.json", {"not": "a trace"}), write_json(tmp_path / "runs.json", [good_run("r1")])
    r = _run("audit", bad, runs, "-q", "-o", tmp_path / "out.jsonl")
    skipped = [x for x in r.stderr.splitlines() if x.startswith("skipped:")]
    assert r.exit_code == 1 and len(skipped) == 1 and len(skipped[0]) > PIPE_WIDTH
    assert r.stderr.count("\n") == 1  # nothing else, no continuation line


def test_the_resume_warning_to_a_log_stays_one_line(tmp_path):
    runs = write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}")) for i in range(3)])
    plain = tmp_path / "plain.jsonl"
    assert _run("audit", runs, "-q", "-o", plain).exit_code == 0
    out = write_keyless(plain, tmp_path / "out.jsonl", 2)  # lines without the resume key
    r = _run("audit", runs, "-q", "-o", out, "--resume")
    lines = r.stderr.splitlines()
    assert r.exit_code == 0 and len(lines) == 1 and len(lines[0]) > PIPE_WIDTH
    assert lines[0].startswith("resumed ") and lines[0].endswith("0 run(s) already diagnosed there were skipped")


def test_notes_and_the_check_summary_to_a_log_stay_one_line_each(tmp_path):
    runs, pack = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")]), tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    bad = write_json(tmp_path / "bad.json", {"not": "a trace"})
    r = _run("check", runs, bad, "--rules", pack, "--run-timeout", "0.000001", "--format", "json")
    lines = r.stderr.splitlines()
    assert r.exit_code == 1 and [x.split(" ", 1)[0] for x in lines] == ["skipped:", "2", "note:", "note:", "{\"summary\":", "warning:"]
    assert lines[3].endswith("whether they apply is not known): p4.fires, p4.guard-false, p4.guard-false-too")
    assert lines[1].startswith("2 run(s), 4 rule(s): 0 violation(s)") and "1 input(s) skipped" in lines[1]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_message_line_on_a_terminal_wraps_between_words(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    stream = _Tty()
    monkeypatch.setattr("sys.stderr", stream)
    words = "skipped: " + " ".join(f"word{i:02d}" for i in range(30))
    print_line(console(err=True), words)
    lines = stream.getvalue().splitlines()
    assert len(lines) > 1 and all(len(x) <= 40 for x in lines)
    assert " ".join(x.strip() for x in lines) == words  # no word split


def test_a_message_line_off_a_terminal_is_not_wrapped(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    words = "warning: " + " ".join(f"word{i:02d}" for i in range(60))
    print_line(console(err=True), words)
    assert stream.getvalue() == words + "\n"
