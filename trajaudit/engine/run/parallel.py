"""Parallel batches (``audit --jobs N``): worker processes, results equal to the serial path's.

See docs/perf.md, "Parallel batches": with the ``fork`` start method the parent audits the first run
(one-time work the children inherit) and the children read the runs from the inherited batch; logs
travel as rows (:meth:`ValidationLog.to_rows`), pass records without their evidence, which the parent
derives when it is first read (:class:`_PassEvidence`).
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from collections import Counter, deque
from collections.abc import Sequence
from multiprocessing.connection import wait
from typing import Any

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.evidence import evaluate_rules, rules_for
from trajaudit.engine.run.pipeline import (
    AuditResult,
    AuditSpec,
    Done,
    RunError,
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


def _worker_run(item: tuple[int, dict[str, Any] | None]) -> tuple[int, dict[str, Any] | None, RunError | None]:
    idx, tdict = item
    t = _WORKER["runs"][idx] if tdict is None else Trajectory.from_dict(tdict)
    try:
        r = audit_one(t, _WORKER["spec"].strategy, _WORKER["ctx"])
    except Exception as e:  # noqa: BLE001 - the per-run boundary: a bug in one run must not sink the batch
        err = RunError.of(e)
        if "traceback" in err.details:
            log.debug("audit of %s failed:\n%s", t.id, err.details["traceback"])
        return idx, None, err
    deferred = _deferrable(t, _WORKER["ctx"], _WORKER["deferrable"]) if _WORKER["defer"] else frozenset()
    return idx, {"diagnosis": r.diagnosis.to_dict(), "log": r.log.to_rows(deferred) if r.log else None,
                 "claims": r.claims, "rule_ids": r.rule_ids}, None


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
    come back as rows (:meth:`ValidationLog.to_rows`), pass records without their evidence.

    Each worker audits one run at a time, so the parent knows which run a worker held when it died
    (the OOM killer, a segfault, ``kill -9``): the worker is replaced, and its run is retried once in
    the fresh worker; when that one dies too the run is reported as its own error (stage ``worker``).
    Runs finished before are already passed to ``finished`` (the CLI has written them)."""
    mp = multiprocessing.get_context()
    forked = mp.get_start_method() == "fork"
    ctx = build_context(spec)
    pool = _Pool(mp, spec, trajectories if forked else None)
    try:
        if forked:
            audit_with(ctx, trajectories, [0], spec.strategy, finished)
            todo = deque(range(1, len(trajectories)))
        else:
            todo = deque(range(len(trajectories)))
        attempts: Counter[int] = Counter()
        for _ in range(min(jobs, len(todo))):
            pool.spawn()
        while todo or pool.busy():
            for w in pool.idle():
                if not todo:
                    break
                i = todo.popleft()
                w.give(i, None if forked else trajectories[i].to_dict())
            for w, reply in pool.wait():
                if reply is not None:
                    _take(reply, trajectories, ctx, finished)
                    continue
                i, how = w.current, w.death()
                pool.replace(w)
                attempts[i] += 1
                if attempts[i] < 2:  # retried once, in the fresh worker
                    log.warning("the worker auditing %s died (%s); retrying it in a fresh worker",
                                trajectories[i].id, how)
                    fresh = pool.workers[-1]
                    fresh.give(i, None if forked else trajectories[i].to_dict())
                else:
                    finished(i, None, RunError("worker", f"the worker process auditing this run died ({how}); "
                                                         "retried once in a fresh worker, which died too"))
    finally:
        pool.close()
        close_context(ctx)


def _take(reply: tuple[int, dict[str, Any] | None, Any], trajectories: Sequence[Trajectory], ctx: AuditContext,
          finished: Done) -> None:
    idx, payload, err = reply
    if payload is None:
        finished(idx, None, err)
        return
    t = trajectories[idx]
    rows = payload["log"]
    finished(idx, AuditResult(t, Diagnosis.from_dict(payload["diagnosis"]),
                              ValidationLog.from_rows(rows, _PassEvidence(t, ctx)) if rows else None,
                              payload["claims"], payload["rule_ids"]), None)


#: the signals blocked while a worker is forked (:meth:`_Pool.spawn`)
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _worker_main(conn: Any, spec: AuditSpec, runs: Sequence[Trajectory] | None) -> None:
    """A worker process: build the context, then audit the run each message names until ``None``.
    Ctrl-C (SIGINT to the terminal's process group) is left to the parent, which stops the pool: a
    worker does not die of it mid-run with a traceback of its own. SIGTERM ends a worker at once, without
    a word (its default action: a forked worker inherited the ``trajaudit`` command's handler, which
    raises ``Terminated`` as for Ctrl-C, and ``timeout`` signals the whole group; the parent says
    ``terminated``). Both were blocked while the parent forked (:meth:`_Pool.spawn`): unblocked here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _worker_init(spec, runs)  # its Finalize closes the context when the process exits
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if item is None:
            return
        conn.send(_worker_run(item))


class _Worker:
    """One worker process and the run it holds (``current``, ``None`` when idle)."""

    def __init__(self, process: Any, conn: Any) -> None:
        self.process, self.conn = process, conn
        self.current: int | None = None

    def give(self, i: int, tdict: dict[str, Any] | None) -> None:
        self.current = i
        try:
            self.conn.send((i, tdict))
        except OSError:  # it died before it could take the run: found dead by the next wait
            pass

    def death(self) -> str:
        """How the process ended, in words (after it has)."""
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"


class _Pool:
    """Worker processes audited one run at a time (see :func:`audit_parallel`)."""

    def __init__(self, mp: Any, spec: AuditSpec, runs: Sequence[Trajectory] | None) -> None:
        self.mp, self.spec, self.runs = mp, spec, runs
        self.workers: list[_Worker] = []

    def spawn(self) -> _Worker:
        """Start a worker, SIGINT and SIGTERM blocked meanwhile (acted on once it is in ``workers``, which
        ``close`` ends): a signal that landed in the fork ran its handler inside the after-fork hooks
        (logging's lock release), where the exception was printed as "ignored" and lost — the batch ran on."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS) if hasattr(signal, "pthread_sigmask") \
            else None
        try:
            parent, child = self.mp.Pipe()
            process = self.mp.Process(target=_worker_main, args=(child, self.spec, self.runs), daemon=True)
            process.start()
            child.close()
            w = _Worker(process, parent)
            self.workers.append(w)
        finally:
            if blocked is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return w

    def replace(self, dead: _Worker) -> _Worker:
        self.workers.remove(dead)
        dead.conn.close()
        return self.spawn()

    def idle(self) -> list[_Worker]:
        return [w for w in self.workers if w.current is None]

    def busy(self) -> bool:
        return any(w.current is not None for w in self.workers)

    def wait(self) -> list[tuple[_Worker, Any]]:
        """Block until a busy worker answers or dies: ``[(worker, reply)]``, reply ``None`` for a death
        (its ``current`` still names the run it held)."""
        busy = [w for w in self.workers if w.current is not None]
        ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
        out = []
        for w in busy:
            if w.conn not in ready and w.process.sentinel not in ready:
                continue
            try:
                if w.conn.poll():
                    out.append((w, w.conn.recv()))
                    w.current = None
                    continue
            except (EOFError, OSError):
                pass
            if not w.process.is_alive():
                out.append((w, None))
        return out

    def close(self) -> None:
        for w in self.workers:
            try:
                w.conn.send(None)
            except OSError:
                pass
        for w in self.workers:
            w.process.join(timeout=5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
