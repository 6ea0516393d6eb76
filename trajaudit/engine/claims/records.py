"""Claim-graph findings as validation-log records (AgentRx §3.3: one log for the judge).

- ``claims.missing-support`` (PROVENANCE, target ``invention_of_new_information``): a MISSING claim.
- ``claims.conflicting-evidence`` (RELATIONAL_POST, target ``misinterpretation_of_tool_output``): a
  CONFLICTING claim; the evidence holds both the claim and the conflicting value.
- ``claims.propagates-unsupported`` (same type/target as the root): a later step that reuses,
  amplifies or finalizes an unsupported consequential claim (DRIFT §Dependency Tracer).
- ``claims.claim-cap`` (verdict ``unknown``): a limit was hit, so the ledger is incomplete.

Severity: ``error`` for consequential claims (they reach the final answer, a write call or a user
reply), ``info`` for benign ones (never reused: exploration); propagation records are ``warning``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajaudit.engine.claims import model as m
from trajaudit.engine.validation_log import Evidence, Record

if TYPE_CHECKING:
    from trajaudit.engine.claims.graph import ClaimGraph

TARGET_MISSING = "invention_of_new_information"
TARGET_CONFLICTING = "misinterpretation_of_tool_output"


def _kind(c: m.Claim) -> tuple[str, str, str]:
    if c.status is m.Support.CONFLICTING:
        return "claims.conflicting-evidence", "RELATIONAL_POST", TARGET_CONFLICTING
    return "claims.missing-support", "PROVENANCE", TARGET_MISSING


def claim_records(cg: ClaimGraph) -> list[Record]:
    """Records for every unsupported claim, every propagation step and every limit hit, by step."""
    out: list[Record] = []
    for c in cg.claims:
        if not c.status.unsupported:
            continue
        rule, rtype, target = _kind(c)
        ev = [Evidence(c.address, c.text[:300], f"{c.kind} claim")]
        if c.evidence_address:
            ev.append(Evidence(c.evidence_address, c.evidence_value, "conflicting evidence"))
        what = "conflicts with the latest evidence" if c.status is m.Support.CONFLICTING else \
            "is not supported by anything shown before it"
        msg = f"{c.kind} {c.text[:80]!r} {what}" + (f" ({c.note})" if c.note else "")
        out.append(Record(
            step=c.step, rule_id=rule, verdict="fail", severity="error" if c.consequential else "info",
            rule_type=rtype, targets=(target,), message=msg, evidence=tuple(ev), origin="claims",
            bindings={"claim": c.id, "kind": c.kind, "value": c.value[:200], "status": c.status.value,
                      "consequential": c.consequential, "reused_in": list(c.reused_in),
                      "final_steps": list(c.final_steps)},
        ))
    p = cg.propagate()
    by_id = {c.id: c for c in cg.claims}
    for step in p.error_steps:
        role = p.roles[step]
        if role == "commit":
            continue
        chain = p.chains[step]
        root = by_id[chain[0]]
        rule, rtype, target = _kind(root)
        out.append(Record(
            step=step, rule_id="claims.propagates-unsupported", verdict="fail", severity="warning",
            rule_type=rtype, targets=(target,),
            message=f"step {role}s claim {root.id} ({root.status.value}: {root.text[:60]!r}, introduced at "
                    f"step {root.step})" + (f" via {' → '.join(chain[1:])}" if len(chain) > 1 else ""),
            evidence=tuple(Evidence(by_id[i].address, by_id[i].text[:200], f"{by_id[i].status.value} claim")
                           for i in chain),
            origin="claims", bindings={"role": role, "chain": list(chain), "root_step": root.step},
        ))
    for note in cg.incomplete:
        step = int(note.split(".")[1].split(":")[0]) if note.startswith("steps.") else 0
        out.append(Record(step=step, rule_id="claims.claim-cap", verdict="unknown", severity="info",
                          rule_type="PROVENANCE", message=note, origin="claims", reason=note))
    out.sort(key=lambda r: r.step)
    return out
