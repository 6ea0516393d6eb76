"""The :class:`Diagnosis`: what an audit says about one run (where, why, who, evidence, repair).

Serialized form is validated by ``trajaudit/schemas/diagnosis.schema.json``. ``critical_step`` is the
0-based index of the message in the input file's message list (the IR's ``Step.index``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trajaudit.engine.validation_log import Evidence
from trajaudit.errors import ArgumentTypeError, DiagnosisFormatError

DIAGNOSIS_SCHEMA_VERSION = 1
#: What decided a diagnosis: an unrecovered error-level finding, weaker findings only, or no evidence.
BASES: tuple[str, ...] = ("finding", "weak", "fallback")


@dataclass(frozen=True)
class Candidate:
    """A ranked alternative for the critical step.

    Attributes:
        step: 0-based step index.
        category: taxonomy category id.
        score: the judge's score (higher is more likely; the scale is the strategy's own).
        agent: producer of the step.
        reason: one line saying why it is a candidate.
        evidence: evidence addresses supporting it.
    """

    step: int
    category: str
    score: float
    agent: str | None = None
    reason: str = ""
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"step": self.step, "category": self.category, "score": self.score, "agent": self.agent,
                "reason": self.reason, "evidence": list(self.evidence)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Candidate:
        """Inverse of :meth:`to_dict`."""
        return cls(step=d["step"], category=d["category"], score=float(d["score"]), agent=d.get("agent"),
                   reason=d.get("reason", ""), evidence=tuple(d.get("evidence", [])))


@dataclass(frozen=True)
class Diagnosis:
    """One run's diagnosis.

    Attributes:
        trajectory_id: the run's id.
        file, record: where the run came from (record is 0-based within a multi-run file, else None).
        critical_step: 0-based index of the critical (first unrecoverable) decision step, or ``None``
            when the run has no decision step.
        agent: the agent that produced the critical step.
        category: root-cause category id from ``taxonomy``.
        taxonomy: the taxonomy id (``agentrx``, ``searchauditor``, ``drift``, ``citation``).
        confidence: 0..1.
        rationale: prose citing evidence addresses.
        evidence: the evidence behind the decision.
        candidates: ranked alternatives (the winner first).
        strategy: the strategy that produced it (``offline``, ``first``, ``all-at-once`` …).
        repair: a repair directive, when one was synthesized.
        error_steps: span-level output (DRIFT): all steps judged erroneous.
        tolerance_span: ``(lo, hi)`` inclusive step range the strategy considers equivalent, or ``None``.
        usage: LLM accounting (calls, input/output tokens or characters, cache hits, latency seconds).
        metadata: anything else.
        basis: what decided the step: ``finding`` (an unrecovered error-level finding of the
            validation log), ``weak`` (weaker findings only: warnings, recovered errors), ``fallback``
            (no evidence: a prior position — the baselines always), or ``None`` when the strategy does
            not say (an LLM judge).
    """

    trajectory_id: str
    critical_step: int | None
    category: str
    strategy: str
    taxonomy: str = "agentrx"
    agent: str | None = None
    file: str | None = None
    record: int | None = None
    confidence: float = 0.0
    rationale: str = ""
    evidence: tuple[Evidence, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    repair: str | None = None
    error_steps: tuple[int, ...] = ()
    tolerance_span: tuple[int, int] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    basis: str | None = None

    def __post_init__(self) -> None:
        if self.basis is not None and self.basis not in BASES:
            raise ValueError(f"basis must be one of {', '.join(BASES)} or None, got {self.basis!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON form, valid against ``diagnosis.schema.json``."""
        return {
            "schema_version": DIAGNOSIS_SCHEMA_VERSION,
            "trajectory_id": self.trajectory_id,
            "file": self.file,
            "record": self.record,
            "critical_step": self.critical_step,
            "agent": self.agent,
            "category": self.category,
            "taxonomy": self.taxonomy,
            "confidence": self.confidence,
            "basis": self.basis,
            "rationale": self.rationale,
            "evidence": [e.to_dict() for e in self.evidence],
            "candidates": [c.to_dict() for c in self.candidates],
            "strategy": self.strategy,
            "repair": self.repair,
            "error_steps": list(self.error_steps),
            "tolerance_span": list(self.tolerance_span) if self.tolerance_span else None,
            "usage": self.usage,
            "metadata": self.metadata,
        }

    def to_json(self) -> str:
        """One-line JSON (for JSONL output)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Diagnosis:
        """Inverse of :meth:`to_dict`.

        Raises:
            ArgumentTypeError: ``d`` is not a mapping.
            DiagnosisFormatError (a KeyError and a ValueError): ``trajectory_id`` is missing, or a
                field has the wrong type.
        """
        if not isinstance(d, Mapping):
            raise ArgumentTypeError("Diagnosis.from_dict", "d", d, "a mapping (Diagnosis.to_dict()'s form)")
        if "trajectory_id" not in d:
            raise DiagnosisFormatError(f"not a diagnosis: no 'trajectory_id' (keys: {sorted(map(str, d))[:12]})")
        try:
            return cls._from_dict(d)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
            raise DiagnosisFormatError(f"not a diagnosis (trajectory_id {d['trajectory_id']!r}): "
                                       f"{type(e).__name__}: {e}") from None

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any]) -> Diagnosis:
        span = d.get("tolerance_span")
        step, repair = d.get("critical_step"), d.get("repair")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            raise ValueError(f"critical_step must be an integer or null, got {step!r}")
        if repair is not None and not isinstance(repair, str):
            raise ValueError(f"repair must be a string or null, got {type(repair).__name__}")
        return cls(
            trajectory_id=str(d["trajectory_id"]),
            critical_step=step,
            category=d.get("category", "inconclusive"),
            strategy=d.get("strategy", "unknown"),
            taxonomy=d.get("taxonomy", "agentrx"),
            agent=d.get("agent"),
            file=d.get("file"),
            record=d.get("record"),
            confidence=float(d.get("confidence", 0.0)),
            basis=d.get("basis"),
            rationale=d.get("rationale", ""),
            evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence", [])),
            candidates=tuple(Candidate.from_dict(c) for c in d.get("candidates", [])),
            repair=repair,
            error_steps=tuple(d.get("error_steps", [])),
            tolerance_span=(int(span[0]), int(span[1])) if span else None,
            usage=dict(d.get("usage", {})),
            metadata=dict(d.get("metadata", {})),
        )


def other_run(d: Diagnosis, file: str | None, record: int | None, *, whose: str = "the run's") -> str | None:
    """Why diagnosis ``d`` cannot be about the run read from ``file`` (record ``record``), else ``None``.

    Trajectory ids are not unique across data sets (tau task ``"2"`` and Who&When file ``2.json``
    share the id ``"2"``), so an id match is refused when both sides name their trace file and the
    file names (not the folders) differ, or both give a record and the records differ. When either
    side names no file nothing can be said (``None``). Used by ``eval`` pairing
    (:func:`trajaudit.eval.gold.other_file`) and ``repair --diagnosis``.

    Args:
        d: the diagnosis (its ``file``/``record`` as written by ``audit``).
        file, record: where the run came from (``Source.file``/``Source.record``, or a gold item's).
        whose: how the message names the run (``"the gold run's"``).

    Returns:
        ``"its file A.json is not <whose> B.json"``, ``"its record 1 is not <whose> 0"``, or ``None``.
    """
    from pathlib import Path

    if not file or not d.file:
        return None
    if Path(file).name != Path(d.file).name:
        return f"its file {Path(d.file).name} is not {whose} {Path(file).name}"
    if record is not None and d.record is not None and record != d.record:
        return f"its record {d.record} is not {whose} {record}"
    return None
