"""One-pass, step-at-a-time evaluation of compiled rules over a run: :class:`RunState` and :class:`Stepper`.

:func:`~trajaudit.engine.rule_eval.evaluate` (the reference) runs rule by rule, each over all its
candidate steps. Here the run is walked once, step by step; at each step every rule evaluates its
units there (the step, or each of its tool calls, that the rule's index plan selects), with its
own operation budget. Quantifiers over the prefix read prefix state (:mod:`trajaudit.engine.dsl.columnar`)
instead of re-scanning it. The log is the reference's, record for record (same order after
``ValidationLog.sort``, same skip count, same ``incomplete`` notes): the audit pipeline uses this
path, and ``tests/test_rule_columnar.py`` compares both on real and generated runs.

API (what a runtime monitor builds on)::

    state = RunState(trajectory, rules, oracle=None, config=None, tools=None)
    for k in range(len(trajectory.steps)):
        new_records = state.advance(k)   # the records of units at step k that are decided now
    log = state.finish()                 # the ValidationLog (records of deferred units included)

- :meth:`RunState.advance` must be called with ``k = 0, 1, 2 …`` in order (each once); it returns the
  records it added (passes, failures, unknowns; skips are only counted).
- A rule's *horizon* (:func:`horizon`) says when its verdict at step ``k`` can no longer change.
  ``step``: nothing it reads lies after the current step — no ``later``, ``steps``, ``traj``,
  ``outputs_of``, ``.output``, no ``check:`` — so it is final once step ``k`` is known (the rule is
  *prefix-decidable*, :func:`prefix_decidable`). ``outputs``: the only thing it reads past the step
  is its call's output (``call.output``): a call's output is its first answer (by call id), so the verdict at step ``k`` is final once every call of steps
  ``0..k`` that has an id is answered (a call without an id never has an output). ``end``: it reads
  the rest of the run (``later``, ``steps``, ``traj``, ``outputs_of``, another call's ``.output``, a
  checker) and is final only when the run ends. With ``defer=True`` (the monitor's setting) the units of ``outputs`` rules are
  queued until their calls are answered (:meth:`RunState.advance` evaluates them then, in step order)
  and those of ``end`` rules until :meth:`finish`. With ``defer=False`` (a complete run, the batch
  default) every unit is evaluated at its own step.
- Each rule's :class:`Stepper` keeps its budget use (``ops``), whether the budget stopped it, and how
  many candidate units came after the stop (the ``incomplete`` note is written by :meth:`finish`).
- A complete run (``lazy=False``) lists each rule's units once from the run's index
  (``validation.rule_eval.candidates``) and visits at step ``k`` only the rules with units there; a growing run
  (``lazy=True``) selects them from step ``k`` alone (:func:`units_at`).
- The per-run context is a :class:`~trajaudit.engine.rule_runtime.TrajContext`; with ``lazy=True``
  the prefix state of quantifiers is extended only up to the steps queried (O(1) amortized per
  step), instead of being computed over the whole run on first use (the batch's exact budget
  accounting). A monitor that receives steps one at a time passes ``context=`` a
  :class:`~trajaudit.engine.dsl.live.LiveContext` and appends each step to it before
  :meth:`RunState.advance`; the stepping, prefix state and records here do not look past the step
  being advanced. Rules can join a run already advanced (:meth:`RunState.add_rules`: their units at
  the earlier steps are evaluated then) and leave it (:meth:`RunState.drop_rules`).
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from trajaudit import run_budget
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.runtime import BudgetExceeded, CallView, Env, EvalError, TrajContext
from trajaudit.engine.packs.compile import CompiledRule
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation.rule_eval import (
    _evidence,
    _out_of_time,
    _record,
    _run_one,
    candidates,
    run_one_shared,
)
from trajaudit.engine.validation.unit_memo import UnitPlan, shared_plans
from trajaudit.engine.validation_log import LazyRecord, Record, ValidationLog
from trajaudit.errors import LLMUnreachableError

log = logging.getLogger(__name__)

__all__ = ["HORIZONS", "RunState", "Stepper", "evaluate_run", "horizon", "prefix_decidable", "units_at"]

#: evaluate the guards and ``let``s that rules share once per unit (:mod:`~trajaudit.engine.validation.unit_memo`;
#: a complete run only). Tests set it to ``False`` to compare with each rule evaluating its own.
SHARE_UNITS = True

#: names whose value lies (partly) after the current step (``traj`` holds the length, final answer, every system prompt)
_FUTURE_NAMES = frozenset({"later", "steps", "traj"})
#: functions that look after the current step
_FUTURE_FUNCS = frozenset({"outputs_of"})
#: fields that can point after the current step: a call's output, a tool step's answering call
#: (``o.call`` of an output is earlier, but of a view read by name it cannot be told apart statically)
_FUTURE_FIELDS = frozenset({"output"})


#: a rule's horizons (:func:`horizon`), from the earliest
HORIZONS = ("step", "outputs", "end")


def horizon(rule: CompiledRule) -> str:
    """When a unit of ``rule`` at step ``k`` is decided for good (see the module docstring):

    - ``"step"``: at step ``k`` — its expressions (guard, lets, assertion, message) name no
      ``later``/``steps``/``traj``, call no ``outputs_of``, read no ``.output`` field, and it is not
      a ``check:`` rule;
    - ``"outputs"``: once every call of steps ``0..k`` (with an id) is answered — as ``"step"`` except
      that it reads ``call.output`` (the unit's own call's output: its first answer, which no later
      step changes; read at evaluation, never kept in prefix state);
    - ``"end"``: at the end of the run — it names ``later``/``steps``/``traj``, calls ``outputs_of``,
      reads the ``.output`` of another call (``c.output`` inside a quantifier: a monitor's prefix
      state files ``c`` when it is appended, before its output exists), or is a ``check:`` rule
      (checkers and the semantic oracle see the whole run).

    Static and conservative: a rule placed later may be decidable sooner (``len(missing) == 0 or
    excused`` passes at the call when nothing is missing, but fails only once ``excused`` is known)."""
    if rule.check is not None:
        return "end"
    reads_output = False
    for e in rule.asts.values():
        for n in e.walk():
            if isinstance(n, A.Name) and n.id in _FUTURE_NAMES:
                return "end"
            if isinstance(n, A.Call) and n.func in _FUTURE_FUNCS:
                return "end"
            if isinstance(n, A.Attr) and n.name in _FUTURE_FIELDS:
                if not (isinstance(n.obj, A.Name) and n.obj.id == "call"):
                    return "end"
                reads_output = True
    return "outputs" if reads_output else "step"


def prefix_decidable(rule: CompiledRule) -> bool:
    """Whether every unit of ``rule`` at step ``k`` can be decided from steps ``0..k`` alone
    (:func:`horizon` is ``"step"``). Conservative: a rule it rejects may still be decidable."""
    return horizon(rule) == "step"


def units_at(rule: CompiledRule, tc: TrajContext, k: int) -> list[tuple[int, CallView | None]]:
    """The units of ``rule`` at step ``k``: ``validation.rule_eval.candidates(rule, tc)`` restricted to ``k``,
    computed from step ``k`` alone (its kind, its calls' names, its output's tool)."""
    p = rule.plan
    step = tc.traj.steps[k]
    if p.kinds is not None and step.kind not in p.kinds:
        return []
    if rule.per_call:
        cvs = tc.call_views[k]
        if p.call_names is not None:
            names = p.call_names
            return [(k, c) for c in cvs if c.call.name in names]
        return [(k, c) for c in cvs]
    if p.output_names is not None:
        return [(k, None)] if tc.output_name(k) in p.output_names else []
    if rule.tool_only:
        return [(k, None)] if step.kind == "tool" else []
    return [(k, None)]


class OutOfTime(Exception):
    """The run's time budget was used up before unit ``pos`` of the rule being evaluated."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def _reusable(env: Env) -> Env | None:
    """A skipped unit's ``env`` emptied for the next unit of the same rule, or ``None`` to make a new
    one (nothing keeps an evaluation state whose guard was false). A false guard may have bound
    witnesses and recorded evidence; quantifiers and comprehensions restore the variables they bind,
    so ``vars`` and ``addrs`` are empty unless a guard left them otherwise — then a new one is made.
    (Making an ``Env`` cost about a third of a cheap unit.)"""
    if env.vars or env.addrs:
        return None
    if env.seen:
        env.seen = []
    if env.witness:
        env.witness = {}
    return env


class Stepper:
    """One rule over one run, one step at a time (see the module docstring).

    Attributes:
        rule: the compiled rule.
        deferred: its units are not evaluated at their step (:func:`horizon` not ``"step"``, deferring on).
        waits: deferred until the calls its units reach are answered (:func:`horizon` ``"outputs"``):
            :meth:`RunState.advance` evaluates them then; the others wait for :meth:`RunState.finish`.
        ops: operations charged to its budget so far.
        stopped: the step where its budget ran out, or ``None``.
        left: candidate units after the stop (reported in the log's ``incomplete`` notes).
        pending: deferred units, in order.
    """

    __slots__ = ("rule", "deferred", "waits", "ops", "stopped", "stop_message", "left", "pending", "skipped",
                 "shared")

    def __init__(self, rule: CompiledRule, deferred: bool, waits: bool = False) -> None:
        self.rule = rule
        self.deferred = deferred
        self.waits = waits
        self.ops = 0
        self.stopped: int | None = None
        self.stop_message = ""
        self.left = 0
        self.pending: list[tuple[int, CallView | None]] = []
        self.skipped = 0
        #: the guard and lets it shares with other rules of the run (``unit_memo.shared_plans``), or ``None``
        self.shared: UnitPlan | None = None

    def advance(self, tc: TrajContext, k: int, out: list[Record]) -> None:
        """Evaluate the rule's units at step ``k`` (or queue them when deferred), appending records to ``out``."""
        units = units_at(self.rule, tc, k)
        if not units:
            self.skipped += 1  # a step the index excludes counts as one skip, as in the reference
            return
        if self.deferred:
            self.pending.extend(units)
            return
        self.run_units(tc, units, out)

    def run_units(self, tc: TrajContext, units: list[tuple[int, CallView | None]], out: list[Record],
                  deadline: float | None = None) -> None:
        """Evaluate ``units`` in order with this rule's budget (what the reference loop does per unit).

        Raises:
            OutOfTime: ``deadline`` (``time.monotonic``) passed before the unit at ``OutOfTime.pos``
                (the run's ``--run-timeout`` budget, :mod:`trajaudit.run_budget`).
        """
        rule = self.rule
        if self.stopped is not None:
            self.left += len(units)
            return
        tc.ops = self.ops
        budget = tc.budget
        plan = None if tc.lazy else self.shared  # equal lets of other rules: once per unit
        views = tc.views
        now = time.monotonic
        spare: Env | None = None  # the last unit's Env when nothing kept it (see _reusable)
        try:
            for pos, (k, call) in enumerate(units):
                if deadline is not None and now() >= deadline:
                    raise OutOfTime(pos)
                if spare is None:
                    env = Env(tc, k, call)
                else:  # as Env(tc, k, call): its containers are empty (_reusable)
                    env, spare = spare, None
                    env.k = k
                    env.step = views[k]
                    env.call = call
                try:
                    tc.ops += 1
                    if tc.ops > budget:
                        raise BudgetExceeded(f"evaluation budget of {budget} operations exceeded")
                    rec = _run_one(rule, env) if plan is None else run_one_shared(rule, env, plan)
                except BudgetExceeded as e:
                    out.append(_record(rule, k, "unknown", str(e), _evidence(env.seen, call), reason=str(e)))
                    self.stopped = k
                    self.left += len(units) - pos - 1
                    self.stop_message = str(e)
                    return
                except EvalError as e:
                    rec = _record(rule, k, "unknown", f"could not evaluate: {e}", _evidence(env.seen, call),
                                  reason=f"evaluation error: {e}")
                except RecursionError:
                    rec = _record(rule, k, "unknown", "evaluation nested too deeply", reason="evaluation error: recursion")
                except LLMUnreachableError:
                    raise
                except Exception as e:  # noqa: BLE001 - a faulty rule/checker must not stop the others
                    log.warning("rule %s raised at step %d of %s: %r", rule.id, k, tc.traj.id, e)
                    rec = _record(rule, k, "unknown", f"rule raised {type(e).__name__}: {e}",
                                  reason=f"error: {type(e).__name__}: {e}")
                if rec is None:
                    self.skipped += 1
                    spare = _reusable(env)
                elif rec.__class__ is LazyRecord:  # a pass: it keeps the Env's containers, the Env is reused
                    out.append(rec)
                    env.vars = {}
                    env.addrs = {}
                    env.seen = []
                    env.witness = {}
                    spare = env
                elif rec.verdict != "skip":
                    out.append(rec)
                else:
                    self.skipped += 1
        finally:
            self.ops = tc.ops


class RunState:
    """The incremental evaluation of compiled rules over one run (see the module docstring).

    Args:
        trajectory: the run (its steps up to the last one advanced must be present).
        rules: compiled rules, in the order their records are written within a step.
        oracle, config, tools: as :func:`~trajaudit.engine.rule_eval.evaluate`.
        context: a rule context that grows with the run (a
            :class:`~trajaudit.engine.dsl.live.LiveContext`; ``trajectory`` is then ignored and
            ``lazy`` must be true): the caller appends each step before advancing it.
        defer: queue the units of rules that are not :func:`prefix_decidable` until :meth:`finish`
            (a monitor); default ``False`` (a complete run: every unit at its own step).
        lazy: extend quantifier prefix state only as far as queried (a growing run); default ``False``.

    Attributes:
        log: the :class:`ValidationLog` being filled.
        steppers: one :class:`Stepper` per rule.
        next_step: the step :meth:`advance` expects next.
    """

    def __init__(self, trajectory: Trajectory | None, rules: list[CompiledRule], *, oracle: Any = None,
                 config: Any = None, tools: list[dict[str, Any]] | None = None, defer: bool = False,
                 lazy: bool = False, context: TrajContext | None = None) -> None:
        cfg = config or AuditConfig()
        self.config = cfg
        if context is None:
            if trajectory is None:
                raise ValueError("RunState needs a trajectory or a context")
            context = TrajContext(trajectory, budget=cfg.rule_budget, oracle=oracle, tools=tools)
        elif not lazy:
            raise ValueError("RunState(context=...) steps a run that grows: it needs lazy=True")
        self.tc = context
        self.tc.lazy = lazy
        self.defer = defer
        self.log = ValidationLog(context.traj.id)
        self.steppers = [self._stepper(r) for r in rules]
        if not lazy and SHARE_UNITS:
            for st, plan in zip(self.steppers, shared_plans(rules), strict=True):
                st.shared = plan
        self.next_step = 0
        self.finished = False
        self._joined = False  # rules joined mid-run (add_rules): their records are put in order by finish()
        # a complete run (not lazy): every rule's units are listed once from the run's index
        # (validation.rule_eval.candidates); advance() then visits at step k only the rules with units there
        self._units: list[list[tuple[int, CallView | None]]] | None = None
        self._by_step: dict[int, list[tuple[Stepper, list[tuple[int, CallView | None]]]]] | None = None
        if not lazy:
            n = len(self.tc.traj.steps)
            self._units = []
            # rules with the same index plan and scope have the same units (lists only read): listed once
            listed: dict[tuple[Any, ...], tuple[list[tuple[int, CallView | None]], int]] = {}
            for st in self.steppers:
                r = st.rule
                p = r.plan
                key = (p.kinds, p.call_names, p.output_names, r.per_call, r.tool_only)
                hit = listed.get(key)
                if hit is None:
                    units = candidates(r, self.tc)
                    # steps the index excludes count as skips (a step-scoped rule's units are distinct steps)
                    hit = listed[key] = (units, n - (len({u[0] for u in units}) if r.per_call else len(units)))
                st.skipped += hit[1]
                self._units.append(hit[0])

    def _stepper(self, rule: CompiledRule) -> Stepper:
        h = horizon(rule)
        return Stepper(rule, self.defer and h != "step", self.defer and h == "outputs")

    def _flush(self, steppers: list[Stepper], insert: bool = True) -> list[Record]:
        """Evaluate the queued units of waiting ``steppers`` (:func:`horizon` ``"outputs"``) whose
        step lies before the first call still unanswered (``TrajContext.answered_until``): their
        verdicts can no longer change. Each rule's units run in step order, as at :meth:`finish`.
        With ``insert``, the records go into the log at their place (by step, then rule order);
        returned in that order."""
        frontier = self.tc.answered_until()
        out: list[Record] = []
        for st in steppers:
            pending = st.pending
            if not st.waits or not pending or pending[0][0] >= frontier:
                continue
            n = 1
            while n < len(pending) and pending[n][0] < frontier:
                n += 1
            units, st.pending = pending[:n], pending[n:]
            st.run_units(self.tc, units, out)
        if out and insert:
            pos = {st.rule.id: i for i, st in enumerate(self.steppers)}
            out.sort(key=lambda r: (r.step, pos[r.rule_id]))  # stable: a per-call rule's records keep call order
            records = self.log.records
            for r in out:  # each after the records that precede it: a scan back over the last steps' records
                key = (r.step, pos[r.rule_id])
                at = len(records)
                while at and (records[at - 1].step, pos[records[at - 1].rule_id]) > key:
                    at -= 1
                records.insert(at, r)
        return out

    def _step_plan(self) -> dict[int, list[tuple[Stepper, list[tuple[int, CallView | None]]]]]:
        if self._by_step is None:
            by_step: dict[int, list[tuple[Stepper, list[tuple[int, CallView | None]]]]] = {}
            for st, units in zip(self.steppers, self._units or (), strict=True):
                groups: dict[int, list[tuple[int, CallView | None]]] = {}
                for u in units:
                    groups.setdefault(u[0], []).append(u)
                for k, us in groups.items():
                    by_step.setdefault(k, []).append((st, us))
            self._by_step = by_step
        return self._by_step

    def run_complete(self) -> ValidationLog:
        """Evaluate a complete run (``lazy=False``, nothing advanced yet) rule by rule and finish: the
        same log as advancing every step then :meth:`finish`, faster — one rule's closures stay hot in
        the CPU's caches over the run's steps (visiting 56 rules at every step took ~25% more time
        on tau at the same instruction count).

        Raises:
            ValueError: the state is lazy, or steps were already advanced.
        """
        if self._units is None or self.next_step or self.finished:
            raise ValueError("run_complete() needs a complete run (lazy=False) that has not been advanced")
        tc, records = self.tc, self.log.records
        seconds = getattr(self.config, "run_timeout", run_budget.DEFAULT_RUN_TIMEOUT)
        with run_budget.deadline(seconds) as deadline:
            for r_pos, (st, units) in enumerate(zip(self.steppers, self._units, strict=True)):
                if st.deferred:
                    st.pending.extend(units)
                    continue
                try:
                    st.run_units(tc, units, records, deadline)
                except OutOfTime as e:  # the reference's handling: that unit and each later rule's first unknown
                    _out_of_time(self.log, [x.rule for x in self.steppers], r_pos, e.pos, units, tc, seconds)
                    for later in self.steppers[r_pos + 1:]:
                        later.pending = []
                    break
            self.next_step = len(tc.traj.steps)
            return self.finish()

    def advance(self, k: int) -> list[Record]:
        """Evaluate every rule's units at step ``k`` (deferred rules queue theirs), then, deferring,
        the queued units of rules reading outputs whose calls are all answered now.

        Returns:
            The records added: step ``k``'s (rule order; a per-call rule's records in call order), then
            those of the waiting units decided now (by step, then rule order).

        Raises:
            ValueError: ``k`` is not the next step, or the run has no step ``k``, or :meth:`finish` was called.
        """
        if self.finished or k != self.next_step or not 0 <= k < len(self.tc.traj.steps):
            raise ValueError(f"advance({k}): expected step {self.next_step} of a run with {len(self.tc.traj.steps)} "
                             f"step(s){' (already finished)' if self.finished else ''}")
        out: list[Record] = []
        tc = self.tc
        if self._units is not None:
            for st, units in self._step_plan().get(k, ()):
                if st.deferred:
                    st.pending.extend(units)
                else:
                    st.run_units(tc, units, out)
        else:
            for st in self.steppers:
                st.advance(tc, k, out)
        self.log.records.extend(out)
        self.next_step = k + 1
        if self.defer:  # units of rules reading outputs whose calls this step answered (or its own, when it has none pending)
            out += self._flush(self.steppers)
        return out

    def add_rules(self, rules: list[CompiledRule], order: list[str]) -> list[Record]:
        """Rules that join a run already advanced (a domain pack selected by the run's first call of
        one of its tools): each new rule's units at the steps already advanced are evaluated now (or
        queued, when deferred), in step order with the rule's own budget — what it would have done had
        it been there from the start — and its :class:`Stepper` takes its place in ``order``.

        Args:
            rules: the joining rules (ids not yet stepped).
            order: every stepped rule's id in the order its records are written within a step.

        Returns:
            The joining rules' records of the steps already advanced (by step, then rule order).

        Raises:
            ValueError: a rule is already stepped, ``order`` misses a stepped rule, or the run is finished.
        """
        have = {st.rule.id for st in self.steppers}
        if self.finished or any(r.id in have for r in rules):
            raise ValueError("add_rules: the run is finished or a rule is already stepped")
        new = [self._stepper(r) for r in rules]
        pos = {rid: i for i, rid in enumerate(order)}
        if any(st.rule.id not in pos for st in (*self.steppers, *new)):
            raise ValueError("add_rules: order must name every stepped rule")
        self.steppers = sorted([*self.steppers, *new], key=lambda st: pos[st.rule.id])
        out: list[Record] = []
        tc = self.tc
        for k in range(self.next_step):
            for st in new:
                st.advance(tc, k, out)
        if self.defer:
            out += self._flush(new, insert=False)  # put in order with the rest below
        if out:
            out.sort(key=lambda r: (r.step, pos[r.rule_id]))  # stable: a per-call rule's records keep call order
            self.log.records.extend(out)
            self._joined = True
            self._order_log()
        return out

    def drop_rules(self, ids: set[str] | frozenset[str]) -> list[Record]:
        """Stop stepping the rules ``ids`` (superseded by a domain pack, or no longer selected): their
        records leave the log, their budget notes and skip counts are forgotten. Returns the records withdrawn."""
        self.steppers = [st for st in self.steppers if st.rule.id not in ids]
        gone = [r for r in self.log.records if r.rule_id in ids]
        if gone:
            self.log.records = [r for r in self.log.records if r.rule_id not in ids]
        return gone

    def _order_log(self) -> None:
        """Records by step, then rule order (a per-call rule's records in call order): the batch's order."""
        pos = {st.rule.id: i for i, st in enumerate(self.steppers)}
        self.log.records.sort(key=lambda r: (r.step, pos[r.rule_id]))

    def skipped(self) -> int:
        """Skips counted so far (units the index excluded or that decided nothing), every stepped rule."""
        return sum(st.skipped for st in self.steppers)

    def notes(self) -> list[str]:
        """The budget notes so far: one per rule whose budget ran out (the log's ``incomplete``)."""
        return [f"{st.rule.id}: {st.stop_message} at step {st.stopped}; {st.left} later candidate step(s) not "
                "evaluated" for st in self.steppers if st.stopped is not None]

    def finish(self) -> ValidationLog:
        """Evaluate the deferred units, write the budget notes, release the run's query caches.

        Returns:
            The :class:`ValidationLog`, equal to :func:`~trajaudit.engine.rule_eval.evaluate`'s on the
            steps advanced.
        """
        if self.finished:
            return self.log
        tc, vlog = self.tc, self.log
        late = False
        for st in self.steppers:
            if st.pending:
                units, st.pending = st.pending, []
                out: list[Record] = []
                st.run_units(tc, units, out)
                vlog.records.extend(out)
                late = late or bool(out)
        if late or self._joined:  # deferred records join their step in rule order (within a rule: call order, kept by the stable sort)
            self._order_log()
        vlog.skipped += self.skipped()
        vlog.incomplete.extend(self.notes())
        tc.release()
        vlog.sort()
        self.finished = True
        return vlog


def evaluate_run(trajectory: Trajectory, rules: list[CompiledRule], *, oracle: Any = None, config: Any = None,
                 tools: list[dict[str, Any]] | None = None) -> ValidationLog:
    """:func:`~trajaudit.engine.rule_eval.evaluate` through :class:`RunState` (:meth:`RunState.run_complete`:
    rule by rule over the complete run, prefix-state quantifiers); the same log. Arguments are not re-checked (the audit pipeline passes compiled rules). The cyclic
    garbage collector is paused while the run is evaluated (and restored after): every collection
    re-traversed the run's growing records and caches, 2/3 of the rule stage on a run 100x a tau run."""
    was = gc.isenabled()
    gc.disable()  # the run's records and caches are alive until it ends: collections during it re-traverse
    try:          # them (quadratic on long runs); its few reference cycles are collected afterwards
        return RunState(trajectory, rules, oracle=oracle, config=config, tools=tools).run_complete()
    finally:
        if was:
            gc.enable()
