"""A minimal scripted OpenAI-compatible chat server on 127.0.0.1 for tests (no network, no API key).

``ScriptedLLMServer(respond)`` serves ``POST /v1/chat/completions``: ``respond(request_json)`` returns
the assistant message content (a string, or a dict that is JSON-encoded). Every request is recorded in
``server.requests``. Use as a context manager; ``server.base_url`` is ``http://127.0.0.1:<port>/v1``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedLLMServer:
    """A local OpenAI-protocol server whose answers come from a Python callable."""

    def __init__(self, respond: Callable[[dict[str, Any]], str | dict[str, Any]]) -> None:
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                server.requests.append(body)
                try:
                    content = server.respond(body)
                except Exception as e:  # a scripted failure becomes an HTTP 500, like a broken server
                    self._send(500, {"error": {"message": str(e)}})
                    return
                if not isinstance(content, str):
                    content = json.dumps(content)
                n = len(server.requests)
                self._send(200, {
                    "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })

            def _send(self, code: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
