"""How a diagnosis is produced: the Strategy protocol, the typed AuditContext and EvidenceBundle, the
registry, the baselines, the offline judge, and (``llm/``, loaded on first use) the LLM strategies."""

from trajaudit.engine.strategies.base import INCONCLUSIVE, Strategy
from trajaudit.engine.strategies.baselines import FirstDecisionStep, LastDecisionStep, RandomDecisionStep
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.strategies.offline_judge import FirstViolation, OfflineJudge
from trajaudit.engine.strategies.registry import LLM_STRATEGIES, default_strategies

__all__ = ["INCONCLUSIVE", "LLM_STRATEGIES", "AuditContext", "EvidenceBundle", "FirstDecisionStep", "FirstViolation",
           "LastDecisionStep", "OfflineJudge", "RandomDecisionStep", "Strategy", "default_strategies"]
