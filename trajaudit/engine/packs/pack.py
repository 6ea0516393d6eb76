"""Rule packs: YAML files of guarded constraints, validated by ``rule_pack.schema.json``.

A pack has metadata (``pack``, ``version``, ``taxonomy``, ``description``), ``params`` (constants
rules read as ``params.NAME``), ``include`` (other packs, by short name or path), ``disable`` and
``overrides`` (severity / disabled by rule id) and ``rules``. Every rule keeps its file, line and
column, and every expression knows where it starts in the file so that expression errors point at
the exact character (YAML node marks). Loading never executes anything: YAML is parsed with the safe
loader and expressions are compiled later by :mod:`rule_compiler`. AgentRx §3.1 (global constraints
𝒞ᴳ "from tool schemas and domain policy") stored as declarative data.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from hashlib import sha256
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trajaudit.engine.packs  # its submodule messages is loaded on first use (error paths)
from trajaudit import regular_files
from trajaudit.api_args import PACKS, check_mapping, is_path
from trajaudit.engine.dsl.parser import Where
from trajaudit.engine.packs.positions import SourceLoc, YamlDoc, caret, is_shipped_file  # noqa: F401 - re-exported
from trajaudit.engine.schema import fast_accepts, validator
from trajaudit.errors import ArgumentTypeError, RulePackError
from trajaudit.registry import close_hint

if TYPE_CHECKING:
    import trajaudit.engine.packs.lint
    import trajaudit.engine.packs.messages  # noqa: F401 - the attribute's type for mypy (loaded on first use)

MAX_INCLUDE_DEPTH = 16

# What a load read, for ``pack_cache`` (which must re-check it before reusing a stored pack): every
# ``("file", path, sha256 of the text)`` and ``("include", ref, including file, resolved path)``.
Dep = tuple[str, str | None, str | None, str]
_DEP_RECORDERS: list[list[Dep]] = []


@contextmanager
def recording_deps() -> Iterator[list[Dep]]:
    """Collect, in a list, what every pack load inside the block reads (files with the SHA-256 of
    their text — :func:`text_hash` — and resolved includes), for ``pack_cache`` to re-check."""
    deps: list[Dep] = []
    _DEP_RECORDERS.append(deps)
    try:
        yield deps
    finally:  # by identity: two recorders may hold equal contents
        del _DEP_RECORDERS[next(i for i, r in enumerate(_DEP_RECORDERS) if r is deps)]


#: The list :func:`collecting_duplicates` files duplicate rule ids in (per thread / task: a load
#: elsewhere still raises).
_DUPLICATES: ContextVar[list[tuple[RulePackError, RuleSpec]] | None] = ContextVar("trajaudit_pack_duplicates",
                                                                                   default=None)


@contextmanager
def collecting_duplicates() -> Iterator[list[tuple[RulePackError, RuleSpec]]]:
    """Inside the block a duplicate rule id does not stop a pack load: its error (file:line:col of the
    second definition, naming the first) and the second rule are appended to the list yielded, and the
    rule is left out of the pack, so ``rules lint`` reports it, and checks it, with every other problem
    of the pack in one pass."""
    sink: list[tuple[RulePackError, RuleSpec]] = []
    token = _DUPLICATES.set(sink)
    try:
        yield sink
    finally:
        _DUPLICATES.reset(token)


#: The set :func:`skipping_bad_rules` files the indexes of the loaded pack's rules with schema problems in
_BAD_RULES: ContextVar[set[int] | None] = ContextVar("trajaudit_pack_bad_rules", default=None)


@contextmanager
def skipping_bad_rules() -> Iterator[set[int]]:
    """Inside the block, rules of the pack loaded (not of the packs it includes) that break the schema
    do not stop the load when every schema problem lies inside a rule: their indexes in ``rules`` are
    added to the set yielded and the rules left out of the pack, so ``rules lint`` reports their schema
    problems with the other rules' duplicate ids and compile errors in one pass."""
    sink: set[int] = set()
    token = _BAD_RULES.set(sink)
    try:
        yield sink
    finally:
        _BAD_RULES.reset(token)


def _duplicate(error: RulePackError, rule: RuleSpec) -> None:
    """Raise ``error`` (``rule``'s id is taken), or file both in the :func:`collecting_duplicates` list."""
    sink = _DUPLICATES.get()
    if sink is None:
        raise error
    sink.append((error, rule))


def text_hash(text: str) -> str:
    """SHA-256 (hex) of ``text`` as UTF-8 (lone surrogates kept)."""
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class RuleSpec:
    """One rule as written in a pack (not yet compiled).

    Attributes:
        id: ``pack.kebab-name`` (a rule id without a dot gets the pack name as prefix).
        type, severity, targets, title, description, message: as in the pack (see the schema).
        guard: expression text (``None`` = always applies).
        let: ``((name, expression), …)`` in order.
        assertion: the ``assert`` expression text, or ``None`` when the rule uses ``check``.
        check: ``{"checker": name, "args": {…}}`` or ``{"semantic": "predicate"}``, or ``None``.
        examples, metadata: as written.
        params: the effective parameters of the pack that defines the rule (after overrides).
        pack: the defining pack's name. loc: the rule's location. field_locs: where each
            expression field starts (``guard``, ``assert``, ``let.NAME``, ``message``).
        disabled: switched off by the pack or an including pack.
    """

    id: str
    type: str
    severity: str = "error"
    targets: tuple[str, ...] = ()
    title: str = ""
    description: str = ""
    message: str = ""
    guard: str | None = None
    let: tuple[tuple[str, str], ...] = ()
    assertion: str | None = None
    check: dict[str, Any] | None = None
    examples: tuple[dict[str, Any], ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    pack: str = ""
    loc: SourceLoc = SourceLoc()
    field_locs: dict[str, SourceLoc] = field(default_factory=dict)
    disabled: bool = False

    def where(self, fieldname: str) -> Where:
        """Error context for expression field ``fieldname``."""
        fl = self.field_locs.get(fieldname, self.loc)
        return Where(fl.file, fl.line, fl.column, self.id, fieldname, fl.indent)


@dataclass(frozen=True)
class RulePack:
    """A loaded pack with its includes resolved.

    Attributes:
        name, version, taxonomy, description: pack metadata.
        rules: every rule (own and included), disabled ones included with ``disabled=True``.
        params: this pack's effective parameters.
        file: the pack file, or ``None`` for packs given as text/dict.
        includes: resolved files (or names) of included packs, in order.
        metadata: the pack's free ``metadata`` mapping (e.g. ``applies_to_tools`` for domain packs).
    """

    name: str
    rules: tuple[RuleSpec, ...]
    version: str = ""
    taxonomy: str = ""
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    file: str | None = None
    includes: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def enabled_rules(self) -> tuple[RuleSpec, ...]:
        """Rules that are not disabled."""
        return tuple(r for r in self.rules if not r.disabled)

    def rule(self, rule_id: str) -> RuleSpec:
        """The rule with this id (full or without the pack prefix); raises ``LookupError``."""
        for r in self.rules:
            if r.id == rule_id:
                return r
        short = [r for r in self.rules if r.id in (f"{r.pack}.{rule_id}",) or r.id.rsplit(".", 1)[-1] == rule_id]
        if len(short) == 1:
            return short[0]

        hint = close_hint(rule_id, [r.id for r in self.rules])
        raise LookupError(f"no rule {rule_id!r} in pack {self.name}{hint}")


# ---- loading ---------------------------------------------------------------------------------

def _shipped(name: str) -> Path | None:
    base = resources.files("trajaudit.rules")
    for rel in (f"{name}.yaml", name.replace(".", "/") + ".yaml"):
        p = base.joinpath(rel)
        if p.is_file():
            return Path(str(p))
    return None


def shipped_packs() -> list[str]:
    """Names of the packs shipped in ``trajaudit/rules/`` (``a/b.yaml`` is named ``a.b``)."""
    base = Path(str(resources.files("trajaudit.rules")))
    names = (str(p.relative_to(base).with_suffix("")).replace(os.sep, ".") for p in base.rglob("*.yaml"))
    return sorted(n for n in names if not n.startswith("taxonomies."))


def supersedes_of(spec: RuleSpec) -> list[str]:
    """The rule ids ``spec``'s ``metadata.supersedes`` names (a list; any other value is read as one
    id), without the rule's own id (a rule never supersedes itself)."""
    names = spec.metadata.get("supersedes") if spec.metadata else None
    if not names:
        return []
    return [str(n) for n in (names if isinstance(names, list) else [names]) if str(n) != spec.id]


def shipped_rule_specs() -> list[RuleSpec]:
    """Every rule of every shipped pack, each id once (a pack that fails to load is skipped: its own
    lint reports it)."""
    seen: dict[str, RuleSpec] = {}
    for name in shipped_packs():
        try:
            rules = load_pack(name).rules
        except RulePackError:
            continue
        for r in rules:
            seen.setdefault(r.id, r)
    return list(seen.values())


def resolve_pack(ref: str, relative_to: str | None = None) -> Path:
    """Find a pack file: a path (relative to the including file), or a shipped pack's short name.

    Raises:
        RulePackError: nothing found (lists the shipped packs).
    """
    p = Path(ref)
    if relative_to is not None and not p.is_absolute():
        q = Path(relative_to).parent / p
        if q.is_file():
            return q
    if p.is_file():
        return p
    if "/" not in ref and os.sep not in ref and not ref.endswith((".yaml", ".yml")):
        hit = _shipped(ref)
        if hit is not None:
            return hit
    kind = regular_files.file_kind(p)
    if kind not in (None, "missing", "unreadable", "a folder"):  # a FIFO, socket, device, dangling link: never opened
        raise RulePackError(f"rule pack {ref!r}: {kind}, not a regular file (not opened)", file=relative_to)
    known = ", ".join(shipped_packs()) or "none"
    if kind == "a folder":  # it said "not found" of a folder that is there
        raise RulePackError(f"rule pack {ref!r} is a folder: give a pack's YAML file or a shipped pack's name "
                            f"(shipped packs: {known})", file=relative_to)
    raise RulePackError(f"rule pack {ref!r} not found (not a file; shipped packs: {known})", file=relative_to)


def is_pack_text(source: Any) -> bool:
    """Whether ``source`` is a pack's YAML text (a string with a newline or starting with ``pack:``),
    not a file path or a shipped pack name."""
    return isinstance(source, str) and ("\n" in source or source.lstrip().startswith("pack:"))


def load_pack(source: str | os.PathLike[str] | dict[str, Any], *, params: dict[str, Any] | None = None) -> RulePack:
    """Load a rule pack and everything it includes.

    Args:
        source: a path, a shipped pack's short name (``trajaudit/rules/NAME.yaml``), YAML text (any
            string containing a newline or starting with ``pack:``), or an already parsed dict
            (e.g. an LLM-synthesized pack).
        params: parameter overrides applied like an including pack's ``params`` (by name); every name
            must be a parameter of the pack or of a pack it includes.

    Returns:
        The :class:`RulePack`; rules are not compiled yet (see ``compile_rules``).

    Raises:
        RulePackError: YAML syntax error, schema violation (unknown field, bad severity …), missing
            include, include cycle, duplicate rule id, unknown id in ``disable``/``overrides``, unknown
            parameter override (including one in ``params``, with a did-you-mean) — each with
            file:line:col and a caret where known.
        ArgumentTypeError: ``source`` or ``params`` of the wrong type (``params`` not a mapping).
    """
    _check_arguments(source, params)
    if params and not all(isinstance(k, str) for k in params):
        raise RulePackError(f"params: parameter names are strings, got {sorted(map(repr, params))}")
    overrides = dict(params or {})
    if isinstance(source, dict):
        import yaml  # only where YAML is written or parsed: an audit from cached packs imports no PyYAML

        text = yaml.safe_dump(source, sort_keys=False, allow_unicode=True)
        pack = _load_text(text, None, overrides, (), None)
    elif is_pack_text(source):
        pack = _load_text(source, None, overrides, (), None)
    else:
        pack = _load_file(resolve_pack(str(source)), overrides, ())
    unknown = [k for k in overrides if k not in _all_params(pack)]
    if unknown:
        raise RulePackError(f"params: pack {pack.name} has no parameter(s) {_names_hint(unknown, _all_params(pack))}",
                            file=pack.file)
    return pack


def _names_hint(unknown: list[str], known: set[str]) -> str:
    """``a (did you mean 'b'?), c (known: b, d)`` for unknown parameter names."""
    listed = ", ".join(k + trajaudit.engine.packs.messages.did_you_mean(k, known) for k in unknown)
    return f"{listed} (known: {', '.join(sorted(known)) or 'none'})"


def _order(loc: SourceLoc) -> tuple[int, int]:
    return (loc.line or 0, loc.column or 0)


def _check_arguments(source: Any, params: Any) -> None:
    """:func:`load_pack`'s argument types (raises ``ArgumentTypeError``); values are checked later."""
    if not (is_path(source) or isinstance(source, dict)):
        raise ArgumentTypeError("load_pack", "source", source, "a path, a shipped pack name, YAML text, or a dict")
    check_mapping("load_pack", "params", params)


def _load_file(path: Path, overrides: dict[str, Any], chain: tuple[str, ...],
               locs: dict[str, SourceLoc] | None = None) -> RulePack:
    key = str(path.resolve())
    if key in chain:
        names = " → ".join(Path(c).name for c in chain + (key,))
        raise RulePackError(f"include cycle: {names}", file=str(path))
    if len(chain) > MAX_INCLUDE_DEPTH:
        raise RulePackError(f"includes nested deeper than {MAX_INCLUDE_DEPTH}", file=str(path))
    try:
        text = regular_files.read_text(path)
    except (OSError, UnicodeDecodeError) as e:
        raise RulePackError(f"cannot read rule pack: {e}", file=str(path)) from None
    if _DEP_RECORDERS:
        digest = text_hash(text)
        for r in _DEP_RECORDERS:
            r.append(("file", str(path), None, digest))
    return _load_text(text, str(path), overrides, chain + (key,), key, locs)


def _load_text(text: str, file: str | None, overrides: dict[str, Any], chain: tuple[str, ...],
               key: str | None, locs: dict[str, SourceLoc] | None = None) -> RulePack:
    """Load one pack's text; ``overrides`` are parameter values from including packs (or the API) and
    ``locs`` where an including pack set them (kept in the rules' ``field_locs["params.NAME"]`` so a
    compile error an override causes can be reported at the override)."""
    top = locs is None  # the pack loaded, not one it includes (those are given where overrides were set)
    locs = locs or {}
    doc = YamlDoc(text, file)
    data, bad = _checked_data(doc, top)
    name = data["pack"]
    own_params = dict(data.get("params") or {})
    params = {**own_params, **{k: v for k, v in overrides.items() if k in own_params}}
    param_locs = {k: locs[k] for k in params if k in overrides and k in locs}
    rules: list[RuleSpec] = []
    seen: dict[str, RuleSpec] = {}
    includes: list[str] = []
    for i, inc in enumerate(data.get("include") or []):
        entry = {"pack": inc} if isinstance(inc, str) else inc
        ipath, sub_rules = _included_rules(doc, entry, i, file, params, param_locs, overrides, locs, chain)
        includes.append(str(ipath))
        for r in sub_rules:
            if r.id in seen:
                if seen[r.id].loc == r.loc:
                    continue  # the same pack reached twice (a diamond of includes)
                _duplicate(doc.error(f"duplicate rule id {r.id!r} (also at {seen[r.id].loc})", ("include", i), r.id), r)
                continue
            seen[r.id] = r
            rules.append(r)
    for i, rd in enumerate(data.get("rules") or []):
        if i in bad:  # left out by skipping_bad_rules
            continue
        r = _rule(doc, rd, ("rules", i), name, params, param_locs)
        if r.id in seen:
            _duplicate(doc.error(f"duplicate rule id {r.id!r} (also at {seen[r.id].loc})", ("rules", i, "id"), r.id), r)
            continue
        seen[r.id] = r
        rules.append(r)
    ov = {k: dict(v) for k, v in (data.get("overrides") or {}).items()}
    rules = _apply(doc, rules, data.get("disable") or [], ov, ())
    return RulePack(name=name, rules=tuple(rules), version=str(data.get("version", "")),
                    taxonomy=data.get("taxonomy", ""), description=data.get("description", ""),
                    params=params, file=file, includes=tuple(includes), metadata=dict(data.get("metadata") or {}))


def _checked_data(doc: YamlDoc, top: bool) -> tuple[dict[str, Any], set[int]]:
    """The pack document's data, checked against the rule-pack schema, and the indexes of the rules to
    leave out (``top``: the pack loaded, not an included one, inside :func:`skipping_bad_rules`, and
    every schema problem inside a rule: those rules; else none).

    Raises:
        RulePackError: not a mapping, or the first schema problem in file order (with a count of the rest).
    """
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error(f"a rule pack is a mapping with 'pack' and 'rules', got {type(data).__name__}", ())
    if not fast_accepts("rule_pack", data):
        problems = trajaudit.engine.packs.messages.schema_problems(validator("rule_pack").iter_errors(data), data)
        skip = _BAD_RULES.get() if top else None
        inside = [p.path[1] for p in problems if p.path[:1] == ("rules",) and len(p.path) > 1 and type(p.path[1]) is int]
        if problems and skip is not None and len(inside) == len(problems):
            skip.update(inside)
            return data, set(inside)
        if problems:
            first = min(problems, key=lambda p: _order(doc.loc(p.path)))
            total = _lint_error_count(doc) or len(problems)
            more = f" (and {total - 1} more error(s): `trajaudit rules lint` lists them all)" if total > 1 else ""
            raise doc.error(f"schema: {first.message}{more}", first.path, _rule_id_at(data, first.path))
    return data, set()


_COUNTING: ContextVar[bool] = ContextVar("trajaudit_pack_counting_errors", default=False)


def _lint_error_count(doc: YamlDoc) -> int | None:
    """How many errors ``trajaudit rules lint`` reports for ``doc``'s pack — the schema problems and
    the compile errors, duplicate ids and contradictions of the rules without one, which the first
    schema problem hides — so that a load error's "and N more" is the count lint shows. ``None``
    inside that lint (its own loads count nothing) or when the lint itself fails."""
    if _COUNTING.get():
        return None
    token = _COUNTING.set(True)
    try:  # lint sits above pack (it compiles and runs z3): reached as an attribute, loaded on first use
        found = trajaudit.engine.packs.lint.lint_pack(doc.file if doc.file else "\n".join(doc.lines) + "\n")
    except Exception:  # noqa: BLE001 - a count for a message: the schema count stands in
        return None
    finally:
        _COUNTING.reset(token)
    return sum(f.level == "error" for f in found) or None


def _included_rules(doc: YamlDoc, entry: dict[str, Any], i: int, file: str | None, params: dict[str, Any],
                    param_locs: dict[str, SourceLoc], overrides: dict[str, Any], locs: dict[str, SourceLoc],
                    chain: tuple[str, ...]) -> tuple[Path, list[RuleSpec]]:
    """``(path, rules)`` of include number ``i`` (``entry``): the included pack loaded with the
    parameters passed down (this pack's, the include's, then the overrides, with where each was
    set), its rules after the include's ``disable`` and ``severity``.

    Raises:
        RulePackError: the pack is missing or invalid, or the include names an unknown parameter.
    """
    try:
        ipath = resolve_pack(entry["pack"], file)
    except RulePackError as e:
        raise doc.error(e.message, ("include", i)) from None
    for r in _DEP_RECORDERS:
        r.append(("include", entry["pack"], file, str(ipath)))
    entry_params = entry.get("params") or {}
    down = {**params, **entry_params, **overrides}
    down_locs = {**{k: param_locs.get(k, doc.loc(("params", k))) for k in params},
                 **{k: doc.loc(("include", i, "params", k)) for k in entry_params}}
    down_locs.update((k, locs[k]) for k in overrides if k in locs)
    for k in overrides:
        if k not in locs:  # given through the API: no file position
            down_locs.pop(k, None)
    sub = _load_file(ipath, down, chain, down_locs)
    unknown = [k for k in entry_params if k not in _all_params(sub)]
    if unknown:
        raise doc.error(f"include {entry['pack']}: unknown parameter(s) {_names_hint(unknown, _all_params(sub))}",
                        ("include", i, "params", ("key", unknown[0])))
    sub_rules = _apply(doc, list(sub.rules), entry.get("disable") or [], {k: {"severity": v} for k, v in
                                                                          (entry.get("severity") or {}).items()},
                       ("include", i))
    return ipath, sub_rules


def _all_params(pack: RulePack) -> set[str]:
    return {k for r in pack.rules for k in r.params} | set(pack.params)


def _rule_id_at(data: dict[str, Any], path: tuple[Any, ...]) -> str | None:
    if len(path) >= 2 and path[0] == "rules" and isinstance(path[1], int):
        try:
            rid = data["rules"][path[1]].get("id")
            return rid if isinstance(rid, str) else None
        except (IndexError, AttributeError, TypeError):
            return None
    return None


def _rule(doc: YamlDoc, rd: dict[str, Any], path: tuple[Any, ...], pack: str, params: dict[str, Any],
          param_locs: dict[str, SourceLoc]) -> RuleSpec:
    rid = rd["id"] if "." in rd["id"] else f"{pack}.{rd['id']}"
    locs = {f: doc.loc(path + (f,)) for f in ("guard", "assert", "message") if f in rd}
    for name in rd.get("let") or {}:
        locs[f"let.{name}"] = doc.loc(path + ("let", name))
    for j, _ex in enumerate(rd.get("examples") or []):
        locs[f"examples.{j}"] = doc.loc(path + ("examples", j))
    for name, loc in param_locs.items():  # set by an including pack: compile errors they cause go there
        locs[f"params.{name}"] = loc
    return RuleSpec(
        id=rid, type=rd["type"], severity=rd.get("severity", "error"), targets=tuple(rd.get("targets") or ()),
        title=rd.get("title", ""), description=rd.get("description", ""), message=rd.get("message", ""),
        guard=rd.get("guard"), let=tuple((rd.get("let") or {}).items()), assertion=rd.get("assert"),
        check=copy.deepcopy(rd.get("check")), examples=tuple(rd.get("examples") or ()),
        metadata=dict(rd.get("metadata") or {}), params=dict(params), pack=pack, loc=doc.loc(path),
        field_locs=locs, disabled=bool(rd.get("disabled", False)))


def _apply(doc: YamlDoc, rules: list[RuleSpec], disable: list[str], overrides: dict[str, dict[str, Any]],
           path: tuple[Any, ...]) -> list[RuleSpec]:
    """Apply ``disable`` and per-id ``overrides``; unknown ids are errors (typos must not pass silently)."""
    def find(rid: str, where: tuple[Any, ...]) -> int:
        for i, r in enumerate(rules):
            if r.id == rid:
                return i
        short = [i for i, r in enumerate(rules) if r.id == f"{r.pack}.{rid}" or r.id.rsplit(".", 1)[-1] == rid]
        if len(short) == 1:
            return short[0]

        hint = close_hint(rid, [r.id for r in rules])
        raise doc.error(f"unknown rule id {rid!r}{hint}", where)
    for j, rid in enumerate(disable):
        i = find(rid, path + ("disable", j) if not path else path)
        rules[i] = replace(rules[i], disabled=True)
    for rid, ov in overrides.items():
        i = find(rid, path + ("overrides", rid) if not path else path)
        r = rules[i]
        rules[i] = replace(r, severity=ov.get("severity", r.severity), disabled=ov.get("disabled", r.disabled))
    return rules


def check_packs(function: str, value: Any) -> tuple[Any, ...]:
    """``rules``: pack references as a tuple of ``str`` (paths, shipped names) and ``RulePack``
    objects. A single ``str``/``os.PathLike``/``RulePack`` is ONE pack; ``None`` means none.

    Raises:
        ArgumentTypeError: not a pack nor an iterable of packs, or an element is not a pack.
    """
    def one(item: Any, where: str) -> Any:
        if isinstance(item, RulePack):
            return item
        if is_path(item):
            return os.fspath(item)
        raise ArgumentTypeError(function, where, item, "a rule pack (a path, a shipped pack name, or a RulePack)")

    if value is None:
        return ()
    if is_path(value) or isinstance(value, RulePack):
        return (one(value, "rules"),)
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ArgumentTypeError(function, "rules", value, PACKS)
    return tuple(one(item, f"rules[{i}]") for i, item in enumerate(value))
