"""Pairing predictions with gold runs for :func:`trajaudit.eval.evaluate.evaluate`: which prediction
scores which gold run (by id, else by a unique suffix alias; by file when both name one), and what
the metrics read of each pair (:class:`~trajaudit.eval.runs.ScoredRun`), with the problems noted.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.taxonomy import Taxonomy
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.eval.gold import GoldItem, GoldSet, other_file, suffix_aliases
from trajaudit.eval.runs import ScoredRun, find_run, run_length, scored_step, step_positions

__all__ = ["pair_predictions", "pairing_warning", "scored_run"]


def _step_agent(t: Trajectory | None, step: int | None) -> str | None:
    """The producer of a step: its agent, or ``user``/``system`` for those turns."""
    if t is None or step is None or not 0 <= step < len(t.steps):
        return None
    s = t.steps[step]
    return s.agent or (s.kind if s.kind in ("user", "system") else None)


def pair_predictions(gold: Mapping[str, GoldItem], gs: GoldSet, diags: list[Diagnosis],
          problems: dict[str, list[str]]) -> dict[str, Diagnosis]:
    """``{gold key: its prediction}`` (the first of duplicates); unmatched and duplicate predictions,
    and a pairing warning when most match nothing, go to ``problems``."""
    preds: dict[str, Diagnosis] = {}
    dup: Counter[str] = Counter()
    other_files = 0
    aliases = suffix_aliases(gs.keys(), [d.trajectory_id for d in diags])
    for d in diags:
        key = gs.match(d, aliases)
        if key is None:
            why = other_file(gs[d.trajectory_id], d) if d.trajectory_id in gs else None
            other_files += why is not None
            problems["unmatched_predictions"].append(f"{d.trajectory_id} ({why or 'not in the gold set'})")
        elif key in preds:
            dup[key] += 1
        else:
            preds[key] = d
    if 2 * len(problems["unmatched_predictions"]) > len(diags):
        problems["pairing"].append(pairing_warning(len(problems["unmatched_predictions"]), len(diags), other_files,
                                                    getattr(gold, "source", None)))
    problems["duplicate_predictions"] = [f"{k} ({n + 1} predictions; the first was scored)" for k, n in dup.items()]
    return preds


def _gold_in_range(g: GoldItem, n: int | None) -> GoldItem:
    """``g``, or ``g`` without its critical step when the step is past the loaded run's ``n`` steps:
    such a step names no message and is excluded from step metrics, as a Who&When mistake_step out of
    range is (a distance to it would swamp the means)."""
    if n is None or g.critical_step is None or 0 <= g.critical_step < n:
        return g
    return dataclasses.replace(g, critical_step=None, problem=(
        f"gold critical_step {g.critical_step} is outside the run's {n} steps "
        f"(valid: 0..{n - 1}); excluded from step metrics"))


def _predicted_category(d: Diagnosis | None, tax: Taxonomy | None, unknown_pred: set[str]) -> str | None:
    """The prediction's category normalized by ``tax`` (verbatim, and noted, when not in it)."""
    if d is None or not d.category:
        return None
    cat = tax.try_normalize(d.category) if tax else d.category
    if cat is None:
        unknown_pred.add(d.category)
        return d.category
    return cat


def scored_run(key: str, g: GoldItem, d: Diagnosis | None, index: Any, tax: Taxonomy | None,
                problems: dict[str, list[str]], unknown_pred: set[str]) -> ScoredRun:
    """One gold run paired with its prediction (or none), with what the metrics read; problems of the
    pair (missing or step-less prediction, negative step, gold without a critical step) are noted."""
    t = find_run(index, key, g, d)
    g = _gold_in_range(g, run_length(t))
    cat = _predicted_category(d, tax, unknown_pred)
    k_pred = d.critical_step if d is not None else None
    negative = k_pred is not None and k_pred < 0
    if negative:  # no such message: wrong everywhere (a ±k tolerance must not credit it)
        problems["predictions"].append(f"{key}: critical_step {k_pred} is negative (counted wrong)")
        k_pred = None
    step = scored_step(d) if d is not None and k_pred is not None else None
    agent = (d.agent or _step_agent(t, k_pred)) if d is not None else None
    if d is None:
        problems["missing_predictions"].append(key)
    elif step is None and not negative:
        problems["predictions"].append(f"{key}: the prediction has no critical step (counted wrong)")
    if g.critical_step is None:
        problems["gold_without_critical_step"].append(f"{key}: {g.problem or 'no critical step'}")
    return ScoredRun(g, d, t, step, cat, agent, k_pred, step_positions(t))


def pairing_warning(unmatched: int, total: int, other_files: int, source: str | None) -> str:
    """The warning for an evaluation where most predictions belong to no gold run."""
    files = (f"; {other_files} of them share an id with a gold run but name another trace file"
             if other_files else "")
    gold = f" in {source}" if source else ""
    return (f"{unmatched} of {total} predictions match no gold run{gold}{files}: the predictions come from a "
            "different data set? Only runs paired by id (and by file, when both name one) are scored")
