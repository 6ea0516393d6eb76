"""Regex searches for the rule engine: memoized, and skipped when a literal prefilter proves no match.

For a compiled pattern, :func:`required_literals` finds a set of lower-case ASCII strings such that
every match contains one of them (the classic "necessary factor" analysis, as in Hyperscan or RE2's
prefilters), from the pattern's parse tree: a run of literal characters is such a set; a group, or a
repeat of at least one, passes its item's set on; an alternation needs a set from every branch (their
union). The most selective set of a sequence is kept (the one whose shortest literal is longest).

:func:`cannot_match` then answers "no match" without running the regex when the text is ASCII and
holds none of the literals in lower case — exact, because on ASCII text ``re.IGNORECASE`` is ASCII
case folding and a case-sensitive literal also occurs case-insensitively. Non-ASCII texts, and
patterns without a usable set (shortest literal under 3 characters), always run the regex. The parse
uses CPython's ``re._parser``; anything unexpected there just disables the prefilter for that pattern.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

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
            best = _best(best, _required(av[2]))
        # anything else (anchors, classes, lookarounds, back-references …) requires nothing usable
    if run:
        best = _best(best, frozenset({"".join(run)}))
    return best


@lru_cache(maxsize=1024)
def required_literals(rx: re.Pattern[str]) -> frozenset[str] | None:
    """Lower-case ASCII literals one of which every match of ``rx`` contains, or ``None`` when no
    usable set is found (shortest literal under :data:`MIN_LITERAL`). Cached per pattern."""
    if _p is None or not isinstance(rx.pattern, str):
        return None
    try:
        got = _required(_p.parse(rx.pattern, rx.flags))
    except Exception as e:  # noqa: BLE001 - the prefilter is optional; the regex stays the authority
        log.debug("no literal prefilter for %r: %s", rx.pattern[:80], e)
        return None
    return got if got and min(map(len, got)) >= MIN_LITERAL else None


def cannot_match(rx: re.Pattern[str], text: str, lowered: str | None = None) -> bool:
    """True only when ``rx.search(text)`` is certainly ``None`` (see the module docstring).

    Args:
        lowered: ``text.lower()`` when the caller has it (saves recomputing it per pattern).
    """
    lits = required_literals(rx)
    if lits is None or not text.isascii():
        return False
    low = lowered if lowered is not None else text.lower()
    return not any(lit in low for lit in lits)


#: Texts up to this size share regex results across the runs of a process (:func:`_search_shared`).
SHARED_SEARCH_MAX_CHARS = 20_000

Span = tuple[int, int, str]


def span(m: re.Match[str] | None) -> Span | None:
    """``(start, end, matched text)`` of a match, or ``None``."""
    return None if m is None else (m.start(), m.end(), m.group(0))


@lru_cache(maxsize=4096)
def _search_shared(rx: re.Pattern[str], text: str) -> Span | None:
    """Bounded per-process cache of regex results (keyed by the pattern and the text itself, so a hit
    is exact): runs of one batch share texts (a system prompt, repeated tool outputs) and rule packs
    share patterns. At most 4096 texts of at most :data:`SHARED_SEARCH_MAX_CHARS` characters."""
    return span(rx.search(text))


def memo_search(rx: re.Pattern[str], text: str, memo: dict[Any, Span | None], lowered: dict[str, str]) -> Span | None:
    """:func:`span` of ``rx.search(text)``, memoized in ``memo`` (one run's) and, for short texts, across
    runs; ``lowered`` keeps each ASCII text's lower-case form for the literal prefilter."""
    key = (rx, text)
    if key in memo:
        return memo[key]
    lits = required_literals(rx)
    if lits is not None and text.isascii():
        low = lowered.get(text)
        if low is None:
            low = lowered[text] = text.lower()
        if not any(lit in low for lit in lits):
            memo[key] = None
            return None
    got = memo[key] = _search_shared(rx, text) if len(text) <= SHARED_SEARCH_MAX_CHARS else span(rx.search(text))
    return got
