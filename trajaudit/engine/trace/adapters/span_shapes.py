"""The shape tests of the span formats that the loader needs before any format is chosen.

A JSON-lines file whose first document is a span document (OTLP/JSON, an SDK span), a LangSmith run
or a Phoenix span is read as one joined document (:func:`~trajaudit.engine.trace.adapters.files.joins_lines`).
The tests live here, apart from their adapters (``otel``, ``langsmith``, ``openinference``, which
import them from here), so that reading a file of another format — a tau-retail ``.json``, a chat
JSONL — does not import (nor, in a checkout run from source, compile) the span adapters: the
adapters themselves are registered lazily (:func:`~trajaudit.engine.trace.adapters.default_adapters`).
"""

from __future__ import annotations

from typing import Any

#: LangSmith's run types (``run_type``).
RUN_TYPES = frozenset({"llm", "chain", "tool", "retriever", "embedding", "prompt", "parser", "agent"})
#: The OpenInference attribute naming a span's kind.
KIND = "openinference.span.kind"


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else ``[]`` (a damaged field reads as empty, never as a crash)."""
    return value if isinstance(value, list) else []


def is_span_document(doc: Any) -> bool:
    """An OTLP/JSON export (``resourceSpans``/``resourceLogs``), an SDK span, or a list of them."""
    if isinstance(doc, dict):
        return isinstance(doc.get("resourceSpans"), list) or isinstance(doc.get("resourceLogs"), list) or sdk_span(doc)
    return isinstance(doc, list) and bool(doc) and all(isinstance(d, dict) and is_span_document(d) for d in doc)


def sdk_span(d: dict[str, Any]) -> bool:
    """A span as the OpenTelemetry Python SDK writes it (``context`` with ``span_id`` and ``trace_id``, a ``name``)."""
    ctx = d.get("context")
    return isinstance(ctx, dict) and "span_id" in ctx and "trace_id" in ctx and "name" in d


def is_langsmith_run(doc: Any) -> bool:
    """A LangSmith run object: ``run_type`` (a known type) beside ``id`` or ``name``, and ``inputs``."""
    return (isinstance(doc, dict) and isinstance(doc.get("run_type"), str) and doc["run_type"] in RUN_TYPES
            and ("id" in doc or "name" in doc)
            and ("inputs" in doc or "child_runs" in doc or "trace_id" in doc))


def is_phoenix_span(d: Any) -> bool:
    """A span as Phoenix's JSON gives it: a ``context`` with ``span_id`` and a ``span_kind`` (or an
    OpenInference kind among its attributes)."""
    return (isinstance(d, dict) and isinstance(d.get("context"), dict) and "span_id" in d["context"]
            and ("span_kind" in d or isinstance(d.get("attributes"), dict) and KIND in flat_keys(d["attributes"])))


def flat_keys(attrs: dict[str, Any]) -> set[str]:
    """An OpenInference span's attribute keys, with those of a nested ``openinference`` object flattened."""
    keys = set(attrs)
    if isinstance(attrs.get("openinference"), dict):
        keys |= {f"openinference.{k}" if k != "span" else KIND for k in attrs["openinference"]}
    return keys
