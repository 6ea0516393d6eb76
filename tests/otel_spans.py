"""OTLP/JSON span documents built by hand for the span-format tests (tests/engine/trace/test_trace_formats.py)
and the OTLP receiver tests (tests/engine/run/test_otlp_receiver.py): ``span``, ``chat_attrs``, ``text``,
a four-span ``small_trace`` and ``_otlp`` to wrap spans in a document."""

from __future__ import annotations

import json


def _otlp(spans, logs=None):
    """An OTLP/JSON document holding ``spans`` (already in OTLP span form)."""
    doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
    if logs:
        doc["resourceLogs"] = [{"resource": {}, "scopeLogs": [{"scope": {}, "logRecords": logs}]}]
    return doc


def _kv(d):
    out = []
    for k, v in d.items():
        if isinstance(v, bool):
            val = {"boolValue": v}
        elif isinstance(v, int):
            val = {"intValue": str(v)}
        else:
            val = {"stringValue": v if isinstance(v, str) else json.dumps(v)}
        out.append({"key": k, "value": val})
    return out


def span(trace, sid, parent, name, start, attrs, *, end=None, events=None, status=None):
    s = {"traceId": trace, "spanId": sid, "parentSpanId": parent or "", "name": name,
         "startTimeUnixNano": str(start), "endTimeUnixNano": str(end if end is not None else start + 10),
         "attributes": _kv(attrs)}
    if events:
        s["events"] = events
    if status:
        s["status"] = status
    return s


def chat_attrs(inputs, outputs):
    return {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
            "gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs}


def text(role, t):
    return {"role": role, "parts": [{"type": "text", "content": t}]}


T1, T2 = "a" * 32, "b" * 32


def small_trace(trace, agent="helper", prefix="1"):
    """invoke_agent > chat (calls lookup) > execute_tool > chat (answers)."""
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": f"c{prefix}", "name": "lookup",
                                            "arguments": {"q": prefix}}]}
    return [
        span(trace, prefix + "0" * 15, None, f"invoke_agent {agent}", 100,
             {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}, end=1000),
        span(trace, prefix + "1" * 15, prefix + "0" * 15, "chat m", 200,
             chat_attrs([text("user", f"question {prefix}")], [call])),
        span(trace, prefix + "2" * 15, prefix + "0" * 15, "execute_tool lookup", 300,
             {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": f"c{prefix}",
              "gen_ai.tool.call.arguments": {"q": prefix}, "gen_ai.tool.call.result": f"result {prefix}"}),
        span(trace, prefix + "3" * 15, prefix + "0" * 15, "chat m", 400,
             chat_attrs([text("user", f"question {prefix}"), call,
                         {"role": "tool", "parts": [{"type": "tool_call_response", "id": f"c{prefix}",
                                                     "response": f"result {prefix}"}]}],
                        [text("assistant", f"answer {prefix}")])),
    ]
