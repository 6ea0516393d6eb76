"""Building the claim ledger of one run (DRIFT §Claim Keeper + §Support Seeker).

Walks the decision steps in order: the first mention of a value (ledger key = normalized value plus
slot) introduces a claim, which is assessed against the evidence before it; later mentions are reuses.
Then it marks where claims become consequential and which claims were derived from which.

*Finalizing* mentions (what makes a claim consequential): a mention in the final-answer step, in the
arguments of a write call (``ClaimConfig.write_verbs``), or — in a conversation with a user
(``ClaimConfig.replies_are_final``) — in an agent's text reply to the user, which answers a request.

*Derivation*: a claim supported by a tool output derives from the claims the producing step passed to
the tool (its call arguments, or the code it ran); a claim reaching a final step makes every claim it
derives from reach it too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from trajaudit.engine.claims import model as m
from trajaudit.engine.claims.evidence_index import EvidenceIndex
from trajaudit.engine.claims.extract import ClaimExtractor, extract_mentions
from trajaudit.engine.claims.normalize import norm_text
from trajaudit.engine.claims.support import SupportSeeker
from trajaudit.engine.trace.ir import Step, Trajectory

log = logging.getLogger(__name__)


@dataclass
class Ledger:
    """Claims of one run plus the by-products the graph needs.

    Attributes:
        claims: the ledger, in order of introduction.
        mentions: ``{step: [mentions]}`` of every decision step with claims.
        by_key: ``{ledger key: claim}``.
        final_step: the step holding the final answer, or ``None``.
        brief_step: the run's opening hand-off brief (see :func:`brief_step`), or ``None``.
        write_steps: steps with a write call.
        reply_steps: agent text replies to the user (when ``replies_are_final``).
        incomplete: limits hit (claim caps, text caps).
        index: the run's :class:`EvidenceIndex`.
    """

    claims: list[m.Claim] = field(default_factory=list)
    mentions: dict[int, list[m.Mention]] = field(default_factory=dict)
    by_key: dict[tuple[str, ...], m.Claim] = field(default_factory=dict)
    final_step: int | None = None
    brief_step: int | None = None
    write_steps: set[int] = field(default_factory=set)
    reply_steps: set[int] = field(default_factory=set)
    incomplete: list[str] = field(default_factory=list)
    index: EvidenceIndex | None = None


def final_answer_step(t: Trajectory, config: m.ClaimConfig,
                      mentions: dict[int, list[m.Mention]] | None = None) -> Step | None:
    """The decision step holding the final answer: the last agent text that is not a bare termination
    token (``TERMINATE``); when ``mentions`` are given and that text states no value (a closing remark
    such as "I will finalize now"), the last agent text that states one. ``None`` when the run has
    no final answer (``Trajectory.final_answer`` is ``None``) or no agent text."""
    if t.final_answer is None:
        return None
    last = None
    for s in reversed(t.steps):
        if not (s.is_decision and s.content.strip()) or norm_text(s.content) in config.termination_tokens:
            continue
        if last is None:
            last = s
            if mentions is None:
                return s
        if any(not mn.in_call and not mn.in_code for mn in mentions.get(s.index, ())):
            return s
    return last


def brief_step(t: Trajectory, config: m.ClaimConfig) -> int | None:
    """The opening hand-off brief: the run's first step, when it is a decision step quoting the task
    (its first 60 normalized characters), as a manager relaying the task to a team does, or when the
    run has no task apart from it (then that opening message is the task: a team leader's
    requirement that opens a code-writing run); else ``None``."""
    if not (config.brief_is_handoff or config.brief_is_input) or not t.steps or not t.steps[0].is_decision:
        return None
    if not t.task.strip():
        return 0
    head = norm_text(t.task)[:60]
    return 0 if head and head in norm_text(t.steps[0].content[: config.max_text_chars]) else None


def input_steps(t: Trajectory, config: m.ClaimConfig) -> frozenset[int]:
    """Decision steps that are the run's input rather than its decisions: the opening hand-off brief
    (:func:`brief_step`) when ``config.brief_is_input``. Nothing precedes it in the run, so no
    decision of this run produced what it says; it is evidence (the task as the team received it),
    and no claims are extracted from it. Empty otherwise."""
    if not config.brief_is_input:
        return frozenset()
    b = brief_step(t, config)
    return frozenset() if b is None else frozenset((b,))


def _conversational(t: Trajectory) -> bool:
    first = next((s.index for s in t.steps if s.is_decision), None)
    return first is not None and any(s.kind == "user" and s.index > first for s in t.steps)


def build_ledger(t: Trajectory, config: m.ClaimConfig, extractors: list[ClaimExtractor] | None = None) -> Ledger:
    """Extract, assess and link the claims of ``t``; see the module docstring. Never raises on content."""
    led = Ledger()
    inputs = input_steps(t, config)
    led.mentions, led.incomplete = extract_mentions(t, config, extractors, skip=inputs)
    fin = final_answer_step(t, config, led.mentions)
    if fin is not None:
        led.final_step = fin.index
        text = fin.content[: config.max_text_chars]
        led.mentions.setdefault(fin.index, []).append(m.Mention(
            step=fin.index, address=f"steps.{fin.index}.content[0:{len(text)}]", kind=m.KIND_FINAL,
            value=norm_text(text)[:300], text=text[:300], slot=("final",)))
    if config.replies_are_final and _conversational(t):
        led.reply_steps = {s.index for s in t.steps if s.is_decision and s.content.strip()}
    led.write_steps = {s.index for s in t.steps if any(config.is_write_tool(c.name) for c in s.tool_calls)}
    led.brief_step = None if inputs else brief_step(t, config)
    ix = led.index = EvidenceIndex(t, inputs=inputs)
    seeker = SupportSeeker(t, ix, config)
    for step in sorted(led.mentions):
        ms = led.mentions[step]
        for mn in ms:
            key = mn.key
            claim = led.by_key.get(key)
            if claim is not None:
                if step > claim.step and step not in claim.reused_in:
                    claim.reused_in.append(step)
            else:
                a = seeker.assess(mn, ms)
                claim = m.Claim(id=f"c{len(led.claims) + 1}", kind=mn.kind, value=mn.value, text=mn.text,
                                address=mn.address, step=step, agent=t.steps[step].agent, mention=mn,
                                status=a.status, evidence_address=a.address, evidence_value=a.value, note=a.note)
                led.by_key[key] = claim
                led.claims.append(claim)
            if _finalizing(mn, led, config) and step not in claim.final_steps:
                claim.final_steps.append(step)
    _verify_access(led, seeker)
    _derive(t, led)
    return led


def _verify_access(led: Ledger, seeker: SupportSeeker) -> None:
    """A MISSING URL or path that a later step uses (a brief's file, reused in code) is confirmed or
    refuted by the tool output of the first step that uses it and produced one."""
    for claim in led.claims:
        if claim.status is not m.Support.MISSING or claim.kind not in (m.KIND_URL, m.KIND_PATH):
            continue
        for step in claim.reused_in:
            got = seeker.access(claim.mention, at=step)
            if got is not None:
                claim.status, claim.evidence_address, claim.note = got.status, got.address, got.note
                break


def _finalizing(mn: m.Mention, led: Ledger, config: m.ClaimConfig) -> bool:
    if mn.step == led.final_step and not mn.in_call:
        return True
    if mn.in_call and mn.tool is not None and config.is_write_tool(mn.tool):
        return True
    return mn.step in led.reply_steps and not mn.in_call


def _producer(t: Trajectory, tool_pos: int) -> int | None:
    """The decision step whose call or code produced the tool output at ``tool_pos``: the caller, else
    the code's author (``Trajectory.code_authors``, as ``judge.blame`` attributes it), else the latest
    decision step before it."""
    step = t.steps[tool_pos]
    hit = t.call_for(step)
    if hit is not None:
        return hit[0].index
    if tool_pos in t.code_authors:  # a code runner's output: the step that wrote the code
        return t.code_authors[tool_pos]
    for s in reversed(t.steps[:tool_pos]):
        if s.is_decision:
            return s.index
    return None


def _derive(t: Trajectory, led: Ledger) -> None:
    """Fill ``derived_from`` and push ``final_steps`` from derived claims back to their sources."""
    inputs: dict[int, list[str]] = {}
    for claim in led.claims:
        addr = claim.evidence_address or ""
        if claim.status not in (m.Support.DIRECT, m.Support.WEAK) or not addr.startswith("steps."):
            continue
        pos = int(addr.split(".")[1].split("[")[0])
        if t.steps[pos].kind != "tool":
            continue
        prod = _producer(t, pos)
        if prod is None:
            continue
        if prod not in inputs:  # the ids of the claims the producing step passed, ascending (once per step)
            passed = [led.by_key[mn.key] for mn in led.mentions.get(prod, [])
                      if (mn.in_call or mn.in_code) and mn.key in led.by_key]
            inputs[prod] = sorted({c.id for c in passed if c.step <= prod}, key=lambda i: int(i[1:]))
        claim.derived_from = [i for i in inputs[prod] if i != claim.id]  # (ids are unique per claim)
    by_id = {c.id: c for c in led.claims}
    for claim in reversed(led.claims):
        if not claim.final_steps:
            continue  # nothing to push (final_steps lists are kept sorted and unique)
        for src in claim.derived_from:
            d = by_id[src]
            d.final_steps = sorted(set(d.final_steps) | set(claim.final_steps))
