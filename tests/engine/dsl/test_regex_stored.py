"""The regex fast paths' decisions kept as data (engine/dsl/regex/stored.py) and stored in the pack
cache: a decision read back equals the one made from the pattern's parse tree, a process with a warm
cache makes none from a parse tree, and a stored value that does not decode, or an entry written for
other code, is not used."""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import json
import pkgutil
import re
from array import array
from pathlib import Path

import pytest

import trajaudit.engine.claims as claims
from trajaudit.engine.dsl.regex import ascii as regex_ascii
from trajaudit.engine.dsl.regex import prefilter, stored
from trajaudit.engine.packs import cache as pack_cache
from trajaudit.engine.packs import pack as RP
from trajaudit.engine.packs.selection import _compiled_tool_rules
from trajaudit.engine.run.evidence import clear_caches

ROOT = Path(__file__).resolve().parents[3]
TOOLS = [{"name": "get_order", "description": "Look up an order.",
          "parameters": {"type": "object", "properties": {"order_id": {"type": "string", "pattern": "^#W\\d+$"}},
                         "required": ["order_id"]}}]
EXTRA = [r"(?i)\b(?:timed? ?out|timeout|deadline exceeded)\b", r"caf[e\u00e9]|tea|coffee|mocha",
         r"(?i)\u212aelvin|kelvins|celsius", r"(?x) a b | c d | e f", r"(a)|b|c|d", r"\s+status:\s*\w+",
         r"(?i)(?:alpha|beta)|(?:gamma|delta)|epsilon", r"[^\x00-\x7f]+ok", r"x{2,}y|zzz|www"]


@pytest.fixture
def cache(fresh_pack_cache):
    return fresh_pack_cache  # tests/conftest.py: an empty pack cache of the test's own


def _pack_patterns() -> list[re.Pattern[str]]:
    """Every regex the shipped packs and a tool pack compile (what the pack cache stores decisions for)."""
    out: list[re.Pattern[str]] = []
    with prefilter.registering() as got:
        for name in ("generic", "tau_retail"):
            pack_cache.compile_loaded(pack_cache.load(RP.resolve_pack(name)))
        _compiled_tool_rules(json.dumps(TOOLS), TOOLS)
    out += got
    return out + [re.compile(p) for p in EXTRA]


def _decisions(rx: re.Pattern[str]) -> tuple:
    """Everything the searches use about ``rx``, from a fresh :class:`RegexInfo` (compiled patterns
    compare equal when their text, flags and code are equal)."""
    prefilter._INFO.clear()
    info = prefilter.info_of(rx)
    twin = regex_ascii.ascii_twin(rx)
    plan = info.plan
    branch_twins = [regex_ascii.ascii_twin(b[0]) for b in plan or ()]
    return info.lits, info.anchor, info.chars, info.probe, twin, plan, branch_twins


def test_stored_decisions_equal_fresh_ones_after_a_json_round_trip(cache):
    patterns = _pack_patterns()
    assert len(patterns) > 60
    stored.clear_memo()
    with stored.recording() as got:
        fresh = [_decisions(rx) for rx in patterns]
    assert any(d[5] for d in fresh) and any(d[4][0] is not None for d in fresh)  # plans and twins occur
    assert any(d[4][0] is None for d in fresh) and any(d[2] for d in fresh)  # and their absence, and chars
    back = json.loads(json.dumps(got))
    assert back == got  # plain data
    stored.clear_memo()
    stored.seed(back)
    parsed = []
    calls = (prefilter._analyse_parsed, regex_ascii._twin_parsed)
    try:
        prefilter._analyse_parsed = lambda rx: parsed.append(rx) or calls[0](rx)
        regex_ascii._twin_parsed = lambda rx: parsed.append(rx) or calls[1](rx)
        again = [_decisions(rx) for rx in patterns]
    finally:
        prefilter._analyse_parsed, regex_ascii._twin_parsed = calls
    assert parsed == []  # every decision came from the stored data
    assert again == fresh


def test_a_stored_value_that_does_not_decode_is_ignored(cache):
    rx = re.compile(r"(?i)\b(?:refund|return|exchange|cancel)ed\b|not (?:eligible|allowed)|policy")
    stored.clear_memo()
    fresh = _decisions(rx)
    for k in ("i", "t", "p"):
        for bad in (["x"], [1, 2, 3], {"a": 1}, [[1], None, None], [None, ["a", -1], None], [True, "no"], [[3]]):
            stored.clear_memo()
            stored.seed({stored.key(k, rx): bad})
            assert _decisions(rx) == fresh
            assert stored.get(stored.key(k, rx)) != bad  # the fresh decision replaced it


def _rewrite(entry: Path, change) -> None:
    head, _, body = entry.read_bytes().partition(b"\n")
    d = json.loads(body)
    change(d)
    body = json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode()
    magic, fmt, _ = head.decode().split(" ")
    entry.write_bytes(f"{magic} {fmt} {hashlib.sha256(body).hexdigest()}\n".encode() + body)


def _entry(d: Path) -> Path:
    (entry,) = [p for p in d.glob("*.json") if not p.name.startswith("grammar-")]
    return entry


def _count_parsed(monkeypatch) -> list:
    seen: list = []
    a, t = prefilter._analyse_parsed, regex_ascii._twin_parsed
    monkeypatch.setattr(prefilter, "_analyse_parsed", lambda rx: seen.append(rx) or a(rx))
    monkeypatch.setattr(regex_ascii, "_twin_parsed", lambda rx: seen.append(rx) or t(rx))
    return seen


def _compile_and_decide(path: Path) -> list:
    clear_caches()
    stored._PATTERNS.clear()  # as a new process: no pattern built yet
    re.purge()
    with prefilter.registering() as pats:
        pack_cache.compile_loaded(pack_cache.load(path))
    return [_decisions(rx) for rx in pats]


def test_a_warm_pack_cache_entry_spares_every_regex_parse(cache, monkeypatch):
    path = RP.resolve_pack("tau_retail")
    cold = _compile_and_decide(path)
    entry = _entry(cache)
    analyses = json.loads(entry.read_bytes().partition(b"\n")[2])["analyses"]
    assert {k[0] for k in analyses} == {"i", "t", "p", "c"} and len(analyses) > 3 * len(cold) // 2
    seen = _count_parsed(monkeypatch)
    programs = []
    program = stored._program
    monkeypatch.setattr(stored, "_program", lambda p, f: programs.append(p) or program(p, f))
    assert _compile_and_decide(path) == cold
    assert seen == [] and programs == []  # no decision, twin or branch needed the pattern's parse tree


def test_stored_programs_rebuild_patterns_equal_to_re_compile(cache):
    """Every pattern the fast paths compile (twins, branches) rebuilt from its stored program equals
    ``re.compile``'s: same text, flags, program, groups; matches agree."""
    patterns = _pack_patterns()
    stored.clear_memo()
    with stored.recording() as got:
        for rx in patterns:
            prefilter.decide_all(rx)
    progs = {k: v for k, v in json.loads(json.dumps(got)).items() if k.startswith("c")}
    assert len(progs) > 150
    stored.clear_memo()
    stored._PATTERNS.clear()  # as in a new process: nothing built yet
    stored.seed(progs)
    for k in progs:
        flags, _, pattern = k[1:].partition(":")
        rebuilt = stored.compile_pattern(pattern, int(flags))
        fresh = re.compile(pattern, int(flags))
        assert rebuilt is not fresh and rebuilt == fresh
        assert (rebuilt.groups, rebuilt.groupindex, rebuilt.flags) == (fresh.groups, fresh.groupindex, fresh.flags)
        for text in ("Status: refunded", "order #W123 cancelled", "caf\u00e9 TIMEOUT", ""):
            assert prefilter.span(rebuilt.search(text)) == prefilter.span(fresh.search(text))
        assert stored.compile_pattern(pattern, int(flags)) is rebuilt  # one object per pattern, as re's cache


def _words(*w: int) -> str:
    return base64.b64encode(array("I", w).tobytes()).decode()


@pytest.mark.parametrize("bad", [[34, _words(1, 2, 3), 0, {}, []], [34, _words(999999, 7, 7, 7), 0, {}, []],
                                 [34, "x", 0, {}, []], [34, [14, 4, 0], 0, {}, []], [34, "", -5, {}, []],
                                 [34, "not base64!", 0, {}, []], "program"])
def test_a_stored_program_that_does_not_rebuild_is_not_used(cache, bad):
    pattern, flags = r"(?i)\b(?:refund|return)ed\b", int(re.I | re.U)
    stored.clear_memo()
    stored._PATTERNS.clear()
    stored.seed({f"c{flags}:{pattern}": bad})
    rx = stored.compile_pattern(pattern, flags)
    assert rx == re.compile(pattern, flags) and rx.search("It was Refunded.").group(0) == "Refunded"
    assert stored.get(f"c{flags}:{pattern}") == stored._program(pattern, flags)  # replaced by the real one


def test_an_entry_missing_decisions_is_completed_and_a_bad_one_recomputed(cache, monkeypatch):
    path = RP.resolve_pack("tau_retail")
    cold = _compile_and_decide(path)
    entry = _entry(cache)
    full = json.loads(entry.read_bytes().partition(b"\n")[2])["analyses"]
    dropped = next(k for k in full if k.startswith("i"))
    _rewrite(entry, lambda d: d["analyses"].pop(dropped))
    assert _compile_and_decide(path) == cold
    assert json.loads(entry.read_bytes().partition(b"\n")[2])["analyses"] == full  # completed
    _rewrite(entry, lambda d: d["analyses"].update({k: "garbage" for k in d["analyses"]}))
    seen = _count_parsed(monkeypatch)
    assert _compile_and_decide(path) == cold  # every value ignored, decided from the parse again
    assert len(seen) >= len(cold)


def test_an_entry_written_for_other_code_is_not_read(cache, monkeypatch):
    """The entry's key holds the code fingerprint (the source of these modules and the Python
    version): decisions made by other code, or under another Python, are never looked at."""
    path = RP.resolve_pack("tau_retail")
    cold = _compile_and_decide(path)
    _rewrite(_entry(cache), lambda d: d["analyses"].update({k: [None, None, None] if k[0] == "i" else v
                                                             for k, v in d["analyses"].items()}))
    real = pack_cache.code_fingerprint()
    monkeypatch.setattr(pack_cache, "code_fingerprint", functools.cache(lambda: "other-code-" + real))
    seen = _count_parsed(monkeypatch)
    assert _compile_and_decide(path) == cold  # a miss: compiled and decided from the patterns
    assert seen and len(list(cache.glob("*.json"))) >= 2


def _claims_module_patterns() -> list[re.Pattern[str]]:
    """Every pattern the claims package's modules compile at import (with :func:`stored.module_pattern`)."""
    out = []
    for info in pkgutil.iter_modules(claims.__path__):
        mod = importlib.import_module(f"trajaudit.engine.claims.{info.name}")
        out += [v for v in vars(mod).values() if isinstance(v, re.Pattern) and isinstance(v.pattern, str)]
    return out


def test_module_patterns_rebuilt_from_their_file_equal_re_compile(cache, monkeypatch):
    """The claims modules' patterns: a first process stores their programs in one file, a second
    rebuilds every one from it (no new program made) equal to ``re.compile``'s; a file that does not
    check out is not read."""
    patterns = _claims_module_patterns()
    assert len(patterns) > 80
    monkeypatch.setattr(stored, "_MODULE", None)
    monkeypatch.setattr(stored, "_MODULE_NEW", False)
    stored._PATTERNS.clear()
    first = [stored.module_pattern(rx.pattern, rx.flags) for rx in patterns]
    assert stored._MODULE_NEW
    stored.save_module_patterns()
    (path,) = cache.glob("regex-*.json")
    monkeypatch.setattr(stored, "_MODULE", None)  # as in a new process
    stored._PATTERNS.clear()
    for rx, made in zip(patterns, first, strict=True):
        rebuilt = stored.module_pattern(rx.pattern, rx.flags)
        fresh = re.compile(rx.pattern, rx.flags)
        assert rebuilt is not fresh and rebuilt == fresh == made == rx
        assert (rebuilt.groups, rebuilt.groupindex, rebuilt.flags) == (fresh.groups, fresh.groupindex, fresh.flags)
        for text in ("Order #W123 cost $1,204.50 on March 3, 2024", "not available", "caf\u00e9 12 kg", ""):
            assert prefilter.span(rebuilt.search(text)) == prefilter.span(fresh.search(text))
    assert not stored._MODULE_NEW and len(stored._MODULE) >= len({(rx.pattern, rx.flags) for rx in patterns})
    path.write_bytes(path.read_bytes().replace(b'"c', b'"C', 1))  # edited: its digest no longer holds
    monkeypatch.setattr(stored, "_MODULE", None)
    stored._PATTERNS.clear()
    assert stored.module_pattern(patterns[0].pattern, patterns[0].flags) == patterns[0]
    assert stored._MODULE_NEW  # compiled again, not read
