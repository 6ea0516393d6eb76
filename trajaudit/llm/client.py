"""The LLM client: chat completions over the ``openai`` package, validated, cached and counted.

:class:`LLMClient` is the only place trajaudit talks to a model. It works with any
OpenAI-compatible endpoint (hosted APIs, vLLM, llama.cpp's ``llama-server``, Ollama):

- ``chat_json`` asks for structured output (``response_format`` ``json_schema``, or ``json_object``
  with the schema in the prompt), validates the answer with jsonschema, and on invalid JSON or a
  schema violation re-asks ONCE with the validation error quoted back; then raises ``LLMError``.
- timeouts and retries on 408/409/429/5xx/connection errors are the ``openai`` client's own
  (``max_retries``, exponential backoff honouring ``Retry-After``), not a loop here. A connection
  that cannot be made at all after them raises ``LLMUnreachableError`` (a batch stops on it).
- answers are cached on disk (:mod:`trajaudit.llm.cache`); usage is counted (:mod:`trajaudit.llm.usage`).
- a refusal (``message.refusal``) raises ``LLMError`` with the refusal text.

Model output is DATA: it is parsed as JSON and validated, never evaluated or imported.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from trajaudit.errors import ConfigError, LLMError, LLMUnreachableError, TrajauditError
from trajaudit.llm.answers import NotACompletion, clip_for_reask, completion_parts, parse_json_answer
from trajaudit.llm.cache import ResponseCache, request_key
from trajaudit.llm.config import LLMConfig
from trajaudit.llm.prompting import render_prompt
from trajaudit.llm.usage import Usage, record

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

def import_openai() -> Any:
    """Import the ``openai`` package on first use.

    Raises:
        ConfigError: it is not installed (with the ``pip install openai`` fix).
    """
    try:
        import openai
    except ImportError:
        raise ConfigError("the LLM layer needs the 'openai' package: pip install openai "
                          "(or pip install trajaudit, which depends on it)") from None
    return openai


def messages_chars(messages: Iterable[dict[str, Any]]) -> int:
    """Total characters of the messages' text content."""
    return sum(len(m.get("content") or "") for m in messages)


class LLMClient:
    """A configured, caching, counting chat-completions client.

    Args:
        config: the endpoint and parameters (:class:`LLMConfig`).
        cache: a :class:`ResponseCache` to use; default: one at ``config.cache_path`` (none if unset).

    Attributes:
        config: the configuration.
        usage: :class:`Usage` totals over the client's life; per-batch counts via
            :func:`trajaudit.llm.usage.tracking`.

    Raises:
        ConfigError: ``openai`` is not installed, or the cache cannot be opened.
    """

    def __init__(self, config: LLMConfig, *, cache: ResponseCache | None = None) -> None:
        self.config = config
        self._openai = import_openai()
        self._api = self._openai.OpenAI(base_url=config.base_url, api_key=config.api_key or "not-needed",
                                        timeout=config.timeout, max_retries=config.max_retries)
        self.cache = cache if cache is not None else (ResponseCache(config.cache_path) if config.cache_path else None)
        self.usage = Usage()
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._shared: AbstractContextManager[Any] = nullcontext()
        self._mode = "json_object" if config.structured == "json_object" else "json_schema"

    # -- public API -------------------------------------------------------------------------------

    def share_limit(self, limiter: AbstractContextManager[Any]) -> None:
        """Also hold ``limiter`` during every request (after this client's own ``concurrency`` slot):
        a limit shared with other processes, e.g. a ``distributed.Semaphore`` that every worker of a
        cluster holds, so the endpoint sees at most its ``max_leases`` requests at once
        (:mod:`trajaudit.engine.run.cluster`)."""
        self._shared = limiter

    @property
    def structured_mode(self) -> str:
        """The structured-output mode in use: ``json_schema`` or ``json_object`` (after a fallback)."""
        return self._mode

    def chat_json(self, messages: list[dict[str, Any]], schema: dict[str, Any], *, name: str,
                  use_cache: bool = True) -> dict[str, Any]:
        """Ask for one JSON object valid against ``schema``.

        Args:
            messages: chat messages ``[{"role", "content"}]`` (see :func:`~trajaudit.llm.prompting.render_prompt`).
            schema: a JSON Schema (draft 2020-12) the answer must satisfy.
            name: a short label for logs, errors and the ``json_schema`` name (e.g. ``"all-at-once"``).
            use_cache: read and write the disk cache (default true).

        Returns:
            The validated JSON object (data; never executed).

        Raises:
            LLMError: the request failed after the client's retries, the model refused, or the answer
                was invalid twice (the first error is quoted back once); LLMUnreachableError (a
                subclass) when no connection to the endpoint could be made.
        """
        import jsonschema  # where an answer is validated (~80 ms of imports an offline audit skips)

        try:
            validator = jsonschema.Draft202012Validator(schema)
            validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            raise LLMError(f"{name}: the answer schema itself is invalid: {e.message}") from None
        key = request_key(self.config.model, messages, self._params(), schema)
        cached = self._cache_get(key, use_cache)
        if cached is not None:
            value, error = parse_json_answer(cached.get("content"), validator)
            if error is None:
                self._hit(cached)
                return value  # type: ignore[return-value]
        convo = list(messages) if self._mode == "json_schema" else self._with_schema_hint(messages, schema)
        chars = {"input": 0, "output": 0}
        content = self._call_structured(convo, schema, name, chars)
        value, error = parse_json_answer(content, validator)
        if error is not None:
            log.info("%s: invalid answer, asking once more: %s", name, error)
            record(self.usage, schema_retries=1)
            said = clip_for_reask(content or "", 8 * self.config.max_tokens)
            convo = convo + [{"role": "assistant", "content": said}] + \
                [m for m in render_prompt("repair_json", error=error) if m["role"] == "user"]
            content = self._call_structured(convo, schema, name, chars)
            value, error = parse_json_answer(content, validator)
            if error is not None:
                record(self.usage, requests=1, failures=1)
                raise LLMError(f"{name}: the model's answer was still invalid after one retry: {error}")
        record(self.usage, requests=1)
        self._cache_put(key, {"content": content, "input_chars": chars["input"], "output_chars": chars["output"]},
                        name, use_cache)
        return value  # type: ignore[return-value]

    def chat_text(self, messages: list[dict[str, Any]], *, name: str, use_cache: bool = True) -> str:
        """Ask for a free-text answer.

        Returns:
            The answer text (non-empty).

        Raises:
            LLMError: the request failed, the model refused, or the answer was empty;
                LLMUnreachableError when no connection to the endpoint could be made.
        """
        key = request_key(self.config.model, messages, self._params(), None)
        cached = self._cache_get(key, use_cache)
        if cached is not None and cached.get("content"):
            self._hit(cached)
            return str(cached["content"])
        chars = {"input": 0, "output": 0}
        content = self._call(list(messages), name, None, chars)
        if not content:
            record(self.usage, requests=1, failures=1)
            raise LLMError(f"{name}: the model returned an empty answer")
        record(self.usage, requests=1)
        self._cache_put(key, {"content": content, "input_chars": chars["input"], "output_chars": chars["output"]},
                        name, use_cache)
        return content

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, return_exceptions: bool = False) -> list[R | Exception]:
        """Run ``fn`` over ``items`` with at most ``config.concurrency`` in flight; results in input order.

        Usage trackers opened by the caller (:func:`~trajaudit.llm.usage.tracking`) see the calls made
        in the worker threads.

        Args:
            return_exceptions: put a ``TrajauditError`` raised for one item in its result slot instead
                of raising it (a bad item in a batch is reported, the batch goes on); an
                :class:`~trajaudit.errors.LLMUnreachableError` is raised all the same.
        """
        def run(item: T) -> R | Exception:
            try:
                return fn(item)
            except TrajauditError as e:
                if return_exceptions and not isinstance(e, LLMUnreachableError):
                    return e
                raise

        items = list(items)
        with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="trajaudit-llm") as pool:
            futures = [pool.submit(contextvars.copy_context().run, run, it) for it in items]
            return [f.result() for f in futures]

    def list_models(self) -> list[str]:
        """The model ids the endpoint serves (``GET /models``).

        Raises:
            LLMError: the endpoint cannot be reached or answered with an error.
        """
        try:
            return [m.id for m in self._api.models.list()]
        except self._openai.OpenAIError as e:
            raise self._error(e, "list models") from None

    def ping(self) -> dict[str, Any]:
        """Check the endpoint: list its models and make one tiny uncached chat call.

        Returns:
            ``{"base_url", "model", "served_models", "reply", "latency_s"}`` (latency of the chat call).

        Raises:
            LLMError: the endpoint is down or the call failed.
        """
        served = self.list_models()
        t0 = time.perf_counter()
        reply = self.chat_text(render_prompt("ping"), name="ping", use_cache=False)
        return {"base_url": self.config.base_url, "model": self.config.model, "served_models": served,
                "reply": reply.strip()[:200], "latency_s": round(time.perf_counter() - t0, 3)}

    def close(self) -> None:
        """Close the HTTP client and the cache."""
        self._api.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------------

    def _params(self) -> dict[str, Any]:
        return {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens,
                "seed": self.config.seed}

    def _cache_get(self, key: str, use_cache: bool) -> dict[str, Any] | None:
        return self.cache.get(key) if (use_cache and self.cache is not None) else None

    def _cache_put(self, key: str, value: dict[str, Any], name: str, use_cache: bool) -> None:
        if use_cache and self.cache is not None:
            self.cache.put(key, value, name=name, model=self.config.model)

    def _hit(self, cached: dict[str, Any]) -> None:
        record(self.usage, requests=1, cache_hits=1, input_chars=int(cached.get("input_chars", 0)),
               output_chars=int(cached.get("output_chars", 0)))

    def _with_schema_hint(self, messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
        hint = render_prompt("json_mode", schema=json.dumps(schema, ensure_ascii=False))[0]["content"]
        out = [dict(m) for m in messages]
        if out and out[0].get("role") == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{hint}"
        else:
            out.insert(0, {"role": "system", "content": hint})
        return out

    def _call_structured(self, convo: list[dict[str, Any]], schema: dict[str, Any], name: str,
                         chars: dict[str, int]) -> str | None:
        if self._mode == "json_object":
            return self._call(convo, name, {"type": "json_object"}, chars)
        fmt = {"type": "json_schema", "json_schema": {"name": re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "answer",
                                                     "schema": schema, "strict": False}}
        try:
            return self._call(convo, name, fmt, chars)
        except _Unsupported as e:
            if self.config.structured != "auto":
                record(self.usage, requests=1, failures=1)
                raise LLMError(f"{name}: the endpoint rejected response_format json_schema: {e}") from None
            log.warning("%s: endpoint rejected json_schema (%s); using json_object with the schema in the prompt",
                        name, e)
            self._mode = "json_object"
            return self._call(self._with_schema_hint(convo, schema), name, {"type": "json_object"}, chars)

    def _call(self, messages: list[dict[str, Any]], name: str, response_format: dict[str, Any] | None,
              chars: dict[str, int]) -> str | None:
        """One chat-completion call (the openai client retries transport faults itself)."""
        kwargs: dict[str, Any] = {"model": self.config.model, "messages": messages,
                                  "temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if self.config.seed is not None:
            kwargs["seed"] = self.config.seed
        if response_format is not None:
            kwargs["response_format"] = response_format
        in_chars = messages_chars(messages)
        chars["input"] += in_chars
        oa = self._openai
        retries = self.config.max_retries
        for attempt in range(retries + 1):
            with self._slots, self._shared:
                t0 = time.perf_counter()
                try:
                    resp = self._api.chat.completions.create(**kwargs)
                except (oa.BadRequestError, oa.UnprocessableEntityError) as e:
                    record(self.usage, calls=1, input_chars=in_chars, latency_s=time.perf_counter() - t0)
                    if response_format and response_format.get("type") == "json_schema":
                        raise _Unsupported(self._describe(e, name)) from None
                    record(self.usage, requests=1, failures=1)
                    raise LLMError(self._describe(e, name)) from None
                except oa.OpenAIError as e:
                    record(self.usage, calls=1, requests=1, failures=1, input_chars=in_chars,
                           latency_s=time.perf_counter() - t0)
                    raise self._error(e, name) from None
                except ValueError as e:  # JSONDecodeError: a truncated or cut body (a proxy, a crashed worker)
                    fault: str = f"a body that is not JSON ({_short(str(e), 120)})"
                else:
                    try:
                        choice, content, refusal, (tokens_in, tokens_out) = completion_parts(resp)
                        fault = ""
                    except NotACompletion as e:
                        fault = str(e)
                latency = time.perf_counter() - t0
            if not fault:
                break
            # a body that is not a chat completion is an endpoint fault, retried like a 5xx
            record(self.usage, calls=1, input_chars=in_chars, latency_s=latency)
            if attempt < retries:
                log.info("%s: %s answered HTTP 200 with %s; retrying", name, self.config.base_url, fault)
                time.sleep(endpoint_backoff(attempt))
                continue
            record(self.usage, requests=1, failures=1)
            raise LLMError(f"{name}: endpoint error: {self.config.base_url} answered HTTP 200 with {fault} "
                           f"(after {retries} retries); is it the OpenAI-compatible API root (usually ending "
                           "in /v1)?")
        chars["output"] += len(content or "")
        record(self.usage, calls=1, latency_s=latency, input_chars=in_chars, output_chars=len(content or ""),
               input_tokens=tokens_in, output_tokens=tokens_out)
        if choice is None:
            record(self.usage, requests=1, failures=1)
            raise LLMError(f"{name}: the endpoint returned no choices")
        if refusal:
            record(self.usage, requests=1, failures=1)
            raise LLMError(f"{name}: the model refused: {refusal}")
        if getattr(choice, "finish_reason", None) == "length":
            log.warning("%s: the answer hit max_tokens=%d and may be cut off", name, self.config.max_tokens)
        return content

    def _error(self, e: Exception, what: str) -> LLMError:
        """The :class:`LLMError` for a failed request: :class:`LLMUnreachableError` when no connection
        could be made at all (after the openai client's retries), which stops a batch."""
        if _no_connection(e, self._openai):
            return LLMUnreachableError(f"{what}: cannot reach {self.config.base_url} (after "
                                       f"{self.config.max_retries} retries): {_short(str(e.__cause__))}; is an "
                                       "OpenAI-compatible server running there? (`trajaudit llm ping`)")
        return LLMError(self._describe(e, what))

    def _describe(self, e: Exception, what: str) -> str:
        oa = self._openai
        where = self.config.base_url
        if isinstance(e, oa.APITimeoutError):
            return (f"{what}: no answer from {where} within {self.config.timeout:g}s "
                    f"(after {self.config.max_retries} retries)")
        if isinstance(e, oa.APIConnectionError):
            return f"{what}: cannot reach {where} (after {self.config.max_retries} retries): {e}"
        if isinstance(e, oa.APIStatusError):
            body = e.body.get("message") if isinstance(e.body, dict) else None
            return f"{what}: {where} answered HTTP {e.status_code}: {_short(str(body or e.message))}"
        return f"{what}: {type(e).__name__}: {_short(str(e))}"


def _no_connection(e: Exception, oa: Any) -> bool:
    """Whether ``e`` is a connection that could not be made (refused, unknown host, no route): an
    ``APIConnectionError`` (not a timeout) caused by the HTTP library's ``ConnectError``. Matched by
    class name along the cause's MRO, as openai releases bundle different httpx distributions. A
    connection dropped mid-answer, a timeout or an HTTP status is not one."""
    if not isinstance(e, oa.APIConnectionError) or isinstance(e, oa.APITimeoutError):
        return False
    cause = e.__cause__
    return cause is not None and any(c.__name__ == "ConnectError" for c in type(cause).__mro__)


def endpoint_backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt + 1`` of a request whose answer was not a chat
    completion: 0.25 s doubling, at most 8 s (as the ``openai`` client backs off on a 5xx)."""
    return min(8.0, 0.25 * 2 ** attempt)


class _Unsupported(Exception):
    """The endpoint rejected a json_schema request (HTTP 400/422): fall back to json_object."""


def _short(text: str, width: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"
