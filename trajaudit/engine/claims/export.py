"""Exports of a :class:`~trajaudit.engine.claims.graph.ClaimGraph`: node-link JSON, GraphML, text.

``to_node_link`` and ``to_graphml`` use networkx's own writers (GraphML wants scalar attributes, so
``None`` becomes ``""``); ``to_text`` is the readable rendering: the ledger, then the error chains.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any

import networkx as nx

if TYPE_CHECKING:
    from trajaudit.engine.claims.graph import ClaimGraph


def to_node_link(cg: ClaimGraph) -> dict[str, Any]:
    """The graph as node-link JSON (``networkx.node_link_data``, edges under ``links``) plus the ledger."""
    data = nx.node_link_data(cg.graph, edges="links")
    data["ledger"] = cg.to_dict()
    return data


#: What XML 1.0 cannot hold: the C0 controls but tab, LF and CR (ESC of a colour code), lone surrogates
#: and U+FFFE/FFFF. GraphML writes them by name, ``⟨U+001B⟩`` (the reports' convention).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_safe(value: Any) -> Any:
    """``value`` with the characters XML 1.0 cannot hold written ``⟨U+XXXX⟩`` when it is a string."""
    if not isinstance(value, str):
        return value
    return _XML_INVALID.sub(lambda x: f"⟨U+{ord(x.group()):04X}⟩", value)


def to_graphml(cg: ClaimGraph) -> str:
    """The graph as a GraphML document (string). Trace text in it (previews, values, addresses, the
    run id) has the characters XML 1.0 cannot hold written by name (``⟨U+001B⟩``): networkx wrote an
    ESC of a colour code raw, and the document did not parse."""
    g = nx.relabel_nodes(cg.graph, {n: _xml_safe(n) for n in cg.graph if _xml_safe(n) != n}, copy=True)
    g.graph.update({k: _xml_safe(v) for k, v in g.graph.items()})
    for _, attrs in g.nodes(data=True):
        for k, v in list(attrs.items()):
            attrs[k] = "" if v is None else _xml_safe(v)
    for *_, attrs in g.edges(keys=True, data=True):
        for k, v in list(attrs.items()):
            attrs[k] = _xml_safe(v)
    buf = io.BytesIO()
    nx.write_graphml(g, buf)
    return buf.getvalue().decode("utf-8")


def ledger_rows(cg: ClaimGraph, only_unsupported: bool = False) -> list[dict[str, str]]:
    """One display row per claim: claim, kind, introduced at, status, evidence, reused in, final."""
    rows = []
    for c in cg.claims:
        if only_unsupported and not c.status.unsupported:
            continue
        ev = c.evidence_address or "—"
        if c.status.value == "CONFLICTING":
            ev = f"{ev} = {c.evidence_value!r}"
        rows.append({
            "id": c.id, "claim": " ".join(c.text.split())[:60], "kind": c.kind, "introduced": c.address,
            "status": c.status.value, "evidence": ev, "note": c.note,
            "reused_in": ",".join(map(str, c.reused_in)) or "—",
            "final": ",".join(map(str, c.final_steps)) or "—",
        })
    return rows


def to_text(cg: ClaimGraph, only_unsupported: bool = False) -> str:
    """Readable rendering: one line per claim, then the propagation (first error step and chains)."""
    lines = [f"trajectory {cg.trajectory.id}: {len(cg.claims)} claims, final answer at "
             f"{'step ' + str(cg.final_step) if cg.final_step is not None else 'none'}"]
    for r in ledger_rows(cg, only_unsupported):
        lines.append(f"  {r['id']:>5} {r['status']:<11} {r['kind']:<8} {r['claim']!r} @ {r['introduced']}"
                     f"  evidence: {r['evidence']}  reused in: {r['reused_in']}  final: {r['final']}")
    p = cg.propagate()
    lines.append(f"first error step: {'none' if p.first_error_step is None else p.first_error_step}")
    for s in p.error_steps:
        lines.append(f"  step {s} ({p.roles[s]}): {' → '.join(p.chains[s])}")
    for note in cg.incomplete:
        lines.append(f"incomplete: {note}")
    return "\n".join(lines)
