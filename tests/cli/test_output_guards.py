"""No command writes an output file over a file it was given to read (trace, gold, predictions, tools,
pack, mapping): exit 2 naming both, the input left as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main

# a legal JSON escape: json.loads gives a lone surrogate, which strict UTF-8 cannot encode
LONE = '[{"role": "system", "content": "policy"}, {"role": "user", "content": "refund order \\ud800 now"}, ' \
       '{"role": "assistant", "content": "Refunded 12 dollars."}]'


def _run(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


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


def test_an_output_path_that_is_the_input_file_is_refused(tmp_path):
    """Was: ``audit runs.jsonl -o runs.jsonl`` (and repair/convert -o FILE) silently replaced the
    trace with diagnoses (or a prefix): the input was lost. Now: exit 2 naming both, file untouched."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(json.loads(LONE.replace("\\ud800", "W1"))) + "\n")
    before = runs.read_bytes()
    for args in (("audit", runs, "-q", "-o", runs), ("convert", runs, "-o", runs)):
        res = _run(*args)
        assert res.exit_code == 2
        assert f"-o/--output '{runs}' is the input file '{runs}': writing it would overwrite the trace" \
            in " ".join(res.output.split())
        assert runs.read_bytes() == before
    src = tmp_path / "run.json"
    src.write_text(runs.read_text())
    res = _run("repair", src, "--template", "-o", src)
    assert res.exit_code == 2 and "is the input file" in res.output and src.read_text() == runs.read_text()
    # a file found by expanding an audited folder is an input too (issue 18): the diagnoses written into
    # the folder before are read as traces by the next audit of it, so replacing them is refused
    assert _run("audit", tmp_path, "-q", "-o", tmp_path / "d.jsonl").exit_code in (0, 1)
    before = (tmp_path / "d.jsonl").read_bytes()
    res = _run("audit", tmp_path, "-q", "-o", tmp_path / "d.jsonl")
    assert res.exit_code == 2 and "is the input file" in res.output and (tmp_path / "d.jsonl").read_bytes() == before
