"""The runs the eval harness scores: pairing a gold run with its loaded trajectory, and counting in
source messages, as gold does.

A loaded run is found by id, else by file and record (:func:`index_trajectories`, :func:`find_run`).
Gold step numbers are source message positions; a run's step indexes are those positions only when
it was not renumbered (:func:`~trajaudit.engine.trace.ir.renumbered`: a split Anthropic message, an AgentRx
step of several substeps or none). So a diagnosis is scored at :func:`scored_step`, a run's length
is :func:`run_length` (messages, not steps), and :class:`ScoredRun` converts between step indexes
and positions (:func:`step_positions`). One notion of run length for all of eval (docs/eval.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.trace.ir import Trajectory, renumbered
from trajaudit.eval.gold_items import GoldItem


@dataclass
class ScoredRun:
    """One gold run as :func:`~trajaudit.eval.evaluate.evaluate` scores it: the gold item, the paired
    diagnosis and loaded run (each possibly ``None``), the scored step (a source message position,
    :func:`scored_step`), the normalized category, the agent, the predicted step's index in
    ``traj.steps``, and each step's source message position for a renumbered run."""

    gold: GoldItem
    diag: Diagnosis | None
    traj: Trajectory | None
    step: int | None  # the scored step: a source message position (scored_step)
    category: str | None
    agent: str | None
    index: int | None = None  # the predicted step's index in traj.steps
    positions: tuple[int, ...] | None = None  # each step's source message position, for a renumbered run

    def position(self, k: int) -> int:
        """The source message position of step index ``k``."""
        return self.positions[k] if self.positions is not None and 0 <= k < len(self.positions) else k

    def step_at(self, pos: int | None) -> int | None:
        """The first step index of source message ``pos`` (``pos`` itself for a run not renumbered)."""
        if pos is None or self.positions is None:
            return pos
        return next((k for k, p in enumerate(self.positions) if p == pos), None)

    @property
    def length(self) -> int | None:
        """The run's length in source messages (:func:`run_length`)."""
        return run_length(self.traj)


def scored_step(d: Diagnosis) -> int | None:
    """The step a diagnosis is scored at, in the source's message numbering (what gold labels count):
    ``metadata.source_message`` when it holds an int — a run whose step indexes are not message
    positions (:func:`~trajaudit.engine.trace.ir.renumbered`: an Anthropic message split into several
    steps, an AgentRx step of several substeps; :func:`trajaudit.engine.run.pipeline.with_source_message`
    sets it) — else ``critical_step``. ``None`` when ``critical_step`` is ``None`` (no step, or one
    cleared as out of range by :func:`~trajaudit.eval.runner.check_step_ranges`)."""
    if d.critical_step is None:
        return None
    pos = d.metadata.get("source_message") if isinstance(d.metadata, Mapping) else None
    return pos if isinstance(pos, int) and not isinstance(pos, bool) else d.critical_step


def step_positions(t: Trajectory | None) -> tuple[int, ...] | None:
    """Each step's source message position, for a renumbered run whose steps all carry an int one."""
    if t is None or not renumbered(t):
        return None
    nums = tuple(s.source_number for s in t.steps)
    return nums if all(isinstance(n, int) and not isinstance(n, bool) for n in nums) else None  # type: ignore[return-value]


def run_length(t: Trajectory | None) -> int | None:
    """The run's length in source messages — what gold step numbers count: ``max(source_number) + 1``
    for a renumbered run (:func:`~trajaudit.engine.trace.ir.renumbered`: a split Anthropic message is one
    message of several steps, an AgentRx step without substeps one message of no step), else the
    number of steps. ``None`` without the run."""
    if t is None:
        return None
    positions = step_positions(t)
    return max(positions) + 1 if positions else len(t.steps)


RunIndex = tuple[dict[str, Trajectory], dict[tuple[str, int | None], Trajectory]]


def index_trajectories(trajectories: Iterable[Trajectory] | Mapping[str, Trajectory] | None) -> RunIndex:
    """``(by id, by (file name, record))`` of the loaded runs (the first run wins on a repeated key)."""
    by_id: dict[str, Trajectory] = {}
    by_file: dict[tuple[str, int | None], Trajectory] = {}
    items = trajectories.values() if isinstance(trajectories, Mapping) else (trajectories or [])
    for t in items:
        by_id.setdefault(t.id, t)
        if t.source.file:
            by_file.setdefault((Path(t.source.file).name, t.source.record), t)
    return by_id, by_file


def find_run(index: RunIndex, key: str | None, g: Any, d: Diagnosis | None) -> Trajectory | None:
    """The loaded run of gold run ``key``: by id, else by the gold run's file and record, else by
    the prediction's file and record, else by the prediction's id (a run paired by
    :func:`~trajaudit.eval.gold.suffix_aliases`) (``g``/``d`` may be ``None``)."""
    by_id, by_file = index
    t = by_id.get(key) if key is not None else None
    if t is None and g is not None and g.file:
        t = by_file.get((Path(g.file).name, g.record))
    if t is None and d is not None and d.file:
        t = by_file.get((Path(d.file).name, d.record))
    if t is None and d is not None:
        t = by_id.get(d.trajectory_id)
    return t


__all__ = ["RunIndex", "ScoredRun", "find_run", "index_trajectories", "run_length", "scored_step", "step_positions"]
