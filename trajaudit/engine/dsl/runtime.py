"""Run-time side of the rule language: read-only views of the IR, the per-trajectory index, and
the value semantics (equality, ordering, membership) that compiled closures use.

Rules are untrusted data, so they never touch Python objects directly: a rule sees a
:class:`StepView` or :class:`CallView` and can only read the fields listed in ``STEP_FIELDS`` /
``CALL_FIELDS`` (resolved by name through dictionaries, never with ``getattr``), plus JSON values
(dicts, lists, strings, numbers). Every field read knows its evidence address
(``steps.7.tool_calls.0.arguments.item_ids``). AgentRx §3.2: a guard/assertion is evaluated over the
prefix ``T≤k`` and the current step ``s_k``; the index lets a rule visit only steps its guard can match.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from collections import defaultdict
from typing import Any

from trajaudit.engine.dsl.regex.prefilter import memo_search
from trajaudit.engine.trace import json_content
from trajaudit.engine.trace.escapes import has_escapes, mask_escapes
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.engine.trace.observation import split_observation


class EvalError(Exception):
    """A rule could not be evaluated on this step (type error, bad value); becomes an ``unknown`` record."""


class BudgetExceeded(Exception):
    """The per-rule evaluation budget (``AuditConfig.rule_budget``) was used up."""


class StepView:
    """Read-only view of one step, as rules see it (fields: ``STEP_FIELDS``)."""

    __slots__ = ("tc", "step", "address", "_preview")
    kind_name = "step"

    def __init__(self, tc: TrajContext, step: Step) -> None:
        self.tc = tc
        self.step = step
        self.address = f"steps.{step.index}"
        self._preview: str | None = None

    def __repr__(self) -> str:
        return f"<step {self.step.index} {self.step.kind}>"

    def field(self, name: str) -> tuple[Any, str]:
        """``(value, address)`` of field ``name``; raises :class:`EvalError` for an unknown field."""
        f = STEP_FIELDS.get(name)
        if f is None:
            raise EvalError(f"a step has no field {name!r}")
        return f[0](self), self.address + f[1]

    def preview(self) -> str:
        """One-line preview used as an evidence value (computed once per run: bindings of every record
        that sees the step quote it, and a long step's preview scans its whole text)."""
        if self._preview is None:
            self._preview = self.step.preview(120)
        return self._preview


class CallView:
    """Read-only view of one tool call (fields: ``CALL_FIELDS``)."""

    __slots__ = ("tc", "step", "position", "call", "address")
    kind_name = "call"

    def __init__(self, tc: TrajContext, step: Step, position: int) -> None:
        self.tc = tc
        self.step = step
        self.position = position
        self.call = step.tool_calls[position]
        self.address = f"steps.{step.index}.tool_calls.{position}"

    def __repr__(self) -> str:
        return f"<call {self.call.name} at step {self.step.index}>"

    def field(self, name: str) -> tuple[Any, str]:
        """``(value, address)`` of field ``name``; raises :class:`EvalError` for an unknown field."""
        f = CALL_FIELDS.get(name)
        if f is None:
            raise EvalError(f"a tool call has no field {name!r}")
        return f[0](self), self.address + f[1]

    def preview(self) -> str:
        """``name(arguments)`` as an evidence value."""
        c = self.call
        args = c.raw_arguments if c.arguments_error else json.dumps(c.arguments, ensure_ascii=False, default=str)
        text = f"{c.name}({args})"
        return text if len(text) <= 200 else text[:199] + "…"


View = (StepView, CallView)


def _step_call(v: StepView) -> CallView | None:
    s = v.step
    if s.kind == "tool":
        return v.tc.calling_call(s.index)
    return v.tc.call_views[s.index][0] if s.tool_calls else None


def _step_said(v: StepView) -> str:
    # what the agent wrote as it is displayed: terminal control sequences (an OSC 8 hyperlink's URL, a
    # window title) blanked, offsets kept
    said = split_observation(v.step.content)[0]
    return mask_escapes(said) if has_escapes(said) else said


def _step_json(v: StepView) -> Any:
    return v.tc.json_of(v.step.index)


# field name -> (getter, address suffix). Documented in docs/rules.md ("Fields").
STEP_FIELDS: dict[str, tuple[Any, str]] = {
    "index": (lambda v: v.step.index, ".index"),
    "kind": (lambda v: v.step.kind, ".kind"),
    "role": (lambda v: v.step.role, ".role"),
    "agent": (lambda v: v.step.agent, ".agent"),
    "content": (lambda v: v.step.content, ".content"),
    "json": (_step_json, ".content"),
    "tool": (lambda v: v.tc.output_name(v.step.index), ".tool_output.name"),
    "name": (lambda v: v.tc.output_name(v.step.index), ".tool_output.name"),
    "is_error": (lambda v: bool(v.step.tool_output and v.step.tool_output.is_error), ".tool_output.is_error"),
    "call_id": (lambda v: v.step.tool_output.call_id if v.step.tool_output else None, ".tool_output.call_id"),
    "calls": (lambda v: list(v.tc.call_views[v.step.index]), ".tool_calls"),
    "tools": (lambda v: list(v.step.tool_names), ".tool_calls"),
    "call": (_step_call, ""),
    "is_decision": (lambda v: v.step.is_decision, ".kind"),
    "flags": (lambda v: list(v.step.flags), ".flags"),
    "source_number": (lambda v: v.step.source_number, ".source_number"),
    "metadata": (lambda v: v.step.metadata, ".metadata"),
    "address": (lambda v: v.address, ""),
    "said": (_step_said, ".content"),
    "observed": (lambda v: split_observation(v.step.content)[1], ".content"),
}

CALL_FIELDS: dict[str, tuple[Any, str]] = {
    "name": (lambda c: c.call.name, ".name"),
    "args": (lambda c: c.call.arguments, ".arguments"),
    "arguments": (lambda c: c.call.arguments, ".arguments"),
    "raw": (lambda c: c.call.raw_arguments, ".raw_arguments"),
    "error": (lambda c: c.call.arguments_error, ".arguments_error"),
    "id": (lambda c: c.call.id, ".id"),
    "position": (lambda c: c.position, ""),
    "index": (lambda c: c.step.index, ""),
    "step": (lambda c: c.tc.views[c.step.index], ""),
    "output": (lambda c: c.tc.output_for(c), ""),
    "address": (lambda c: c.address, ""),
}

# Static types of fields, for compile-time checks (see rule_compiler).
STEP_FIELD_TYPES = {"index": "num", "kind": "str", "role": "str", "agent": "str", "content": "str", "json": "any",
                    "tool": "str", "name": "str", "is_error": "bool", "call_id": "str", "calls": "list",
                    "tools": "list", "call": "call", "is_decision": "bool", "flags": "list",
                    "source_number": "any", "metadata": "any", "address": "str", "said": "str",
                    "observed": "str"}
CALL_FIELD_TYPES = {"name": "str", "args": "any", "arguments": "any", "raw": "str", "error": "str", "id": "str",
                    "position": "num", "index": "num", "step": "step", "output": "step", "address": "str"}


class PrefixSlice(list):
    """A list that is a prefix of an append-only series (``src.vals[:len(self)]``; see
    :mod:`trajaudit.engine.dsl.incremental`): used as the plain list it is; operations that know the
    series extend their per-run state with the new suffix only."""

    __slots__ = ("src",)

    def __init__(self, vals: list[Any], src: Any) -> None:
        super().__init__(vals)
        self.src = src


def copy_list(xs: list[Any]) -> list[Any]:
    """A shallow copy of a list, a :class:`PrefixSlice` copied as one (same series)."""
    return PrefixSlice(xs, xs.src) if xs.__class__ is PrefixSlice else list(xs)


class TrajContext:
    """Everything computed once per trajectory: views, indexes, parsed JSON, query caches, budget.

    Attributes:
        traj: the trajectory.
        views: one :class:`StepView` per step.
        call_views: per step, its :class:`CallView` list.
        all_calls: every call in order; ``call_steps`` their step indices (for bisection).
        by_kind: ``{kind: [step index]}``; by_call_name: ``{tool: [(step, position)]}``;
        by_output_name: ``{tool: [step index]}`` of tool outputs.
        cache: per-trajectory cache for quantifier pre-computation (keyed by AST node id).
        ops, budget: operations used by the current rule and its limit (``AuditConfig.rule_budget``).
        oracle, tools, registry: semantic oracle, tool schemas and checker registry for ``check:`` rules.
    """

    def __init__(self, traj: Trajectory, *, budget: int = 200_000, oracle: Any = None, tools: Any = None,
                 checkers: Any = None) -> None:
        self.traj = traj
        self.views = [StepView(self, s) for s in traj.steps]
        self.call_views = [[CallView(self, s, j) for j in range(len(s.tool_calls))] for s in traj.steps]
        self.all_calls = [c for cs in self.call_views for c in cs]
        self.call_steps = [c.step.index for c in self.all_calls]
        self.by_kind: dict[str, list[int]] = defaultdict(list)
        self.by_call_name: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.by_output_name: dict[str, list[int]] = defaultdict(list)
        self._answer: dict[str, int] = {}
        self._out_name: dict[int, str | None] = {}
        for s in traj.steps:
            self.by_kind[s.kind].append(s.index)
            for j, c in enumerate(s.tool_calls):
                self.by_call_name[c.name].append((s.index, j))
            if s.tool_output is not None:
                name = traj.output_tool_name(s)
                self._out_name[s.index] = name
                if name is not None:
                    self.by_output_name[name].append(s.index)
                cid = s.tool_output.call_id
                if cid is not None:
                    self._answer.setdefault(cid, s.index)
        self._json: dict[int, Any] = {}
        self._search: dict[tuple[re.Pattern[str], str], tuple[int, int, str] | None] = {}
        self._outputs_by_caller: dict[int, list[int]] | None = None
        self.cache: dict[Any, Any] = {}
        self.shared: dict[Any, Any] = {}  # run-wide values of expressions shared by rules (rule_queries)
        self.ops = 0
        self.budget = budget
        #: operations charged for filing quantifiers' per-run indexes so far (``QuantPlan._matches``;
        #: read as a difference by ``validation.unit_memo``, which replays only the rest)
        self.filing = 0
        self.lazy = False  # rule_columnar: the run grows step by step (prefix state extended on demand)
        self.oracle = oracle
        self.tools = tools
        self.checkers = checkers

    def release(self) -> None:
        """Drop the per-run query caches once every rule has run (views and indexes stay)."""
        for d in (self._json, self._search, self.cache, self.shared):
            d.clear()

    def charge(self, n: int = 1) -> None:
        """Count ``n`` evaluation operations against the current rule's budget."""
        self.ops += n
        if self.ops > self.budget:
            raise BudgetExceeded(f"evaluation budget of {self.budget} operations exceeded")

    def output_name(self, i: int) -> str | None:
        """Tool name of the tool output at step ``i`` (from the output or its call), else ``None``."""
        return self._out_name.get(i)

    def search(self, rx: re.Pattern[str], text: str) -> tuple[int, int, str] | None:
        """``(start, end, matched text)`` of ``rx.search(text)`` or ``None``, memoized for the run: rules
        test the same step texts against the same patterns once per later step (``exists o in
        earlier where o.content ~ …``), which would otherwise rescan the run for every step."""
        return memo_search(rx, text, self._search)

    def json_of(self, i: int) -> Any:
        """The step's content parsed as JSON (``None`` when it is not JSON); cached."""
        if i not in self._json:
            text = self.traj.steps[i].content.strip()
            val = None
            if text[:1] in ("{", "[", '"') or text[:1].isdigit() or text[:1] == "-":
                val = json_content.parse(text)  # (safe_json.loads, None if not JSON; shared with the claims)
            self._json[i] = val
        return self._json[i]

    def calling_call(self, i: int) -> CallView | None:
        """For a tool output at step ``i``, the view of the call it answers."""
        hit = self.traj.call_for(self.traj.steps[i])
        if hit is None:
            return None
        step, call = hit
        for cv in self.call_views[step.index]:
            if cv.call is call:
                return cv
        return None

    def answered_until(self) -> int:
        """The steps before which every call with an id has its output here, so ``.output`` reads of
        their calls are final (:func:`~trajaudit.engine.validation.stepper.horizon` ``"outputs"``).
        A context of a complete run returns 0: it does not grow, and a monitor's growing context
        (:class:`~trajaudit.engine.dsl.live.LiveContext`) tracks it."""
        return 0

    def output_for(self, c: CallView) -> StepView | None:
        """The tool-output step answering call ``c`` (by call id), or ``None``."""
        if c.call.id is None:
            return None
        i = self._answer.get(c.call.id)
        return self.views[i] if i is not None else None

    def outputs_of(self, k: int) -> list[StepView]:
        """The tool outputs after step ``k`` that answer one of its calls (``o.call.step == step``), and
        the outputs that answer no known call and ran its code (``Trajectory.code_authors``: the
        latest step with a fenced code block since the previous tool output) or, when no step wrote
        code, come right after it — from an index built once per run."""
        idx = self._outputs_by_caller
        if idx is None:
            idx = self._outputs_by_caller = defaultdict(list)
            authors = self.traj.code_authors
            for i in self.by_kind.get("tool", ()):
                c = self.calling_call(i)
                if c is None:
                    if i in authors:  # a code runner's output: the step that wrote the code
                        idx[authors[i]].append(i)
                    elif i >= 1:
                        idx[i - 1].append(i)  # an output with no known call: the step before it
                elif c.step.index < i:
                    idx[c.step.index].append(i)
        return [self.views[i] for i in idx.get(k, ())]

    def tool_positions(self, name: str | None = None) -> list[int]:
        """Sorted indexes of the tool-output steps (``kind == "tool"``), of tool ``name`` when given —
        what ``outputs(seq[, name])`` keeps — computed once per run."""
        key = ("tool-positions", name)
        pos = self.cache.get(key)
        if pos is None:
            base = self.by_kind.get("tool", ()) if name is None else self.by_output_name.get(name, ())
            steps = self.traj.steps
            pos = self.cache[key] = [i for i in base if steps[i].kind == "tool"]
        return pos

    def latest_output(self, name: str, before: int) -> StepView | None:
        """The latest tool output of tool ``name`` strictly before step ``before`` (O(log n))."""
        idx = self.by_output_name.get(name)
        if not idx:
            return None
        p = bisect_left(idx, before)
        return self.views[idx[p - 1]] if p else None


class Env:
    """The state of one evaluation: the current step (and call), variables, evidence seen."""

    __slots__ = ("tc", "k", "step", "call", "vars", "addrs", "seen", "witness")

    def __init__(self, tc: TrajContext, k: int, call: CallView | None = None) -> None:
        self.tc = tc
        self.k = k
        self.step = tc.views[k]
        self.call = call
        self.vars: dict[str, Any] = {}
        self.addrs: dict[str, str] = {}
        self.seen: list[tuple[str, Any, str | None]] = []
        self.witness: dict[str, Any] = {}


# ---- value semantics -------------------------------------------------------------------------

def is_num(x: Any) -> bool:
    """True for int/float (not bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def equal(a: Any, b: Any) -> bool:
    """``==``: numbers compare with a float tolerance (1e-9 relative and absolute); views by identity."""
    if a.__class__ is str or b.__class__ is str:  # what the general case gives: a string equals only
        return a == b                               # an equal string (no number, view or other value)
    if is_num(a) and is_num(b):
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, View) or isinstance(b, View):
        return a is b
    return a == b


def equal_reference(a: Any, b: Any) -> bool:
    """:func:`equal` without its string shortcut (the definition; tests check that they agree)."""
    if is_num(a) and is_num(b):
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, View) or isinstance(b, View):
        return a is b
    return a == b


def order(op: str, a: Any, b: Any) -> bool:
    """``< <= > >=`` on two numbers or two strings; anything else raises :class:`EvalError`."""
    if not ((is_num(a) and is_num(b)) or (isinstance(a, str) and isinstance(b, str))):
        raise EvalError(f"cannot compare {type_name(a)} {op} {type_name(b)}")
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def member(x: Any, container: Any) -> bool:
    """``in``: substring for two strings, element of a list, key of an object; ``null`` contains nothing."""
    if container is None:
        return False
    if isinstance(container, str):
        if not isinstance(x, str):
            if is_num(x):
                x = str(x)
            else:
                raise EvalError(f"cannot look for {type_name(x)} in a string")
        return x in container
    if isinstance(container, (list, tuple)):
        if x.__class__ is str:  # equal(x, y) is x == y for a string x (see equal): the C-level scan
            return x in container
        return any(equal(x, y) for y in container)
    if isinstance(container, dict):
        return isinstance(x, str) and x in container
    raise EvalError(f"'in' needs a string, list or object on the right, got {type_name(container)}")


def type_name(x: Any) -> str:
    """The language's name for a value's type."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "boolean"
    if is_num(x):
        return "number"
    if isinstance(x, str):
        return "string"
    if isinstance(x, (list, tuple)):
        return "list"
    if isinstance(x, dict):
        return "object"
    if isinstance(x, StepView):
        return "step"
    if isinstance(x, CallView):
        return "call"
    return type(x).__name__


def json_safe(x: Any, limit: int = 300) -> Any:
    """A small JSON-safe rendering of a value for evidence and bindings (views → address + preview)."""
    if isinstance(x, View):
        return {"address": x.address, "preview": x.preview()}
    if x is None or isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, str):
        return x if len(x) <= limit else x[: limit - 1] + "…"
    try:
        text = json.dumps(x, ensure_ascii=False, default=lambda o: o.address if isinstance(o, View) else str(o))
    except (TypeError, ValueError):
        return str(x)[:limit]
    if len(text) <= limit:
        return json.loads(text)
    return text[: limit - 1] + "…"


def child(value: Any, key: Any) -> Any:
    """``value.key`` / ``value[key]`` on JSON data: object key, list position (negative from the end).

    Missing keys, out-of-range positions and access on ``null`` give ``null`` (so guards can test
    ``x.y != null``); indexing a string or number by name raises :class:`EvalError`.
    """
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(key) if isinstance(key, str) else value.get(str(key)) if is_num(key) else None
    if isinstance(value, (list, tuple)):
        if is_num(key) and float(key).is_integer():
            i = int(key)
            return value[i] if -len(value) <= i < len(value) else None
        raise EvalError(f"a list is indexed by a whole number, not {type_name(key)} {key!r}")
    if isinstance(value, str) and is_num(key) and float(key).is_integer():
        i = int(key)
        return value[i] if -len(value) <= i < len(value) else None
    raise EvalError(f"cannot read {key!r} of a {type_name(value)}")
