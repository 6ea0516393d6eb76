"""OpenTelemetry traces of GenAI agents (``otel``): OTLP/JSON, one trajectory per trace id.

Accepted documents (a ``.json`` file, or JSON lines — one export batch per line, as the
Collector's ``file`` exporter and opentelemetry-exporter-otlp-json-file write them; the loader
joins the lines of such a file before reading, so a trace split across batches is one run):

- OTLP/JSON: ``{"resourceSpans": [{"resource", "scopeSpans": [{"scope", "spans": [...]}]}]}``
  (ids in hex, or base64 as protobuf's JSON mapping writes them; times in ``*UnixNano``), with
  ``resourceLogs`` beside it: log records carrying a ``traceId``/``spanId`` are read as events of that
  span (GenAI content captured as events);
- the Python SDK's span JSON (``ReadableSpan.to_json()``, what ``ConsoleSpanExporter`` prints):
  ``{"name", "context": {"trace_id", "span_id"}, "parent_id", "start_time", "attributes", "events"}``,
  one object, a list, or one per line.

Spans are read by the GenAI semantic conventions (``gen_ai.operation.name``):
``invoke_agent``/``create_agent`` name the agent (``gen_ai.agent.name``) of the spans under them;
``chat``/``text_completion``/``generate_content`` are model calls whose messages are
``gen_ai.input.messages``/``gen_ai.output.messages`` (parts: ``text``, ``tool_call``,
``tool_call_response``, ...), with ``gen_ai.system_instructions``, or — the older form still emitted —
events ``gen_ai.system.message``/``gen_ai.user.message``/``gen_ai.assistant.message``/
``gen_ai.tool.message``/``gen_ai.choice`` (and ``gen_ai.content.prompt``/``gen_ai.content.completion``),
or one ``gen_ai.client.inference.operation.details`` event; ``execute_tool`` spans are tool runs
(``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``,
``gen_ai.tool.call.result``; failed when the span status is an error or ``error.type`` is set).
Spans without GenAI attributes are ignored and counted. The conversation is rebuilt by
:func:`~trajaudit.engine.trace.adapters.spans.build_trace` (its docstring gives the step numbering).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

from trajaudit.engine.trace.adapters.base import LoadOptions, Sniff
from trajaudit.engine.trace.adapters.span_shapes import is_span_document, sdk_span
from trajaudit.engine.trace.adapters.spans import (
    Op,
    SpanRecord,
    as_list,
    as_text,
    build_trace,
    group_by_trace,
    iso_ns,
    openai_call,
    parse_json_text,
)
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

NUMBERING = ("OpenTelemetry: 0-based position in the conversation rebuilt from the trace's spans "
             "(depth first, siblings by start time; each model call adds its new input messages, then its output; "
             "tool spans add their output)")
LLM_OPS = frozenset({"chat", "text_completion", "generate_content", "completion"})
AGENT_OPS = frozenset({"invoke_agent", "create_agent"})
_ERROR_CODES = (2, "STATUS_CODE_ERROR", "ERROR")
_HEX = re.compile(r"[0-9a-fA-F]+")


@dataclass
class SpanTrace:
    """One trace of a span document: the run a span adapter's ``records`` yields and ``convert`` reads."""

    trace_id: str
    spans: list[SpanRecord]
    metadata: dict[str, Any] = field(default_factory=dict)


def any_value(v: Any) -> Any:
    """An OTLP ``AnyValue`` (``{"stringValue": ...}``, ``intValue``, ``doubleValue``, ``boolValue``,
    ``arrayValue``, ``kvlistValue``, ``bytesValue``) → a Python value; plain values pass through."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        vals = v["arrayValue"].get("values") if isinstance(v["arrayValue"], dict) else None
        return [any_value(x) for x in as_list(vals)]
    if "kvlistValue" in v:
        vals = v["kvlistValue"].get("values") if isinstance(v["kvlistValue"], dict) else None
        return key_values(as_list(vals))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None if not v else v


def key_values(kvs: Any) -> dict[str, Any]:
    """OTLP attributes (``[{"key", "value": AnyValue}]``) or an already flat dict → a dict."""
    if isinstance(kvs, dict):
        return dict(kvs)
    out: dict[str, Any] = {}
    for kv in as_list(kvs):
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def hex_id(raw: Any) -> str | None:
    """A trace/span id as lower-case hex: hex as is (``0x`` dropped), base64 (protobuf JSON) decoded."""
    if not isinstance(raw, str) or not raw:
        return None
    s = raw[2:] if raw.startswith("0x") else raw
    if len(s) in (16, 32) and _HEX.fullmatch(s):
        return s.lower()
    try:
        b = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return s
    return b.hex() if len(b) in (8, 16) else s


def _failed(status: Any) -> str | None:
    if not isinstance(status, dict):
        return None
    code = status.get("code", status.get("status_code"))
    if code in _ERROR_CODES:
        return str(status.get("message") or status.get("description") or "error")
    return None


def read_spans(doc: Any) -> tuple[list[SpanRecord], int]:
    """Every span of a span document, with log records attached to their spans as events.

    Returns:
        ``(spans, malformed)``: ``malformed`` counts span/log entries that are not objects or lack ids.
    """
    spans: list[SpanRecord] = []
    bad = 0
    for d in doc if isinstance(doc, list) else [doc]:
        if not isinstance(d, dict):
            bad += 1
            continue
        if sdk_span(d):
            s = _from_sdk(d, len(spans))
            if s is None:
                bad += 1
            else:
                spans.append(s)
            continue
        for raw in raw_spans(d):
            s = _from_otlp(raw, len(spans))
            if s is None:
                bad += 1
            else:
                spans.append(s)
    attach_logs(spans, log_records(doc))
    return spans, bad


def log_records(doc: Any) -> list[dict[str, Any]]:
    """The log records of an OTLP/JSON document (``resourceLogs`` → ``scopeLogs`` → ``logRecords``)
    that are tied to a span (a ``spanId``)."""
    out: list[dict[str, Any]] = []
    for d in doc if isinstance(doc, list) else [doc]:
        for rl in as_list(d.get("resourceLogs")) if isinstance(d, dict) else []:
            for sl in as_list(rl.get("scopeLogs")) if isinstance(rl, dict) else []:
                out.extend(rec for rec in (as_list(sl.get("logRecords")) if isinstance(sl, dict) else [])
                           if isinstance(rec, dict) and hex_id(rec.get("spanId")))
    return out


def attach_logs(spans: list[SpanRecord], records: list[dict[str, Any]]) -> None:
    """Add each log record to the span it names (``traceId``/``spanId``) as an event; records of
    spans not in ``spans`` are left out."""
    if not records:
        return
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    for rec in records:
        s = by_id.get((hex_id(rec.get("traceId")) or "", hex_id(rec.get("spanId")) or ""))
        if s is None:
            continue
        attrs = key_values(rec.get("attributes"))
        name = str(rec.get("eventName") or attrs.get("event.name") or attrs.get("gen_ai.event.name") or "")
        s.events.append({"name": name, "time": iso_ns(rec.get("timeUnixNano") or rec.get("observedTimeUnixNano")),
                         "attributes": attrs, "body": any_value(rec.get("body"))})


def _from_otlp(raw: Any, order: int) -> SpanRecord | None:
    if not isinstance(raw, dict):
        return None
    tid, sid = hex_id(raw.get("traceId")), hex_id(raw.get("spanId"))
    if not tid or not sid:
        return None
    events = [{"name": str(e.get("name") or ""), "time": iso_ns(e.get("timeUnixNano")),
               "attributes": key_values(e.get("attributes")), "body": None}
              for e in as_list(raw.get("events")) if isinstance(e, dict)]
    return SpanRecord(tid, sid, hex_id(raw.get("parentSpanId")), str(raw.get("name") or ""),
                      iso_ns(raw.get("startTimeUnixNano")), iso_ns(raw.get("endTimeUnixNano")),
                      key_values(raw.get("attributes")), events, _failed(raw.get("status")), order)


def _from_sdk(d: dict[str, Any], order: int) -> SpanRecord | None:
    ctx = d["context"]
    tid, sid = hex_id(ctx.get("trace_id")), hex_id(ctx.get("span_id"))
    if not tid or not sid:
        return None
    events = [{"name": str(e.get("name") or ""), "time": iso_ns(e.get("timestamp")),
               "attributes": key_values(e.get("attributes")), "body": None}
              for e in as_list(d.get("events")) if isinstance(e, dict)]
    status = d.get("status")
    if not isinstance(status, dict):
        status = {}
    err = str(status.get("description") or "error") if status.get("status_code") == "ERROR" else None
    return SpanRecord(tid, sid, hex_id(d.get("parent_id")), str(d.get("name") or ""), iso_ns(d.get("start_time")),
                      iso_ns(d.get("end_time")), key_values(d.get("attributes")), events, err, order)


def raw_spans(doc: Any) -> Any:
    """The raw span objects of a span document (OTLP spans and SDK spans), unconverted, in order."""
    for d in doc if isinstance(doc, list) else [doc]:
        if not isinstance(d, dict):
            continue
        if sdk_span(d):
            yield d
            continue
        for rs in as_list(d.get("resourceSpans")):
            for ss in as_list(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")) if isinstance(rs, dict) else []:
                yield from (as_list(ss.get("spans")) if isinstance(ss, dict) else [])


def has_attribute(doc: Any, key: str) -> bool:
    """Whether a span of the span document carries the attribute ``key`` (a scan of the keys only)."""
    for raw in raw_spans(doc):
        attrs = raw.get("attributes") if isinstance(raw, dict) else None
        if isinstance(attrs, dict):
            if key in attrs:
                return True
        elif isinstance(attrs, list) and any(isinstance(kv, dict) and kv.get("key") == key for kv in attrs):
            return True
    return False


def span_traces(doc: Any) -> list[SpanTrace]:
    """A span document's traces (interleaved spans split by trace id, in order of first appearance)."""
    spans, bad = read_spans(doc)
    traces = [SpanTrace(g[0].trace_id, g) for g in group_by_trace(spans)]
    if bad and traces:
        traces[0].metadata["malformed_spans"] = bad
    return traces


# -- the GenAI semantic conventions -----------------------------------------------------------------

def semconv_messages(value: Any) -> list[dict[str, Any]] | None:
    """``gen_ai.input.messages``/``gen_ai.output.messages`` (a JSON string or a list of
    ``{"role", "parts": [...]}``) → OpenAI chat messages; ``None`` when absent or unreadable."""
    value = parse_json_text(value)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        return None
    out: list[dict[str, Any]] = []
    for m in value:
        if not isinstance(m, dict):
            continue
        if "parts" not in m:  # already chat-message shaped (older instrumentations)
            out.append(_openai_like(m))
            continue
        role = m.get("role") or "assistant"
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for p in as_list(m.get("parts")):
            if not isinstance(p, dict):
                texts.append(as_text(p))
                continue
            kind = p.get("type")
            if kind == "text":
                texts.append(as_text(p.get("content")))
            elif kind == "tool_call":
                calls.append(openai_call(p.get("id"), p.get("name"), p.get("arguments")))
            elif kind == "tool_call_response":
                out.append({"role": "tool", "tool_call_id": p.get("id"), "content": as_text(p.get("response", p.get("result")))})
            elif kind == "reasoning":
                continue
            else:
                texts.append(as_text(p))
        if texts or calls or role != "tool":
            msg: dict[str, Any] = {"role": role, "content": "\n".join(texts)}
            if calls:
                msg["tool_calls"] = calls
            if isinstance(m.get("name"), str):
                msg["name"] = m["name"]
            if role != "tool" or texts:
                out.append(msg)
    return out


def _openai_like(m: dict[str, Any]) -> dict[str, Any]:
    """An event body / message dict in (roughly) OpenAI form → an OpenAI message."""
    msg: dict[str, Any] = {"role": m.get("role") or "assistant", "content": m.get("content")}
    calls = m.get("tool_calls")
    if isinstance(calls, list) and calls:
        msg["tool_calls"] = [c if isinstance(c.get("function"), dict) else openai_call(c.get("id"), c.get("name"), c.get("arguments"))
                             for c in calls if isinstance(c, dict)]
    if m.get("tool_call_id") is not None or (msg["role"] == "tool" and m.get("id") is not None):
        msg["tool_call_id"] = m.get("tool_call_id", m.get("id"))
    return msg


_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def _event_messages(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None,
                                                           str | None]:
    """Input/output messages and system instructions carried by a span's events (older forms)."""
    inputs: list[dict[str, Any]] | None = None
    outputs: list[dict[str, Any]] | None = None
    system = None
    for e in events:
        name, attrs = e["name"], e["attributes"]
        body = e.get("body")
        fields = body if isinstance(body, dict) and body else {k.split(".")[-1] if k.startswith("gen_ai.") and k.count(".") == 1 else k: v
                                                                for k, v in attrs.items()}
        if name == "gen_ai.client.inference.operation.details" or "gen_ai.input.messages" in attrs:
            got_in = semconv_messages(attrs.get("gen_ai.input.messages"))
            got_out = semconv_messages(attrs.get("gen_ai.output.messages"))
            inputs = got_in if got_in is not None else inputs
            outputs = got_out if got_out is not None else outputs
            system = _instructions(attrs.get("gen_ai.system_instructions")) or system
        elif name in _EVENT_ROLES:
            fields = {k: parse_json_text(v) for k, v in fields.items()}
            inputs = (inputs or []) + [_openai_like({**fields, "role": _EVENT_ROLES[name]})]
        elif name == "gen_ai.choice":
            msg = parse_json_text(fields.get("message"))
            msg = msg if isinstance(msg, dict) else {"content": fields.get("content")}
            outputs = (outputs or []) + [_openai_like({**msg, "role": msg.get("role") or "assistant"})]
        elif name == "gen_ai.content.prompt":
            got = semconv_messages(attrs.get("gen_ai.prompt"))
            inputs = got if got is not None else [{"role": "user", "content": as_text(attrs.get("gen_ai.prompt"))}]
        elif name == "gen_ai.content.completion":
            got = semconv_messages(attrs.get("gen_ai.completion"))
            outputs = got if got is not None else [{"role": "assistant", "content": as_text(attrs.get("gen_ai.completion"))}]
    return inputs, outputs, system


def _instructions(value: Any) -> str | None:
    value = parse_json_text(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(as_text(p.get("content")) if isinstance(p, dict) else as_text(p) for p in value)
    return None


def genai_op(s: SpanRecord) -> Op | None:
    """The GenAI semantic conventions' reading of one span (``None``: no GenAI meaning): an agent
    span, a tool run or a model call, by its operation (:func:`_genai_operation`)."""
    op = _genai_operation(s)
    if op is None:
        return None
    a = s.attributes
    agent = a.get("gen_ai.agent.name") if isinstance(a.get("gen_ai.agent.name"), str) else None
    if op in AGENT_OPS:
        return _agent_op(s, agent)
    if op == "execute_tool":
        return _tool_op(s, agent)
    if op in LLM_OPS:
        return _llm_op(s, agent)
    return None


_NAMED_OPS = LLM_OPS | AGENT_OPS | {"execute_tool"}


def _genai_operation(s: SpanRecord) -> str | None:
    """A span's GenAI operation: ``gen_ai.operation.name``; else, for a span with ``gen_ai.*``
    attributes or events, the first word of its name when that is a known operation (``chat gpt-4o``,
    ``execute_tool search``), else ``chat`` when it names a requested model or has GenAI events;
    ``None`` for a span without GenAI meaning."""
    a = s.attributes
    op = a.get("gen_ai.operation.name")
    if isinstance(op, str):
        return op
    if not any(k.startswith("gen_ai.") for k in a) and not _has_genai_event(s):
        return None
    first = s.name.split(" ", 1)[0]
    if first in _NAMED_OPS:
        return first
    return "chat" if "gen_ai.request.model" in a or _has_genai_event(s) else None


def _has_genai_event(s: SpanRecord) -> bool:
    """The span carries an event named ``gen_ai.*``."""
    return any(e["name"].startswith("gen_ai.") for e in s.events)


def _name_rest(s: SpanRecord) -> str | None:
    """What follows the first word of the span's name (``invoke_agent planner`` → ``planner``), or ``None``."""
    return s.name.split(" ", 1)[1] if " " in s.name else None


def _agent_op(s: SpanRecord, agent: str | None) -> Op:
    """An ``invoke_agent``/``create_agent`` span: the agent it names (attribute, else the span name's
    second word); its messages, when recorded, are read only if no model call runs under it."""
    a = s.attributes
    return Op("agent", agent=agent or _name_rest(s),
              inputs=semconv_messages(a.get("gen_ai.input.messages")),
              outputs=semconv_messages(a.get("gen_ai.output.messages")),
              system=_instructions(a.get("gen_ai.system_instructions")))


def _tool_op(s: SpanRecord, agent: str | None) -> Op:
    """An ``execute_tool`` span: the tool run with its name, call id, arguments and result; failed when
    the span's status is an error or ``error.type`` is set (the result then says ``Error: …`` if the
    span recorded none)."""
    a = s.attributes
    result = a.get("gen_ai.tool.call.result")
    failed = s.error is not None or isinstance(a.get("error.type"), str)
    if result is None and failed:
        result = f"Error: {s.error or a.get('error.type')}"
    rest = _name_rest(s)
    name = a.get("gen_ai.tool.name") or (s.name if rest is None else rest)
    call_id = a.get("gen_ai.tool.call.id")
    return Op("tool", agent=agent, tool_name=str(name), call_id=str(call_id) if call_id is not None else None,
              arguments=parse_json_text(a.get("gen_ai.tool.call.arguments")),
              result=as_text(result) if result is not None else None, is_error=failed)


_LLM_META = (("model", "gen_ai.response.model"), ("input_tokens", "gen_ai.usage.input_tokens"),
             ("output_tokens", "gen_ai.usage.output_tokens"))


def _llm_op(s: SpanRecord, agent: str | None) -> Op:
    """A model-call span: its input/output messages and system instructions (attributes, else the
    older event forms, :func:`_event_messages`), with the model and token counts as metadata (the
    response model, else the requested one)."""
    a = s.attributes
    inputs = semconv_messages(a.get("gen_ai.input.messages"))
    outputs = semconv_messages(a.get("gen_ai.output.messages"))
    system = _instructions(a.get("gen_ai.system_instructions"))
    if inputs is None and outputs is None and s.events:
        inputs, outputs, ev_system = _event_messages(s.events)
        system = system or ev_system
    meta = {k: a[key] for k, key in _LLM_META if key in a}
    if "model" not in meta and "gen_ai.request.model" in a:
        meta["model"] = a["gen_ai.request.model"]
    return Op("llm", agent=agent, inputs=inputs, outputs=outputs, system=system, metadata=meta)


class OTelAdapter:
    """OpenTelemetry GenAI spans (OTLP/JSON, the Python SDK's span JSON): one run per trace id."""

    name = "otel"
    description = "OpenTelemetry GenAI spans: OTLP/JSON (resourceSpans, one batch per line) or the SDK's span JSON"
    interpret = staticmethod(genai_op)
    numbering = NUMBERING

    def sniff(self, doc: Any) -> Sniff:
        """Match an OTLP/JSON export or SDK span JSON (spans carrying OpenInference kinds go to
        ``openinference``, which is tried first)."""
        if is_span_document(doc):
            return Sniff(True)
        return Sniff(False, "no 'resourceSpans' (OTLP/JSON) and no SDK span ('context' with 'trace_id')")

    def accepts(self, run: Any) -> Sniff:
        """A forced ``--input-format``: a trace of the span document (what ``records`` yields)."""
        return Sniff(True) if isinstance(run, SpanTrace) else self.sniff(run)

    def records(self, doc: Any) -> list[Any]:
        """One record per trace id (in order of first appearance); a document that holds no span is one record."""
        if not is_span_document(doc):
            return [doc]
        traces = span_traces(doc)
        return traces or [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Rebuild one trace's conversation.

        Raises:
            TraceFormatError: the document holds no span, or the trace has no GenAI span.
        """
        if not isinstance(run, SpanTrace):
            raise TraceFormatError("the document holds no span", adapter=self.name)
        return build_trace(run.spans, self.interpret, source=source, options=options, numbering=self.numbering,
                           metadata={"trace_id": run.trace_id, **run.metadata})
