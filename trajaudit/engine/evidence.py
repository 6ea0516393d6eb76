"""The evidence stage shared by every strategy: validation log (rules) + claim graph findings.

``gather(trajectory, context)`` computes the evidence once per trajectory and caches it on the
context, so a strategy and the report read the same log.
"""

from __future__ import annotations

import json
import time
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
        timings: CPU seconds (``time.process_time``) spent on ``rules`` (rule evaluation) and ``claims``
            (claim graph, its records and propagation), for benchmarks and profiling.
    """

    log: ValidationLog
    claim_rows: list[dict[str, Any]] = field(default_factory=list)
    error_steps: tuple[int, ...] = ()
    first_error_step: int | None = None
    graph: Any = None
    timings: dict[str, float] = field(default_factory=dict)


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
    """Compile the named rule packs (plus tool-schema rules when ``tools`` is given — issue 4).

    Raises:
        RulePackError: a pack is missing, invalid, or a rule does not compile.
    """
    from trajaudit.engine.compiled_rule import compile_rules
    from trajaudit.engine.rule_pack import load_pack

    rules: list[Any] = []
    seen: set[str] = set()
    for p in packs:
        for r in compile_rules(load_pack(p)):
            if r.id not in seen:
                seen.add(r.id)
                rules.append(r)
    return rules


def gather(trajectory: Trajectory, context: AuditContext) -> EvidenceBundle:
    """Compute (or fetch from the context's cache) the evidence for ``trajectory``."""
    cached = context.extra.get("_evidence")
    if cached is not None and cached[0] is trajectory:
        return cached[1]
    t0 = time.process_time()
    log = ValidationLog(trajectory.id)
    if context.rules:
        from trajaudit.engine.rule_eval import evaluate

        log = evaluate(trajectory, context.rules, oracle=context.extra.get("oracle"), config=context.config)
    from trajaudit.engine.claims import build_claim_graph

    t1 = time.process_time()
    cg = build_claim_graph(trajectory, context.config)
    log.extend(cg.to_records())
    log.incomplete.extend(cg.incomplete)
    log.sort()
    prop = cg.propagate()
    rows = [
        {"id": c.id, "claim": " ".join(c.text.split())[:80], "kind": c.kind, "step": c.step, "address": c.address,
         "status": c.status.value, "value": c.value[:120], "evidence": c.evidence_address,
         "reused_in": list(c.reused_in), "consequential": c.consequential}
        for c in cg.claims if c.status.unsupported
    ]
    bundle = EvidenceBundle(log=log, claim_rows=rows, error_steps=tuple(prop.error_steps),
                            first_error_step=prop.first_error_step, graph=cg,
                            timings={"rules": t1 - t0, "claims": time.process_time() - t1})
    # one entry only: memory stays bounded in long batches; identity (not id()) avoids stale hits
    context.extra["_evidence"] = (trajectory, bundle)
    return bundle
