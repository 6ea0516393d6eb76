"""Baselines that ignore the evidence: the first, the last, or a random (seeded) decision step."""

from __future__ import annotations

import hashlib
import random
from pathlib import PurePath

from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.strategies.base import INCONCLUSIVE
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.trace.ir import Trajectory

__all__ = ["FirstDecisionStep", "LastDecisionStep", "RandomDecisionStep", "baseline_diagnosis"]


def baseline_diagnosis(t: Trajectory, step: int | None, strategy: str, taxonomy: str, reason: str,
               confidence: float = 0.0) -> Diagnosis:
    """An ``inconclusive`` diagnosis blaming ``step`` (none when ``None``), for the baselines."""
    agent = t.steps[step].agent if step is not None else None
    cands = (Candidate(step=step, category=INCONCLUSIVE, score=confidence, agent=agent, reason=reason),) \
        if step is not None else ()
    return Diagnosis(trajectory_id=t.id, file=t.source.file, record=t.source.record, critical_step=step,
                     agent=agent, category=INCONCLUSIVE, taxonomy=taxonomy, confidence=confidence,
                     rationale=reason, candidates=cands, strategy=strategy, basis="fallback")


class FirstDecisionStep:
    """Baseline: blame the first decision step."""

    name = "first"
    description = "baseline: the first decision step"
    needs_llm = False

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Pick the first decision step (``None`` when there is none)."""
        ds = trajectory.decision_steps
        return baseline_diagnosis(trajectory, ds[0].index if ds else None, self.name, context.config.taxonomy,
                          "baseline: first decision step")


class LastDecisionStep:
    """Baseline: blame the last decision step."""

    name = "last"
    description = "baseline: the last decision step"
    needs_llm = False

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Pick the last decision step."""
        ds = trajectory.decision_steps
        return baseline_diagnosis(trajectory, ds[-1].index if ds else None, self.name, context.config.taxonomy,
                          "baseline: last decision step")


class RandomDecisionStep:
    """Baseline: a uniformly random decision step, seeded by (seed, trajectory id, file name, record) —
    reproducible, and the same wherever the data file is checked out."""

    name = "random"
    description = "baseline: a random decision step (seeded; reproducible per trajectory)"
    needs_llm = False

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Pick a decision step with a per-trajectory seeded RNG; confidence = 1/#decision steps."""
        ds = trajectory.decision_steps
        if not ds:
            return baseline_diagnosis(trajectory, None, self.name, context.config.taxonomy, "no decision step")
        # the file's name, not its path: the same run gives the same pick wherever the data is checked out
        name = PurePath(trajectory.source.file).name if trajectory.source.file else ""
        key = f"{context.config.seed}:{trajectory.id}:{name}:{trajectory.source.record}"
        rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
        pick = rng.choice(ds).index
        return baseline_diagnosis(trajectory, pick, self.name, context.config.taxonomy,
                          f"baseline: random decision step (1 of {len(ds)})", confidence=1 / len(ds))
