"""Run the guard proxy (uvicorn, in a thread) in front of the scripted OpenAI server, for tests and benchmarks."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import uvicorn

from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.online.guard import Guard, build_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GuardServer:
    """``with GuardServer(upstream_url, mode=...) as g: g.url`` — the proxy's ``base_url``."""

    def __init__(self, upstream: str, *, rules: tuple[Any, ...] = (), tools: Any = None, timeout: float = 30.0,
                 **guard_kw: Any) -> None:
        ctx = build_context(AuditSpec(rules=rules, tools=tools))
        self.guard = Guard(ctx, **guard_kw)
        self.port = free_port()
        app = build_app(self.guard, upstream, timeout=timeout)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> GuardServer:
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("guard did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def tool_call_completion(name: str, args: dict[str, Any], call_id: str = "call_1") -> str:
    """A chat completion (JSON text) whose message is one tool call."""
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted-model",
                       "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                                    "message": {"role": "assistant", "content": None, "tool_calls": [
                                        {"id": call_id, "type": "function",
                                         "function": {"name": name, "arguments": json.dumps(args)}}]}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def tool_call_stream(name: str, args: dict[str, Any], call_id: str = "call_1") -> str:
    """The same answer as a server-sent-event stream, the arguments split over three deltas."""
    text = json.dumps(args)
    parts = [text[: len(text) // 3], text[len(text) // 3: 2 * len(text) // 3], text[2 * len(text) // 3:]]
    meta = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted-model"}
    chunks = [{**meta, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]},
        "finish_reason": None}]}]
    chunks += [{**meta, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]},
                                     "finish_reason": None}]} for p in parts]
    chunks.append({**meta, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
