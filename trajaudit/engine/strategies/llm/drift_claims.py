"""The LLM half of DRIFT's ledger: an LLM claim extractor and the support-status override.

- :class:`LLMClaimExtractor` implements the claim graph's
  :class:`~trajaudit.engine.claims.extract.ClaimExtractor` Protocol from the Claim Keeper's answer
  (DRIFT §Claim Keeper): each claim the model listed becomes a ``quoted`` mention at its introducing
  step — located by its verbatim quote, so the deterministic Support Seeker can look the phrase up in
  earlier evidence — plus a reuse mention at every later step the model said relies on it. Claims
  whose quote is not verbatim in the named step are dropped and reported (model output is data; a
  quote that cannot be located cannot be audited).
- :func:`claims_to_check` picks the consequential claims the deterministic ledger could not confirm
  (MISSING / WEAK / CONFLICTING) for the LLM Support Seeker; :func:`apply_support` writes its
  verdicts back (DRIFT §Support Seeker).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from trajaudit.engine.claims import model as m
from trajaudit.engine.claims.normalize import norm_text
from trajaudit.engine.trace.ir import Step, Trajectory

LLM_SLOT = ("llm",)  # the ledger slot of LLM claims: they never merge with a literal value's claim


def locate(quote: str, text: str) -> tuple[int, int] | None:
    """Where ``quote`` occurs verbatim in ``text`` (runs of whitespace may differ), else ``None``."""
    q = quote.strip()
    if not q or not text:
        return None
    k = text.find(q)
    if k >= 0:
        return k, k + len(q)
    hit = re.search(r"\s+".join(re.escape(w) for w in q.split()), text)
    return (hit.start(), hit.end()) if hit else None


def _where(step: Step, quote: str) -> tuple[str, int, int, int | None] | None:
    """``(address base, start, end, tool-call index or None)`` of ``quote`` in the step's text or arguments."""
    hit = locate(quote, step.content)
    if hit is not None:
        return f"steps.{step.index}.content", hit[0], hit[1], None
    for j, call in enumerate(step.tool_calls):
        # the model saw the arguments as JSON (step_record); offsets refer to that text, else the raw text
        shown = json.dumps(call.arguments, ensure_ascii=False, default=str) if call.arguments is not None else ""
        for flat in (shown, call.raw_arguments or ""):
            hit = locate(quote, flat)
            if hit is not None:
                return f"steps.{step.index}.tool_calls.{j}.arguments", hit[0], hit[1], j
    return None


class LLMClaimExtractor:
    """Claim mentions from a Claim Keeper answer (a :class:`ClaimExtractor`; name ``llm``).

    Args:
        trajectory: the run the answer is about.
        claims: the keeper's ``claims`` list: ``{"step", "quote", "claim", "stage", "consequential",
            "used_in"}`` each (validated against ``prompts/drift_keeper.yaml``).

    Attributes:
        kept: the accepted claims, each with ``address`` and ``value`` added.
        dropped: one note per rejected claim (not a decision step, quote not verbatim).
    """

    name = "llm"

    def __init__(self, trajectory: Trajectory, claims: list[dict[str, Any]]) -> None:
        self.kept: list[dict[str, Any]] = []
        self.dropped: list[str] = []
        self._at: dict[int, list[m.Mention]] = {}
        for c in claims:
            k = c.get("step")
            if not isinstance(k, int) or not 0 <= k < len(trajectory.steps) or not trajectory.steps[k].is_decision:
                self.dropped.append(f"keeper claim at step {k!r} dropped: not a decision step")
                continue
            step = trajectory.steps[k]
            where = _where(step, str(c.get("quote", "")))
            if where is None:
                self.dropped.append(f"keeper claim at step {k} dropped: quote {str(c.get('quote'))[:60]!r} is not "
                                    "verbatim in that step")
                continue
            base, a, b, call = where
            quote = str(c["quote"]).strip()
            value = norm_text(quote)[:300]
            tool = step.tool_calls[call].name if call is not None else None
            mention = m.Mention(step=k, address=f"{base}[{a}:{b}]", kind=m.KIND_QUOTED, value=value, text=quote,
                                slot=LLM_SLOT, in_call=call is not None, tool=tool, context=str(c.get("claim", "")))
            self._at.setdefault(k, []).append(mention)
            for u in sorted({u for u in c.get("used_in", []) if isinstance(u, int) and k < u < len(trajectory.steps)}):
                self._at.setdefault(u, []).append(self._reuse(trajectory.steps[u], value, quote))
            self.kept.append({**c, "address": mention.address, "value": value})

    @staticmethod
    def _reuse(step: Step, value: str, quote: str) -> m.Mention:
        """A reuse mention at ``step``: on its write call if it has one (the claim reaches an action),
        else on its first call, else on its text."""
        if step.tool_calls:
            j = next((i for i, c in enumerate(step.tool_calls) if m.tool_verb(c.name) in m.DEFAULT_WRITE_VERBS), 0)
            return m.Mention(step=step.index, address=f"steps.{step.index}.tool_calls.{j}.arguments",
                             kind=m.KIND_QUOTED, value=value, text=quote, slot=LLM_SLOT, in_call=True,
                             tool=step.tool_calls[j].name)
        return m.Mention(step=step.index, address=f"steps.{step.index}.content", kind=m.KIND_QUOTED, value=value,
                         text=quote, slot=LLM_SLOT)

    def extract(self, trajectory: Trajectory, step: Step, config: m.ClaimConfig) -> Iterator[m.Mention]:
        """The mentions the keeper's answer puts at ``step`` (introductions, then reuses)."""
        yield from self._at.get(step.index, ())


def claims_to_check(claims: list[m.Claim], limit: int) -> tuple[list[m.Claim], int]:
    """The consequential claims not confirmed (MISSING / WEAK / CONFLICTING; final-answer rows
    excluded: they are judged by the claims they contain), earliest first, at most ``limit``.

    Returns:
        ``(claims to send, how many more were left unchecked)``.
    """
    todo = [c for c in claims if c.consequential and c.kind != m.KIND_FINAL
            and c.status in (m.Support.MISSING, m.Support.WEAK, m.Support.CONFLICTING)]
    todo.sort(key=lambda c: (c.step, int(c.id[1:])))
    return todo[:limit], max(0, len(todo) - limit)


def claim_row(c: m.Claim, width: int = 120) -> dict[str, Any]:
    """A compact JSON row of a claim for prompts."""
    row: dict[str, Any] = {"id": c.id, "step": c.step, "kind": c.kind,
                           "claim": (c.mention.context or c.text)[:width], "status": c.status.value}
    if c.mention.context and c.text != c.mention.context:
        row["quote"] = c.text[:width]
    if c.note:
        row["note"] = c.note[:width]
    return row


def apply_support(claims: list[m.Claim], judgments: list[dict[str, Any]], n_steps: int) -> list[dict[str, Any]]:
    """Write the LLM Support Seeker's statuses onto ``claims`` (only ids in ``claims``; others ignored).

    Returns:
        The changes ``[{"id", "from", "to", "evidence_step", "reason"}]`` (unchanged statuses omitted).
    """
    by_id = {c.id: c for c in claims}
    changes = []
    for j in judgments:
        c = by_id.get(str(j.get("id")))
        if c is None:
            continue
        new = m.Support(j["status"])
        ev = j.get("evidence_step")
        if new is not c.status:
            changes.append({"id": c.id, "from": c.status.value, "to": new.value, "evidence_step": ev,
                            "reason": str(j.get("reason", ""))[:200]})
        c.status = new
        if isinstance(ev, int) and 0 <= ev < n_steps:
            c.evidence_address = f"steps.{ev}"
        c.note = f"LLM support seeker: {str(j.get('reason', ''))[:160]}"
    return changes
