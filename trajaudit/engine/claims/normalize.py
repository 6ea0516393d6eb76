"""Value normalization shared by extraction and the evidence index (DRIFT §Support Seeker: "the value
appears, normalized").

Numbers: thousands separators (``1,234.5``, ``1 234,5``, ``1.234,56``, ``1'234``), currency signs,
scale words (``1.2 million``), non-ASCII digits (``١٢٣``) and number words (``eleven``) all map to one
canonical decimal string (``"1234.5"``, trailing zeros dropped). Ids and strings: case-folded, NFKC,
surrounding punctuation and a leading ``#`` dropped, whitespace collapsed.

Memoization: :func:`norm_text`, :func:`norm_number` and :func:`norm_scalar` are pure and called on the
same short values again and again (JSON leaves, table cells, repeated ids), so their results for inputs
of at most :data:`MEMO_MAX_CHARS` characters are kept in bounded LRU caches (``functools.lru_cache``,
:data:`MEMO_SIZE` entries each; ``typed`` so ``1``, ``1.0`` and ``True`` stay distinct). Longer inputs
are computed each time. :func:`clear_caches` empties them.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from dateutil import parser as dateutil_parser

from trajaudit.engine.dsl.regex.stored import module_pattern

MEMO_SIZE = 16384
MEMO_MAX_CHARS = 200

NUMBER_WORDS: dict[str, int] = {
    w: i for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
SCALES: dict[str, int] = {
    "thousand": 10**3, "k": 10**3, "million": 10**6, "m": 10**6, "mn": 10**6, "billion": 10**9,
    "bn": 10**9, "b": 10**9, "trillion": 10**12,
}
_STRIP = " \t\r\n.,;:!?()[]{}<>\"'`*_“”‘’«»"
_WS = module_pattern(r"\s+")
_SEP_THIN = module_pattern(r"[\s\u00a0\u202f\u2009']")
_CUR_HEAD = module_pattern(r"^(?:us\$|usd|eur|gbp|[$€£¥₹])\s*")
_CUR_TAIL = module_pattern(r"\s*(?:usd|eur|gbp|dollars?|euros?|%|percent)$")
_SCALE_TAIL = module_pattern(r"^(.*?\d)\s*(thousand|million|billion|trillion|mn|bn|k|m|b)$")
_NUMERIC = module_pattern(r"[\d.,]+")
_PLAIN_INT = module_pattern(r"\d+")
_NOT_DIGIT = module_pattern(r"\D")


def canon_decimal(d: Decimal) -> str:
    """Canonical string of a Decimal: no exponent, no trailing fractional zeros (``50.880`` → ``50.88``)."""
    if not d.is_finite():
        return str(d)
    s = format(d.normalize(), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _ascii_digits(text: str) -> str:
    if text.isascii():
        return text
    out = []
    for ch in text:
        if ch.isdigit() and not ("0" <= ch <= "9"):
            try:
                out.append(str(unicodedata.digit(ch)))
                continue
            except (TypeError, ValueError):
                pass
        out.append(ch)
    return "".join(out)


def parse_number(text: str) -> Decimal | None:
    """Parse a number in any common written format; ``None`` when ``text`` is not a number.

    Handles signs, currency symbols/codes, ``%``, grouping with ``,`` ``.`` space or ``'`` (a
    separator followed by exactly three digits more than once, or a ``,`` then ``.``, is grouping),
    decimal commas, scale suffixes (``k``, ``million``, ``bn``) and number words up to twenty.

    >>> str(parse_number("$1,819.92")), str(parse_number("1.234,5")), str(parse_number("2.5 million"))
    ('1819.92', '1234.5', '2500000.0')
    """
    t = _ascii_digits(unicodedata.normalize("NFKC", text)).strip().lower()
    if not t:
        return None
    if t in NUMBER_WORDS:
        return Decimal(NUMBER_WORDS[t])
    if _PLAIN_INT.fullmatch(t):
        return Decimal(t)
    t = _CUR_TAIL.sub("", _CUR_HEAD.sub("", t))
    scale = 1
    m = _SCALE_TAIL.match(t)
    if m:
        t, scale = m.group(1), SCALES[m.group(2)]
    t = _SEP_THIN.sub("", t)
    neg = t.startswith(("-", "−"))
    t = t.lstrip("+-−")
    if not t or not _NUMERIC.fullmatch(t) or not t[0].isdigit():
        return None
    if "," in t and "." in t:
        dec = "." if t.rfind(".") > t.rfind(",") else ","
        grp = "," if dec == "." else "."
        t = t.replace(grp, "").replace(dec, ".")
    elif "," in t:
        parts = t.split(",")
        if len(parts) > 2 or (len(parts[-1]) == 3 and len(parts[0]) <= 3):
            t = t.replace(",", "")  # 1,234 / 1,234,567: grouping
        else:
            t = t.replace(",", ".")  # 3,5: decimal comma
    elif t.count(".") > 1:
        if all(len(p) == 3 for p in t.split(".")[1:]):
            t = t.replace(".", "")  # 1.234.567: grouping
        else:
            return None  # a version number or a dotted id, not a number
    try:
        d = Decimal(t) * scale
    except InvalidOperation:
        return None
    return -d if neg else d


def norm_number(text: str) -> str | None:
    """Canonical string of a written number (``"$1,819.920"`` → ``"1819.92"``), or ``None`` (memoized)."""
    return _norm_number_memo(text) if len(text) <= MEMO_MAX_CHARS else _norm_number(text)


def _norm_number(text: str) -> str | None:
    """:func:`_norm_number_reference` with two shortcuts, both exact: a text holding ``_`` or ``#`` is
    not a number (every step of :func:`parse_number` keeps those characters — NFKC composes nothing
    with them, a test checks every code point — and its final test admits only digits, ``.`` and
    ``,``): ids such as ``user_9620`` or ``#W1`` reach here from :func:`norm_scalar`; and a currency
    sign followed by a plain decimal (``$54.85``) is that decimal (:func:`parse_number` drops the sign
    and reads the rest as :func:`plain_decimal` does)."""
    simple = plain_decimal(text)
    if simple is not None:
        return simple
    if "_" in text or "#" in text:
        return None
    if text and text[0] in _CURRENCY_SIGNS:
        simple = plain_decimal(text[1:])
        if simple is not None:
            return simple
    d = parse_number(text)
    return None if d is None else canon_decimal(d)


_CURRENCY_SIGNS = "$€£¥₹"


def _norm_number_reference(text: str) -> str | None:
    """The definition of :func:`_norm_number` (kept for the equivalence test)."""
    simple = plain_decimal(text)
    if simple is not None:
        return simple
    d = parse_number(text)
    return None if d is None else canon_decimal(d)


_PLAIN_DECIMAL = module_pattern(r"(-?)([0-9]+)(?:\.([0-9]+))?")


def plain_decimal(text: str) -> str | None:
    """``canon_decimal(parse_number(text))`` computed on the string, for a plain ASCII decimal (an
    optional ``-``, digits, an optional ``.`` and digits) of at most 28 digits; ``None`` for any other
    text (the caller then takes the Decimal path). Exact: within the Decimal context's 28 digits
    nothing is rounded, so the canonical form is the digits without leading integer zeros and
    trailing fractional zeros, and ``-0`` is ``0`` (tests/test_claims_lazy.py checks it)."""
    m = _PLAIN_DECIMAL.fullmatch(text)
    if m is None:
        return None
    sign, whole, frac = m.groups()
    if len(whole) + len(frac or "") > 28:
        return None
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0") if frac else ""
    out = f"{whole}.{frac}" if frac else whole
    return sign + out if sign and out != "0" else out


_UNIT_TAIL = module_pattern(r"[^\d.,'\s-]+$")


def number_key(raw: str) -> str | None:
    """The index key of a scanned number: :func:`norm_number`, else the number without its unit
    (``"24MP"`` → ``"24"``); long digit strings (7+ digits) stay as written (they are ids)."""
    core = raw.strip()
    if len(core) >= 7 and core.isdigit():
        return core
    v = norm_number(core)
    if v is None:
        v = norm_number(_UNIT_TAIL.sub("", core).strip() or core)
    return v


def significant_digits(value: str) -> int:
    """Significant digits of a canonical number string (``"100"`` → 1, ``"259.81"`` → 5, ``"0.05"`` → 1)."""
    return len(_NOT_DIGIT.sub("", value).strip("0"))


def norm_text(text: str) -> str:
    """Case-folded NFKC text, whitespace collapsed, surrounding punctuation and markup stripped (memoized)."""
    return _norm_text_memo(text) if len(text) <= MEMO_MAX_CHARS else _norm_text(text)


def _norm_text(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).casefold()
    # = _norm_text_reference: str.split() cuts at the runs of the characters `\s` matches (both test
    # Py_UNICODE_ISSPACE; a test checks every code point), so joining the pieces with " " is the
    # substitution, except that a leading or trailing run yields no " ": the strip, whose set holds
    # " ", would remove it anyway (and then the same characters of the text after it).
    return " ".join(t.split()).strip(_STRIP)


def _norm_text_reference(text: str) -> str:
    """The definition of :func:`norm_text` (kept for the equivalence test)."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return _WS.sub(" ", t).strip(_STRIP)


def norm_id(text: str) -> str:
    """An identifier's key: :func:`norm_text` without a leading ``#`` (``"#W2378156"`` → ``"w2378156"``)."""
    return norm_text(text).lstrip("#")


def norm_scalar(value: object) -> str | None:
    """Normalize a JSON scalar (tool argument or tool-output leaf): numbers canonically, strings as
    numbers when they are numbers, else as ids; ``None`` for null/booleans/empty strings (memoized)."""
    if value.__class__ is str and len(value) <= MEMO_MAX_CHARS:  # type: ignore[arg-type]
        return _norm_scalar_str_memo(value)
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float, str)) and (not isinstance(value, str) or len(value) <= MEMO_MAX_CHARS):
        return _norm_scalar_memo(value)
    return _norm_scalar(value)


_LONG_DIGITS = module_pattern(r"\d{7,}")
_DIGIT = module_pattern(r"\d")


def _norm_scalar(value: object) -> str | None:
    if isinstance(value, (int, float)):
        simple = plain_decimal(str(value))  # the same result, without Decimal arithmetic
        if simple is not None:
            return simple
        try:
            return canon_decimal(Decimal(str(value)))
        except InvalidOperation:
            return None
    s = str(value)
    if not s.strip():
        return None
    if _LONG_DIGITS.fullmatch(s.strip()):
        return s.strip()  # long digit strings are ids: keep leading zeros
    n = norm_number(s) if _DIGIT.search(s) and len(s) <= 40 else None
    return n if n is not None else norm_id(s)


_norm_text_memo = lru_cache(maxsize=MEMO_SIZE)(_norm_text)
_norm_number_memo = lru_cache(maxsize=MEMO_SIZE)(_norm_number)
_norm_scalar_memo = lru_cache(maxsize=MEMO_SIZE, typed=True)(_norm_scalar)
#: The memo of exact ``str`` inputs: untyped, so ``lru_cache`` keys it by the string itself (the typed
#: memo builds a ``(value, type)`` key tuple per call); the same function, only ever given strings.
_norm_scalar_str_memo = lru_cache(maxsize=MEMO_SIZE)(_norm_scalar)


def clear_caches() -> None:
    """Empty the memo caches of this module (benchmarks clear them between repetitions)."""
    for f in (_norm_text_memo, _norm_number_memo, _norm_scalar_memo, _norm_scalar_str_memo):
        f.cache_clear()


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters/digits, ``-`` and ``_`` inside words)."""
    return re.findall(r"\w+(?:[-_]\w+)*", text.casefold())


def singular(word: str) -> str:
    """A crude singular for matching nouns to JSON keys (``variants`` → ``variant``, ``boxes`` → ``box``)."""
    w = word.casefold()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("ses", "xes", "ches", "shes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


@lru_cache(maxsize=MEMO_SIZE)
def when_key(raw: str, group: str) -> str | None:
    """The canonical key of a date or time as written, with python-dateutil: a full date as
    ``YYYY-MM-DD`` (``"May 23, 2024"``, ``"23 May 2024"``, ``"2024-05-23"``, ``"5/23/2024"`` — month
    first, as dateutil reads it), a month as ``YYYY-MM`` (``"April 2018"``), a date with a time as
    ``YYYY-MM-DD HH:MM[:SS]``, a time of day as ``HH:MM`` or ``HH:MM:SS`` when the seconds are not zero
    (``"06:00 AM"``, ``"6 am"`` and ``"06:00:00"`` are all ``06:00``). ``group`` is the pattern group that
    matched (``date`` or ``time``). ``None`` when dateutil cannot read it (the caller keeps the text).
    Memoized."""
    text = raw.strip()
    if not text:
        return None
    try:
        a = dateutil_parser.parse(text, default=_D1)
        b = dateutil_parser.parse(text, default=_D2)
    except (ValueError, OverflowError, TypeError):
        return None
    if group == "time":
        return _clock(a)
    if a.year != b.year:
        return None  # no year: not a calendar date we can place
    has_time = bool(_CLOCK_IN_DATE.search(text))
    if a.day != b.day:
        return f"{a.year:04d}-{a.month:02d}"
    day = f"{a.year:04d}-{a.month:02d}-{a.day:02d}"
    return f"{day} {_clock(a)}" if has_time else day


def _clock(d: datetime) -> str:
    h, mi, s = d.hour, d.minute, d.second
    return f"{h:02d}:{mi:02d}" if s == 0 else f"{h:02d}:{mi:02d}:{s:02d}"


_CLOCK_IN_DATE = module_pattern(r"\d[T ]\d{1,2}:\d{2}")


#: Two defaults that differ in every field: a field dateutil fills from the default was not written.
_D1, _D2 = datetime(1, 1, 1), datetime(2, 2, 2)


#: Linear units by dimension: the factor to the dimension's base unit (metre, kilogram, litre,
#: second, byte). A small table (no library needed for these); temperatures are not linear and are
#: left out.
UNIT_FACTORS: dict[str, tuple[str, float]] = {
    **{u: ("length", 1000.0) for u in ("km", "kms", "kilometer", "kilometers", "kilometre", "kilometres")},
    **{u: ("length", 1.0) for u in ("m", "meter", "meters", "metre", "metres")},
    **{u: ("length", 0.01) for u in ("cm",)},
    **{u: ("length", 0.001) for u in ("mm",)},
    **{u: ("length", 1609.344) for u in ("mi", "mile", "miles")},
    **{u: ("length", 0.3048) for u in ("ft", "feet", "foot")},
    **{u: ("length", 0.0254) for u in ("in", "inch", "inches")},
    **{u: ("mass", 1.0) for u in ("kg",)},
    **{u: ("mass", 0.001) for u in ("g", "gram", "grams")},
    **{u: ("mass", 0.45359237) for u in ("lb", "lbs", "pound", "pounds")},
    **{u: ("mass", 0.028349523125) for u in ("oz", "ounce", "ounces")},
    **{u: ("volume", 1.0) for u in ("l", "liter", "liters", "litre", "litres")},
    **{u: ("volume", 0.001) for u in ("ml",)},
    **{u: ("volume", 3.785411784) for u in ("gallon", "gallons")},
    **{u: ("time", 1.0) for u in ("s", "sec", "secs", "second", "seconds")},
    **{u: ("time", 60.0) for u in ("min", "mins", "minute", "minutes")},
    **{u: ("time", 3600.0) for u in ("h", "hr", "hrs", "hour", "hours")},
    **{u: ("time", 86400.0) for u in ("day", "days")},
    **{u: ("time", 604800.0) for u in ("week", "weeks")},
    **{u: ("data", 1e3) for u in ("kb",)},
    **{u: ("data", 1e6) for u in ("mb",)},
    **{u: ("data", 1e9) for u in ("gb",)},
    **{u: ("data", 1e12) for u in ("tb",)},
}
_UNIT_AFTER = module_pattern(r"[\d.,]\s?([A-Za-z]+)\s*$")
_SCALE_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9, "mn": 1e6}


def quantity(text: str) -> tuple[str, float] | None:
    """``(dimension, value in the dimension's base unit)`` of a number written with a linear unit of
    :data:`UNIT_FACTORS` (``"12.3 km"`` → ``("length", 12300.0)``, ``"12,345 m"`` →
    ``("length", 12345.0)``); ``None`` without a known unit or a readable number."""
    hit = _UNIT_AFTER.search(text.strip())
    if hit is None:
        return None
    unit = UNIT_FACTORS.get(hit.group(1).casefold())
    value = parse_number(text.strip()[: hit.start(1)].strip())
    if unit is None or value is None:
        return None
    return unit[0], float(value) * unit[1]
