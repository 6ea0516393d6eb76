"""Class 4: ``-o`` naming a trace inside a folder (or glob) being audited.

Was: the trace was overwritten, exit 0 (the guard covered explicit paths, symlinks and hard links,
not files found by expanding a folder or glob). Now every output is compared with every input file
after expansion: exit 2 naming both, nothing written."""

from __future__ import annotations

import json
import os

import pytest
from hostile_kit import cli, good_run, one_line, snapshot, write_json


@pytest.mark.parametrize("how", ["folder", "glob", "nested", "link"])
def test_an_output_that_is_an_expanded_input_is_refused(tmp_path, how):
    runs = tmp_path / "runs"
    (runs / "sub").mkdir(parents=True)
    victim = write_json(runs / "sub" / "b.json", good_run("b"))
    write_json(runs / "a.json", good_run("a"))
    target = victim
    if how == "link":
        target = tmp_path / "alias.json"
        os.symlink(victim, target)
    given = {"folder": runs, "nested": runs, "link": runs, "glob": str(runs / "**" / "*.json")}[how]
    before = snapshot(runs)
    for args in (("audit", given, "-q", "-o", target), ("check", given, "--rules", "generic", "-o", target),
                 ("convert", victim, "-o", target)):
        r = cli(*args)
        assert r.exit_code == 2, (args, r.output)
        assert f"is the input file '{victim}': writing it would overwrite the trace" in one_line(r.stderr)
        assert snapshot(runs) == before
    assert json.loads(victim.read_text())["id"] == "b"


def test_eval_save_pred_and_report_in_the_dataset_folder_are_refused(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_json(runs / "a.json", good_run("a"))
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    before = snapshot(runs)
    for opt in ("--save-pred", "-o"):
        r = cli("eval", runs, "--gold", gold, "-s", "offline", opt, runs / "a.json")
        assert r.exit_code == 2 and "is the input file" in one_line(r.stderr), r.output
    assert snapshot(runs) == before
