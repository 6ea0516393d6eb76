"""No command writes an output file over a file it was given to read (trace, gold, predictions, tools,
pack, mapping): exit 2 naming both, the input left as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main

EX = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def files(tmp_path, tau_file):
    run = tmp_path / "run.json"
    run.write_text(tau_file.read_text(encoding="utf-8"), encoding="utf-8")
    tools = tmp_path / "tools.json"
    shutil.copy(tau_file.parent / "tools.json", tools)
    gold = tmp_path / "gold.json"
    shutil.copy(tau_file.parent / "ground_truth.json", gold)
    cite = tmp_path / "cite.json"
    shutil.copy(EX / "citation" / "ev_market.json", cite)
    return {"run": run, "tools": tools, "gold": gold, "cite": cite}


@pytest.mark.parametrize("args, victim, option", [
    (["check", "{run}", "--rules", "generic", "-o", "{run}"], "run", "-o/--output"),
    (["check", "{run}", "--tools", "{tools}", "-o", "{tools}"], "tools", "-o/--output"),
    (["audit", "{run}", "--tools", "{tools}", "-o", "{tools}"], "tools", "-o/--output"),
    (["eval", "{run}", "--gold", "{gold}", "-s", "first", "-o", "{gold}"], "gold", "-o/--output"),
    (["eval", "{run}", "--gold", "{gold}", "-s", "first", "--save-pred", "{run}"], "run", "--save-pred"),
    (["cite", "{cite}", "--html", "{cite}"], "cite", "--html"),
    (["cite", "{cite}", "--log", "{cite}"], "cite", "--log"),
])
def test_outputs_never_replace_inputs(files, args, victim, option):
    before = files[victim].read_bytes()
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2, r.output
    assert f"{option} {str(files[victim])!r} is the input file" in r.output
    assert files[victim].read_bytes() == before



@pytest.mark.parametrize("args, option, bad", [
    (["audit", "{run}", "-o", "{tmp}/missing/d.jsonl", "--report", "{tmp}/r.html"], "-o/--output", "{tmp}/missing/d.jsonl"),
    (["audit", "{run}", "-o", "{tmp}/d.jsonl", "--report", "{tmp}/missing/r.md"], "--report", "{tmp}/missing/r.md"),
    (["audit", "{run}", "-o", "{tmp}/d.jsonl", "--report", "{run}/r.html"], "--report", "{run}/r.html"),
    (["eval", "{run}", "--gold", "{gold}", "-s", "first", "--save-pred", "{tmp}/missing/p.jsonl"], "--save-pred",
     "{tmp}/missing/p.jsonl"),
])
def test_an_output_folder_that_does_not_exist_is_refused_before_the_batch(files, tmp_path, args, option, bad):
    """Was: the batch was audited first and the write failed at the end ("…: No such file or
    directory"): with -o in a missing folder neither the diagnoses nor the report were written."""
    names = {"tmp": tmp_path, **{k: str(v) for k, v in files.items()}}
    r = CliRunner().invoke(main, [a.format(**names) for a in args])
    assert r.exit_code == 2, r.output
    out = bad.format(**names)
    why = "does not exist; create it first" if "missing" in bad else "is a file, not a folder"
    assert f"error: {option} {out!r}: the folder {str(Path(out).parent)!r} {why}" in " ".join(r.output.split())
    assert "audited" not in r.output and not list(tmp_path.glob("[dr].*"))  # nothing was audited or written
