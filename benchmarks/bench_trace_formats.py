"""Trace-format throughput: spans per second read from OTLP/JSON files and received by ``trajaudit serve``.

Inputs are the real OpenTelemetry fixture (tests/data/traces/otel_genai.jsonl: one agent run, 6
spans, made by opentelemetry-instrumentation-openai-v2) copied N times under fresh trace ids, so the
spans are real and only the ids differ.

- **load**: CPU time to read an OTLP/JSON-lines file of N traces (join the lines, group by trace,
  rebuild each conversation, validate the IR), side by side with the same N runs written as OpenAI
  chat (``chat.json`` copied N times) — the ratio says what the span reading costs over a chat log.
- **receive**: ``POST /v1/traces`` over real HTTP (one keep-alive connection, one trace per request,
  as ``BatchSpanProcessor`` sends them) to the receiver app served by uvicorn in this process: once
  with the audits deferred to the shutdown (what the HTTP side takes alone), once with the auditing
  loop running (audits share the process, so they slow the receiving); spans/s received and until the
  last diagnosis is written.

Run: ``python benchmarks/bench_trace_formats.py [--traces 500]``. Wall-clock figures on a shared
machine are noisy; the load ratio is measured in one run.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit import load_many  # noqa: E402
from trajaudit.engine.run.otlp_receiver import TraceAuditor, TraceBuffer, make_app  # noqa: E402

TRACES = ROOT / "tests" / "data" / "traces"


def otlp_lines(n: int) -> list[dict]:
    """The fixture's OTLP batches, repeated ``n`` times under trace ids 1..n."""
    batches = [json.loads(line) for line in (TRACES / "otel_genai.jsonl").read_text().splitlines()]
    out = []
    for k in range(n):
        tid = f"{k + 1:032x}"
        for b in batches:
            b = json.loads(json.dumps(b))
            for rs in b["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        s["traceId"] = tid
            out.append(b)
    return out


def bench_load(n: int, tmp: Path) -> None:
    lines = otlp_lines(n)
    spans = sum(len(ss["spans"]) for b in lines for rs in b["resourceSpans"] for ss in rs["scopeSpans"])
    (tmp / "otlp.jsonl").write_text("".join(json.dumps(b) + "\n" for b in lines))
    chat = json.loads((TRACES / "chat.json").read_text())
    (tmp / "chat.json").write_text(json.dumps([{**chat, "id": f"r{k}"} for k in range(n)]))
    times = {}
    for name in ("otlp.jsonl", "chat.json"):
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            res = load_many([tmp / name])
            best = min(best, time.process_time() - t0)
        assert len(res.trajectories) == n and not res.problems, res
        times[name] = best
    print(f"load: {n} traces, {spans} spans: OTLP/JSON lines {times['otlp.jsonl']:.3f} s CPU "
          f"({spans / times['otlp.jsonl']:.0f} spans/s, {n / times['otlp.jsonl']:.0f} traces/s); "
          f"the same runs as OpenAI chat {times['chat.json']:.3f} s "
          f"(span reading costs x{times['otlp.jsonl'] / times['chat.json']:.2f})")


def bench_receive(n: int, audit_while_receiving: bool = True) -> None:
    import uvicorn

    lines = otlp_lines(n)
    per_trace = len(lines) // n
    bodies = [json.dumps({"resourceSpans": [rs for b in lines[k * per_trace:(k + 1) * per_trace]
                                            for rs in b["resourceSpans"]]}).encode() for k in range(n)]
    spans = n * 6
    out = io.StringIO()
    buffer = TraceBuffer(quiet=0.05, max_traces=max(1000, n))
    auditor = TraceAuditor(out)
    app = make_app(buffer, auditor, tick=0.02 if audit_while_receiving else 3600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    conn = http.client.HTTPConnection("127.0.0.1", port)
    t0 = time.perf_counter()
    for body in bodies:
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
    t_recv = time.perf_counter() - t0
    if audit_while_receiving:
        while buffer.stats.audited + buffer.stats.failed < n:
            time.sleep(0.01)
    server.should_exit = True  # the shutdown audits what is still open
    thread.join(timeout=120)
    t_all = time.perf_counter() - t0
    assert buffer.stats.audited == n and len(out.getvalue().splitlines()) == n
    label = "auditing while receiving" if audit_while_receiving else "audits deferred to shutdown"
    print(f"receive ({label}): {n} traces, {spans} spans over HTTP in {t_recv:.2f} s ({spans / t_recv:.0f} spans/s "
          f"received); all audited and written in {t_all:.2f} s ({spans / t_all:.0f} spans/s, "
          f"{n / t_all:.1f} traces/s end to end)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trajaudit-traces-") as tmp:
        bench_load(args.traces, Path(tmp))
    bench_receive(args.traces, audit_while_receiving=False)
    bench_receive(args.traces)


if __name__ == "__main__":
    main()
