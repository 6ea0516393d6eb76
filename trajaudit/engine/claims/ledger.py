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

:func:`build_ledger` reads a finished run; :class:`LedgerBuilder` builds the same ledger one step at
a time (a monitored run: cost per added step independent of the run's length; what depends on
later steps is settled when they arrive or at ``finish``; see docs/claims.md "Incremental ledger").
"""

from __future__ import annotations

import dataclasses
import logging
from bisect import bisect_right, insort
from dataclasses import dataclass, field

from trajaudit.engine.claims import model as m
from trajaudit.engine.claims.evidence_index import EvidenceIndex, GrowingEvidenceIndex
from trajaudit.engine.claims.extract import ClaimExtractor, RegexExtractor, extract_mentions, step_mentions
from trajaudit.engine.claims.normalize import norm_text
from trajaudit.engine.claims.support import Assessment, SupportSeeker
from trajaudit.engine.trace.ir import FENCE_RE, Step, Trajectory

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
    steps = t.steps
    for i in range(tool_pos - 1, -1, -1):  # (indexes, not a reversed copy of the prefix)
        if steps[i].is_decision:
            return steps[i].index
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


# -- the incremental ledger ------------------------------------------------------------------------


class RunView:
    """A run that grows one step at a time, read as the ledger reads a :class:`Trajectory`
    (``steps``, ``task``, ``system_prompts``, ``call_for``, ``output_tool_name``, ``code_authors``):
    the call index and the code authors are kept up to date per added step instead of being
    recomputed for each prefix (``Trajectory``'s cached properties are built over the whole run).

    Args:
        task, system_prompts: the run's task and per-agent prompts.
    """

    def __init__(self, task: str, system_prompts: dict[str, str]) -> None:
        self.task = task
        self.system_prompts = system_prompts
        self.steps: list[Step] = []
        self.call_index: dict[str, tuple[int, int]] = {}
        self.code_authors: dict[int, int] = {}
        self._author: int | None = None

    def append(self, step: Step) -> None:
        """Add the run's next step (``step.index == len(self.steps)``), as ``Trajectory`` indexes it."""
        self.steps.append(step)
        for j, c in enumerate(step.tool_calls):
            if c.id is not None:
                self.call_index.setdefault(c.id, (step.index, j))
        if step.kind == "tool":  # (Trajectory.code_authors, one step at a time)
            if self._author is not None and (step.tool_output is None or step.tool_output.call_id is None):
                self.code_authors[step.index] = self._author
            self._author = None
        elif step.is_decision and FENCE_RE.search(step.content):
            self._author = step.index

    # the same lookups as Trajectory's, over this view's call index
    call_for = Trajectory.call_for
    output_tool_name = Trajectory.output_tool_name


class LedgerBuilder:
    """The claim ledger of a run built one step at a time: ``add(step)`` per step, ``finish(t)``
    gives the :class:`Ledger` that :func:`build_ledger` gives on the run so far (the same claims,
    ids, statuses, mentions, final and write steps; ``finish`` does not change the builder, so it
    can be called on every prefix and the run continued).

    What ``add`` does per step (cost independent of the run's length): file the step's evidence in a
    :class:`~.evidence_index.GrowingEvidenceIndex`, extract a decision step's mentions, introduce its
    new claims and assess them against the evidence before them (``SupportSeeker.assess_unconfirmed``),
    record reuses, write calls and replies. What reads past a step is settled later:

    - a URL or path claim not found in the evidence is checked against the tool output of its own
      step (``SupportSeeker.access``), known once the next decision or user step arrives (or at
      ``finish``): its assessment waits until then;
    - whether the run is a conversation (a user turn after the first decision step) decides whether
      replies finalize claims: the reply steps are kept and applied when the first such turn arrives;
    - the task: with ``task=None`` it is the first user step's text (as ``Monitor`` and the chat
      adapters take it); before that step the run has no task, and when it arrives the steps so far
      (those before the first user turn) are added again with it (the opening brief and the task
      source depend on it).

    ``finish`` does the end-of-run parts on copies, in time linear in the number of claims (no
    text is extracted or scanned again): the final-answer step and its claim (claim ids follow it),
    confirmation by later user turns (``SupportSeeker.confirm``, postings lookups), the access
    check of reused URLs and paths (``_verify_access``) and derivations (``_derive``).

    Args:
        config: the :class:`~.model.ClaimConfig`.
        extractors: as :func:`build_ledger` (an extractor may read the step and the steps before it).
        task: the run's task; ``None``: the first user step's text.
        system_prompts: per-agent prompts (evidence from the start).

    Raises:
        ValueError: (``add``) a step whose index is not its position in the run.
    """

    def __init__(self, config: m.ClaimConfig, extractors: list[ClaimExtractor] | None = None, *,
                 task: str | None = None, system_prompts: dict[str, str] | None = None) -> None:
        self.config = config
        self.extractors = list(extractors) if extractors is not None else [RegexExtractor()]
        self._auto_task = task is None
        self._users_seen = False
        self._start(task or "", dict(system_prompts or {}))

    def _start(self, task: str, system_prompts: dict[str, str]) -> None:
        self.run = RunView(task, system_prompts)
        self.index = GrowingEvidenceIndex(task, system_prompts)
        self.seeker = SupportSeeker(self.run, self.index, self.config)  # type: ignore[arg-type]
        self.claims: list[m.Claim] = []  # in order of introduction; ids, statuses and derivations set by finish
        self._base: list[Assessment | None] = []  # per claim: its assessment before confirmation
        self._at: dict[tuple[str, ...], int] = {}  # ledger key -> position in self.claims
        self._claim_steps: list[int] = []  # per claim: its step (nondecreasing)
        self.mentions: dict[int, list[m.Mention]] = {}
        self.incomplete: list[str] = []
        self.write_steps: list[int] = []
        self.texts: list[int] = []  # decision steps with text: the replies, in a conversation
        self.inputs: frozenset[int] = frozenset()
        self.brief: int | None = None
        self.conversational = False
        self._first_decision: int | None = None
        self._last_text: int | None = None  # the final-answer candidates (final_answer_step)
        self._last_stated: int | None = None
        self._waiting: list[int] = []  # URL/path claims whose assessment needs their step's tool output
        self._replies: dict[int, list[int]] = {}  # claim -> its reply steps, until the run is a conversation

    def __len__(self) -> int:
        return len(self.run.steps)

    def add(self, step: Step) -> None:
        """Take the run's next step (its ``index`` must be its position)."""
        k = len(self.run.steps)
        if step.index != k:
            raise ValueError(f"steps.{step.index}: expected step {k} (steps are added in order, index = position)")
        if self._auto_task and not self._users_seen and step.kind == "user":
            self._users_seen = True
            if step.content != self.run.task:  # the task is known only now: add the steps so far again with it
                steps = [*self.run.steps, step]
                self._start(step.content, self.run.system_prompts)
                for s in steps:
                    self._step(s)
                return
        self._step(step)

    def _step(self, step: Step) -> None:
        cfg, i = self.config, step.index
        self.run.append(step)
        is_input = False
        if i == 0:
            self.brief = brief_step(self.run, cfg)  # type: ignore[arg-type]
            if cfg.brief_is_input and self.brief is not None:
                self.inputs, is_input = frozenset((0,)), True
        self.index.add_step(step, is_input)
        if step.is_decision or step.kind == "user":
            self._settle_waiting()
        if any(cfg.is_write_tool(c.name) for c in step.tool_calls):
            self.write_steps.append(i)
        if step.kind == "user" and self._first_decision is not None and not self.conversational:
            self._converse()
        if not step.is_decision:
            return
        if self._first_decision is None:
            self._first_decision = i
        text = bool(step.content.strip())
        if text:
            self.texts.append(i)
        if not is_input:
            self._mentions(step, text)
        if text and norm_text(step.content) not in cfg.termination_tokens:
            self._last_text = i
            if any(not mn.in_call and not mn.in_code for mn in self.mentions.get(i, ())):
                self._last_stated = i

    def _mentions(self, step: Step, text: bool) -> None:
        cfg, i = self.config, step.index
        got = step_mentions(self.run, step, cfg, self.extractors, self.incomplete)  # type: ignore[arg-type]
        if not got:
            return
        self.mentions[i] = got
        reply = cfg.replies_are_final and text
        for mn in got:
            pos = self._at.get(mn.key)
            if pos is None:
                pos = self._at[mn.key] = len(self.claims)
                self.claims.append(m.Claim(id="", kind=mn.kind, value=mn.value, text=mn.text, address=mn.address,
                                           step=i, agent=step.agent, mention=mn))
                self._claim_steps.append(i)
                if mn.kind in (m.KIND_URL, m.KIND_PATH):  # may need its step's tool output (access)
                    self._base.append(None)
                    self._waiting.append(pos)
                else:
                    self._base.append(self.seeker.assess_unconfirmed(mn, got))
            claim = self.claims[pos]
            if i > claim.step and (not claim.reused_in or claim.reused_in[-1] != i):
                claim.reused_in.append(i)
            if mn.in_call:
                if mn.tool is not None and cfg.is_write_tool(mn.tool):
                    _append_step(claim.final_steps, i)
            elif reply:
                if self.conversational:
                    _append_step(claim.final_steps, i)
                else:
                    _append_step(self._replies.setdefault(pos, []), i)

    def _settle_waiting(self) -> None:
        for pos in self._waiting:
            c = self.claims[pos]
            self._base[pos] = self.seeker.assess_unconfirmed(c.mention, self.mentions[c.step])
        self._waiting = []

    def _converse(self) -> None:
        """The run became a conversation: replies so far finalize their claims (once)."""
        self.conversational = True
        for pos, steps in self._replies.items():
            claim = self.claims[pos]
            claim.final_steps = sorted(set(claim.final_steps).union(steps))
        self._replies = {}

    def final_step(self, t: Trajectory) -> int | None:
        """:func:`final_answer_step` of the run so far (``t``: its trajectory, for ``final_answer``)."""
        if t.final_answer is None or self._last_text is None:
            return None
        return self._last_stated if self._last_stated is not None else self._last_text

    def _matches(self, t: Trajectory) -> bool:
        return len(t.steps) == len(self.run.steps) and t.task == self.run.task \
            and t.system_prompts == self.run.system_prompts

    def finish(self, trajectory: Trajectory) -> Ledger:
        """The ledger of the run so far (see the class docstring); the builder is not changed.

        ``trajectory`` is the run so far (its ``final_answer``; its steps must be the ones added).
        When its task, system prompts or length differ from what the builder was given, the ledger
        is built from its steps by a fresh builder (the answer stays right; the cost is then the
        whole run's). The ledger's ``index`` is the builder's own (it goes on growing with the run)."""
        if not self._matches(trajectory):
            other = LedgerBuilder(self.config, self.extractors, task=trajectory.task,
                                  system_prompts=dict(trajectory.system_prompts))
            for s in trajectory.steps:
                other.add(s)
            return other.finish(trajectory)
        fin = self.final_step(trajectory)
        mentions = dict(self.mentions)
        order: list[int | None] = list(range(len(self.claims)))  # None: the final answer's claim
        stated: set[int] = set()
        if fin is not None:
            text = self.run.steps[fin].content[: self.config.max_text_chars]
            final = m.Mention(step=fin, address=f"steps.{fin}.content[0:{len(text)}]", kind=m.KIND_FINAL,
                              value=norm_text(text)[:300], text=text[:300], slot=("final",))
            mentions[fin] = [*mentions.get(fin, ()), final]
            order.insert(bisect_right(self._claim_steps, fin), None)
            stated = {self._at[mn.key] for mn in self.mentions.get(fin, ()) if not mn.in_call}
        led = Ledger(mentions=mentions, final_step=fin, brief_step=None if self.inputs else self.brief,
                     write_steps=set(self.write_steps), incomplete=list(self.incomplete), index=self.index,
                     reply_steps=set(self.texts) if self.config.replies_are_final and self.conversational else set())
        for pos in order:
            claim = self._final_claim(fin, mentions) if pos is None else self._copy(pos, fin if pos in stated else None)
            claim.id = f"c{len(led.claims) + 1}"
            led.claims.append(claim)
            led.by_key[claim.mention.key] = claim
        _verify_access(led, self.seeker)
        _derive(self.run, led)  # type: ignore[arg-type]
        return led

    def _copy(self, pos: int, fin: int | None) -> m.Claim:
        """Claim ``pos`` as the run so far leaves it: assessed (a waiting one now), confirmed by the
        user turns so far, finalized at ``fin`` (the final answer states it)."""
        c = self.claims[pos]
        got = self._base[pos]
        if got is None:
            got = self.seeker.assess_unconfirmed(c.mention, self.mentions[c.step])
        got = self.seeker.confirm(c.mention, got)
        final = list(c.final_steps)
        if fin is not None and fin not in final:
            insort(final, fin)
        return dataclasses.replace(c, status=got.status, evidence_address=got.address, evidence_value=got.value,
                                   note=got.note, reused_in=list(c.reused_in), derived_from=[], final_steps=final)

    def _final_claim(self, fin: int | None, mentions: dict[int, list[m.Mention]]) -> m.Claim:
        assert fin is not None
        mn = mentions[fin][-1]
        got = self.seeker.assess(mn, mentions[fin])
        return m.Claim(id="", kind=mn.kind, value=mn.value, text=mn.text, address=mn.address, step=fin,
                       agent=self.run.steps[fin].agent, mention=mn, status=got.status, evidence_address=got.address,
                       evidence_value=got.value, note=got.note, final_steps=[fin])


def _append_step(steps: list[int], i: int) -> None:
    """Append step ``i`` to an ascending list of steps unless it is already last."""
    if not steps or steps[-1] != i:
        steps.append(i)
