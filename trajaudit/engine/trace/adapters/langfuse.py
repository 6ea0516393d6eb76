"""Langfuse traces (``langfuse``): the public API's trace JSON with its observations.

Accepted documents: one trace (``{"id", "name", "input", "output", "observations": [...]}``, as
``GET /api/public/traces/{traceId}`` and the UI's JSON export give it), a list of traces, or
``{"data": [...]}`` (a page of the traces list with observations); JSON lines of traces. Also what
the Langfuse SDK (v3+) exports: OpenTelemetry spans (OTLP/JSON, as for ``otel``) whose
``langfuse.observation.*`` attributes carry the observation (type, input, output, level, metadata),
one run per trace id — read as those observations. An
observation is ``{"id", "traceId", "type", "name", "startTime", "endTime", "parentObservationId",
"input", "output", "level", "statusMessage", "metadata"}``; observations may also be nested in a
``children`` (or ``observations``) list of their parent.

Observation types: ``AGENT`` names the agent of the observations under it; ``GENERATION`` is a model
call (``input``: OpenAI-style messages, or ``{"messages": [...]}``; ``output``: a message, a list
of messages, a completion with ``choices``, or text); ``TOOL`` is a tool run (``name``, ``input`` as
arguments, ``output`` as result, ``level: ERROR`` or a ``statusMessage`` with an error level as a
failure; the call id from ``metadata.tool_call_id``/``input.tool_call_id``, else the earliest
unanswered call of that tool). ``SPAN``, ``EVENT``, ``CHAIN``, ``RETRIEVER``, ``EVALUATOR``,
``EMBEDDING``, ``GUARDRAIL`` are ignored and counted. When no generation carries the user's turn,
the trace's ``input`` (a string, or ``{"messages"}``) opens the conversation as the user's message.
Numbering: as ``otel`` (:func:`~trajaudit.engine.trace.adapters.spans.build_trace`), observations ordered by
``startTime`` under their parent.
"""

from __future__ import annotations

from typing import Any

from trajaudit.engine.trace.adapters.base import LoadOptions, Sniff
from trajaudit.engine.trace.adapters.langsmith import completion_messages, lc_or_openai_messages
from trajaudit.engine.trace.adapters.otel import SpanTrace, has_attribute, span_traces
from trajaudit.engine.trace.adapters.span_shapes import is_span_document
from trajaudit.engine.trace.adapters.spans import (
    Op,
    SpanRecord,
    as_text,
    build_trace,
    iso_ns,
    parse_json_text,
)
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

NUMBERING = ("Langfuse: 0-based position in the conversation rebuilt from the trace's observations "
             "(depth first, siblings by startTime; each GENERATION adds its new input messages, then its output; "
             "TOOL observations add their output)")
OBSERVATION = "langfuse.observation."
TYPES = frozenset({"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR",
                   "EMBEDDING", "GUARDRAIL"})


def _is_observation(o: Any) -> bool:
    return isinstance(o, dict) and str(o.get("type") or "").upper() in TYPES and "id" in o


def is_trace(doc: Any) -> bool:
    """A Langfuse trace: an object with an ``observations`` list of observations (or an empty one
    beside the trace's ``id`` and ``timestamp``/``htmlPath``)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("observations"), list):
        return False
    obs = doc["observations"]
    return any(_is_observation(o) for o in obs) or (not obs and "id" in doc and ("timestamp" in doc or "htmlPath" in doc))


def _traces_of(doc: Any) -> list[Any] | None:
    if is_trace(doc):
        return [doc]
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        doc = doc["data"]
    if isinstance(doc, list) and doc and any(is_trace(t) for t in doc) and all(
            is_trace(t) or not isinstance(t, dict) or "role" not in t for t in doc):
        return doc
    return None


def _flatten(trace: dict[str, Any]) -> tuple[list[SpanRecord], int]:
    out: list[SpanRecord] = []
    bad = 0
    tid = str(trace.get("id") or "")
    stack: list[tuple[Any, str | None]] = [(o, None) for o in reversed(trace["observations"])]
    while stack:
        o, parent = stack.pop()
        if not _is_observation(o):
            bad += 1
            continue
        pid = o.get("parentObservationId") or parent
        level = str(o.get("level") or "").upper()
        err = (str(o.get("statusMessage") or "error")) if level == "ERROR" else None
        out.append(SpanRecord(str(o.get("traceId") or tid), str(o["id"]), str(pid) if pid else None,
                              str(o.get("name") or ""), iso_ns(o.get("startTime")), iso_ns(o.get("endTime")),
                              o, [], err, len(out)))
        for key in ("children", "observations"):
            kids = o.get(key)
            if isinstance(kids, list):
                stack.extend((c, str(o["id"])) for c in reversed(kids))
    return out, bad


def from_otel_span(s: SpanRecord) -> SpanRecord:
    """A span exported by the Langfuse SDK (v3+, OpenTelemetry-based: ``langfuse.observation.type``,
    ``.input``, ``.output``, ``.level``, ``.status_message``, ``.metadata.*``) as the observation it
    stands for (the span's fields become the observation's)."""
    a = s.attributes
    obs: dict[str, Any] = {"id": s.span_id, "type": str(a.get(OBSERVATION + "type") or "").upper(), "name": s.name}
    for key, field_name in (("input", "input"), ("output", "output"), ("level", "level"),
                            ("status_message", "statusMessage"), ("model.name", "model")):
        if OBSERVATION + key in a:
            obs[field_name] = parse_json_text(a[OBSERVATION + key]) if key in ("input", "output") else a[OBSERVATION + key]
    meta = {k[len(OBSERVATION + "metadata."):]: parse_json_text(v) for k, v in a.items()
            if k.startswith(OBSERVATION + "metadata.")}
    obs["metadata"] = {k: (v.strip('"') if isinstance(v, str) and v[:1] == '"' else v) for k, v in meta.items()}
    level = str(obs.get("level") or "").upper()
    err = s.error or (str(obs.get("statusMessage") or "error") if level == "ERROR" else None)
    return SpanRecord(s.trace_id, s.span_id, s.parent_id, s.name, s.start, s.end, obs, s.events, err, s.order)


def langfuse_op(s: SpanRecord) -> Op | None:
    """The reading of one observation (its fields are ``s.attributes``)."""
    o = s.attributes
    kind = str(o.get("type") or "").upper()
    if kind == "AGENT":
        return Op("agent", agent=s.name or None)
    if kind == "GENERATION":
        inp = parse_json_text(o.get("input"))
        if isinstance(inp, dict) and "messages" in inp:
            inp = inp["messages"]
        inputs = lc_or_openai_messages(inp) if isinstance(inp, list) else (
            [{"role": "user", "content": inp}] if isinstance(inp, str) else None)
        out = parse_json_text(o.get("output"))
        outputs: list[dict[str, Any]] | None
        if isinstance(out, dict) and isinstance(out.get("role"), str):
            outputs = lc_or_openai_messages([out])
        elif isinstance(out, list):
            outputs = lc_or_openai_messages(out)
        else:
            outputs = completion_messages(out) if out is not None else None
        if outputs is None and s.error:
            outputs = [{"role": "assistant", "content": f"Error: {s.error}"}]
        return Op("llm", inputs=inputs, outputs=outputs)
    if kind == "TOOL":
        meta = o.get("metadata") if isinstance(o.get("metadata"), dict) else {}
        args = parse_json_text(o.get("input"))
        call_id = meta.get("tool_call_id") or (args.get("tool_call_id") if isinstance(args, dict) else None)
        if isinstance(args, dict) and "tool_call_id" in args:
            args = {k: v for k, v in args.items() if k != "tool_call_id"}
        result = o.get("output")
        if result is None and s.error:
            result = f"Error: {s.error}"
        return Op("tool", tool_name=s.name, call_id=str(call_id) if call_id else None, arguments=args,
                  result=as_text(result) if result is not None else None, is_error=s.error is not None)
    return None


class LangfuseAdapter:
    """Langfuse traces with observations: one run per trace."""

    name = "langfuse"
    description = "Langfuse traces: {'id', 'observations': [...]} (GENERATION/TOOL/AGENT/SPAN), a list, or {'data': [...]}"

    def sniff(self, doc: Any) -> Sniff:
        """Match a trace with observations, a list of them, or ``{"data": [...]}``; or the Langfuse
        SDK's OpenTelemetry spans (OTLP/JSON whose spans carry ``langfuse.observation.type``)."""
        if _traces_of(doc) is not None or (is_span_document(doc) and has_attribute(doc, OBSERVATION + "type")):
            return Sniff(True)
        return Sniff(False, "no Langfuse trace (an object with an 'observations' list of typed observations)")

    def accepts(self, run: Any) -> Sniff:
        """A forced ``--input-format``: one trace (API JSON, or the SDK's spans of one trace)."""
        if isinstance(run, SpanTrace) or isinstance(run, dict) and isinstance(run.get("observations"), list):
            return Sniff(True)
        return Sniff(False, "expected a Langfuse trace: an object with an 'observations' list")

    def records(self, doc: Any) -> list[Any]:
        """One record per trace."""
        if is_span_document(doc):
            return span_traces(doc) or [doc]
        traces = _traces_of(doc)
        return list(traces) if traces is not None else [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Rebuild one trace's conversation.

        Raises:
            TraceFormatError: not a trace, or no GENERATION/TOOL/AGENT observation in it.
        """
        if isinstance(run, SpanTrace):
            return build_trace([from_otel_span(s) for s in run.spans], langfuse_op, source=source, options=options,
                               numbering=NUMBERING, metadata={"trace_id": run.trace_id, **run.metadata})
        if not isinstance(run, dict) or not isinstance(run.get("observations"), list):
            raise TraceFormatError("not a Langfuse trace: no 'observations' list", adapter=self.name)
        spans, bad = _flatten(run)
        meta: dict[str, Any] = {"trace_id": str(run.get("id") or (spans[0].trace_id if spans else ""))}
        if bad:
            meta["malformed_observations"] = bad
        if isinstance(run.get("name"), str):
            meta["trace_name"] = run["name"]
        task = run.get("input")
        task_msgs = lc_or_openai_messages(parse_json_text(task)["messages"]) if isinstance(parse_json_text(task), dict) and \
            isinstance(parse_json_text(task).get("messages"), list) else None
        if task_msgs is None and isinstance(task, str) and task:
            task_msgs = [{"role": "user", "content": task}]
        if task_msgs and spans and not _any_user(spans):
            root = SpanRecord(meta["trace_id"], f"{meta['trace_id']}#input", None, "trace input", float("-inf"),
                              None, {"type": "GENERATION", "input": task_msgs, "output": []}, [], None, -1)
            spans.insert(0, root)
        return build_trace(spans, langfuse_op, source=source, options=options, numbering=NUMBERING, metadata=meta)


def _any_user(spans: list[SpanRecord]) -> bool:
    for s in spans:
        op = langfuse_op(s)
        if op is not None and op.kind == "llm" and any(m.get("role") == "user" for m in op.inputs or ()):
            return True
    return False
