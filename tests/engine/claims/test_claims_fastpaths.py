"""Fast paths of claim extraction and indexing give exactly what the reference definitions give."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit import load_path
from trajaudit.engine.claims import clear_caches, normalize
from trajaudit.engine.claims.extract import _CODE_TOOL, _code_tool
from trajaudit.engine.claims.noise import runtime_spans
from trajaudit.engine.claims.patterns import (
    COMPLETION_RE,
    SENTENCE_RE,
    completion_literals,
    completion_possible,
    holds_literal,
    noise_spans,
    sentence_spans,
)
from trajaudit.engine.claims.scan import _first_wins
from trajaudit.engine.claims.sources import _analyse, digest
from trajaudit.engine.claims.support import names_word

_text = st.lists(st.sampled_from(list("ab .!?\n3٣5,$sSſKKé’É") + ["was ", "been ", "İs now ", "saved ", "WERE", "ı",
                                                                "processed", "to x.csv"]),
                 max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(_text)
def test_sentence_spans_equal_the_reference_regex(text):
    assert sentence_spans(text) == [x.span() for x in SENTENCE_RE.finditer(text)]


@settings(max_examples=400, deadline=None)
@given(_text)
def test_completion_prefilter_never_hides_a_match(text):
    if COMPLETION_RE.search(text):
        assert completion_possible(text)


@settings(max_examples=400, deadline=None)
@given(_text, st.integers(0, 400), st.integers(0, 400))
def test_completion_literals_never_hide_a_match_in_a_slice(text, i, j):
    s, e = sorted((i % (len(text) + 1), j % (len(text) + 1)))
    if COMPLETION_RE.search(text[s:e]):
        assert holds_literal(completion_literals(text), s, e)


def test_completion_prefilter_on_examples():
    assert not completion_possible("I have cancelled the order.")  # no literal: cannot match
    assert completion_possible("The order has been cancelled.")
    assert COMPLETION_RE.search("The order WAS CANCELLED.")
    assert completion_possible("The order WAS CANCELLED.")
    assert completion_possible("ſucceſſfully")  # non-ASCII: always checked by the regex


def test_real_texts_sentences_and_digests(tau_file):
    runs = load_path(tau_file).trajectories[:6]
    for t in runs:
        for s in t.steps:
            assert sentence_spans(s.content) == [x.span() for x in SENTENCE_RE.finditer(s.content)]
            if s.kind == "tool":
                clear_caches()
                d = digest(s.content, "tool", 2_000_000)
                assert digest(s.content, "tool", 2_000_000) is d  # memoized
                assert d == _analyse(s.content, "tool", 2_000_000)  # same as a fresh analysis


def test_memoized_normalizers_keep_types_apart():
    clear_caches()
    assert normalize.norm_scalar(1) == "1" and normalize.norm_scalar(True) is None
    assert normalize.norm_scalar(1.5) == "1.5" and normalize.norm_scalar("1.50") == "1.5"
    assert normalize.norm_scalar("0012345678") == "0012345678"  # long digit strings are ids
    long = "x" * (normalize.MEMO_MAX_CHARS + 1)
    assert normalize.norm_text(long.upper()) == long  # computed, not cached


_tool_text = st.lists(st.sampled_from([" ", "\n", "\x1c", "Error", "errors", "ERROR:", "exception", "Fatal", "x",
                                       "Traceback (most recent call last)", "TRACEBACK (most recent call LAST)",
                                       "exitcode: 1", "ExitCode:  0", "exitcode:\t7", "execution FAILED", "İ", "ſ"]),
                      max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(_tool_text)
def test_error_detection_fast_path_equals_the_regex(text):
    from trajaudit.engine.trace.adapters.base import _ERROR_RE, looks_like_error

    assert looks_like_error(text) == bool(_ERROR_RE.search(text[:4000]))


_num_text = st.lists(st.sampled_from(["12", "1,234", "5.5", "1.234,5", "9523456873", "#W123456", "$", "€", " ", ".",
                                      ",", "'", "\u00a0", "k", "m", " million", "usd", " USD", "Dollars", "euro",
                                      " km", "km/h", "%", "°C", " s", " ſ", "K", "pm", ":30", "-", "2024-05-01",
                                      " May 2024", "3rd", "x", "\"", "}", "/", "_", "\x1c", ":", ".040", "040", "\t",
                                      "]", "a", "th", "bn", "e3", "(", ";", "\n", " ,", "  ", "1/2/2024", "12/", "2024-",
                                      "-05", "'5", ",5", "1.5", "7", "0", " of", " in", "f", "e", "fa2", " and", "St", "a.m.",
                                      "A", " b", "é", "’", "\u2009", "٣", "ſ"]),
                      max_size=14).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_num_text)
def test_fast_number_scan_equals_the_reference_regex(text):
    from trajaudit.engine.claims.scan import _DIGIT_RE, _digit_matches

    assert (list(_digit_matches(text))
            == [(x.lastgroup or "number", *x.span()) for x in _DIGIT_RE.finditer(text)])


_floats = st.one_of(st.sampled_from([0.0, 10.0, 12.5, 2.5, 7.495, 7.505, 5.0049, 5.0051, 1e17, 1e17 + 16, 16.0,
                                     -3.0, 99.99, 100.0, float("inf")]),
                    st.floats(-1e6, 1e6, allow_nan=False), st.integers(-500, 500).map(lambda i: i / 100))


@settings(max_examples=500, deadline=None)
@given(st.lists(_floats, max_size=25), _floats)
def test_first_pair_equals_trying_every_pair(vals, x):
    from trajaudit.engine.claims.support import _pairs_brute, first_pair

    want = None if x == 0 else _pairs_brute(vals, x)
    assert first_pair(vals, x) == want


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "B", "7", "_", "-", "--", " ", "\t", "\x1c", ".", "t-shirt", "é", "x_1", "'"]),
                max_size=20).map("".join))
def test_words_of_equals_the_word_regex(text):
    from trajaudit.engine.claims.patterns import WORD_RE, words_of

    assert words_of(text) == WORD_RE.findall(text)


_id_keys = st.sampled_from(["id", "item_id", "order_id", "user_id", "name", "email", "title", "price", "ID", "x_id"])
_id_values = st.one_of(st.sampled_from(["W1", "#W2", "", "a b"]), st.integers(-3, 3), st.booleans(), st.none(),
                       st.floats(0, 2), st.just({}), st.just([]))


@settings(max_examples=800, deadline=None)
@given(st.dictionaries(_id_keys, _id_values, max_size=6), st.sampled_from(["", "items", "item", "orders", "xs", "id"]))
def test_identity_equals_its_definition(obj, parent):
    from trajaudit.engine.claims.sources import _identity, _identity_reference

    assert _identity(obj, parent) == _identity_reference(obj, parent)


def test_str_split_cuts_where_the_whitespace_regex_matches():
    """``norm_text`` joins ``str.split()``: its whitespace is ``\\s`` of ``re``, over all of Unicode."""
    import re
    import sys

    chars = "".join(map(chr, range(sys.maxunicode + 1)))
    assert "".join(re.findall(r"\s", chars)) == "".join(c for c in chars if not c.split())


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\x1c", "\u00a0", "\u2009", "\u3000", "\x85", ".", ",", "(",
                                 "“", "A", "b", "ß", "ﬁ", "İ", "Ⅻ", "*", "_", "x y", "1.5"]), max_size=12).map("".join))
def test_norm_text_equals_its_definition(text):
    from trajaudit.engine.claims.normalize import _norm_text, _norm_text_reference

    assert _norm_text(text) == _norm_text_reference(text)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(["not ", "NOT", "found", "FOUND", "No such", " file", "FILE", "404", "40", "does",
                                 " not exist", "cannot", " find", "can't", "CAN'T", "FileNotFound", "ſ", "K", "İ",
                                 "ı", "é", " ", "\n"]), max_size=10).map("".join))
def test_not_found_equals_the_regex(text):
    from trajaudit.engine.claims.support import _NOT_FOUND, not_found

    assert not_found(text) == (_NOT_FOUND.search(text) is not None)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(["```", "``", "`", "a", "\n", "```py\n", "x = 1"]), max_size=12).map("".join))
def test_code_ranges_equal_the_code_regex(text):
    from trajaudit.engine.claims.patterns import CODE_RE, code_ranges

    assert code_ranges(text) == [x.span() for x in CODE_RE.finditer(text)]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(["May", "mAY", "sept", "ſep", "Dec.", "june", "JUL", "x", " ", "\t", "\n", ".", "3",
                                 "İ", "K", "é", "oct ", "nov\u00a0"]), max_size=10).map("".join))
def test_month_before_equals_the_regex(text):
    from trajaudit.engine.claims.scan import _MONTH_BEFORE, _month_before

    for a in range(len(text) + 1):
        got, want = _month_before(text, a), _MONTH_BEFORE.search(text, max(0, a - 12), a)
        assert (got and got.span()) == (want and want.span())


class _Str(str):
    """A str subclass: not an exact ``str``, so it takes the typed memo."""


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=12), st.sampled_from(["1", "1.0", "01234567", " 12 ", "#W1", "", " "]),
                 st.integers(-10**9, 10**9), st.floats(allow_nan=False), st.booleans(), st.none()))
def test_norm_scalar_string_memo_equals_the_function(value):
    # exact strings go through their own (untyped) memo; every value gets what _norm_scalar computes
    clear_caches()
    want = None if value is None or isinstance(value, bool) else normalize._norm_scalar(value)
    assert normalize.norm_scalar(value) == want
    assert normalize.norm_scalar(value) == want  # (a memo hit)
    if isinstance(value, str):
        assert normalize.norm_scalar(_Str(value)) == want


def test_shared_memos_equal_their_functions():
    clear_caches()
    text = "Done.\nTraceback (most recent call last):\n  File \"x.py\", line 3\nValueError: bad\nok 12"
    assert noise_spans(text) == runtime_spans(text) != []
    assert noise_spans(text) is noise_spans(text)  # memoized, shared
    for name in ("execute_python", "get_order_details", "Calculator", "bash", "lookup"):
        assert _code_tool(name) is (_CODE_TOOL.search(name) is not None)
    assert _code_tool("execute_python") and not _code_tool("get_order_details")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["number", "path", "url", "date"]), st.integers(0, 12), st.integers(0, 12)),
                max_size=12))
def test_first_wins_equals_the_key_sort(found):
    # two stable C-key sorts give the order of sorting by (start, -end)
    want = sorted(found, key=lambda f: (f[1], -f[2]))
    kept = [want[0]] if want else []
    for f in want[1:]:
        if f[1] >= kept[-1][2]:
            kept.append(f)
    assert _first_wins(list(found)) == kept


_noise_text = st.lists(st.sampled_from(["\n", "\n\n", " ", "\t", "x", "Done.", "Traceback (most recent call last):",
                                        "  File \"a.py\", line 3", "ValueError: bad", "exitcode: 1 (failed)", "EXIT CODE 2",
                                        "Exit code: -1", "# note", "INFO: ok", "[ERROR] x", "WARNING ", "I1219 12:37:12",
                                        "2024-12-19 12:37:12", "[client: 12-02] WARNING - y", "UserWarning: z",
                                        "TERMINATE", "SCENARIO.PY", "/usr/lib/python3/x", "site-packages/y",
                                        "node_modules/", "at a.B.c(F.java:12)", "at f (x.js:1:2)", "İ", "ſ", "é"]),
                       max_size=16).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_noise_text)
def test_runtime_spans_equal_the_reference_loop(text):
    from trajaudit.engine.claims.noise import runtime_spans_reference

    assert runtime_spans(text) == runtime_spans_reference(text)


def test_runtime_spans_equal_the_reference_loop_on_real_texts(tau_runs, ww_runs):
    from trajaudit.engine.claims.noise import runtime_spans_reference

    for runs in (tau_runs, ww_runs):
        for t in runs.values():
            for s in t.steps:
                assert runtime_spans(s.content) == runtime_spans_reference(s.content)


def _params(f):
    import inspect

    return [(p.name, p.kind, p.default) for p in list(inspect.signature(f).parameters.values())[1:]]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 50), st.text(max_size=5), st.sampled_from(["id", "count"]), st.text(max_size=5),
       st.text(max_size=5), st.dictionaries(st.sampled_from(["slot", "in_code", "in_call", "tool", "context"]),
                                            st.sampled_from([(), ("count", "x"), True, False, None, "t"]), max_size=3))
def test_mention_fast_init_equals_the_generated_one(step, address, kind, value, text, extra):
    import dataclasses

    from trajaudit.engine.claims import model as m

    assert _params(m.Mention.__init__) == _params(m._mention_init_reference)
    fast = m.Mention(step, address, kind, value, text, **extra)
    ref = object.__new__(m.Mention)
    m._mention_init_reference(ref, step, address, kind, value, text, **extra)
    assert fast == ref and hash(fast) == hash(ref) and repr(fast) == repr(ref)
    assert [getattr(fast, f.name) for f in dataclasses.fields(m.Mention)] == [
        getattr(ref, f.name) for f in dataclasses.fields(m.Mention)]
    try:
        fast.step = 1  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("Mention is frozen")


_money_text = st.lists(st.sampled_from(["$", "€", "£", "¥", "₹", "US$", "usd", " ", "\u00a0", "-", "+", "−", "_", "#",
                                        "1", "05", "0", "12", ".", ",", "'", "k", "m", " million", "%", "W", "x", "é",
                                        "٣", "＿", "＃", "9" * 30]), max_size=8).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_money_text)
def test_norm_number_shortcuts_equal_the_reference(text):
    assert normalize._norm_number(text) == normalize._norm_number_reference(text)


def test_underscore_and_hash_survive_nfkc_next_to_any_character():
    import sys
    import unicodedata

    for i in range(sys.maxunicode + 1):
        c = chr(i)
        for s in ("_" + c, c + "_"):
            assert "_" in unicodedata.normalize("NFKC", s)
        for s in ("#" + c, c + "#"):
            assert "#" in unicodedata.normalize("NFKC", s)


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(["cancel", "cance", "process", "sav", "sa", "writt", "instal", "x", " ", "was ",
                                 "been ", "ed", "verifi", "confir", "confirm"]), max_size=10).map("".join),
       st.integers(0, 80), st.integers(0, 80))
def test_stem_pattern_equals_a_find_per_stem(low, i, j):
    from trajaudit.engine.claims.patterns import _COMPLETION_STEMS, _STEMS_RE

    s, e = sorted((i % (len(low) + 1), j % (len(low) + 1)))
    assert (_STEMS_RE.search(low, s, e) is not None) == any(low.find(w, s, e) >= 0 for w in _COMPLETION_STEMS)
    assert (_STEMS_RE.search(low) is not None) == any(w in low for w in _COMPLETION_STEMS)


_nw_text = st.lists(st.sampled_from(["three", "Three", "THREE", "one", "phone", "two-", "-two", "x-two", "two_x", "two",
                                     " ", "\n", "3", "#3", "2", "ten", "often", "zero", "0", "twenty", "ſ", "É", "x",
                                     "-", "_", '"', ":", ",", "{", "}", "[", "]", "20", "2.0", "_3"]),
                    max_size=14).map("".join)
_json_doc = st.recursive(
    st.one_of(st.integers(-2, 25), st.sampled_from(["three", "two words", "3", "x", "Twenty", "2.0", "one-two", "", "_3", "_20"]),
              st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["a", "id", "n", "item_id", "W1234"]), inner, max_size=4)),
    max_leaves=10)


def _check_lazy_words(text: str, kind: str) -> None:
    from trajaudit.engine.claims.sources import NUMBER_WORD_VALUES, _analyse_reference

    values, words = _analyse_reference(text, kind, 2_000_000)
    d = _analyse(text, kind, 2_000_000)  # a fresh digest: nothing computed yet
    for key in [*values, *NUMBER_WORD_VALUES, *words, "x y"]:  # the values first, before any word
        assert d.has(key) == (key in values), key
        if key in values:
            assert d.suffix(key) == values[key], key
    for w in [*words, "three", "two", "one", "x", "two-", "x y"]:
        assert d.has_word(w) == (w in words), w
    assert list(d.words) == list(words)
    keys = d.value_keys()
    assert len(keys) == len(set(keys)) and set(keys) == set(values)


@settings(max_examples=1500, deadline=None)
@given(_nw_text, st.sampled_from(["tool", "user", "other"]))
def test_lazy_words_and_number_words_equal_the_eager_definition(text, kind):
    _check_lazy_words(text, kind)


@settings(max_examples=500, deadline=None)
@given(_json_doc)
def test_lazy_number_words_in_walked_json_equal_the_eager_definition(doc):
    import json

    _check_lazy_words(json.dumps(doc), "tool")
    _check_lazy_words(json.dumps(doc) + " three", "tool")


def test_lazy_words_on_real_texts(tau_runs, ww_runs):
    for t in [*list(tau_runs.values())[:8], *list(ww_runs.values())[:8]]:
        for s in t.steps:
            _check_lazy_words(s.content, s.kind if s.kind in ("tool", "user") else "other")


_tok_text = st.lists(st.sampled_from(["a", "b", "ab", "A", "-", "_", " ", "--", "a-b", "é", "É", "ſ", "İ", "٣", "²",
                                      "x_1", ".", "'", "\u00a0", "\n", "ß", "1"]), max_size=16).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_tok_text, _tok_text, st.integers(0, 40), st.integers(0, 40))
def test_has_word_equals_membership_in_the_words(text, other, i, j):
    from trajaudit.engine.claims.patterns import words_of

    words = dict.fromkeys(words_of(text.casefold()))
    folded = text.casefold()
    s, e = sorted((i % (len(folded) + 1), j % (len(folded) + 1)))
    for word in (other, other.casefold(), folded[s:e], *words):
        assert _analyse(text, "other", 2_000_000).has_word(word) == (word in words), word  # a fresh digest


def test_has_word_at_token_edges():
    cases = {("a-b", "b"): False, ("a-b", "a"): False, ("a-b", "a-b"): True, ("a_b", "b"): False, ("a--b", "b"): True,
             ("-b", "b"): True, ("b-", "b"): True, ("b-c", "b"): False, ("x b-", "b"): True, ("é-b", "b"): False,
             ("²b", "b"): False, ("b b", "b"): True, ("ab b", "b"): True, ("a" * 9 + " ab" * 9 + " b", "b"): True}
    for (text, word), want in cases.items():
        assert _analyse(text, "other", 2_000_000).has_word(word) is want, (text, word)


def test_word_char_is_what_the_word_pattern_matches():
    import re
    import sys

    from trajaudit.engine.claims.patterns import is_word_char

    w = re.compile(r"\w")
    for i in range(sys.maxunicode + 1):
        c = chr(i)
        assert is_word_char(c) == (w.fullmatch(c) is not None), hex(i)


_WORDISH = st.text(alphabet=st.sampled_from(list("ab_1 .-é\u0663\u00b2\u2160Ⅻx\u200d")), max_size=12)


@settings(max_examples=600, deadline=None)
@given(v=_WORDISH, text=_WORDISH)
def test_names_word_equals_the_whole_word_regex(v, text):
    """``support.names_word`` is ``re.search(r"(?<!\\w)" + re.escape(v) + r"(?!\\w)", text)`` (empty values
    included; digits, letters, ``_``, non-ASCII numerics and joiners around the value)."""
    assert names_word(v, text) == (re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)", text) is not None)
    assert names_word(v, text + v) == (re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)", text + v) is not None)
