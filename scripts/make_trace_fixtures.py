"""Regenerate the trace-format fixtures of tests/data/traces/ with the REAL tracing libraries.

One scripted agent run (a retail support agent that looks an order up, then cancels it without the
user's confirmation, and reports) is played against the project's scripted OpenAI-compatible
server (tests/llm_server.py, on 127.0.0.1) and captured by each library as its users would:

- ``otel_genai.jsonl``: opentelemetry-sdk + opentelemetry-instrumentation-openai-v2 (chat spans,
  latest experimental GenAI conventions, content on the span: ``gen_ai.input.messages``/
  ``gen_ai.output.messages``) and opentelemetry-util-genai's ``invoke_agent``/``execute_tool``
  spans, written by opentelemetry-exporter-otlp-json-file (OTLP/JSON lines, as the Collector's file
  exporter writes them).
- ``otel_genai_events.jsonl``: the same loop with content captured as events only: the messages are
  in a log event (``gen_ai.client.inference.operation.details``) tied to the chat span, written as
  ``resourceLogs`` lines beside the ``resourceSpans`` lines.
- ``otel_genai_nocontent.jsonl``: content capture off (the default): spans without messages.
- ``openinference.jsonl``: openinference-instrumentation-openai (LLM spans) plus AGENT/TOOL spans
  of openinference's own tracer, OTLP/JSON lines.
- ``langsmith_run_tree.json``: langsmith's ``wrap_openai`` + ``@traceable`` tools in local tracing
  mode (``tracing_context(enabled="local")``: nothing is sent); the finished root run tree.
- ``inspect_log.eval`` and ``inspect_log.json``: an Inspect AI task with a tool run against the
  server through the ``openai-api`` provider (base URL from the environment).
- ``langfuse_trace.json``: the same loop recorded as a Langfuse trace (the public API's trace JSON,
  from Langfuse's documented data model: the langfuse SDK exports OTel spans to a Langfuse server
  and has no offline export of this shape), and ``langfuse_sdk.jsonl``: what the langfuse SDK itself
  exports with no server (its OpenTelemetry spans, ``langfuse.openai`` generations and agent/tool
  observations, written to OTLP/JSON through the SDK's ``span_exporter``).
- ``chat.json``: the same run written as OpenAI chat messages (the agent loop's own message list).

A library that is not installed is skipped with a note (``pip install -e '.[fixtures]'``).
Run: ``python scripts/make_trace_fixtures.py [--out tests/data/traces] [--only otel,inspect,...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from llm_server import Reply, ScriptedLLMServer  # noqa: E402

SYSTEM = ("You are a retail support agent. Before any write action (cancel, refund, exchange) you must "
          "list the action details and obtain explicit user confirmation (yes) to proceed.")
USER = "Please cancel my order #W1001, I ordered the wrong size."
AGENT = "retail_agent"
ORDER = {"order_id": "#W1001", "status": "pending", "items": [{"name": "T-shirt", "size": "M", "price": 25.0}]}
TOOLS = [
    {"type": "function", "function": {
        "name": "get_order_details", "description": "Get the status and items of an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                       "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "cancel_pending_order", "description": "Cancel a pending order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"},
                                                        "reason": {"type": "string"}},
                       "required": ["order_id", "reason"]}}},
]
FINAL = "Your order #W1001 has been cancelled; the refund of $25.00 goes back to your card."


def script() -> list[Reply]:
    """The model's three answers: look up, cancel (no confirmation asked), report."""
    return [
        Reply(tool_calls=[{"id": "call_lookup_1", "name": "get_order_details", "arguments": {"order_id": "#W1001"}}]),
        Reply(tool_calls=[{"id": "call_cancel_2", "name": "cancel_pending_order",
                           "arguments": {"order_id": "#W1001", "reason": "ordered by mistake"}}]),
        Reply(FINAL),
    ]


def run_tool(name: str, args: dict[str, Any]) -> str:
    """The tools' results (JSON text)."""
    if name == "get_order_details":
        return json.dumps(ORDER)
    if name == "cancel_pending_order":
        return json.dumps({**ORDER, "status": "cancelled"})
    return json.dumps({"error": f"unknown tool {name}"})


def agent_loop(client: Any, on_tool: Any = None, on_chat: Any = None) -> list[dict[str, Any]]:
    """The agent: chat, run the tools it calls, until it answers. ``on_tool(name, id, args, fn)``
    wraps a tool run (a tracing span), ``on_chat(fn)`` a model call. Returns the messages."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    for _ in range(5):
        def call() -> Any:
            return client.chat.completions.create(model="scripted-model", messages=list(messages), tools=TOOLS)
        resp = on_chat(call) if on_chat else call()
        msg = resp.choices[0].message
        if not msg.tool_calls:
            messages.append({"role": "assistant", "content": msg.content})
            return messages
        messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls]})
        for c in msg.tool_calls:
            args = json.loads(c.function.arguments)
            def run(c: Any = c, args: dict[str, Any] = args) -> str:
                return run_tool(c.function.name, args)
            result = on_tool(c.function.name, c.id, args, run) if on_tool else run()
            messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
    return messages


def openai_client(url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=url, api_key="not-a-key", max_retries=0)


# -- OpenTelemetry GenAI ------------------------------------------------------------------------------

def make_otel(out: Path, mode: str) -> None:
    """One OTel capture in a fresh process (the instrumentation reads its environment once)."""
    env = {**os.environ}
    env.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    env.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    if mode == "span":
        env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
    elif mode == "events":
        env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "event_only"
    else:
        env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    subprocess.run([sys.executable, __file__, "--child-otel", str(out)], env=env, check=True)


def child_otel(out: Path | None, endpoint: str | None = None, encoding: str = "protobuf") -> None:
    """The OTel capture itself (run in a child process by :func:`make_otel`): spans and GenAI log
    events to the OTLP/JSON file ``out``, or spans exported over OTLP/HTTP to ``endpoint`` (``/v1/traces``)
    as protobuf or JSON (how ``tests/engine/run/test_otlp_receiver.py`` feeds ``trajaudit serve``)."""
    from opentelemetry import trace
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.util.genai.handler import get_telemetry_handler

    resource = Resource.create({"service.name": "retail-agent"})
    provider = TracerProvider(resource=resource)
    logs = LoggerProvider(resource=resource)
    if endpoint is not None:  # spans to ENDPOINT (…/v1/traces), log events to …/v1/logs beside it
        if encoding == "json":
            from opentelemetry.exporter.otlp.json.http import OTLPSpanExporter
            from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter
        else:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        logs_url = endpoint.removesuffix("/traces") + "/logs"
        logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=logs_url)))
    else:
        assert out is not None
        out.unlink(missing_ok=True)
        provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
        logs.add_log_record_processor(SimpleLogRecordProcessor(FileLogExporter(str(out))))
    trace.set_tracer_provider(provider)
    set_logger_provider(logs)
    OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logs)
    handler = get_telemetry_handler(tracer_provider=provider, logger_provider=logs)
    with ScriptedLLMServer() as server:
        server.script(*script())
        client = openai_client(server.url)

        def on_tool(name: str, call_id: str, args: dict[str, Any], fn: Any) -> str:
            with handler.tool(name, tool_call_id=call_id, tool_type="function") as inv:
                inv.arguments = args
                result = fn()
                inv.tool_result = result
            return result

        with handler.invoke_local_agent(agent_name=AGENT):
            agent_loop(client, on_tool=on_tool)
    provider.shutdown()
    logs.shutdown()


# -- OpenInference ------------------------------------------------------------------------------------

def make_openinference(out: Path) -> None:
    """openinference-instrumentation-openai LLM spans under AGENT/TOOL spans, OTLP/JSON lines."""
    from openinference.instrumentation import OITracer, TraceConfig
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    out.unlink(missing_ok=True)
    provider = TracerProvider(resource=Resource.create({"service.name": "retail-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
    inst = OpenAIInstrumentor()
    inst.instrument(tracer_provider=provider)
    tracer = OITracer(provider.get_tracer(__name__), config=TraceConfig())
    with ScriptedLLMServer() as server:
        server.script(*script())
        client = openai_client(server.url)

        def on_tool(name: str, call_id: str, args: dict[str, Any], fn: Any) -> str:
            with tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
                span.set_tool(name=name, description=None, parameters=args)
                span.set_input(json.dumps(args), mime_type="application/json")
                span.set_attribute("tool_call.id", call_id)
                result = fn()
                span.set_output(result, mime_type="application/json")
            return result

        with tracer.start_as_current_span(AGENT, openinference_span_kind="agent") as agent:
            agent.set_input(USER)
            messages = agent_loop(client, on_tool=on_tool)
            agent.set_output(messages[-1]["content"])
    inst.uninstrument()
    provider.shutdown()


# -- LangSmith ----------------------------------------------------------------------------------------

def make_langsmith(out: Path) -> None:
    """langsmith's run tree in local tracing mode (no server: nothing is sent)."""
    os.environ["LANGSMITH_ENDPOINT"] = "http://127.0.0.1:9"  # local mode sends nothing; never try the internet
    os.environ["LANGSMITH_TRACING"] = "false"
    import langsmith
    from langsmith.wrappers import wrap_openai

    captured: list[Any] = []
    with ScriptedLLMServer() as server:
        server.script(*script())
        client = wrap_openai(openai_client(server.url))

        def on_tool(name: str, call_id: str, args: dict[str, Any], fn: Any) -> str:
            @langsmith.traceable(run_type="tool", name=name, metadata={"tool_call_id": call_id})
            def tool(**kwargs: Any) -> str:
                return fn()
            return tool(**args)

        @langsmith.traceable(run_type="chain", name=AGENT)
        def agent(question: str) -> str:
            return agent_loop(client, on_tool=on_tool)[-1]["content"]

        with langsmith.tracing_context(enabled="local"):
            agent(USER, langsmith_extra={"on_end": captured.append})
    root = captured[0]

    def tree(run: Any) -> dict[str, Any]:
        d = json.loads(run.model_dump_json(exclude={"child_runs", "parent_run", "client", "ls_client"}))
        d["child_runs"] = [tree(c) for c in run.child_runs]
        return d

    out.write_text(json.dumps(tree(root), indent=1) + "\n", encoding="utf-8")


# -- Inspect AI ---------------------------------------------------------------------------------------

def make_inspect(out_dir: Path) -> None:
    """A one-sample Inspect task with the two tools, run against the server; .eval and .json logs."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.solver import generate, system_message, use_tools
    from inspect_ai.tool import tool

    @tool
    def get_order_details():  # noqa: ANN202 - Inspect reads the signature and docstring
        async def execute(order_id: str) -> str:
            """Get the status and items of an order.

            Args:
                order_id: the order id.
            """
            return run_tool("get_order_details", {"order_id": order_id})
        return execute

    @tool
    def cancel_pending_order():  # noqa: ANN202
        async def execute(order_id: str, reason: str) -> str:
            """Cancel a pending order.

            Args:
                order_id: the order id.
                reason: why.
            """
            return run_tool("cancel_pending_order", {"order_id": order_id, "reason": reason})
        return execute

    task = Task(dataset=[Sample(input=USER, target="confirm first", id="retail-1")],
                solver=[system_message(SYSTEM), use_tools(get_order_details(), cancel_pending_order()), generate()])
    with ScriptedLLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.script(*script())
        os.environ["SCRIPTED_BASE_URL"] = server.url
        os.environ["SCRIPTED_API_KEY"] = "not-a-key"
        logs = eval(task, model="openai-api/scripted/scripted-model", log_dir=tmp, log_format="eval",
                    display="none", max_retries=0)
        (out_dir / "inspect_log.eval").write_bytes(Path(logs[0].location).read_bytes())
    # the same log in Inspect's JSON log format, written by Inspect itself
    log = read_eval_log(str(out_dir / "inspect_log.eval"))
    write_eval_log(log, str(out_dir / "inspect_log.json"), format="json")


def write_langfuse(out: Path) -> None:
    """The same run as a Langfuse trace (the public API's trace JSON: an AGENT observation, a
    GENERATION per model call with the request's messages and the answer, a TOOL per tool run), built
    from Langfuse's documented data model while the agent loop runs (the langfuse SDK needs a server)."""
    import datetime
    import uuid

    trace_id = uuid.UUID(int=0x1F0).hex
    clock = [datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)]

    def now() -> str:
        clock[0] += datetime.timedelta(milliseconds=10)
        return clock[0].isoformat().replace("+00:00", "Z")

    agent_id = uuid.UUID(int=1).hex
    observations: list[dict[str, Any]] = []
    agent_start = now()

    def obs(kind: str, name: str, start: str, **fields: Any) -> None:
        observations.append({"id": uuid.UUID(int=len(observations) + 2).hex, "traceId": trace_id, "type": kind,
                             "name": name, "startTime": start, "endTime": now(), "parentObservationId": agent_id,
                             "level": "DEFAULT", "statusMessage": None, **fields})

    def on_chat(fn: Any) -> Any:
        start = now()
        resp = fn()
        request = server.requests[-1]
        msg = resp.choices[0].message
        output = {"role": "assistant", "content": msg.content}
        if msg.tool_calls:
            output["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.function.name, "arguments": c.function.arguments}} for c in msg.tool_calls]
        obs("GENERATION", "chat", start, model="scripted-model", input=request["messages"], output=output,
            usage={"input": resp.usage.prompt_tokens, "output": resp.usage.completion_tokens, "unit": "TOKENS"})
        return resp

    def on_tool(name: str, call_id: str, args: dict[str, Any], fn: Any) -> str:
        start = now()
        result = fn()
        obs("TOOL", name, start, input=args, output=result, metadata={"tool_call_id": call_id})
        return result

    with ScriptedLLMServer() as server:
        server.script(*script())
        messages = agent_loop(openai_client(server.url), on_tool=on_tool, on_chat=on_chat)
    agent = {"id": agent_id, "traceId": trace_id, "type": "AGENT", "name": AGENT, "startTime": agent_start,
             "endTime": now(), "parentObservationId": None, "input": USER, "output": messages[-1]["content"],
             "level": "DEFAULT", "statusMessage": None}
    trace = {"id": trace_id, "timestamp": agent_start, "name": "retail-support", "input": USER,
             "output": messages[-1]["content"], "sessionId": None, "userId": None, "tags": [], "metadata": {},
             "observations": [agent, *observations], "scores": []}
    out.write_text(json.dumps(trace, indent=1) + "\n", encoding="utf-8")


def make_langfuse_sdk(out: Path) -> None:
    """The langfuse SDK itself, with no server: its OpenTelemetry spans go to an OTLP/JSON file (the
    SDK's ``span_exporter``); ``langfuse.openai`` records the model calls, observations of type agent
    and tool the rest. Run in a child process (the SDK sets up its own tracer provider)."""
    subprocess.run([sys.executable, __file__, "--child-langfuse", str(out)], check=True)


def child_langfuse(out: Path) -> None:
    """The Langfuse SDK capture itself (see :func:`make_langfuse_sdk`)."""
    os.environ.setdefault("LANGFUSE_HOST", "http://127.0.0.1:9")  # never the internet: nothing is sent
    from langfuse import Langfuse
    from langfuse.openai import OpenAI as LangfuseOpenAI
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter

    out.unlink(missing_ok=True)
    lf = Langfuse(public_key="pk-lf-local", secret_key="sk-lf-local", host="http://127.0.0.1:9",
                  span_exporter=FileSpanExporter(str(out)))
    with ScriptedLLMServer() as server:
        server.script(*script())
        client = LangfuseOpenAI(base_url=server.url, api_key="not-a-key", max_retries=0)

        def on_tool(name: str, call_id: str, args: dict[str, Any], fn: Any) -> str:
            with lf.start_as_current_observation(as_type="tool", name=name, input=args,
                                                 metadata={"tool_call_id": call_id}) as obs:
                result = fn()
                obs.update(output=result)
            return result

        with lf.start_as_current_observation(as_type="agent", name=AGENT, input=USER) as agent:
            messages = agent_loop(client, on_tool=on_tool)
            agent.update(output=messages[-1]["content"])
    lf.flush()
    lf.shutdown()


def write_chat(out: Path) -> None:
    """The same run as OpenAI chat messages, from the agent loop itself (no tracing)."""
    with ScriptedLLMServer() as server:
        server.script(*script())
        messages = agent_loop(openai_client(server.url))
    for m in messages:
        if m["role"] == "assistant":
            m["name"] = AGENT
    out.write_text(json.dumps({"id": "retail-1", "messages": messages}, indent=1) + "\n", encoding="utf-8")


MAKERS = {
    "chat": lambda d: write_chat(d / "chat.json"),
    "langfuse": lambda d: (write_langfuse(d / "langfuse_trace.json"), make_langfuse_sdk(d / "langfuse_sdk.jsonl")),
    "otel": lambda d: (make_otel(d / "otel_genai.jsonl", "span"), make_otel(d / "otel_genai_events.jsonl", "events"),
                       make_otel(d / "otel_genai_nocontent.jsonl", "none")),
    "openinference": lambda d: make_openinference(d / "openinference.jsonl"),
    "langsmith": lambda d: make_langsmith(d / "langsmith_run_tree.json"),
    "inspect": make_inspect,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "traces")
    ap.add_argument("--only", default=",".join(MAKERS), help="comma-separated subset of: " + ", ".join(MAKERS))
    ap.add_argument("--child-otel", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child-langfuse", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--export-otlp", metavar="URL",
                    help="run the OTel-instrumented agent once, exporting its spans over OTLP/HTTP to URL (/v1/traces)")
    ap.add_argument("--encoding", choices=("protobuf", "json"), default="protobuf", help="with --export-otlp")
    args = ap.parse_args()
    if args.child_otel:
        child_otel(args.child_otel)
        return 0
    if args.child_langfuse:
        child_langfuse(args.child_langfuse)
        return 0
    if args.export_otlp:
        child_otel(None, args.export_otlp, args.encoding)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    missing = []
    for name in args.only.split(","):
        try:
            MAKERS[name](args.out)
            print(f"{name}: written")
        except ImportError as e:
            missing.append(name)
            print(f"{name}: skipped, library not installed ({e.name}); pip install -e '.[fixtures]'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
