"""Input defects a fresh user hit: files a --mapping cannot read, unknown --input-format names, skip
lines that do not name the file, UTF-16 files, out-of-range --width and convert's output suffix.

Every case goes through the CLI (click's runner) and asserts the exit code and the message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.trace.loader import load_path
from trajaudit.engine.trace.text import wide_encoding
from trajaudit.errors import TraceFormatError

EX = Path(__file__).resolve().parents[3] / "examples"
MAPPING = EX / "mappings" / "events.yaml"
KNOWN = "ir, magentic, openai, tau, who_and_when"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(text: str) -> str:
    return " ".join(text.split())


# --- 1. --mapping never drops a file it cannot read ----------------------------------------------

def test_mapping_reports_every_file_it_cannot_read_in_a_folder(tmp_path):
    out = tmp_path / "m.jsonl"
    r = run("audit", EX / "traces", "--mapping", MAPPING, "-o", out)
    assert r.exit_code == 1, r.stderr
    err = one_line(r.stderr)
    assert "1 run(s) audited, 2 skipped" in err
    for name, fmt in (("magentic_one.json", "magentic"), ("openai_chat.json", "openai")):
        line = next(ln for ln in r.stderr.splitlines() if name in ln)
        assert line.startswith("skipped: ") and f"does not match the mapping {MAPPING}" in one_line(r.stderr)
        assert f"looks like the built-in {fmt!r} format" in one_line(r.stderr)
    assert "'runs' expression 'runs' yields" in err
    assert [json.loads(x)["trajectory_id"] for x in out.read_text().splitlines()] == ["refund-0042"]


def test_mapping_on_a_file_it_cannot_read_skips_it_with_the_reason(tmp_path):
    sample = EX / "data" / "tau_retail_sample.json"
    r = run("audit", sample, "--mapping", MAPPING, "-o", "-", "-q")
    # as without --mapping when no run can be read: each file is reported and skipped, exit 1
    assert r.exit_code == 1, r.stderr
    err = one_line(r.stderr)
    assert "no trace files found" not in err
    assert f"skipped: {sample}: does not match the mapping {MAPPING}: the 'runs' expression 'runs' yields null" \
        in err
    assert "looks like the built-in 'tau' format" in err
    assert r.stdout == ""
    baseline = run("audit", tmp_path / "none.json", "-o", "-", "-q")  # a path that does not exist: a usage error
    assert baseline.exit_code == 2


def test_mapping_whose_messages_expression_misses_names_it(tmp_path):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("messages: events\n")
    with pytest.raises(TraceFormatError) as e:
        load_path(EX / "traces" / "openai_chat.json", mapping=mapping)
    msg = str(e.value)
    assert msg.startswith(f"{EX / 'traces' / 'openai_chat.json'}: does not match the mapping {mapping}:")
    assert "the 'messages' expression 'events' yields null, not a list" in msg


# --- 2. an unknown input format is a usage error ---------------------------------------------------

@pytest.mark.parametrize("cmd", [
    ["audit", "{f}", "-o", "-"], ["show", "{f}"], ["convert", "{f}", "-o", "{tmp}/x.json"],
    ["claims", "{f}"], ["check", "{f}"], ["repair", "{f}", "-o", "{tmp}/r.json"],
])
@pytest.mark.parametrize("flag", ["--input-format", "--format"])
def test_unknown_input_format_is_rejected_up_front(cmd, flag, tmp_path):
    f = EX / "traces" / "openai_chat.json"
    args = [a.format(f=f, tmp=tmp_path) for a in cmd]
    # --format chooses the output now (an input format's name there is the deprecated spelling): an
    # unknown name is refused naming the output formats and, for the input, the known input formats
    r = run(*args, flag, "jsn")
    assert r.exit_code == 2, (cmd, r.stderr)
    err = one_line(r.stderr)
    assert "'jsn' is not one of" in err and all(n in err for n in KNOWN.split(", ")), err
    assert "skipped" not in err


def test_eval_trace_format_rejects_unknown_names(tmp_path):
    r = run("eval", "--trace-format", "jsn", "--pred", tmp_path / "p.jsonl", "--gold", tmp_path / "g.json")
    assert r.exit_code == 2 and "'jsn' is not one of" in one_line(r.stderr)


# --- 3. skip lines name the file (and the record) --------------------------------------------------

def test_skip_lines_name_the_file_and_record(tmp_path):
    silent = [{"role": "system", "content": "You help."}, {"role": "user", "content": "hello"}]
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "run.json").write_text(json.dumps(silent))
    multi = tmp_path / "c.jsonl"
    multi.write_text(json.dumps({"messages": silent}) + "\n" + json.dumps({"messages": silent}) + "\n")
    r = run("audit", tmp_path, "-q", "-o", "-")
    assert r.exit_code == 1
    expected = [
        f"skipped: {tmp_path / 'a' / 'run.json'} (run run): run has no decision steps (no agent message): "
        "nothing to diagnose",
        f"skipped: {tmp_path / 'b' / 'run.json'} (run run): run has no decision steps (no agent message): "
        "nothing to diagnose",
        f"skipped: {multi}, record 0 (run c#0): run has no decision steps (no agent message): nothing to diagnose",
        f"skipped: {multi}, record 1 (run c#1): run has no decision steps (no agent message): nothing to diagnose",
    ]
    assert one_line(r.stderr) == " ".join(expected)  # rich wraps long lines at spaces
    # the same lines with worker processes
    r2 = run("audit", tmp_path, "-q", "-j", "2", "-o", "-")
    assert r2.exit_code == 1 and one_line(r2.stderr) == " ".join(expected)


# --- 4. UTF-16/32 files and the non-UTF-8 warning of skipped runs ----------------------------------

MSGS = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Where is my order?"},
        {"role": "assistant", "content": "Let me look."}]


@pytest.mark.parametrize("encoding,label,name", [
    ("utf-16", "UTF-16", "UTF-16"), ("utf-16-le", "UTF-16", "UTF-16LE"), ("utf-16-be", "UTF-16", "UTF-16BE"),
    ("utf-32", "UTF-32", "UTF-32"), ("utf-32-le", "UTF-32", "UTF-32LE"), ("utf-32-be", "UTF-32", "UTF-32BE"),
])
def test_wide_encodings_are_named(tmp_path, encoding, label, name):
    p = tmp_path / "wide.json"
    p.write_bytes(json.dumps(MSGS).encode(encoding))
    r = run("show", p)
    assert r.exit_code == 2
    assert one_line(r.stderr) == (f"error: {p}: looks {label} encoded; trajaudit reads UTF-8 "
                                  f"(convert it, e.g. iconv -f {name} -t UTF-8 {p} > converted.json)")
    r = run("audit", p, "-q", "-o", "-")
    assert r.exit_code == 1 and f"skipped: {p}: looks {label} encoded" in one_line(r.stderr)


def test_non_utf8_warning_is_printed_when_the_run_is_skipped(tmp_path):
    silent = [{"role": "system", "content": "You help."}, {"role": "user", "content": "caf\udce9?"}]
    bad = tmp_path / "runs" / "latin1.json"
    bad.parent.mkdir()
    bad.write_bytes(json.dumps(silent, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    shutil.copy(EX / "traces" / "openai_chat.json", tmp_path / "runs" / "ok.json")
    r = run("audit", tmp_path / "runs", "-q", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 1
    err = r.stderr.replace("\n", "")
    assert err.count(f"warning: {bad} is not valid UTF-8; undecodable bytes were replaced") == 1
    assert f"skipped: {bad} (run latin1): run has no decision steps" in err
    # a file that is not valid UTF-8 and then fails to load says so in its skip line
    broken = tmp_path / "broken.json"
    broken.write_bytes(b'{"messages": \xe9}')
    r = run("audit", broken, "-q", "-o", "-")
    assert r.exit_code == 1
    assert f"skipped: {broken}: invalid JSON at line 1 column 14: Expecting value (the file is not valid UTF-8; " \
        "undecodable bytes were replaced)" in one_line(r.stderr)


def test_wide_encoding_detection_is_not_fooled_by_non_ascii_utf8():
    text = json.dumps([{"role": "user", "content": "你好，订单在哪里？" * 5}], ensure_ascii=False)
    assert wide_encoding(text.encode("utf-8")) is None
    assert wide_encoding(text.encode("utf-16-le")) == ("UTF-16", "UTF-16LE")
    assert wide_encoding(text.encode("utf-32-be")) == ("UTF-32", "UTF-32BE")
    assert wide_encoding(b'{"messages": []}') is None


# --- 5. show --width and convert -o -------------------------------------------------------------

@pytest.mark.parametrize("width", ["-5", "0", "9"])
def test_show_rejects_widths_below_10(width):
    r = run("show", EX / "traces" / "openai_chat.json", "--width", width)
    assert r.exit_code == 2 and f"Invalid value for '--width': {width} is not in the range x>=10" in one_line(r.stderr)


def test_show_accepts_width_10():
    assert run("show", EX / "traces" / "openai_chat.json", "--width", "10").exit_code == 0


@pytest.mark.parametrize("name", ["x.txt", "x", "x.json.bak"])
def test_convert_rejects_output_suffixes_other_than_json_and_jsonl(tmp_path, name):
    out = tmp_path / name
    r = run("convert", EX / "traces" / "openai_chat.json", "-o", out)
    assert r.exit_code == 2
    assert one_line(r.stderr) == f"error: -o/--output must end in .json, .jsonl or .ndjson, got {str(out)!r}"
    assert not out.exists()
