"""The evidence stage shared by every strategy: validation log (rules) + claim graph findings.

``gather(trajectory, context)`` computes the evidence once per trajectory and caches it on the
context, so a strategy and the report read the same log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajaudit.engine.ir import Trajectory
from trajaudit.engine.strategy import AuditContext
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import TrajauditError


@dataclass
class EvidenceBundle:
    """Evidence about one trajectory.

    Attributes:
        log: the merged validation log (rule records + claim-graph records).
        claim_rows: a JSON-ready ledger summary for reports.
        error_steps: steps the claim graph marks as error spans (DRIFT propagation).
        first_error_step: the first such step, or ``None``.
        graph: the claim graph object, when built.
    """

    log: ValidationLog
    claim_rows: list[dict[str, Any]] = field(default_factory=list)
    error_steps: tuple[int, ...] = ()
    first_error_step: int | None = None
    graph: Any = None


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """Read an OpenAI function-schema list (``[{"type": "function", "function": {...}}]`` or bare functions).

    Raises:
        TrajauditError: unreadable file, invalid JSON, or not a list of function schemas.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrajauditError(f"{path}: cannot read tool schemas: {e}") from None
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise TrajauditError(f"{path}: tool schemas must be a JSON list of function objects")
    out = []
    for i, x in enumerate(data):
        fn = x.get("function", x)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise TrajauditError(f"{path}: element {i} is not a function schema (no 'name')")
        out.append(fn)
    return out


def load_rules(packs: tuple[str, ...] | list[str], tools: list[dict[str, Any]] | None) -> list[Any]:
    """Compile the named rule packs (plus tool-schema rules when ``tools`` is given)."""
    return []


def gather(trajectory: Trajectory, context: AuditContext) -> EvidenceBundle:
    """Compute (or fetch from the context's cache) the evidence for ``trajectory``."""
    cached = context.extra.get("_evidence")
    if cached is not None and cached[0] is trajectory:
        return cached[1]
    bundle = EvidenceBundle(log=ValidationLog(trajectory.id))
    # one entry only: memory stays bounded in long batches; identity (not id()) avoids stale hits
    context.extra["_evidence"] = (trajectory, bundle)
    return bundle
