"""The on-disk grammar cache (engine/dsl/grammar_cache.py): a parser rebuilt from the JSON tables parses
every expression — and fails on every bad one — exactly like the parser lark builds from rules.lark."""

from __future__ import annotations

from importlib import resources

import pytest
from lark import Lark

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl import grammar_cache
from trajaudit.engine.dsl import parser as rule_parser
from trajaudit.engine.dsl.ast import same_data
from trajaudit.engine.packs import pack as RP
from trajaudit.errors import RulePackError

TEXT = resources.files("trajaudit.engine.dsl").joinpath("rules.lark").read_text(encoding="utf-8")
OPTS = rule_parser._GRAMMAR_OPTIONS
BAD = ["a ==", "(a == b", "x.count", "a = b", "a && b", "a || b", "!a", "'open", '"open', "/open", "$x", "`x`",
       "forall x in steps", "exists earlier", "a b", "1 2", "f(a,", "[1, 2", "a)", "'\\q'", "x[0", "a ~"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("TRAJAUDIT_NO_CACHE", raising=False)
    return tmp_path / "c"


def _built() -> Lark:
    return Lark.open_from_package("trajaudit.engine.dsl", "rules.lark", **OPTS)


def _texts() -> list[str]:
    out = []
    for name in RP.shipped_packs():
        for r in RP.load_pack(name).rules:
            out += [t for t in (r.guard, r.assertion, *(x for _n, x in r.let)) if t]
    out += [ex for exs in rule_parser.COMMON_MISTAKES.values() for ex in exs]
    return out + BAD


def _outcome(parser: Lark, text: str, monkeypatch) -> tuple:
    monkeypatch.setattr(rule_parser, "grammar", lambda: parser)
    rule_parser.clear_memo()
    try:
        return ("ok", A.to_data(rule_parser.parse_expression(text, rule_parser.Where("p.yaml", 4, 7, "r", "guard"))))
    except RulePackError as e:
        return ("error", str(e), e.context)


def test_cached_parser_has_the_same_tables_and_parses_identically(cache, monkeypatch):
    built = _built()
    grammar_cache.store(built, TEXT, OPTS)
    assert len(list(cache.glob("grammar-*.json"))) == 1
    loaded = grammar_cache.load(TEXT, OPTS)
    assert loaded is not None and loaded is not built
    assert same_data(grammar_cache._serialized(loaded), grammar_cache._serialized(built))
    texts = _texts()
    assert len(texts) > 300
    outcomes = [(_outcome(built, t, monkeypatch), _outcome(loaded, t, monkeypatch)) for t in texts]
    assert all(a == b for a, b in outcomes)
    assert sum(a[0] == "error" for a, _ in outcomes) >= len(BAD)  # the error paths (and hints) were exercised
    rule_parser.clear_memo()


def test_corrupt_or_foreign_entries_are_ignored(cache):
    grammar_cache.store(_built(), TEXT, OPTS)
    (entry,) = cache.glob("grammar-*.json")
    entry.write_bytes(entry.read_bytes()[:1000])
    assert grammar_cache.load(TEXT, OPTS) is None
    assert grammar_cache.load(TEXT + "\n// another grammar\n", OPTS) is None  # another key: no entry


def test_disabled_cache_writes_no_grammar(cache, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")
    grammar_cache.store(_built(), TEXT, OPTS)
    assert grammar_cache.load(TEXT, OPTS) is None and not cache.exists()


def test_tagged_json_round_trip():
    x = {"a": (1, [2.5, None, True]), 3: {"": ()}, (1, "t"): "L"}
    assert same_data(grammar_cache._dec(grammar_cache._enc(x)), x)
    with pytest.raises(TypeError):
        grammar_cache._enc({1, 2})
