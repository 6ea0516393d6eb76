"""Snapshot every audit output on the real data, to prove a speed-up changed no result.

Audits the 29 tau-retail runs (no rules; the example pack; the tau tool schemas) and the 126
Who&When algorithm-generated runs (no rules) with the offline strategy, and writes, per run and
configuration, the loaded IR, the diagnosis, the validation log, the unsupported-claim rows and the
full claim graph (ledger, propagation, node-link graph) as canonical JSON.

Run before and after a change::

    python benchmarks/audit_snapshot.py -o before.json      # on the old code
    python benchmarks/audit_snapshot.py --compare before.json

``--compare`` exits 1 and names the first differing runs and fields when anything changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit import load_many, load_path  # noqa: E402
from trajaudit.engine.run.evidence import gather  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec, audit_one, build_context  # noqa: E402

DATA = (ROOT.parent / "shared" / "data").resolve()
TAU = DATA / "tau_retail" / "trajectories.json"
TOOLS = DATA / "tau_retail" / "tools.json"
WW = DATA / "who_and_when" / "algorithm_generated"
EXAMPLE = ROOT / "examples" / "rules" / "tau_retail_example.yaml"

CONFIGS: dict[str, tuple[Path, AuditSpec]] = {
    "tau": (TAU, AuditSpec()),
    "tau+example": (TAU, AuditSpec(rules=(str(EXAMPLE),))),
    "tau+tools": (TAU, AuditSpec(tools=str(TOOLS))),
    "ww": (WW, AuditSpec()),
}


def snapshot() -> dict[str, dict[str, Any]]:
    """``{config: {run id: {ir, diagnosis, log, claims, graph}}}`` (JSON-ready)."""
    from networkx.readwrite import json_graph

    out: dict[str, dict[str, Any]] = {}
    for name, (path, spec) in CONFIGS.items():
        runs = (load_path(path) if path.is_file() else load_many([path])).trajectories
        ctx = build_context(spec)
        per: dict[str, Any] = {}
        for t in runs:
            r = audit_one(t, spec.strategy, ctx)
            cg = gather(t, ctx).graph
            per[f"{t.source.file and Path(t.source.file).name}#{t.id}"] = {
                "ir": t.to_dict(),
                "diagnosis": r.diagnosis.to_dict(),
                "log": r.log.to_dict() if r.log else None,
                "claims": r.claims,
                "graph": {**cg.to_dict(), "node_link": json_graph.node_link_data(cg.graph, edges="edges")},
            }
        out[name] = per
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def _diff(a: Any, b: Any, path: str, found: list[str], limit: int = 10) -> None:
    if len(found) >= limit or a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                found.append(f"{path}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", found, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}.{i}", found, limit)
    else:
        found.append(f"{path}: {json.dumps(a)[:150]} != {json.dumps(b)[:150]}")


def _moved_diagnoses(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``config run: step/category/agent before -> after`` for every run whose diagnosis moved (all of
    them, unlike the raw difference list, which stops after 10)."""
    out = []
    for config in sorted(set(before) | set(after)):
        a, b = before.get(config, {}), after.get(config, {})
        for run in sorted(set(a) | set(b)):
            x, y = (a.get(run) or {}).get("diagnosis"), (b.get(run) or {}).get("diagnosis")
            key = ("critical_step", "category", "agent")
            vx = tuple((x or {}).get(k) for k in key)
            vy = tuple((y or {}).get(k) for k in key)
            if vx != vy:
                out.append(f"{config} {run}: {vx} -> {vy}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", help="write the snapshot here")
    ap.add_argument("--compare", help="compare with this earlier snapshot; exit 1 on any difference")
    args = ap.parse_args(argv)
    snap = snapshot()
    text = json.dumps(snap, sort_keys=True)
    counts = {k: len(v) for k, v in snap.items()}
    print(f"runs per configuration: {counts}; sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}")
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    if args.compare:
        before = json.loads(Path(args.compare).read_text(encoding="utf-8"))
        moved = _moved_diagnoses(before, snap)
        if moved:  # every diagnosis that changed, before the (capped) list of raw differences
            print(f"DIAGNOSES CHANGED ({len(moved)}):\n  " + "\n  ".join(moved))
        found: list[str] = []
        _diff(before, snap, "", found)
        if found:
            print("DIFFERENT (first 10):\n  " + "\n  ".join(found))
            return 1
        print(f"identical to {args.compare}: every IR, diagnosis, validation log and claim graph")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
