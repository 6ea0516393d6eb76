"""trajaudit/cli/common.py: what every command shares: skip lines naming the file and record, the
non-UTF-8 warning once per file, outputs written whatever the trace text holds (lone surrogates)."""

from __future__ import annotations

import json
import shutil

from cli_kit import LONE, run_no_traceback
from click.testing import CliRunner
from conftest import ROOT

from trajaudit.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


_run = run_no_traceback


EX = ROOT / "examples"


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_skip_lines_name_the_file_and_record(tmp_path):
    silent = [{"role": "system", "content": "You help."}, {"role": "user", "content": "hello"}]
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "run.json").write_text(json.dumps(silent))
    multi = tmp_path / "c.jsonl"
    multi.write_text(json.dumps({"messages": silent}) + "\n" + json.dumps({"messages": silent}) + "\n")
    r = cli("audit", tmp_path, "-q", "-o", "-")
    # no run loaded (none has an agent message): each is named, then exit 2, nothing written
    assert r.exit_code == 2 and r.stdout == ""
    expected = [
        f"skipped: {tmp_path / 'a' / 'run.json'} (run run): run has no decision steps (no agent message): "
        "nothing to diagnose",
        f"skipped: {tmp_path / 'b' / 'run.json'} (run run): run has no decision steps (no agent message): "
        "nothing to diagnose",
        f"skipped: {multi}, record 0 (run c#0): run has no decision steps (no agent message): nothing to diagnose",
        f"skipped: {multi}, record 1 (run c#1): run has no decision steps (no agent message): nothing to diagnose",
    ]
    files = f"{tmp_path / 'a' / 'run.json'}, {tmp_path / 'b' / 'run.json'}, {multi}"
    expected.append(f"error: no trajectory could be loaded from {files} (each skipped input is named above): nothing "
                    "was written")
    assert one_line(r.stderr) == " ".join(expected)  # rich wraps long lines at spaces
    # the same lines with worker processes
    r2 = cli("audit", tmp_path, "-q", "-j", "2", "-o", "-")
    assert r2.exit_code == 2 and one_line(r2.stderr) == " ".join(expected)


def test_non_utf8_warning_is_printed_when_the_run_is_skipped(tmp_path):
    silent = [{"role": "system", "content": "You help."}, {"role": "user", "content": "caf\udce9?"}]
    bad = tmp_path / "runs" / "latin1.json"
    bad.parent.mkdir()
    bad.write_bytes(json.dumps(silent, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    shutil.copy(EX / "traces" / "openai_chat.json", tmp_path / "runs" / "ok.json")
    r = cli("audit", tmp_path / "runs", "-q", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 1
    err = r.stderr.replace("\n", "")
    assert err.count(f"warning: {bad} is not valid UTF-8; undecodable bytes were replaced") == 1
    assert f"skipped: {bad} (run latin1): run has no decision steps" in err
    # a file that is not valid UTF-8 and then fails to load says so in its skip line
    broken = tmp_path / "broken.json"
    broken.write_bytes(b'{"messages": \xe9}')
    r = cli("audit", broken, "-q", "-o", "-")
    assert r.exit_code == 2 and r.stdout == ""  # nothing loaded at all: a usage error, nothing written
    assert f"skipped: {broken}: invalid JSON at line 1 column 14: Expecting value (the file is not valid UTF-8; " \
        "undecodable bytes were replaced)" in one_line(r.stderr)


def test_non_utf8_trace_warns_once_per_file_without_changing_the_exit_code(tmp_path):
    msgs = [{"role": "system", "content": "You help."}, {"role": "user", "content": "caf\udce9 order?"},
            {"role": "assistant", "content": "Let me look."}]
    bad = tmp_path / "latin1.json"
    bad.write_bytes(json.dumps(msgs, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    good = tmp_path / "ok.json"
    good.write_text(json.dumps(msgs[:1] + [{"role": "user", "content": "cafe"}] + msgs[2:]))
    warning = f"warning: {bad} is not valid UTF-8; undecodable bytes were replaced"
    for args, code in ((["show", bad], 0), (["check", bad, good, "--rules", "generic.protocol"], 0),
                       (["audit", bad, good, "-o", tmp_path / "d.jsonl", "-q"], 0)):
        r = cli(*args)
        assert r.exit_code == code, (args, r.output)
        assert r.stderr.replace("\n", "").count(warning) == 1, (args, r.stderr)
        assert str(good) + " is not" not in r.stderr
    assert "not valid UTF-8" not in cli("show", good).stderr


def test_a_lone_surrogate_in_a_message_does_not_crash_any_output(tmp_path):
    """Was: UnicodeEncodeError tracebacks ('surrogates not allowed') from convert, repair, show and
    audit --report: every writer encoded strictly. Now the surrogate is written as the escape
    ``\\ud800`` (in JSON the same string again)."""
    src = tmp_path / "run.json"
    src.write_text(LONE)
    ir = tmp_path / "ir.json"
    assert _run("convert", src, "-o", ir).exit_code == 0
    assert json.loads(ir.read_text(encoding="utf-8"))["steps"][1]["content"] == "refund order \ud800 now"
    out = tmp_path / "resumed.json"
    res = _run("repair", src, "--template", "-o", out)
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text(encoding="utf-8"))[1]["content"] == "refund order \ud800 now"
    for report in ("r.html", "r.md"):
        res = _run("audit", src, "-q", "-o", tmp_path / "d.jsonl", "--report", tmp_path / report)
        assert res.exit_code == 0, res.output
        assert (tmp_path / report).read_bytes().decode("utf-8")  # valid UTF-8
    res = _run("show", src)
    assert res.exit_code == 0 and "refund order \\ud800 now" in res.output


def test_markup_like_text_is_printed_literally(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps([{"role": "user", "content": "[/bold] hi"},
                             {"role": "assistant", "name": "[/x]agent", "content": "[red]ok[/red]"}]))
    r = invoke("show", p)
    assert r.exit_code == 0 and "[red]ok[/red]" in r.output and "[/x]agent" in r.output
    r = invoke("audit", p, "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 0 and "[/x]agent" in r.output


def test_unwritable_output_is_an_error_not_a_traceback(tmp_path, tau_file):
    r = invoke("audit", tau_file, "--strategy", "first", "-o", tmp_path / "no" / "such" / "d.jsonl")
    assert r.exit_code == 2 and "does not exist; create it first" in r.output and "Traceback" not in r.output
    r = invoke("convert", tau_file, "-o", tmp_path / "no" / "x.json")
    assert r.exit_code == 2


def test_trace_text_with_terminal_escapes_is_shown_not_obeyed(tmp_path):
    # an agent's message or a task holding ESC sequences (recolour, retitle, erase line) is printed with
    # its control characters as \xNN by every console the CLI prints through (show's table, the audit
    # summary's task line), never as raw bytes a terminal would obey
    from click.testing import CliRunner

    from trajaudit.cli import main
    from trajaudit.cli.common import terminal_safe

    run = tmp_path / "m.json"
    run.write_text(json.dumps([{"role": "user", "content": "hi \x1b[31mred\x1b]0;TITLE\x07"},
                               {"role": "assistant", "content": "ok \x1b[2K done\r"}]))
    shown = CliRunner().invoke(main, ["show", str(run)])
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.output and "\x07" not in shown.output
    assert "hi \\x1b[31mred\\x1b]0;TITLE\\x07" in shown.output and "ok \\x1b[2K done" in shown.output
    audited = CliRunner().invoke(main, ["audit", str(run), "-o", str(tmp_path / "o.jsonl")])
    assert "\x1b" not in audited.output and "ok \\x1b[2K" in audited.output  # the summary's preview
    assert terminal_safe("a\tb\nc\x1b\x7f\x9bé") == "a\tb\nc\\x1b\\x7f\\x9bé"


def test_a_tool_call_preview_shows_escapes_as_the_other_columns_do(tmp_path):
    """A tool call's preview (its arguments as JSON) showed ESC as \\u001b while content showed \\x1b
    (fresh-user pass): both show \\x1b now, and the JSON escapes of a backslash, a newline and a quote
    stay as they were."""
    from click.testing import CliRunner

    from trajaudit.cli import main
    from trajaudit.engine.trace.ir import Step, ToolCall

    args = {"text": "\x1b[31mred\x1b[0m", "lit": "\\u001b", "nl": "a\nb\"c", "c": "\x00\x1f\x7f"}
    step = Step(index=1, kind="agent", role="assistant", tool_calls=(ToolCall(name="echo", arguments=args, id="1"),))
    assert step.preview(500) == ('echo({"text": "\x1b[31mred\x1b[0m", "lit": "\\\\u001b", "nl": "a\\nb\\"c", '
                                 '"c": "\x00\x1f\x7f"})')
    run = tmp_path / "m.json"
    run.write_text(json.dumps([
        {"role": "user", "content": "colour \x1b[31mred\x1b[0m please"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "echo", "arguments": json.dumps({"text": "\x1b[31mred\x1b[0m"})}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "echo", "content": "done"}]))
    shown = CliRunner().invoke(main, ["show", str(run), "--width", "200"])
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.output and "u001b" not in shown.output
    assert 'echo({"text": "\\x1b[31mred\\x1b[0m"})' in shown.output
    assert "colour \\x1b[31mred\\x1b[0m please" in shown.output


def test_a_rule_message_shows_escapes_as_the_previews_do(tmp_path):
    """A rule message rendering a list (``states {ungrounded}``) showed ESC as \\u001b (its JSON
    escape) in the check table, the SARIF message and the HTML report, while a string field and the
    previews showed the character (fresh-user pass): a message field keeps the character in lists
    too, so the table shows \\x1b, SARIF and the HTML report its name (as they do for any text)."""
    from click.testing import CliRunner

    from trajaudit.cli import main
    from trajaudit.engine.dsl.template import field_text

    assert field_text(["a\x1b[0m", "\\u001b", "x\ny"]) == '["a\x1b[0m", "\\\\u001b", "x\\ny"]'
    assert field_text("a\x1b") == "a\x1b"
    pack = tmp_path / "p.yaml"
    pack.write_text("pack: p\nrules:\n  - id: esc\n    type: PROTOCOL\n    severity: error\n"
                    "    guard: step.kind == \"user\"\n    let:\n      parts: '[step.content]'\n"
                    "    assert: len(parts) == 0\n    message: \"holds {parts}\"\n")
    run = tmp_path / "m.json"
    run.write_text(json.dumps([{"role": "user", "content": "colour \x1b[31mred"},
                               {"role": "assistant", "content": "ok"}]))
    table = CliRunner().invoke(main, ["check", str(run), "--rules", str(pack)], env={"COLUMNS": "300"})
    assert table.exit_code == 1, table.output
    assert "u001b" not in table.output and "\x1b" not in table.output
    assert 'holds ["colour \\x1b[31mred"]' in one_line(table.output)
    sarif = tmp_path / "r.sarif"
    CliRunner().invoke(main, ["check", str(run), "--rules", str(pack), "--format", "sarif", "-o", str(sarif)])
    (result,) = json.loads(sarif.read_text(encoding="utf-8"))["runs"][0]["results"]
    assert result["message"]["text"] == 'holds ["colour ⟨U+001B⟩[31mred"] (run m, step 0)'  # CI outputs name it
    html = tmp_path / "r.html"
    CliRunner().invoke(main, ["audit", str(run), "--rules", str(pack), "--report", str(html), "-q"])
    page = html.read_text(encoding="utf-8")
    assert "u001b" not in page and "\x1b" not in page and "colour ⟨U+001B⟩[31mred" in page


def test_bidi_controls_and_line_separators_are_shown_not_obeyed(tmp_path):
    """U+202E (right-to-left override), U+2028/2029, U+200E/F and the isolates U+2066-2069 reached the
    terminal raw through previews (``trajaudit show``: fresh-user pass), reordering or breaking what
    follows them, while ESC was escaped: they are shown as \\u202e etc. by the terminal-safe console."""
    from click.testing import CliRunner

    from trajaudit.cli import main
    from trajaudit.cli.common import terminal_safe

    assert terminal_safe("a\u202eb\u2028c\u2029d\u200e\u200f\u2066\u2067\u2068\u2069\u061ce\u200bé") \
        == "a\\u202eb\\u2028c\\u2029d\\u200e\\u200f\\u2066\\u2067\\u2068\\u2069\\u061ce\u200bé"
    run = tmp_path / "m.json"
    run.write_text(json.dumps([{"role": "user", "content": "pay \u202e0001$ now\u2028line\u2066x\u2069"},
                               {"role": "assistant", "content": "ok \u200f done"}]))
    shown = CliRunner().invoke(main, ["show", str(run)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert not any(c in shown.output for c in "\u202e\u2028\u2066\u2069\u200f")
    # (a preview is one line: the separator U+2028 is a space there)
    assert "pay \\u202e0001$ now line\\u2066x\\u2069" in shown.output and "ok \\u200f done" in shown.output


def test_log_lines_show_trace_text_as_the_terminal_does():
    """A log line (stderr, WARNING by default) can quote trace text — "rule R raised at step 3 of RUN"
    names the run id — and went out raw: an OSC sequence in the id retitled the terminal. The CLI's log
    handler formats through terminal_safe."""
    import logging
    import subprocess
    import sys

    from trajaudit.cli.terminal import SafeLogFormatter

    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "of %s", ("r\x1b]0;t\x07\u202e",), None)
    assert SafeLogFormatter("%(levelname)s %(message)s").format(rec) == "WARNING of r\\x1b]0;t\\x07\\u202e"
    script = ("import logging\nfrom trajaudit.cli import main\ntry:\n    main(['rules', '--help'])\nexcept SystemExit:\n"
              "    pass\nlogging.getLogger('trajaudit.x').warning('rule raised at step 3 of %s', 'r\\x1b]0;t\\x07')\n")
    err = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stderr
    assert err == "WARNING trajaudit.x: rule raised at step 3 of r\\x1b]0;t\\x07\n"
