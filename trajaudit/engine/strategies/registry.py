"""The strategy registry: every built-in strategy by name (offline judges, baselines, LLM strategies).

The LLM strategies are registered lazily by module path (:data:`LLM_STRATEGIES`): their modules
(prompts, views, the LLM client's module — not ``openai``, which only constructing an
``LLMClient`` imports) load on the first lookup of one of them, so an offline audit, and importing
``trajaudit.engine``, never load them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from trajaudit.engine.strategies.base import Strategy
from trajaudit.engine.strategies.baselines import FirstDecisionStep, LastDecisionStep, RandomDecisionStep
from trajaudit.engine.strategies.offline_judge import FirstViolation, OfflineJudge
from trajaudit.registry import Registry

__all__ = ["LLM_STRATEGIES", "default_strategies"]

#: The LLM strategies: registry name -> ``(module, class name)`` under ``trajaudit.engine.strategies.llm``.
LLM_STRATEGIES: dict[str, tuple[str, str]] = {
    "all-at-once": ("all_at_once", "AllAtOnce"), "step-by-step": ("step_by_step", "StepByStep"),
    "binary-search": ("binary_search", "BinarySearch"), "agentrx": ("agentrx", "AgentRx"),
    "searchauditor": ("searchauditor", "SearchAuditor"), "drift": ("drift", "Drift"), "hybrid": ("hybrid", "Hybrid"),
}


def _llm_strategy(module: str, class_name: str) -> Callable[[], Strategy]:
    """A factory building the strategy from its module, imported by name on the first lookup (the
    registry's lazy entry, like a plugin's entry point: nothing is imported before it is used)."""
    def build() -> Strategy:
        cls = getattr(importlib.import_module(f"trajaudit.engine.strategies.llm.{module}"), class_name)
        return cls()
    return build


def default_strategies() -> Registry[Strategy]:
    """A fresh registry of the built-in strategies: offline judges, baselines, LLM strategies (lazy)."""
    reg: Registry[Strategy] = Registry("strategy")
    for s in (OfflineJudge(), FirstDecisionStep(), LastDecisionStep(), RandomDecisionStep(), FirstViolation()):
        reg.register(s.name, s)
    for name, (module, class_name) in LLM_STRATEGIES.items():
        reg.register_lazy(name, _llm_strategy(module, class_name))
    return reg
