"""Propagation of unsupported claims (DRIFT §Dependency Tracer).

A step is an *error step* when it commits to (introduces), reuses, amplifies (introduces or reuses a
claim derived from) or finalizes (states in the final answer, a write call or a user reply) a MISSING
or CONFLICTING claim that is consequential. A MISSING claim that is never reused nor finalized is
benign exploration and makes no error step.

Hand-off briefs: when a run opens with a decision step that relays the task to the team (it quotes
the task, as a manager's brief does), the unsupported claims it carries are premises handed over;
the step that first adopts one (reuses or finalizes it) is where the team commits to it, and the
brief itself is not an error step (``brief_step``; see ``ledger.brief_step``).
"""

from __future__ import annotations

from trajaudit.engine.claims import model as m

_RANK = {"commit": 3, "finalize": 2, "reuse": 1, "amplify": 0}


def propagate(claims: list[m.Claim], brief_step: int | None = None) -> m.Propagation:
    """Error steps, first error step and per-step claim chains from a ledger (see module docstring).

    Args:
        claims: the ledger (support, reuse, final steps and derivations filled in).
        brief_step: the run's hand-off brief step, or ``None``.
    """
    children: dict[str, list[m.Claim]] = {}
    for c in claims:
        for p in c.derived_from:
            children.setdefault(p, []).append(c)
    chains: dict[int, list[str]] = {}
    roles: dict[int, str] = {}

    def mark(step: int, role: str, chain: list[str]) -> None:
        old = roles.get(step)
        if old is None or _RANK[role] > _RANK[old] or (role == old and len(chain) < len(chains[step])):
            roles[step] = role
            chains[step] = chain

    for root in claims:
        if not (root.status.unsupported and root.consequential):
            continue
        uses = sorted(set(root.reused_in) | set(root.final_steps))
        if root.step == brief_step:
            uses = [s for s in uses if s != brief_step]
            if not uses:
                continue
            mark(uses[0], "commit", [root.id])
        else:
            mark(root.step, "commit", [root.id])
        for s in uses:
            mark(s, "finalize" if s in root.final_steps else "reuse", [root.id])
        stack = [(root, [root.id])]
        seen = {root.id}
        while stack:
            cur, chain = stack.pop()
            for ch in children.get(cur.id, []):
                if ch.id in seen:
                    continue
                seen.add(ch.id)
                path = [*chain, ch.id]
                if ch.consequential:
                    for s in (ch.step, *ch.reused_in):
                        mark(s, "amplify", path)
                stack.append((ch, path))
    steps = tuple(sorted(roles))
    return m.Propagation(first_error_step=steps[0] if steps else None, error_steps=steps, chains=chains,
                         roles=roles)
