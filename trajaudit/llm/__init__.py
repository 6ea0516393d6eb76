"""The LLM layer: the only package that imports ``openai`` (lazily, when a client is built).

Plumbing only — it imports nothing of ``trajaudit.engine``: the features that use a model live with
their concept (strategies in ``engine/strategies/llm/``, rule synthesis in ``engine/packs/``, the
semantic oracle ``LLMSemanticOracle`` in ``checkers/semantic_llm.py``, repair writing in
``engine/run/repair_writer.py``).

Public API::

    LLMConfig, build_config, load_config_file        # configuration (explicit, frozen)
    LLMClient(config).chat_json / chat_text / map / usage / ping
    tracking()                                       # per-batch usage counters
    render_prompt(name, **data) -> list[dict]        # versioned prompt files
    quote_evidence(data, label) / extract_evidence   # trace content as delimited data
    fit_steps(...)                                   # context budget: cuts reported, never silent
"""

from __future__ import annotations

from trajaudit.llm.cache import ResponseCache, request_key
from trajaudit.llm.client import LLMClient
from trajaudit.llm.config import LLMConfig, build_config, load_config_file
from trajaudit.llm.fitting import EvidenceView, fit_steps
from trajaudit.llm.prompting import extract_evidence, load_prompt, quote_evidence, render_prompt
from trajaudit.llm.usage import Usage, tracking

__all__ = [
    "EvidenceView",
    "LLMClient",
    "LLMConfig",
    "ResponseCache",
    "Usage",
    "build_config",
    "extract_evidence",
    "fit_steps",
    "load_config_file",
    "load_prompt",
    "quote_evidence",
    "render_prompt",
    "request_key",
    "tracking",
]
