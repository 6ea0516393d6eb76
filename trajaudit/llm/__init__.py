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

The names and the submodules (``trajaudit.llm.client`` …) load on first use (PEP 562
``__getattr__``, as ``trajaudit.audit`` does): code that may need a client — the audit pipeline, the
CLI's option handling, repair writing — refers to ``trajaudit.llm.LLMClient``, so an offline audit
imports ``trajaudit.llm.config`` at most, not the client, its cache (``sqlite3``), thread pool,
prompts and answer parsing (≈ 0.13G instructions of a fresh ``trajaudit audit`` run from source).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajaudit.lazy_names import lazy_names

if TYPE_CHECKING:
    from trajaudit.llm import answers, cache, client, config, fitting, prompting, usage  # noqa: F401
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

#: Public names loaded on first use: name -> defining submodule.
_LAZY = {"EvidenceView": "fitting", "LLMClient": "client", "LLMConfig": "config", "ResponseCache": "cache",
         "Usage": "usage", "build_config": "config", "extract_evidence": "prompting", "fit_steps": "fitting",
         "load_config_file": "config", "load_prompt": "prompting", "quote_evidence": "prompting",
         "render_prompt": "prompting", "request_key": "cache", "tracking": "usage"}
#: Submodules reachable as attributes before they are imported (``trajaudit.llm.fitting.cut_text``).
_SUBMODULES = frozenset({"answers", "cache", "client", "config", "fitting", "prompting", "usage"})


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY, _SUBMODULES)
