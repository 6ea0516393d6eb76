"""Trace text (engine/trace/text.py): JSONL lines end at a newline only."""

from __future__ import annotations

import json


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
