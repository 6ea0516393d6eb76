"""The built-in adapters are registered lazily (``BUILTIN_ADAPTERS``): the same adapters in the same
order as the eager registry built them, each module imported only when detection reaches it, and the
span formats' shape tests (``span_shapes``) equal to what their adapters use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trajaudit.engine.trace.adapters import (
    BUILTIN_ADAPTERS,
    default_adapters,
    langsmith,
    openinference,
    otel,
    span_shapes,
    spans,
)
from trajaudit.engine.trace.adapters.agentrx_steps import AgentRxStepsAdapter
from trajaudit.engine.trace.adapters.anthropic import AnthropicAdapter
from trajaudit.engine.trace.adapters.inspect_log import InspectAdapter
from trajaudit.engine.trace.adapters.ir import IRAdapter
from trajaudit.engine.trace.adapters.langchain import LangChainAdapter
from trajaudit.engine.trace.adapters.langfuse import LangfuseAdapter
from trajaudit.engine.trace.adapters.langsmith import LangSmithAdapter
from trajaudit.engine.trace.adapters.openai_chat import OpenAIChatAdapter
from trajaudit.engine.trace.adapters.openai_responses import OpenAIResponsesAdapter
from trajaudit.engine.trace.adapters.openinference import OpenInferenceAdapter
from trajaudit.engine.trace.adapters.otel import OTelAdapter
from trajaudit.engine.trace.adapters.tau import TauAdapter
from trajaudit.engine.trace.adapters.who_and_when import MagenticAdapter, WhoAndWhenAdapter

ROOT = Path(__file__).resolve().parents[3]

#: the registry as default_adapters built it eagerly before (the reference order)
EAGER = (IRAdapter, TauAdapter, WhoAndWhenAdapter, AnthropicAdapter, OpenAIResponsesAdapter, LangChainAdapter,
         OpenAIChatAdapter, MagenticAdapter, AgentRxStepsAdapter, OpenInferenceAdapter, LangfuseAdapter, OTelAdapter,
         LangSmithAdapter, InspectAdapter)


def test_lazy_registry_builds_the_eager_one():
    reg = default_adapters()
    assert list(reg) == [cls().name for cls in EAGER] == list(BUILTIN_ADAPTERS)
    assert [type(a) for _, a in reg.items()] == list(EAGER)


def test_span_shape_tests_are_the_adapters_own():
    assert otel.is_span_document is span_shapes.is_span_document
    assert openinference.is_phoenix_span is span_shapes.is_phoenix_span
    assert openinference.KIND == span_shapes.KIND == "openinference.span.kind"
    assert langsmith.is_run is span_shapes.is_langsmith_run and langsmith.RUN_TYPES is span_shapes.RUN_TYPES
    assert spans.as_list is span_shapes.as_list


def test_loading_a_file_imports_only_the_adapters_detection_tried():
    code = ("import sys; from trajaudit.engine.trace.loader import load_path; "
            "r = load_path('tests/data/dialects/anthropic_cancel.json'); "
            "print(r.trajectories[0].source.format, sorted(m.rsplit('.', 1)[1] for m in sys.modules "
            "if m.startswith('trajaudit.engine.trace.adapters.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    fmt, mods = out.split(" ", 1)
    assert fmt == "anthropic"
    # ir, tau, who_and_when tried before anthropic (which imports openai_chat and speakers); no span format
    for name in ("ir", "tau", "who_and_when", "anthropic", "openai_chat"):
        assert f"'{name}'" in mods, mods
    for name in ("otel", "spans", "langsmith", "langfuse", "openinference", "inspect_log", "agentrx_steps",
                 "openai_responses", "langchain"):
        assert f"'{name}'" not in mods, mods
