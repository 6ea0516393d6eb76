"""Trace adapters: one registered unit per input format, with auto-detection.

Use :func:`default_adapters` for the registry of built-in formats, in detection order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from trajaudit.engine.trace.adapters.base import Adapter, LoadOptions, Sniff
from trajaudit.engine.trace.adapters.mapping import MappingAdapter
from trajaudit.registry import Registry

#: The built-in formats in auto-detection order: registry name -> ``(module, class name)`` under
#: ``trajaudit.engine.trace.adapters``. The dialects read as OpenAI messages (``anthropic``,
#: ``openai_responses``, ``langchain``) come before ``openai``: Anthropic messages have OpenAI roles,
#: so it matches only on positive evidence (a tool_use/tool_result/thinking block, a top-level
#: ``system``); the other two need their own ``type`` fields, which plain OpenAI messages never have.
#: ``agentrx_steps`` (AgentRx step records) comes after them: no other format has its ``steps`` of
#: ``substeps`` or ``trajectory_id`` beside ``steps``. The trace formats come last (``openinference``
#: and ``langfuse`` before ``otel``: all three read OTLP/JSON, OpenInference when a span carries
#: ``openinference.span.kind``, Langfuse when one carries ``langfuse.observation.type``); each needs
#: keys no chat format has (``resourceSpans``, a ``context`` with ``trace_id``, ``run_type``, typed
#: ``observations``, Inspect's ``eval`` beside ``samples``), so they never take another format's file
#: (``tests/test_trace_formats.py``).
BUILTIN_ADAPTERS: dict[str, tuple[str, str]] = {
    "ir": ("ir", "IRAdapter"), "tau": ("tau", "TauAdapter"), "who_and_when": ("who_and_when", "WhoAndWhenAdapter"),
    "anthropic": ("anthropic", "AnthropicAdapter"), "openai_responses": ("openai_responses", "OpenAIResponsesAdapter"),
    "langchain": ("langchain", "LangChainAdapter"), "openai": ("openai_chat", "OpenAIChatAdapter"),
    "magentic": ("who_and_when", "MagenticAdapter"), "agentrx_steps": ("agentrx_steps", "AgentRxStepsAdapter"),
    "openinference": ("openinference", "OpenInferenceAdapter"), "langfuse": ("langfuse", "LangfuseAdapter"),
    "otel": ("otel", "OTelAdapter"), "langsmith": ("langsmith", "LangSmithAdapter"),
    "inspect": ("inspect_log", "InspectAdapter"),
}


def _builtin(module: str, class_name: str) -> Callable[[], Adapter]:
    """A factory building the adapter from its module, imported by name on the first lookup (the
    registry's lazy entry, as for the LLM strategies): detection builds the adapters in order and
    stops at the first that matches, so a tau-retail file imports the ``ir`` and ``tau`` adapters only
    — not the span formats' code, whose import (and, run from source, compile) was ≈ 0.2G instructions
    of a fresh ``trajaudit audit``."""
    def build() -> Adapter:
        cls = getattr(importlib.import_module(f"trajaudit.engine.trace.adapters.{module}"), class_name)
        return cls()  # type: ignore[no-any-return]
    return build


def default_adapters() -> Registry[Adapter]:
    """A fresh registry of the built-in adapters (:data:`BUILTIN_ADAPTERS`), in auto-detection order
    (most specific first); each is built (its module imported) on its first lookup."""
    reg: Registry[Adapter] = Registry("format")
    for name, (module, class_name) in BUILTIN_ADAPTERS.items():
        reg.register_lazy(name, _builtin(module, class_name))
    return reg


__all__ = ["BUILTIN_ADAPTERS", "Adapter", "LoadOptions", "MappingAdapter", "Sniff", "default_adapters"]
