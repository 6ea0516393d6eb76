"""Random edits of the real trace fixtures: every damaged document is read or refused with a
TraceFormatError naming it (a problem of that run or file), never another exception."""

from __future__ import annotations

import copy
import json

from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from json_mutation import json_values, mutate

from trajaudit.engine.trace.adapters.files import join_lines
from trajaudit.engine.trace.loader import load_document
from trajaudit.errors import TraceFormatError

TRACES = ROOT / "tests" / "data" / "traces"


def _doc(name: str):
    text = (TRACES / name).read_text()
    if name.endswith(".jsonl"):
        return join_lines([json.loads(line) for line in text.splitlines()])
    return json.loads(text)


DOCS = {name: _doc(name) for name in ("otel_genai.jsonl", "otel_genai_events.jsonl", "openinference.jsonl",
                                      "langsmith_run_tree.json", "langfuse_trace.json", "langfuse_sdk.jsonl",
                                      "inspect_log.json")}
KEYS = ["resourceSpans", "scopeSpans", "spans", "attributes", "events", "value", "stringValue", "arrayValue",
        "kvlistValue", "values", "parentSpanId", "spanId", "traceId", "child_runs", "run_type", "inputs", "outputs",
        "observations", "type", "input", "output", "messages", "tool_calls", "samples", "eval", "content", "parts"]
WORDS = ["chat", "execute_tool", "invoke_agent", "LLM", "TOOL", "llm", "tool", "GENERATION", "TOOL", "[1,", "{}",
         "[]", "null", "gen_ai.operation.name", "openinference.span.kind", "x"]


@settings(max_examples=150)
@given(name=st.sampled_from(sorted(DOCS)), fmt=st.sampled_from([None, "otel", "openinference", "langsmith",
                                                                   "langfuse", "inspect"]), data=st.data())
def test_damaged_trace_documents_fail_only_with_trace_format_errors(name, fmt, data):
    doc = copy.deepcopy(DOCS[name])
    mutate(doc, data, json_values(WORDS, KEYS), KEYS)
    try:
        res = load_document(doc, file=name, format=fmt)
    except TraceFormatError:
        return
    for p in res.problems:
        assert name in p.message
