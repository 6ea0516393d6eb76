"""Trace adapters: one registered unit per input format, with auto-detection.

Use :func:`default_adapters` for the registry of built-in formats, in detection order.
"""

from __future__ import annotations

from trajaudit.engine.trace.adapters.agentrx_steps import AgentRxStepsAdapter
from trajaudit.engine.trace.adapters.anthropic import AnthropicAdapter
from trajaudit.engine.trace.adapters.base import Adapter, LoadOptions, Sniff
from trajaudit.engine.trace.adapters.inspect_log import InspectAdapter
from trajaudit.engine.trace.adapters.ir import IRAdapter
from trajaudit.engine.trace.adapters.langchain import LangChainAdapter
from trajaudit.engine.trace.adapters.langfuse import LangfuseAdapter
from trajaudit.engine.trace.adapters.langsmith import LangSmithAdapter
from trajaudit.engine.trace.adapters.mapping import MappingAdapter
from trajaudit.engine.trace.adapters.openai_chat import OpenAIChatAdapter
from trajaudit.engine.trace.adapters.openai_responses import OpenAIResponsesAdapter
from trajaudit.engine.trace.adapters.openinference import OpenInferenceAdapter
from trajaudit.engine.trace.adapters.otel import OTelAdapter
from trajaudit.engine.trace.adapters.tau import TauAdapter
from trajaudit.engine.trace.adapters.who_and_when import MagenticAdapter, WhoAndWhenAdapter
from trajaudit.registry import Registry


def default_adapters() -> Registry[Adapter]:
    """A fresh registry of the built-in adapters, in auto-detection order (most specific first).

    The dialects read as OpenAI messages (``anthropic``, ``openai_responses``, ``langchain``) come
    before ``openai``: Anthropic messages have OpenAI roles, so it matches only on positive evidence
    (a tool_use/tool_result/thinking block, a top-level ``system``); the other two need their own
    ``type`` fields, which plain OpenAI messages never have. ``agentrx_steps`` (AgentRx step records)
    comes after them: no other format has its ``steps`` of ``substeps`` or ``trajectory_id`` beside ``steps``.
    The trace formats come last (``openinference`` and ``langfuse`` before ``otel``: all three read
    OTLP/JSON, OpenInference when a span carries ``openinference.span.kind``, Langfuse when one carries
    ``langfuse.observation.type``); each needs keys no chat format has (``resourceSpans``,
    a ``context`` with ``trace_id``, ``run_type``, typed ``observations``, Inspect's ``eval`` beside
    ``samples``), so they never take another format's file (``tests/test_trace_formats.py``).
    """
    reg: Registry[Adapter] = Registry("format")
    for a in (IRAdapter(), TauAdapter(), WhoAndWhenAdapter(), AnthropicAdapter(), OpenAIResponsesAdapter(),
              LangChainAdapter(), OpenAIChatAdapter(), MagenticAdapter(), AgentRxStepsAdapter(),
              OpenInferenceAdapter(), LangfuseAdapter(), OTelAdapter(), LangSmithAdapter(), InspectAdapter()):
        reg.register(a.name, a)
    return reg


__all__ = ["Adapter", "LoadOptions", "MappingAdapter", "Sniff", "default_adapters"]
