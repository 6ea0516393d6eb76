"""Review finding: engine/trace/loader.py and eval/evaluate.py had grown past the ~400-line guideline. The
forced-format logic lives in engine/trace/forced_format.py, the run bookkeeping of eval in eval/runs.py;
both are exercised here on real files (the behaviour is covered in test_forced_format_batches.py
and test_eval_run_length.py)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from trajaudit import load
from trajaudit.eval.gold_items import GoldItem
from trajaudit.eval.runs import ScoredRun, find_run, index_trajectories, run_length, step_positions

DIALECTS = Path(__file__).resolve().parent / "data" / "dialects"


def test_loader_and_evaluate_stay_within_the_module_size_guideline():
    for name in ("trajaudit.engine.trace.loader", "trajaudit.eval.evaluate"):  # eval.evaluate is also a function name
        n = len(Path(importlib.import_module(name).__file__).read_text().splitlines())
        assert n <= 400, f"{name}: {n} lines"


def test_run_bookkeeping_counts_source_messages(tmp_path):
    data = tmp_path / "anthropic_parallel.jsonl"
    data.write_text((DIALECTS / "anthropic_parallel.jsonl").read_text().splitlines()[0] + "\n")
    t = load(data, record=0)
    assert len(t.steps) == 6 and len(json.loads(data.read_text())["messages"]) == 4
    assert step_positions(t) == (0, 1, 2, 2, 2, 3) and run_length(t) == 4 and run_length(None) is None
    r = ScoredRun(GoldItem(t.id, 2), None, t, None, None, None, positions=step_positions(t))
    assert (r.length, r.position(4), r.step_at(2), r.step_at(3)) == (4, 2, 2, 5)
    index = index_trajectories([t])
    assert find_run(index, "no-such-id", GoldItem("x", 0, file=str(data), record=0), None) is t
