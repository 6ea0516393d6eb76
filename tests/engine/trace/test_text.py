"""Trace text (engine/trace/text.py): JSONL lines end at a newline only."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.trace.text import wide_encoding


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(text: str) -> str:
    return " ".join(text.split())


MSGS = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Where is my order?"},
        {"role": "assistant", "content": "Let me look."}]


def test_jsonl_lines_end_at_newline_only(tmp_path):
    """A JSON string may hold a raw U+2028 (json.dumps(..., ensure_ascii=False) writes one): the JSONL
    reader split the line there, lost the record and shifted the record numbers."""

    from trajaudit import load_many

    recs = [{"messages": [{"role": "user", "content": f"line one{sep}line two"}, {"role": "assistant", "content": "ok"}]}
            for sep in ("\u2028", "\u2029", "\x85", "\x1c")] + [{"messages": [{"role": "user", "content": "hi"}]}]
    src = tmp_path / "runs.jsonl"
    src.write_text("\r\n".join(json.dumps(r, ensure_ascii=False) for r in recs) + "\r\n", encoding="utf-8")
    res = load_many([src])
    assert res.problems == [] and [t.source.record for t in res.trajectories] == [0, 1, 2, 3, 4]
    assert res.trajectories[0].steps[0].content == "line one\u2028line two"


@pytest.mark.parametrize("encoding,label,name", [
    ("utf-16", "UTF-16", "UTF-16"), ("utf-16-le", "UTF-16", "UTF-16LE"), ("utf-16-be", "UTF-16", "UTF-16BE"),
    ("utf-32", "UTF-32", "UTF-32"), ("utf-32-le", "UTF-32", "UTF-32LE"), ("utf-32-be", "UTF-32", "UTF-32BE"),
])
def test_wide_encodings_are_named(tmp_path, encoding, label, name):
    p = tmp_path / "wide.json"
    p.write_bytes(json.dumps(MSGS).encode(encoding))
    r = cli("show", p)
    assert r.exit_code == 2
    assert one_line(r.stderr) == (f"error: {p}: looks {label} encoded; trajaudit reads UTF-8 "
                                  f"(convert it, e.g. iconv -f {name} -t UTF-8 {p} > converted.json)")
    r = cli("audit", p, "-q", "-o", "-")  # the file skipped with the reason; no run loaded at all: exit 2
    assert r.exit_code == 2 and f"skipped: {p}: looks {label} encoded" in one_line(r.stderr)


def test_wide_encoding_detection_is_not_fooled_by_non_ascii_utf8():
    text = json.dumps([{"role": "user", "content": "你好，订单在哪里？" * 5}], ensure_ascii=False)
    assert wide_encoding(text.encode("utf-8")) is None
    assert wide_encoding(text.encode("utf-16-le")) == ("UTF-16", "UTF-16LE")
    assert wide_encoding(text.encode("utf-32-be")) == ("UTF-32", "UTF-32BE")
    assert wide_encoding(b'{"messages": []}') is None
