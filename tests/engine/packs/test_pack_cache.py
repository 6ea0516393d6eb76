"""The on-disk pack cache (engine/packs/cache.py): a warm load gives exactly the cold load's pack and
compiled rules; corrupt, unwritable or disabled caches fall back silently; edits are picked up."""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from json_mutation import json_values, mutate

from trajaudit import compile_rules, load_pack
from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl import parser as rule_parser
from trajaudit.engine.packs import cache as pack_cache
from trajaudit.engine.packs import pack as RP
from trajaudit.engine.packs.selection import _compiled_shipped, _loaded_shipped, default_packs
from trajaudit.engine.run.evidence import clear_caches
from trajaudit.errors import RulePackError

ROOT = Path(__file__).resolve().parents[3]

BASE = """pack: base
params:
  words: ["sorry", "unable"]
  limit: 3
rules:
  - id: no-refusal
    type: CAPABILITY
    guard: step.kind == "agent"
    assert: not contains_any(content, params.words)
    message: "refusal: {content}"
  - id: few-calls
    type: PROTOCOL
    guard: step.is_decision
    assert: (count c in earlier where c.kind == "tool") <= params.limit
"""
TOP = """pack: top
include: [base.yaml]
rules:
  - id: orders
    type: PROTOCOL
    guard: step.kind == "agent" and content ~ /order\\s?\\d+/i
    assert: exists o in earlier where o.kind == "tool"
"""


@pytest.fixture
def cache(fresh_pack_cache):
    return fresh_pack_cache  # tests/conftest.py: an empty pack cache of the test's own


def _entries(d: Path) -> list[Path]:
    """Pack entries (the grammar cache shares the folder)."""
    return [p for p in d.glob("*.json") if not p.name.startswith("grammar-")]


def _fingerprint(loaded: pack_cache.LoadedPack, compiled) -> tuple:
    """Everything a compile yields that is data: the pack, each rule's explain() and ASTs with positions."""
    return (loaded.pack, [r.explain() for r in compiled],
            [{k: A.to_data(e) for k, e in r.asts.items()} for r in compiled],
            [(r.per_call, r.tool_only, r.plan) for r in compiled])


def _load_compile(path: Path) -> tuple:
    clear_caches()
    loaded = pack_cache.load(path)
    return _fingerprint(loaded, pack_cache.compile_loaded(loaded))


def _no_parsing(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("parsed although the cache holds the pack")
    monkeypatch.setattr(rule_parser, "grammar", boom)
    monkeypatch.setattr(RP, "YamlDoc", boom)


@pytest.mark.parametrize("name", ["generic", "tau_retail"])
def test_warm_equals_cold_for_shipped_packs_and_skips_parsing(cache, monkeypatch, name):
    path = RP.resolve_pack(name)
    cold = _load_compile(path)
    assert len(list(_entries(cache))) == 1
    _no_parsing(monkeypatch)
    warm = _load_compile(path)
    assert warm == cold
    assert A.same_data(warm[2], cold[2])  # positions and literal types too


def test_disabled_cache_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")
    cold = _load_compile(RP.resolve_pack("generic"))
    assert not cache.exists()
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "0")
    assert _load_compile(RP.resolve_pack("generic")) == cold
    assert len(list(_entries(cache))) == 1


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip", "empty", "directory", "bad-ast"])
def test_corrupt_entry_falls_back_silently_and_is_rewritten(cache, monkeypatch, damage):
    path = RP.resolve_pack("tau_retail")
    cold = _load_compile(path)
    (entry,) = _entries(cache)
    raw = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"\x00\xffnot json")
    elif damage == "flip":  # a well-formed body that no longer matches its digest
        assert b'"severity":"error"' in raw
        entry.write_bytes(raw.replace(b'"severity":"error"', b'"severity":"info"', 1))
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "bad-ast":  # a digest-valid entry whose stored ASTs do not decode (a bug, say)
        import hashlib
        import json

        head, _, body = raw.partition(b"\n")
        d = json.loads(body)
        d["parsed"] = {t: ["NoSuchNode", 1, 1] for t in d["parsed"]}
        body = json.dumps(d).encode()
        magic, fmt, _digest = head.decode().split(" ")
        entry.write_bytes(f"{magic} {fmt} {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    else:
        entry.unlink()
        entry.mkdir()
    again = _load_compile(path)
    assert again == cold
    if damage != "directory":
        assert entry.read_bytes() == raw  # the fallback compile wrote a good entry again
        _no_parsing(monkeypatch)
        assert _load_compile(path) == cold


def test_unwritable_cache_dir_is_ignored(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("TRAJAUDIT_CACHE_DIR", str(blocker / "packs"))
    monkeypatch.delenv("TRAJAUDIT_NO_CACHE", raising=False)
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "")
    loaded = pack_cache.load(RP.resolve_pack("tau_retail"))
    assert len(pack_cache.compile_loaded(loaded)) == len(loaded.pack.enabled_rules) > 0
    clear_caches()


def test_edits_to_an_included_file_are_picked_up(cache, tmp_path, monkeypatch):
    work = tmp_path / "w"
    work.mkdir()
    (work / "base.yaml").write_text(BASE)
    top = work / "top.yaml"
    top.write_text(TOP)
    first = _load_compile(top)
    assert first[0].rules[0].params["limit"] == 3
    (work / "base.yaml").write_text(BASE.replace("limit: 3", "limit: 7"))
    second = _load_compile(top)
    assert second[0].rules[0].params["limit"] == 7
    assert "<= 7" not in second[1][1] and second != first
    # a file that now resolves elsewhere (the include is found relative to the working directory
    # when not beside the pack) is another dependency: the entry is not reused
    (work / "base.yaml").unlink()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(BASE.replace("limit: 3", "limit: 9"))
    assert _load_compile(top)[0].rules[0].params["limit"] == 9


def test_errors_keep_their_location_after_a_cached_load(cache, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(BASE)
    _load_compile(p)
    p.write_text(BASE.replace("not contains_any(content, params.words)", "not contains_any(content, params.words"))
    for cached in (False, True):
        clear_caches()
        loaded = pack_cache.load(p)
        if cached:  # an entry of the pack with no ASTs (never written for a pack that does not compile)
            pack_cache._write(loaded)
            loaded = pack_cache.load(p)
            assert loaded.parsed is None and loaded.key is not None
        with pytest.raises(RulePackError) as ei:
            pack_cache.compile_loaded(loaded)
        assert str(ei.value).startswith(f"{p}:9:")
        assert "unbalanced parentheses" in str(ei.value) or "unexpected" in str(ei.value)


def test_a_pack_that_does_not_compile_leaves_no_entry(cache, tmp_path):
    """An entry was written as soon as the pack loaded, so a pack whose expression does not parse left
    one with ``parsed: null`` (fresh-user pass): entries are written once the pack compiled."""
    p = tmp_path / "p.yaml"
    p.write_text(BASE.replace("not contains_any(content, params.words)", "not contains_any(content, params.words"))
    for _ in range(2):
        clear_caches()
        with pytest.raises(RulePackError, match=f"^{p}:9:"):
            pack_cache.compile_loaded(pack_cache.load(p))
        assert _entries(cache) == []
    p.write_text(BASE)
    good = _load_compile(p)
    (entry,) = _entries(cache)
    assert json.loads(entry.read_bytes().partition(b"\n")[2])["parsed"]  # the compiled pack's ASTs
    assert _load_compile(p) == good


def test_data_that_json_would_change_is_not_cached(cache, tmp_path):
    p = tmp_path / "d.yaml"
    p.write_text(BASE.replace("  limit: 3\n", "  limit: 3\n  since: 2024-01-02\n  by_id: {1: one}\n"))
    a = _load_compile(p)
    assert a[0].params["since"].year == 2024 and a[0].params["by_id"] == {1: "one"}
    assert not list(_entries(cache))
    assert _load_compile(p) == a


def test_ast_data_round_trip_is_exact_for_every_shipped_expression(cache):
    clear_caches()
    with rule_parser.recording() as seen:
        for name in RP.shipped_packs():
            pack_cache.compile_loaded(pack_cache.load(RP.resolve_pack(name)))
    assert len(seen) > 200  # distinct expression texts of the shipped packs
    for text, data in seen.items():
        rule_parser.clear_memo()
        fresh = rule_parser.parse_expression(text)
        assert A.same_data(A.to_data(fresh), data)
        back = A.from_data(data)
        assert back == fresh and back is not A.from_data(data) and hash(back) == hash(fresh)
        assert [vars(n) for n in back.walk()] == [vars(n) for n in fresh.walk()]  # fields, order, positions
        assert [list(vars(n)) for n in back.walk()] == [list(vars(n)) for n in fresh.walk()]


def test_serialized_pack_covers_every_field():
    from dataclasses import fields

    assert {f.name for f in fields(RP.RuleSpec)} == set(pack_cache._SPEC_PLAIN) | {
        "targets", "let", "examples", "params", "loc", "field_locs"}
    assert {f.name for f in fields(RP.RulePack)} == set(pack_cache._PACK_PLAIN) | {"rules", "includes"}
    assert {f.name for f in fields(RP.SourceLoc)} == {"file", "line", "column", "indent"}


def test_domain_packs_are_compiled_only_when_a_run_selects_them(cache):
    clear_caches()
    always, domains = default_packs(())
    assert always == ["generic"] and [d.name for d in domains] == ["tau_retail"]
    assert _compiled_shipped.cache_info().currsize == 0 and _loaded_shipped.cache_info().currsize == 1
    rules = domains[0].rules
    assert rules and all(r.spec.pack == "tau_retail" for r in rules)
    assert _compiled_shipped.cache_info().currsize == 1


def _pack_docs() -> list[dict]:
    import yaml

    from trajaudit.engine.taxonomy import _shipped_dir

    docs = [yaml.safe_load(RP.resolve_pack(n).read_text()) for n in RP.shipped_packs()]
    docs.append(yaml.safe_load(_shipped_dir().joinpath("agentrx.yaml").read_text()))
    return docs


_PACK_DOCS = _pack_docs()
_values = json_values(["", "error", "PROTOCOL", "x", "a.b", "1"], ["id", "x", "type"])


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_schema_fast_path_agrees_on_mutated_packs_and_taxonomies(data):
    """Rule packs and taxonomies are now accepted by the compiled fast path first (schema.fast_accepts):
    random edits of the shipped ones get the same verdict as jsonschema, including YAML-only values."""
    from trajaudit.engine.schema import fast_accepts, validator

    doc = copy.deepcopy(data.draw(st.sampled_from(_PACK_DOCS)))
    name = "taxonomy" if "categories" in doc else "rule_pack"
    extra = st.one_of(_values, st.sampled_from([datetime.date(2024, 1, 2), {1: "x"}, {None: 1}, b"raw", {"a", "b"}]))
    mutate(doc, data, extra, ["extra", "id", "guard", "severity", 7])
    assert not fast_accepts(name, doc) or validator(name).is_valid(doc)


def test_cache_location_follows_xdg_and_never_lands_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAJAUDIT_NO_CACHE", raising=False)
    monkeypatch.delenv("TRAJAUDIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert pack_cache.cache_dir() == tmp_path / "xdg" / "trajaudit" / "packs"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG spec says
    (tmp_path / "home").mkdir()  # (a home folder that does not exist is no cache: see below)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert pack_cache.cache_dir() == tmp_path / "home" / ".cache" / "trajaudit" / "packs"
    monkeypatch.setenv("TRAJAUDIT_CACHE_DIR", str(tmp_path / "mine"))
    assert pack_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")
    assert pack_cache.cache_dir() is None


def test_yaml_is_parsed_once_with_the_same_errors_and_merge_keys():
    """YamlDoc constructs the data from the tree it composed for the marks (one parse of the text)."""
    with pytest.raises(RulePackError, match="YAML syntax error: unacceptable character #x0007"):
        RP.load_pack("pack: x\nrules: []\n\x07")
    with pytest.raises(RulePackError, match="YAML error: could not determine a constructor"):
        RP.load_pack("pack: x\nrules: !!python/name:os.system []\n")
    pack = RP.load_pack('pack: x\nbase: &b {type: PROTOCOL, assert: "true"}\nrules:\n  - <<: *b\n    id: m\n'
                        .replace("base: &b", "metadata: &b"))
    (rule,) = pack.rules
    assert (rule.id, rule.type, rule.assertion) == ("x.m", "PROTOCOL", "true")
    assert (rule.loc.line, rule.loc.column) == (4, 5)


def test_an_entry_missing_an_expression_is_completed(cache, monkeypatch):
    """If the compiler comes to parse a text the entry lacks (a newer compiler), the warm compile parses
    it and the entry is rewritten with it; results are those of a cold compile."""
    import hashlib
    import json

    path = RP.resolve_pack("tau_retail")
    cold = _load_compile(path)
    (entry,) = _entries(cache)
    raw = entry.read_bytes()
    head, _, body = raw.partition(b"\n")
    d = json.loads(body)
    dropped = next(iter(d["parsed"]))
    del d["parsed"][dropped]
    body = json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode()
    magic, fmt, _digest = head.decode().split(" ")
    entry.write_bytes(f"{magic} {fmt} {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    assert _load_compile(path) == cold
    assert dropped in json.loads(entry.read_bytes().partition(b"\n")[2])["parsed"]
    _no_parsing(monkeypatch)
    assert _load_compile(path) == cold


def _split_reference(text: str, where):
    """The character-by-character template splitter that rule_template._split replaced (the spec)."""
    parts, i, buf, start = [], 0, [], 0
    while i < len(text):
        ch = text[i]
        if ch == "{" and text[i + 1: i + 2] == "{":
            buf.append("{")
            i += 2
        elif ch == "}" and text[i + 1: i + 2] == "}":
            buf.append("}")
            i += 2
        elif ch == "{":
            end = text.find("}", i + 1)
            if end < 0:
                raise where.error("unclosed '{' in message template (write '{{' for a literal brace)",
                                  text, 1, i + 1, f"    {text}\n    {' ' * i}^")
            if buf:
                parts.append(("lit", "".join(buf), start))
                buf = []
            parts.append(("expr", text[i + 1: end], i + 1))
            i = end + 1
            start = i
        elif ch == "}":
            raise where.error("unmatched '}' in message template (write '}}' for a literal brace)",
                              text, 1, i + 1, f"    {text}\n    {' ' * i}^")
        else:
            buf.append(ch)
            i += 1
    if buf:
        parts.append(("lit", "".join(buf), start))
    return parts


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet="ab{}x é", max_size=16))
def test_template_split_equals_the_character_loop(text):
    from trajaudit.engine.dsl.parser import Where
    from trajaudit.engine.dsl.template import _split

    def run(f):
        try:
            return "ok", f(text, Where(file="p.yaml", line=3, column=5, rule_id="r", field="message"))
        except RulePackError as e:
            return "err", str(e), e.context
    assert run(_split) == run(_split_reference)


def test_shipped_packs_still_compile_and_cached_verdicts_follow_the_code():
    assert len(compile_rules(load_pack("generic"))) > 10 and len(compile_rules(load_pack("tau_retail"))) > 10
    assert "engine/dsl/regex/safety.py" in pack_cache.code_files()


def _fingerprint_reference() -> str:
    """``code_fingerprint`` as it was written first: ``os.walk`` file list, ``Path.read_bytes``."""
    import hashlib
    import importlib.util
    import sys

    import yaml

    spec = importlib.util.find_spec("lark")
    lark_init = Path(spec.origin).read_bytes() if spec is not None and spec.origin else b""
    # PyYAML by its __init__.py (which holds __version__) and its folder's files (the libyaml binding
    # ``_yaml`` among them): read without importing it; both say what yaml.__version__ and
    # __with_libyaml__ say
    folder = Path(yaml.__file__).parent
    files = sorted(p.name for p in folder.iterdir() if p.name != "__pycache__")
    init = (folder / "__init__.py").read_bytes()
    assert f"__version__ = '{yaml.__version__}'".encode() in init
    assert any(f.startswith("_yaml.") for f in files) == bool(getattr(yaml, "__with_libyaml__", False))
    h = hashlib.sha256(f"{pack_cache.FORMAT}|{sys.version}|{','.join(files)}|".encode() + init + b"|" + lark_init)
    for rel in pack_cache.code_files_reference():
        h.update(rel.encode() + b"\0" + (pack_cache.PACKAGE_ROOT / rel).read_bytes() + b"\0")
    js = importlib.util.find_spec("jsonschema")
    folder = Path(js.origin).parent if js is not None and js.origin else Path(".")
    for name in ("validators.py", "_keywords.py"):
        st_ = (folder / name).stat()
        h.update(f"{name}:{st_.st_size}:{st_.st_mtime_ns}".encode())
    return h.hexdigest()


def test_code_files_and_fingerprint_equal_the_reference(tmp_path, monkeypatch):
    # the package as it is, and a tree with what the walk must skip or keep: __pycache__, a symlinked
    # folder (not entered, as os.walk without followlinks), a link to a file (kept), a broken link
    # (dropped), a folder named like a code file, other suffixes
    assert pack_cache.code_files() == pack_cache.code_files_reference()
    pack_cache.code_fingerprint.cache_clear()
    try:
        assert pack_cache.code_fingerprint() == _fingerprint_reference()
    finally:
        pack_cache.code_fingerprint.cache_clear()
    root = tmp_path / "pkg"
    (root / "a" / "__pycache__").mkdir(parents=True)
    (root / "a" / "__pycache__" / "m.py").write_text("x")
    (root / "a" / "m.py").write_text("m")
    (root / "a" / "n.yaml").write_text("n")
    (root / "a" / "o.txt").write_text("o")
    (root / "d.py").mkdir()
    (root / "d.py" / "inner.json").write_text("{}")
    (root / "top.lark").write_text("g")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("x")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "link.py").symlink_to(root / "a" / "m.py")
    (root / "broken.py").symlink_to(tmp_path / "missing.py")
    monkeypatch.setattr(pack_cache, "PACKAGE_ROOT", root)
    got = pack_cache.code_files()
    assert got == pack_cache.code_files_reference()
    assert got == ["a/m.py", "a/n.yaml", "d.py/inner.json", "link.py", "top.lark"]
    pack_cache.code_fingerprint.cache_clear()
    try:
        assert pack_cache.code_fingerprint() == _fingerprint_reference()
    finally:
        pack_cache.code_fingerprint.cache_clear()


def test_a_home_folder_that_does_not_exist_is_never_created(tmp_path, monkeypatch, caplog):
    """HOME=/nonexistent (a service account): the default cache would have created the home folder's
    tree (fresh-user pass); the pack loads and compiles without the on-disk cache, same rules, and a
    debug line says why."""
    import logging

    for name in ("TRAJAUDIT_CACHE_DIR", "TRAJAUDIT_NO_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "nonexistent"
    monkeypatch.setenv("HOME", str(home))
    assert pack_cache.cache_dir() is None
    with caplog.at_level(logging.DEBUG, logger="trajaudit.disk_cache"):
        got = _load_compile(RP.resolve_pack("tau_retail"))
    assert not home.exists()
    assert f"home folder {home} does not exist; running without the on-disk cache" in caplog.text
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")
    assert _load_compile(RP.resolve_pack("tau_retail")) == got
    clear_caches()
    home.mkdir()
    monkeypatch.delenv("TRAJAUDIT_NO_CACHE")
    assert pack_cache.cache_dir() == home / ".cache" / "trajaudit" / "packs"
    monkeypatch.setenv("HOME", "")  # expanduser("~") says "/": the cache would be /.cache (fresh-user pass)
    assert pack_cache.cache_dir() is None


@pytest.mark.parametrize("damage", ["dev-zero", "fifo", "too-large"])
def test_an_entry_that_is_not_a_small_regular_file_is_not_read(cache, damage):
    """Entries were read whole, without a bound: a link to /dev/zero hung the load (fresh-user pass).
    Anything but a regular file of at most MAX_ENTRY_BYTES is a damaged entry: the pack is compiled
    without it (same rules) and a good entry replaces it."""
    import os
    import subprocess
    import sys

    from trajaudit import disk_cache

    path = RP.resolve_pack("tau_retail")
    cold = _load_compile(path)
    (entry,) = _entries(cache)
    raw = entry.read_bytes()
    entry.unlink()
    if damage == "dev-zero":
        entry.symlink_to("/dev/zero")
    elif damage == "fifo":
        os.mkfifo(entry)
    else:
        with entry.open("wb") as f:  # sparse: cheap to make, 64 MiB + 1 to read
            f.truncate(disk_cache.MAX_ENTRY_BYTES + 1)
    # first in a child with 1 GiB of address space and a timeout: an unbounded read fails there, not here
    probe = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
             "from pathlib import Path; from trajaudit.disk_cache import read_body; "
             "print(read_body(Path(sys.argv[1])))")
    done = subprocess.run([sys.executable, "-c", probe, str(entry)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stdout) == (0, "None\n"), done.stderr[-500:]
    assert _load_compile(path) == cold
    assert not entry.is_symlink() and entry.read_bytes() == raw  # replaced (the link, not /dev/zero)
    assert _load_compile(path) == cold


def test_read_body_reads_at_most_its_limit(tmp_path):
    from trajaudit import disk_cache

    p = tmp_path / "e.json"
    disk_cache.write_body(p, b"x" * 100)
    assert disk_cache.read_body(p) == b"x" * 100
    size = p.stat().st_size
    assert disk_cache.read_body(p, limit=size) == b"x" * 100
    assert disk_cache.read_body(p, limit=size - 1) is None
