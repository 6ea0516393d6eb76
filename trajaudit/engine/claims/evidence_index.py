"""The per-run evidence index (DRIFT §Support Seeker): built once, queried per claim.

Evidence is everything an agent could see that no agent produced: the task, per-agent system prompts
(position -1, visible from the start), every system, user and tool step, and the observation a
browsing or file agent's message embeds (:mod:`trajaudit.engine.trace.observation`: the page or file it was
shown, visible to that step's own claims and later ones). Agent messages are otherwise not evidence:
a value first written by an agent is a claim there, and later mentions are reuses.

The index answers (a) where a normalized value occurs (identifiers, numbers, dates, URLs and paths
found by the extraction patterns and by walking tool outputs parsed as JSON), (b) which sources hold
all words of a phrase, and (c) *slot facts* from JSON tool outputs: ``(object, attribute) → value`` and
collections with their sizes and per-attribute counts (for CONFLICTING checks). Each JSON tool output
is parsed once (outputs above ``max_json_chars`` are not parsed). The analysis of each text is
position-free and memoized per process (:mod:`.sources`): a text seen before in the batch (a shared
system prompt, a repeated lookup) is analysed once. Building a run's index only files its sources'
digests; a query looks its key up in the digests of the sources it may see, latest first (a run has
a few dozen sources, and a claim asks a handful of queries), so no value or word is copied per run.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from trajaudit.engine.claims.patterns import WORD_RE, noise_spans
from trajaudit.engine.claims.sources import NUMBER_WORD_VALUES, Digest, Members, digest
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.engine.trace.observation import observation_start

_MAX_NOISE_SCAN = 200_000


def _alternate(spans: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """``[gap, span, gap, span, …, gap]`` covering ``[0, size)``: spans at odd positions."""
    out: list[tuple[int, int]] = []
    prev = 0
    for a, b in spans:
        out.append((prev, a))
        out.append((a, b))
        prev = b
    out.append((prev, size))
    return out


@dataclass(frozen=True, slots=True)
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
        inputs: decision steps that are the run's input (an opening brief restating the task:
            :func:`~trajaudit.engine.claims.ledger.input_steps`); their text is evidence of kind
            ``task``, visible from that step on.
    """

    def __init__(self, trajectory: Trajectory, max_json_chars: int = 2_000_000,
                 inputs: frozenset[int] = frozenset()) -> None:
        self.sources: list[Source] = []
        self.user_positions: list[int] = []
        self.user_sources: list[int] = []  # source numbers of the user steps, ascending
        self._digests: list[Digest | None] = []  # computed on first use (_digest)
        self._collections: dict[int, list[Collection]] = {}
        self._pos: list[float] = []  # source positions (observations: step - 0.5), nondecreasing
        self.max_json_chars = max_json_chars
        if trajectory.task:
            self._add(Source(-1, "task", trajectory.task, "task"))
        for agent, prompt in trajectory.system_prompts.items():
            if isinstance(prompt, str) and prompt:
                self._add(Source(-1, f"system_prompts.{agent}", prompt, "system"))
        for step in trajectory.steps:
            self.add_step(step, step.index in inputs)

    def add_step(self, step: Step, is_input: bool = False) -> None:
        """File the evidence of the run's next step (steps are added in order; the constructor adds
        a whole run's). ``is_input``: the step is the run's input (an opening brief), evidence of
        kind ``task``."""
        if is_input and step.content:
            self._add(Source(step.index, f"steps.{step.index}.content", step.content, "task"),
                      key=step.index - 0.5)
            return
        if step.is_decision:
            spans = noise_spans(step.content[:_MAX_NOISE_SCAN])
            if spans:  # runtime output pasted into the message is evidence (claims/noise.py)
                kept = "".join(step.content[a:b] if i % 2 else " " * (b - a)
                               for i, (a, b) in enumerate(_alternate(spans, len(step.content))))
                self._add(Source(step.index, f"steps.{step.index}.content", kept, "tool"),
                          key=step.index - 0.5)
            k = observation_start(step.content)
            if k is not None:  # an observation embedded in the agent's message (engine/trace/observation.py)
                # (the said part blanked, so offsets in the digest stay offsets in the content;
                # sorted just before the step: its own claims see it)
                self._add(Source(step.index, f"steps.{step.index}.content",
                                 " " * k + step.content[k:], "tool"), key=step.index - 0.5)
            return
        if not step.content:
            return
        err = bool(step.tool_output and step.tool_output.is_error)
        if step.kind == "user":
            self.user_positions.append(step.index)
            self.user_sources.append(len(self.sources))
        self._add(Source(step.index, f"steps.{step.index}.content", step.content, step.kind, err))

    # -- building ---------------------------------------------------------------------------------
    def _add(self, src: Source, key: float | None = None) -> None:
        """File one source; its (memoized, position-free) :func:`~.sources.digest` is computed when a
        query first looks at it. Nothing is replayed per value or word: queries look values, words and
        facts up in the digests of the sources they may see (a few dozen per run), so a run pays only
        for what its claims ask — evidence after a run's last claim is never analysed."""
        self.sources.append(src)
        self._pos.append(src.pos if key is None else key)
        self._digests.append(None)

    def _digest(self, sid: int) -> Digest:
        d = self._digests[sid]
        if d is None:
            src = self.sources[sid]
            d = self._digests[sid] = digest(src.text, src.kind, self.max_json_chars)
        return d

    def _hit(self, sid: int, key: str) -> Hit:
        src = self.sources[sid]
        return Hit(sid, src.pos, src.address + self._digest(sid).suffix(key))

    def _before(self, before: int) -> range:
        """Source numbers with a position < ``before``, latest first."""
        return range(bisect_left(self._pos, before) - 1, -1, -1)

    # -- queries ----------------------------------------------------------------------------------
    def latest(self, key: str, before: int) -> Hit | None:
        """The latest occurrence of normalized ``key`` in evidence at a position < ``before``."""
        digests, get = self._digests, self._digest
        seen = self._before(before)
        nw = key in NUMBER_WORD_VALUES  # (then also a number word's value: Digest.has)
        for sid in seen:
            d = digests[sid] or get(sid)
            if key in d.values or nw and d.number_word(key):
                return self._hit(sid, key)
        for sid in seen:  # a single word: the latest source holding it
            if (digests[sid] or get(sid)).has_word(key):
                src = self.sources[sid]
                return Hit(sid, src.pos, src.address)
        return None

    def after(self, key: str, pos: int, kinds: tuple[str, ...] = ("user",)) -> Hit | None:
        """The first occurrence of ``key`` at a position > ``pos`` in sources of the given kinds."""
        get, sources = self._digest, self.sources
        later = [sid for sid in range(bisect_right(self._pos, pos), len(sources)) if sources[sid].kind in kinds]
        for sid in later:
            if get(sid).has(key):
                return self._hit(sid, key)
        for sid in later:
            if get(sid).has_word(key):
                src = sources[sid]
                return Hit(sid, src.pos, src.address)
        return None

    def normalized(self, sid: int) -> str:
        """The source's text, normalized (cached; computed at most once per source)."""
        return self._digest(sid).normalized

    def phrase(self, phrase: str, before: int) -> tuple[Hit | None, Hit | None]:
        """(exact, partial): the latest source before ``before`` containing the normalized phrase as a
        substring, and the latest containing all its words (not contiguously); ``None`` when absent."""
        toks = set(WORD_RE.findall(phrase.casefold()))
        if not toks:
            return None, None
        return self._phrase_among(phrase, toks, self._before(before))

    def _phrase_among(self, phrase: str, toks: set[str], sids: Iterable[int]) -> tuple[Hit | None, Hit | None]:
        """:meth:`phrase` over the candidate sources ``sids`` (latest first)."""
        partial = None
        for sid in sids:
            d = self._digest(sid)
            if not all(map(d.has_word, toks)):  # (= toks.issubset(d.words), mostly without the words)
                continue
            src = self.sources[sid]
            hit = Hit(sid, src.pos, src.address)
            if phrase in self.normalized(sid):
                return hit, partial or hit
            partial = partial or hit
        return None, partial

    def fact(self, obj: str, attr: str, before: int) -> tuple[int, str, Any] | None:
        """The latest ``(pos, address, raw value)`` of attribute ``attr`` of object ``obj`` before ``before``."""
        for sid in self._before(before):
            got = self._digest(sid).facts.get(obj)
            if got is not None and attr in got:
                path, key, raw = got[attr]
                src = self.sources[sid]
                return src.pos, f"{src.address}{path}.{key}", raw
        return None

    def has_object(self, obj: str, before: int) -> bool:
        """True when some fact about object ``obj`` is visible before ``before``."""
        return any(obj in self._digest(sid).facts for sid in self._before(before))

    def latest_collections(self, before: int) -> list[Collection]:
        """Collections of the latest tool output before ``before`` that has any ("the latest evidence")."""
        for sid in self._before(before):  # (one source per step position; task and prompts have none)
            if self._digest(sid).collections:
                return self._collections_of(sid)
        return []

    def _collections_of(self, sid: int) -> list[Collection]:
        got = self._collections.get(sid)
        if got is None:
            src = self.sources[sid]
            got = self._collections[sid] = [Collection(src.pos, src.address + suffix, key, size, members)
                                            for suffix, key, size, members in self._digest(sid).collections]
        return got

    def numbers_near(self, before: int, sources: int = 3, limit: int = 60) -> list[tuple[float, Hit]]:
        """Distinct numbers of the last ``sources`` evidence sources before ``before`` (for derivations;
        each source keeps its first 200 numbers, recorded while indexing)."""
        out: dict[float, Hit] = {}
        taken = 0
        for sid in self._before(before):
            src = self.sources[sid]
            for v, a, e in self._digest(sid).numbers:
                if len(out) >= limit:
                    break
                if v not in out:
                    out[v] = Hit(sid, src.pos, f"{src.address}[{a}:{e}]")
            taken += 1
            if taken >= sources or len(out) >= limit:
                break
        return list(out.items())



class _RunHead(NamedTuple):
    task: str
    system_prompts: dict[str, str]
    steps: tuple[Step, ...] = ()


class GrowingEvidenceIndex(EvidenceIndex):
    """An :class:`EvidenceIndex` that grows step by step (:meth:`add_step`), for the incremental
    ledger (:class:`~trajaudit.engine.claims.ledger.LedgerBuilder`): same sources, same source
    numbers, same answers as the batch index of the run so far, at a cost per query that does not
    grow with the run.

    The batch index scans the digests of the sources a claim may see, latest first (a miss reads
    every earlier source: fine once per run, not once per added step). This one digests each source
    when it is filed and keeps postings (source numbers, ascending) per value, word and JSON object,
    the sources with collections and the user sources' values and words; a query bisects the
    postings at the position it may see. (``phrase`` walks the postings of the phrase's rarest
    word, latest first, until a source holds the whole phrase.)

    Args:
        task, system_prompts: the run's task and per-agent prompts (position -1 evidence).
        max_json_chars: as :class:`EvidenceIndex`.
    """

    def __init__(self, task: str, system_prompts: dict[str, str], max_json_chars: int = 2_000_000) -> None:
        self._vals: dict[str, list[int]] = {}
        self._words: dict[str, list[int]] = {}
        self._objs: dict[str, list[int]] = {}
        self._colls: list[int] = []
        self._uvals: dict[str, list[int]] = {}
        self._uwords: dict[str, list[int]] = {}
        super().__init__(_RunHead(task, system_prompts), max_json_chars)  # type: ignore[arg-type]

    def _add(self, src: Source, key: float | None = None) -> None:
        sid = len(self.sources)
        super()._add(src, key)
        d = self._digest(sid)
        for table, keys in ((self._vals, d.value_keys()), (self._words, d.words), (self._objs, d.facts)):
            for k in keys:
                got = table.get(k)
                if got is None:
                    table[k] = [sid]
                else:
                    got.append(sid)
        if d.collections:
            self._colls.append(sid)
        if src.kind == "user":
            for table, keys in ((self._uvals, d.value_keys()), (self._uwords, d.words)):
                for k in keys:
                    table.setdefault(k, []).append(sid)

    def _seen(self, before: int) -> int:
        """The number of sources at a position < ``before`` (they are source numbers 0..n-1)."""
        return bisect_left(self._pos, before)

    @staticmethod
    def _last(sids: list[int] | None, n: int) -> int | None:
        """The largest source number < ``n`` in the postings ``sids``."""
        if not sids:
            return None
        k = bisect_left(sids, n) - 1
        return sids[k] if k >= 0 else None

    def latest(self, key: str, before: int) -> Hit | None:
        """As :meth:`EvidenceIndex.latest` (postings lookup)."""
        n = self._seen(before)
        sid = self._last(self._vals.get(key), n)
        if sid is not None:
            return self._hit(sid, key)
        sid = self._last(self._words.get(key), n)
        if sid is not None:
            src = self.sources[sid]
            return Hit(sid, src.pos, src.address)
        return None

    def after(self, key: str, pos: int, kinds: tuple[str, ...] = ("user",)) -> Hit | None:
        """As :meth:`EvidenceIndex.after` (postings of the user sources for ``kinds=("user",)``)."""
        if kinds != ("user",):
            return super().after(key, pos, kinds)
        n = bisect_right(self._pos, pos)
        for table, exact in ((self._uvals, True), (self._uwords, False)):
            sids = table.get(key)
            if sids:
                k = bisect_left(sids, n)
                if k < len(sids):
                    sid = sids[k]
                    if exact:
                        return self._hit(sid, key)
                    src = self.sources[sid]
                    return Hit(sid, src.pos, src.address)
        return None

    def phrase(self, phrase: str, before: int) -> tuple[Hit | None, Hit | None]:
        """As :meth:`EvidenceIndex.phrase` (candidates: the postings of the phrase's rarest word)."""
        toks = set(WORD_RE.findall(phrase.casefold()))
        if not toks:
            return None, None
        postings = [self._words.get(t) for t in toks]
        if not all(postings):
            return None, None
        rarest = min(postings, key=len)  # type: ignore[arg-type]
        k = bisect_left(rarest, self._seen(before))  # type: ignore[arg-type]
        return self._phrase_among(phrase, toks, (rarest[i] for i in range(k - 1, -1, -1)))  # type: ignore[index]

    def fact(self, obj: str, attr: str, before: int) -> tuple[int, str, Any] | None:
        """As :meth:`EvidenceIndex.fact` (postings per object)."""
        sids = self._objs.get(obj)
        if not sids:
            return None
        for k in range(bisect_left(sids, self._seen(before)) - 1, -1, -1):
            sid = sids[k]
            got = self._digest(sid).facts[obj]
            if attr in got:
                path, key, raw = got[attr]
                src = self.sources[sid]
                return src.pos, f"{src.address}{path}.{key}", raw
        return None

    def has_object(self, obj: str, before: int) -> bool:
        """As :meth:`EvidenceIndex.has_object`."""
        return self._last(self._objs.get(obj), self._seen(before)) is not None

    def latest_collections(self, before: int) -> list[Collection]:
        """As :meth:`EvidenceIndex.latest_collections`."""
        sid = self._last(self._colls, self._seen(before))
        return [] if sid is None else self._collections_of(sid)
