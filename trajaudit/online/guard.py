"""``trajaudit guard``: an OpenAI-compatible HTTP proxy that checks an agent's tool calls before they
reach it (issue 20).

For each ``POST /v1/chat/completions`` the proxy rebuilds the conversation from the request's
messages (stateless: the run key is a hash of the messages up to the first user turn), forwards the
request to the upstream, and feeds the answer's assistant message to a
:class:`~trajaudit.engine.run.monitor.Monitor`. The failures the new step settles (at or above
``block_on``), a tool the ``--tools`` schemas do not declare or a call whose arguments break its
schema (``guard.tool-arguments``), or the prefix judge's alarm (``stop_on_alarm``) make a *violation*.
Only rules decided at the answer's own step can block it (``stepper.horizon`` ``"step"``): a rule
reading the call's output is decided when the output arrives, after the call ran, and one reading
the rest of the run at its end, which a guarded conversation never reaches (:func:`rule_horizons`
lists both; ``trajaudit guard`` prints them at start-up):

- ``block`` mode: the answer's message is replaced by an assistant message (no tool calls) stating
  the violated rule(s); or, with ``block_status`` (e.g. 403), an HTTP error with a JSON body
  ``{"error": {..., "type": "trajaudit_violation"}, "violations": [...]}``;
- ``annotate`` mode: the answer passes unchanged, with the findings in the ``x-trajaudit-findings``
  header (JSON, ASCII) and in the validation-log JSONL.

Every decision is written to the log (``log_path``, one JSON object per line: ``run_key``, ``step``,
``rule``, ``verdict``, ``severity``, ``message``, ``evidence``, ``decision``). Streaming requests are
read to the end from the upstream (tool-call deltas assembled) before the decision, then replayed
(or replaced by a blocking stream). The upstream's HTTP errors (429, 5xx) are passed through with
their body and retry headers; an upstream timeout answers 504, an unreachable upstream 502. Bad input
(a body that is not JSON, no ``messages`` list, a message the monitor cannot read, an answer that is
not a chat completion) answers a JSON error for that request; the proxy keeps serving.

Needs the optional extra ``trajaudit[guard]`` (starlette, uvicorn, httpx), imported when the app is built.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import time
import urllib.parse
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.packs.tool_rules import argument_problems, describe_tools
from trajaudit.engine.run.monitor import DEFAULT_ALARM_THRESHOLD, Monitor, MonitorError
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.validation.stepper import horizon
from trajaudit.engine.validation_log import Record, severity_rank
from trajaudit.errors import TrajauditError

log = logging.getLogger(__name__)

__all__ = ["ConversationCache", "Guard", "GuardError", "assemble_stream", "build_app", "check_upstream",
           "message_hashes", "parse_sse", "rule_horizons", "run_key", "serve"]

_HOP = frozenset({"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive", "host"})
MAX_HEADER = 4000


class GuardError(TrajauditError):
    """The extra ``trajaudit[guard]`` is missing, or a setting is invalid."""


def check_upstream(url: str) -> str:
    """``url`` (the upstream's base URL) if it is an ``http://`` or ``https://`` URL with a host (and a
    valid port, if any) and no query or fragment.

    Raises:
        GuardError: anything else (``notaurl``, ``localhost:8000`` without its scheme, ``ftp://...``),
            naming the value.
    """
    try:
        u = urllib.parse.urlsplit(url)
        port_ok = u.port is None or u.port > 0
    except ValueError:  # a port that is not a number or out of range
        port_ok = False
        u = urllib.parse.urlsplit("")
    # no query or fragment: the proxy appends /chat/completions to the base URL's path
    if u.scheme.lower() not in ("http", "https") or not u.hostname or not port_ok or u.query or u.fragment:
        raise GuardError(f"the upstream must be an http:// or https:// URL with a host and no query or fragment, "
                         f"such as http://127.0.0.1:8000/v1 (the proxy appends /chat/completions); got {url!r}")
    return url


def run_key(messages: list[Any]) -> str:
    """A conversation's key: 12 hex digits of a SHA-256 of its messages up to its first user turn
    (the same for every request of one run, which resends the whole prefix)."""
    head: list[Any] = []
    for m in messages:
        head.append(m)
        if isinstance(m, dict) and m.get("role") == "user":
            break
    text = json.dumps(head, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def message_hashes(messages: list[Any], start: bytes = b"") -> list[bytes]:
    """Rolling hashes of a conversation: entry ``i`` is the SHA-256 digest of entry ``i - 1`` (``start``
    for the first) and message ``i`` as JSON with sorted keys, its fields whose value is ``null`` left
    out (a client that sends an answer back re-serialized — ``"refusal": null``, ``"audio": null`` —
    sends the same message). Entry ``i`` stands for messages ``0..i``; ``start``: the last entry of
    the conversation these messages extend."""
    prev = start
    out: list[bytes] = []
    for m in messages:
        if isinstance(m, dict):
            m = {k: v for k, v in m.items() if v is not None}
        text = json.dumps(m, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
        prev = hashlib.sha256(prev + b"\x1e" + text).digest()
        out.append(prev)
    return out


def rule_horizons(context: AuditContext) -> dict[str, list[str]]:
    """The ids of every rule the guard can run (the context's rules, then each domain pack's, compiled
    now) by :func:`~trajaudit.engine.validation.stepper.horizon`: ``step`` (decided when the answer
    that makes the call arrives: these can block it), ``outputs`` (decided when the call's output
    arrives, after the call ran), ``end`` (decided only when the run ends: a guarded conversation
    has no end, so they never block).

    Raises:
        RulePackError: a shipped domain pack does not compile (a packaging bug).
    """
    out: dict[str, list[str]] = {"step": [], "outputs": [], "end": []}
    seen: set[str] = set()
    for r in [*context.rules, *(r for dp in context.domain_packs for r in dp.rules)]:
        if r.id not in seen:
            seen.add(r.id)
            out[horizon(r)].append(r.id)
    return out


class ConversationCache:
    """Monitors of recent conversations, by the rolling hash of the messages they hold (a bounded LRU).

    The proxy stays stateless for its clients: each request carries the whole conversation. A
    request whose messages extend a cached conversation exactly (its first ``n`` messages hash to a
    cached key) takes that monitor out of the cache and adds only the new messages; any other request
    (a diverging prefix, an evicted or expired entry) rebuilds its monitor from the messages. A
    monitor in use by a request is out of the cache, so two requests never share one.

    Args:
        size: at most this many monitors are kept (the least recently used is evicted); 0 disables the cache.
        idle: seconds a monitor is kept unused before it expires.

    Attributes:
        hits, misses: requests that extended a cached conversation / rebuilt one.
    """

    def __init__(self, size: int = 128, idle: float = 600.0) -> None:
        if size < 0 or idle <= 0:
            raise GuardError(f"cache size must be >= 0 and idle seconds > 0, got {size} and {idle}")
        self.size = size
        self.idle = idle
        self._entries: OrderedDict[bytes, tuple[Monitor, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def _expire(self, now: float) -> None:
        entries = self._entries
        while entries:
            key, (_, used) = next(iter(entries.items()))
            if now - used <= self.idle:
                break
            del entries[key]

    def take(self, hashes: list[bytes]) -> tuple[Monitor | None, int]:
        """The cached monitor holding the longest prefix of the conversation whose rolling hashes are
        ``hashes`` (removed from the cache), and that prefix's length; ``(None, 0)`` when none is cached."""
        with self._lock:
            self._expire(time.monotonic())
            entries = self._entries
            if entries:
                for n in range(len(hashes), 0, -1):
                    hit = entries.pop(hashes[n - 1], None)
                    if hit is not None:
                        self.hits += 1
                        return hit[0], n
            self.misses += 1
            return None, 0

    def put(self, key: bytes, monitor: Monitor) -> None:
        """Keep ``monitor`` as the conversation whose rolling hash is ``key`` (evicting the least recently used)."""
        if not self.size:
            return
        with self._lock:
            now = time.monotonic()
            self._entries[key] = (monitor, now)
            self._entries.move_to_end(key)
            self._expire(now)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def parse_sse(text: str) -> tuple[list[dict[str, Any]], bool]:
    """The JSON chunks of a server-sent-event stream, and whether ``data: [DONE]`` ended it.

    Raises:
        ValueError: a ``data:`` line that is not JSON.
    """
    chunks: list[dict[str, Any]] = []
    done = False
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            continue
        if data:
            obj = safe_json.loads(data)  # within the batch loader's limits (nesting, digits, length)
            if not isinstance(obj, dict):
                raise ValueError("a stream chunk is not a JSON object")
            chunks.append(obj)
    return chunks, done


def assemble_stream(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat completion assembled from streamed chunks: content concatenated, tool-call deltas
    joined by their ``index`` (id and name from the first delta, arguments concatenated).

    Raises:
        ValueError: no chunk has ``choices``.
    """
    if not any(isinstance(c.get("choices"), list) and c["choices"] for c in chunks):
        raise ValueError("the stream has no chunk with choices")
    first = chunks[0]
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    role, finish = "assistant", None
    for c in chunks:
        for ch in c.get("choices") or ():
            if not isinstance(ch, dict) or ch.get("index", 0) != 0:
                continue
            d = ch.get("delta") or {}
            role = d.get("role") or role
            if isinstance(d.get("content"), str):
                content.append(d["content"])
            for tc in d.get("tool_calls") or ():
                slot = calls.setdefault(int(tc.get("index", 0)), {"id": None, "type": "function",
                                                                   "function": {"name": "", "arguments": ""}})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot["function"]["name"] += fn["name"]
                if fn.get("arguments"):
                    slot["function"]["arguments"] += fn["arguments"]
            finish = ch.get("finish_reason") or finish
    msg: dict[str, Any] = {"role": role, "content": "".join(content) if content else None}
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"id": first.get("id"), "object": "chat.completion", "created": first.get("created"),
            "model": first.get("model"), "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}


def _completion_message(body: Any) -> dict[str, Any]:
    """The first choice's message of a chat completion. Raises ValueError naming what is missing."""
    if not isinstance(body, dict):
        raise ValueError(f"the upstream answer is not a chat completion (a JSON {type(body).__name__})")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the upstream answer is not a chat completion (no 'choices' list)")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        raise ValueError("the upstream answer is not a chat completion (choices[0] has no 'message' object)")
    return msg


@dataclass
class Decision:
    """One answer's decision: ``allow`` | ``block`` | ``annotate``, with the findings behind it."""

    decision: str
    run_key: str
    step: int
    findings: list[dict[str, Any]] = field(default_factory=list)
    alarm: bool = False

    @property
    def violations(self) -> list[dict[str, Any]]:
        """The findings that violate (verdict ``fail``)."""
        return [f for f in self.findings if f["verdict"] == "fail"]

    def block_text(self) -> str:
        """The assistant message that replaces a blocked answer."""
        parts = [f"{v['rule']} ({v['severity']}): {v['message']}" for v in self.violations]
        return "[trajaudit guard] the proposed action was blocked: " + "; ".join(parts)


def _finding(r: Record) -> dict[str, Any]:
    return {"step": r.step, "rule": r.rule_id, "verdict": r.verdict, "severity": r.severity, "message": r.message,
            "evidence": [e.to_dict() for e in r.evidence][:6]}


class Guard:
    """The proxy's decision logic, independent of HTTP (the app calls :meth:`decide`).

    Args:
        context: the audit context (rules, tools) shared by every request.
        mode: ``block`` or ``annotate``.
        block_on: lowest severity of a failure that blocks (``info`` … ``critical``).
        block_status: ``None`` (replace the message) or an HTTP 4xx status to answer instead.
        stop_on_alarm: block when the prefix judge raises its alarm (``alarm_threshold``).
        log_path: the decisions' JSONL file (appended), or ``None`` (the Python logger only).
        cache_size, cache_idle: the :class:`ConversationCache` of monitors (at most ``cache_size``
            conversations, each kept ``cache_idle`` seconds unused; ``cache_size=0``: every request
            rebuilds its conversation).

    Raises:
        GuardError: an invalid mode, severity or status.
    """

    def __init__(self, context: AuditContext, *, mode: str = "block", block_on: str = "error",
                 block_status: int | None = None, stop_on_alarm: bool = False,
                 alarm_threshold: float = DEFAULT_ALARM_THRESHOLD,
                 log_path: str | Path | None = None, cache_size: int = 128, cache_idle: float = 600.0) -> None:
        if mode not in ("block", "annotate"):
            raise GuardError(f"mode must be block or annotate, got {mode!r}")
        if block_status is not None and not 400 <= block_status <= 499:
            raise GuardError(f"block status must be a 4xx HTTP status, got {block_status}")
        self.floor = severity_rank(block_on)
        self.context = context
        self.mode = mode
        self.block_status = block_status
        self.stop_on_alarm = stop_on_alarm
        self.alarm_threshold = alarm_threshold
        self.log_path = Path(log_path) if log_path else None
        self.tool_names = ({(t.get("function") if isinstance(t.get("function"), dict) else t).get("name")
                            for t in context.tools} if context.tools else None)
        #: the --tools schemas' facts, checked on each proposed call (guard.tool-arguments)
        self.schemas = describe_tools(context.tools) if context.tools else {}
        self._lock = threading.Lock()
        self.cache = ConversationCache(cache_size, cache_idle)
        self._held: weakref.WeakKeyDictionary[Monitor, bytes] = weakref.WeakKeyDictionary()  # monitor -> its conversation's hash

    def open(self, messages: list[Any]) -> Monitor:
        """A monitor holding the conversation ``messages`` (read before the request goes upstream):
        a cached monitor of a prefix of it with the new messages added, else a new one.

        Raises:
            MonitorError: a message cannot be read (names its position).
        """
        hashes = message_hashes(messages)
        m, n = self.cache.take(hashes) if self.cache.size else (None, 0)
        with self._lock:  # the rules' run caches are per call, but packs compile lazily: one at a time
            if m is None:
                m = Monitor(context=self.context, run_id=run_key(messages), alarm_threshold=self.alarm_threshold)
            try:
                m.add_history(messages[n:])
            except MonitorError:
                if n:  # its state is unchanged: still the conversation's first n messages
                    self.cache.put(hashes[n - 1], m)
                raise
        self._held[m] = hashes[-1] if hashes else b""
        return m

    def _cache_after(self, m: Monitor, message: dict[str, Any], blocked: bool) -> None:
        """Cache ``m`` (it now holds the answer ``message``) as the conversation the client received,
        which its next request extends; not when the answer was replaced (the client never sees it)."""
        held = self._held.pop(m, None)
        if held is not None and self.cache.size and not blocked:
            [after] = message_hashes([message], held)
            self.cache.put(after, m)

    def _add_answer(self, m: Monitor, message: dict[str, Any]) -> list[Record]:
        try:
            return m.add(message)
        except MonitorError:
            self.keep(m)  # unchanged: a retry of the request extends it
            raise

    def keep(self, monitor: Monitor) -> None:
        """Put back in the cache a monitor from :meth:`open` that got no answer (the upstream failed):
        a retry of the same request extends it."""
        key = self._held.get(monitor)
        if key:
            self.cache.put(key, monitor)

    def decide(self, monitor: Monitor | list[Any], message: dict[str, Any]) -> Decision:
        """Check the answer ``message`` (an assistant message) after the conversation held by
        ``monitor`` (:meth:`open`; or the conversation's message list).

        Raises:
            MonitorError: a message cannot be read (names its position).
        """
        m = monitor if isinstance(monitor, Monitor) else self.open(monitor)
        key = m.run_id
        step = len(m.steps)
        with self._lock:
            new = self._add_answer(m, message)
            alarm = self.stop_on_alarm and m.check_alarm()
        findings = [_finding(r) for r in new if r.verdict != "pass"]
        if self.tool_names is not None:
            for c in message.get("tool_calls") or ():
                name = (c.get("function") or {}).get("name") if isinstance(c, dict) else None
                if name not in self.tool_names:
                    findings.append({"step": step, "rule": "guard.unknown-tool", "verdict": "fail", "severity": "error",
                                     "message": f"tool {name!r} is not one of the declared tools "
                                                f"({', '.join(sorted(self.tool_names))})",
                                     "evidence": [{"address": f"steps.{step}", "value": name, "note": "call"}]})
        findings += self.argument_findings(m.steps[step:])
        if alarm:
            d = m.diagnosis()
            findings.append({"step": step, "rule": "guard.alarm", "verdict": "fail", "severity": "critical",
                             "message": f"the run is stopped: the judge's estimate rests on a finding at step "
                                        f"{d.critical_step if d else '?'} ({d.category if d else '?'}, confidence "
                                        f"{d.confidence if d else 0})",
                             "evidence": [{"address": f"steps.{d.critical_step}", "value": d.rationale[:300],
                                           "note": "diagnosis"}] if d else []})
        blocking = [f for f in findings if f["verdict"] == "fail" and severity_rank(f["severity"]) >= self.floor]
        if not blocking:
            verdict = "allow" if not findings else "annotate"
        else:
            verdict = "block" if self.mode == "block" else "annotate"
        self._cache_after(m, message, blocked=verdict == "block")
        dec = Decision(verdict, key, step, findings, alarm)
        self.record(dec)
        return dec

    def argument_findings(self, steps: list[Any]) -> list[dict[str, Any]]:
        """``guard.tool-arguments`` failures: the calls of ``steps`` (the answer's) whose arguments
        break their tool's ``--tools`` schema (:func:`~trajaudit.engine.packs.tool_rules.argument_problems`),
        checked before the call runs. The ``tools.*`` rules test the same, but excuse a violation the
        tool tolerated or a later retry corrected, so they are decided only when the run ends."""
        out: list[dict[str, Any]] = []
        for s in steps:
            for j, c in enumerate(s.tool_calls):
                entry = self.schemas.get(c.name)
                problems = argument_problems(entry, c.arguments, c.arguments_error) if entry is not None else []
                if problems:
                    value = c.raw_arguments if c.raw_arguments is not None else c.arguments
                    out.append({"step": s.index, "rule": "guard.tool-arguments", "verdict": "fail", "severity": "error",
                                "message": f"{c.name}: the arguments break the declared schema: " + "; ".join(problems),
                                "evidence": [{"address": f"steps.{s.index}.tool_calls.{j}", "value": value,
                                              "note": "call"}]})
        return out

    def record(self, dec: Decision) -> None:
        """Write the decision: one JSONL line per finding (or one ``allow`` line without any)."""
        rows = [{"run_key": dec.run_key, "step": f["step"], "rule": f["rule"], "verdict": f["verdict"],
                 "severity": f["severity"], "message": f["message"], "evidence": f["evidence"],
                 "decision": dec.decision, "time": round(time.time(), 3)} for f in dec.findings] or \
               [{"run_key": dec.run_key, "step": dec.step, "rule": None, "verdict": "pass", "decision": dec.decision,
                 "time": round(time.time(), 3)}]
        for row in rows:
            log.info("guard %s", json.dumps(row, ensure_ascii=False, default=str))
        if self.log_path is not None:
            try:
                with self._lock, self.log_path.open("a", encoding="utf-8") as f:
                    for row in rows:
                        f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            except OSError as e:  # the answer is still served: a full disk must not turn every request into a 500
                log.error("guard: cannot write the decision log %s: %s", self.log_path, e)

    def header(self, dec: Decision) -> str:
        """The ``x-trajaudit-findings`` header value (JSON, ASCII, cut to a few kB)."""
        rows = [{k: f[k] for k in ("step", "rule", "verdict", "severity", "message")} for f in dec.findings]
        text = json.dumps(rows, ensure_ascii=True)
        while len(text) > MAX_HEADER and rows:
            rows = rows[:-1]
            text = json.dumps(rows + [{"more": len(dec.findings) - len(rows)}], ensure_ascii=True)
        return text


def _error(status: int, message: str, kind: str = "invalid_request_error", **extra: Any) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": "trajaudit_guard"}, **extra},
                        status_code=status)


def _blocked_completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    out = dict(body)
    out["choices"] = [{"index": 0, "finish_reason": "stop", "logprobs": None,
                       "message": {"role": "assistant", "content": text, "refusal": None}}]
    return out


def _sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def build_app(guard: Guard, upstream: str, *, timeout: float = 600.0, transport: Any = None) -> Any:
    """The ASGI app (starlette) proxying ``POST /v1/chat/completions`` (and ``/chat/completions``) to
    ``upstream`` (a base URL ending in ``/v1`` or not), other paths forwarded unchanged.

    Raises:
        GuardError: starlette or httpx is not installed (``pip install 'trajaudit[guard]'``), or
            ``upstream`` is not an http(s) URL (:func:`check_upstream`).
    """
    check_upstream(upstream)
    try:
        import httpx
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError as e:  # pragma: no cover - the extra is installed in dev/CI
        raise GuardError(f"trajaudit guard needs the extra 'trajaudit[guard]' (starlette, uvicorn, httpx): {e}") from None

    base = upstream.rstrip("/")
    client = httpx.AsyncClient(timeout=timeout, transport=transport)

    def _forward_headers(request: Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k.lower() not in _HOP and k.lower() != "accept-encoding"}

    def _back_headers(resp: Any) -> dict[str, str]:
        return {k: v for k, v in resp.headers.items() if k.lower() not in _HOP}

    async def chat(request: Request) -> Any:
        raw = await request.body()
        try:
            body = safe_json.loads(raw)  # within the batch loader's limits (nesting, integer digits, length)
        except json.JSONDecodeError as e:
            return _error(400, f"request body is not valid JSON: {e}")
        except (ValueError, UnicodeDecodeError) as e:  # safe_json's LimitExceeded, bytes that are not text
            return _error(400, f"request body not read: {e}")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "request body must be a JSON object with a 'messages' list")
        messages = body["messages"]
        try:
            monitor = await run_in_threadpool(guard.open, messages)
        except MonitorError as e:
            return _error(400, f"cannot read the conversation: {e}")
        stream = body.get("stream") is True
        url = f"{base}/chat/completions"
        headers = _forward_headers(request)
        try:
            if stream:
                req = client.build_request("POST", url, content=raw, headers=headers)
                resp = await client.send(req, stream=True)
                data = await resp.aread()
                await resp.aclose()
            else:
                resp = await client.post(url, content=raw, headers=headers)
                data = resp.content
        except httpx.TimeoutException:
            guard.keep(monitor)
            return _error(504, f"the upstream {base} did not answer within {timeout:g} s", "upstream_timeout")
        except httpx.HTTPError as e:
            guard.keep(monitor)
            return _error(502, f"the upstream {base} could not be reached: {type(e).__name__}: {e}", "upstream_error")
        if resp.status_code != 200:  # 429, 5xx, 4xx: passed through unchanged
            guard.keep(monitor)
            return Response(data, status_code=resp.status_code, headers=_back_headers(resp))
        try:
            if stream:
                chunks, _ = parse_sse(data.decode("utf-8"))
                completion = assemble_stream(chunks)
            else:
                completion = safe_json.loads(data)
            message = _completion_message(completion)
        except (ValueError, UnicodeDecodeError) as e:
            guard.keep(monitor)
            return _error(502, f"{e}" if "chat completion" in str(e) else
                          f"the upstream answer is not a chat completion: {e}", "upstream_error")
        try:
            dec = await run_in_threadpool(guard.decide, monitor, message)
        except MonitorError as e:
            return _error(502, f"cannot read the upstream answer: {e}", "upstream_error")
        extra = {"x-trajaudit-decision": dec.decision, "x-trajaudit-run": dec.run_key}
        if dec.findings:
            extra["x-trajaudit-findings"] = guard.header(dec)
        if dec.decision == "block":
            if guard.block_status is not None:
                return JSONResponse({"error": {"message": dec.block_text(), "type": "trajaudit_violation",
                                               "code": "trajaudit_guard"}, "violations": dec.violations,
                                     "run_key": dec.run_key}, status_code=guard.block_status, headers=extra)
            text = dec.block_text()
            if stream:
                first = chunks[0] if chunks else {}
                meta = {"id": first.get("id"), "object": "chat.completion.chunk", "created": first.get("created"),
                        "model": first.get("model")}
                out = [{**meta, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                             "finish_reason": None}]},
                       {**meta, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
                return Response(_sse(out), media_type="text/event-stream", headers=extra)
            return JSONResponse(_blocked_completion(completion, text), headers=extra)
        back = _back_headers(resp)
        back.update(extra)
        return Response(data, status_code=200, headers=back)

    async def passthrough(request: Request) -> Any:
        path = request.url.path
        sub = path[3:] if path.startswith("/v1/") and base.endswith("/v1") else path
        try:
            resp = await client.request(request.method, base + sub, content=await request.body(),
                                        headers=_forward_headers(request), params=request.query_params)
        except httpx.TimeoutException:
            return _error(504, f"the upstream {base} did not answer within {timeout:g} s", "upstream_timeout")
        except httpx.HTTPError as e:
            return _error(502, f"the upstream {base} could not be reached: {e}", "upstream_error")
        return Response(resp.content, status_code=resp.status_code, headers=_back_headers(resp))

    async def health(request: Request) -> Any:
        return JSONResponse({"status": "ok", "mode": guard.mode})

    routes = [Route("/v1/chat/completions", chat, methods=["POST"]), Route("/chat/completions", chat, methods=["POST"]),
              Route("/trajaudit/health", health), Route("/{path:path}", passthrough, methods=["GET", "POST"])]
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        await client.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


def serve(app: Any, host: str = "127.0.0.1", port: int = 8787) -> None:
    """Serve ``app`` with uvicorn until interrupted."""
    try:
        import uvicorn
    except ImportError as e:  # pragma: no cover
        raise GuardError(f"trajaudit guard needs the extra 'trajaudit[guard]' (uvicorn): {e}") from None
    uvicorn.run(app, host=host, port=port, log_level="warning")
