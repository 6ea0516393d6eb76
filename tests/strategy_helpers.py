"""Calling a strategy directly, as the pipeline does: the run's evidence is gathered once and passed in."""

from __future__ import annotations

from typing import Any

from trajaudit.engine.run.evidence import gather
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.trace.ir import Trajectory


def with_evidence(trajectory: Trajectory, context: AuditContext) -> tuple[Trajectory, EvidenceBundle, AuditContext]:
    """``(trajectory, evidence, context)``: the arguments of ``Strategy.diagnose``, evidence gathered
    with ``context`` (``strategy.diagnose(*with_evidence(t, ctx))``)."""
    return trajectory, gather(trajectory, context), context


__all__: list[Any] = ["with_evidence"]
