"""Per-process caches never change a result: every run audited with cold caches gives exactly what it
gives after the caches were filled by the whole batch in another order (docs/perf.md).

All 29 tau runs and every third Who&When run (the full before/after comparison of all 155 runs against
the pre-optimization code is benchmarks/audit_snapshot.py).
"""

from __future__ import annotations

import json

import pytest

from trajaudit import load_many
from trajaudit.engine.run.evidence import clear_caches, gather
from trajaudit.engine.run.pipeline import AuditSpec, audit_one, build_context


def _outputs(runs, spec: AuditSpec, ctx) -> list[str]:
    out = []
    for t in runs:
        r = audit_one(t, spec.strategy, ctx)
        cg = gather(t, ctx).graph
        out.append(json.dumps({"diagnosis": r.diagnosis.to_dict(), "log": r.log.to_dict(), "claims": r.claims,
                               "ledger": cg.to_dict()}, sort_keys=True, default=str))
    return out


@pytest.mark.parametrize("which", ["tau", "ww"])
def test_cold_and_warm_caches_give_identical_audits(which, tau_file, ww_dir):
    runs = load_many([tau_file if which == "tau" else ww_dir]).trajectories
    assert len(runs) == (29 if which == "tau" else 126)
    runs = runs if which == "tau" else runs[::3]  # 42 Who&When runs keep the test fast
    spec = AuditSpec()
    clear_caches()
    ctx = build_context(spec)
    warm_up = _outputs(list(reversed(runs)), spec, ctx)  # fills the caches, in the other order
    warm = _outputs(runs, spec, ctx)
    cold = []
    for t in runs:  # each run alone, from empty text and regex caches
        clear_caches(packs=False)
        cold.extend(_outputs([t], spec, ctx))
    assert warm == cold
    assert sorted(warm_up) == sorted(warm)
