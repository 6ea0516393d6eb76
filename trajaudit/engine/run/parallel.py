"""Parallel batches (``audit --jobs N``): worker processes, results equal to the serial path's.

See docs/perf.md, "Parallel batches": with the ``fork`` start method the parent audits the first run
(one-time work the children inherit) and the children read the runs from the inherited batch; logs
travel as rows (:meth:`ValidationLog.to_rows`), pass records without their evidence, which the parent
derives when it is first read (:class:`_PassEvidence`).
"""

from __future__ import annotations

import logging
import multiprocessing
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.evidence import evaluate_rules, rules_for
from trajaudit.engine.run.pipeline import (
    AuditResult,
    AuditSpec,
    Done,
    audit_one,
    audit_with,
    build_context,
    close_context,
    freeze_long_lived,
)
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import TrajauditError

log = logging.getLogger(__name__)

# worker-process plumbing (module-level so it pickles)
_WORKER: dict[str, Any] = {}


def _worker_init(spec: AuditSpec, runs: Sequence[Trajectory] | None) -> None:
    """Build the worker's context. ``runs``: the batch itself when the pool forks (the children
    inherit the parent's memory, so items are indices and nothing is serialized), else ``None``."""
    from multiprocessing.util import Finalize

    _WORKER["spec"] = spec
    _WORKER["runs"] = runs
    _WORKER["ctx"] = build_context(spec)
    _WORKER["defer"] = _defers(spec.strategy)
    _WORKER["deferrable"] = {}  # applied domain packs -> rule ids used once (the rules a run gets)
    Finalize(None, close_context, args=(_WORKER["ctx"],), exitpriority=10)  # runs at worker exit
    freeze_long_lived()  # the inherited batch and the compiled packs: out of the collector's way


def _worker_run(item: tuple[int, dict[str, Any] | None]) -> tuple[int, dict[str, Any] | None, str | None]:
    idx, tdict = item
    t = _WORKER["runs"][idx] if tdict is None else Trajectory.from_dict(tdict)
    try:
        r = audit_one(t, _WORKER["spec"].strategy, _WORKER["ctx"])
    except (TrajauditError, LookupError) as e:
        return idx, None, str(e)
    except Exception as e:  # noqa: BLE001 - a bug in one run must not sink the batch; reported
        log.exception("audit of %s failed", t.id)
        return idx, None, f"internal error: {type(e).__name__}: {e}"
    deferred = _deferrable(t, _WORKER["ctx"], _WORKER["deferrable"]) if _WORKER["defer"] else frozenset()
    return idx, {"diagnosis": r.diagnosis.to_dict(), "log": r.log.to_rows(deferred) if r.log else None,
                 "claims": r.claims}, None


class _PassEvidence:
    """The evidence of a pass record a worker shipped without it (``ValidationLog.to_rows(deferred)``):
    derived, when first read, by evaluating that one rule on the run again in this process. Exact: rule
    evaluation is deterministic, each rule's budget is its own (a rule evaluated alone is charged what
    it is charged among the others, shared results included), and a rule's records keep their order.
    Rendering every pass's evidence in the workers was ~a quarter of their time; the CLI never reads it."""

    def __init__(self, trajectory: Trajectory, context: AuditContext) -> None:
        self.trajectory, self.context = trajectory, context
        self._records: dict[str, list[Any]] = {}

    def __call__(self, rule_id: str, ordinal: int, step: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        recs = self._records.get(rule_id)
        if recs is None:
            rule = next(r for r in rules_for(self.trajectory, self.context)[0] if r.id == rule_id)
            recs = self._records[rule_id] = [r for r in evaluate_rules(self.trajectory, [rule], self.context).records
                                             if r.rule_id == rule_id]
        rec = recs[ordinal] if ordinal < len(recs) else None
        if rec is None or rec.step != step or rec.verdict != "pass":
            raise TrajauditError(f"{self.trajectory.id}: the evidence of {rule_id} at step {step} could not be "
                                 "derived again (the rule gave another record); audit without --jobs")
        return rec.evidence, rec.bindings


def _defers(strategy: str) -> bool:
    """Whether workers of ``strategy`` ship pass records without evidence: not for strategies that
    need an LLM (AgentRx merges the records of rules it synthesized into the log: a synthesized id
    could shadow a pack rule's and shift its records' ordinals)."""
    return not getattr(default_strategies().get(strategy), "needs_llm", False)


def _deferrable(trajectory: Trajectory, context: AuditContext, memo: dict[tuple[str, ...], frozenset[str]]
                ) -> frozenset[str]:
    """Rule ids the parent can evaluate again by id for ``trajectory``: ids used by one rule only
    (memoized per set of applied domain packs); see :func:`_defers` for the strategies that defer."""
    rules, applied = rules_for(trajectory, context)
    got = memo.get(tuple(applied))
    if got is None:
        ids = Counter(r.id for r in rules)
        got = memo[tuple(applied)] = frozenset(i for i, n in ids.items() if n == 1)
    return got


def audit_parallel(trajectories: Sequence[Trajectory], spec: AuditSpec, jobs: int, finished: Done) -> None:
    """Audit in ``jobs`` worker processes. The parent builds the context first (fails fast on a bad
    rule/tools/LLM set-up; derives pass evidence later, see :class:`_PassEvidence`). With the ``fork``
    start method it audits the first run itself, doing the one-time work (lazy imports, compiling the
    packs the runs select, regex analyses) once for the children to inherit, and the children read the
    runs from the inherited batch (only indices travel); otherwise runs are shipped as dicts. Logs
    come back as rows (:meth:`ValidationLog.to_rows`), pass records without their evidence."""
    mp = multiprocessing.get_context()
    forked = mp.get_start_method() == "fork"
    ctx = build_context(spec)
    try:
        if forked:
            audit_with(ctx, trajectories, [0], spec.strategy, finished)
            items: list[tuple[int, dict[str, Any] | None]] = [(i, None) for i in range(1, len(trajectories))]
        else:
            items = [(i, t.to_dict()) for i, t in enumerate(trajectories)]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp, initializer=_worker_init,
                                 initargs=(spec, trajectories if forked else None)) as ex:
            for idx, payload, err in ex.map(_worker_run, items, chunksize=max(1, len(items) // (jobs * 8))):
                if payload is None:
                    finished(idx, None, err)
                    continue
                t = trajectories[idx]
                rows = payload["log"]
                finished(idx, AuditResult(t, Diagnosis.from_dict(payload["diagnosis"]),
                                          ValidationLog.from_rows(rows, _PassEvidence(t, ctx)) if rows else None,
                                          payload["claims"]), None)
    finally:
        close_context(ctx)
