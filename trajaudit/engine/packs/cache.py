"""On-disk cache of loaded rule packs: the checked pack data and the ASTs of its expressions, as JSON.

Loading a pack (YAML with node marks, schema validation, includes) and parsing its ~300 expressions
with lark is most of the audit's one-time work (issue 6); the result is pure data. An entry holds the
:class:`~trajaudit.engine.packs.pack.RulePack` (every rule spec with its source locations), the plain
form (``rule_ast.to_data``) of every expression the compile parsed, the verdicts of the regex
safety check, and what the regex fast paths derive from the pack's patterns
(:mod:`~trajaudit.engine.dsl.regex.stored`: literal sets, anchors, ASCII-twin and branch decisions,
and the SRE program of each pattern, twin and branch, which ``_sre.compile`` validates when it
rebuilds the pattern). The rules are still compiled to closures in every process: no Python code is
stored, and nothing stored is evaluated (the entry is read with ``json.loads``; a regex program is
only matched by the regex engine, as the pattern ``re.compile`` builds from the same text).

Exact or not taken:
- the key is a SHA-256 of the pack file's text and path, the trajaudit version, the source of the
  package's source files (:func:`code_files`, found by walking the package), and the Python, lark, PyYAML and
  jsonschema versions; on a hit every included file is resolved again and must be the same file with
  the same text (includes may be relative to the working directory);
- an entry is written only after the pack loaded and compiled without error, and only when its JSON
  form reads back identical (typed equality: a YAML date, a non-string key, ``nan`` … are not cached);
- the file carries a SHA-256 of its body; a truncated, edited or unreadable entry, one that is not a
  regular file or holds more than 64 MiB (``disk_cache.MAX_ENTRY_BYTES``: never read), an unwritable
  directory, or any other problem falls back silently (a debug log) to the normal load.

Where: ``$TRAJAUDIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/trajaudit/packs``, else
``~/.cache/trajaudit/packs`` when the home folder exists (else no cache: a home folder is never
created). ``TRAJAUDIT_NO_CACHE=1`` turns it off. At most :data:`MAX_ENTRIES`
files are kept (the oldest are removed when an entry is written). Deleting the directory is safe.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from hashlib import sha256
from pathlib import Path
from typing import Any

from trajaudit.disk_cache import FORMAT, cache_dir, read_body, write_body
from trajaudit.engine.dsl import parser as rule_parser
from trajaudit.engine.dsl.ast import same_data
from trajaudit.engine.dsl.regex import prefilter as regex_prefilter
from trajaudit.engine.dsl.regex import safety as regex_safety
from trajaudit.engine.dsl.regex import stored as regex_stored
from trajaudit.engine.packs import pack as RP
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.gc_pause import gc_paused

log = logging.getLogger(__name__)

MAX_ENTRIES = 128
# the trajaudit package folder: the cache key covers every source file in it (code_files)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
CODE_SUFFIXES = frozenset({".py", ".lark", ".json", ".yaml"})


def code_files() -> list[str]:
    """The package's own source files (``.py``, ``.lark``, ``.json``, ``.yaml``), relative to the
    ``trajaudit`` folder, sorted: every file whose change could change what a load produces is among
    them (found by walking the package, not listed by hand)."""
    out: list[str] = []
    _walk(str(PACKAGE_ROOT), "", out)
    return sorted(out)


def _walk(folder: str, prefix: str, out: list[str]) -> None:
    """Append to ``out`` the code files under ``folder`` (named ``prefix`` + path), as
    :func:`code_files_reference` finds them: ``__pycache__`` and symlinked folders are not entered,
    a file is a regular file or a link to one, an unreadable folder is skipped. One ``scandir`` per
    folder, whose entries know their type (no ``stat`` per file as ``os.path.isfile`` made; this list
    is made by every process and every batch after ``clear_caches``)."""
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError:
        return
    for e in entries:
        try:
            is_dir = e.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            if e.name != "__pycache__" and not e.is_symlink():
                _walk(e.path, prefix + e.name + "/", out)
        elif os.path.splitext(e.name)[1] in CODE_SUFFIXES and e.is_file():
            out.append(prefix + e.name)


def code_files_reference() -> list[str]:
    """:func:`code_files` by ``os.walk`` and ``os.path.isfile`` (the definition the tests compare with)."""
    root = str(PACKAGE_ROOT)
    out: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        out.extend(prefix + f for f in files if os.path.splitext(f)[1] in CODE_SUFFIXES
                   and os.path.isfile(os.path.join(folder, f)))
    return sorted(out)


def _read_bytes(path: str) -> bytes:
    """The bytes of the file ``path`` (``Path.read_bytes`` without its buffered file object: the
    fingerprint reads ~250 small files)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


@cache
def code_fingerprint() -> str:
    """SHA-256 of the package's files (:func:`code_files`: the trajaudit version is in
    ``__init__.py``) and the versions of the libraries involved (Python, lark, PyYAML, jsonschema),
    read without importing them."""
    # lark and PyYAML are found, not imported (~35 ms with the regex module lark loads, ~15 ms for
    # PyYAML; an audit from cached packs parses no YAML and no rule): their __init__.py holds
    # __version__, so its bytes change with the version; PyYAML's folder listing says whether its
    # libyaml binding (``_yaml``) is there
    lark_spec = importlib.util.find_spec("lark")
    lark_init = Path(lark_spec.origin).read_bytes() if lark_spec is not None and lark_spec.origin else b""
    yaml_spec = importlib.util.find_spec("yaml")
    yaml_init, yaml_files = b"", ""
    if yaml_spec is not None and yaml_spec.origin:
        yaml_init = Path(yaml_spec.origin).read_bytes()
        yaml_files = ",".join(sorted(f for f in os.listdir(os.path.dirname(yaml_spec.origin)) if f != "__pycache__"))
    h = sha256(f"{FORMAT}|{sys.version}|{yaml_files}|".encode() + yaml_init + b"|" + lark_init)
    root = str(PACKAGE_ROOT) + os.sep
    for rel in code_files():
        h.update(rel.encode() + b"\0" + _read_bytes(root + rel) + b"\0")
    # no cheap version string: size and mtime of its validators (the package is found, not imported:
    # a fresh audit of valid runs never needs jsonschema itself)
    spec = importlib.util.find_spec("jsonschema")
    js = Path(spec.origin).parent if spec is not None and spec.origin else Path(".")
    for name in ("validators.py", "_keywords.py"):
        st = (js / name).stat()
        h.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


@dataclass
class LoadedPack:
    """A loaded pack plus what the cache knows about it.

    Attributes:
        pack: the :class:`RulePack`.
        key: the entry's key (``None``: cache off or not applicable).
        deps: what the load read (see ``rule_pack.recording_deps``).
        parsed: ``{expression text: AST data}`` from the entry, or ``None`` (not compiled yet).
        regex: ``{pattern: verdict}`` from the entry, or ``None``.
        analyses: ``{key: decision}`` of the regex fast paths about the pack's patterns
            (:mod:`~trajaudit.engine.dsl.regex.stored`), or ``None``.
    """

    pack: RP.RulePack
    key: str | None = None
    deps: list[Any] = field(default_factory=list)
    parsed: dict[str, list[Any]] | None = None
    regex: dict[str, str] | None = None
    analyses: dict[str, Any] | None = None


def load(path: Path) -> LoadedPack:
    """Load the pack file ``path`` (from the cache when a valid entry exists).

    Raises:
        RulePackError: as :func:`~trajaudit.engine.packs.pack.load_pack` (errors never come from the cache).
    """
    with gc_paused():
        return _load(path)


def _load(path: Path) -> LoadedPack:
    return _cached(_key(path), path)


def _cached(key: str | None, source: Path | dict[str, Any]) -> LoadedPack:
    """The pack of ``source`` (a path or pack data) from the cache entry ``key``, or loaded with its
    dependencies recorded (``key`` ``None``: the cache is off). The entry is written by
    :func:`compile_loaded`, once the pack compiled: a pack that loads but does not compile (an
    expression that does not parse) leaves none."""
    if key is not None:
        hit = _read(key)
        if hit is not None:
            return hit
    with RP.recording_deps() as deps:
        pack = RP.load_pack(source)
    return LoadedPack(pack, key, deps)


def load_data(data: dict[str, Any]) -> LoadedPack:
    """Load a pack given as data (e.g. the SCHEMA pack derived from a ``--tools`` file), from the cache
    when an entry for the same data exists: the key is a SHA-256 of :func:`code_fingerprint` and the
    data's JSON text (key order kept: it is the order of the YAML the loader reads), so the YAML
    dump and parse of :func:`~trajaudit.engine.rule_pack.load_pack` run only on a miss.

    Raises:
        RulePackError: as :func:`~trajaudit.engine.rule_pack.load_pack` (errors never come from the cache).
    """
    with gc_paused():
        return _cached(data_key(data), data)


def data_key(data: dict[str, Any]) -> str | None:
    """The cache key of a pack given as data (:func:`load_data`), or ``None`` when the cache is off or
    the data is not plain JSON (then it is never cached)."""
    if cache_dir() is None:
        return None
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        log.debug("pack cache: no key for a pack given as data: %s", e)
        return None
    return sha256(json.dumps([code_fingerprint(), "data", text]).encode()).hexdigest()


def compile_loaded(loaded: LoadedPack) -> tuple[Any, ...]:
    """Compile the enabled rules of ``loaded.pack``; the entry's ASTs and regex verdicts spare the
    parse and the safety check, and a first compile stores them.

    Raises:
        RulePackError: a rule does not compile.
    """
    with gc_paused():
        return _compile_loaded(loaded)


def _compile_loaded(loaded: LoadedPack) -> tuple[Any, ...]:
    if loaded.parsed is not None and loaded.regex is not None:
        rule_parser.seed(loaded.parsed)
        regex_safety.seed(loaded.regex)
        regex_stored.seed(loaded.analyses or {})
        try:
            with _recording() as (parsed, regex, patterns, programs):
                compiled = tuple(compile_rules(loaded.pack))
        except RP.RulePackError:
            raise  # the same error a cold compile gives (the parse is the same; the compiler decides)
        except Exception as e:  # noqa: BLE001 - e.g. a stored AST that does not decode: compile cold
            log.debug("pack cache: entry for %s unusable (%s); compiling without it", loaded.pack.name, e)
            rule_parser.clear_memo()
            regex_safety.clear_memo()
            regex_stored.clear_memo()
            loaded.parsed = loaded.regex = loaded.analyses = None
        else:
            if loaded.key is not None and not (parsed.keys() <= loaded.parsed.keys()
                                               and regex.keys() <= loaded.regex.keys()
                                               and _analysed(patterns, loaded.analyses)):
                # the compiler now parses something the entry lacks: store the complete set
                loaded.parsed, loaded.regex = {**loaded.parsed, **parsed}, {**loaded.regex, **regex}
                loaded.analyses = {**(loaded.analyses or {}), **programs, **_analyses(patterns)}
                _write(loaded)
            return compiled
    with _recording() as (parsed, regex, patterns, programs):
        compiled = tuple(compile_rules(loaded.pack))
    if loaded.key is not None:
        loaded.parsed, loaded.regex = dict(parsed), dict(regex)
        loaded.analyses = {**programs, **_analyses(patterns)}
        _write(loaded)
    return compiled


@contextmanager
def _recording() -> Iterator[tuple[dict[str, Any], dict[str, Any], list[Any], dict[str, Any]]]:
    """What a pack's compile uses that its entry stores: ``(parsed expressions, regex-safety verdicts,
    the regexes it registered, the regex programs and decisions it read or made)``."""
    with rule_parser.recording() as parsed, regex_safety.recording() as regex, \
            regex_prefilter.registering() as patterns, regex_stored.recording() as programs:
        yield parsed, regex, patterns, programs


def _analyses(patterns: list[Any]) -> dict[str, Any]:
    """The regex fast paths' decisions about ``patterns`` (the pack's compiled rule regexes) and their
    branches, made now if not known yet (only when an entry is written): ``{key: decision}``."""
    with regex_stored.recording() as got:
        for rx in patterns:
            regex_prefilter.decide_all(rx)
    return dict(got)


def _analysed(patterns: list[Any], analyses: dict[str, Any] | None) -> bool:
    """Whether the entry's ``analyses`` were made for every one of ``patterns`` (each has its ``i`` key:
    :func:`_analyses` makes every decision of a pattern at once)."""
    return all(regex_stored.key("i", rx) in (analyses or {}) for rx in patterns if isinstance(rx.pattern, str))


# ---- keys, entries ---------------------------------------------------------------------------

def _key(path: Path) -> str | None:
    if cache_dir() is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
        resolved = str(path.resolve())
        return sha256(json.dumps([code_fingerprint(), str(path), resolved, RP.text_hash(text)]).encode()).hexdigest()
    except (OSError, UnicodeDecodeError, ValueError) as e:
        log.debug("pack cache: no key for %s: %s", path, e)
        return None


def _entry_path(key: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / f"{key}.json"


def _deps_hold(deps: list[Any]) -> bool:
    for kind, a, b, c in deps:
        if kind == "include":
            try:
                if str(RP.resolve_pack(a, b)) != c:
                    return False
            except RP.RulePackError:
                return False
        elif kind == "file":
            if RP.text_hash(Path(a).read_text(encoding="utf-8")) != c:
                return False
        else:
            return False
    return True


def _read(key: str) -> LoadedPack | None:
    p = _entry_path(key)
    body = read_body(p) if p is not None else None
    if body is None:
        return None
    try:
        d = json.loads(body)
        if d["key"] != key or not _deps_hold(d["deps"]):
            return None
        analyses = d.get("analyses")
        return LoadedPack(_pack_from(d["pack"]), key, d["deps"], d["parsed"], d["regex"],
                          analyses if isinstance(analyses, dict) else None)
    except Exception as e:  # noqa: BLE001 - any problem with an entry means: load normally
        log.debug("pack cache: ignoring entry %s: %s", p, e)
        return None


def _write(loaded: LoadedPack) -> None:
    p = _entry_path(loaded.key or "")
    if p is None or loaded.key is None:
        return
    try:
        body = {"key": loaded.key, "deps": [list(x) for x in loaded.deps], "pack": _pack_data(loaded.pack),
                "parsed": loaded.parsed, "regex": loaded.regex, "analyses": loaded.analyses}
        text = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        back = json.loads(text)
        if not same_data(back, body) or not same_data(_pack_data(_pack_from(back["pack"])), body["pack"]):
            log.debug("pack cache: %s does not round-trip through JSON; not cached", loaded.pack.name)
            return
        write_body(p, text.encode("utf-8", "surrogatepass"))
        _prune(p.parent)
    except Exception as e:  # noqa: BLE001 - a cache that cannot be written is simply not used
        log.debug("pack cache: cannot write an entry for %s: %s", loaded.pack.name, e)


def _prune(d: Path) -> None:
    entries = [q for q in d.glob("*.json") if len(q.stem) == 64]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda q: q.stat().st_mtime)
    for q in entries[: len(entries) - MAX_ENTRIES]:
        q.unlink(missing_ok=True)


# ---- RulePack <-> plain data -----------------------------------------------------------------
# File names and each pack's effective params repeat in every rule: they are stored once, in tables
# (``files``, ``params``), and rules refer to them by position. Every rule still gets its own params
# dict (a shallow copy, as the loader makes).

class _Tables:
    def __init__(self) -> None:
        self.files: list[str | None] = []
        self.params: list[dict[str, Any]] = []
        self._fi: dict[str | None, int] = {}
        self._pi: dict[str, int] = {}

    def file(self, f: str | None) -> int:
        if f not in self._fi:
            self._fi[f] = len(self.files)
            self.files.append(f)
        return self._fi[f]

    def param_set(self, p: dict[str, Any]) -> int:
        key = json.dumps(p, ensure_ascii=False, allow_nan=False)  # typed and ordered: 1, 1.0, true differ
        if key not in self._pi:
            self._pi[key] = len(self.params)
            self.params.append(p)
        return self._pi[key]


def _loc_data(loc: RP.SourceLoc, t: _Tables) -> list[Any]:
    return [t.file(loc.file), loc.line, loc.column, loc.indent]


def _loc_from(d: list[Any], files: list[str | None]) -> RP.SourceLoc:
    return RP.SourceLoc(files[d[0]], d[1], d[2], d[3])


_SPEC_PLAIN = ("id", "type", "severity", "title", "description", "message", "guard", "assertion", "check",
               "metadata", "pack", "disabled")


def _spec_data(s: RP.RuleSpec, t: _Tables) -> dict[str, Any]:
    d = {k: getattr(s, k) for k in _SPEC_PLAIN}
    d.update(targets=list(s.targets), let=[[n, x] for n, x in s.let], examples=list(s.examples),
             params=t.param_set(s.params), loc=_loc_data(s.loc, t),
             field_locs={k: _loc_data(v, t) for k, v in s.field_locs.items()})
    return d


def _spec_from(d: dict[str, Any], files: list[str | None], params: list[dict[str, Any]]) -> RP.RuleSpec:
    return RP.RuleSpec(targets=tuple(d["targets"]), let=tuple((n, x) for n, x in d["let"]),
                       examples=tuple(d["examples"]), params=dict(params[d["params"]]),
                       loc=_loc_from(d["loc"], files),
                       field_locs={k: _loc_from(v, files) for k, v in d["field_locs"].items()},
                       **{k: d[k] for k in _SPEC_PLAIN})


_PACK_PLAIN = ("name", "version", "taxonomy", "description", "params", "file", "metadata")


def _pack_data(p: RP.RulePack) -> dict[str, Any]:
    t = _Tables()
    d = {k: getattr(p, k) for k in _PACK_PLAIN}
    d.update(rules=[_spec_data(s, t) for s in p.rules], includes=list(p.includes))
    d.update(file_table=t.files, param_table=t.params)
    return d


def _pack_from(d: dict[str, Any]) -> RP.RulePack:
    files, params = d["file_table"], d["param_table"]
    return RP.RulePack(rules=tuple(_spec_from(s, files, params) for s in d["rules"]), includes=tuple(d["includes"]),
                       **{k: d[k] for k in _PACK_PLAIN})
