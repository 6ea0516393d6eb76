"""``trajaudit serve --otlp PORT``: receive OTLP/HTTP traces and audit each one once it is complete."""

from __future__ import annotations

import click

from trajaudit.cli.common import (
    check_can_listen,
    check_output_folder,
    console,
    fail,
    handle_errors,
    refuse_dash,
)
from trajaudit.cli.options import seconds
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.run.otlp_receiver import TraceBuffer
from trajaudit.engine.run.otlp_receiver import serve as run_server
from trajaudit.engine.run.pipeline import AuditSpec


@click.command("serve")
@click.option("--otlp", "port", type=click.IntRange(1, 65535), required=True, metavar="PORT",
              help="Listen for OTLP/HTTP traces (POST /v1/traces, and /v1/logs for GenAI events; JSON or protobuf) on this port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0: every interface).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="diagnoses.jsonl", show_default=True,
              help="Append one diagnosis per audited trace (JSONL, flushed per line).")
@click.option("--quiet-period", type=seconds(0), default=2.0, show_default=True,
              help="Seconds without a new span after the root span ended before a trace is audited.")
@click.option("--max-wait", type=seconds(0), default=300.0, show_default=True,
              help="Seconds after a trace's first span when it is audited even if its root never ended.")
@click.option("--max-traces", type=click.IntRange(1), default=1000, show_default=True,
              help="Open traces kept at most; beyond it the oldest is evicted unaudited (with a warning).")
@click.option("--max-spans", type=click.IntRange(1), default=10_000, show_default=True,
              help="Spans kept per trace; later ones are dropped (with a warning).")
@click.option("--rules", "rules", multiple=True, metavar="PACK", help="Rule pack file or shipped pack name (repeatable).")
@click.option("--tools", type=click.Path(exists=True, dir_okay=False), help="Tool schemas (OpenAI function list).")
@click.option("--taxonomy", default="agentrx", show_default=True, help="Taxonomy for the root-cause category.")
@handle_errors
def serve(port: int, host: str, output: str, quiet_period: float, max_wait: float, max_traces: int,
          max_spans: int, rules: tuple[str, ...], tools: str | None, taxonomy: str) -> None:
    """Receive traces from instrumented agents and audit each trace once it is complete.

    Point an OpenTelemetry exporter at it (OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:PORT: spans to
    /v1/traces, GenAI content captured as log events to /v1/logs): spans are grouped by trace id; a trace is audited (offline strategy) when its root span has ended
    and no span arrived for --quiet-period seconds, read as the 'otel' format (or 'openinference' when
    its spans say so). Each diagnosis is appended to --output as it is made. Ctrl-C shuts down cleanly:
    the traces still open are audited first. Needs the serve extra: pip install 'trajaudit[serve]'.

    \b
    Example:
      trajaudit serve --otlp 4318 -o diagnoses.jsonl
    """
    refuse_dash(output, "-o/--output", "the diagnoses are appended to a file")
    check_output_folder(output)
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        fail("trajaudit serve needs starlette and uvicorn: pip install 'trajaudit[serve]'")
    check_can_listen(host, port)  # a port in use is a usage error said in words, before starting
    buffer = TraceBuffer(quiet=quiet_period, max_traces=max_traces, max_spans=max_spans, max_wait=max_wait)
    spec = AuditSpec(rules=rules, tools=tools, config=AuditConfig(taxonomy=taxonomy))
    err = console(err=True)
    err.print(f"trajaudit: receiving OTLP/HTTP on http://{host}:{port}/v1/traces; diagnoses → {output}",
              highlight=False, soft_wrap=True)
    with open(output, "a", encoding="utf-8", errors="backslashreplace") as out:
        stats = run_server(port, out, host=host, spec=spec, buffer=buffer)
    err.print(f"trajaudit: {stats.spans} spans and {stats.log_records} log records in {stats.requests} requests; "
              f"{stats.audited} trace(s) audited, "
              f"{stats.failed} not auditable, {stats.evicted} evicted, {stats.dropped_spans} spans dropped, "
              f"{stats.bad_requests} bad requests", highlight=False, soft_wrap=True)
