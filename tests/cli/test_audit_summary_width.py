"""The audit summary on a 160- and an 80-column terminal: one line per run within the width, whole run
ids, categories and bases; the preview uses the room a wide terminal has and is left out on a narrow
one; the categories and never-applied notes wrap between items, never inside one (issue 20's fresh-user
pass: at 160 columns "invalid_invocation" and its count landed on two lines, at 80 the agent, basis and
preview were cut to a few characters)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.cli.common import wrap_items

ROOT = Path(__file__).resolve().parents[2]
INPUTS = [ROOT / "examples" / "data" / "who_and_when", ROOT / "examples" / "data" / "tau_retail_sample.json",
          ROOT / "examples" / "traces" / "openai_chat.json", ROOT / "examples" / "traces" / "magentic_one.json"]


@pytest.mark.parametrize("width", [160, 80])
def test_audit_summary_is_readable_at_160_and_80_columns(tmp_path, width):
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", *map(str, INPUTS), "-o", str(out)], env={"COLUMNS": str(width)},
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    lines = r.stderr.splitlines()
    assert max(len(x) for x in lines) <= width
    diags = [json.loads(x) for x in out.read_text().splitlines()]
    ids = {d["trajectory_id"] for d in diags}
    rows = [x for x in lines if x.split(" ", 1)[0] in ids]
    assert len(rows) == len(diags) == 8  # one line per run, the run id whole
    for d in diags:
        row = next(x for x in rows if x.split(" ", 1)[0] == d["trajectory_id"])
        assert re.search(rf"\s{d['critical_step']}\s", row)
        assert f" {d['category']} " in row and f" {d['confidence']:.2f} " in row
    assert all(any(basis in x for basis in ("finding", "fallback", "weak")) for x in rows)  # never "fin…"
    header = next(x for x in lines if x.startswith("run "))
    if width == 160:
        assert header.split() == ["run", "step", "agent", "category", "conf.", "basis", "preview"]
        ten = next(x for x in rows if x.startswith("10 "))
        assert "The following are the population figures retrieved from data.census" in ten  # > 60 characters
    else:  # too narrow for a useful preview: left out, the other columns keep their words
        assert header.split() == ["run", "step", "agent", "category", "conf.", "basis"]
    cats = Counter(d["category"] for d in diags)
    start = next(i for i, x in enumerate(lines) if x.startswith("categories: "))
    block = [lines[start]] + [x for x in lines[start + 1:start + 4] if x.startswith("  ")]
    for cat, n in cats.items():  # each "category count" on one line
        assert any(re.search(rf"(?:: |, |^  ){cat} {n}(?:,|$)", x) for x in block), (cat, block)
    note = next(i for i, x in enumerate(lines) if x.startswith("note: "))
    said = [lines[note]] + [x for x in lines[note + 1:] if x.startswith("  ")]
    rule_ids = re.findall(r"[a-z_]+\.[a-z_.-]+[a-z]", " ".join([said[0].split("held):", 1)[1], *said[1:]]))
    assert len(rule_ids) >= 2
    assert all(any(re.search(rf"(?:^|\s){re.escape(rid)}(?:,|$)", x) for x in said) for rid in rule_ids)


def test_wrap_items_breaks_between_items():
    text = wrap_items("categories:", ["invention_of_new_information 2", "invalid_invocation 1", "x 1"], 50)
    assert text == "categories: invention_of_new_information 2,\n  invalid_invocation 1, x 1"
    assert wrap_items("h:", ["a" * 30], 10) == "h:\n  " + "a" * 30  # too long for any line: alone on its own
    assert wrap_items("h:", [], 10) == "h:"


@pytest.mark.parametrize("width", [56, 62, 70])
def test_narrow_terminal_leaves_columns_out_instead_of_squeezing_them(tmp_path, width):
    """Below the width where every column fits, whole columns are left out (basis, agent, conf.) and
    the rest keep their words: a fresh-user pass at 50-60 columns saw every column squeezed by rich to
    "r…", "st…", "0.…"."""
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", *map(str, INPUTS), "-o", str(out)], env={"COLUMNS": str(width)},
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    lines = r.stderr.splitlines()
    header = next(x for x in lines if x.startswith("run ")).split()
    full = ["run", "step", "agent", "category", "conf.", "basis"]
    assert header[:2] == ["run", "step"] and "category" in header and "basis" not in header
    assert header == [c for c in full if c in header]  # whole names, in order: no "r…" or "st…"
    expected = {56: ["run", "step", "category"], 62: ["run", "step", "category", "conf."],  # run ids up to 12,
                70: ["run", "step", "agent", "category", "conf."]}  # the longest category 32 characters
    assert header == expected[width]
    diags = [json.loads(x) for x in out.read_text().splitlines()]
    for d in diags:
        row = next(x for x in lines if x.split(" ", 1)[0] == d["trajectory_id"])  # the run id whole
        assert len(row) <= width
        assert re.search(rf"\s{d['critical_step']}\s", row) and f" {d['category']} " in f"{row} "
        assert (f" {d['confidence']:.2f}" in row) == ("conf." in header)


def _audit(tmp_path, files, width):
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", *map(str, files), "-o", str(out)], env={"COLUMNS": str(width)},
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    lines = r.stderr.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("run ")) + 2  # after the header's rule
    assert max(len(x) for x in lines[:start + len(files)]) <= width
    return lines[0], lines[start - 2].split(), lines[start:start + len(files)]


LONG = ["a-very-long-run-identifier-that-goes-on-and-off", "a-very-long-run-identifier-that-goes-on-and-on"]


def _long_id_files(tmp_path: Path) -> list[Path]:
    """The example OpenAI run saved once under each of the :data:`LONG` ids (the file name is its id)."""
    files = [tmp_path / f"{rid}.json" for rid in LONG]
    for f in files:
        f.write_text((ROOT / "examples" / "traces" / "openai_chat.json").read_text())
    return files


@pytest.mark.parametrize("width", [200, 160])
def test_long_run_ids_are_whole_when_the_width_allows(tmp_path, width):
    """A fresh-user pass saw both ids as "a-very-long-run…" at 200 columns, the preview drawn."""
    files = _long_id_files(tmp_path)
    _, header, rows = _audit(tmp_path, files, width)
    assert header[-1] == "preview"
    assert [row.split()[0] for row in rows] == LONG
    assert all('book_flight({"flight": "TP1940"})' in row for row in rows)


@pytest.mark.parametrize("width", [120, 100, 80, 60])
def test_long_run_ids_give_way_to_the_preview_but_stay_told_apart(tmp_path, width):
    files = _long_id_files(tmp_path)
    _, header, rows = _audit(tmp_path, files, width)
    assert header[-1] == ("preview" if width >= 100 else "basis" if width == 80 else "conf.")
    cells = [row.split()[0] for row in rows]
    assert len(set(cells)) == 2 and all("…" in c for c in cells)  # cut in the middle: the ends differ
    assert cells[0].startswith("a-very-l") and cells[0].endswith("and-off") and cells[1].endswith("-and-on")
    assert len(cells[0]) == {120: 38, 100: 18, 80: 16, 60: 16}[width]  # 40 at most, 16 before the preview goes


def test_equal_run_ids_of_different_files_name_their_file(tmp_path):
    """``audit A/10.json B/10.json``: both runs are "10"; the rows say which file each is."""
    files = []
    for folder in ("A", "B"):
        (tmp_path / folder).mkdir()
        files.append(tmp_path / folder / "10.json")
        files[-1].write_text((ROOT / "examples" / "traces" / "openai_chat.json").read_text())
    extra = ROOT / "examples" / "traces" / "magentic_one.json"
    _, _, rows = _audit(tmp_path, [*files, extra], 160)
    cells = [row.split()[0] for row in rows]
    assert cells[:2] == ["A/10.json:10", "B/10.json:10"]  # the last parts of the paths that tell them apart
    assert cells[2] == "magentic_one"  # a run id of its own stays as it is


@pytest.mark.parametrize("width", [200, 100])
def test_wide_characters_are_measured_in_terminal_cells(tmp_path, width):
    """A CJK character takes two terminal cells: measured as one, a preview with a few of them was cut
    ("東方航空TP19…" at 200 columns with room to spare) and a row of CJK run ids could pass the edge."""
    from rich.cells import cell_len

    text = (ROOT / "examples" / "traces" / "openai_chat.json").read_text().replace("TP1940", "東方航空TP1940")
    files = [tmp_path / "cjk.json", tmp_path / "長い実行識別子の名前がここにあります一.json",
             tmp_path / "長い実行識別子の名前がここにあります二.json"]
    for f in files:
        f.write_text(text, encoding="utf-8")
    _, header, rows = _audit(tmp_path, files, width)
    assert header[-1] == "preview" and len(rows) == 3
    assert max(cell_len(row) for row in rows) <= width
    cells = [row.split()[0] for row in rows]
    if width == 200:
        assert all(row.endswith('book_flight({"flight": "東方航空TP1940"})') for row in rows)
        assert cells == ["cjk", files[1].stem, files[2].stem]
    else:  # cut in the middle to the column's 18 cells, the ends that tell them apart kept
        assert cells[1:] == ["長い実行…ります一", "長い実行…ります二"]


@pytest.mark.parametrize("width", [160, 100])
def test_run_ids_with_control_characters_are_measured_as_shown(tmp_path, width):
    """The console shows a BEL as ``\\x07`` (4 cells): sized on the raw id (one character), the column
    was too narrow and rich cut both ids at their end ("run\\x07-with-bell…"), so they looked alike."""
    text = (ROOT / "examples" / "traces" / "openai_chat.json").read_text()
    ids = [f"run\x07-with-bell-and-a-long-name-{i:04d}" for i in (1, 2)]
    files = [tmp_path / f"{rid}.json" for rid in ids]
    for f in files:
        f.write_text(text, encoding="utf-8")
    _, header, rows = _audit(tmp_path, files, width)
    cells = [row.split()[0] for row in rows]
    shown = [rid.replace("\x07", "\\x07") for rid in ids]
    if width == 160:  # room for the whole ids (38 cells as shown)
        assert cells == shown
    else:  # cut in the middle, the ends that tell them apart kept
        assert len(set(cells)) == 2 and all("…" in c for c in cells)
        assert cells[0].endswith("-0001") and cells[1].endswith("-0002") and cells[0].startswith("run\\x07")
