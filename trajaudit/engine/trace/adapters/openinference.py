"""OpenInference spans (``openinference``): Arize Phoenix / OpenInference instrumentations.

Accepted documents: the span containers of ``otel`` (OTLP/JSON lines or document, the SDK's span
JSON) whose spans carry ``openinference.span.kind``, and Phoenix's span JSON (``{"name", "context":
{"trace_id", "span_id"}, "parent_id", "span_kind", "start_time", "end_time", "status_code",
"attributes"}``: a list, ``{"data": [...]}`` as its REST API pages them, or JSON lines). Attributes
may be flattened (``llm.input_messages.0.message.role``, as exported) or nested (``{"llm":
{"input_messages": [...]}}``, as Phoenix returns them).

Span kinds: ``AGENT`` names the agent of the spans under it (``agent.name``, else the span name);
``LLM`` is a model call: ``llm.input_messages``/``llm.output_messages`` (``message.role``,
``message.content`` or ``message.contents.N.message_content.text``, ``message.tool_calls.N.tool_call.id``/
``.function.name``/``.function.arguments``, ``message.tool_call_id``, ``message.name``), else the
``input.value``/``output.value`` JSON of the request and response; ``TOOL`` is a tool run
(``tool.name``, ``tool_call.id`` when the instrumentation set it, ``tool.parameters`` or
``input.value`` as arguments, ``output.value`` as the result, status ``ERROR`` as a failure).
``CHAIN``, ``RETRIEVER``, ``EMBEDDING``, ``RERANKER``, ``GUARDRAIL``, ``EVALUATOR`` spans and spans
without a kind are ignored and counted. Numbering: as ``otel``
(:func:`~trajaudit.engine.trace.adapters.spans.build_trace`).
"""

from __future__ import annotations

from typing import Any

from trajaudit.engine.trace.adapters.base import LoadOptions, Sniff
from trajaudit.engine.trace.adapters.langsmith import completion_messages
from trajaudit.engine.trace.adapters.otel import (
    SpanTrace,
    has_attribute,
    hex_id,
    read_spans,
)
from trajaudit.engine.trace.adapters.span_shapes import KIND, is_phoenix_span, is_span_document
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

NUMBERING = ("OpenInference: 0-based position in the conversation rebuilt from the trace's spans "
             "(depth first, siblings by start time; each LLM span adds its new input messages, then its output; "
             "TOOL spans add their output)")


def unflatten(attrs: dict[str, Any]) -> dict[str, Any]:
    """Flattened attribute keys (``a.0.b``) → nested dicts and lists; nested input passes through."""
    root: dict[str, Any] = {}
    for key, value in attrs.items():
        parts = key.split(".")
        node: Any = root
        for k, p in enumerate(parts):
            last = k == len(parts) - 1
            if isinstance(node, dict):
                if last:
                    if p not in node or not isinstance(node[p], dict):
                        node[p] = value
                else:
                    nxt = node.get(p)
                    if not isinstance(nxt, dict):
                        nxt = {} if nxt is None else {"": nxt}
                        node[p] = nxt
                    node = nxt
    return _lists(root)


def _lists(node: Any) -> Any:
    """Dicts whose keys are all digits → lists in index order."""
    if isinstance(node, dict):
        node = {k: _lists(v) for k, v in node.items()}
        if node and all(k.isdigit() for k in node):
            return [node[k] for k in sorted(node, key=int)]
    return node


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _message(m: Any) -> dict[str, Any] | None:
    """One ``{"message": {...}}`` entry → an OpenAI message."""
    msg = m.get("message") if isinstance(m, dict) and isinstance(m.get("message"), dict) else m
    if not isinstance(msg, dict):
        return None
    content = msg.get("content")
    if content is None and isinstance(msg.get("contents"), list):
        texts = [_get(c, "message_content", "text") for c in msg["contents"]]
        content = "\n".join(t for t in texts if isinstance(t, str))
    out: dict[str, Any] = {"role": msg.get("role") or "assistant", "content": content}
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [openai_call(_get(c, "tool_call", "id"), _get(c, "tool_call", "function", "name"),
                                         _get(c, "tool_call", "function", "arguments")) for c in calls]
    if msg.get("tool_call_id") is not None:
        out["tool_call_id"] = msg["tool_call_id"]
    if isinstance(msg.get("name"), str):
        out["name"] = msg["name"]
    return out


def _messages(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        return None
    got = [_message(m) for m in value]
    return [m for m in got if m is not None]


def oi_op(s: SpanRecord) -> Op | None:
    """The OpenInference reading of one span (``None``: ignored)."""
    a = s.attributes
    kind = str(a.get(KIND) or a.get("span_kind") or "").upper()
    nested = unflatten({k: v for k, v in a.items() if k not in (KIND, "span_kind")})
    if kind == "AGENT":
        name = _get(nested, "agent", "name")
        return Op("agent", agent=name if isinstance(name, str) else s.name)
    if kind == "LLM":
        inputs = _messages(_get(nested, "llm", "input_messages"))
        outputs = _messages(_get(nested, "llm", "output_messages"))
        if inputs is None:
            req = parse_json_text(_get(nested, "input", "value"))
            if isinstance(req, dict) and isinstance(req.get("messages"), list):
                inputs = [m for m in req["messages"] if isinstance(m, dict)]
        if outputs is None:
            resp = parse_json_text(_get(nested, "output", "value"))
            outputs = completion_messages(resp) if resp is not None else None
        if outputs is None and s.error:
            outputs = [{"role": "assistant", "content": f"Error: {s.error}"}]
        return Op("llm", inputs=inputs, outputs=outputs)
    if kind == "TOOL":
        name = _get(nested, "tool", "name")
        call_id = _get(nested, "tool_call", "id")
        args = _get(nested, "tool", "parameters")
        if args is None:
            args = _get(nested, "input", "value")
        result = _get(nested, "output", "value")
        if result is None and s.error:
            result = f"Error: {s.error}"
        return Op("tool", tool_name=name if isinstance(name, str) else s.name,
                  call_id=str(call_id) if call_id is not None else None, arguments=parse_json_text(args),
                  result=as_text(result) if result is not None else None, is_error=s.error is not None)
    return None


def _phoenix_spans(doc: Any) -> list[Any] | None:
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        doc = doc["data"]
    if is_phoenix_span(doc):
        return [doc]
    if isinstance(doc, list) and doc and any(is_phoenix_span(d) for d in doc):
        return doc
    return None


def _from_phoenix(d: dict[str, Any], order: int) -> SpanRecord | None:
    ctx = d["context"]
    tid, sid = hex_id(ctx.get("trace_id")), hex_id(ctx.get("span_id"))
    if not tid or not sid:
        return None
    attrs = d.get("attributes") if isinstance(d.get("attributes"), dict) else {}
    attrs = {**attrs}
    if "span_kind" in d:
        attrs.setdefault(KIND, d["span_kind"])
    err = (d.get("status_message") or "error") if str(d.get("status_code") or "").upper() == "ERROR" else None
    events = [{"name": str(e.get("name") or ""), "time": iso_ns(e.get("timestamp")),
               "attributes": e.get("attributes") if isinstance(e.get("attributes"), dict) else {},
               "body": None} for e in as_list(d.get("events")) if isinstance(e, dict)]
    return SpanRecord(tid, sid, hex_id(d.get("parent_id")), str(d.get("name") or ""), iso_ns(d.get("start_time")),
                      iso_ns(d.get("end_time")), attrs, events, err, order)


class OpenInferenceAdapter:
    """OpenInference spans (OTLP/JSON or Phoenix span JSON): one run per trace id."""

    name = "openinference"
    description = "OpenInference spans (openinference.span.kind): OTLP/JSON or Phoenix's span JSON"

    def sniff(self, doc: Any) -> Sniff:
        """Match a span document one of whose spans has an ``openinference.span.kind``."""
        if _phoenix_spans(doc) is not None:
            return Sniff(True)
        if is_span_document(doc) and has_attribute(doc, KIND):
            return Sniff(True)
        return Sniff(False, "no span with an 'openinference.span.kind' attribute")

    def accepts(self, run: Any) -> Sniff:
        """A forced ``--input-format``: a trace of the span document (what ``records`` yields)."""
        if isinstance(run, SpanTrace):
            return Sniff(True)
        if is_span_document(run) or _phoenix_spans(run) is not None:
            return Sniff(True)
        return Sniff(False, "no OTLP/JSON span document and no Phoenix span JSON")

    def records(self, doc: Any) -> list[Any]:
        """One record per trace id, in order of first appearance."""
        phoenix = _phoenix_spans(doc)
        if phoenix is not None:
            spans, bad = [], 0
            for d in phoenix:
                s = _from_phoenix(d, len(spans)) if is_phoenix_span(d) else None
                if s is None:
                    bad += 1
                else:
                    spans.append(s)
        elif is_span_document(doc):
            spans, bad = read_spans(doc)
        else:
            return [doc]
        traces = [SpanTrace(g[0].trace_id, g) for g in group_by_trace(spans)]
        if bad and traces:
            traces[0].metadata["malformed_spans"] = bad
        return traces or [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Rebuild one trace's conversation.

        Raises:
            TraceFormatError: the document holds no span, or the trace has no AGENT/LLM/TOOL span.
        """
        if not isinstance(run, SpanTrace):
            raise TraceFormatError("the document holds no span", adapter=self.name)
        return build_trace(run.spans, oi_op, source=source, options=options, numbering=NUMBERING,
                           metadata={"trace_id": run.trace_id, **run.metadata})
