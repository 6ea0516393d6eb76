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
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from trajaudit.engine.claims.normalize import (
    NUMBER_WORDS,
    norm_id,
    norm_number,
    norm_scalar,
    norm_text,
    singular,
)
from trajaudit.engine.claims.patterns import WORD_RE
from trajaudit.engine.claims.scan import scan_values
from trajaudit.engine.ir import Trajectory

_UNIT_TAIL = re.compile(r"[^\d.,'\s-]+$")
_NUMS_PER_SOURCE = 200
_ID_KEYS = re.compile(r"(?:^|_)id$|^(?:name|email|title)$", re.I)


@dataclass(frozen=True)
class Source:
    """One evidence text: ``pos`` is the step index (-1 for task/system prompts), ``kind`` the step kind."""

    pos: int
    address: str
    text: str
    kind: str
    is_error: bool = False


@dataclass(frozen=True)
class Hit:
    """An occurrence of a value in evidence: source number, step position and exact address."""

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
            normalized. At most ``MAX_MEMBERS`` are kept (``size`` is always exact).
    """

    pos: int
    address: str
    key: str
    size: int
    members: list[dict[str, Any]] = field(default_factory=list)

    def bool_attrs(self) -> set[str]:
        """Attribute names holding booleans in some member."""
        return {k for mem in self.members for k, v in mem.items() if isinstance(v, bool)}


MAX_MEMBERS = 500


class EvidenceIndex:
    """Index of the evidence of one trajectory.

    Args:
        trajectory: the run.
        max_json_chars: tool outputs longer than this are indexed as text only (no JSON walk).
    """

    def __init__(self, trajectory: Trajectory, max_json_chars: int = 2_000_000) -> None:
        self.sources: list[Source] = []
        self.values: dict[str, list[Hit]] = {}
        self.postings: dict[str, list[int]] = {}
        self.facts: dict[tuple[str, str], list[tuple[int, str, Any]]] = {}
        self.collections: dict[int, list[Collection]] = {}
        self.objects: dict[str, int] = {}
        self.numbers: list[list[tuple[float, str]]] = []
        self.user_positions: list[int] = []
        self._norm_cache: dict[int, str] = {}
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
        sid = len(self.sources)
        self.sources.append(src)
        text = src.text
        nums: list[tuple[float, str]] = []
        for g, a, b in scan_values(text):
            raw = text[a:b]
            if g in ("number", "money"):
                core = raw.strip()
                key = core if len(core) >= 7 and core.isdigit() else norm_number(core)
                if key is None:
                    key = norm_number(_UNIT_TAIL.sub("", core).strip() or core)
                if key is not None and len(nums) < _NUMS_PER_SOURCE:
                    nums.append((float(key), f"{src.address}[{a}:{b}]"))
            elif g in ("date", "time", "url"):
                key = norm_text(raw)
            else:
                key = norm_id(raw)
            if key:
                self._value(key, sid, src, f"{src.address}[{a}:{b}]")
        self.numbers.append(nums)
        seen: set[str] = set()
        for w in WORD_RE.findall(text.casefold()):
            if w in seen:
                continue
            seen.add(w)
            self.postings.setdefault(w, []).append(sid)
            if w in NUMBER_WORDS:
                self._value(str(NUMBER_WORDS[w]), sid, src, src.address)
        stripped = text.strip()
        if src.kind == "tool" and stripped[:1] in "{[" and len(stripped) <= self.max_json_chars:
            try:
                doc = json.loads(stripped)
            except (ValueError, RecursionError):
                doc = None
            if doc is not None:
                self._walk(doc, src, sid, src.address, "", None)
        elif src.kind in ("tool", "user") and 0 < len(stripped) <= 200:
            self._value(norm_id(stripped), sid, src, src.address)  # a bare value such as a user id

    def _value(self, key: str, sid: int, src: Source, address: str) -> None:
        hits = self.values.setdefault(key, [])
        if not hits or hits[-1].src != sid:
            hits.append(Hit(sid, src.pos, address))

    def _walk(self, obj: Any, src: Source, sid: int, path: str, key: str, owner: str | None) -> None:
        if isinstance(obj, dict):
            ident = _identity(obj, key) or owner
            members = list(obj.values())
            if len(members) >= 2 and all(isinstance(v, dict) for v in members) and all(
                    re.fullmatch(r"[\w#-]{3,}", str(k)) and any(ch.isdigit() for ch in str(k)) for k in obj):
                self._collection(members, src, path, key)  # an id-keyed mapping (tau "variants")
                for k, v in obj.items():
                    self._value(norm_id(str(k)), sid, src, f"{path}.{k}")
                    self._walk(v, src, sid, f"{path}.{k}", str(k), norm_id(str(k)))
                return
            for k, v in obj.items():
                sub = f"{path}.{k}"
                if isinstance(v, (dict, list)):
                    self._walk(v, src, sid, sub, str(k), ident)
                    continue
                val = norm_scalar(v)
                if val is None and isinstance(v, bool):
                    val = "true" if v else "false"
                if val is None:
                    continue
                self._value(val, sid, src, sub)
                if ident is not None:
                    self.facts.setdefault((ident, str(k).casefold()), []).append((src.pos, sub, v))
                    self.objects.setdefault(ident, src.pos)
        elif isinstance(obj, list):
            if obj:
                self._collection(obj, src, path, key)
            for i, v in enumerate(obj):
                if isinstance(v, (dict, list)):
                    self._walk(v, src, sid, f"{path}.{i}", key, owner)
                else:
                    val = norm_scalar(v)
                    if val is not None:
                        self._value(val, sid, src, f"{path}.{i}")

    def _collection(self, members: list[Any], src: Source, path: str, key: str) -> None:
        col = Collection(src.pos, path, singular(key) if key else "", len(members))
        for mem in members[:MAX_MEMBERS]:
            if not isinstance(mem, dict):
                continue
            flat: dict[str, Any] = {}
            for k, v in mem.items():
                items = v.items() if isinstance(v, dict) else ((k, v),)
                for kk, vv in items:
                    if isinstance(vv, bool):
                        flat[str(kk).casefold()] = vv
                    elif isinstance(vv, (str, int, float)) and len(str(vv)) <= 60:
                        flat[str(kk).casefold()] = norm_text(str(vv))
            col.members.append(flat)
        self.collections.setdefault(src.pos, []).append(col)

    # -- queries ----------------------------------------------------------------------------------
    def latest(self, key: str, before: int) -> Hit | None:
        """The latest occurrence of normalized ``key`` in evidence at a position < ``before``."""
        for h in reversed(self.values.get(key, ())):
            if h.pos < before:
                return h
        for sid in reversed(self.postings.get(key, ())):  # a single word: its postings
            src = self.sources[sid]
            if src.pos < before:
                return Hit(sid, src.pos, src.address)
        return None

    def after(self, key: str, pos: int, kinds: tuple[str, ...] = ("user",)) -> Hit | None:
        """The first occurrence of ``key`` at a position > ``pos`` in sources of the given kinds."""
        for h in self.values.get(key, ()):
            if h.pos > pos and self.sources[h.src].kind in kinds:
                return h
        for sid in self.postings.get(key, ()):
            src = self.sources[sid]
            if src.pos > pos and src.kind in kinds:
                return Hit(sid, src.pos, src.address)
        return None

    def normalized(self, sid: int) -> str:
        """The source's text, normalized (cached; computed at most once per source)."""
        t = self._norm_cache.get(sid)
        if t is None:
            t = self._norm_cache[sid] = norm_text(self.sources[sid].text)
        return t

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
        return best

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
            for v, addr in self.numbers[sid]:
                if len(out) >= limit:
                    break
                out.setdefault(v, Hit(sid, src.pos, addr))
            taken += 1
            if taken >= sources or len(out) >= limit:
                break
        return list(out.items())


def _identity(obj: dict[str, Any], parent_key: str) -> str | None:
    """The object's id: ``<parent>_id`` (an ``items`` member's ``item_id``), else ``id``, else the first ``*_id``."""
    keys = [k for k, v in obj.items()
            if isinstance(v, (str, int)) and not isinstance(v, bool) and _ID_KEYS.search(str(k)) and k != "name"]
    if not keys:
        return None
    want = f"{singular(parent_key)}_id" if parent_key else ""
    for pick in (want, "id"):
        if pick in keys:
            return norm_id(str(obj[pick]))
    return norm_id(str(obj[keys[0]]))
