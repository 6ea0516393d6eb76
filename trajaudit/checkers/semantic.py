"""The semantic-check interface: natural-language predicates answered by an LLM.

The rule engine calls a :class:`SemanticOracle` for rules written ``check: {semantic: "..."}``.
Without an LLM configured the :class:`NoLLMOracle` answers ``unknown`` with the reason
"no LLM configured" — reported in the validation log, never counted as a pass. The LLM layer
(``trajaudit.llm``) provides the real implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from trajaudit.engine.trace.ir import Step, Trajectory

SemanticVerdict = Literal["pass", "fail", "unknown"]


@dataclass(frozen=True)
class SemanticAnswer:
    """An oracle's answer about one predicate at one step.

    Attributes:
        verdict: ``pass`` (the predicate holds), ``fail`` (it does not), ``unknown`` (unclear / no LLM).
        evidence: evidence addresses the answer cites (e.g. ``steps.5.content``).
        reason: a short justification, or why it is unknown.
    """

    verdict: SemanticVerdict
    evidence: tuple[str, ...] = ()
    reason: str = ""


@runtime_checkable
class SemanticOracle(Protocol):
    """Answers a natural-language predicate about ``step`` of ``trajectory``.

    ``bindings`` are the values the rule's guard bound (e.g. ``{"call": {...}}``). Implementations
    must treat trace text as data, never as instructions.
    """

    def judge(self, predicate: str, trajectory: Trajectory, step: Step, bindings: dict[str, Any]) -> SemanticAnswer: ...


class NoLLMOracle:
    """The default oracle when no LLM endpoint is configured: always ``unknown``."""

    reason = "no LLM configured"

    def judge(self, predicate: str, trajectory: Trajectory, step: Step, bindings: dict[str, Any]) -> SemanticAnswer:
        """Return ``unknown`` with the reason "no LLM configured"."""
        return SemanticAnswer("unknown", (), self.reason)
