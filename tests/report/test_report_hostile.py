"""Reports show trace text as it is: control characters and bidi overrides by name, Markdown links
inert (a trace is untrusted input)."""

from __future__ import annotations

import json

import report_page
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.report.markdown import visible


def test_visible_names_controls_and_bidi_overrides_only():
    assert visible("a\x00b\u202ec\u2066d") == "a⟨U+0000⟩b⟨U+202E⟩c⟨U+2066⟩d"
    assert visible("tab\tnl\ncr\r é ✓ \u200b") == "tab\tnl\ncr\r é ✓ \u200b"  # kept as is


def test_audit_reports_show_hostile_text_inert(tmp_path):
    hostile = "see [click](javascript:alert(1)) \x00 evil\u202etxt.exe <script>x</script>"
    msgs = [{"role": "user", "content": "find the file"},
            {"role": "assistant", "content": f"The file is {hostile}"}]
    src = tmp_path / "run.json"
    src.write_text(json.dumps(msgs), encoding="utf-8")
    html_p, md_p = tmp_path / "r.html", tmp_path / "r.md"
    for rep in (html_p, md_p):
        r = CliRunner().invoke(main, ["audit", str(src), "-o", str(tmp_path / "d.jsonl"), "--report", str(rep), "-q"])
        assert r.exit_code == 0, r.output
    html = html_p.read_text(encoding="utf-8")
    md = md_p.read_text(encoding="utf-8")
    for doc in (html, md):
        assert "\x00" not in doc and "\u202e" not in doc
        assert "⟨U+0000⟩" in doc and "evil⟨U+202E⟩txt.exe" in doc
        assert "<script>x" not in doc
    assert "\\u003cscript\\u003ex\\u003c/script\\u003e" in html  # JSON escapes in the data: no tag can open
    step = report_page.details(html)[0]["steps"][1]["x"]
    assert step.endswith("evil⟨U+202E⟩txt.exe <script>x</script>")  # shown as text by the page (textContent)
    assert "[click](javascript" not in md and "\\[click\\](javascript" in md


def test_script_json_cannot_end_its_script_block_and_round_trips():
    from trajaudit.report.rundata import script_json

    data = {"x": "</script><!-- <script>alert(1)</script> & \u2028\u2029 \ud800 é"}
    text = script_json(data)
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    text.encode("utf-8")  # valid UTF-8: the lone surrogate is written as its escape
    assert json.loads(text) == data


def test_visible_names_c1_controls_bidi_marks_separators_and_xml_noncharacters():
    """The set of the terminal (``terminal_safe``): the 8-bit CSI U+009B and the other C1 controls,
    the bidi marks and the line/paragraph separators went through the reports raw; U+FFFE/FFFF too,
    which XML 1.0 (JUnit) cannot hold."""
    assert visible("\x7f\x80\x9b2J\x9f \u061c\u200e\u200f \u2028\u2029 \ufffe\uffff") == (
        "⟨U+007F⟩⟨U+0080⟩⟨U+009B⟩2J⟨U+009F⟩ ⟨U+061C⟩⟨U+200E⟩⟨U+200F⟩ ⟨U+2028⟩⟨U+2029⟩ ⟨U+FFFE⟩⟨U+FFFF⟩")
    assert visible("\xa0 \u200b \ufffd \ufdd0 \U0001f600") == "\xa0 \u200b \ufffd \ufdd0 \U0001f600"  # as is


def test_markdown_report_keeps_a_carriage_return_of_a_run_id_on_its_table_row(tmp_path):
    """A lone CR ends a line in Markdown (CommonMark): a run id "r\\rx" split its table row and its
    heading in two. It is a space, as a line feed was."""
    src = tmp_path / "cr.json"
    src.write_text(json.dumps({"id": "r\rx | y", "messages": [
        {"role": "user", "content": "find the file"}, {"role": "assistant", "content": "it is a\rb"}]}))
    md_p = tmp_path / "r.md"
    r = CliRunner().invoke(main, ["audit", str(src), "-o", str(tmp_path / "d.jsonl"), "--report", str(md_p), "-q"])
    assert r.exit_code == 0, r.output
    md = md_p.read_text(encoding="utf-8")
    assert "\r" not in md
    assert "## r x \\| y\n" in md
    (row,) = [x for x in md.split("\n") if x.startswith("| r x")]
    assert row.startswith("| r x \\| y | 1 | ") and row.count(" | ") == 6


def _eval_run(tmp_path, hostile: str):
    """A run whose two assistant steps quote ``hostile``, and its gold file: ``(run file, gold file)``."""
    src = tmp_path / "ev.json"
    src.write_text(json.dumps({"id": "h1", "messages": [
        {"role": "user", "content": "find the file"}, {"role": "assistant", "content": "The file is " + hostile},
        {"role": "assistant", "content": "second " + hostile}]}))
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "h1", "critical_step": 2, "category": "Invalid Invocation"}) + "\n")
    return src, gold


def test_eval_markdown_shows_hostile_previews_inert(tmp_path):
    """``eval --format markdown`` / ``--report x.md`` wrote the misses' previews (trace text) raw: an
    OSC title sequence, the 8-bit CSI, a right-to-left override, a <script> tag and a javascript: link
    reached the file. They are inert as in the audit's Markdown report; a CI's brackets stay."""
    hostile = "evil \x1b]0;pwn\x07 \u202etxt <script>x</script> [c](javascript:a) \x9b2J"
    src, gold = _eval_run(tmp_path, hostile)
    shown = "evil ⟨U+001B⟩]0;pwn⟨U+0007⟩ ⟨U+202E⟩txt &lt;script&gt;x&lt;/script&gt; [c\\](javascript:a) ⟨U+009B⟩2J"
    for out in (["--format", "markdown", "-o", str(tmp_path / "e.md")], ["--report", str(tmp_path / "e2.md")]):
        r = CliRunner().invoke(main, ["eval", str(src), "--gold", str(gold), "-s", "first", "--bootstrap", "20", *out])
        assert r.exit_code == 0, r.output
        md = (tmp_path / out[-1].rsplit("/", 1)[-1]).read_text(encoding="utf-8")
        for raw in ("\x1b", "\x07", "\x9b", "\u202e", "<script>", "[c](javascript"):
            assert raw not in md
        assert f"| h1 | 2 | 1 | 1 | assistant: second {shown} | assistant: The file is {shown} |" in md


def test_eval_table_written_to_a_file_shows_escapes_and_no_markup(tmp_path):
    """``eval -o report.txt`` (the table format) rendered through a plain rich console: a preview holding
    ``[/x]`` was read as a closing markup tag (internal error, exit 2, no file), and ESC sequences went
    into the file raw (``cat report.txt`` obeyed them). The file is written as the terminal shows it."""
    hostile = "evil \x1b]0;pwn\x07 [/x] [bold]B\u202etxt"
    src, gold = _eval_run(tmp_path, hostile)
    out = tmp_path / "report.txt"
    r = CliRunner().invoke(main, ["eval", str(src), "--gold", str(gold), "-s", "first", "--bootstrap", "20",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "assistant: second evil \\x1b]0;pwn\\x07 [/x] [bold]B\\u202etxt" in text
