"""Regular expressions for deterministic claim extraction (one pass per pattern family, linear time).

Kept apart from the extractor so the patterns can be read and tested as data. Every pattern is
anchored on word boundaries and has no nested unbounded repetition (no catastrophic backtracking on
MBs of HTML or binary-looking text).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from functools import lru_cache

from trajaudit.engine.claims.noise import runtime_spans
from trajaudit.engine.dsl.regex.prefilter import ASCII_FOLDING, folds_like_ascii  # noqa: F401 - ASCII_FOLDING re-exported
from trajaudit.engine.dsl.regex.stored import module_pattern
from trajaudit.engine.trace.escapes import has_escapes, mask_escapes  # noqa: F401 - re-exported

#: A written number: grouped with , / no-break or thin space / ' (``1,234.5``, ``1'234``), European
#: ``1.234,56`` (both separators), or plain with an optional decimal point. A lone decimal comma
#: (``21,6``) is read as two numbers: in English prose and in code it is a list.
_NUM = r"\d{1,3}(?:\.\d{3})+,\d+|\d{1,3}(?:[,\u00a0\u202f']\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_SCALE = r"(?:\s?(?:thousand|million|billion|trillion|bn|mn)\b|[kKmMbB]\b)?"
_UNITS = (
    r"%|percent\b|per\s?cent\b|km\b|kms\b|kilometers?\b|kilometres?\b|miles?\b|mi\b|m\b|meters?\b|metres?\b|"
    r"cm\b|mm\b|ft\b|feet\b|foot\b|inch(?:es)?\b|in\b|kg\b|g\b|grams?\b|lbs?\b|pounds?\b|oz\b|ounces?\b|"
    r"l\b|liters?\b|litres?\b|ml\b|gallons?\b|mph\b|km/h\b|kph\b|°[cf]?|degrees?\b|"
    r"seconds?\b|secs?\b|s\b|minutes?\b|mins?\b|hours?\b|hrs?\b|h\b|days?\b|weeks?\b|months?\b|years?\b|"
    r"mb\b|gb\b|tb\b|kb\b|mp\b|mah\b|w\b|watts?\b|kw\b|kwh\b|v\b|volts?\b|hz\b|ghz\b|mhz\b|bar\b|"
    r"calories?\b|kcal\b|points?\b|votes?\b|people\b|persons?\b|residents?\b|inhabitants?\b"
)
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)

#: Value claims in one alternation, most specific first (leftmost-first matching gives priority).
VALUE_RE = module_pattern(
    r"(?P<email>\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b)"
    r"|(?P<url>\b(?:https?|ftp)://[^\s<>\"'`)\]]{2,2000})"
    r"|(?P<path>(?<![\w/])(?:[A-Za-z]:\\|\.{1,2}/|~/|/)?(?:[\w.-]+[/\\]){1,20}[\w.-]+\.[A-Za-z0-9]{1,6}\b"
    r"|\b[\w-]{1,80}\.(?:csv|xlsx?|json|jsonl|txt|pdf|docx?|pptx?|png|jpe?g|gif|mp3|mp4|wav|zip|py|md|html?|xml|pdb|tsv|parquet)\b)"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    rf"|\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+\d{{4}}\b"
    rf"|\b{_MONTHS}\.?\s+\d{{4}}\b)"
    r"|(?P<time>\b\d{1,2}:\d{2}(?::\d{2})?\s?(?:[ap]\.?m\.?\b)?|\b\d{1,2}\s?[ap]\.?m\.?(?!\w))"
    r"|(?P<hashid>#[A-Za-z]{0,3}\d{4,}\b)"
    r"|(?P<snakeid>\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*_\d{3,}\b)"
    r"|(?P<money>(?:US\$|[$€£¥₹])\s?(?:" + _NUM + r")" + _SCALE +
    r"|\b(?:" + _NUM + r")" + _SCALE + r"\s?(?:USD|EUR|GBP|dollars?|euros?)\b)"
    r"|(?P<number>(?<![\w.])-?(?:" + _NUM + r")" + _SCALE + r"(?:\s?(?:" + _UNITS + r"))?)",
    re.IGNORECASE,
)

_COUNT_WORD = r"\d{1,6}|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|" \
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty"
#: "11 available T-shirt options", "three pending orders": a count, up to 3 modifier words, a plural noun.
COUNT_RE = module_pattern(
    r"(?<![\w.$€£#-])(?P<n>" + _COUNT_WORD + r")\s+(?P<mods>(?:[\w-]+\s+){0,3}?)(?P<noun>[A-Za-z][\w-]*?s)\b(?![.,]\d)",
    re.IGNORECASE,
)

#: A count's number (digits or a count word, as a literal-led alternation) followed by a space, after a
#: character ``COUNT_RE``'s look-behind accepts (a set the regex engine skips to) or at the very start;
#: applied to the folded text.
_COUNT_START = (r"(?:\d+|z(?:ero)|o(?:ne)|t(?:w(?:o|elve|enty)|h(?:ree|irteen)|en)|f(?:our(?:teen)?|ive|ifteen)|"
                r"s(?:ix(?:teen)?|even(?:teen)?)|e(?:ight(?:een)?|leven)|n(?:ine(?:teen)?))(?=\s)")
_COUNT_AFTER = module_pattern(r"[^\w.$€£#-]" + _COUNT_START)
#: The same for ASCII text, the class spelled out as ASCII characters (a bitmap test per character
#: instead of a Unicode category lookup).
_COUNT_AFTER_ASCII = module_pattern(
    "[" + "".join(re.escape(chr(i)) for i in range(128) if not re.match(r"[\w.$€£#-]", chr(i))) + "]" + _COUNT_START)
_COUNT_HEAD = module_pattern(_COUNT_START)


def count_matches(text: str) -> list[re.Match[str]]:
    """``list(COUNT_RE.finditer(text))``, faster: ``COUNT_RE`` is tried only where a match can begin.
    A match begins with digits or a count word that a space follows, at the start of the text or after
    a character the look-behind accepts; in the :func:`ascii_fold` of the text one scan finds those
    places (the regex engine skips to the accepted characters instead of attempting ``COUNT_RE``'s
    look-behind and 27-way alternation at every position). A candidate never covers the character
    before another (it ends in a word character), so none is hidden. Candidates are tried left to
    right from the end of the previous match, as ``finditer`` does. A text that cannot be folded takes
    ``COUNT_RE.finditer``."""
    low = ascii_fold(text)
    if low is None:
        return list(COUNT_RE.finditer(text))
    starts = [x.start() + 1 for x in (_COUNT_AFTER_ASCII if text.isascii() else _COUNT_AFTER).finditer(low)]
    if _COUNT_HEAD.match(low):
        starts.insert(0, 0)
    out = []
    end = 0
    match = COUNT_RE.match
    for c in starts:
        if c < end:
            continue
        x = match(text, c)
        if x is not None:
            out.append(x)
            end = x.end()
    return out


#: Completion claims: "successfully processed", "has been cancelled", "downloaded the file", "saved to x".
COMPLETION_RE = module_pattern(
    r"\b(?:(?:successfully|has\s+been|have\s+been|was|were|is\s+now|are\s+now|been)\s+(?:successfully\s+)?"
    r"(?P<verb>(?:cancel+|process|return|exchang|modifi|updat|download|sav|complet|creat|sent|send|plac|"
    r"submitt|book|transferr|delet|refund|upload|writt|export|generat|instal+|verifi|confirm)\w*)"
    r"|(?P<verb2>downloaded|saved|written|exported)\s+(?:it\s+|them\s+|the\s+\w+\s+)?(?:to|as|in|into)\s+"
    r"(?P<target>\S{1,200}))",
    re.IGNORECASE,
)

#: Quoted names and titles in prose (not in code): "…", “…”, '…' (2–120 chars, at least one letter).
#: The definition; ``QUOTED_RE`` is the same with the look-behind of the ``'`` branch moved after the
#: quote (``'(?<!\w')`` ≡ ``(?<!\w)'``), so every branch starts with a literal and the regex engine
#: skips to quote characters instead of trying every position (5× faster, same matches).
QUOTED_REFERENCE = (
    r"\"(?P<a>[^\"\n]{2,120})\"|“(?P<b>[^”\n]{2,120})”|(?<!\w)'(?P<c>[^'\n]{2,120})'(?!\w)|«(?P<d>[^»\n]{2,120})»"
)
QUOTED_RE = module_pattern(
    r"\"(?P<a>[^\"\n]{2,120})\"|“(?P<b>[^”\n]{2,120})”|'(?<!\w')(?P<c>[^'\n]{2,120})'(?!\w)|«(?P<d>[^»\n]{2,120})»"
)

#: The end of a sentence: a dot not before a digit.
_SENT_END = module_pattern(r"\.(?!\d)")

#: Sentences offering an example or a format: the values in them are illustrations, not claims.
_EXAMPLE = module_pattern(r"\b(?:e\.g\.|for example|for instance|such as|something like|look(?:s)? like|format|placeholder|"
                      r"example)\b", re.I)


def sentence_bounds(text: str, a: int, b: int) -> tuple[int, int]:
    """The bounds of the sentence (or line) around text[a:b], before stripping."""
    w = max(0, a - 400)  # (each call spelled out: no generator per call)
    lo = max(text.rfind(".", w, a), text.rfind("!", w, a), text.rfind("?", w, a), text.rfind("\n", w, a)) + 1
    hi = [i for i in (text.find("!", b, b + 400), text.find("?", b, b + 400), text.find("\n", b, b + 400)) if i >= 0]
    dot = _SENT_END.search(text, b, b + 400)
    if dot is not None:
        hi.append(dot.start())
    return lo, min(hi) if hi else min(len(text), b + 400)


def sentence_around(text: str, a: int, b: int) -> str:
    """The sentence (or line) around text[a:b]."""
    lo, hi = sentence_bounds(text, a, b)
    return text[lo:hi].strip()


#: Every ``_EXAMPLE`` match holds one of these (lower case).
_EXAMPLE_WORDS = ("e.g.", "example", "instance", "such as", "like", "format", "placeholder")


def example_at(text: str, folded: str | None, a: int, b: int) -> bool:
    """``_EXAMPLE.search(sentence_around(text, a, b)) is not None``; when ``folded`` (the text's
    :func:`ascii_fold`) is given, the regex runs only if the sentence holds one of
    :data:`_EXAMPLE_WORDS`, which every match contains (exact: IGNORECASE matches of these ASCII words
    are plain matches in the folded text, at the same positions)."""
    lo, hi = sentence_bounds(text, a, b)
    if folded is not None and not any(folded.find(w, lo, hi) >= 0 for w in _EXAMPLE_WORDS):
        return False
    return _EXAMPLE.search(text[lo:hi].strip()) is not None


#: Fenced code blocks (``` … ```); an unclosed fence runs to the end of the text.
CODE_RE = module_pattern(r"```.*?(?:```|\Z)", re.DOTALL)


def code_ranges(text: str) -> list[tuple[int, int]]:
    """``[x.span() for x in CODE_RE.finditer(text)]`` with ``str.find``: a match is an opening fence
    and the lazy ``.*?`` (any character) up to the first fence after it, or to the end of the text;
    the next match is searched from its end (a match is never empty)."""
    out = []
    i = text.find("```")
    while i >= 0:
        j = text.find("```", i + 3)
        end = len(text) if j < 0 else j + 3
        out.append((i, end))
        i = text.find("```", end)
    return out

#: A line that opens a JSON object or array (the candidates :func:`json_ranges` tries).
_JSON_OPEN = module_pattern(r"^[ \t]*[{\[]", re.M)
_JSON = json.JSONDecoder()
MAX_JSON_TRIES = 50


def json_ranges(text: str) -> list[tuple[int, int]]:
    """Spans of the JSON objects and arrays a message embeds, each opening at a line start.

    Agents log structured state as JSON inside their prose (Magentic-One's Orchestrator writes an
    "Updated Ledger" object every turn). Inside such a span double quotes are JSON syntax, not
    quotation: keys are field names and string values are prose (scanned for values like any text).
    Each span is a successful ``json.JSONDecoder.raw_decode`` from a line starting with ``{`` or ``[``
    that yields a non-empty object or array; at most :data:`MAX_JSON_TRIES` openings are tried. An
    opening nested too deeply for the parser (a line of thousands of ``[``, as a model stuck
    repeating a character writes) is not JSON: ``raw_decode``'s ``RecursionError`` skips it.
    """
    out: list[tuple[int, int]] = []
    end = tries = 0
    for x in _JSON_OPEN.finditer(text):
        a = x.end() - 1
        if a < end:
            continue
        tries += 1
        if tries > MAX_JSON_TRIES:
            break
        try:
            obj, b = _JSON.raw_decode(text, a)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, (dict, list)) and obj:
            out.append((a, b))
            end = b
    return out


#: Sentence / line boundaries for slot checks (the reference definition; :func:`sentence_spans` is
#: the fast equivalent used by the extractor).
SENTENCE_RE = module_pattern(r"[^\n.!?]*(?:[.!?](?!\d)|\n|$)")
_TERMINATOR = module_pattern(r"[\n.!?]")
_DIGIT_AT = module_pattern(r"\d")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of ``SENTENCE_RE.finditer(text)``, found in linear time.

    ``SENTENCE_RE`` fails at every position of a run ended by a ``.``/``!``/``?`` followed by a digit
    (``3.5``) and retries from the next position, which is quadratic in the run's length; its next
    match always starts right after that terminator. So: take each run up to and including its
    terminator (or the end), and drop the runs whose terminator is followed by a digit. The runs of
    ``re.finditer(r"[^\n.!?]*(?:[\n.!?]|$)", text)`` are cut at each terminator, then come the rest up to the end (if any) and
    an empty run at the end, so they follow from the terminators' positions.
    """
    out = []
    a = 0
    for x in _TERMINATOR.finditer(text):
        b = x.end()
        if text[b - 1] == "\n" or not _DIGIT_AT.match(text, b):
            out.append((a, b))
        a = b
    if a < len(text):
        out.append((a, len(text)))  # the last run ends at the end (``$``) ...
    out.append((len(text), len(text)))  # ... and finditer then also matches empty there
    return out


def candidate_sentences(text: str, positions: list[int], lead: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of :func:`sentence_spans` that contain one of ``positions`` (``s <= p < e``) or one of
    the ``lead`` spans (``s <= a < e`` and ``b <= e``, as :func:`holds_literal` tests), in order;
    positions and spans lie inside the text. Found around each position instead of splitting the whole
    text: the runs of ``sentence_spans`` are cut after each terminator, so the run holding ``p`` goes
    from the last terminator before ``p`` to the first at or after it, and it is a sentence unless
    that terminator is a ``.!?`` followed by a digit."""
    picked: set[tuple[int, int]] = set()
    for p, end in [(p, p + 1) for p in positions] + [(a, max(b, a + 1)) for a, b in lead]:
        s = max(text.rfind("\n", 0, p), text.rfind(".", 0, p), text.rfind("!", 0, p), text.rfind("?", 0, p)) + 1
        m = _TERMINATOR.search(text, p)
        if m is None:
            e = len(text)
        else:
            e = m.end()
            if text[e - 1] != "\n" and _DIGIT_AT.match(text, e):
                continue  # a run the sentence pattern skips (3.5)
        if end <= e:
            picked.add((s, e))
    return sorted(picked)


#: Every ``COMPLETION_RE`` match contains one of these lead words (lower case) ...
_COMPLETION_WORDS = ("successfully", "been", "was", "were", "now", "downloaded", "saved", "written", "exported")
#: ... and one of these verb stems.
_COMPLETION_STEMS = ("cancel", "process", "return", "exchang", "modifi", "updat", "download", "sav", "complet",
                     "creat", "sent", "send", "plac", "submitt", "book", "transferr", "delet", "refund", "upload",
                     "writt", "export", "generat", "instal", "verifi", "confirm")


#: Any verb stem, as one pattern: ``_STEMS_RE.search(low, start, end)`` is ``any(low.find(w, start, end)
#: >= 0 for w in _COMPLETION_STEMS)`` (plain lower-case literals: a match lies within the bounds), in
#: one call instead of one per stem.
_STEMS_RE = module_pattern("|".join(_COMPLETION_STEMS))


def _spans(low: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    out = []
    for w in words:
        i = low.find(w)
        while i >= 0:
            out.append((i, i + len(w)))
            i = low.find(w, i + 1)
    out.sort()
    return out


#: The non-ASCII characters ``re.IGNORECASE`` matches to an ASCII letter (dotted and dotless i, long
#: s, Kelvin sign); tests/test_claims_lazy.py recomputes the set over all of Unicode.
@lru_cache(maxsize=8)
def ascii_fold(text: str) -> str | None:
    """``text.lower()`` when, position by position, it shows exactly where ``re.IGNORECASE`` matches
    ASCII letters in ``text`` (:func:`~trajaudit.engine.dsl.regex.prefilter.folds_like_ascii`: ASCII text,
    or lower-casing keeps the length and no character of ``ASCII_FOLDING`` occurs); ``None`` otherwise
    (the callers then take the plain regex path). Memoized for the last few texts: the passes over one
    agent text each ask for it."""
    low = text.lower()
    return low if folds_like_ascii(text, low) else None


def completion_literals(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """Spans of every occurrence (overlaps included) of the lead words and of the verb stems that
    every ``COMPLETION_RE`` match contains, each list sorted; ``None`` when :func:`ascii_fold` cannot
    fold the text (see :func:`completion_possible`). A part of the text can hold a match only if it
    holds a span of each list (:func:`holds_literal`)."""
    low = ascii_fold(text)
    if low is None:
        return None
    return _spans(low, _COMPLETION_WORDS), _spans(low, _COMPLETION_STEMS)


def completion_leads(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """``(folded, leads)``: the :func:`ascii_fold` of ``text`` and the sorted spans of every lead word
    in it — empty when the text holds no lead word or no verb stem (then nothing can match) — or
    ``None`` when the text cannot be folded. With :func:`holds_completion` this answers like
    :func:`completion_literals` + :func:`holds_literal`, but the stems are only looked for inside the
    parts asked about (most texts hold lead words such as "was" in a few sentences only)."""
    low = ascii_fold(text)
    if low is None:
        return None
    leads = _spans(low, _COMPLETION_WORDS)
    if leads and _STEMS_RE.search(low) is None:
        leads = []
    return low, leads


def holds_completion(folded: str, leads: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds a lead word and a verb stem (``folded``, ``leads`` from
    :func:`completion_leads`); equal to ``holds_literal(completion_literals(text), start, end)``."""
    return _holds(leads, start, end) and _STEMS_RE.search(folded, start, end) is not None


def _holds(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    for i in range(bisect_left(spans, (start, -1)), len(spans)):
        a, b = spans[i]
        if a >= end:
            return False
        if b <= end:
            return True
    return False


def holds_literal(spans: tuple[list[tuple[int, int]], list[tuple[int, int]]] | None, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds a lead word and a verb stem of ``spans`` (from
    :func:`completion_literals`; always True when ``spans`` is ``None``)."""
    return spans is None or (_holds(spans[0], start, end) and _holds(spans[1], start, end))


def completion_possible(text: str) -> bool:
    """False only when ``COMPLETION_RE`` cannot match ``text``: a text :func:`ascii_fold` can fold
    (where ``re.IGNORECASE`` matching of the ASCII words is plain matching in the folded text) that
    lacks either every lead word or every verb stem a match needs. Other texts always return True
    (Unicode case folding has exotic equivalents, such as ``ſ`` for ``s``)."""
    low = ascii_fold(text)
    if low is None:
        return True
    return any(w in low for w in _COMPLETION_WORDS) and any(w in low for w in _COMPLETION_STEMS)


@lru_cache(maxsize=256)
def status_re(word: str) -> re.Pattern[str]:
    """The pattern of one object-state word, optionally negated ("not available"), compiled once."""
    return re.compile(r"(?<!\w)(?:(not|no\s+longer|isn't|aren't|wasn't)\s+)?" + re.escape(word) + r"(?!\w)")


#: A list marker at the start of a line ("1.", "2)", "- 3.") — not a claim (the definition;
#: :func:`list_markers` finds the same digits faster).
LIST_MARKER_RE = module_pattern(r"(?:^|\n)[ \t>*-]*(\d{1,3})[.)](?=\s)")
_LIST_MARKER_NL = module_pattern(r"\n[ \t>*-]*(\d{1,3})[.)](?=\s)")
_LIST_MARKER_HEAD = module_pattern(r"[ \t>*-]*(\d{1,3})[.)](?=\s)")


def list_markers(text: str) -> set[int]:
    """``{x.start(1) for x in LIST_MARKER_RE.finditer(text)}``: its two branches apart — the one led by
    a newline (a literal, which the regex engine skips to instead of trying every position) and the
    one at the start of the text (a marker holds no newline, so the two never overlap)."""
    found = {x.start(1) for x in _LIST_MARKER_NL.finditer(text)}
    head = _LIST_MARKER_HEAD.match(text)
    if head is not None:
        found.add(head.start(1))
    return found

#: A word token for the evidence index (the definition; :func:`words_of` is the fast equivalent).
WORD_RE = module_pattern(r"\w+(?:[-_]\w+)*")
_NOT_WORD_ASCII = str.maketrans({chr(i): " " for i in range(128) if not (chr(i).isalnum() or chr(i) in "_-")})


def is_word_char(c: str) -> bool:
    """Whether the character ``c`` is one ``\\w`` matches in a ``str`` pattern (``_sre``: Unicode
    alphanumeric, or ``_``); a test compares them over every code point."""
    return c.isalnum() or c == "_"


def words_of(text: str) -> list[str]:
    """``WORD_RE.findall(text)``, faster for ASCII text: a token never spans a character outside
    ``[A-Za-z0-9_-]``, so the text is cut into runs of those (``str.translate`` + ``split``); a run
    without ``-`` is one token, and only runs with ``-`` go through the regex."""
    if not text.isascii():
        return WORD_RE.findall(text)
    runs = text.translate(_NOT_WORD_ASCII).split()
    if "-" not in text:  # (then no run holds one: every run is a token)
        return runs
    out: list[str] = []
    for run in runs:
        if "-" in run:
            out.extend(WORD_RE.findall(run))
        else:
            out.append(run)
    return out


@lru_cache(maxsize=256)
def noise_spans(text: str) -> list[tuple[int, int]]:
    """:func:`~.noise.runtime_spans` of ``text``, memoized for the last texts: a run's decision steps are
    scanned for pasted runtime output twice, by the extractor (their claims) and by the evidence index
    (their pasted output is evidence). The list is shared: read-only."""
    return runtime_spans(text)
