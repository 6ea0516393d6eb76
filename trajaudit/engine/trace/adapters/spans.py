"""Span-based traces (OpenTelemetry, OpenInference, Langfuse, LangSmith) → one trajectory per trace.

Tracing tools do not log a conversation: they log *operations* — an agent invocation, each model
call (with the whole conversation it was sent, and its answer), each tool execution — as spans of a
tree. Every span-based adapter reads its own records into :class:`SpanRecord` and says what each
span means as an :class:`Op` (an agent, a model call, a tool run, or nothing for trajaudit);
:func:`build_trace` then rebuilds the run's conversation and reads it as OpenAI chat messages
(:func:`~trajaudit.engine.trace.adapters.openai_chat.convert_chat`), so the same run gives the same steps
whether it was traced or logged as chat messages.

The rebuilt conversation (the step numbering of every span format):

- spans are walked depth-first from the roots, siblings by start time (file order breaks ties), so
  a child never comes before its parent even when clocks disagree (clock skew between processes);
- a model call adds the messages of its input not already in the conversation (a message counts
  as already there when an equal one — same role, text, tool-call ids, answered call id — was added
  before, counted with multiplicity), then its output messages, each as a step of the agent of the
  nearest enclosing agent span (else the span's own agent attribute, else ``assistant``);
- a tool span adds the tool's output as a tool step (call id, result, error), unless that call's
  output is already there; a tool call whose issuing model call was not recorded with content is
  attached to the model-call step before it, else to a step made for it (flagged ``synthesized_call``);
- a model call recorded without its messages (content capture off: the OpenTelemetry default) is
  still a step, with empty content, flagged ``content_not_captured`` (so are tool outputs without
  their result);
- spans that mean nothing to trajaudit (no GenAI/OpenInference attributes, retrievers, plain
  functions) are ignored and counted in ``Trajectory.metadata["ignored_spans"]``.

Every step keeps the span it came from: ``Step.source_number`` and ``metadata.span_id`` are its id
(``metadata.span_name`` its name); a diagnosis
of such a run carries ``metadata.source_span`` (``pipeline.with_source_message``). Duplicate span
ids (a span exported twice) keep the first copy and are counted (``duplicate_spans``); a span whose
parent is not in the trace is read as a root and counted (``missing_parents``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.trace.adapters.base import LoadOptions, text_of
from trajaudit.engine.trace.adapters.openai_chat import MessageNote, convert_chat
from trajaudit.engine.trace.adapters.span_shapes import as_list  # noqa: F401 - re-exported (the span adapters' helper)
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

FLAG_CONTENT_NOT_CAPTURED = "content_not_captured"  # the trace recorded the operation, not its text
FLAG_SYNTHESIZED_CALL = "synthesized_call"  # a step made for a tool span whose calling message is not in the trace


@dataclass
class SpanRecord:
    """One span (or run, or observation) of a trace, format-neutral.

    Attributes:
        trace_id: the trace it belongs to (one trajectory per trace id).
        span_id: its id (hex for OpenTelemetry; the run/observation id otherwise).
        parent_id: its parent's id, or ``None`` for a root.
        name: the span name.
        start: start time in nanoseconds since the epoch (or any sortable number), ``None`` if unknown.
        end: end time, ``None`` while the span is open or when unknown.
        attributes: the span's attributes (decoded values), or the format's own fields.
        events: ``[{"name", "time", "attributes", "body"}]``: span events and the log records tied to it.
        error: the span's error message when its status says it failed, else ``None``.
        order: its position in the input (ties of ``start`` keep it).
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int | float | None = None
    end: int | float | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    order: int = 0


@dataclass
class Op:
    """What one span means for the conversation.

    Attributes:
        kind: ``agent`` (an agent invocation: names the agent of the spans under it), ``llm`` (a
            model call), ``tool`` (a tool execution).
        agent: the agent's name (``agent``), or the agent a model/tool span names itself.
        inputs: the model call's input as OpenAI chat messages, or ``None`` when not captured.
        outputs: the model call's output messages (OpenAI form), or ``None`` when not captured.
        tool_name, call_id, arguments: the tool run's tool, call id and arguments (parsed JSON or text).
        result: the tool's result as text, or ``None`` when not captured.
        is_error: the tool run failed.
        system: system instructions given beside the input (prepended when the input has no system message).
        metadata: kept on the steps of the model call's output (model, token usage).
    """

    kind: str
    agent: str | None = None
    inputs: list[dict[str, Any]] | None = None
    outputs: list[dict[str, Any]] | None = None
    tool_name: str | None = None
    call_id: str | None = None
    arguments: Any = None
    result: str | None = None
    is_error: bool = False
    system: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def iso_ns(value: Any) -> int | None:
    """An ISO 8601 time (``2024-05-01T12:00:00.123456Z``) or a number of nanoseconds → nanoseconds,
    ``None`` when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if not isinstance(value, str) or not value:
        return None
    if value.isdigit():
        return int(value)
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(dt.timestamp() * 1_000_000) * 1000


def as_text(value: Any) -> str:
    """A result or input value as text: strings as they are, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def parse_json_text(value: Any) -> Any:
    """``value`` parsed when it is a JSON array/object string, else unchanged."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return safe_json.loads(value)
        except ValueError:
            return value
    return value


def openai_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """An OpenAI-form tool call (arguments as a JSON string, as the API sends them)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {},
                                                                   ensure_ascii=False, default=str)
    return {"id": str(call_id) if call_id is not None else None, "type": "function",
            "function": {"name": name if isinstance(name, str) else None, "arguments": args}}


def _fingerprint(m: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two messages of two model calls' inputs the same message."""
    role = m.get("role")
    role = role if isinstance(role, str) or role is None else repr(role)  # a damaged role stays hashable
    if role in ("tool", "function") and m.get("tool_call_id") is not None:
        return ("tool", str(m["tool_call_id"]))
    calls = tuple(str(c.get("id")) for c in as_list(m.get("tool_calls")) if isinstance(c, dict))
    text = " ".join(text_of(m.get("content"))[0].split())
    return (role, text, calls)


@dataclass
class _Conversation:
    """The conversation being rebuilt from a trace's spans, with one note per message."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    notes: list[MessageNote] = field(default_factory=list)
    seen: Counter = field(default_factory=Counter)
    issued: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    uncaptured: dict[str, int] = field(default_factory=dict)  # call id -> its tool message without a result

    def add(self, m: dict[str, Any], span: SpanRecord, flags: tuple[str, ...] = (),
            meta: dict[str, Any] | None = None) -> None:
        self.seen[_fingerprint(m)] += 1
        for c in as_list(m.get("tool_calls")):
            if isinstance(c, dict) and c.get("id") is not None:
                self.issued.add(str(c["id"]))
        if m.get("role") in ("tool", "function") and m.get("tool_call_id") is not None:
            self.answered.add(str(m["tool_call_id"]))
            if FLAG_CONTENT_NOT_CAPTURED in flags:
                self.uncaptured[str(m["tool_call_id"])] = len(self.messages)
        self.messages.append(m)
        self.notes.append(MessageNote(flags, {"span_id": span.span_id, "span_name": span.name, **(meta or {})},
                                      span.span_id))

    def add_new_inputs(self, inputs: list[dict[str, Any]], span: SpanRecord) -> None:
        here: Counter = Counter()
        for m in inputs:
            fp = _fingerprint(m)
            here[fp] += 1
            if here[fp] > self.seen[fp]:
                self.add(m, span)
            elif fp[0] == "tool" and fp[1] in self.uncaptured:  # a tool span without its result: the
                k = self.uncaptured.pop(fp[1])  # next model call's input shows it
                self.messages[k] = {**self.messages[k], "content": m.get("content")}
                old = self.notes[k]
                self.notes[k] = MessageNote(tuple(f for f in old.flags if f != FLAG_CONTENT_NOT_CAPTURED),
                                            {**old.metadata, "content_from_span": span.span_id}, old.source_number)


def walk_order(spans: list[SpanRecord]) -> tuple[list[SpanRecord], dict[str, SpanRecord], int, int]:
    """Spans in conversation order: depth first from the roots, siblings by (start, input order).

    Returns:
        ``(ordered spans, {span id: parent span}, duplicate spans dropped, spans with a missing parent)``.
    """
    by_id: dict[str, SpanRecord] = {}
    dup = 0
    for s in spans:
        if s.span_id in by_id:
            dup += 1
            continue
        by_id[s.span_id] = s
    children: dict[str | None, list[SpanRecord]] = {}
    missing = 0
    for s in by_id.values():
        parent = s.parent_id if s.parent_id and s.parent_id != s.span_id else None
        if parent is not None and parent not in by_id:
            missing += 1
            parent = None
        children.setdefault(parent, []).append(s)

    def key(s: SpanRecord) -> tuple[float, int]:
        return (s.start if s.start is not None else float("inf"), s.order)

    ordered: list[SpanRecord] = []
    parents: dict[str, SpanRecord] = {}
    stack = [(s, None) for s in sorted(children.get(None, []), key=key, reverse=True)]
    visited: set[str] = set()
    while stack:
        s, p = stack.pop()
        if s.span_id in visited:
            continue
        visited.add(s.span_id)
        if p is not None:
            parents[s.span_id] = p
        ordered.append(s)
        stack.extend((c, s) for c in sorted(children.get(s.span_id, []), key=key, reverse=True))
    # a parent cycle (a span whose ancestor is itself) reaches no root: read its spans in time order
    rest = sorted((s for s in by_id.values() if s.span_id not in visited), key=key)
    ordered.extend(rest)
    return ordered, parents, dup, missing


def build_trace(spans: list[SpanRecord], interpret: Callable[[SpanRecord], Op | None], *, source: Source,
                options: LoadOptions, numbering: str, metadata: dict[str, Any] | None = None) -> Trajectory:
    """One trace's spans → a trajectory (see the module docstring for the reading).

    Args:
        spans: the trace's spans (any order).
        interpret: the format's reading of one span (``None``: the span means nothing here).
        numbering: ``Source.step_numbering`` to record.
        metadata: run metadata to add (the trace id is always kept as ``trace_id``).

    Raises:
        TraceFormatError: no span of the trace is an agent step, a model call or a tool run.
    """
    if not spans:
        raise TraceFormatError("the trace holds no spans")
    ordered, parents, dup, missing = walk_order(spans)
    conv = _Conversation()
    ignored = 0
    agents: dict[str, str | None] = {}  # span id -> the agent named by it or its nearest agent ancestor
    ops = [(s, interpret(s)) for s in ordered]
    busy: set[str] = set()  # spans with a model call or a tool run under them
    for s, op in ops:
        if op is not None and op.kind in ("llm", "tool"):
            p = parents.get(s.span_id)
            while p is not None and p.span_id not in busy:
                busy.add(p.span_id)
                p = parents.get(p.span_id)
    for s, op in ops:
        p = parents.get(s.span_id)
        inherited = agents.get(p.span_id) if p is not None else None
        if op is None:
            ignored += 1
            agents[s.span_id] = inherited
            continue
        if op.kind == "agent":
            agents[s.span_id] = op.agent or inherited
            if s.span_id in busy or (op.inputs is None and op.outputs is None):
                continue
            # an agent invocation recorded with its messages and no model call under it (a remote
            # agent: the service ran the model): its messages are the steps
            op = Op("llm", agent=op.agent, inputs=op.inputs, outputs=op.outputs, system=op.system,
                    metadata=op.metadata)
            agents[s.span_id], inherited = op.agent or inherited, op.agent or inherited
        else:
            agents[s.span_id] = inherited
        agent = inherited or op.agent
        if op.kind == "llm":
            _add_call(conv, op, s, agent)
        elif op.kind == "tool":
            _add_tool(conv, op, s, agent)
    if not conv.messages:
        raise TraceFormatError(f"the trace holds no agent, model-call or tool span ({ignored} span(s) ignored: "
                               "no GenAI attributes)")
    meta = {**(metadata or {}), "spans": len(spans), "ignored_spans": ignored}
    if dup:
        meta["duplicate_spans"] = dup
    if missing:
        meta["missing_parents"] = missing
    run = {"id": meta.get("trace_id")} if meta.get("trace_id") else None
    traj = convert_chat(conv.messages, source=source, options=options, run=run, notes=conv.notes,
                        step_numbering=numbering)
    return Trajectory(**{**traj.__dict__, "metadata": {**traj.metadata, **meta}})


def _add_call(conv: _Conversation, op: Op, s: SpanRecord, agent: str | None) -> None:
    """A model call: its new input messages, then its output (a content-less step when not captured)."""
    if op.inputs is not None:
        inputs = list(op.inputs)
        if op.system and not any(m.get("role") in ("system", "developer") for m in inputs):
            inputs.insert(0, {"role": "system", "content": op.system})
        conv.add_new_inputs(inputs, s)
    elif op.system and not conv.messages:
        conv.add({"role": "system", "content": op.system}, s)
    if op.outputs is None:
        conv.add({"role": "assistant", "content": "", **({"name": agent} if agent else {})}, s,
                 (FLAG_CONTENT_NOT_CAPTURED,), op.metadata)
    for m in op.outputs or ():
        m = dict(m)
        if m.get("role") in (None, "assistant") and agent and not m.get("name"):
            m["name"] = agent
        m.setdefault("role", "assistant")
        conv.add(m, s, meta=op.metadata)


def _add_tool(conv: _Conversation, op: Op, s: SpanRecord, agent: str | None) -> None:
    """A tool span: its output as a tool message, its call attached or synthesized when missing."""
    call_id = op.call_id
    if call_id is None:  # no id: the earliest unanswered call of this tool, else a fresh id
        call_id = next((c for m in conv.messages for c in _call_ids(m, op.tool_name)
                        if c not in conv.answered), None)
    if call_id is not None and call_id in conv.answered:
        return
    if call_id is None or call_id not in conv.issued:
        call_id = call_id or f"{s.span_id}"
        call = openai_call(call_id, op.tool_name or s.name, op.arguments)
        last = conv.messages[-1] if conv.messages else None
        if (last is not None and last.get("role") == "assistant"
                and FLAG_CONTENT_NOT_CAPTURED in conv.notes[-1].flags and not last.get("content")):
            last.setdefault("tool_calls", []).append(call)
            conv.issued.add(call_id)
        else:
            conv.add({"role": "assistant", "content": "", "tool_calls": [call],
                      **({"name": agent} if agent else {})}, s, (FLAG_SYNTHESIZED_CALL,))
    flags = (FLAG_CONTENT_NOT_CAPTURED,) if op.result is None and not op.is_error else ()
    content = op.result if op.result is not None else ""
    conv.add({"role": "tool", "tool_call_id": call_id, "name": op.tool_name, "content": content,
              "is_error": op.is_error}, s, flags)


def _call_ids(m: dict[str, Any], name: str | None) -> Iterable[str]:
    for c in as_list(m.get("tool_calls")):
        fn = c.get("function") if isinstance(c, dict) else None
        if isinstance(fn, dict) and c.get("id") is not None and (name is None or fn.get("name") == name):
            yield str(c["id"])


def group_by_trace(spans: Iterable[SpanRecord]) -> list[list[SpanRecord]]:
    """Spans grouped by trace id, traces in order of first appearance (interleaved traces are split)."""
    groups: dict[str, list[SpanRecord]] = {}
    for s in spans:
        groups.setdefault(s.trace_id, []).append(s)
    return list(groups.values())
