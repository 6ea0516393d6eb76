"""LLM audit strategies (need an LLM client in ``AuditContext.llm``).

The Who&When baselines (Zhang et al., ICML 2025, §4; SearchAuditor seed 000 §5.1):
``all-at-once``, ``step-by-step``, ``binary-search``; AgentRx (Barke et al., 2026, §3): ``agentrx``;
the staged strategies ``searchauditor`` (seed 000 §4), ``drift`` (seed 001) and ``hybrid`` (offline
evidence + one LLM judge call).
Importing this package does not import ``openai`` (the client imports it when constructed).
``trajaudit.engine.strategies.registry.default_strategies`` registers them by name (``LLM_STRATEGIES``) and
imports a strategy's module on the first lookup of it.
"""

from __future__ import annotations

from trajaudit.engine.strategies.llm.agentrx import AgentRx
from trajaudit.engine.strategies.llm.all_at_once import AllAtOnce
from trajaudit.engine.strategies.llm.binary_search import BinarySearch
from trajaudit.engine.strategies.llm.drift import Drift, DriftSettings
from trajaudit.engine.strategies.llm.hybrid import Hybrid, HybridSettings
from trajaudit.engine.strategies.llm.searchauditor import SearchAuditor, SearchAuditorSettings
from trajaudit.engine.strategies.llm.step_by_step import StepByStep

__all__ = [
    "AgentRx",
    "AllAtOnce",
    "BinarySearch",
    "Drift",
    "DriftSettings",
    "Hybrid",
    "HybridSettings",
    "SearchAuditor",
    "SearchAuditorSettings",
    "StepByStep",
]
