"""Deterministic claim extraction from decision steps (DRIFT §Claim Keeper, rule-based).

:class:`ClaimExtractor` is the extension point (a runtime-checkable Protocol); extractors are kept in a
:class:`~trajaudit.registry.Registry` built by :func:`default_extractors`, so an LLM extractor can be
registered beside :class:`RegexExtractor` and run in its place or in addition.

What counts as a claim (general policy, not tuned on any run): identifiers (``#W1234567``, long digit
strings, ``snake_case_1234`` ids, emails), URLs and file paths, money, numbers with a unit, decimals
and integers >= 10 (smaller bare integers and list markers such as ``1.`` are not claims), counts of a
plural noun (``11 available options``), dates and times, quoted names in prose, scalar tool-call
arguments, object statuses and completion statements, and the final answer. Inside code (fenced
blocks, code/expression arguments) only identifiers, paths, URLs and numbers with >= 3 significant
digits are claims: loop bounds and small literals are not commitments.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from trajaudit.engine.claims import model as m
from trajaudit.engine.claims.normalize import (
    NUMBER_WORDS,
    norm_id,
    norm_number,
    norm_scalar,
    norm_text,
    number_key,
    significant_digits,
    singular,
    when_key,
)
from trajaudit.engine.claims.patterns import (
    _EXAMPLE_WORDS,
    _MONTHS,
    _UNITS,
    COMPLETION_RE,
    QUOTED_RE,
    VALUE_RE,
    ascii_fold,
    candidate_sentences,
    code_ranges,
    completion_leads,
    count_matches,
    example_at,
    has_escapes,
    holds_completion,
    json_ranges,
    list_markers,
    mask_escapes,
    noise_spans,
    sentence_around,
    sentence_spans,
    status_re,
)
from trajaudit.engine.claims.scan import scan_values_blanked
from trajaudit.engine.dsl.regex.stored import module_pattern
from trajaudit.engine.trace.escapes import escape_spans
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.engine.trace.observation import observation_start
from trajaudit.registry import Registry

log = logging.getLogger(__name__)

_GROUP_KIND = {"email": m.KIND_EMAIL, "url": m.KIND_URL, "path": m.KIND_PATH, "date": m.KIND_DATE,
               "time": m.KIND_TIME, "hashid": m.KIND_ID, "snakeid": m.KIND_ID, "money": m.KIND_MONEY,
               "number": m.KIND_NUMBER}
_SUBJECT_KINDS = (m.KIND_ID, m.KIND_EMAIL, m.KIND_PATH, m.KIND_URL)
_PLAIN_INT = module_pattern(r"-?\d+")
#: Placeholder identifiers: one repeated digit or an ascending run (``#W0000000``, ``1234567``).
_PLACEHOLDER = module_pattern(r"^\D*(?:(\d)\1{4,}|0?123456789?|1234567?)\D*$")
#: Words that cannot sit between a count and its noun ("one of these variants" is not a count).
_FUNCTION_WORDS = frozenset("of in on at to for from by with per and or the a an these those this that is are was "
                            "were be been am pm than as into".split())
#: A month name just before a number makes it a day of a date ("May 23 includes" counts nothing).
_MONTH_BEFORE = module_pattern(r"\b" + _MONTHS + r"\.?\s+$", re.I)
_UNIT_NOUN = module_pattern(r"(?:" + _UNITS + r")", re.I)
#: Templates and placeholders in URLs and paths: ``{owner}``, ``<id>``, ``path/to/``, ``your_file``.
_TEMPLATE = module_pattern(r"[{}<>]|\bpath/to/|\byour[_-]|example\.(?:com|org)|\bxxx", re.I)
#: Just before a path: the step names a file it creates ("# filename: x.py", open(.., "w"), to_csv(...).
_ARTIFACT = module_pattern(r"(?:filename:\s*|(?:to_csv|to_excel|to_json|savefig|save|dump)\(\s*['\"]?"
                       r"|saved? (?:it )?(?:to|as) [`'\"]?|>\s*)$", re.I)
#: Sentences that are conditional or generic ("orders are sometimes processed faster") state no object's state.
_CONDITIONAL = module_pattern(r"\b(?:if|once|unless|whether|until|only|sometimes|usually|typically|generally|often)\b",
                          re.I)
#: Just before a state word: a future/modal ("will be processed") or a completion ("successfully processed").
_NOT_STATE = module_pattern(r"(?:successfully|(?:will|would|can|could|may|might|should|must|to)\s+(?:\w+ly\s+|also\s+|not\s+)?"
                        r"(?:be|get))\s+$", re.I)
_TERMINATION = frozenset(("terminate", "###stop###", "stop", "exit"))
_NEGATION = module_pattern(r"n't|\bnot\b|\bnever\b|\bno\b", re.I)
_CODE_TOOL = module_pattern(r"python|code|exec|calculat|shell|bash|sql|script|eval", re.I)
_CODE_KEY = module_pattern(r"^(?:code|expression|script|query|sql|command|cmd)$", re.I)
#: Nouns that make "N <noun>" a quantity or an ordinal phrase rather than a count of things.
_NOT_COUNT_NOUNS = frozenset(
    "times steps minutes seconds hours days weeks months years mins secs hrs ms cents dollars euros "
    "pounds percent points digits decimals places characters bytes words lines pixels degrees".split()
)
#: Object states an agent can assert about an identified object (configurable via the extractor).
DEFAULT_STATUS_WORDS = (
    "pending", "processed", "processing", "delivered", "shipped", "cancelled", "canceled", "returned",
    "exchanged", "refunded", "completed", "failed", "active", "inactive", "available", "unavailable",
    "out of stock", "in stock", "open", "closed", "approved", "rejected", "return requested",
    "exchange requested",
)
_SYNONYMS = {"canceled": "cancelled", "out of stock": "unavailable", "in stock": "available",
             "not available": "unavailable", "no longer available": "unavailable"}
#: Sentences with these markers are hypothetical, planned or requested, not assertions of completion.
_HYPOTHETICAL = module_pattern(
    r"\b(?:if|once|when|after|until|unless|whether|should|will|would|can|could|may|might|must|need|needs|"
    r"to\s+be|make\s+sure|ensure|let's|let\s+us|please|want|wants|try|trying|attempt|before|not\s+yet)\b",
    re.I,
)


@runtime_checkable
class ClaimExtractor(Protocol):
    """Turns one decision step into claim mentions.

    ``extract`` yields :class:`~trajaudit.engine.claims.model.Mention` objects for ``step`` (a decision
    step of ``trajectory``) in text order; it must not raise on any text and must run in time linear in
    the step's size. The caller caps the number of mentions per step and reports the cap.
    """

    name: str

    def extract(self, trajectory: Trajectory, step: Step, config: m.ClaimConfig) -> Iterator[m.Mention]: ...


def _inside(pos: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether ``pos`` lies in one of ``ranges``: sorted, disjoint ``(start, end)`` spans, as
    ``code_ranges`` and ``json_ranges`` return them. A binary search: a message of thousands of code
    fences (JSON strings that hold code) made the scan of every span per mention quadratic."""
    k = bisect_right(ranges, (pos, _INF)) - 1
    return k >= 0 and pos < ranges[k][1]


_INF = float("inf")


_LONG_DIGITS = module_pattern(r"\d{7,}")
_LETTER = module_pattern(r"[^\W\d_]")
_DECIMAL = module_pattern(r"-?\d+(?:\.\d+)?")


@lru_cache(maxsize=4096)
def _value_group(value: str) -> str | None:
    """The group of ``VALUE_RE.fullmatch(value)`` (``"number"`` when it names none), or ``None`` when it
    does not match. Memoized (a pure function of short argument values; ids recur across calls)."""
    hit = VALUE_RE.fullmatch(value)
    return None if hit is None else hit.lastgroup or "number"


@lru_cache(maxsize=1024)
def _code_tool(name: str) -> bool:
    """Whether a tool's name says it runs code (``_CODE_TOOL``); memoized: a run calls a few tools many times."""
    return _CODE_TOOL.search(name) is not None


def _glued(text: str, a: int, b: int) -> bool:
    """True when text[a:b] is only part of a larger token (a hex hash, "COVID-19", "v2")."""
    before = text[a - 1] if a > 0 else " "
    before2 = text[a - 2] if a > 1 else " "
    after = text[b] if b < len(text) else " "
    after2 = text[b + 1] if b + 1 < len(text) else " "
    return (before.isalnum() or before == "_" or (before == "-" and before2.isalnum())
            or after.isalnum() or after == "_" or (after == "-" and after2.isalnum()))


def _number_mention(g: str, raw: str, in_code: bool) -> tuple[str, str] | None:
    """(kind, value) for a number-like match, or ``None`` when policy says it is not a claim."""
    v = number_key(raw)
    if v is None:
        return None
    if g == "money":
        return m.KIND_MONEY, v
    core = raw.strip()
    if len(core) >= 7 and core.isdigit() and not in_code:
        return m.KIND_ID, core
    if in_code:
        return (m.KIND_NUMBER, v) if significant_digits(v) >= 3 else None
    if _PLAIN_INT.fullmatch(core):
        n = int(core)
        if abs(n) < 10:
            return None
        if 1000 <= n <= 2100 and len(core) == 4:
            return m.KIND_DATE, v
    return m.KIND_NUMBER, v


def _status_word(sentence: str, words: tuple[str, ...]) -> list[tuple[str, int, int]]:
    low = sentence.casefold()
    out = []
    for w in words:
        if w not in low:
            continue  # the pattern needs the word literally
        for hit in status_re(w).finditer(low):
            val = ("not " + w) if hit.group(1) and w == "available" else w
            out.append((_SYNONYMS.get(val, val), hit.start(), hit.end()))
    return out


class RegexExtractor:
    """The deterministic extractor: regular expressions over content and tool-call arguments.

    Args:
        status_words: object states recognised in "<id> … <state>" sentences.
    """

    name = "regex"

    def __init__(self, status_words: tuple[str, ...] = DEFAULT_STATUS_WORDS) -> None:
        self.status_words = tuple(sorted(status_words, key=len, reverse=True))

    def extract(self, trajectory: Trajectory, step: Step, config: m.ClaimConfig) -> Iterator[m.Mention]:
        """Mentions in ``step.content`` then in each tool call's arguments (see the module docstring)."""
        said = observation_start(step.content)  # an embedded observation is evidence, not claims
        text = step.content[: config.max_text_chars if said is None else min(said, config.max_text_chars)]
        yield from self.text_mentions(text, step.index, f"steps.{step.index}.content")
        for j, call in enumerate(step.tool_calls):
            base = f"steps.{step.index}.tool_calls.{j}.arguments"
            if call.arguments is None and call.raw_arguments:
                yield from self.text_mentions(call.raw_arguments[: config.max_text_chars], step.index, base,
                                              in_code=True, tool=call.name)
                continue
            code_tool = _code_tool(call.name)
            for path, leaf, key in _leaves(call.arguments, base):
                yield from self.argument_mentions(leaf, key, path, step.index, call.name, code_tool, config)

    def argument_mentions(self, leaf: Any, key: str, address: str, step: int, tool: str, code_tool: bool,
                          config: m.ClaimConfig) -> Iterator[m.Mention]:
        """Mentions for one argument leaf: a short scalar is one claim; free text is scanned like prose."""
        if leaf is None or isinstance(leaf, bool):
            return
        is_code = isinstance(leaf, str) and bool(_CODE_KEY.match(key))
        if isinstance(leaf, str) and (is_code or len(leaf) > 40 or "\n" in leaf or len(leaf.split()) > 4):
            # free text is scanned like prose; a command or expression, however short, like code (only
            # the ids, paths, URLs and long numbers in it are claims, not the command as a whole)
            yield from self.text_mentions(leaf[: config.max_text_chars], step, address,
                                          in_code=code_tool or is_code, tool=tool)
            return
        raw = str(leaf)
        value = norm_scalar(leaf)
        if value is None:
            return
        kind = m.KIND_ARGUMENT
        group = _value_group(raw.strip()) if isinstance(leaf, str) else None
        if group is not None and not _LONG_DIGITS.fullmatch(raw.strip()):
            kind = _GROUP_KIND[group]
        elif isinstance(leaf, (int, float)) or _DECIMAL.fullmatch(raw.strip()):
            kind = m.KIND_ID if _LONG_DIGITS.fullmatch(raw.strip()) else m.KIND_NUMBER
        if kind in (m.KIND_NUMBER, m.KIND_DATE) and _number_mention("number", raw.strip(), False) is None:
            return  # small bare integers (quantities such as 1) are not claims
        yield m.Mention(step=step, address=address, kind=kind, value=value, text=raw, in_call=True, tool=tool,
                        in_code=code_tool)

    def text_mentions(self, text: str, step: int, base: str, in_code: bool = False,
                      tool: str | None = None) -> Iterator[m.Mention]:
        """Mentions in free text; addresses are ``{base}[start:end]``. Terminal escape sequences (colour
        codes in pasted output) are blanked first (:func:`~.patterns.mask_escapes`: offsets kept)."""
        if not text:
            return
        blanks: list[tuple[int, int]] = []
        if has_escapes(text):
            blanks = escape_spans(text)
            text = mask_escapes(text)
        code = [(0, len(text))] if in_code else code_ranges(text)
        noise = [] if in_code else noise_spans(text)  # pasted runtime output: evidence, not claims
        markers = list_markers(text)
        folded = ascii_fold(text)
        examples = folded is None or any(w in folded for w in _EXAMPLE_WORDS)  # else no example sentence
        found: list[m.Mention] = []
        starts: list[int] = []  # found[i] starts at starts[i] (its address ends with [start:end])
        call = tool is not None

        def add(kind: str, value: str, a: int, b: int, slot: tuple[str, ...] = (), ctx: str = "",
                shown: str | None = None) -> None:  # shown: the text as displayed, when blanks split it
            if noise and _inside(a, noise):
                return
            found.append(m.Mention(step=step, address=f"{base}[{a}:{b}]", kind=kind, value=value,
                                   text=text[a:b] if shown is None else shown, slot=slot, in_code=_inside(a, code),
                                   in_call=call, tool=tool, context=ctx))
            starts.append(a)

        taken = _count_mentions(text, code, markers, add)
        subjects = _value_mentions(text, code, markers, taken, folded, examples, add, blanks)
        subjects.extend((a, x.value) for a, x in zip(starts, found, strict=True)
                        if x.kind == m.KIND_ID and x.value.isdigit())
        if not in_code:
            _quoted_mentions(text, code, folded, examples, add)
            for x in self._statuses(text, step, base, code, subjects, tool):
                found.append(x)
                starts.append(_start(x.address))
        # in order of start (a stable sort, as sorting by the addresses' starts)
        yield from (found[i] for i in sorted(range(len(found)), key=starts.__getitem__))

    def _statuses(self, text: str, step: int, base: str, code: list[tuple[int, int]],
                  subjects: list[tuple[int, str]], tool: str | None) -> Iterator[m.Mention]:
        """Status and completion mentions: per candidate sentence (:meth:`_status_sentences`), the one
        state word it attributes to its (up to 4) subjects, then its completion statements."""
        got = self._status_sentences(text, subjects)
        if got is None:
            return
        found, folded, leads, spans, present = got
        for s, e in spans:
            if e <= s or _inside(s, code):
                continue
            sentence = text[s:e]
            subs = sorted({v for p, v in subjects if s <= p < e})
            seen: set[str] = set()
            if 0 < len(subs) <= 4 and not _CONDITIONAL.search(sentence):
                yield from self._states(text, step, base, s, sentence, subs, seen, tool, present)
            if found and not holds_completion(folded, leads, s, e):
                continue  # no completion lead word in the sentence (exact, see holds_completion)
            yield from _completions(text, step, base, s, sentence, subs[0] if len(subs) == 1 else "", seen, tool)

    def _status_sentences(self, text: str, subjects: list[tuple[int, str]]
                          ) -> tuple[bool, str, list[tuple[int, int]], list[tuple[int, int]], tuple[str, ...]] | None:
        """``(folded, folded text, lead positions, sentence spans, state words)`` of the sentences that
        can yield a status or completion, or ``None`` when none can: a status needs a subject and a
        state word in its sentence (hence in the text: the state words the text holds, in
        ``status_words`` order, are the only ones a sentence's :func:`_status_word` needs to try —
        ``casefold`` maps character by character, so a sentence's folding is part of the text's);
        ``folded`` is False for exotic case folding (ascii_fold), where every sentence is tried, after
        a whole-text check."""
        present: tuple[str, ...] = ()
        if subjects:  # (the text is case-folded only then)
            low = text.casefold()
            present = tuple(w for w in self.status_words if w in low)
        status = bool(present)
        found = completion_leads(text)
        if found is not None:
            # only sentences holding a subject (when a state word occurs) or a completion's lead word can
            # yield: the others are skipped (exact, see candidate_sentences)
            folded, leads = found
            if not status and not leads:
                return None
            return (True, folded, leads, candidate_sentences(text, [p for p, _ in subjects] if status else [], leads),
                    present)
        if not status and not COMPLETION_RE.search(text):
            return None
        return False, "", [], sentence_spans(text), present

    def _states(self, text: str, step: int, base: str, s: int, sentence: str, subs: list[str], seen: set[str],
                tool: str | None, present: tuple[str, ...]) -> Iterator[m.Mention]:
        """One state word and up to 4 objects in the sentence at ``s``: the sentence attributes that state
        to each of them (the word is added to ``seen``). ``present``: the state words of the whole text
        (:meth:`_status_sentences`), a superset of the sentence's, in ``status_words`` order."""
        words = [wd for wd in _status_word(sentence, present)
                 if not _NOT_STATE.search(sentence, max(0, wd[1] - 30), wd[1])]
        if len({w for w, _, _ in words}) != 1:
            return
        w, a, b = words[0]
        seen.add(w)
        for sub in subs:
            yield m.Mention(step=step, address=f"{base}[{s + a}:{s + b}]", kind=m.KIND_STATUS,
                            value=w, text=text[s + a:s + b], slot=("status", sub),
                            in_call=tool is not None, tool=tool, context=sentence.strip())


def _completions(text: str, step: int, base: str, s: int, sentence: str, subject: str, seen: set[str],
                 tool: str | None) -> Iterator[m.Mention]:
    """Completion statements of the sentence at ``s`` (not hypothetical, not negated, one per verb not
    in ``seen``), about their target or else the sentence's one ``subject``."""
    completions = list(COMPLETION_RE.finditer(sentence))
    if not completions or _HYPOTHETICAL.search(sentence) is not None:
        return  # no completion, or a hypothetical sentence (tested only when it matters)
    for x in completions:
        if _NEGATION.search(sentence, max(0, x.start() - 24), x.start() + 1):
            continue  # "hasn't been processed" asserts the opposite of completion
        verb = (x.group("verb") or x.group("verb2") or "").casefold()
        verb = _SYNONYMS.get(verb, verb)
        if verb in seen:
            continue
        seen.add(verb)
        target = norm_id(x.group("target")) if x.group("target") else subject
        a, b = s + x.start(), s + x.end()
        yield m.Mention(step=step, address=f"{base}[{a}:{b}]", kind=m.KIND_STATUS, value=verb,
                        text=text[a:b], slot=("done", target), in_call=tool is not None, tool=tool,
                        context=sentence.strip())


_Add = Callable[..., None]


def _count_mentions(text: str, code: list[tuple[int, int]], markers: set[int], add: _Add) -> set[int]:
    """``add`` the counts of ``text`` ("11 available options"; not a unit, a quantity noun, a list
    marker, a function word among the modifiers, after ``:``/``/`` or a month); returns the starts of
    the count numbers (they are not also plain numbers)."""
    taken: set[int] = set()
    for x in count_matches(text):
        noun = x.group("noun").casefold()
        mods = tuple(w.casefold() for w in x.group("mods").split())
        if (noun in _NOT_COUNT_NOUNS or _UNIT_NOUN.fullmatch(noun) or _inside(x.start(), code)
                or x.start("n") in markers or _FUNCTION_WORDS.intersection(mods)
                or (x.start() and text[x.start() - 1] in ":/")
                or _MONTH_BEFORE.search(text, max(0, x.start() - 12), x.start())):
            continue
        n = x.group("n").casefold()
        value = str(NUMBER_WORDS[n]) if n in NUMBER_WORDS else norm_number(n)
        if value is None:
            continue
        add(m.KIND_COUNT, value, x.start("n"), x.end(), ("count", singular(noun), *mods),
            sentence_around(text, x.start(), x.end()))
        taken.add(x.start("n"))
    return taken


def _value_mentions(text: str, code: list[tuple[int, int]], markers: set[int], taken: set[int],
                    folded: str | None, examples: bool, add: _Add,
                    blanks: list[tuple[int, int]] | None = None) -> list[tuple[int, str]]:
    """``add`` the value mentions of ``text`` (:func:`~.scan.scan_values`, except at ``taken`` counts and
    list ``markers``); returns ``(start, value)`` of the identifiers found (the subjects of statuses).
    ``folded`` is the text's :func:`~.patterns.ascii_fold`, ``examples`` whether it may hold an example.
    ``blanks``: the spans of the terminal control sequences blanked in ``text``: a number is read with
    the unit or currency sign they separate it from (:func:`~.scan.scan_values_blanked`)."""
    subjects: list[tuple[int, str]] = []
    found, joined = scan_values_blanked(text, blanks or ())
    for g, a, b in found:
        if a in taken or a in markers:
            continue
        ic = _inside(a, code)
        if g != "number" and g != "money":
            value = _other_value(text, g, a, b, ic, folded, examples, add)
            if value is not None:
                subjects.append((a, value))
            continue
        raw = joined.get(a) or text[a:b]
        if g == "number" and _glued(text, a, b):
            continue
        day = _MONTH_BEFORE.search(text, max(0, a - 12), a) if g == "number" and len(raw) <= 2 else None
        if day is not None and raw.isdigit():  # "May 23": a day of a date without its year
            when = when_key(text[day.start():b] + " 2000", "date")  # (any year: only MM-DD is kept)
            if when is not None and len(when) == 10:
                add(m.KIND_DATE, when[5:], day.start(), b)
                continue
        got = _number_mention(g, raw, ic)
        if got is not None:
            add(got[0], got[1], a, b, shown=joined.get(a))
    return subjects


def _other_value(text: str, g: str, a: int, b: int, ic: bool, folded: str | None, examples: bool,
                 add: _Add) -> str | None:
    """``add`` the mention of a URL, date, time, path or identifier match ``text[a:b]`` of group ``g``
    unless policy says it is not a claim; returns the value of an identifier added (a subject)."""
    raw = text[a:b]
    if g == "url":
        if not _TEMPLATE.search(raw):
            add(m.KIND_URL, norm_text(raw), a, b)
        return None
    if g in ("date", "time"):
        if not (g == "date" and _glued(text, a, b)):  # else a version stamp inside a name ("model-2024-08-06")
            add(_GROUP_KIND[g], when_key(raw, g) or norm_text(raw), a, b)
        return None
    if g == "path" and (_TEMPLATE.search(raw) or _ARTIFACT.search(text, max(0, a - 24), a)):
        return None  # a template, or a file the step itself writes: not a claim about the world
    value = norm_id(raw)
    if g in ("hashid", "snakeid") and (_PLACEHOLDER.match(value) or (
            not ic and examples and example_at(text, folded, a, b))):
        return None  # an example of a format, not a claim
    add(_GROUP_KIND[g], value, a, b)
    return value if g != "path" else None


def _quoted_mentions(text: str, code: list[tuple[int, int]], folded: str | None, examples: bool, add: _Add) -> None:
    """``add`` the quoted names of prose ``text``: not in code or JSON syntax, holding a letter, up to 12
    words, not a placeholder, an example or a termination word."""
    syntax = json_ranges(text) if '"' in text else []  # quotes there are JSON syntax
    for x in QUOTED_RE.finditer(text):
        inner = next(g for g in x.groups() if g is not None)
        if (_inside(x.start(), code) or _inside(x.start(), syntax) or not _LETTER.search(inner) or len(inner.split()) > 12
                or _PLACEHOLDER.match(inner) or (examples and example_at(text, folded, x.start(), x.end()))
                or norm_text(inner) in _TERMINATION):
            continue
        add(m.KIND_QUOTED, norm_text(inner), x.start() + 1, x.end() - 1)


def _start(address: str) -> int:
    i = address.rfind("[")
    return int(address[i + 1: address.index(":", i)]) if i >= 0 else 0


def _leaves(obj: Any, base: str, key: str = "") -> Iterator[tuple[str, Any, str]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, f"{base}.{k}", str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, f"{base}.{i}", key)
    else:
        yield base, obj, key


def default_extractors() -> Registry[ClaimExtractor]:
    """A fresh registry holding the deterministic ``regex`` extractor (register ``llm`` beside it)."""
    reg: Registry[ClaimExtractor] = Registry("claim extractor")
    reg.register(RegexExtractor.name, RegexExtractor())
    return reg


def extract_mentions(trajectory: Trajectory, config: m.ClaimConfig,
                     extractors: list[ClaimExtractor] | None = None,
                     skip: frozenset[int] = frozenset()) -> tuple[dict[int, list[m.Mention]], list[str]]:
    """Run the extractors over every decision step except those in ``skip`` (steps that are the
    run's input, :func:`~trajaudit.engine.claims.ledger.input_steps`).

    Returns:
        (``{step index: [mentions in text order]}``, ``incomplete`` notes: steps where the per-step cap
        ``config.max_claims_per_step`` or the text cap ``config.max_text_chars`` was hit).
    """
    extractors = extractors if extractors is not None else [RegexExtractor()]
    out: dict[int, list[m.Mention]] = {}
    incomplete: list[str] = []
    for step in trajectory.steps:
        if not step.is_decision or step.index in skip:
            continue
        got = step_mentions(trajectory, step, config, extractors, incomplete)
        if got:
            out[step.index] = got
    return out, incomplete


def step_mentions(trajectory: Trajectory, step: Step, config: m.ClaimConfig, extractors: list[ClaimExtractor],
                  incomplete: list[str]) -> list[m.Mention]:
    """The mentions of one decision step (what :func:`extract_mentions` does per step; the
    incremental ledger calls it as steps arrive): the extractors' mentions in order, duplicates
    (same address and key) dropped, at most ``config.max_claims_per_step``; the notes of the limits
    hit are appended to ``incomplete``."""
    cap = config.max_claims_per_step
    if len(step.content) > config.max_text_chars:
        incomplete.append(f"steps.{step.index}: only the first {config.max_text_chars} of "
                          f"{len(step.content)} characters were scanned for claims")
    got: list[m.Mention] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for ex in extractors:
        for mention in ex.extract(trajectory, step, config):
            at = (mention.address, mention.key)
            if at in seen:
                continue
            seen.add(at)
            if len(got) >= cap:
                incomplete.append(f"steps.{step.index}: claim cap {cap} (max_claims_per_step) reached; "
                                  "later claims in this step were not extracted")
                break
            got.append(mention)
        else:
            continue
        break
    return got
