"""Regex searches for the rule engine: memoized, and skipped when a literal prefilter proves no match.

For a compiled pattern, :func:`required_literals` finds a set of lower-case ASCII strings such that
every match contains one of them (the classic "necessary factor" analysis, as in Hyperscan or RE2's
prefilters), from the pattern's parse tree: a run of literal characters is such a set; a group, or a
repeat of at least one, passes its item's set on; an alternation needs a set from every branch (their
union). The most selective set of a sequence is kept (the one whose shortest literal is longest).

:func:`ruled_out` then answers "no match" without running the regex when the text is ASCII and
holds none of the literals in lower case — exact, because on ASCII text ``re.IGNORECASE`` is ASCII
case folding and a case-sensitive literal also occurs case-insensitively. The same holds for other
text when lower-casing keeps its length and none of the four non-ASCII characters ``re.IGNORECASE``
matches to ASCII letters occurs (:func:`folded`: curly quotes and dashes are common in agent text).
Other texts, and patterns without a usable set (shortest literal under 3 characters), always run
the regex. The parse
uses CPython's ``re._parser``; anything unexpected there just disables the prefilter for that pattern.

A long alternation (``A|B|C…``, nested non-capturing groups flattened) whose union set is too
common (one branch needs only ``status``) is also split into its branches (:func:`branch_plan`):
on such a text only the branches whose own literal set occurs are searched, and the match is the
leftmost one, the earliest branch winning a tie — exactly what ``re`` does for an ordered
alternation with nothing after it (at each start position it tries the branches in order). A branch
alone is much cheaper to search than the whole alternation under ``re.IGNORECASE``.
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterator

from trajaudit.engine.dsl.regex import stored
from trajaudit.engine.dsl.regex.ascii import ascii_like, ascii_twin, has_separators, twin_for
from trajaudit.engine.dsl.regex.ascii import clear_memo as _clear_ascii_memo
from trajaudit.engine.dsl.regex.chars import Chars, chars_of_tree, lacks_required
from trajaudit.engine.dsl.regex.split import flatten as _flatten

log = logging.getLogger(__name__)

MIN_LITERAL = 3

try:  # CPython's regex parser (private; its shape is stable since 3.11)
    from re import _constants as _c
    from re import _parser as _p

    _LITERAL, _SUB, _BRANCH = _c.LITERAL, _c.SUBPATTERN, _c.BRANCH
    _REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}
    _ATOMIC = getattr(_c, "ATOMIC_GROUP", None)
except ImportError:  # pragma: no cover - another Python: no prefilter
    _p = None


def _best(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if not b:
        return a
    if not a:
        return b
    return b if min(map(len, b)) > min(map(len, a)) else a


def _required(seq: Any) -> frozenset[str] | None:
    best: frozenset[str] | None = None
    run: list[str] = []
    for op, av in seq:
        if op is _LITERAL and av < 128:
            run.append(chr(av).lower())
            continue
        if run:
            best = _best(best, frozenset({"".join(run)}))
            run = []
        if op is _SUB:
            best = _best(best, _required(av[-1]))
        elif _ATOMIC is not None and op is _ATOMIC:
            best = _best(best, _required(av))
        elif op is _BRANCH:
            sets = [_required(b) for b in av[1]]
            if all(sets):
                best = _best(best, frozenset().union(*sets))  # type: ignore[arg-type]
        elif op in _REPEATS and av[0] >= 1:
            item = list(av[2])
            if len(item) == 1 and item[0][0] is _LITERAL and item[0][1] < 128:  # X{4,} needs "xxxx"
                best = _best(best, frozenset({chr(item[0][1]).lower() * min(av[0], 8)}))
            else:
                best = _best(best, _required(av[2]))
        # anything else (anchors, classes, lookarounds, back-references …) requires nothing usable
    if run:
        best = _best(best, frozenset({"".join(run)}))
    return best


def required_literals(rx: re.Pattern[str]) -> frozenset[str] | None:
    """Lower-case ASCII literals one of which every match of ``rx`` contains, or ``None`` when no
    usable set is found (shortest literal under :data:`MIN_LITERAL`). Cached per pattern."""
    return info_of(rx).lits


#: A width at or above this is treated as unbounded (``re`` reports ``MAXREPEAT`` for ``+``/``*``).
_UNBOUNDED = 1 << 16

Anchor = tuple[frozenset[str], int]


def _anchor(seq: Any) -> Anchor | None:
    """``(literals, bound)``: every match contains one of the literals at some index ``q`` and starts at
    ``q - bound`` or later — read off the top-level sequence as a factor (a run of literal characters, or
    a group/alternation/repeat with a literal set) all of whose preceding items have a bounded maximum
    width. So a search may begin ``bound`` characters before the first occurrence of a literal."""
    best: Anchor | None = None
    before = 0  # maximum width of the items before the current one
    items = list(seq)
    i = 0
    while i < len(items) and before < _UNBOUNDED:
        op, av = items[i]
        if op is _LITERAL and av < 128:
            j = i
            while j < len(items) and items[j][0] is _LITERAL and items[j][1] < 128:
                j += 1
            cand: Anchor | None = (frozenset({"".join(chr(a).lower() for _, a in items[i:j])}), before)
            width = j - i
            i = j
        else:
            width = _p.SubPattern(seq.state, [(op, av)]).getwidth()[1]
            lits = _required(_p.SubPattern(seq.state, [(op, av)]))
            cand = (lits, before + width) if lits and width < _UNBOUNDED else None
            i += 1
        if cand is not None and min(map(len, cand[0])) >= MIN_LITERAL:
            if best is None or min(map(len, cand[0])) > min(map(len, best[0])):
                best = cand
        before += width
    return best


def _analyse(rx: re.Pattern[str]) -> tuple[frozenset[str] | None, Anchor | None]:
    """``(required literals, anchor)`` of ``rx`` from one parse; ``(None, None)`` when unavailable."""
    return _analyse_all(rx)[:2]  # type: ignore[return-value]


def _analyse_all(rx: re.Pattern[str]) -> tuple[frozenset[str] | None, Anchor | None, tuple[Chars, ...] | None]:
    """:func:`_analyse` and, for a pattern without required literals, its required characters
    (:mod:`regex_chars`), from one parse — or from :mod:`~trajaudit.engine.dsl.regex.stored` (the pack
    cache's entry), without parsing."""
    if _p is None or not isinstance(rx.pattern, str):
        return None, None, None
    k = stored.key("i", rx)
    got = stored.lookup(k, stored.info_from)
    if got is None:
        got = _analyse_parsed(rx)
        stored.put(k, stored.info_data(got))
    return got


def _analyse_parsed(rx: re.Pattern[str]) -> tuple[frozenset[str] | None, Anchor | None, tuple[Chars, ...] | None]:
    """:func:`_analyse_all` from the parse tree of ``rx``."""
    try:
        tree = _p.parse(rx.pattern, rx.flags)
        got = _required(tree)
        lits = got if got and min(map(len, got)) >= MIN_LITERAL else None
        return lits, _anchor(tree), (chars_of_tree(tree) if lits is None else None)
    except Exception as e:  # noqa: BLE001 - the prefilter is optional; the regex stays the authority
        log.debug("no literal prefilter for %r: %s", rx.pattern[:80], e)
        return None, None, None


def start_bound(anchor: Anchor | None, low: str) -> int:
    """The first position a match can start at, given the text's lower-case form (0 when unknown)."""
    if anchor is None:
        return 0
    lits, bound = anchor
    first = min((q for q in (low.find(lit) for lit in lits) if q >= 0), default=-1)
    return max(0, first - bound) if first >= 0 else 0


def finditer_from(rx: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)``, started where the first match can begin (exact: no match starts before
    :func:`start_bound`), and empty at once when the literal prefilter proves there is no match."""
    info = info_of(rx)
    if info.lits is None and info.anchor is None and info.chars is None:
        return info.pattern_for(text).finditer(text)
    low = folded(text)
    if low is None:
        return rx.finditer(text)
    if ruled_out(info, text, low):
        return iter(())
    return info.pattern_for(text).finditer(text, start_bound(info.anchor, low))


def ruled_out(info: RegexInfo, text: str, low: str) -> bool:
    """True when ``info``'s pattern certainly does not match ``text`` (``low``: its :func:`folded`
    form): none of the literals every match contains occurs, or a required character is missing."""
    return ((info.probe is not None and not any(lit in low for lit in info.probe))
            or (info.chars is not None and lacks_required(info.chars, text, low)))


#: Texts up to this size share regex results across the runs of a process (:func:`_search_shared`).
SHARED_SEARCH_MAX_CHARS = 20_000

Span = tuple[int, int, str]


def span(m: re.Match[str] | None) -> Span | None:
    """``(start, end, matched text)`` of a match, or ``None``."""
    return None if m is None else (m.start(), m.end(), m.group(0))


Branch = tuple[re.Pattern[str], frozenset[str] | None, Anchor | None]


def branch_plan(rx: re.Pattern[str]) -> tuple[Branch, ...] | None:
    """``rx``'s alternation split into ``(branch pattern, its required literals, its anchor)`` (each may
    be ``None``), or ``None`` (see :func:`_branch_plan`). Cached per pattern."""
    return info_of(rx).plan


def _branch_plan(rx: re.Pattern[str]) -> tuple[Branch, ...] | None:
    """``rx``'s alternation split into ``(branch pattern, its required literals or None)``, or ``None``
    when splitting is not known to be exact or not worth it: capturing groups (back-references and
    group numbers), verbose mode or comments, fewer than 3 branches, or a branch that does not compile alone."""
    if _p is None or not isinstance(rx.pattern, str) or rx.groups or rx.flags & re.VERBOSE or "(?#" in rx.pattern:
        return None
    k = stored.key("p", rx)
    got = stored.lookup(k, stored.branches_from)
    branches = got[0] if got is not None else _flatten(rx.pattern)
    if branches is None or len(branches) < 3:
        plan = None
    else:
        try:
            plan = tuple(stored.compile_pattern(b, rx.flags) for b in branches)
        except (re.error, ValueError):
            plan = None
    stored.put(k, [None if plan is None else branches])
    return None if plan is None else tuple((b, *_analyse(b)) for b in plan)


def _search_branches(plan: tuple[Branch, ...], text: str, low: str) -> Span | None:
    """Leftmost match over the branches whose literals occur in ``low`` (earliest branch on a tie)."""
    best: re.Match[str] | None = None
    for b, lits, anchor in plan:
        if lits is not None and not any(lit in low for lit in lits):
            continue
        pos = start_bound(anchor, low)
        if best is not None and pos >= best.start():  # it cannot start earlier than the match in hand
            continue
        m = b.search(text, pos)
        if m is not None and (best is None or m.start() < best.start()):
            best = m
            if best.start() == 0:
                break
    return span(best)


class RegexInfo:
    """What the searches need to know about one compiled pattern, computed once: its literal set
    (:func:`required_literals`) and branch plan (:func:`branch_plan`). Hashed by identity: hashing an
    ``re.Pattern`` hashes its whole compiled code (~1.5 us for a long alternation) on every lookup."""

    __slots__ = ("rx", "lits", "probe", "anchor", "chars", "_plan", "_twin", "_ascii_plan")

    def __init__(self, rx: re.Pattern[str]) -> None:
        self.rx = rx
        self.lits, self.anchor, self.chars = _analyse_all(rx)
        # what "one of lits occurs" tests: the literals containing no other one (if a longer literal
        # occurs, so does the shorter one inside it), e.g. "forbidden" and not "403 forbidden"
        self.probe = None if self.lits is None else tuple(sorted(
            lit for lit in self.lits if not any(o != lit and o in lit for o in self.lits)))
        self._plan: Any = _NOT_YET
        self._twin: Any = None
        self._ascii_plan: Any = _NOT_YET

    def pattern_for(self, text: str) -> re.Pattern[str]:
        """``rx``, or its ASCII twin when that is exact on ``text`` (:mod:`regex_ascii`)."""
        twin = self._twin
        if twin is None:
            twin = self._twin = ascii_twin(self.rx)
        return twin_for(self.rx, twin, text)

    def plan_for(self, text: str) -> tuple[Branch, ...] | None:
        """:attr:`plan`, its branches replaced by their ASCII twins when those are exact on ``text``."""
        plan = self.plan
        if plan is None or not ascii_like(text):
            return plan
        if self._ascii_plan is _NOT_YET:
            twins = [ascii_twin(br[0]) for br in plan]
            self._ascii_plan = (tuple((t or br[0], br[1], br[2]) for br, (t, _) in zip(plan, twins, strict=True)),
                                any(space for _, space in twins))
        twinned, space = self._ascii_plan
        return plan if space and has_separators(text) else twinned

    @property
    def plan(self) -> tuple[Branch, ...] | None:
        """The branch plan, built on first use (it compiles every branch: only for patterns whose
        literal prefilter lets some text through)."""
        if self._plan is _NOT_YET:
            self._plan = _branch_plan(self.rx)
        return self._plan


_NOT_YET = object()


_INFO: dict[int, RegexInfo] = {}
_INFO_MAX = 4096


def info_of(rx: re.Pattern[str]) -> RegexInfo:
    """The :class:`RegexInfo` of ``rx`` (keyed by ``id``; the entry holds ``rx``, so an id is never
    reused while it is cached, and a hit is checked to be the same object). Bounded: cleared when full."""
    info = _INFO.get(id(rx))
    if info is None or info.rx is not rx:
        if len(_INFO) >= _INFO_MAX:
            _INFO.clear()
        info = _INFO[id(rx)] = RegexInfo(rx)
    return info


def _search(info: RegexInfo, text: str) -> Span | None:
    """``span(info.rx.search(text))``: on text that folds like ASCII (:func:`folded`) ``None`` at once
    when none of the required literals occurs, else through the branch plan or from the anchor bound."""
    low = folded(text)
    if low is not None:
        if ruled_out(info, text, low):
            return None
        if info.plan is not None:
            return _search_branches(info.plan_for(text), text, low)
        return span(info.pattern_for(text).search(text, start_bound(info.anchor, low)))
    return span(info.rx.search(text))


@lru_cache(maxsize=4096)
def _search_shared(info: RegexInfo, text: str) -> Span | None:
    """Bounded per-process cache of regex results (keyed by the pattern and the text itself, so a hit
    is exact): runs of one batch share texts (a system prompt, repeated tool outputs) and rule packs
    share patterns. At most 4096 texts of at most :data:`SHARED_SEARCH_MAX_CHARS` characters."""
    return _search(info, text)


#: Lower-case forms of long texts, shared by the rule engine's ``lower()`` (rules lower every earlier
#: step's content once per token they look up) and the literal prefilter. Keyed by the text itself, so
#: a hit is exact; bounded (emptied when full), emptied by ``evidence.clear_caches``.
LOWER_MEMO: dict[str, str] = {}
_LOWER_MIN, _LOWER_MAX_ENTRIES = 256, 4096


def lower_text(s: str) -> str:
    """``s.lower()``, memoized for texts of at least 256 characters."""
    if len(s) < _LOWER_MIN:
        return s.lower()
    got = LOWER_MEMO.get(s)
    if got is None:
        if len(LOWER_MEMO) >= _LOWER_MAX_ENTRIES:
            LOWER_MEMO.clear()
        got = LOWER_MEMO[s] = s.lower()
    return got


def _captures(rx: re.Pattern[str], text: str) -> tuple[str | None, ...]:
    g = 1 if rx.groups else 0
    return tuple(m.group(g) for m in finditer_from(rx, text))


@lru_cache(maxsize=4096)
def _captures_shared(info: RegexInfo, text: str) -> tuple[str | None, ...]:
    """Bounded per-process memo of :func:`captures` (keyed by the pattern's info and the text itself, so
    a hit is exact): a run's texts go through the same token patterns in several rules (an agent
    message in the id, URL and path rules; a call's argument values once per rule that reads them)."""
    return _captures(info.rx, text)


def captures(rx: re.Pattern[str], text: str) -> list[str | None]:
    """``[m.group(1) if rx.groups else m.group(0) for m in rx.finditer(text)]`` (a new list), through
    :func:`finditer_from` and, for texts up to :data:`SHARED_SEARCH_MAX_CHARS`, a per-process memo."""
    if len(text) <= SHARED_SEARCH_MAX_CHARS:
        return list(_captures_shared(info_of(rx), text))
    return list(_captures(rx, text))


#: patterns of compiled rule packs (:func:`register`), analysed ahead of use by :func:`warm_registered`
_REGISTERED: dict[int, re.Pattern[str]] = {}
_WARM: set[int] = set()


def register(rx: re.Pattern[str]) -> re.Pattern[str]:
    """Note ``rx`` (a compiled rule pattern) for :func:`warm_registered`; returns ``rx``. Bounded like
    the analyses' cache (cleared when full)."""
    if len(_REGISTERED) >= _INFO_MAX:
        _REGISTERED.clear()
        _WARM.clear()
    _REGISTERED[id(rx)] = rx
    for r in _REGISTERING:
        r.append(rx)
    return rx


_REGISTERING: list[list[re.Pattern[str]]] = []


@contextmanager
def registering() -> Iterator[list[re.Pattern[str]]]:
    """Collect the patterns :func:`register` notes inside the block (in order; the pack cache stores
    their :func:`decide_all` decisions with the pack)."""
    got: list[re.Pattern[str]] = []
    _REGISTERING.append(got)
    try:
        yield got
    finally:  # by identity: two collections may hold equal contents
        del _REGISTERING[next(i for i, r in enumerate(_REGISTERING) if r is got)]


def decide_all(rx: re.Pattern[str]) -> bool:
    """Make now every decision :mod:`~trajaudit.engine.dsl.regex.stored` keeps about ``rx`` and its
    branches (literals, anchor, characters, twin, branch split), so that an open ``stored.recording``
    collects them (the twin and branches it compiles are not kept: a search compiles its own, from
    ``re``'s cache). Returns False (and leaves the rest to the first search) when a decision raises."""
    try:
        _analyse_all(rx)
        ascii_twin(rx)
        for b, _, _ in _branch_plan(rx) or ():
            ascii_twin(b)
    except Exception:  # noqa: BLE001 - left to the first search, exactly as without storing
        return False
    return True


def warm(rx: re.Pattern[str]) -> None:
    """Build now what the first search of ``rx`` would build: its :class:`RegexInfo` (literal
    analysis), its ASCII twin and its branch plans (each compiles patterns: a few ms for the large
    ones). Pure caches of the pattern alone, so every later result is the same; only the time it is
    paid moves (a runtime monitor's first adds, issue 20)."""
    info = info_of(rx)
    info.pattern_for("")
    if info.plan is not None:
        info.plan_for("a")


def warm_registered() -> int:
    """:func:`warm` every registered pattern not warmed yet; returns how many it warmed. A pattern
    whose analysis raises is left to its first use (which raises or handles it as before)."""
    n = 0
    for key, rx in list(_REGISTERED.items()):
        if key in _WARM:
            continue
        _WARM.add(key)
        try:
            warm(rx)
        except Exception:  # noqa: BLE001 - left to the first search, exactly as without warming
            continue
        n += 1
    return n


def clear_shared() -> None:
    """Empty the per-process memos of regex results and lower-cased texts (not the pattern analyses)."""
    _search_shared.cache_clear()
    _captures_shared.cache_clear()
    _clear_ascii_memo()
    LOWER_MEMO.clear()


#: The non-ASCII characters that ``re.IGNORECASE`` matches to ASCII letters (İ ı ſ K; a test recomputes
#: the set over all of Unicode).
ASCII_FOLDING = frozenset("\u0130\u0131\u017f\u212a")


def folds_like_ascii(text: str, low: str) -> bool:
    """Whether ``low`` (``text.lower()``) shows, position by position, where a pattern's ASCII literals
    can match in ``text``: always for ASCII text; for other text when lower-casing keeps the length (so
    one character for one: positions agree) and no character of :data:`ASCII_FOLDING` occurs (so a
    match of an ASCII literal, case-insensitive or not, spans ASCII characters equal to it in lower case)."""
    return text.isascii() or (len(low) == len(text) and not any(c in text for c in ASCII_FOLDING))


def folded(text: str) -> str | None:
    """:func:`lower_text` of ``text`` when it :func:`folds_like_ascii` (the literal prefilter, the anchor
    bound and the branch plan then hold as on ASCII text), else ``None`` (the plain regex runs)."""
    low = lower_text(text)
    return low if folds_like_ascii(text, low) else None


def memo_search(rx: re.Pattern[str], text: str, memo: dict[Any, Span | None]) -> Span | None:
    """:func:`span` of ``rx.search(text)``, memoized in ``memo`` (one run's) and, for short texts, across
    runs (the literal prefilter's verdict too: each run repeats the system prompt, and testing ~30
    literals against its 6k characters per pattern and run added up)."""
    info = info_of(rx)
    key = (info, text)
    if key in memo:
        return memo[key]
    got = memo[key] = _search_shared(info, text) if len(text) <= SHARED_SEARCH_MAX_CHARS else _search(info, text)
    return got
