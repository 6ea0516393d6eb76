"""The claims stage's lazy paths answer exactly like the eager reference definitions (docs/perf.md)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit import load_many, load_path
from trajaudit.engine.claims import model as m
from trajaudit.engine.claims.evidence_index import EvidenceIndex, Hit
from trajaudit.engine.claims.extract import (
    _CONDITIONAL,
    _HYPOTHETICAL,
    _NEGATION,
    _NOT_STATE,
    _SYNONYMS,
    RegexExtractor,
    _inside,
    _status_word,
)
from trajaudit.engine.claims.normalize import norm_id
from trajaudit.engine.claims.patterns import (
    COMPLETION_RE,
    COUNT_RE,
    WORD_RE,
    _holds,
    candidate_sentences,
    completion_literals,
    completion_possible,
    count_matches,
    holds_literal,
    sentence_spans,
)
from trajaudit.engine.claims.sources import NUMBER_WORD_VALUES, _analyse_reference


class EagerIndex:
    """The reference: every value, word and fact of every source filed in per-run dictionaries."""

    def __init__(self, ix: EvidenceIndex) -> None:
        self.ix = ix
        self.values: dict[str, list[int]] = {}
        self.postings: dict[str, list[int]] = {}
        self.facts: dict[tuple[str, str], list[tuple[int, int, str, Any]]] = {}
        self.objects: dict[str, int] = {}
        self.collections: dict[int, list[tuple[int, str, str, int]]] = {}
        self.suffixes: list[dict[str, str]] = []  # per source, its values as the definition files them
        for sid, src in enumerate(ix.sources):
            d = ix._digest(sid)
            vals, words = _analyse_reference(src.text, src.kind if src.kind in ("tool", "user") else "other",
                                             ix.max_json_chars)
            self.suffixes.append(vals)
            vis = ix._pos[sid]  # visibility: an embedded observation or pasted output sorts just before its step
            for suffix, key, size, _ in d.collections:
                self.collections.setdefault(vis, []).append((src.pos, src.address + suffix, key, size))
            for index, keys in ((self.values, vals), (self.postings, words)):
                for key in keys:
                    index.setdefault(key, []).append(sid)
            for ident, slots in d.facts.items():
                self.objects.setdefault(ident, vis)
                for attr, (path, key, raw) in slots.items():
                    self.facts.setdefault((ident, attr), []).append((src.pos, sid, f"{path}.{key}", raw))

    def _hit(self, sid: int, key: str) -> Hit:
        src = self.ix.sources[sid]
        return Hit(sid, src.pos, src.address + self.suffixes[sid][key])

    def latest(self, key: str, before: int) -> Hit | None:
        for sid in reversed(self.values.get(key, ())):
            if self.ix._pos[sid] < before:
                return self._hit(sid, key)
        for sid in reversed(self.postings.get(key, ())):
            src = self.ix.sources[sid]
            if self.ix._pos[sid] < before:
                return Hit(sid, src.pos, src.address)
        return None

    def after(self, key: str, pos: int, kinds: tuple[str, ...] = ("user",)) -> Hit | None:
        for sid in self.values.get(key, ()):
            src = self.ix.sources[sid]
            if self.ix._pos[sid] > pos and src.kind in kinds:
                return self._hit(sid, key)
        for sid in self.postings.get(key, ()):
            src = self.ix.sources[sid]
            if self.ix._pos[sid] > pos and src.kind in kinds:
                return Hit(sid, src.pos, src.address)
        return None

    def phrase(self, phrase: str, before: int) -> tuple[Hit | None, Hit | None]:
        toks = WORD_RE.findall(phrase.casefold())
        if not toks:
            return None, None
        lists = sorted((self.postings.get(t, []) for t in set(toks)), key=len)
        if not lists[0]:
            return None, None
        cands = set(lists[0])
        for lst in lists[1:]:
            cands.intersection_update(lst)
        partial = None
        for sid in sorted((s for s in cands if self.ix._pos[s] < before), reverse=True):
            src = self.ix.sources[sid]
            hit = Hit(sid, src.pos, src.address)
            if phrase in self.ix.normalized(sid):
                return hit, partial or hit
            partial = partial or hit
        return None, partial

    def fact(self, obj: str, attr: str, before: int) -> tuple[int, str, Any] | None:
        best = None
        for f in self.facts.get((obj, attr), ()):
            if self.ix._pos[f[1]] < before:
                best = f
        return None if best is None else (best[0], self.ix.sources[best[1]].address + best[2], best[3])

    def has_object(self, obj: str, before: int) -> bool:
        first = self.objects.get(obj)
        return first is not None and first < before

    def latest_collections(self, before: int) -> list[tuple[int, str, str, int]]:
        poss = [p for p in self.collections if p < before]
        return self.collections[max(poss)] if poss else []


def _check_index(t) -> int:
    ix = EvidenceIndex(t)  # lazy: digests are computed by the queries below, in their order
    ref = EagerIndex(EvidenceIndex(t))
    keys, facts = set(), set()
    for d in map(ref.ix._digest, range(len(ref.ix.sources))):
        keys.update(list(d.values)[:40])
        keys.update(list(d.words)[:40])
        facts.update((i, a) for i, slots in list(d.facts.items())[:20] for a in slots)
    keys.update(("w2378156", "no-such-value", "1", "delivered", "order id", "zz yy"))
    keys.update(NUMBER_WORD_VALUES)  # (a number word's value: looked up in the words on demand)
    positions = sorted({-1, 0, len(t.steps)} | {s.index for s in t.steps[::4]})
    n = 0
    for before in positions:
        got = [(c.pos, c.address, c.key, c.size) for c in ix.latest_collections(before)]
        assert got == ref.latest_collections(before)
        for k in keys:
            assert ix.latest(k, before) == ref.latest(k, before), (k, before)
            assert ix.after(k, before, ("user", "tool")) == ref.after(k, before, ("user", "tool")), (k, before)
            assert ix.phrase(k, before) == ref.phrase(k, before), (k, before)
            n += 3
        for obj, attr in facts:
            assert ix.fact(obj, attr, before) == ref.fact(obj, attr, before)
            assert ix.has_object(obj, before) == ref.has_object(obj, before)
            n += 2
    return n


def test_lazy_index_answers_like_the_eager_index(tau_file, ww_dir):
    runs = load_path(tau_file).trajectories[:4] + load_many([ww_dir]).trajectories[:6]
    assert sum(_check_index(t) for t in runs) > 10_000


def _statuses_reference(ex: RegexExtractor, text: str, code, subjects) -> list[tuple[str, str, tuple[str, ...]]]:
    """The sentence loop over every sentence, as it was before the candidate-sentence shortcut."""
    out = []
    low = text.casefold()
    if not any(w in low for w in ex.status_words) and not (completion_possible(text) and COMPLETION_RE.search(text)):
        return out
    literals = completion_literals(text)
    for s, e in sentence_spans(text):
        if e <= s or _inside(s, code):
            continue
        sentence = text[s:e]
        subs = sorted({v for p, v in subjects if s <= p < e})
        subject = subs[0] if len(subs) == 1 else ""
        seen: set[str] = set()
        if 0 < len(subs) <= 4 and not _CONDITIONAL.search(sentence):
            words = [wd for wd in _status_word(sentence, ex.status_words)
                     if not _NOT_STATE.search(sentence, max(0, wd[1] - 30), wd[1])]
            if len({w for w, _, _ in words}) == 1:
                w, a, b = words[0]
                seen.add(w)
                out.extend((f"[{s + a}:{s + b}]", w, ("status", sub)) for sub in subs)
        completions = list(COMPLETION_RE.finditer(sentence)) if holds_literal(literals, s, e) else []
        if not completions or _HYPOTHETICAL.search(sentence) is not None:
            continue
        for x in completions:
            if _NEGATION.search(sentence, max(0, x.start() - 24), x.start() + 1):
                continue
            verb = _SYNONYMS.get((x.group("verb") or x.group("verb2") or "").casefold(),
                                 (x.group("verb") or x.group("verb2") or "").casefold())
            if verb in seen:
                continue
            seen.add(verb)
            target = norm_id(x.group("target")) if x.group("target") else subject
            out.append((f"[{s + x.start()}:{s + x.end()}]", verb, ("done", target)))
    return out


def _statuses_fast(ex: RegexExtractor, text: str, code, subjects) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(mn.address[1:], mn.value, mn.slot) for mn in ex._statuses(text, 1, "x", code, subjects, None)]


_sentence_text = st.lists(st.sampled_from(
    ["#W1234567", " is ", " was ", "delivered", " been ", "processed", "cancelled", " if ", ".", "3.5", "!", "\n",
     " order ", "successfully ", "saved to out.csv", " not ", "İ", "ſ", "Pending", " and ", "CANCELED", "```",
     "’", "é", "K", "ı"]),
    max_size=25).map("".join)


@settings(max_examples=500, deadline=None)
@given(_sentence_text, st.lists(st.integers(0, 300), max_size=4), st.booleans())
def test_status_sentences_equal_the_full_loop(text, subject_pos, in_code):
    ex = RegexExtractor()
    subjects = [(p % (len(text) + 1), f"s{p % 3}") for p in subject_pos]
    code = [(0, len(text) // 2)] if in_code else []
    assert _statuses_fast(ex, text, code, subjects) == _statuses_reference(ex, text, code, subjects)


@settings(max_examples=500, deadline=None)
@given(_sentence_text, st.lists(st.integers(0, 300), max_size=5), st.lists(st.tuples(st.integers(0, 300),
                                                                                    st.integers(0, 12)), max_size=5))
def test_candidate_sentences_equal_testing_every_sentence(text, positions, lead):
    spans = sentence_spans(text)
    positions = [p % len(text) for p in positions] if text else []
    lead = sorted((a % len(text), a % len(text) + w) for a, w in lead) if text else []
    want = [(s, e) for s, e in spans if any(s <= p < e for p in positions) or _holds(lead, s, e)]
    assert candidate_sentences(text, positions, lead) == want


def test_status_sentences_on_real_agent_texts(tau_file, ww_dir):
    ex = RegexExtractor()
    n = 0
    ww = [s.content for t in load_many([ww_dir]).trajectories for s in t.steps if s.is_decision and s.content]
    texts = [s.content for t in load_path(tau_file).trajectories[:8] for s in t.steps if s.is_decision and s.content]
    texts += [x for x in ww if not x.isascii()][:40]  # Unicode text takes the folded fast paths too
    for text in texts:
        subjects = [(x.start(), norm_id(x.group())) for x in re.finditer(r"#W\d{7}|\d{10}", text)]
        assert [x.span() for x in count_matches(text)] == [x.span() for x in COUNT_RE.finditer(text)]
        got = _statuses_fast(ex, text, [], subjects)
        assert got == _statuses_reference(ex, text, [], subjects)
        n += len(got)
    assert n > 5  # real texts state statuses and completions
    assert m.KIND_STATUS == "status"


_count_text = st.lists(st.sampled_from(
    ["3", "12", "1234567", " ", "  ", "\n", "Eleven", "TWENTY", "one", "sixteen", "seven", "done", "often", "x", "-",
     ".", "$", "#", "items", " orders", "available ", "s", "İ", "K", "ſ", "٣", ",5", "_", "é", "’", "É", "ı", "SIX",
     "\u00a0"]), max_size=20).map("".join)


@settings(max_examples=600, deadline=None)
@given(_count_text)
def test_count_matches_equal_the_count_regex(text):
    assert ([(x.span(), x.groupdict()) for x in count_matches(text)]
            == [(x.span(), x.groupdict()) for x in COUNT_RE.finditer(text)])


@settings(max_examples=800, deadline=None)
@given(st.one_of(
    st.lists(st.sampled_from(list("0123456789") + ["-", ".", "00", "0000000000", "1234567890123"]), max_size=12)
    .map("".join),
    st.integers(-10**30, 10**30).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str)))
def test_plain_decimal_equals_the_decimal_path(text):
    from decimal import Decimal

    from trajaudit.engine.claims.normalize import canon_decimal, parse_number, plain_decimal

    got = plain_decimal(text)
    if got is not None:
        d = parse_number(text)
        assert d is not None and got == canon_decimal(d)
        if text[:1] != "-" or text.lstrip("-")[:1].isdigit():
            assert got == canon_decimal(Decimal(text))  # the path of JSON numbers (_norm_scalar)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True)))
def test_json_numbers_normalize_as_before(value):
    from decimal import Decimal, InvalidOperation

    from trajaudit.engine.claims.normalize import _norm_scalar, canon_decimal

    try:
        want = canon_decimal(Decimal(str(value)))
    except InvalidOperation:
        want = None
    assert _norm_scalar(value) == want


def test_ascii_folding_set_is_every_non_ascii_match_of_an_ascii_letter():
    import sys

    from trajaudit.engine.claims.patterns import ASCII_FOLDING

    letter = re.compile("[a-z]", re.IGNORECASE)
    classes = [re.compile(p) for p in (r"[\w.$€£#-]", r"\s", r"\d")]
    found, changed = set(), []
    for c in range(128, sys.maxunicode + 1):
        ch = chr(c)
        if 0xD800 <= c <= 0xDFFF:
            continue
        if letter.fullmatch(ch):
            found.add(ch)
        low = ch.lower()  # count candidates are found in the folded text: classes must not change
        if len(low) == 1 and any(bool(k.match(ch)) != bool(k.match(low)) for k in classes):
            changed.append(ch)
    assert found == set(ASCII_FOLDING)
    assert changed == []


@settings(max_examples=600, deadline=None)
@given(_sentence_text, st.integers(0, 400), st.integers(0, 400))
def test_holds_completion_equals_the_literal_lists(text, i, j):
    from trajaudit.engine.claims.patterns import completion_leads, holds_completion

    s, e = sorted((i % (len(text) + 1), j % (len(text) + 1)))
    found, literals = completion_leads(text), completion_literals(text)
    assert (found is None) == (literals is None)
    if found is not None:
        possible = bool(literals[0] and literals[1])
        assert holds_completion(*found, s, e) == (possible and holds_literal(literals, s, e))


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(["1", "12", "1234", ".", ")", " ", "\n", "\t", "-", ">", "*", "x", "٣", "\r", "\x1c"]),
                max_size=20).map("".join))
def test_list_markers_equal_the_marker_regex(text):
    from trajaudit.engine.claims.patterns import LIST_MARKER_RE, list_markers

    assert list_markers(text) == {x.start(1) for x in LIST_MARKER_RE.finditer(text)}


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(["'", "\"", "“", "”", "«", "»", "ab", "x", " ", "\n", "_", "é", "5", "it's", "'q'"]),
                max_size=24).map("".join))
def test_quoted_regex_equals_its_definition(text):
    from trajaudit.engine.claims.patterns import QUOTED_RE, QUOTED_REFERENCE

    ref = re.compile(QUOTED_REFERENCE)
    assert ([(x.span(), x.groupdict()) for x in QUOTED_RE.finditer(text)]
            == [(x.span(), x.groupdict()) for x in ref.finditer(text)])


_example_text = st.lists(st.sampled_from(
    ["e.g. ", "E.G.", "for Example", "such as", "such  as", "ſuch as", "Looks like", "format", "FORMATS", "x", " ",
     ".", "!", "\n", "'id'", "#W1234567", "3.5", "é", "placeholder", "instance", "İ"]), max_size=18).map("".join)


@settings(max_examples=600, deadline=None)
@given(_example_text, st.integers(0, 300), st.integers(0, 40))
def test_example_sentences_equal_the_regex(text, a, width):
    from trajaudit.engine.claims.patterns import _EXAMPLE, ascii_fold, example_at, sentence_around

    a = a % (len(text) + 1)
    b = min(len(text), a + width)
    want = _EXAMPLE.search(sentence_around(text, a, b)) is not None
    assert example_at(text, ascii_fold(text), a, b) == want
    assert example_at(text, None, a, b) == want
    folded = ascii_fold(text)
    if want and folded is not None:  # the whole-text gate of text_mentions never hides one
        from trajaudit.engine.claims.patterns import _EXAMPLE_WORDS

        assert any(w in folded for w in _EXAMPLE_WORDS)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["a", "Z", "_", ".", "-", "~", "/", "\\", ":", "+", " ", "é", "@", "9"]), max_size=30)
       .map("".join), st.integers(0, 40), st.integers(1, 12))
def test_back_equals_stepping_back(text, i, limit):
    from trajaudit.engine.claims.scan import _EMAIL_CHARS, _PATH_CHARS, _SNAKE_CHARS, _back

    i = i % (len(text) + 1)
    for chars in (_PATH_CHARS, _EMAIL_CHARS, _SNAKE_CHARS):
        j, stop = i, max(0, i - limit)
        while j > stop and text[j - 1] in chars:
            j -= 1
        assert _back(text, i, chars, limit) == j


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(["http", "https", "HTTPS", "Ftp", "://", "x", "ab", " ", "ſ", "/", ".", ")", "s", "t",
                                 "h", "\n", "é"]), max_size=16).map("".join))
def test_url_matches_equal_the_url_regex(text):
    from trajaudit.engine.claims.scan import _URL_RE, _url_matches

    assert [x.span() for x in _url_matches(text)] == [x.span() for x in _URL_RE.finditer(text)]
