"""The strategy protocol: how a diagnosis is produced from a run and its evidence.

A strategy turns one :class:`~trajaudit.engine.trace.ir.Trajectory`, with the evidence the pipeline
gathered once for it (:class:`~trajaudit.engine.strategies.context.EvidenceBundle`), into a
:class:`~trajaudit.engine.diagnosis.Diagnosis`. Strategies are registered by name in a
:class:`~trajaudit.registry.Registry` built by
:func:`~trajaudit.engine.strategies.registry.default_strategies` (explicit, no globals).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.trace.ir import Trajectory

__all__ = ["INCONCLUSIVE", "Strategy"]

INCONCLUSIVE = "inconclusive"


@runtime_checkable
class Strategy(Protocol):
    """How a diagnosis is produced. ``needs_llm`` strategies fail clearly without an LLM client.

    ``diagnose`` reads the evidence it is given (it never gathers it again); a strategy that adds
    records of its own (agentrx's synthesized rules) replaces ``evidence.log`` with the merged log,
    which the pipeline then reports.
    """

    name: str
    description: str
    needs_llm: bool

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis: ...
