"""The per-run evidence index (DRIFT §Support Seeker): built once, queried per claim.

Evidence is everything an agent could see that no agent produced: the task, per-agent system prompts
(position -1, visible from the start), and every system, user and tool step. Agent messages are not
evidence: a value first written by an agent is a claim there, and later mentions are reuses.

The index holds (a) ``value → occurrences`` for identifiers, numbers, dates, URLs and paths found
by the extraction patterns and by walking tool outputs parsed as JSON, (b) ``word → sources`` postings
for phrase lookups (candidate sources are intersected before any substring check, so a claim never
rescans the run), and (c) *slot facts* from JSON tool outputs: ``(object, attribute) → value`` and
collections with their sizes and per-attribute counts (for CONFLICTING checks). Building is linear in
the run's size; each JSON tool output is parsed once (outputs above ``max_json_chars`` are not parsed).
The analysis of each text is position-free and memoized per process (:mod:`.sources`): a text seen
before in the batch (a shared system prompt, a repeated lookup) is only replayed at its position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from trajaudit.engine.claims.patterns import WORD_RE
from trajaudit.engine.claims.sources import Digest, Members, digest
from trajaudit.engine.ir import Trajectory


@dataclass(frozen=True)
class Source:
    """One evidence text: ``pos`` is the step index (-1 for task/system prompts), ``kind`` the step kind."""

    pos: int
    address: str
    text: str
    kind: str
    is_error: bool = False


class Hit(NamedTuple):
    """An occurrence of a value in evidence: source number, step position and exact address (a named
    tuple: hundreds are made per run)."""

    src: int
    pos: int
    address: str


@dataclass
class Collection:
    """A list or id-keyed mapping of objects in one JSON tool output.

    Attributes:
        pos, address: where (``steps.5.content.variants``).
        key: the collection's key name, singular (``variant``), "" for a top-level list.
        size: number of members.
        members: per member, its scalar attributes flattened one level (``{"available": True,
            "color": "red"}`` from ``{"available": true, "options": {"color": "red"}}``); strings
            normalized. At most ``MAX_MEMBERS`` are kept (``size`` is always exact). Computed on first
            access; member dicts may be shared with other runs' indexes (memoized analysis): read-only.
    """

    pos: int
    address: str
    key: str
    size: int
    source: Members = field(repr=False, compare=False)

    @cached_property
    def members(self) -> list[dict[str, Any]]:
        """The flattened members (see the class docstring)."""
        return list(self.source.flat())

    def bool_attrs(self) -> set[str]:
        """Attribute names holding booleans in some member."""
        return {k for mem in self.members for k, v in mem.items() if isinstance(v, bool)}



class EvidenceIndex:
    """Index of the evidence of one trajectory.

    Args:
        trajectory: the run.
        max_json_chars: tool outputs longer than this are indexed as text only (no JSON walk).
    """

    def __init__(self, trajectory: Trajectory, max_json_chars: int = 2_000_000) -> None:
        self.sources: list[Source] = []
        # value -> sources holding it (ascending); the address suffix is looked up in the digest on a hit
        self.values: dict[str, list[int]] = {}
        self.postings: dict[str, list[int]] = {}
        # (object, attribute) -> [(pos, source, address suffix, raw value)] in indexing order
        self.facts: dict[tuple[str, str], list[tuple[int, int, str, Any]]] = {}
        self.collections: dict[int, list[Collection]] = {}
        self.objects: dict[str, int] = {}
        self.user_positions: list[int] = []
        self._digests: list[Digest] = []
        self.max_json_chars = max_json_chars
        if trajectory.task:
            self._add(Source(-1, "task", trajectory.task, "task"))
        for agent, prompt in trajectory.system_prompts.items():
            if isinstance(prompt, str) and prompt:
                self._add(Source(-1, f"system_prompts.{agent}", prompt, "system"))
        for step in trajectory.steps:
            if step.is_decision or not step.content:
                continue
            err = bool(step.tool_output and step.tool_output.is_error)
            self._add(Source(step.index, f"steps.{step.index}.content", step.content, step.kind, err))
            if step.kind == "user":
                self.user_positions.append(step.index)

    # -- building ---------------------------------------------------------------------------------
    def _add(self, src: Source) -> None:
        """Index one source by replaying its (memoized, position-free) :func:`~.sources.digest`:
        only source numbers are filed here; addresses are joined from the digest when a query hits."""
        sid = len(self.sources)
        self.sources.append(src)
        d = digest(src.text, src.kind, self.max_json_chars)
        self._digests.append(d)
        pos = src.pos
        for index, keys in ((self.values, d.value_map), (self.postings, d.words)):
            for key in keys:
                lst = index.get(key)
                if lst is None:
                    index[key] = [sid]
                else:
                    lst.append(sid)
        facts = self.facts
        for ident, attr, suffix, raw in d.facts:
            lst = facts.get((ident, attr))
            if lst is None:
                facts[(ident, attr)] = [(pos, sid, suffix, raw)]
            else:
                lst.append((pos, sid, suffix, raw))
        for ident in d.objects:
            self.objects.setdefault(ident, pos)
        for suffix, key, size, members in d.collections:
            self.collections.setdefault(pos, []).append(
                Collection(pos, src.address + suffix, key, size, members))

    def _hit(self, sid: int, key: str) -> Hit:
        src = self.sources[sid]
        return Hit(sid, src.pos, src.address + self._digests[sid].value_map[key])

    # -- queries ----------------------------------------------------------------------------------
    def latest(self, key: str, before: int) -> Hit | None:
        """The latest occurrence of normalized ``key`` in evidence at a position < ``before``."""
        for sid in reversed(self.values.get(key, ())):
            if self.sources[sid].pos < before:
                return self._hit(sid, key)
        for sid in reversed(self.postings.get(key, ())):  # a single word: its postings
            src = self.sources[sid]
            if src.pos < before:
                return Hit(sid, src.pos, src.address)
        return None

    def after(self, key: str, pos: int, kinds: tuple[str, ...] = ("user",)) -> Hit | None:
        """The first occurrence of ``key`` at a position > ``pos`` in sources of the given kinds."""
        for sid in self.values.get(key, ()):
            src = self.sources[sid]
            if src.pos > pos and src.kind in kinds:
                return self._hit(sid, key)
        for sid in self.postings.get(key, ()):
            src = self.sources[sid]
            if src.pos > pos and src.kind in kinds:
                return Hit(sid, src.pos, src.address)
        return None

    def normalized(self, sid: int) -> str:
        """The source's text, normalized (cached; computed at most once per source)."""
        return self._digests[sid].normalized

    def phrase(self, phrase: str, before: int) -> tuple[Hit | None, Hit | None]:
        """(exact, partial): the latest source before ``before`` containing the normalized phrase as a
        substring, and the latest containing all its words (not contiguously); ``None`` when absent."""
        toks = WORD_RE.findall(phrase.casefold())
        if not toks:
            return None, None
        lists = sorted((self.postings.get(t, []) for t in set(toks)), key=len)
        if not lists[0]:
            return None, None
        cands = set(lists[0])
        for lst in lists[1:]:
            cands.intersection_update(lst)
            if not cands:
                return None, None
        cands_before = sorted((s for s in cands if self.sources[s].pos < before), reverse=True)
        partial = None
        for sid in cands_before:
            src = self.sources[sid]
            hit = Hit(sid, src.pos, src.address)
            if phrase in self.normalized(sid):
                return hit, partial or hit
            partial = partial or hit
        return None, partial

    def fact(self, obj: str, attr: str, before: int) -> tuple[int, str, Any] | None:
        """The latest ``(pos, address, raw value)`` of attribute ``attr`` of object ``obj`` before ``before``."""
        best = None
        for f in self.facts.get((obj, attr), ()):
            if f[0] < before:
                best = f
        return None if best is None else (best[0], self.sources[best[1]].address + best[2], best[3])

    def has_object(self, obj: str, before: int) -> bool:
        """True when some fact about object ``obj`` is visible before ``before``."""
        first = self.objects.get(obj)
        return first is not None and first < before

    def latest_collections(self, before: int) -> list[Collection]:
        """Collections of the latest tool output before ``before`` that has any ("the latest evidence")."""
        poss = [p for p in self.collections if p < before]
        return self.collections[max(poss)] if poss else []

    def numbers_near(self, before: int, sources: int = 3, limit: int = 60) -> list[tuple[float, Hit]]:
        """Distinct numbers of the last ``sources`` evidence sources before ``before`` (for derivations;
        each source keeps its first 200 numbers, recorded while indexing)."""
        out: dict[float, Hit] = {}
        taken = 0
        for sid in range(len(self.sources) - 1, -1, -1):
            src = self.sources[sid]
            if src.pos >= before:
                continue
            for v, suffix in self._digests[sid].numbers:
                if len(out) >= limit:
                    break
                if v not in out:
                    out[v] = Hit(sid, src.pos, src.address + suffix)
            taken += 1
            if taken >= sources or len(out) >= limit:
                break
        return list(out.items())

