"""What a strategy is given besides the run: the typed audit context and the run's evidence.

:class:`AuditContext` is built once per batch (``trajaudit.engine.run.pipeline.build_context``);
:class:`EvidenceBundle` once per run (``trajaudit.engine.run.evidence.gather``), before the strategy
runs, and passed to ``Strategy.diagnose`` — no strategy gathers evidence itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from trajaudit.engine.config import AuditConfig
from trajaudit.engine.packs.compile import CompiledRule
from trajaudit.engine.packs.selection import DomainPack
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.validation_log import ValidationLog

if TYPE_CHECKING:  # types only (the claim graph comes from run.evidence; the client never imports openai)
    from trajaudit.engine.claims.graph import ClaimGraph
    from trajaudit.llm.client import LLMClient

__all__ = ["AuditContext", "EvidenceBundle"]


@dataclass
class AuditContext:
    """What a strategy may use besides the trajectory and its evidence (one per batch).

    Attributes:
        config: the :class:`AuditConfig`.
        rules: compiled rules applied to every run (the packs and the tool-schema rules).
        tools: OpenAI function schemas for the run's tools, or ``None``.
        llm: an LLM client (:class:`trajaudit.llm.LLMClient`) or ``None`` when no endpoint is configured.
        domain_packs: the shipped domain packs a run's tools may select (compiled on first use).
        repair: fill ``Diagnosis.repair`` (an LLM directive with ``llm``, else the template).
        strategy_options: per strategy name, overrides of its settings (e.g.
            ``{"searchauditor": {"repair": True}}``, ``{"agentrx": {"mode": "step-by-step"}}``); each
            strategy checks its own and refuses unknown ones.
    """

    config: AuditConfig = field(default_factory=AuditConfig)
    rules: list[CompiledRule] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    llm: LLMClient | None = None
    domain_packs: tuple[DomainPack, ...] = ()
    repair: bool = False
    strategy_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @cached_property
    def taxonomy_ids(self) -> frozenset[str] | None:
        """The category ids of ``config.taxonomy`` (read once per context), or ``None`` when the
        taxonomy cannot be loaded (categories are then left unfiltered)."""
        try:
            return frozenset(load_taxonomy(self.config.taxonomy).ids)
        except Exception:  # noqa: BLE001 - an unknown taxonomy leaves categories unfiltered
            return None


@dataclass
class EvidenceBundle:
    """Evidence about one trajectory, gathered once by the pipeline.

    Attributes:
        log: the merged validation log (rule records + claim-graph records). A strategy that adds
            records of its own (agentrx) replaces it with the merged log, which is what is reported.
        claim_rows: a JSON-ready ledger summary for reports.
        error_steps: steps the claim graph marks as error spans (DRIFT propagation).
        first_error_step: the first such step, or ``None``.
        graph: the claim graph object, when built.
        domain_packs: names of the shipped domain packs the run's tools selected.
        timings: CPU seconds (``time.process_time``) spent on ``rules`` (rule evaluation) and ``claims``
            (claim graph, its records and propagation), for benchmarks and profiling.
    """

    log: ValidationLog
    claim_rows: list[dict[str, Any]] = field(default_factory=list)
    error_steps: tuple[int, ...] = ()
    first_error_step: int | None = None
    graph: ClaimGraph | None = None
    domain_packs: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
