"""Run a strategy over datasets to get diagnoses to score (a small loop; the ``audit`` pipeline will
replace it).

One run whose diagnosis fails is reported as a :class:`~trajaudit.errors.Problem` and skipped; the
batch goes on. Gold labels are never passed to strategies: the trajectories come from the adapters,
which drop them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajaudit import regular_files, safe_json
from trajaudit.boundary import describe
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.evidence import gather
from trajaudit.engine.run.pipeline import degraded, with_source_message
from trajaudit.engine.strategies.base import Strategy
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import load_many
from trajaudit.engine.trace.text import jsonl_lines
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import ConfigError, LLMUnreachableError, Problem, TrajauditError
from trajaudit.eval.gold import GoldSet, suffix_aliases
from trajaudit.eval.runs import find_run, index_trajectories
from trajaudit.registry import Registry

log = logging.getLogger(__name__)


@dataclass
class RunOutput:
    """What running a strategy produced: diagnoses, the trajectories, and per-run problems."""

    diagnoses: list[Diagnosis] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def offline_strategies(registry: Registry[Strategy] | None = None) -> list[str]:
    """Names of the registered strategies that need no LLM, in registration order."""
    reg = registry or default_strategies()
    return [name for name, s in reg.items() if not getattr(s, "needs_llm", False)]


def run_strategy(trajectories: Iterable[Trajectory], strategy: str | Strategy, *,
                 context: AuditContext | None = None, registry: Registry[Strategy] | None = None,
                 skip: Callable[[Trajectory], bool] | None = None,
                 on_diagnosis: Callable[[Diagnosis], None] | None = None,
                 on_log: Callable[[ValidationLog], None] | None = None) -> RunOutput:
    """Diagnose every trajectory with one strategy.

    Each diagnosis gets ``metadata.source_message`` as ``trajaudit audit`` gives it
    (:func:`~trajaudit.engine.run.pipeline.with_source_message`: runs whose step indexes are not message
    positions), so a strategy is scored the same whether its diagnoses come from ``audit`` or here, and
    ``metadata.degraded`` when the run's rule evaluation ran out of time
    (:func:`~trajaudit.engine.run.pipeline.degraded`, as ``audit`` marks it).

    Args:
        trajectories: the runs (IR; labels are not part of it).
        strategy: a strategy name from ``registry`` (default :func:`default_strategies`) or an object.
        context: the :class:`AuditContext` (default: an empty one).
        skip: a run for which ``skip(run)`` is true is not diagnosed (``eval --resume``: already in
            ``--save-pred``); it stays in ``trajectories``.
        on_diagnosis: called with each diagnosis as soon as it is made (``eval --resume`` appends it).
        on_log: called with the validation log of each run diagnosed (``eval`` counts the checks of
            rules that could not be evaluated, as ``audit`` does, without keeping the logs).

    Raises:
        LookupError: unknown strategy name (with close-match suggestions).
        ConfigError: the strategy needs an LLM and ``context.llm`` is ``None``.
        LLMUnreachableError: no connection to the LLM endpoint could be made (the batch stops at the
            first run that finds it; other errors are reported per run and the batch goes on).
    """
    strat = (registry or default_strategies()).get(strategy) if isinstance(strategy, str) else strategy
    ctx = context or AuditContext()
    if getattr(strat, "needs_llm", False) and ctx.llm is None:
        raise ConfigError(f"strategy {strat.name!r} needs an LLM; configure an endpoint")
    out = RunOutput()
    for t in trajectories:
        out.trajectories.append(t)
        if skip is not None and skip(t):
            continue
        try:
            evidence = gather(t, ctx)
            d = degraded(with_source_message(strat.diagnose(t, evidence, ctx), t), evidence.log)
        except LLMUnreachableError:  # every further run would fail the same way: stop the batch
            raise
        except TrajauditError as e:
            out.problems.append(Problem(t.source.file or t.id, t.source.record, f"{t.id}: {e}", stage="judge"))
            continue
        except Exception as e:  # noqa: BLE001 - the per-run boundary: one failing run must not stop the batch
            where, message, details = describe(e, "judge")
            log.debug("strategy %s failed on %s:\n%s", strat.name, t.id, details.get("traceback", ""))
            out.problems.append(Problem(t.source.file or t.id, t.source.record,
                                        f"{t.id}: strategy {strat.name} failed: {message}", details, stage=where))
            continue
        out.diagnoses.append(d)
        if on_diagnosis is not None:
            on_diagnosis(d)
        if on_log is not None:
            on_log(evidence.log)
    return out


def run_on_paths(paths: Iterable[str | os.PathLike[str]], strategy: str | Strategy, *,
                 context: AuditContext | None = None, registry: Registry[Strategy] | None = None,
                 format: str | None = None, mapping: Any = None,
                 skip: Callable[[Trajectory], bool] | None = None,
                 on_diagnosis: Callable[[Diagnosis], None] | None = None,
                 on_log: Callable[[ValidationLog], None] | None = None) -> RunOutput:
    """Load ``paths`` (files, folders, globs) with :func:`load_many` (``format``/``mapping`` as for
    ``trajaudit audit``) and run :func:`run_strategy` (``skip``, ``on_diagnosis``, ``on_log`` as there).

    Loading problems are included in the result's ``problems``.
    """
    res = load_many(paths, format=format, mapping=mapping)
    out = run_strategy(res.trajectories, strategy, context=context, registry=registry, skip=skip,
                       on_diagnosis=on_diagnosis, on_log=on_log)
    out.problems = list(res.problems) + out.problems
    return out


def read_diagnoses(path: str | os.PathLike[str]) -> tuple[list[Diagnosis], list[Problem]]:
    """Read a diagnoses JSONL file (one :class:`Diagnosis` dict per line; a JSON list is accepted too).

    Lines that are not JSON objects with a ``trajectory_id`` and an integer-or-null ``critical_step``
    are reported (with their 1-based line number) and skipped. A step outside the run (negative, or
    at or past its end) is a well-formed prediction that is wrong: it is kept, and
    :func:`check_step_ranges` warns and clears it, so its category and agent are still scored.

    Raises:
        TrajauditError: the file cannot be read.
    """
    p = Path(path)
    try:
        text = regular_files.read_text(p, "utf-8-sig")
    except OSError as e:
        raise TrajauditError(f"{p}: cannot read: {e.strerror or e}") from None
    docs: list[tuple[int, Any]] = []
    problems: list[Problem] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            docs = list(enumerate(safe_json.loads(text), 1))
        except ValueError as e:  # JSONDecodeError, NestedTooDeep
            raise TrajauditError(f"{p}: not valid JSON: {e}") from None
    else:
        for n, line in enumerate(jsonl_lines(text), 1):
            if line.strip():
                try:
                    docs.append((n, safe_json.loads(line)))
                except safe_json.LimitExceeded as e:
                    problems.append(Problem(str(p), n, f"{p}: line {n}: {e}"))
                except json.JSONDecodeError as e:
                    problems.append(Problem(str(p), n, f"{p}: line {n}: invalid JSON ({e.msg})"))
    out = []
    for n, d in docs:
        step = d.get("critical_step") if isinstance(d, dict) else None
        if not isinstance(d, dict) or d.get("trajectory_id") is None or (
                step is not None and (isinstance(step, bool) or not isinstance(step, int))):
            problems.append(Problem(str(p), n, f"{p}: line {n}: not a diagnosis (needs trajectory_id and an "
                                               "integer or null critical_step)"))
            continue
        try:
            out.append(Diagnosis.from_dict(d))
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            problems.append(Problem(str(p), n, f"{p}: line {n}: bad diagnosis: {e}"))
    return out, problems


def check_step_ranges(diagnoses: Iterable[Diagnosis], gold: GoldSet,
                      trajectories: Iterable[Trajectory] = ()) -> tuple[list[Diagnosis], list[str]]:
    """Clear predicted steps that lie outside their run, with one warning each.

    A run's length is its number of steps (messages) in the loaded trajectory (matched by id, else by
    file name and record), else the gold's ``n_steps``. A prediction at a negative step, or at step
    ``>= length``, points at no message: its ``critical_step`` becomes ``None`` so every step metric
    scores it wrong (a ±k tolerance must not credit a step outside the run), and the warning says so
    and gives the valid range. The rest of the prediction (category, agent) is kept and scored. A
    negative step is cleared even when the run's length is unknown; a large one is then left alone.

    Args:
        diagnoses: the predictions (after :func:`read_diagnoses`).
        gold: the gold set (:meth:`GoldSet.match` pairs a prediction with its run).
        trajectories: the loaded runs, if any.

    Returns:
        ``(diagnoses, warnings)``: the diagnoses in input order (out-of-range steps cleared) and
        ``"run R: critical_step S is outside the run's N steps (valid: 0..N-1); scored as wrong"``
        lines (``valid: 0 or more`` when the length is unknown).
    """
    index = index_trajectories(trajectories)
    out: list[Diagnosis] = []
    warnings: list[str] = []
    diagnoses = list(diagnoses)
    aliases = suffix_aliases(gold.keys(), [d.trajectory_id for d in diagnoses])
    for d in diagnoses:
        step = d.critical_step
        if step is None:
            out.append(d)
            continue
        key = gold.match(d, aliases)
        g = gold.get(key) if key is not None else None
        # a prediction paired with no gold run has no run to measure (another data set's run "4" is not it)
        t = find_run(index, key, g, d) if key is not None else None
        length = len(t.steps) if t is not None else (g.n_steps if g is not None else None)
        if step < 0 or (length is not None and step >= length):
            run = key or d.trajectory_id
            where = (f"the run's {length} steps (valid: 0..{length - 1})" if length is not None
                     else "the run (valid: 0 or more; steps are 0-based message indexes)")
            warnings.append(f"run {run}: critical_step {step} is outside {where}; scored as wrong")
            d = dataclasses.replace(d, critical_step=None)
        out.append(d)
    return out, warnings


__all__ = ["RunOutput", "check_step_ranges", "offline_strategies", "read_diagnoses", "run_on_paths", "run_strategy"]
