"""The evidence-free baselines (engine/strategies/baselines.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import trajaudit
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.run.pipeline import AuditSpec, audit_one, build_context
from trajaudit.engine.strategies.baselines import RandomDecisionStep

RUN = {"id": "r1", "messages": [
    {"role": "user", "content": "Find the order."},
    *[m for i in range(12) for m in (
        {"role": "assistant", "content": f"thinking {i}", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"n": i})}}]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"})],
    {"role": "assistant", "content": "Done."},
]}


def _pick(path: Path, seed: int = 0) -> int | None:
    ctx = build_context(AuditSpec(strategy="random", config=AuditConfig(seed=seed), default_packs=False))
    t = trajaudit.load(str(path))
    return audit_one(t, "random", ctx).diagnosis.critical_step


def test_random_pick_does_not_depend_on_where_the_file_is(tmp_path: Path) -> None:
    a = tmp_path / "a" / "run.json"
    a.parent.mkdir()
    a.write_text(json.dumps(RUN))
    b = tmp_path / "deeper" / "elsewhere" / "run.json"
    b.parent.mkdir(parents=True)
    shutil.copy(a, b)
    picks = {seed: _pick(a, seed) for seed in range(8)}
    assert picks == {seed: _pick(b, seed) for seed in range(8)}
    # the seed matters (a constant pick would make the baseline meaningless)
    assert len(set(picks.values())) > 1
    assert RandomDecisionStep.name == "random"
