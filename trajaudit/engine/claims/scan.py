"""Fast value scanning: every value pattern is found from a cheap *anchor* (a digit, ``#``, a currency
sign, ``@``, ``://``, ``_123``, a ``.ext`` suffix), so the regex engine can skip to candidate
positions by first character instead of trying every alternative at every position; boundaries and
month-name dates are checked around the anchor in Python. Linear in the text's size (each match
extends at most a bounded number of characters), which keeps MBs of HTML or binary-looking text cheap.

:func:`scan_values` returns ``[(group, start, end)]`` sorted by start, non-overlapping, with groups
``email url path date time hashid snakeid money number`` (the groups of ``patterns.VALUE_RE``, which
stays the reference definition used for full matches of short strings).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

from trajaudit.engine.claims.patterns import _MONTHS, _NUM, _SCALE, _UNITS, ascii_fold
from trajaudit.engine.dsl.regex.stored import module_pattern

_DATE_TIME_ID = (
    r"(?P<date>\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?(?!\d)|\d{1,2}/\d{1,2}/\d{2,4}(?!\d)"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+\d{{4}}(?!\d))"
    r"|(?P<time>\d{1,2}:\d{2}(?::\d{2})?(?:\s?[ap]\.?m\.?(?!\w))?(?![\d:])|\d{1,2}\s?[ap]\.?m\.?(?!\w))"
    r"|(?P<hashid>#[A-Za-z]{0,3}\d{4,}(?!\w))"
)
_MONEY_SIGN = r"[$€£¥₹]\s?(?:" + _NUM + r")" + _SCALE
_MONEY_WORD = r"(?:" + _NUM + r")" + _SCALE + r"\s?(?:USD|EUR|GBP|dollars?|euros?)\b"
_NUMBER = r"(?P<number>(?:" + _NUM + r")" + _SCALE + r"(?:\s?(?:" + _UNITS + r"))?)"
#: The reference definition of the anchored value scan (the pattern of ``_DIGIT_RE``, which only the
#: equivalence tests use: it is compiled on first access, see :func:`__getattr__`).
_DIGIT_RE_PATTERN = rf"(?=[\d#$€£¥₹])(?:{_DATE_TIME_ID}|(?P<money>{_MONEY_SIGN}|{_MONEY_WORD})|{_NUMBER})"


def __getattr__(name: str) -> Any:
    """``_DIGIT_RE`` (``_DIGIT_RE_PATTERN``, ignoring case), compiled on first access and kept: the
    reference the fast scan is tested against; compiling it costs ~2.5 ms that no audit needs."""
    if name == "_DIGIT_RE":
        rx = globals()[name] = re.compile(_DIGIT_RE_PATTERN, re.IGNORECASE)
        return rx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
# The same scan, faster: (a) a unit is tried only when a letter, % or ° follows the number (every unit
# starts with one), which spares trying ~90 unit spellings after most numbers; (b) for an ASCII text
# holding none of the currency words, the number-then-currency-word branch (which can then never
# match, and backtracks through every digit of a long id trying) is left out. Same matches, checked
# against _DIGIT_RE by tests/test_claims_fastpaths.py.
_NUMBER_FAST = (r"(?P<number>(?:" + _NUM + r")" + _SCALE + r"(?:(?=\s?(?:[^\W\d_]|[%°]))\s?(?:" + _UNITS
                + r"))?)")
_DIGIT_FAST = module_pattern(
    rf"(?=[\d#$€£¥₹])(?:{_DATE_TIME_ID}|(?P<money>{_MONEY_SIGN}|{_MONEY_WORD})|{_NUMBER_FAST})", re.IGNORECASE)
_DIGIT_NO_WORD_MONEY = module_pattern(
    rf"(?=[\d#$€£¥₹])(?:{_DATE_TIME_ID}|(?P<money>{_MONEY_SIGN})|{_NUMBER_FAST})", re.IGNORECASE)
_CURRENCY_WORDS = ("usd", "eur", "gbp", "dollar")


_ANCHOR_ASCII = module_pattern(r"[0-9#$]")
#: Where a match of ``_DIGIT_RE`` can begin in any text: its leading look-ahead's set (no character
#: of it has another case, so the flag changes nothing; kept for fidelity).
_ANCHOR_ANY = module_pattern(r"[\d#$€£¥₹]", re.IGNORECASE)


def _digit_re(text: str) -> re.Pattern[str]:
    """The fastest variant of ``_DIGIT_RE`` that matches exactly like it on ``text``."""
    if text.isascii():
        low = text.lower()
        if not any(w in low for w in _CURRENCY_WORDS):
            return _DIGIT_NO_WORD_MONEY
    return _DIGIT_FAST


#: A plain number (digits, optionally ``.`` and digits) at an anchor, and the ASCII characters after which
#: no alternative of ``_DIGIT_RE`` can go on: not a letter, digit, space or one of ``-/:.,'%`` (every
#: date, time, grouping, decimal, scale-word and unit continuation starts with one of those).
_PLAIN_AT = module_pattern(r"[0-9]+(?:\.[0-9]+)?")
_SPACE = frozenset(c for c in map(chr, range(128)) if re.match(r"\s", c))
_STOP = frozenset(c for c in map(chr, range(128)) if not (c.isalnum() or c in _SPACE or c in "-/:.,'%"))
_SPACE_RUN = module_pattern(r"\s+")
#: Every continuation of a number after spaces starts with one of these (a unit, a scale word, am/pm,
#: a currency word, a month); glued to the digits also an ordinal suffix (``3rd May 2024``).
_GOES_ON_WORDS = (r"(?:" + _UNITS + r"|(?:thousand|million|billion|trillion|bn|mn)\b|[kKmMbB]\b|[ap]\.?m\.?(?!\w)"
                  r"|(?:USD|EUR|GBP|dollars?|euros?)\b|" + _MONTHS)
_GOES_ON = module_pattern(_GOES_ON_WORDS + ")", re.IGNORECASE)
_GOES_ON_GLUED = module_pattern(_GOES_ON_WORDS + "|st|nd|rd|th)", re.IGNORECASE)


def _plain_end(text: str, a: int) -> int:
    """The end of the ``number`` match of ``_DIGIT_RE`` at ASCII digit ``text[a]`` when it is the plain
    number there (no alternative can continue past it), else -1 (run the regex). Any text: after the
    digits a non-ASCII character (a Unicode digit or space, a letter) passes only when the regex
    :data:`_GOES_ON_GLUED` says no word can start there, else -1. What may
    continue, right after the digits: ``,``/``'`` + digit (grouping), ``.`` + digit (decimals,
    grouping), ``-`` + digit after exactly 4 digits (ISO date), ``/`` + digit after 1–2 digits (d/m/y),
    ``:`` (time), ``%`` (unit), or — glued or after spaces — a word :data:`_GOES_ON` can start
    (month, unit, scale, ``pm``, currency; glued also ``3rd``)."""
    q = _PLAIN_AT.match(text, a).end()  # type: ignore[union-attr]  # (a digit is at a: it matches)
    if q == len(text):
        return q
    c = text[q]
    if c in _STOP:
        return q
    nxt = text[q + 1] if q + 1 < len(text) else ""
    if c in ",'.":
        return -1 if nxt.isdecimal() else q
    if c == "-" or c == "/":
        date = (q - a == 4) if c == "-" else (q - a <= 2)
        return -1 if date and nxt.isdecimal() and "." not in text[a:q] else q
    if c in _SPACE:
        r = _SPACE_RUN.match(text, q).end()  # type: ignore[union-attr]  # (a space is at q)
        return q if r == len(text) or _GOES_ON.match(text, r) is None else -1
    if c.isalpha():
        return q if _GOES_ON_GLUED.match(text, q) is None else -1
    return -1


def _digit_matches(text: str) -> Iterator[tuple[str, int, int]]:
    """``(x.lastgroup or "number", x.start(), x.end())`` for ``x`` in ``_DIGIT_RE.finditer(text)``.

    The matcher is only started where a match can begin (the set of the pattern's leading look-ahead:
    a plain character set the regex engine skips to quickly; ``0-9#$`` in an ASCII text), instead of
    at every position. And a plain number followed by a stop character (``54.04,`` or
    ``9523456873"``, the numbers of JSON) is a ``number`` match spanning exactly that plain number:
    every other alternative needs one of the non-stop characters right after its digits, and the
    number alternative ends there too — so the ~100-way alternation is not run for it (see
    :func:`_plain_end`)."""
    rx = _digit_re(text)
    match, plain_end = rx.match, _plain_end
    seek = _ANCHOR_ASCII.search if text.isascii() else _ANCHOR_ANY.search
    pos = 0
    while (anchor := seek(text, pos)) is not None:
        a = anchor.start()
        c = text[a]
        if "0" <= c <= "9":
            q = plain_end(text, a)
            if q >= 0:
                yield "number", a, q
                pos = q
                continue
        elif c in "#$€£¥₹":
            # a hash id needs a letter or digit next, an amount a space or digit: else no match here
            nxt = text[a + 1: a + 2]
            if not (nxt.isalnum() if c == "#" else nxt.isspace() or nxt.isdecimal()):
                pos = a + 1
                continue
        x = match(text, a)
        if x is None:
            pos = a + 1
        else:
            yield x.lastgroup or "number", a, x.end()
            pos = x.end()


_MONTH_BEFORE = module_pattern(rf"\b{_MONTHS}\.?\s+$", re.IGNORECASE)
#: Every ``_MONTHS`` alternative starts with one of these.
_MONTH_STEMS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _month_before(text: str, a: int) -> re.Match[str] | None:
    """``_MONTH_BEFORE.search(text, max(0, a - 12), a)``, run only when the window holds a month's
    first three letters: in the window's :func:`~.patterns.ascii_fold` (where the IGNORECASE matches
    of ASCII words are plain ones), or always when it cannot be folded."""
    lo = max(0, a - 12)
    low = ascii_fold.__wrapped__(text[lo:a])
    if low is not None and not any(m in low for m in _MONTH_STEMS):
        return None
    return _MONTH_BEFORE.search(text, lo, a)
_SHORT_INT = module_pattern(r"\d{1,4}")
_YEAR_AFTER = module_pattern(r"(?:st|nd|rd|th)?,?\s+\d{4}(?!\d)")
_EMAIL_RE = module_pattern(r"@[\w-]+(?:\.[\w-]+)+")
_URL_RE = module_pattern(r"(?=[hf])(?:https?|ftp)://[^\s<>\"'`)\]]{2,2000}", re.IGNORECASE)
_EXT_RE = module_pattern(r"\.[A-Za-z][A-Za-z0-9]{0,5}(?![\w])")
_PATH_FULL = module_pattern(
    r"(?:[A-Za-z]:\\|\.{1,2}/|~/|/)?(?:[\w.-]+[/\\]){1,20}[\w.-]+\.[A-Za-z0-9]{1,6}"
    r"|[\w-]{1,80}\.(?:csv|xlsx?|json|jsonl|txt|pdf|docx?|pptx?|png|jpe?g|gif|mp3|mp4|wav|zip|py|md|html?|xml|"
    r"pdb|tsv|parquet)",
    re.IGNORECASE,
)
_SNAKE_RE = module_pattern(r"_\d{3,}(?!\w)")
_SNAKE_FULL = module_pattern(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*_\d{3,}")
_PATH_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-~/\\:"
_EMAIL_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-"
_SNAKE_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _back(text: str, i: int, chars: str, limit: int) -> int:
    """The start of the run of ``chars`` ending at ``i`` (at most ``limit`` long): ``str.rstrip`` of
    the window, in C, instead of a step back per character."""
    stop = max(0, i - limit)
    return stop + len(text[stop:i].rstrip(chars))


def _url_matches(text: str) -> list[re.Match[str]]:
    """``list(_URL_RE.finditer(text))``: a match is a scheme right before a ``://``, so the regex is
    tried only at the scheme start each ``://`` (found with ``str.find``) allows, left to right from
    the end of the previous match (as ``finditer`` does), instead of at every position. The schemes
    are read from the :func:`~.patterns.ascii_fold` of the text (IGNORECASE); a text that cannot be
    folded takes ``finditer``."""
    low = ascii_fold(text)
    if low is None:
        return list(_URL_RE.finditer(text))
    out = []
    end = 0
    i = low.find("://")
    while i >= 0:
        for start, scheme in ((i - 5, "https"), (i - 4, "http"), (i - 3, "ftp")):
            if start >= end and low.startswith(scheme, start):
                x = _URL_RE.match(text, start)
                if x is not None:
                    out.append(x)
                    end = x.end()
                break
        i = low.find("://", max(i + 1, end))
    return out


def scan_values(text: str) -> list[tuple[str, int, int]]:
    """All value matches in ``text`` as ``(group, start, end)``, sorted, non-overlapping (first wins)."""
    found: list[tuple[str, int, int]] = []
    if "@" in text:
        _emails(text, found)
    if "://" in text:
        _urls(text, found)
    _paths(text, found)
    if "_" in text:
        _snake_ids(text, found)
    _digit_values(text, found)
    return _first_wins(found)


#: How far past a number the displayed text is read for its unit or scale word (the longest unit
#: spelling is 11 characters; scale words and a space come before it) and how far back for its currency
#: sign, in characters of the text: the blanked spans between them are not counted by the reading.
_JOIN_AFTER = 40
_JOIN_GAP = 400
_SIGNS = "$€£¥₹"


def scan_values_blanked(text: str, blanks: Sequence[tuple[int, int]]
                        ) -> tuple[list[tuple[str, int, int]], dict[int, str]]:
    """:func:`scan_values` of a text whose terminal control sequences were blanked (``blanks``: their
    spans, :func:`~trajaudit.engine.trace.escapes.escape_spans`), with a number joined to the unit,
    scale word or currency sign that only blanked spans (and at most the one space the value patterns
    allow) separate it from: ``\\x1b[1m12\\x1b[0m%`` is displayed "12%", and is the number 12 % where
    the blanks left "12" and a "%" apart. The joined match spans the blanks (``[start:end]`` stay
    offsets of the text); it is kept only when it is a number or money match that contains the
    number's own match and overlaps no other match. Returns ``(matches, raws)``: ``raws`` maps the
    start of each joined match to its text as displayed (the blanks left out), for its value.
    Without ``blanks``, exactly ``(scan_values(text), {})``."""
    found = scan_values(text)
    if not blanks:
        return found, {}
    hidden = bytearray(len(text))
    for s, e in blanks:
        hidden[s:e] = b"\x01" * (e - s)
    raws: dict[int, str] = {}
    out: list[tuple[str, int, int]] = []
    for i, (g, a, b) in enumerate(found):
        if g == "number":
            lo = out[-1][2] if out else 0
            hi = found[i + 1][1] if i + 1 < len(found) else len(text)
            joined = _join_blanked(text, hidden, a, b, lo, hi)
            if joined is not None:
                g, a, b, raws[joined[1]] = joined
        out.append((g, a, b))
    return out, raws


def _join_blanked(text: str, hidden: bytearray, a: int, b: int, lo: int, hi: int
                  ) -> tuple[str, int, int, str] | None:
    """The number match ``text[a:b]`` read again in the displayed text around it (blanked characters
    left out): from a currency sign before it (blanks and at most one space between) to
    :data:`_JOIN_AFTER` displayed characters after it. ``(group, start, end, displayed text)`` when
    that reading is a longer number or money match within ``[lo, hi)``, else ``None``."""
    start = _sign_before(text, hidden, a, lo)
    if start == a and not _blank_after(text, hidden, b):
        return None
    keep: list[int] = []  # the positions of the displayed characters read, up to _JOIN_AFTER past b
    after = 0
    for k in range(start, min(hi, b + _JOIN_GAP)):
        if not hidden[k]:
            keep.append(k)
            after += k >= b
            if after >= _JOIN_AFTER:
                break
    shown = "".join(text[k] for k in keep)
    x = _digit_re(shown).match(shown)
    if x is None or x.lastgroup not in ("number", "money"):
        return None
    end = keep[x.end() - 1] + 1
    if end < b or (start, end) == (a, b) or end > hi:
        return None
    return x.lastgroup, start, end, x.group()


def _sign_before(text: str, hidden: bytearray, a: int, lo: int) -> int:
    """The position of a currency sign that starts a token before ``a`` with only blanked characters
    (at least one) and at most one space between, at or after ``lo``; else ``a``."""
    j, spaces, blanked = a - 1, 0, False
    while j >= max(lo, a - _JOIN_GAP) and (hidden[j] or text[j].isspace()):
        blanked, spaces = blanked or bool(hidden[j]), spaces + (not hidden[j])
        j -= 1
    if (blanked and spaces <= 1 and j >= lo and not hidden[j] and text[j] in _SIGNS
            and not (j and (text[j - 1].isalnum() or text[j - 1] in "_."))):
        return j
    return a


def _blank_after(text: str, hidden: bytearray, b: int) -> bool:
    """Whether a blanked character follows position ``b`` right away or after one space."""
    n = len(text)
    return (b < n and bool(hidden[b])) or (b + 1 < n and text[b].isspace() and bool(hidden[b + 1]))


def _emails(text: str, found: list[tuple[str, int, int]]) -> None:
    """Append the ``email`` matches: a domain after ``@``, stepped back over the local part."""
    for x in _EMAIL_RE.finditer(text):
        a = _back(text, x.start(), _EMAIL_CHARS, 64)
        if a < x.start():
            found.append(("email", a, x.end()))


def _urls(text: str, found: list[tuple[str, int, int]]) -> None:
    """Append the ``url`` matches not glued to a word before them, without trailing punctuation."""
    for x in _url_matches(text):
        a = x.start()
        if a and text[a - 1].isalnum():
            continue
        raw = x.group().rstrip(".,;:!?*_'\"")
        found.append(("url", a, a + len(raw)))


def _paths(text: str, found: list[tuple[str, int, int]]) -> None:
    """Append the ``path`` matches: a ``.ext`` suffix, stepped back over path characters (leading
    ``.:-\\`` dropped unless they start ``./``, ``../`` or ``.\\``), that ``_PATH_FULL`` spans."""
    for x in _EXT_RE.finditer(text):
        a = _back(text, x.start(), _PATH_CHARS, 300)
        while a < x.start() and text[a] in ".:-\\" and not text.startswith(("./", "../", ".\\"), a):
            a += 1
        if a < x.start():
            hit = _PATH_FULL.fullmatch(text, a, x.end())
            if hit is not None and (a == 0 or text[a - 1] not in "@"):
                found.append(("path", a, x.end()))


def _snake_ids(text: str, found: list[tuple[str, int, int]]) -> None:
    """Append the ``snakeid`` matches: ``_123`` stepped back over snake-case characters."""
    for x in _SNAKE_RE.finditer(text):
        a = _back(text, x.start(), _SNAKE_CHARS, 80)
        if a < x.start() and _SNAKE_FULL.fullmatch(text, a, x.end()) and (a == 0 or not text[a - 1].isalnum()):
            found.append(("snakeid", a, x.end()))


def _digit_values(text: str, found: list[tuple[str, int, int]]) -> None:
    """Append the matches of the digit-anchored scan (:func:`_digit_matches`) that start a token: with
    a leading ``-`` sign, and a month name before a day or date widening it to a ``date``."""
    for g, a, b in _digit_matches(text):
        if g != "hashid" and a and (text[a - 1].isalnum() or text[a - 1] in "_."):
            continue
        if g == "number" and a and text[a - 1] == "-" and (a < 2 or not text[a - 2].isalnum()):
            a -= 1  # a sign
        if g in ("number", "date") and a > 1 and text[a - 1] in " \t" and (text[a - 2].isalpha() or text[a - 2] == "."):
            pre = _month_before(text, a)
            if pre is not None and (g == "date" or _SHORT_INT.fullmatch(text[a:b])):
                found.append(_month_date(text, g, pre.start(), a, b))
                continue
        found.append((g, a, b))


def _month_date(text: str, g: str, pre: int, a: int, b: int) -> tuple[str, int, int]:
    """The value a month name at ``pre`` makes of the number or date ``text[a:b]`` after it: a date from
    the month (through a following year for a 1–2 digit day; without a year, the day alone)."""
    if g == "number" and len(text[a:b]) <= 2:
        post = _YEAR_AFTER.match(text, b)
        if post is None:
            return g, a, b
        b = post.end()
    return "date", pre, b


_START, _END = itemgetter(1), itemgetter(2)


def _first_wins(found: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """``found`` sorted by start (longest first), keeping each match that starts after the last kept one ends."""
    if not found:
        return found
    # = found.sort(key=lambda f: (f[1], -f[2])): two stable sorts by C key functions (the second keeps
    # the first's order among equal starts: longest first, then as found) instead of a lambda per match
    found.sort(key=_END, reverse=True)
    found.sort(key=_START)
    out = [found[0]]
    for f in found[1:]:
        if f[1] >= out[-1][2]:
            out.append(f)
    return out
