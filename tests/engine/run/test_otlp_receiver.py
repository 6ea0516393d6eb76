"""``trajaudit serve --otlp``: the trace buffer's completion rule and bounds, body decoding, and the
real server end to end (an OpenTelemetry-instrumented agent exports to it over OTLP/HTTP)."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from otel_spans import T1, T2, _otlp, small_trace

from trajaudit.engine.run.otlp_receiver import TraceAuditor, TraceBuffer, decode_body
from trajaudit.errors import TraceFormatError


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_trace_is_due_once_its_root_ended_and_it_was_quiet():
    clock = Clock()
    buf = TraceBuffer(quiet=2.0, clock=clock)
    spans = small_trace(T1)
    buf.add(_otlp(spans[1:]))  # children first: the root is not there yet
    clock.t = 10
    assert buf.take_due() == []
    buf.add(_otlp(spans[:1]))  # the root, ended
    clock.t = 11
    assert buf.take_due() == []  # quiet period not over
    clock.t = 12
    (trace, complete), = buf.take_due()
    assert complete and trace.trace_id == T1 and len(trace.spans) == 4
    assert len(buf) == 0 and buf.stats.spans == 4 and buf.stats.requests == 2


def test_open_trace_cap_evicts_the_oldest_with_a_warning(caplog):
    buf = TraceBuffer(max_traces=1, clock=Clock())
    buf.add(_otlp(small_trace(T1)[1:]))
    with caplog.at_level(logging.WARNING):
        buf.add(_otlp(small_trace(T2, prefix="2")[1:]))
    assert buf.stats.evicted == 1 and len(buf) == 1
    assert f"trace {T1} evicted unaudited (3 spans)" in caplog.text
    (trace, complete), = buf.take_due(everything=True)
    assert trace.trace_id == T2 and not complete


def test_spans_past_the_per_trace_cap_are_dropped_and_counted(caplog):
    buf = TraceBuffer(max_spans=2, clock=Clock())
    with caplog.at_level(logging.WARNING):
        buf.add(_otlp(small_trace(T1)))
    assert buf.stats.dropped_spans == 2 and "more than 2 spans" in caplog.text
    (trace, _), = buf.take_due(everything=True)
    assert len(trace.spans) == 2 and trace.metadata == {"dropped_spans": 2}


def test_a_trace_whose_root_never_ends_is_audited_after_max_wait():
    clock = Clock()
    buf = TraceBuffer(max_wait=30, clock=clock)
    buf.add(_otlp(small_trace(T1)[1:]))
    clock.t = 29
    assert buf.take_due() == []
    clock.t = 30
    (trace, complete), = buf.take_due()
    assert not complete
    out = io.StringIO()
    auditor = TraceAuditor(out)
    d = auditor.audit(trace, complete, buf.stats)
    auditor.close()
    assert d is not None and d["trajectory_id"] == T1 and json.loads(out.getvalue())["trajectory_id"] == T1
    assert buf.stats.audited == 1


def test_auditor_counts_a_trace_it_cannot_read():
    buf = TraceBuffer(clock=Clock())
    buf.add(_otlp([{"traceId": T1, "spanId": "1" * 16, "name": "GET /", "startTimeUnixNano": "1",
                    "endTimeUnixNano": "2", "attributes": []}]))
    (trace, complete), = buf.take_due(everything=True)
    out = io.StringIO()
    auditor = TraceAuditor(out)
    assert auditor.audit(trace, complete, buf.stats) is None
    auditor.close()
    assert out.getvalue() == "" and buf.stats.failed == 1


def test_decode_body_json_gzip_and_errors():
    doc = _otlp(small_trace(T1))
    raw = json.dumps(doc).encode()
    assert decode_body(raw, "application/json", "") == doc
    assert decode_body(gzip.compress(raw), "application/json; charset=utf-8", "gzip") == doc
    with pytest.raises(TraceFormatError, match="not valid gzip"):
        decode_body(raw, "application/json", "gzip")
    with pytest.raises(TraceFormatError, match="not OTLP/JSON"):
        decode_body(b"{not json", "application/json", "")
    with pytest.raises(TraceFormatError, match="unsupported content type"):
        decode_body(raw, "text/plain", "")
    with pytest.raises(TraceFormatError, match="no 'resourceSpans' \\(or 'resourceLogs'\\) list"):
        TraceBuffer().add({"resourceSpans": 3})


def test_decode_body_protobuf():
    pytest.importorskip("opentelemetry.proto")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    doc = _otlp(small_trace(T1))
    # build the protobuf from the JSON form with ids as bytes, as an exporter sends them
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    ss = rs.scope_spans.add()
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        p = ss.spans.add()
        p.trace_id, p.span_id = bytes.fromhex(s["traceId"]), bytes.fromhex(s["spanId"])
        if s["parentSpanId"]:
            p.parent_span_id = bytes.fromhex(s["parentSpanId"])
        p.name = s["name"]
        p.start_time_unix_nano, p.end_time_unix_nano = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
        for kv in s["attributes"]:
            a = p.attributes.add()
            a.key = kv["key"]
            if "intValue" in kv["value"]:
                a.value.int_value = int(kv["value"]["intValue"])
            else:
                a.value.string_value = kv["value"]["stringValue"]
    got = decode_body(req.SerializeToString(), "application/x-protobuf", "")
    buf = TraceBuffer(clock=Clock())
    buf.add(got)
    (trace, complete), = buf.take_due(everything=True)
    assert trace.trace_id == T1 and complete and len(trace.spans) == 4  # base64 ids read back as hex
    with pytest.raises(TraceFormatError, match="not an ExportTraceServiceRequest"):
        decode_body(b"\xff\xff\xff", "application/x-protobuf", "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early: {proc.communicate()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("server did not start")


NEEDS = ("starlette", "uvicorn", "opentelemetry.instrumentation.openai_v2", "opentelemetry.exporter.otlp.proto.http")


@pytest.mark.skipif(any(importlib.util.find_spec(m.split(".")[0]) is None for m in NEEDS)
                    or importlib.util.find_spec("opentelemetry.instrumentation") is None,
                    reason="needs trajaudit[serve] and the OpenTelemetry fixture libraries")
@pytest.mark.parametrize("encoding,content", [("protobuf", "span_only"), ("json", "span_only"), ("protobuf", "event_only")])
def test_serve_receives_an_instrumented_agent_and_writes_its_diagnosis(tmp_path, encoding, content):
    """The real thing: `trajaudit serve --otlp` in its own process; the OTel-instrumented agent loop
    (opentelemetry-instrumentation-openai-v2 against the scripted model server) exports to it over
    OTLP/HTTP — the messages on the spans, or as log events sent to /v1/logs; the diagnosis line
    appears; SIGINT shuts it down cleanly with its counters."""
    if encoding == "json":
        pytest.importorskip("opentelemetry.exporter.otlp.json.http")
    port = _free_port()
    out = tmp_path / "diagnoses.jsonl"
    server = subprocess.Popen([sys.executable, "-m", "trajaudit", "serve", "--otlp", str(port), "-o", str(out),
                               "--quiet-period", "0.3"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        _wait_port(port, server)
        env = {**os.environ, "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
               "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": content}
        agent = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_trace_fixtures.py"), "--export-otlp",
                                f"http://127.0.0.1:{port}/v1/traces", "--encoding", encoding],
                               env=env, capture_output=True, text=True, timeout=120)
        assert agent.returncode == 0, agent.stderr
        end = time.time() + 30
        while time.time() < end and not (out.exists() and out.read_text().strip()):
            time.sleep(0.1)
        lines = out.read_text().splitlines()
        assert len(lines) == 1
        d = json.loads(lines[0])
        assert d["critical_step"] == 4 and d["agent"] == "retail_agent"  # 2 had the messages been lost
        assert d["category"] == "instruction_adherence_failure"
        assert d["metadata"]["source_span"]["span_name"] == "chat scripted-model"
    finally:
        server.send_signal(signal.SIGINT)
        stdout, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr
    logs = 3 if content == "event_only" else 0  # one inference-details event per model call
    said = " ".join(stderr.split())
    assert f"6 spans and {logs} log records in {6 + logs} requests; 1 trace(s) audited, 0 not auditable, 0 evicted" in said


@pytest.mark.parametrize("name,agent", [("openinference.jsonl", "retail_agent"), ("langfuse_sdk.jsonl", "retail_agent"),
                                        ("otel_genai.jsonl", "retail_agent")])
def test_receiver_reads_each_span_convention(name, agent):
    """Batches as exporters send them (one per line of the fixture): the receiver picks the reading
    (OpenInference, Langfuse SDK, GenAI) from the spans' attributes and audits the trace."""
    buf = TraceBuffer(clock=Clock())
    for line in (ROOT / "tests" / "data" / "traces" / name).read_text().splitlines():
        doc = json.loads(line)
        if "resourceSpans" in doc:
            buf.add(doc)
    (trace, complete), = buf.take_due(everything=True)
    out = io.StringIO()
    auditor = TraceAuditor(out)
    d = auditor.audit(trace, complete, buf.stats)
    auditor.close()
    assert complete and d is not None
    assert (d["critical_step"], d["agent"], d["category"]) == (4, agent, "instruction_adherence_failure")
    assert d["metadata"]["source_span"]["trace_id"] == trace.trace_id


def test_serve_refuses_a_port_in_use(tmp_path):
    from click.testing import CliRunner

    from trajaudit.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = CliRunner().invoke(main, ["serve", "--otlp", str(port), "-o", str(tmp_path / "d.jsonl")])
    assert r.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in r.output


def test_log_events_attach_to_their_spans_whatever_the_order():
    """GenAI content exported as log records (the events fixture's resourceLogs lines), received before
    the spans they belong to: the trace still reads with its messages."""
    buf = TraceBuffer(clock=Clock())
    lines = (ROOT / "tests" / "data" / "traces" / "otel_genai_events.jsonl").read_text().splitlines()
    for line in reversed(lines):
        buf.add(json.loads(line))
    assert buf.stats.log_records == 3 and buf.stats.spans == 6
    (trace, complete), = buf.take_due(everything=True)
    out = io.StringIO()
    auditor = TraceAuditor(out)
    d = auditor.audit(trace, complete, buf.stats)
    auditor.close()
    assert (d["critical_step"], d["agent"]) == (4, "retail_agent")
