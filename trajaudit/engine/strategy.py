"""Audit strategies: the protocol every judge implements, the audit configuration, and the registry.

A strategy turns one :class:`~trajaudit.engine.ir.Trajectory` into a
:class:`~trajaudit.engine.diagnosis.Diagnosis`. Strategies are registered by name in a
:class:`~trajaudit.registry.Registry` built by :func:`default_strategies` (explicit, no globals).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.ir import Trajectory
from trajaudit.engine.run_budget import DEFAULT_RUN_TIMEOUT
from trajaudit.registry import Registry

INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class AuditConfig:
    """Explicit limits and choices for an audit (no hidden configuration; limits are fields here).

    Attributes:
        taxonomy: taxonomy id the judge labels with.
        seed: seed for randomized strategies (the random baseline).
        rule_budget: maximum evaluation operations per rule per trajectory; hitting it yields
            ``unknown`` records with the reason.
        max_claims_per_step: cap on extracted claims per step (the cap is reported when hit).
        min_violation_severity: violations below this severity are ignored by the offline judge.
        run_timeout: seconds of rule evaluation per run (z3 time included; ``None``: unlimited); when
            used up, the checks left are ``unknown`` and the diagnosis is marked degraded
            (:mod:`trajaudit.engine.run_budget`).
    """

    taxonomy: str = "agentrx"
    seed: int = 0
    rule_budget: int = 200_000
    max_claims_per_step: int = 200
    min_violation_severity: str = "warning"
    run_timeout: float | None = DEFAULT_RUN_TIMEOUT


@dataclass
class AuditContext:
    """What a strategy may use besides the trajectory.

    Attributes:
        config: the :class:`AuditConfig`.
        rules: compiled rules (from the rule engine), possibly empty.
        tools: OpenAI function schemas for the run's tools, or ``None``.
        llm: an LLM client (``trajaudit.llm``) or ``None`` when no endpoint is configured.
        extra: strategy-specific options.
    """

    config: AuditConfig = field(default_factory=AuditConfig)
    rules: list[Any] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    llm: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Strategy(Protocol):
    """How a diagnosis is produced. ``needs_llm`` strategies fail clearly without an LLM client."""

    name: str
    description: str
    needs_llm: bool

    def diagnose(self, trajectory: Trajectory, context: AuditContext) -> Diagnosis: ...


def _diagnosis(t: Trajectory, step: int | None, strategy: str, taxonomy: str, reason: str,
               confidence: float = 0.0) -> Diagnosis:
    agent = t.steps[step].agent if step is not None else None
    cands = (Candidate(step=step, category=INCONCLUSIVE, score=confidence, agent=agent, reason=reason),) \
        if step is not None else ()
    return Diagnosis(trajectory_id=t.id, file=t.source.file, record=t.source.record, critical_step=step,
                     agent=agent, category=INCONCLUSIVE, taxonomy=taxonomy, confidence=confidence,
                     rationale=reason, candidates=cands, strategy=strategy)


class FirstDecisionStep:
    """Baseline: blame the first decision step."""

    name = "first"
    description = "baseline: the first decision step"
    needs_llm = False

    def diagnose(self, trajectory: Trajectory, context: AuditContext) -> Diagnosis:
        """Pick the first decision step (``None`` when there is none)."""
        ds = trajectory.decision_steps
        return _diagnosis(trajectory, ds[0].index if ds else None, self.name, context.config.taxonomy,
                          "baseline: first decision step")


class LastDecisionStep:
    """Baseline: blame the last decision step."""

    name = "last"
    description = "baseline: the last decision step"
    needs_llm = False

    def diagnose(self, trajectory: Trajectory, context: AuditContext) -> Diagnosis:
        """Pick the last decision step."""
        ds = trajectory.decision_steps
        return _diagnosis(trajectory, ds[-1].index if ds else None, self.name, context.config.taxonomy,
                          "baseline: last decision step")


class RandomDecisionStep:
    """Baseline: a uniformly random decision step, seeded by (seed, trajectory id) — reproducible."""

    name = "random"
    description = "baseline: a random decision step (seeded; reproducible per trajectory)"
    needs_llm = False

    def diagnose(self, trajectory: Trajectory, context: AuditContext) -> Diagnosis:
        """Pick a decision step with a per-trajectory seeded RNG; confidence = 1/#decision steps."""
        ds = trajectory.decision_steps
        if not ds:
            return _diagnosis(trajectory, None, self.name, context.config.taxonomy, "no decision step")
        key = f"{context.config.seed}:{trajectory.id}:{trajectory.source.file}:{trajectory.source.record}"
        rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
        pick = rng.choice(ds).index
        return _diagnosis(trajectory, pick, self.name, context.config.taxonomy,
                          f"baseline: random decision step (1 of {len(ds)})", confidence=1 / len(ds))


#: The LLM strategies: registry name -> class name in :mod:`trajaudit.llm.strategies`.
LLM_STRATEGIES: dict[str, str] = {
    "all-at-once": "AllAtOnce", "step-by-step": "StepByStep", "binary-search": "BinarySearch",
    "agentrx": "AgentRx", "searchauditor": "SearchAuditor", "drift": "Drift", "hybrid": "Hybrid",
}


def _llm_strategy(class_name: str) -> Callable[[], Strategy]:
    def build() -> Strategy:
        from trajaudit.llm import strategies

        return getattr(strategies, class_name)()
    return build


def default_strategies() -> Registry[Strategy]:
    """A fresh registry of the built-in strategies: offline judges, baselines, LLM strategies.

    The LLM strategies are registered lazily: their modules (prompts, views, the LLM client's
    module — not ``openai``, which only constructing an ``LLMClient`` imports) load on the first
    lookup of one of them, so an offline audit never imports them.
    """
    from trajaudit.engine.judge import FirstViolation, OfflineJudge  # judge imports this module

    reg: Registry[Strategy] = Registry("strategy")
    for s in (OfflineJudge(), FirstDecisionStep(), LastDecisionStep(), RandomDecisionStep(), FirstViolation()):
        reg.register(s.name, s)
    for name, class_name in LLM_STRATEGIES.items():
        reg.register_lazy(name, _llm_strategy(class_name))
    return reg
