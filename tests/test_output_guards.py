"""No command writes an output file over a file it was given to read (trace, gold, predictions, tools,
pack, mapping): exit 2 naming both, the input left as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main

EX = Path(__file__).resolve().parents[1] / "examples"


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
