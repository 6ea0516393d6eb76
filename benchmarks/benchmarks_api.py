"""The few trajaudit functions the accuracy benchmarks call, looked up where the measured checkout
keeps them (before or after the engine's reorganisation into sub-packages), so one script measures
"before" and "after" a change (``--code CHECKOUT`` puts that checkout first on ``sys.path``)."""

from __future__ import annotations

import importlib
from typing import Any


def _first(*names: str) -> Any:
    for n in names:
        mod, _, attr = n.rpartition(".")
        try:
            return getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {names}")


def api() -> dict[str, Any]:
    """``{name: object}`` for load_many, AuditSpec, build_context, AuditConfig, gather, OfflineJudge,
    blame and load_gold. Raises ImportError naming the candidates when one is found nowhere."""
    return {
        "load_many": _first("trajaudit.load_many"),
        "AuditSpec": _first("trajaudit.engine.run.pipeline.AuditSpec", "trajaudit.engine.pipeline.AuditSpec"),
        "build_context": _first("trajaudit.engine.run.pipeline.build_context",
                                "trajaudit.engine.pipeline.build_context"),
        "AuditConfig": _first("trajaudit.engine.config.AuditConfig", "trajaudit.engine.strategies.AuditConfig",
                              "trajaudit.engine.strategy.AuditConfig"),
        "gather": _first("trajaudit.engine.run.evidence.gather", "trajaudit.engine.validation.evidence.gather",
                         "trajaudit.engine.strategies.evidence.gather", "trajaudit.engine.evidence.gather"),
        "OfflineJudge": _first("trajaudit.engine.strategies.offline_judge.OfflineJudge",
                               "trajaudit.engine.strategies.judge.OfflineJudge",
                               "trajaudit.engine.strategies.OfflineJudge", "trajaudit.engine.strategies.offline_judge.OfflineJudge"),
        "blame": _first("trajaudit.engine.strategies.offline_judge.blame",
                        "trajaudit.engine.strategies.judge.blame", "trajaudit.engine.strategies.blame",
                        "trajaudit.engine.strategies.offline_judge.blame"),
        "load_gold": _first("trajaudit.eval.load_gold"),
    }


def diagnose(strategy: Any, trajectory: Any, evidence: Any, context: Any) -> Any:
    """``strategy.diagnose`` in either form: ``(trajectory, evidence, context)`` (the pipeline passes
    the evidence it gathered) or the older ``(trajectory, context)``."""
    import inspect

    if len(inspect.signature(strategy.diagnose).parameters) >= 3:
        return strategy.diagnose(trajectory, evidence, context)
    return strategy.diagnose(trajectory, context)
