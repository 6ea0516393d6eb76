"""Position-free analysis of one evidence text, memoized per process (DRIFT §Support Seeker's index).

Indexing a text (value scan, word postings, JSON walk into slot facts and collections) depends only
on the text, the kind of source (tool outputs are walked as JSON, tool and user texts also index
their whole stripped text as a value) and the JSON size cap — not on where the text sits in a run.
:func:`digest` therefore computes a :class:`Digest` whose addresses are *suffixes* relative to the
source's address (``[12:20]``, ``.variants.0.price``), and :class:`~.evidence.EvidenceIndex` replays
it for each source. Identical texts recur across runs of one batch (the tau policy prompt opens all
29 runs; product lookups and the Who&When role prompts repeat), so most of them are analysed once.

Cache: a bounded LRU (``functools.lru_cache``, :data:`CACHE_SIZE` entries) keyed by the text itself
(so a hit is exact, never a hash collision), its kind and the cap. Texts longer than
:data:`MAX_CACHED_CHARS` are analysed without being cached (memory stays bounded: at most
``CACHE_SIZE × MAX_CACHED_CHARS`` characters of keys plus their digests). Digests are shared
and read-only (their dicts and collection members included). Clear it with
:func:`clear_cache` (benchmarks do, between repetitions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from trajaudit.engine.claims.normalize import (
    MEMO_MAX_CHARS,
    NUMBER_WORDS,
    norm_id,
    norm_number,
    norm_scalar,
    norm_text,
    singular,
    when_key,
)
from trajaudit.engine.claims.normalize import _norm_scalar_memo as _scalar_memo
from trajaudit.engine.claims.normalize import _norm_scalar_str_memo as _str_memo
from trajaudit.engine.claims.patterns import WORD_RE, has_escapes, is_word_char, mask_escapes, words_of
from trajaudit.engine.claims.scan import scan_values_blanked
from trajaudit.engine.dsl.regex.stored import module_pattern
from trajaudit.engine.trace import json_content
from trajaudit.engine.trace.escapes import escape_spans

CACHE_SIZE = 2048
MAX_CACHED_CHARS = 100_000
MAX_MEMBERS = 500
NUMS_PER_SOURCE = 200

_NUMBER_WORD_KEYS = frozenset(NUMBER_WORDS)
_UNIT_TAIL = module_pattern(r"[^\d.,'\s-]+$")
_ID_KEYS = module_pattern(r"(?:^|_)id$|^(?:name|email|title)$", re.I)
_MAPPING_KEY = module_pattern(r"[\w#-]{3,}")


@dataclass(frozen=True)
class Digest:
    """What one text contributes to an evidence index; every address is a suffix of the source's.

    Attributes:
        text: the analysed text.
        values: ``{normalized value: suffix}`` of the first occurrence of each value: the value scan's
            (suffix ``[a:e]``), then the JSON walk's (suffix ``.path``) or the whole text's (suffix
            ``""``). The values of number words ("three" → ``"3"``, suffix ``""``, which the definition
            files right after the scan's) are not in it: they need the words, which are computed
            only when a query asks (:meth:`has`, :meth:`suffix`, :meth:`value_keys`).
        numbers: ``(value, start, end)`` of the first :data:`NUMS_PER_SOURCE` numbers (for derivations;
            the suffix is ``[start:end]``).
        facts: slot facts of JSON scalar leaves of identified objects: ``{object id: {attribute:
            (path, key, raw value)}}`` (the suffix is ``f"{path}.{key}"``), objects in order of their
            first fact, each attribute holding its last leaf in document order (the one a "latest
            fact" query returns). Read-only.
        collections: ``(suffix, singular key, size, members)`` of JSON lists and id-keyed mappings
            (:class:`Members`, flattened on first use).
        words: the distinct case-folded words (keys; values ``None``), in order of first occurrence
            (a property computed on first use: most digests are never asked for a word; a word is a
            substring of :attr:`folded`, so :meth:`has_word` looks there first).
    """

    text: str
    values: dict[str, str]
    numbers: tuple[tuple[float, int, int], ...]
    facts: dict[str, dict[str, tuple[str, str, Any]]]
    collections: tuple[tuple[str, str, int, Members], ...]

    @cached_property
    def normalized(self) -> str:
        """The text normalized (``norm_text``), computed at most once per digest."""
        return norm_text(self.text)

    @cached_property
    def folded(self) -> str:
        """The text case-folded (every word is a substring of it), computed at most once per digest."""
        return self.text.casefold()

    @cached_property
    def words(self) -> dict[str, None]:
        """The distinct case-folded words (see the class docstring), computed at most once per digest."""
        return dict.fromkeys(words_of(self.folded))

    def has_word(self, word: str) -> bool:
        """``word in self.words``, without computing the words: a word is a substring of
        :attr:`folded`, and an occurrence is the word when the text around it ends a token there
        (:func:`_token_at`); after :data:`_MAX_TRIES` occurrences, or once the words exist, they decide."""
        folded = self.folded
        i = folded.find(word)
        if i < 0:
            return False
        words = self.__dict__.get("words")
        if words is not None:
            return word in words
        if WORD_RE.fullmatch(word) is None:  # (every word is a whole match of the word pattern)
            return False
        end = len(word)
        for _ in range(_MAX_TRIES):
            if _token_at(folded, i, i + end):
                return True
            i = folded.find(word, i + 1)
            if i < 0:
                return False
        return word in self.words

    def number_word(self, key: str) -> bool:
        """Whether the text holds the number word of ``key`` (one of :data:`NUMBER_WORD_VALUES`) as a word."""
        return self.has_word(_NUMBER_WORD_OF[key])

    def has(self, key: str) -> bool:
        """Whether ``key`` is a value of the text (in :attr:`values` or a number word's value)."""
        return key in self.values or (key in NUMBER_WORD_VALUES and self.number_word(key))

    def suffix(self, key: str) -> str:
        """The suffix of value ``key``'s first occurrence (:meth:`has` must hold): a number word's value
        comes before the JSON walk's and the whole text's, after the scan's."""
        got = self.values.get(key)
        if (got is None or got[:1] != "[") and key in NUMBER_WORD_VALUES and self.number_word(key):
            return ""
        return got  # type: ignore[return-value]

    def value_keys(self) -> list[str]:
        """Every value of the text (:meth:`has`), each once: :attr:`values` and number words' values."""
        words = [str(NUMBER_WORDS[w]) for w in self.words if w in NUMBER_WORDS] \
            if not _NUMBER_WORD_KEYS.isdisjoint(self.words) else []
        return [*self.values, *(k for k in words if k not in self.values)]


_MAX_TRIES = 8


def _token_at(text: str, i: int, j: int) -> bool:
    """Whether ``text[i:j]``, a whole match of ``WORD_RE`` (``\\w+(?:[-_]\\w+)*``), is one of
    ``WORD_RE.findall(text)``: no word character, nor ``-`` after one, right before it (a match
    would have gone on through it), and none, nor ``-`` before one, right after it (the greedy
    match goes on). ``\\w`` is :func:`is_word_char` (a test compares them over every code point)."""
    if i and (is_word_char(c := text[i - 1]) or (c == "-" and i >= 2 and is_word_char(text[i - 2]))):
        return False
    n = len(text)
    return j == n or not (is_word_char(c := text[j]) or (c == "-" and j + 1 < n and is_word_char(text[j + 1])))


#: The values of the number words (``"0"`` … ``"20"``) and the word of each.
NUMBER_WORD_VALUES = frozenset(str(v) for v in NUMBER_WORDS.values())
_NUMBER_WORD_OF = {str(v): w for w, v in NUMBER_WORDS.items()}


class _Builder:
    """Accumulates one text's analysis (the indexing rules of DRIFT §Support Seeker, see evidence.py)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.numbers: list[tuple[float, int, int]] = []
        self.facts: dict[str, dict[str, tuple[str, str, Any]]] = {}
        self.collections: list[tuple[str, str, int, Members]] = []

    def value(self, key: str, suffix: str) -> None:
        self.values.setdefault(key, suffix)

    def walk(self, obj: Any, path: str, key: str, owner: str | None) -> None:
        """Index a parsed JSON value: scalar leaves as values (object leaves also as slot facts of the
        enclosing identified object), lists and id-keyed mappings as collections."""
        if isinstance(obj, dict):
            self.walk_dict(obj, path, key, owner)
        elif isinstance(obj, list):
            self.walk_list(obj, path, key, owner)

    def walk_dict(self, obj: dict[Any, Any], path: str, key: str, owner: str | None) -> None:
        """:meth:`walk` of a JSON object. (Hot loop: short strings and numbers go straight to the memo of
        :func:`norm_scalar`, which is what it does; nested containers go straight to their walk.)"""
        ident = _identity(obj, key) or owner
        if len(obj) >= 2 and _id_keyed(obj):  # (the size test inline: most objects fail it or the next)
            self.mapping(obj, path, key)
            return
        values = self.values
        slots = None  # the object's facts, filed at its first fact
        for k, v in obj.items():
            cls = v.__class__
            if cls is str:
                val = _str_memo(v) if len(v) <= MEMO_MAX_CHARS else norm_scalar(v)
            elif v is True or v is False:
                val = "true" if v else "false"
            elif cls is int or cls is float:
                val = _scalar_memo(v)
            elif v is None:
                continue
            elif isinstance(v, dict):
                self.walk_dict(v, f"{path}.{k}", str(k), ident)
                continue
            elif isinstance(v, list):
                self.walk_list(v, f"{path}.{k}", str(k), ident)
                continue
            else:
                val = norm_scalar(v)
            if val is None:
                continue
            if val not in values:  # (suffix strings only for first occurrences and facts)
                values[val] = f"{path}.{k}"
            if ident is not None:
                if slots is None:
                    slots = self.facts.setdefault(ident, {})
                slots[str(k).casefold()] = (path, k, v)

    def mapping(self, obj: dict[Any, Any], path: str, key: str) -> None:
        """:meth:`walk` of an id-keyed mapping (tau "variants"): a collection of its values, each key a
        value, each member walked as the object of that id."""
        values = self.values
        self.collection(list(obj.values()), path, key)
        for k, v in obj.items():
            values.setdefault(norm_id(str(k)), f"{path}.{k}")
            self.walk_dict(v, f"{path}.{k}", str(k), norm_id(str(k)))

    def walk_list(self, obj: list[Any], path: str, key: str, owner: str | None) -> None:
        """:meth:`walk` of a JSON list: a collection (when not empty), its scalars values, its containers walked."""
        values = self.values
        if obj:
            self.collection(obj, path, key)
        for i, v in enumerate(obj):
            if isinstance(v, dict):
                self.walk_dict(v, f"{path}.{i}", key, owner)
            elif isinstance(v, list):
                self.walk_list(v, f"{path}.{i}", key, owner)
            else:
                val = norm_scalar(v)
                if val is not None and val not in values:
                    values[val] = f"{path}.{i}"

    def collection(self, members: list[Any], path: str, key: str) -> None:
        self.collections.append((path, singular(key) if key else "", len(members), Members(tuple(members[:MAX_MEMBERS]))))


def _id_keyed(obj: dict[Any, Any]) -> bool:
    """Whether a JSON object is an id-keyed mapping: 2+ members, every value an object, every key 3+
    word characters (or ``#``/``-``) holding a digit. (The first value is tested before the generator
    is made: most objects fail there.)"""
    return len(obj) >= 2 and isinstance(next(iter(obj.values())), dict) and all(
        isinstance(v, dict) for v in obj.values()) and all(
        _MAPPING_KEY.fullmatch(str(k)) and any(ch.isdigit() for ch in str(k)) for k in obj)


class Members:
    """The first :data:`MAX_MEMBERS` members of one JSON collection, flattened on first use (only count
    claims read them): per member object, its scalar attributes flattened one level, strings
    normalized. Shared by every index that replays the digest; the flattened form is read-only."""

    __slots__ = ("_raw", "_flat")

    def __init__(self, raw: tuple[Any, ...]) -> None:
        self._raw = raw
        self._flat: tuple[dict[str, Any], ...] | None = None

    def flat(self) -> tuple[dict[str, Any], ...]:
        """The flattened members (computed once)."""
        if self._flat is None:
            self._flat = tuple(_flatten(mem) for mem in self._raw if isinstance(mem, dict))
            self._raw = ()
        return self._flat

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Members) and self.flat() == other.flat()

    __hash__ = None  # type: ignore[assignment]


def _flatten(mem: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in mem.items():
        items = v.items() if isinstance(v, dict) else ((k, v),)
        for kk, vv in items:
            if isinstance(vv, bool):
                flat[str(kk).casefold()] = vv
            elif isinstance(vv, (str, int, float)) and len(str(vv)) <= 60:
                flat[str(kk).casefold()] = norm_text(str(vv))
    return flat


def _analyse(text: str, kind: str, max_json_chars: int) -> Digest:
    blanks: list[tuple[int, int]] = []
    if has_escapes(text):  # terminal control sequences ("\x1b[0m") hold no values: blanked, offsets kept
        blanks = escape_spans(text)
        text = mask_escapes(text)
    b = _Builder()
    _scan_into(text, b.values, b.numbers, blanks)
    # (the values of number words are not filed here: Digest.has and Digest.suffix look a number
    # word up when a query asks for its value — see _analyse_reference)
    _whole(b, text, kind, max_json_chars)
    return Digest(text=text, values=b.values, numbers=tuple(b.numbers),
                  facts=b.facts, collections=tuple(b.collections))


def _whole(b: _Builder, text: str, kind: str, max_json_chars: int) -> None:
    """File what the text holds as a whole: a JSON tool output walked (:meth:`_Builder.walk`), else a
    short tool or user text as one value."""
    stripped = text.strip()
    if kind == "tool" and stripped[:1] in "{[" and len(stripped) <= max_json_chars:
        # safe_json.loads, None when not JSON or nested too deeply to walk (safe_json.NestedTooDeep); in
        # an audit the rule stage has usually parsed this text already (json_content: one parse, shared)
        doc = json_content.parse(stripped)
        if doc is not None:
            b.walk(doc, "", "", None)
    elif kind in ("tool", "user") and 0 < len(stripped) <= 200:
        b.value(norm_id(stripped), "")  # a bare value such as a user id


def _analyse_reference(text: str, kind: str, max_json_chars: int) -> tuple[dict[str, str], dict[str, None]]:
    """The definition of a digest's values and words (kept for the equivalence test of
    :meth:`Digest.has`, :meth:`Digest.suffix`, :meth:`Digest.value_keys` and :attr:`Digest.words`):
    every word of the text, and the value of each number word among them filed right after the
    scan's values (before the JSON walk's and the whole text's); terminal escape sequences blanked."""
    blanks = escape_spans(text)
    text = mask_escapes(text)
    b = _Builder()
    _scan_into(text, b.values, b.numbers, blanks)
    words = dict.fromkeys(words_of(text.casefold()))
    for w in words:
        if w in NUMBER_WORDS:
            b.values.setdefault(str(NUMBER_WORDS[w]), "")
    _whole(b, text, kind, max_json_chars)
    return b.values, words


def _scan_into(text: str, values: dict[str, str], numbers: list[tuple[float, int, int]],
               blanks: list[tuple[int, int]] | None = None) -> None:
    """File the value matches of ``text`` (:func:`~.scan.scan_values`): each normalized value's first
    suffix ``[a:e]`` in ``values`` (a date or time also as its canonical form, day, month-day and clock),
    the first :data:`NUMS_PER_SOURCE` numbers in ``numbers``. ``blanks``: the spans of the terminal
    control sequences blanked in ``text``, across which a number is read with its unit or currency
    sign (:func:`~.scan.scan_values_blanked`)."""
    found, joined = scan_values_blanked(text, blanks or ())
    for g, a, e in found:
        raw = joined.get(a) or text[a:e]
        if g == "number" or g == "money":
            core = raw.strip()
            key = core if len(core) >= 7 and core.isdigit() else norm_number(core)
            if key is None:
                key = norm_number(_UNIT_TAIL.sub("", core).strip() or core)
            if key is not None and len(numbers) < NUMS_PER_SOURCE:
                numbers.append((float(key), a, e))
        elif g == "date" or g == "time":
            key = norm_text(raw)
            _when_into(values, raw, g, f"[{a}:{e}]")
        elif g == "url":
            key = norm_text(raw)
        else:
            key = norm_id(raw)
        if key and key not in values:  # (the suffix string is made for the first occurrence only)
            values[key] = f"[{a}:{e}]"


def _when_into(values: dict[str, str], raw: str, g: str, suffix: str) -> None:
    """File the canonical forms of date or time ``raw`` not yet in ``values``: the same date or time in
    any format ("May 23, 2024" = "2024-05-23"); a timestamp also states its day and its time, a full
    date its month and day ("May 23")."""
    when = when_key(raw, g)
    day, _, clock = when.partition(" ") if when else ("", "", "")
    for w in ((when, day, day[5:], clock) if len(day) == 10 else (when,) if when else ()):
        if w and w not in values:
            values[w] = suffix


_cached = lru_cache(maxsize=CACHE_SIZE)(_analyse)


def digest(text: str, kind: str, max_json_chars: int) -> Digest:
    """The :class:`Digest` of ``text`` indexed as a source of kind ``kind`` (memoized, see the module
    docstring). Never raises on content: JSON that does not parse is indexed as text."""
    kind = kind if kind in ("tool", "user") else "other"  # the analysis only distinguishes these
    if len(text) > MAX_CACHED_CHARS:
        return _analyse(text, kind, max_json_chars)
    return _cached(text, kind, max_json_chars)


def clear_cache() -> None:
    """Empty the digest cache and the key cache (for benchmarks and tests)."""
    _cached.cache_clear()
    _id_key.cache_clear()
    _id_names.cache_clear()
    _id_order.cache_clear()


@lru_cache(maxsize=4096)
def _id_key(key: str) -> bool:
    """Whether a JSON key names an identity (``id``, ``*_id``, ``email``, ``title``; not ``name``)."""
    return key != "name" and _ID_KEYS.search(key) is not None


def _identity(obj: dict[str, Any], parent_key: str) -> str | None:
    """The object's id: ``<parent>_id`` (an ``items`` member's ``item_id``), else ``id``, else the first
    ``*_id``; only keys holding a string or an integer count (:func:`_identity_reference` is the
    definition). The keys to try, in that order, depend only on the object's key tuple and the parent
    key (:func:`_id_order`, memoized): the first whose value counts is the id."""
    for k in _id_order(tuple(obj), parent_key):
        v = obj[k]
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            return norm_id(str(v))
    return None


def _identity_reference(obj: dict[str, Any], parent_key: str) -> str | None:
    """The definition of :func:`_identity` (kept for the equivalence test)."""
    keys = [k for k in _id_names(tuple(obj)) if isinstance(obj[k], (str, int)) and not isinstance(obj[k], bool)]
    if not keys:
        return None
    want = f"{singular(parent_key)}_id" if parent_key else ""
    for pick in (want, "id"):
        if pick in keys:
            return norm_id(str(obj[pick]))
    return norm_id(str(obj[keys[0]]))


@lru_cache(maxsize=4096)
def _id_order(keys: tuple[Any, ...], parent_key: str) -> tuple[Any, ...]:
    """The id keys of ``keys`` (:func:`_id_names`) in the order :func:`_identity` tries them:
    ``<singular parent>_id`` and ``id`` first when present, then all of them in key order (a key whose
    value does not count falls through to the next, as the definition's filtered list does)."""
    names = _id_names(keys)
    if not names:
        return ()
    want = f"{singular(parent_key)}_id" if parent_key else ""
    first = tuple(k for k in (want, "id") if k in names)
    return first + names


@lru_cache(maxsize=4096)
def _id_names(keys: tuple[Any, ...]) -> tuple[Any, ...]:
    """The keys (in order) whose name is an identity's (:func:`_id_key`): JSON objects of one kind share
    their key tuple, so each object costs one lookup instead of one per key."""
    return tuple(k for k in keys if _id_key(str(k)))
