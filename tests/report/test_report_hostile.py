"""Reports show trace text as it is: control characters and bidi overrides by name, Markdown links
inert (a trace is untrusted input)."""

from __future__ import annotations

import json

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
        assert "<script>" not in doc
    assert "&lt;script&gt;" in html
    assert "[click](javascript" not in md and "\\[click\\](javascript" in md
