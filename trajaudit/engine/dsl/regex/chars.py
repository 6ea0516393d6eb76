"""Required characters of a regex: a prefilter for token patterns that have no usable literal.

``regex_prefilter`` skips a search when a literal of at least three characters that every match
needs is absent. Token patterns (ids, e-mails, file paths) have none: ``\\d{6,}``, ``[\\w.-]+/``
need only single characters. :func:`required_chars` reads, from the same parse tree, a list of
character sets such that every match contains a character of *each* set (a conjunction):

- a literal character gives ``{c}``; a class of at most :data:`MAX_CLASS` ASCII characters (literals,
  ranges, ``\\d`` = the ten ASCII digits) gives its characters; anything else (``\\w``, ``.``,
  negated classes, non-ASCII characters) gives nothing;
- a sequence gives the sets of its items (a group, or a repeat of at least one, passes its item's
  sets on; optional items, look-arounds and anchors give nothing);
- an alternation gives one set: the union of one set per branch (the smallest of each branch's
  sets), or nothing when a branch has none.

Sets are lower-cased, so the test runs on the lower-cased text. It is exact on ASCII text: there
``re.IGNORECASE`` is ASCII case folding and ``\\d`` is ``[0-9]`` (on other text ``\\d`` also matches
other scripts' digits), and on text whose other characters are inert (caseless, no letter, digit
or space: :func:`~trajaudit.engine.dsl.regex.ascii.ascii_like`); :func:`lacks_required` answers "no
match" only for such texts missing every character of some set. E.g. every ``path_token`` match holds ``/`` and ``.``; every
``id_token`` match holds ``@``, ``_`` or a digit.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from trajaudit.engine.dsl.regex.ascii import ascii_like

log = logging.getLogger(__name__)

MAX_CLASS = 12
_DIGITS = frozenset("0123456789")

try:  # CPython's regex parser (private; its shape is stable since 3.11)
    from re import _parser as _p
except ImportError:  # pragma: no cover - another Python: no prefilter
    _p = None

Chars = frozenset[str]


def _class_chars(items: Any) -> Chars | None:
    out: set[str] = set()
    for op, av in items:
        name = str(op)
        if name == "LITERAL" and av < 128:
            out.add(chr(av).lower())
        elif name == "RANGE" and av[1] < 128 and av[1] - av[0] < MAX_CLASS:
            out.update(chr(c).lower() for c in range(av[0], av[1] + 1))
        elif name == "CATEGORY" and str(av) == "CATEGORY_DIGIT":
            out |= _DIGITS
        else:
            return None
        if len(out) > MAX_CLASS:
            return None
    return frozenset(out) if out else None


def _item(op: Any, av: Any) -> list[Chars]:
    """The character sets every match of one parse-tree item contains (a conjunction)."""
    name = str(op)
    if name == "LITERAL":
        return [frozenset({chr(av).lower()})] if av < 128 else []
    if name == "IN":
        got = _class_chars(av)
        return [got] if got else []
    if name == "SUBPATTERN":
        return _seq(av[-1])
    if name == "ATOMIC_GROUP":
        return _seq(av)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return _seq(av[2]) if av[0] >= 1 else []
    if name == "BRANCH":
        parts: list[Chars] = []
        for b in av[1]:
            sets = _seq(b)
            if not sets:
                return []
            parts.append(min(sets, key=len))
        return [frozenset().union(*parts)]
    return []  # anchors, look-arounds, back-references, classes too wide: nothing required


def _seq(seq: Any) -> list[Chars]:
    out: list[Chars] = []
    for op, av in seq:
        out.extend(_item(op, av))
    return out


def required_chars(rx: re.Pattern[str]) -> tuple[Chars, ...] | None:
    """Character sets (lower case) each of which every match of ``rx`` meets, smallest first, or
    ``None`` when none is found (or the pattern cannot be analysed)."""
    if _p is None or not isinstance(rx.pattern, str):
        return None
    try:
        return chars_of_tree(_p.parse(rx.pattern, rx.flags))
    except Exception as e:  # noqa: BLE001 - the prefilter is optional; the regex stays the authority
        log.debug("no character prefilter for %r: %s", rx.pattern[:80], e)
        return None


def chars_of_tree(tree: Any) -> tuple[Chars, ...] | None:
    """:func:`required_chars` of a parsed pattern (``re._parser.parse``)."""
    uniq = sorted(set(_seq(tree)), key=lambda s: (len(s), sorted(s)))
    return tuple(uniq) or None


def lacks_required(sets: tuple[Chars, ...], text: str, low: str) -> bool:
    """True when ``text`` is ASCII (or :func:`~trajaudit.engine.dsl.regex.ascii.ascii_like`: its other
    characters are caseless and neither digits, letters nor spaces) and its lower-cased form ``low``
    misses every character of one of ``sets`` (then the pattern cannot match)."""
    if not ascii_like(text):
        return False
    return any(not any(c in low for c in s) for s in sets)
