"""LLM accounting: calls, cache hits, tokens, characters and latency, per client and per batch.

A :class:`Usage` is a thread-safe set of counters. The client adds every request to its own total
(``client.usage``) and to every tracker opened with :func:`tracking` in the current context
(``contextvars``: trackers follow the code that opened them into the client's batch threads).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

_TRACKERS: ContextVar[tuple[Usage, ...]] = ContextVar("trajaudit_llm_trackers", default=())


@dataclass
class Usage:
    """Counters for a run or a batch of LLM requests.

    Attributes:
        requests: logical requests (``chat_json``/``chat_text`` calls), served by the API or the cache.
        calls: HTTP chat-completion calls actually sent (a schema retry is a second call; the
            ``openai`` client's transport retries of one call are not counted separately).
        cache_hits: requests answered from the disk cache (no call).
        schema_retries: calls that re-asked after invalid JSON or a schema violation.
        failures: requests that ended in an ``LLMError``.
        input_tokens, output_tokens: as reported by the API's ``usage`` (0 when it reports none;
            cache hits add nothing: they cost nothing).
        input_chars, output_chars: characters of every prompt sent and answer received for each
            request, including cache hits (a tokenizer-free, reproducible size measure).
        latency_s: wall-clock seconds spent in calls (cache hits excluded).
    """

    requests: int = 0
    calls: int = 0
    cache_hits: int = 0
    schema_retries: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    input_chars: int = 0
    output_chars: int = 0
    latency_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: float) -> None:
        """Add ``counts`` (field name -> increment) atomically. Unknown names raise ``AttributeError``."""
        with self._lock:
            for name, inc in counts.items():
                if name.startswith("_") or not hasattr(self, name):
                    raise AttributeError(f"Usage has no counter {name!r}")
                setattr(self, name, getattr(self, name) + inc)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``Diagnosis.usage`` (latency rounded to milliseconds)."""
        with self._lock:
            return {
                "requests": self.requests, "calls": self.calls, "cache_hits": self.cache_hits,
                "schema_retries": self.schema_retries, "failures": self.failures,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "input_chars": self.input_chars, "output_chars": self.output_chars,
                "latency_s": round(self.latency_s, 3),
            }


def record(total: Usage, **counts: float) -> None:
    """Add ``counts`` to ``total`` and to every tracker active in the current context."""
    total.add(**counts)
    for tracker in _TRACKERS.get():
        tracker.add(**counts)


@contextmanager
def tracking() -> Iterator[Usage]:
    """Count the LLM requests made inside the ``with`` block (this context and its batch threads).

    Example::

        with tracking() as usage:
            client.chat_json(...)
        usage.calls  # requests made inside the block

    Trackers nest: an outer tracker also counts what inner ones count.
    """
    usage = Usage()
    token = _TRACKERS.set(_TRACKERS.get() + (usage,))
    try:
        yield usage
    finally:
        _TRACKERS.reset(token)
