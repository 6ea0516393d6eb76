"""An OTLP/HTTP trace receiver that audits each trace once it is complete (``trajaudit serve --otlp``).

Any OpenTelemetry-instrumented agent can export to it (``OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:PORT``):
``POST /v1/traces`` with an ``ExportTraceServiceRequest`` (and ``POST /v1/logs`` with an
``ExportLogsServiceRequest``: GenAI content captured as log events, attached to their spans) as
protobuf (``application/x-protobuf``; decoding needs ``opentelemetry-proto``, in the ``serve`` extra)
or as OTLP/JSON (``application/json``), optionally gzip-compressed. Spans are grouped by trace id
in a :class:`TraceBuffer`; a trace is *complete* when its root span (no parent) has ended and no
span of it arrived for ``quiet`` seconds — then it is read as the ``otel`` (or ``openinference``)
format (``openinference`` or ``langfuse`` when its spans carry their attributes) and audited, and its
diagnosis appended to a JSONL file (one line per trace, flushed). A
trace whose root never arrives is audited anyway ``max_wait`` seconds after its first span
(``metadata.incomplete_trace``).

Memory is bounded: at most ``max_traces`` open traces (a new trace beyond that evicts the oldest,
with a warning, counted in ``stats``) and ``max_spans`` spans per trace (later spans are dropped,
with a warning). On shutdown every open trace is audited (those without an ended root flagged
incomplete), then the output file is closed.

The HTTP layer is starlette served by uvicorn (the ``serve`` extra), imported only by :func:`make_app`
and :func:`serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from trajaudit import safe_json
from trajaudit.engine.run.pipeline import AuditSpec, audit_one, build_context, close_context
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.trace.adapters.base import LoadOptions
from trajaudit.engine.trace.adapters.langfuse import OBSERVATION, LangfuseAdapter
from trajaudit.engine.trace.adapters.openinference import KIND, OpenInferenceAdapter
from trajaudit.engine.trace.adapters.otel import (
    OTelAdapter,
    SpanTrace,
    attach_logs,
    hex_id,
    log_records,
    read_spans,
)
from trajaudit.engine.trace.adapters.spans import SpanRecord
from trajaudit.engine.trace.ir import Source
from trajaudit.errors import TraceFormatError, TrajauditError

log = logging.getLogger(__name__)


@dataclass
class _Open:
    """One trace being received."""

    spans: list[SpanRecord] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    first: float = 0.0
    last: float = 0.0
    root_ended: bool = False
    dropped: int = 0


@dataclass
class ReceiverStats:
    """Counters of a receiver: requests, spans and log records received, traces audited/failed/evicted,
    spans dropped, bad requests."""

    requests: int = 0
    spans: int = 0
    log_records: int = 0
    audited: int = 0
    failed: int = 0
    evicted: int = 0
    dropped_spans: int = 0
    bad_requests: int = 0


class TraceBuffer:
    """Open traces, grouped by trace id, with the completion rule and the memory bounds.

    Args:
        quiet: seconds without a new span after the root span ended before a trace is complete.
        max_traces: open traces kept at most; a new trace beyond it evicts the oldest (warning).
        max_spans: spans kept per trace; later ones are dropped (warning).
        max_wait: seconds after a trace's first span when it is audited even without an ended root.
        clock: the time source (seconds; ``time.monotonic`` by default, injectable for tests).

    Thread-safe: the HTTP handler adds while the auditing loop takes.
    """

    def __init__(self, *, quiet: float = 2.0, max_traces: int = 1000, max_spans: int = 10_000,
                 max_wait: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        if max_traces < 1 or max_spans < 1:
            raise ValueError("max_traces and max_spans must be at least 1")
        self.quiet, self.max_traces, self.max_spans, self.max_wait = quiet, max_traces, max_spans, max_wait
        self.clock = clock
        self.stats = ReceiverStats()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def add(self, doc: Any) -> int:
        """Add the spans of one OTLP/JSON trace export (parsed), or the log records of a log export
        (``resourceLogs``: GenAI content captured as events, tied to their spans). Returns the number
        of spans (or log records) taken.

        Raises:
            TraceFormatError: the body holds neither a ``resourceSpans`` nor a ``resourceLogs`` list.
        """
        if not isinstance(doc, dict) or not any(isinstance(doc.get(k), list) for k in ("resourceSpans", "resourceLogs")):
            raise TraceFormatError("not an OTLP export: no 'resourceSpans' (or 'resourceLogs') list")
        spans, _ = read_spans({"resourceSpans": doc.get("resourceSpans")})
        records = log_records(doc)
        now = self.clock()
        with self._lock:
            self.stats.requests += 1
            for s in spans:
                t = self._entry(s.trace_id, now)
                if t is not None:
                    s.order = len(t.spans)
                    t.spans.append(s)
                    if not s.parent_id and s.end is not None:
                        t.root_ended = True
            for rec in records:
                t = self._entry(hex_id(rec.get("traceId")) or "", now)
                if t is not None:
                    t.logs.append(rec)
            self.stats.spans += len(spans)
            self.stats.log_records += len(records)
        return len(spans) + len(records)

    def _entry(self, trace_id: str, now: float) -> _Open | None:
        """The open trace ``trace_id`` (made, evicting the oldest past the cap), or ``None`` when it
        already holds ``max_spans`` spans and log records (the item is dropped and counted)."""
        t = self._open.get(trace_id)
        if t is None:
            while len(self._open) >= self.max_traces:
                old, dropped = self._open.popitem(last=False)
                self.stats.evicted += 1
                log.warning("open-trace cap (%d) reached: trace %s evicted unaudited (%d spans)",
                            self.max_traces, old, len(dropped.spans))
            t = self._open[trace_id] = _Open(first=now)
        if len(t.spans) + len(t.logs) >= self.max_spans:
            if not t.dropped:
                log.warning("trace %s: more than %d spans; later spans dropped", trace_id, self.max_spans)
            t.dropped += 1
            self.stats.dropped_spans += 1
            return None
        t.last = now
        return t

    def take_due(self, *, everything: bool = False) -> list[tuple[SpanTrace, bool]]:
        """Remove and return the traces that are complete (or waited ``max_wait``; all with
        ``everything``): ``[(trace, complete)]``."""
        now = self.clock()
        out: list[tuple[SpanTrace, bool]] = []
        with self._lock:
            for tid in list(self._open):
                t = self._open[tid]
                done = t.root_ended and now - t.last >= self.quiet
                if done or everything or now - t.first >= self.max_wait:
                    del self._open[tid]
                    meta: dict[str, Any] = {"dropped_spans": t.dropped} if t.dropped else {}
                    attach_logs(t.spans, t.logs)
                    out.append((SpanTrace(tid, t.spans, meta), t.root_ended))
        return out


class TraceAuditor:
    """Audits complete traces and appends their diagnoses to a JSONL stream.

    Args:
        out: a text stream (the diagnoses file), one JSON line per audited trace, flushed each time.
        spec: the audit to run (offline by default).
    """

    def __init__(self, out: IO[str], spec: AuditSpec | None = None, options: LoadOptions | None = None) -> None:
        self.out = out
        self.spec = spec or AuditSpec()
        self.context = build_context(self.spec)
        self.options = options or LoadOptions()
        self._otel, self._oi, self._lf = OTelAdapter(), OpenInferenceAdapter(), LangfuseAdapter()

    def audit(self, trace: SpanTrace, complete: bool, stats: ReceiverStats) -> dict[str, Any] | None:
        """Audit one trace; returns the diagnosis written (as a dict), or ``None`` when the trace
        could not be read or audited (logged, counted in ``stats.failed``)."""
        adapter = (self._oi if any(KIND in s.attributes for s in trace.spans)
                   else self._lf if any(OBSERVATION + "type" in s.attributes for s in trace.spans) else self._otel)
        try:
            traj = adapter.convert(trace, source=Source(adapter.name, None, None), options=self.options)
            if not complete:
                traj = dataclasses.replace(traj, metadata={**traj.metadata, "incomplete_trace": True})
            if self.options.validate:
                errs = schema_errors("trajectory", traj.to_dict(), limit=3)
                if errs:
                    raise TraceFormatError("IR fails the trajectory schema: " + "; ".join(errs))
            result = audit_one(traj, self.spec.strategy, self.context)
        except TrajauditError as e:
            stats.failed += 1
            log.warning("trace %s not audited: %s", trace.trace_id, e)
            return None
        line = result.diagnosis.to_json()
        self.out.write(line + "\n")
        self.out.flush()
        stats.audited += 1
        return json.loads(line)

    def close(self) -> None:
        """Release the audit context."""
        close_context(self.context)


def decode_body(body: bytes, content_type: str, encoding: str, signal: str = "traces") -> Any:
    """An OTLP/HTTP request body → the OTLP/JSON document (``signal``: ``traces`` or ``logs``, the
    protobuf message: ``ExportTraceServiceRequest`` or ``ExportLogsServiceRequest``).

    Raises:
        TraceFormatError: not gzip when it says so, not JSON, not an ``ExportTraceServiceRequest``,
            an unsupported content type, or protobuf without ``opentelemetry-proto`` installed.
    """
    if encoding.lower() == "gzip":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as e:
            raise TraceFormatError(f"body is not valid gzip: {e}") from None
    kind = content_type.split(";")[0].strip().lower()
    if kind in ("application/json", ""):
        try:
            return safe_json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise TraceFormatError(f"body is not OTLP/JSON: {e}") from None
    if kind == "application/x-protobuf":
        try:
            from google.protobuf.json_format import MessageToDict
            from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        except ImportError:
            raise TraceFormatError("protobuf OTLP needs opentelemetry-proto: pip install 'trajaudit[serve]'") from None
        req = ExportLogsServiceRequest() if signal == "logs" else ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError is not importable by one stable name
            raise TraceFormatError(f"body is not an {type(req).__name__}: {e}") from None
        return MessageToDict(req)
    raise TraceFormatError(f"unsupported content type {content_type!r} (application/json or application/x-protobuf)")


def make_app(buffer: TraceBuffer, auditor: TraceAuditor, *, tick: float = 0.25) -> Any:
    """The starlette application: ``POST /v1/traces`` (and ``POST /v1/logs``: GenAI content exported as
    log events, tied to the trace's spans) and a loop auditing complete traces every
    ``tick`` seconds (in a worker thread, so receiving never waits for an audit). On shutdown the
    open traces are audited and the auditor closed."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def receive(request: Request) -> Response:
        body = await request.body()
        ctype = request.headers.get("content-type", "application/json")
        try:
            doc = decode_body(body, ctype, request.headers.get("content-encoding", ""),
                              "logs" if request.url.path.endswith("/logs") else "traces")
            buffer.add(doc)
        except TraceFormatError as e:
            buffer.stats.bad_requests += 1
            return JSONResponse({"code": 3, "message": e.message}, status_code=400)
        if ctype.startswith("application/x-protobuf"):
            return Response(b"", media_type="application/x-protobuf")  # an empty ExportTraceServiceResponse
        return JSONResponse({"partialSuccess": {}})

    async def drain(everything: bool = False) -> None:
        for trace, complete in buffer.take_due(everything=everything):
            await asyncio.to_thread(auditor.audit, trace, complete, buffer.stats)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async def loop() -> None:
            while True:
                await asyncio.sleep(tick)
                await drain()

        task = asyncio.create_task(loop())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await drain(everything=True)
            auditor.close()

    return Starlette(routes=[Route("/v1/traces", receive, methods=["POST"]), Route("/v1/logs", receive, methods=["POST"])],
                     lifespan=lifespan)


def serve(port: int, out: IO[str], *, host: str = "127.0.0.1", spec: AuditSpec | None = None,
          buffer: TraceBuffer | None = None, log_level: str = "warning") -> ReceiverStats:
    """Run the receiver until interrupted (SIGINT/SIGTERM: a clean shutdown auditing open traces).

    Returns:
        The receiver's counters.

    Raises:
        ImportError: starlette/uvicorn are not installed (``pip install 'trajaudit[serve]'``).
    """
    import uvicorn

    buffer = buffer or TraceBuffer()
    auditor = TraceAuditor(out, spec)
    app = make_app(buffer, auditor)
    uvicorn.run(app, host=host, port=port, log_level=log_level, lifespan="on")
    return buffer.stats
