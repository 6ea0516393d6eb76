"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions protocol, for tests.

It replays scripted answers (a queue, then an optional responder function of the request) and can
inject faults: a sleep past the client's timeout, HTTP 429 with Retry-After, 500, 400, malformed
JSON content, schema-violating JSON, a refusal. Every request is recorded, so tests can assert how
many calls reached the server (e.g. 0 on a run served from the cache).

Script answers with ``server.script(a, b, ...)`` (consumed in order) or ``server.responder = fn``
(``fn(request) -> answer`` for requests the queue does not cover). An answer is:

- a ``dict``/``list`` -> sent as JSON content; a ``str`` -> sent as content verbatim;
- :class:`Reply` -> content/refusal/finish_reason as given;
- :class:`Status` -> an HTTP error (``Status(429, retry_after=0.05)``, ``Status(500)``);
- :class:`Raw` -> a body sent as is (``Raw("<html>…", "text/html")``: a proxy or web UI, not the API);
- :class:`Sleep` -> sleep, then send ``then`` (the client has usually timed out by then);
- a callable -> called with the request, its result is the answer (an exception it raises becomes
  an HTTP 500, like a broken server).

Also usable as ``with ScriptedLLMServer(respond) as server: ... server.base_url`` (the responder
given to the constructor; started on entry, stopped on exit).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trajaudit.llm.prompting import extract_evidence

MODEL = "scripted-model"


@dataclass
class Reply:
    """A chat completion: ``content`` and/or ``refusal``; ``finish_reason`` as given. ``tool_calls``
    (``[{"id", "name", "arguments": dict}]``) makes it an assistant message calling tools, in the
    OpenAI wire form (arguments sent as a JSON string; ``finish_reason`` then ``tool_calls``)."""

    content: str | None = None
    refusal: str | None = None
    finish_reason: str = "stop"
    tool_calls: list[dict[str, Any]] | None = None


@dataclass
class Status:
    """An HTTP error answer. ``retry_after`` (seconds) sets ``retry-after-ms`` and ``Retry-After``."""

    code: int
    message: str = "scripted error"
    retry_after: float | None = None


@dataclass
class Raw:
    """A response body sent verbatim with HTTP ``code`` (a body that is not a chat completion)."""

    body: str
    content_type: str = "application/json"
    code: int = 200


@dataclass
class Sleep:
    """Sleep ``seconds`` before answering ``then`` (a timeout fault when it exceeds the client timeout)."""

    seconds: float
    then: Any = None


class ScriptedLLMServer:
    """The server. ``start()`` binds a random free port; ``url`` is the ``base_url`` for the client.

    Attributes:
        requests: every chat request body received (parsed JSON), in order.
        responder: ``fn(request) -> answer`` used when the queue is empty, or ``None``.
        reject_json_schema: answer HTTP 400 to any ``response_format`` of type ``json_schema``
            (a server that only supports JSON mode).
        exhausted: chat requests that found neither a queued answer nor a responder (answered 418,
            never retried).
    """

    def __init__(self, respond: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.model_requests = 0
        self.responder: Callable[[dict[str, Any]], Any] | None = respond
        self.reject_json_schema = False
        self.exhausted = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting --------------------------------------------------------------------------------
    def script(self, *answers: Any) -> ScriptedLLMServer:
        """Queue answers, consumed one per chat request in order."""
        with self._lock:
            self._queue.extend(answers)
        return self

    @property
    def calls(self) -> int:
        """Chat-completion requests received so far."""
        with self._lock:
            return len(self.requests)

    def reset_counts(self) -> None:
        """Forget recorded requests (the queue is kept)."""
        with self._lock:
            self.requests.clear()
            self.model_requests = 0
            self.exhausted = 0

    def _next(self, request: dict[str, Any]) -> Any:
        with self._lock:
            self.requests.append(request)
            if self.reject_json_schema and (request.get("response_format") or {}).get("type") == "json_schema":
                return Status(400, "response_format json_schema is not supported by this server")
            if self._queue:
                answer = self._queue.popleft()
            elif self.responder is not None:
                answer = self.responder
            else:
                self.exhausted += 1
                return Status(418, "script exhausted: no answer queued for this request")
        while callable(answer) and not isinstance(answer, type):
            try:
                answer = answer(request)
            except Exception as e:  # a scripted failure: answer like a broken server
                return Status(500, f"responder failed: {e}")
        return answer

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> ScriptedLLMServer:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any] | Raw, headers: dict[str, str] | None = None) -> None:
                raw = isinstance(body, Raw)
                data = body.body.encode() if raw else json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", body.content_type if raw else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout fault)

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    with server._lock:
                        server.model_requests += 1
                    self._send(200, {"object": "list", "data": [
                        {"id": MODEL, "object": "model", "created": 0, "owned_by": "tests"}]})
                elif self.path == "/health":
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                try:
                    request = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON", "type": "invalid_request"}})
                    return
                self._answer(request, server._next(request))

            def _answer(self, request: dict[str, Any], answer: Any) -> None:
                if isinstance(answer, Sleep):
                    time.sleep(answer.seconds)
                    self._answer(request, answer.then if answer.then is not None else Reply("{}"))
                    return
                if isinstance(answer, Raw):
                    self._send(answer.code, answer)
                    return
                if isinstance(answer, Status):
                    headers = {"x-should-retry": "false"} if answer.code in (400, 418) else {}
                    if answer.retry_after is not None:
                        headers["retry-after-ms"] = str(int(answer.retry_after * 1000))
                        headers["Retry-After"] = str(max(1, round(answer.retry_after)))
                    self._send(answer.code, {"error": {"message": answer.message, "type": "scripted",
                                                       "code": str(answer.code)}}, headers)
                    return
                if isinstance(answer, (dict, list)):
                    answer = Reply(json.dumps(answer))
                elif isinstance(answer, str):
                    answer = Reply(answer)
                if not isinstance(answer, Reply):
                    raise TypeError(f"unscriptable answer {answer!r}")
                prompt_chars = sum(len(m.get("content") or "") if isinstance(m.get("content"), (str, type(None)))
                                   else len(json.dumps(m["content"])) for m in request.get("messages", []))
                out_chars = len(answer.content or answer.refusal or "")
                message: dict[str, Any] = {"role": "assistant", "content": answer.content, "refusal": answer.refusal}
                finish = answer.finish_reason
                if answer.tool_calls:
                    message["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                        "name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}} for c in answer.tool_calls]
                    finish = "tool_calls" if finish == "stop" else finish
                self._send(200, {
                    "id": f"chatcmpl-{server.calls}", "object": "chat.completion", "created": 0,
                    "model": request.get("model", MODEL),
                    "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                                 "message": message}],
                    "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": out_chars // 4,
                              "total_tokens": prompt_chars // 4 + out_chars // 4},
                })

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def base_url(self) -> str:
        """Alias of :attr:`url`."""
        return self.url

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# -- helpers for responders ------------------------------------------------------------------------

def user_text(request: dict[str, Any]) -> str:
    """The text of the first user message of a chat request."""
    return next((m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user"), "")


def evidence_of(request: dict[str, Any]) -> dict[str, Any]:
    """The decoded evidence blocks of the request's first user message (``{label: data}``)."""
    return extract_evidence(user_text(request))


def schema_name(request: dict[str, Any]) -> str | None:
    """``response_format.json_schema.name`` of the request, if any."""
    fmt = request.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name")
