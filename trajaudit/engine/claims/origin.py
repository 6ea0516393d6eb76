"""Origin tracing: from a late symptom back to the decision that made it unrecoverable.

AgentRx defines the critical step as the *first unrecoverable failure*; DRIFT's Dependency Tracer
walks an error back along what it depends on. A run's decisive finding is often only where the
failure *surfaced*: a tool error, an "access denied", a content-filter refusal, a crash, the run
ending on a failed call. The decision that made it unavoidable came earlier — the instruction that
asked for the action, the call whose output fed it, the first of a loop of equivalent attempts, the
step that chose the failing sub-goal. This module finds that step with general structure only (no
agent, framework or tool names).

Public surface::

    trace = origin_of(trajectory, step, graph=None)   # OriginTrace(step, symptom, chain)
    trace.step                                         # the origin (== step when nothing earlier)
    trace.chain                                        # (Link(step, relation, note), ...) symptom first
    trace.depth                                        # len(chain) - 1
    is_outcome_finding(trajectory, record)             # the finding describes an outcome, not a choice
    origin_features(trajectory, cands, graph=None)     # per candidate step: ranker features

Dependencies followed from a decision step ``S`` (the first that applies, then again from there):

1. ``loop-start``: ``S`` repeats an earlier action of the same agent (same tool and arguments, or the
   same code block, or the same text) with only such repeats between: the first of the loop.
2. ``instructed-by``: the latest earlier decision step of *another* agent addressed to ``S``'s agent
   (``Step.metadata["target"]``, as adapters record "Orchestrator (-> WebSurfer)") or whose text
   names it (an orchestrator's or manager's instruction).
3. ``fed-by``: a value ``S`` passes to a call or code (a claim of the claim graph) came from a tool
   output: the decision step whose call or code produced that output; or it was first stated by an
   earlier decision step: that step.
4. ``sub-goal``: the earliest earlier decision step whose text already holds every content word
   (4+ letters, at least two) of ``S``'s call arguments: where that sub-goal was chosen.

The walk stops at a step with no dependency, at a step already visited, or after ``max_depth`` links.
Linear in the run's size per traced step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trajaudit.engine.dsl.regex.stored import module_pattern
from trajaudit.engine.trace.ir import Step, Trajectory

#: Finding targets that describe an outcome of earlier choices rather than a choice itself.
OUTCOME_TARGETS = frozenset({"system_failure", "guardrails_triggered"})
_WORD = module_pattern(r"[^\W\d_]{4,}")
_STOP = frozenset(
    "this that with from have what which when where there their about into than then them they will would "
    "could should these those been were your some more most also only just such very each other".split())


@dataclass(frozen=True)
class Link:
    """One hop of an origin trace: the step reached and how (``symptom``, ``loop-start``,
    ``instructed-by``, ``fed-by``, ``sub-goal``), with a short note citing what links them."""

    step: int
    relation: str
    note: str = ""


@dataclass(frozen=True)
class OriginTrace:
    """The walk from a symptom step back to its origin.

    Attributes:
        step: the origin: the earliest decision step reached (``symptom`` when nothing earlier).
        symptom: the step the walk started from.
        chain: the links, symptom first (``chain[0].relation == "symptom"``), origin last.
    """

    step: int
    symptom: int
    chain: tuple[Link, ...]

    @property
    def depth(self) -> int:
        """Number of hops from the symptom to the origin (0: the symptom is its own origin)."""
        return len(self.chain) - 1

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"step": self.step, "symptom": self.symptom, "depth": self.depth,
                "chain": [{"step": x.step, "relation": x.relation, "note": x.note} for x in self.chain]}


def is_outcome_finding(t: Trajectory, rec: Any) -> bool:
    """Whether a validation-log record describes an outcome (where a failure surfaced) rather than a
    choice: its targets name an outcome category (:data:`OUTCOME_TARGETS`), or it sits on a tool
    output that is an error (the tool refused, crashed or denied access)."""
    if OUTCOME_TARGETS.intersection(getattr(rec, "targets", ()) or ()):
        return True
    k = getattr(rec, "step", -1)
    if 0 <= k < len(t.steps):
        s = t.steps[k]
        return s.kind == "tool" and s.tool_output is not None and s.tool_output.is_error
    return False


def _signature(s: Step) -> tuple[Any, ...] | None:
    """What makes two actions equivalent: the calls (name + arguments), else the code blocks, else
    the whitespace-normalized text; ``None`` for an empty step."""
    if s.tool_calls:
        return ("calls", tuple((c.name, repr(c.arguments if c.arguments is not None else c.raw_arguments))
                               for c in s.tool_calls))
    blocks = _code_blocks(s.content)
    if blocks:
        return ("code", blocks)
    text = " ".join(s.content.split())
    return ("text", text) if text else None


def _code_blocks(text: str) -> tuple[str, ...]:
    if "```" not in text:
        return ()
    parts = text.split("```")
    return tuple(" ".join(p.split()) for p in parts[1::2] if p.strip())


def _norm_name(name: str | None) -> str:
    """Case folded, every run of whitespace, ``_`` and ``-`` one space, stripped: :func:`_norm_name_reference`
    without a regex (``str.split()`` and the regex's ``\\s`` split at the same characters; a test
    compares them over every code point). Names and whole step texts go through it."""
    return " ".join((name or "").casefold().replace("_", " ").replace("-", " ").split())


def _norm_name_reference(name: str | None) -> str:
    """The definition of :func:`_norm_name`."""
    return re.sub(r"[\s_\-]+", " ", (name or "").casefold()).strip()


def _loop_start(t: Trajectory, s: Step, memo: RunMemo | None = None) -> int | None:
    signature = _signature if memo is None else memo.signature
    sig = signature(s)
    if sig is None:
        return None
    first = None
    for d in reversed(t.steps[: s.index]):
        if not d.is_decision or d.agent != s.agent:
            continue
        if signature(d) == sig:
            first = d.index
            continue
        break  # another action of this agent ends the loop
    return first


def _instructed_by(t: Trajectory, s: Step, memo: RunMemo | None = None) -> int | None:
    name = _norm_name(s.agent)
    if len(name) < 3 or sum(1 for a in t.agents if a) < 2:
        return None
    norm_content = (lambda d: _norm_name(d.content)) if memo is None else memo.norm_content
    for d in reversed(t.steps[: s.index]):
        if not d.is_decision or d.agent == s.agent:
            continue
        target = d.metadata.get("target") if isinstance(d.metadata, dict) else None
        if (isinstance(target, str) and _norm_name(target) == name) or name in norm_content(d):
            return d.index
    return None


def _fed_by(t: Trajectory, s: Step, graph: Any, memo: RunMemo | None = None) -> tuple[int, str] | None:
    if graph is None:
        return None
    best: tuple[int, str] | None = None
    for c in (getattr(graph, "claims", ()) if memo is None else memo.claims_used_at(s.index)):
        used = c.step == s.index or s.index in c.reused_in
        if not used or (c.step == s.index and not (c.mention.in_call or c.mention.in_code)):
            continue
        src: int | None = None
        note = ""
        if c.step < s.index:
            src, note = c.step, f"{c.kind} {c.text[:40]!r} first stated there"
        addr = c.evidence_address or ""
        if addr.startswith("steps."):
            pos = int(addr.split(".")[1].split("[")[0])
            if t.steps[pos].kind == "tool":
                prod = _producer(t, pos)
                if prod is not None and prod < s.index:
                    src, note = prod, f"{c.kind} {c.text[:40]!r} came from the output at steps.{pos}"
        if src is not None and src < s.index and t.steps[src].is_decision and (best is None or src < best[0]):
            best = (src, note)
    return best


def _producer(t: Trajectory, pos: int) -> int | None:
    hit = t.call_for(t.steps[pos])
    if hit is not None:
        return hit[0].index
    return t.code_authors.get(pos)


def _arg_words(s: Step) -> set[str]:
    words: set[str] = set()
    for c in s.tool_calls:
        for v in _leaves(c.arguments if c.arguments is not None else c.raw_arguments):
            if isinstance(v, str):
                words.update(w.casefold() for w in _WORD.findall(v))
    return words - _STOP


def _leaves(obj: Any) -> Iterable[Any]:
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _leaves(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _leaves(v)
    else:
        yield obj


def _prose_words(d: Step) -> set[str]:
    """The case-folded words (4+ letters) of a step's prose: what :func:`_sub_goal` compares."""
    return {w.casefold() for w in _WORD.findall(_prose(d.content))}


def _sub_goal(t: Trajectory, s: Step, memo: RunMemo | None = None) -> int | None:
    words = _arg_words(s)
    if len(words) < 2:
        return None
    if memo is None:
        for d in t.steps[: s.index]:
            if d.is_decision and words <= _prose_words(d):
                return d.index
        return None
    for d in t.steps[: s.index]:
        # a word of the prose, case folded, is in the case-folded text (casefold maps each character on
        # its own, and a word holds no space a code block became): a step lacking one is no superset
        if d.is_decision and all(w in memo.folded(d) for w in words) and words <= memo.prose_words(d):
            return d.index
    return None


_BLOCK = module_pattern(r"```.*?(?:```|\Z)", re.S)


def _prose(text: str) -> str:
    """The text without its fenced code blocks (a plan states a sub-goal in prose)."""
    return _BLOCK.sub(" ", text) if "```" in text else text


class RunMemo:
    """What the walks of one run compute about its steps, computed once per step and kept for the
    other walks of the same run and claim graph (:func:`origin_features` walks up to one trace per
    candidate, and each walk revisits the earlier steps): a step's action signature, its content with
    names folded, its case-folded content, the words of its prose, and the graph's claims used at each
    step, in claim order.

    Each entry is a pure function of a (frozen) step, or of the graph as it was when first asked: a
    memo is for one state of a run and its graph (make a new one when the graph grows).
    """

    def __init__(self, t: Trajectory, graph: Any = None) -> None:
        self.t, self.graph = t, graph
        self._sig: dict[int, tuple[Any, ...] | None] = {}
        self._norm: dict[int, str] = {}
        self._words: dict[int, set[str]] = {}
        self._folded: dict[int, str] = {}
        self._uses: dict[int, list[Any]] | None = None

    def signature(self, s: Step) -> tuple[Any, ...] | None:
        """:func:`_signature` of ``s``."""
        k = s.index
        if k not in self._sig:
            self._sig[k] = _signature(s)
        return self._sig[k]

    def norm_content(self, s: Step) -> str:
        """:func:`_norm_name` of ``s.content``."""
        got = self._norm.get(s.index)
        if got is None:
            got = self._norm[s.index] = _norm_name(s.content)
        return got

    def folded(self, s: Step) -> str:
        """``s.content.casefold()``."""
        got = self._folded.get(s.index)
        if got is None:
            got = self._folded[s.index] = s.content.casefold()
        return got

    def prose_words(self, s: Step) -> set[str]:
        """:func:`_prose_words` of ``s`` (the same set object on every call: callers only compare)."""
        got = self._words.get(s.index)
        if got is None:
            got = self._words[s.index] = _prose_words(s)
        return got

    def claims_used_at(self, k: int) -> list[Any]:
        """The graph's claims that step ``k`` uses (stated there, or reused there: ``c.step == k or k
        in c.reused_in``), in the graph's order: what :func:`_fed_by` filters for ``k``."""
        if self._uses is None:
            uses: dict[int, list[Any]] = {}
            for c in getattr(self.graph, "claims", ()):
                uses.setdefault(c.step, []).append(c)
                if c.reused_in:  # each step once per claim, the claim's own step already filed
                    for j in set(c.reused_in) - {c.step}:
                        uses.setdefault(j, []).append(c)
            self._uses = uses
        return self._uses.get(k, [])


def origin_of(t: Trajectory, step: int, graph: Any = None, max_depth: int = 8, *,
              memo: RunMemo | None = None) -> OriginTrace:
    """Walk back from decision step ``step`` along the run's dependencies (module docstring) to the
    earliest decision it depends on.

    Args:
        t: the run.
        step: the symptom's decision step (a non-decision step is its own origin).
        graph: the run's claim graph (:func:`trajaudit.engine.claims.build_claim_graph`), for
            ``fed-by`` links; ``None`` leaves them out.
        max_depth: the most links followed.
        memo: a :class:`RunMemo` of ``t`` and ``graph`` to share what the walk computes about the
            run's steps with other walks of the same run (the same trace either way).

    Returns:
        an :class:`OriginTrace`; ``trace.step == step`` when nothing earlier is linked.
    """
    if memo is not None and (memo.t is not t or memo.graph is not graph):
        memo = None  # another run's or graph's memo: walk without one
    chain = [Link(step, "symptom")]
    seen = {step}
    cur = step
    while len(chain) <= max_depth and 0 <= cur < len(t.steps) and t.steps[cur].is_decision:
        s = t.steps[cur]
        nxt: tuple[int, str, str] | None = None
        loop = _loop_start(t, s, memo)
        if loop is not None:
            nxt = (loop, "loop-start", f"steps.{cur} repeats the action first taken at steps.{loop}")
        if nxt is None:
            k = _instructed_by(t, s, memo)
            if k is not None:
                nxt = (k, "instructed-by", f"steps.{k} names {s.agent} and asked for the action")
        if nxt is None:
            fed = _fed_by(t, s, graph, memo)
            if fed is not None:
                nxt = (fed[0], "fed-by", fed[1])
        if nxt is None:
            k = _sub_goal(t, s, memo)
            if k is not None:
                nxt = (k, "sub-goal", f"steps.{k} already states what steps.{cur} acts on")
        if nxt is None or nxt[0] in seen or nxt[0] >= cur:
            break
        seen.add(nxt[0])
        chain.append(Link(*nxt))
        cur = nxt[0]
    return OriginTrace(step=chain[-1].step, symptom=step, chain=tuple(chain))


def origin_features(t: Trajectory, cands: Sequence[tuple[int, Sequence[Any]]], graph: Any = None, *,
                    memo: RunMemo | None = None) -> dict[int, dict[str, float]]:
    """Per-candidate quantities for a ranker (all floats).

    Args:
        t: the run.
        cands: ``[(decision step, its finding records)]``.
        graph: the claim graph, or ``None``.
        memo: the :class:`RunMemo` of ``t`` and ``graph`` the walks share (a new one by default).

    Returns:
        ``{step: {"is_late_symptom", "is_origin_of_late_symptom", "dependency_depth",
        "dependents"}}`` for every candidate step and every origin found: ``is_late_symptom`` 1 when
        all the step's findings are outcome findings (:func:`is_outcome_finding`) and its trace
        reaches an earlier step; ``is_origin_of_late_symptom`` 1 for the origin of such a trace;
        ``dependency_depth`` the hops from the step to its own origin; ``dependents`` how many
        candidates' traces pass through the step.
    """
    out: dict[int, dict[str, float]] = {}
    if memo is None:
        memo = RunMemo(t, graph)

    def row(k: int) -> dict[str, float]:
        return out.setdefault(k, {"is_late_symptom": 0.0, "is_origin_of_late_symptom": 0.0,
                                  "dependency_depth": 0.0, "dependents": 0.0})

    for step, recs in cands:
        tr = origin_of(t, step, graph, memo=memo)
        r = row(step)
        r["dependency_depth"] = float(tr.depth)
        for link in tr.chain[1:]:
            row(link.step)["dependents"] += 1.0
        recs = list(recs)
        if recs and tr.step != step and all(is_outcome_finding(t, x) for x in recs):
            r["is_late_symptom"] = 1.0
            row(tr.step)["is_origin_of_late_symptom"] = 1.0
    return out
