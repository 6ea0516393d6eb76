"""Checking a run while it runs: :class:`Monitor` (issue 20).

A monitor receives a run one message (or IR step) at a time and answers, after each one, the
violations that this step settles: the records of the prefix-decidable rules at the new step, and
the records of earlier steps whose verdict the new step decides (a rule reading its call's output,
once that call and every earlier one is answered; a domain pack that applies from the first call of
one of its tools evaluates its rules on the steps already seen). ``close()`` settles the end-of-run
rules (rules that read the rest of the run: ``later``, ``steps``, ``traj``, another call's
``output``, ``check:`` rules; and the claim ledger's findings) and returns their records. When a
rule is decided is its horizon (``stepper.horizon``); a verdict handed out early is final: the
batch's verdict of that rule at that step. After the last message and ``close()``, ``monitor.log`` equals the batch validation log of
the same run (``run.evidence.gather``), record for record (tests/engine/run/test_monitor.py).

Messages accepted by :meth:`Monitor.add`:

- an OpenAI chat message (``{"role": ..., "content": ..., "tool_calls": [...], "tool_call_id": ...}``,
  a ``name`` for multi-agent logs; Who&When's ``{"name", "role", "content"}`` messages are read so),
- an Anthropic Messages message (``content`` a list of ``tool_use`` / ``tool_result`` / ``text`` blocks):
  normalized by the Anthropic adapter's reading (a message of several results gives several steps),
- an IR :class:`~trajaudit.engine.trace.ir.Step` (its index is set to its position in the run).

Rule evaluation: prefix-decidable rules (issue 22's ``stepper.prefix_decidable``) are evaluated at
each step; rules reading their call's output when the calls up to their step are answered; the
others are deferred to ``close()``. :class:`RuleStage` steps them with
``stepper.RunState(defer=True, lazy=True)`` on a :class:`~trajaudit.engine.dsl.live.LiveContext` (the
rule context appended step by step): an ``add()`` evaluates the rules' units at the new step only
(quantifiers over the prefix read prefix state), so its cost does not grow with the run
(``benchmarks/bench_monitor.txt``; a rule whose own lets aggregate the whole prefix still costs what it reads).
"""

from __future__ import annotations

import dataclasses
import gc
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from trajaudit.api_args import check_tools
from trajaudit.engine.claims import ClaimGraphBuilder
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.dsl.live import LiveContext
from trajaudit.engine.dsl.regex.prefilter import warm_registered
from trajaudit.engine.packs.compile import CompiledRule
from trajaudit.engine.packs.pack import check_packs
from trajaudit.engine.run.evidence import gather, rules_for, select_rules
from trajaudit.engine.run.pipeline import AuditSpec, build_context, close_context
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.adapters import anthropic as anthropic_adapter
from trajaudit.engine.trace.adapters.base import LoadOptions, build_steps, classify_openai
from trajaudit.engine.trace.ir import (
    FLAG_ORPHAN_TOOL_OUTPUT,
    FLAG_UNANSWERED_CALL,
    Source,
    Step,
    Trajectory,
)
from trajaudit.engine.validation.stepper import RunState, evaluate_run, prefix_decidable
from trajaudit.engine.validation_log import Record, ValidationLog
from trajaudit.errors import TraceFormatError, TrajauditError

__all__ = ["DEFAULT_ALARM_THRESHOLD", "Monitor", "MonitorError", "RuleStage", "diagnosis_basis", "prefix_decidable"]

#: :meth:`Monitor.check_alarm`'s default confidence (``watch``/``guard --alarm-threshold``): chosen by
#: leave-one-dataset-out on the online-detection replay (``benchmarks/online_detection.py``, docs/monitor.md)
DEFAULT_ALARM_THRESHOLD = 0.5

class MonitorError(TrajauditError, ValueError):
    """A message the monitor cannot read (names the message's position), or a misuse (add after close)."""


def _call_problem(raw: Any, where: str) -> str:
    if not isinstance(raw, dict):
        return f"{where} must be an object, got {type(raw).__name__}"
    fn: dict[str, Any] = raw["function"] if isinstance(raw.get("function"), dict) else raw
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        return f"{where} has no function name (expected a non-empty string, got {json.dumps(name, default=str)})"
    return ""


def _message_problem(msg: dict[str, Any]) -> str:
    """What is wrong with one chat message's shape, or ``""``: no ``role``, ``role`` not a string, ``content``
    neither a string, null nor a list of text parts / content blocks (strings or objects),
    ``tool_calls`` not a list, or a tool call (``tool_calls[j]`` or the legacy ``function_call``)
    that is not an object or has no function name. The batch loader is lenient on these (it renders
    odd content as JSON and names a nameless call ``<unnamed>``); a live monitor answers an agent
    as it runs, so it refuses them with this reason instead.
    """
    if "role" not in msg:
        return f"no 'role' field (keys: {sorted(msg)[:8]})"
    role = msg["role"]
    if not isinstance(role, str):
        return f"'role' must be a string, got {type(role).__name__} {json.dumps(role, default=str)[:40]}"
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return f"'content' must be a string, null or a list of parts, got {type(content).__name__}"
    if isinstance(content, list):
        bad = next((j for j, part in enumerate(content) if not isinstance(part, (str, dict))), None)
        if bad is not None:
            return f"content[{bad}] must be a text or a content block (object), got {type(content[bad]).__name__}"
    calls = msg.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return f"'tool_calls' must be a list, got {type(calls).__name__}"
        for j, raw in enumerate(calls):
            problem = _call_problem(raw, f"tool_calls[{j}]")
            if problem:
                return problem
    elif msg.get("function_call") is not None:
        return _call_problem(msg["function_call"], "function_call")
    return ""


def diagnosis_basis(diagnosis: Diagnosis) -> str:
    """What a diagnosis of the offline judge rests on: ``finding`` (an unrecovered error-level
    failure, or the origin of one), ``weak`` (only weaker findings), ``fallback`` (no finding: the
    first consequential action / last decision prior). Read from the judge's rationale, which names
    the path it took; any other strategy's diagnosis with evidence counts as ``finding``."""
    if diagnosis.basis:  # the offline judge says it (Diagnosis.basis); older or other strategies: read the rationale
        return diagnosis.basis
    why = diagnosis.rationale or ""
    if diagnosis.critical_step is None or why.startswith(("no rule or claim evidence", "no evidence", "no decision step")):
        return "fallback"
    if why.startswith("no error-level failure"):
        return "weak"
    return "finding"


def _ident(r: Record) -> str:
    return json.dumps(r.to_dict(), sort_keys=True, default=str)


class RuleStage:
    """The rules of one growing run, one step at a time (what :class:`Monitor` steps).

    A :class:`~trajaudit.engine.validation.stepper.RunState` (``defer=True, lazy=True``) on a
    :class:`~trajaudit.engine.dsl.live.LiveContext`: ``advance(step)`` appends the step to the context
    and evaluates the prefix-decidable rules' units at that step only (quantifiers over the prefix read
    prefix state); the other rules' units are queued for :meth:`finish`. Rule selection follows the
    batch (``evidence.rules_for``), kept from what it reads — the tool names called so far and the
    policy text — so it is re-done only when a new tool name or a system step arrives: a domain pack
    joins when the run first calls one of its tools (its rules' records on the earlier steps are
    evaluated then and returned with that step); a rule it supersedes is withdrawn (its records
    leave the log, see :attr:`dropped`). The prefix state of a stepped rule's quantifiers is created
    when the rule is selected (:meth:`LiveContext.warm`) and grows one step per add from then on, so
    the step where a rule first fires does not file the whole prefix.

    Args:
        context: the audit context (rules, domain packs, budget, tools).
        run_id: the run's id.
        task: the run's task (policy text); ``None``: the first user turn, as the batch adapters take it.
        system_prompts: prompts given outside the messages (policy text).

    Attributes:
        records: the rules' records so far, in the batch log's order (by step, then rule order).
        dropped: records withdrawn because their rule left the selection.
    """

    def __init__(self, context: AuditContext, run_id: str = "monitored-run", *, task: str | None = None,
                 system_prompts: dict[str, str] | None = None) -> None:
        self.context = context
        cfg = context.config
        self.tc = LiveContext(run_id, budget=cfg.rule_budget, tools=context.tools)
        self.state = RunState(None, [], config=cfg, tools=context.tools, defer=True, lazy=True, context=self.tc)
        self.dropped: list[Record] = []
        self._called: set[str] = set()
        self._reads_policy = any(dp.policy for dp in context.domain_packs)
        self._task = task
        self._prompts = [p for p in (system_prompts or {}).values() if isinstance(p, str)]
        self._system: list[str] = []
        self._selected: tuple[str, ...] | None = None
        self._final: list[Record] | None = None
        self._final_skipped = 0
        self._final_notes: list[str] = []

    @property
    def records(self) -> list[Record]:
        """The rules' records so far, in the batch log's order."""
        return self._final if self._final is not None else self.state.log.records

    @property
    def skipped(self) -> int:
        """Skips counted so far (as the batch log's ``skipped``)."""
        return self._final_skipped if self._final is not None else self.state.skipped()

    @property
    def incomplete(self) -> list[str]:
        """Budget notes so far (as the batch log's ``incomplete``)."""
        return list(self._final_notes) if self._final is not None else self.state.notes()

    def _policy(self) -> str:
        if not self._reads_policy:
            return ""
        task = self._task if self._task is not None else ""
        return "\n".join([task, *self._prompts, *self._system])

    def _select(self, rules: list[CompiledRule]) -> list[Record]:
        """Bring the stepped rules to ``rules`` (batch order): withdraw the others, add the new ones
        (their records on the steps already advanced are returned)."""
        ids = tuple(r.id for r in rules)
        if ids == self._selected:
            return []
        self._selected = ids
        have = {st.rule.id for st in self.state.steppers}
        keep = set(ids)
        gone = have - keep
        if gone:
            self.dropped += self.state.drop_rules(gone)
        joining = [r for r in rules if r.id not in have]
        out = self.state.add_rules(joining, list(ids))
        self._warm(joining)
        return out

    def _warm(self, rules: list[CompiledRule]) -> None:
        """Create now the prefix state that the stepped (prefix-decidable) ``rules``' quantifiers build
        at their first query (:meth:`LiveContext.warm`): from here on it grows by one step per add,
        instead of a rule that first fires at step k filing the k earlier steps in that add."""
        stepped = {st.rule.id for st in self.state.steppers if not st.deferred or st.waits}
        self.tc.warm([e for r in rules if r.id in stepped for e in r.asts.values()])

    def advance(self, step: Step) -> list[Record]:
        """Append ``step`` (the run's next step) and evaluate the rules there.

        Returns:
            The records it settles: those of rules that join now (on the earlier steps), then the
            prefix-decidable rules' records at ``step`` (rule order; a per-call rule's in call order).

        Raises:
            ValueError: ``step.index`` is not the next position.
        """
        self.tc.append(step)
        reselect = self._selected is None
        if step.tool_calls:
            names = set(step.tool_names) - self._called
            if names:
                self._called |= names
                reselect = True
        if self._reads_policy:
            if step.kind == "system":
                self._system.append(step.content)
                reselect = True
            if step.kind == "user" and self._task is None:  # the task is the first user turn
                self._task = step.content
                reselect = True
        out: list[Record] = []
        if reselect:
            chosen = select_rules(self.context, self._called, self._policy())[0]
            # the patterns of rules compiled so far (a domain pack compiles when it first applies): their
            # analyses, ASCII twins and branch plans built now, with the rules' selection, rather than by
            # the later adds that first search each pattern (each compiles patterns: ms per add)
            warm_registered()
            out = self._select(chosen)
        out += self.state.advance(step.index)
        return out

    def finish(self, traj: Trajectory) -> list[Record]:
        """Settle the run: ``traj`` is the finished run (its calls never answered flagged).

        The deferred rules' queued units are evaluated on it (and any rule the whole run selects that
        was not stepped joins now). When ``traj`` does not read as the steps were read (a flag set at
        the end, an output named only by a later call), every rule is evaluated on ``traj`` instead
        and the records that differ from those already handed out are returned.

        Returns:
            The records settled now.
        """
        if self._final is not None:
            return []
        rules, _ = rules_for(traj, self.context)
        if self.tc.same_as(traj):
            out = self._select(rules)
            given = {id(r) for r in self.state.log.records}
            self.tc.finalize(traj)
            vlog = self.state.finish()
            out += [r for r in vlog.records if id(r) not in given]
        else:
            handed = Counter(_ident(r) for r in self.state.log.records)
            vlog = evaluate_run(traj, rules, config=self.context.config, tools=self.context.tools)
            out = []
            for r in vlog.records:  # hand out only what differs from the records already given
                i = _ident(r)
                if handed[i] > 0:
                    handed[i] -= 1
                else:
                    out.append(r)
        self._final = list(vlog.records)
        self._final_skipped = vlog.skipped
        self._final_notes = list(vlog.incomplete)
        return out


class Monitor:
    """Audit a run while it runs (see the module docstring).

    Args:
        rules: extra rule packs (paths, shipped pack names, ``RulePack`` objects), as ``audit``'s
            ``rules``; the default packs always apply (a domain pack once the run calls its tools).
        tools: the run's OpenAI function schemas (a path or the list), for SCHEMA rules.
        taxonomy: taxonomy id of the diagnosis' category.
        run_id, task, system_prompts: the run's id, task text (default: the first user turn, as the
            batch adapters take it) and prompts given outside the messages.
        options: :class:`LoadOptions` for reading messages (content cut, tool-runner names).
        alarm_threshold: :meth:`check_alarm` raises the alarm when the judge's estimate has basis
            ``finding`` and a confidence of at least this (default :data:`DEFAULT_ALARM_THRESHOLD`).
        context: a prepared :class:`AuditContext` (overrides ``rules``/``tools``/``taxonomy``;
            several monitors can share one).
        source: the run's :class:`Source` (default ``Source("monitor")``).
        dialect: ``openai`` or ``anthropic`` (content blocks normalized by the Anthropic adapter);
            default: OpenAI until a message carries a ``tool_use``/``tool_result`` block, Anthropic
            from then on.
        promote_gc: (default) pause the cyclic garbage collector during :meth:`add` /
            :meth:`add_history` (restored after it; left alone when the caller disabled it) and,
            after it, run a generation-1 collection (``gc.collect(1)``): it traverses only what
            arrived since the previous add and moves the survivors (the step's settled state:
            views, indexes, records) to the oldest generation, so no young collection re-traverses a
            long run's state in an add and none interrupts an add. Promotions are counted as
            CPython counts its own, so full collections keep their schedule (they run outside the
            adds, when the caller's allocations start a collection). ``False`` (with ``freeze_gc``
            off): the collector is left entirely alone (docs/monitor.md "Garbage collector").
        freeze_gc: freeze the survivors instead of promoting them (``gc.freeze()``): not even full
            collections traverse the run's state; :meth:`close` / :meth:`release` undo it
            (``gc.unfreeze()``), and objects frozen meanwhile (the process's too) are collected
            only then. Off by default (``watch`` turns it on).

    Attributes:
        log: the :class:`ValidationLog` so far (records of settled verdicts, by step).
        steps: the run's steps so far (IR).
        alarm: ``None``, or the step at which the alarm was first raised.

    Raises:
        RulePackError, ArgumentTypeError: invalid packs or tools (as ``audit``).
        MonitorError: ``alarm_threshold`` is not a number from 0 to 1, or ``dialect`` is unknown.
    """

    def __init__(self, rules: Any = (), tools: Any = None, taxonomy: str = "agentrx", *, run_id: str | None = None,
                 task: str | None = None, system_prompts: dict[str, str] | None = None,
                 options: LoadOptions | None = None, alarm_threshold: float = DEFAULT_ALARM_THRESHOLD,
                 context: AuditContext | None = None, source: Source | None = None,
                 dialect: str | None = None, freeze_gc: bool = False, promote_gc: bool = True) -> None:
        self._own_context = context is None
        if context is None:
            packs, tool_arg = check_packs("Monitor", rules), check_tools("Monitor", tools)
            context = build_context(AuditSpec(rules=packs, tools=tool_arg, config=AuditConfig(taxonomy=taxonomy)))
        self.context = context
        self.options = options or LoadOptions()
        self.run_id = run_id or "monitored-run"
        self.task = task
        self.system_prompts = dict(system_prompts or {})
        self.source = source or Source("monitor")
        if isinstance(alarm_threshold, bool) or not isinstance(alarm_threshold, (int, float)) \
                or not 0.0 <= alarm_threshold <= 1.0:
            raise MonitorError(f"alarm_threshold must be a number from 0 to 1 (a confidence), got {alarm_threshold!r}")
        self.alarm_threshold = alarm_threshold
        if dialect not in (None, "openai", "anthropic"):
            raise MonitorError(f"dialect must be openai or anthropic (or None: detected), got {dialect!r}")
        self.dialect = dialect
        self.freeze_gc = freeze_gc
        self.promote_gc = promote_gc
        self._frozen = False
        self.steps: list[Step] = []
        self.alarm: int | None = None
        self.closed = False
        self._rules = RuleStage(context, self.run_id, task=task, system_prompts=self.system_prompts)
        # the claim ledger, built incrementally: each step is added once, when close() or diagnosis()
        # first needs it (_ledger_catch_up), then finished — never rebuilt. Adding steps on demand
        # rather than in add() keeps claim extraction off the add's latency for callers who only
        # want the rules' verdicts (a guard in block mode); a caller asking for diagnosis() after
        # every add pays the same total work there.
        self._ledger = ClaimGraphBuilder(context.config, task=task, system_prompts=self.system_prompts)
        self._ledger_next = 0  # steps[:_ledger_next] are in the ledger
        self._calls: set[str] = set()
        self._claims: list[Record] = []
        self._claim_incomplete: list[str] = []
        self._diag: tuple[int, Diagnosis] | None = None
        self.log = ValidationLog(self.run_id)

    # -- input ------------------------------------------------------------------------------------------
    def _steps_of(self, item: Any) -> list[Step]:
        k = len(self.steps)
        if isinstance(item, Step):
            return [dataclasses.replace(item, index=k)]
        if not isinstance(item, dict):
            raise MonitorError(f"message {k}: expected a chat message (an object with a 'role') or an IR Step, "
                               f"got {type(item).__name__}")
        problem = _message_problem(item)
        if problem:  # checked before anything is read, so a bad message leaves the state (dialect too) unchanged
            raise MonitorError(f"message {k}: {problem}")
        msgs: list[dict[str, Any]] = [item]
        notes = None
        content = item.get("content")
        dialect = self.dialect  # committed only once the message is read: a bad one leaves it unchanged
        if dialect is None and isinstance(content, list) and any(
                anthropic_adapter.block_type(b) in ("tool_use", "tool_result") for b in content):
            dialect = "anthropic"  # from the first tool block on, messages are read as Anthropic's
        if dialect == "anthropic" and isinstance(content, list):
            try:
                msgs, notes = anthropic_adapter.normalize([item], f"$[{k}]")
            except TraceFormatError as e:
                raise MonitorError(f"message {k}: {e}") from None
        out = []
        calls: set[str] = set()  # ids of this message's calls (committed once every step is read)
        for j, msg in enumerate(msgs):
            note = notes[j] if notes is not None else None
            try:
                [step] = build_steps([msg], self._classify, options=self.options, path=f"$[{k}]")
            except TraceFormatError as e:
                raise MonitorError(f"message {k}: {e}") from None
            flags = [f for f in step.flags if f not in (FLAG_ORPHAN_TOOL_OUTPUT, FLAG_UNANSWERED_CALL)]  # set by the run
            cid = step.tool_output.call_id if step.tool_output is not None else None
            if cid is not None and cid not in self._calls and cid not in calls:
                flags.append(FLAG_ORPHAN_TOOL_OUTPUT)
            meta = dict(step.metadata)
            if note is not None:
                flags += [f for f in note.flags if f not in flags]
                meta.update(note.metadata)
            out.append(dataclasses.replace(step, index=k + j, flags=tuple(flags), metadata=meta))
            calls.update(c.id for c in step.tool_calls if c.id)
        self._calls |= calls
        self.dialect = dialect
        return out

    def _classify(self, msg: dict[str, Any], i: int) -> Any:
        return classify_openai(msg, i, tool_agents=self.options.tool_agent_pattern)

    def trajectory(self, *, final: bool = False) -> Trajectory:
        """The run so far as a :class:`Trajectory` (``final``: calls never answered flagged ``unanswered_call``)."""
        steps = self.steps
        if final:
            answered = {s.tool_output.call_id for s in steps if s.tool_output is not None}
            steps = [dataclasses.replace(s, flags=s.flags + (FLAG_UNANSWERED_CALL,))
                     if any(c.id and c.id not in answered for c in s.tool_calls)
                     and FLAG_UNANSWERED_CALL not in s.flags else s for s in steps]
        task = self.task
        if task is None:
            task = next((s.content for s in steps if s.kind == "user"), "")
        agents: list[str] = []
        for s in steps:
            if s.is_decision and s.agent and s.agent not in agents:
                agents.append(s.agent)
        final_answer = next((s.content for s in reversed(steps) if s.is_decision and s.content.strip()
                             and not s.tool_calls), None)
        return Trajectory(id=self.run_id, steps=tuple(steps), source=self.source, task=task, final_answer=final_answer,
                          agents=tuple(agents), system_prompts=self.system_prompts)

    def add(self, message_or_step: Any) -> list[Record]:
        """Take the run's next message (or IR step); return the records it settles.

        Returns:
            The new records (pass / fail / unknown) of the step(s) the message became, plus the
            records of earlier steps decided now (rules of a domain pack that just became
            applicable); ``[r for r in records if r.verdict == "fail"]`` are the violations.

        Raises:
            MonitorError: the message cannot be read (the monitor's state is unchanged), or the
                monitor is closed.
        """
        if self.closed:
            raise MonitorError("add() after close(): the run is finished")
        paused = self._pause_gc()
        try:
            out: list[Record] = []
            for s in self._steps_of(message_or_step):
                self.steps.append(s)
                out += self._rules.advance(s)
            self._sync()
        finally:
            self._settle_gc(paused)
        return out

    def _ledger_catch_up(self) -> None:
        """Add the steps not yet in the claim ledger (each once, in order; O(new steps))."""
        steps, ledger = self.steps, self._ledger
        while self._ledger_next < len(steps):
            ledger.add(steps[self._ledger_next])
            self._ledger_next += 1

    def _pause_gc(self) -> bool:
        """Pause the cyclic collector for an add (see the class docstring); whether this call paused it."""
        if not (self.promote_gc or self.freeze_gc) or not gc.isenabled():
            return False  # left alone, or paused by the caller (or an enclosing add): theirs to restore
        gc.disable()
        return True

    def _settle_gc(self, paused: bool) -> None:
        """End of an add that paused the collector: restore it, then collect the young generations
        (what the add left as garbage) and move what survives to the oldest generation
        (``promote_gc``: ``gc.collect(1)``, counted as CPython counts its own promotions, so full
        collections keep their schedule), or freeze it (``freeze_gc``)."""
        if not paused:
            return
        gc.enable()
        if self.freeze_gc:
            gc.collect(0)
            gc.freeze()
            self._frozen = True
        else:  # generation 1 holds only what arrived since the previous add: O(the add's objects)
            gc.collect(1)

    def _unfreeze(self) -> None:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    def add_history(self, messages: Iterable[Any]) -> list[Record]:
        """Take several messages at once (a conversation's known prefix, e.g. a proxied request's
        messages): every message is read first, then the steps are evaluated one by one.

        Raises:
            MonitorError: a message cannot be read (the monitor's state is unchanged).
        """
        if self.closed:
            raise MonitorError("add_history() after close(): the run is finished")
        k0 = len(self.steps)
        calls, dialect = set(self._calls), self.dialect
        new: list[Step] = []
        try:
            for m in messages:
                for s in self._steps_of(m):
                    new.append(s)
                    self.steps.append(s)
        except MonitorError:
            del self.steps[k0:]
            self._calls, self.dialect = calls, dialect
            raise
        paused = self._pause_gc()
        try:
            out: list[Record] = []
            for s in new:
                out += self._rules.advance(s)
            self._sync()
        finally:
            self._settle_gc(paused)
        return out

    def extend(self, items: Iterable[Any]) -> list[Record]:
        """:meth:`add` each item; all the records settled."""
        out: list[Record] = []
        for it in items:
            out += self.add(it)
        return out

    def close(self) -> list[Record]:
        """Settle the end-of-run verdicts: deferred rules, unanswered calls, the claim ledger's findings.

        Returns:
            The records settled now. ``monitor.log`` is then the run's batch validation log.
        """
        if self.closed:
            return []
        self.closed = True
        self._unfreeze()
        if not self.steps:
            return []
        self._ledger_catch_up()  # with the steps as they were added (close() replaces them below)
        traj = self.trajectory(final=True)
        self.steps = list(traj.steps)  # calls never answered are flagged now (RuleStage.finish re-settles them)
        out = self._rules.finish(traj)
        cg = self._ledger.finish(traj)
        self._claims = list(cg.to_records())
        self._claim_incomplete = list(cg.incomplete)
        out += self._claims
        self._sync(traj)
        return out

    def _sync(self, traj: Trajectory | None = None) -> None:
        """Bring :attr:`log` up to date: O(rules) per step (the records list is the rule stage's own,
        already in the batch order); at the end (``traj``), the claim findings and notes as ``gather`` adds them."""
        vlog = self.log
        rules = self._rules
        vlog.skipped = rules.skipped
        if traj is None:
            vlog.records = rules.records
            vlog.incomplete = rules.incomplete
            return
        vlog.records = list(rules.records) + list(self._claims)
        vlog.incomplete = list(rules.incomplete) + self._claim_incomplete
        for s in traj.steps:
            if "truncated" in s.flags:
                vlog.incomplete.append(
                    f"steps.{s.index} content was cut at {len(s.content):,} of "
                    f"{s.metadata.get('original_length', 0):,} characters (LoadOptions.max_content_chars); "
                    "claims about the cut part may be reported as unsupported")
        vlog.sort()

    # -- judgement --------------------------------------------------------------------------------------
    def diagnosis(self) -> Diagnosis | None:
        """The offline judge's current estimate on the run so far (``None`` before any decision
        step); ``metadata["basis"]`` is ``finding`` | ``weak`` | ``fallback`` (:func:`diagnosis_basis`).
        Computed on demand (evidence of the prefix), memoized per step count."""
        n = len(self.steps)
        if self._diag is not None and self._diag[0] == n:
            return self._diag[1]
        traj = self.trajectory(final=self.closed)
        if not traj.decision_steps:
            return None
        self._ledger_catch_up()
        bundle = gather(traj, self.context, claims=self._ledger.finish(traj))
        d = default_strategies().get("offline").diagnose(traj, bundle, self.context)
        d = dataclasses.replace(d, metadata={**d.metadata, "basis": diagnosis_basis(d)})
        self._diag = (n, d)
        return d

    def check_alarm(self) -> bool:
        """Whether the alarm is raised: the estimate rests on a finding with confidence >=
        ``alarm_threshold``. Once raised it stays (``self.alarm`` = the step count when it was raised)."""
        if self.alarm is not None:
            return True
        d = self.diagnosis()
        if d is not None and d.metadata.get("basis") == "finding" and d.confidence >= self.alarm_threshold:
            self.alarm = len(self.steps) - 1
            return True
        return False

    def release(self) -> None:
        """Release the context the monitor built (an LLM client's pool)."""
        self._unfreeze()
        if self._own_context:
            close_context(self.context)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
        self.release()


def violations(records: Sequence[Record]) -> list[Record]:
    """The failures among ``records``."""
    return [r for r in records if r.verdict == "fail"]


