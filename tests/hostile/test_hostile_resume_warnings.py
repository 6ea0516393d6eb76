"""`audit --resume` on a file it did not write: lines without a resume key (a plain `audit`) and lines
made with other options are kept, their runs audited again, and the summary says so (a fresh-user pass
found the duplicates appended silently)."""

from __future__ import annotations

import json

from hostile_kit import cli, good_run, one_line, write_jsonl


def test_resume_warns_about_lines_it_cannot_recognise(tmp_path):
    runs = write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}")) for i in range(3)])
    plain = tmp_path / "plain.jsonl"
    assert cli("audit", runs, "-q", "-o", plain).exit_code == 0
    out = tmp_path / "out.jsonl"
    out.write_text("".join(plain.read_text().splitlines(keepends=True)[:2]), encoding="utf-8")
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
