"""Plain-language messages for mistakes in rule packs.

- :func:`schema_problems` rewords the errors jsonschema reports against ``rule_pack.schema.json``.
  jsonschema stays the authority — it decides what is invalid, and every problem here comes from one
  of its errors — but its raw text ("… is not valid under any of the given schemas" followed by a
  dump of the rule) says neither what is wrong nor how to fix it. Each common validator (``oneOf`` /
  ``anyOf``, ``required``, ``additionalProperties``, ``enum``, ``type``, ``minLength``, ``pattern``,
  ``minimum``) gets a sentence that names the field and the fix, with a did-you-mean where a name is
  close to an allowed one; an unknown field is located at its key, and a ``oneOf`` error that only
  repeats a misspelt key's consequence (``asert:`` → "needs assert or check") is dropped, so each
  problem is reported once. Validators not listed keep jsonschema's text behind the field's name.
- :func:`did_you_mean` is the shared close-match hint (unknown rule ids, parameters, fields).
- :func:`relocate_param_error` moves a compile error that an including pack's parameter override
  caused (``include: [{pack: x, params: {words: 42}}]`` makes ``content ~ params.words`` a type error
  in x) to the override, where the fix belongs, and names the rule and line that use it.

Pattern: jsonschema's "errors as data" (``validator``, ``absolute_path``, ``context``) read by a
driver that adds the location (STYLE.md patterns 5–7).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajaudit.engine.packs.positions import caret
from trajaudit.errors import RulePackError

_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}
_ID_PATTERN = "^[a-z0-9_]+([.-][a-z0-9_]+)*$"


@dataclass(frozen=True)
class SchemaProblem:
    """One problem in a pack, in words.

    Attributes:
        path: where it is in the parsed pack (keys and list indices; a last element ``("key", NAME)``
            means the key ``NAME`` itself rather than its value) — locate it with the YAML marks.
        message: the plain-language message.
        missing: field names whose absence this problem reports (for de-duplication).
        suggests: field names a did-you-mean of this problem proposes.
    """

    path: tuple[Any, ...]
    message: str
    missing: frozenset[str] = field(default=frozenset())
    suggests: frozenset[str] = field(default=frozenset())


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the candidate closest to ``word`` (case-insensitive), or ``""``."""
    hit = close_match(word, candidates)
    return f" (did you mean {hit!r}?)" if hit else ""


def close_match(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word`` (difflib ratio ≥ 0.6, case-insensitive), or ``None``."""
    by_lower = {str(c).lower(): str(c) for c in candidates}
    hit = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[hit[0]] if hit else None


def schema_problems(errors: Iterable[Any], data: Any) -> list[SchemaProblem]:
    """Translate jsonschema ``ValidationError``s of a pack into :class:`SchemaProblem`s (one per problem).

    Args:
        errors: the errors of ``validator("rule_pack").iter_errors(data)``.
        data: the parsed pack (used to name rules and examples).

    Returns:
        The problems, de-duplicated, in the order found (callers sort them by file position).
    """
    out: list[SchemaProblem] = []
    for e in errors:
        out += _translate(e, data)
    # a misspelt key that the did-you-mean names explains the "missing field" problem at the same place
    hinted = {(p.path[:-1], s) for p in out if p.suggests for s in p.suggests}
    seen: set[tuple[Any, ...]] = set()
    kept = []
    for p in out:
        if p.missing and any((p.path, m) in hinted for m in p.missing):
            continue
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            kept.append(p)
    return kept


def _translate(e: Any, data: Any) -> list[SchemaProblem]:
    """A jsonschema error as the problems a pack author reads: the first of the per-keyword
    translations (:data:`_TRANSLATIONS`) that applies, else the library's message with the field named."""
    if e.validator in ("oneOf", "anyOf"):
        return _alternatives(e, data)
    path = tuple(e.absolute_path)
    name = _field(path, data)
    for translate in _TRANSLATIONS:
        got = translate(e, path, name, data)
        if got is not None:
            return got
    msg = e.message
    if isinstance(e.instance, (dict, list)) and msg.startswith(repr(e.instance)):
        msg = "the value" + msg[len(repr(e.instance)):]  # never dump a whole rule into the message
    return [SchemaProblem(path, f"{name}: {msg}")]


def _missing_fields(e: Any, path: Path_, name: str, data: Any) -> list[SchemaProblem] | None:
    if e.validator != "required" or not isinstance(e.instance, dict):
        return None
    subject = _subject(path, data)
    return [SchemaProblem(path, f"{subject}: missing required field {k!r}", missing=frozenset([k]))
            for k in e.validator_value if k not in e.instance]


def _unknown_fields(e: Any, path: Path_, name: str, data: Any) -> list[SchemaProblem] | None:
    if e.validator != "additionalProperties" or not isinstance(e.instance, dict):
        return None
    allowed = sorted(e.schema.get("properties", {}))
    where = "" if _is_rule(path) or not path else f" in {_subject(path, data)}"
    out = []
    for k in e.instance:
        if k in allowed or not isinstance(k, str):
            continue
        hint = close_match(k, allowed)
        tail = f" (did you mean {hint!r}?)" if hint else f" (allowed: {', '.join(allowed)})"
        out.append(SchemaProblem(path + (("key", k),), f"unknown field {k!r}{where}{tail}",
                                 suggests=frozenset([hint] if hint else [])))
    return out or None


def _not_in_enum(e: Any, path: Path_, name: str, data: Any) -> list[SchemaProblem] | None:
    if e.validator != "enum":
        return None
    inst = e.instance
    noun = "severity" if len(path) >= 2 and path[-2] == "severity" else str(path[-1]) if path else "value"
    choices = [str(c) for c in e.validator_value]
    for_rule = f" for {path[-1]}" if noun == "severity" and path[-1] != "severity" else ""
    return [SchemaProblem(path, f"{noun} {inst!r}{for_rule} is not one of {', '.join(choices)}"
                                + (did_you_mean(inst, choices) if isinstance(inst, str) else ""))]


def _wrong_type(e: Any, path: Path_, name: str, data: Any) -> list[SchemaProblem] | None:
    if e.validator != "type":
        return None
    inst = e.instance
    want = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
    msg = f"{name} must be {' or '.join(_TYPE_WORDS.get(t, t) for t in want)}, got {_kind(inst)}"
    if "string" in want and (inst is None or isinstance(inst, (bool, int, float))):
        msg += " (YAML read this as a non-string: quote it)"
    return [SchemaProblem(path, msg)]


def _too_short(e: Any, path: Path_, name: str, data: Any) -> list[SchemaProblem] | None:
    if e.validator != "minLength" or not isinstance(e.instance, str):
        return None
    n = e.validator_value
    return [SchemaProblem(path, f"{name} must not be empty" if n == 1 else f"{name} must have at least {n} "
                                                                            f"characters")]


def _bad_pattern(e: Any, path: Path_, name: str, data: Any) -> list[SchemaProblem] | None:
    inst = e.instance
    if e.validator != "pattern" or not isinstance(inst, str):
        return None
    if "propertyNames" in e.schema_path:
        return [SchemaProblem(path + (("key", inst),), f"{name}: the name {inst!r} does not match the pattern "
                                                       f"{e.validator_value!r}")]
    if e.validator_value == _ID_PATTERN:
        return [SchemaProblem(path, f"{name} {inst!r}: use lower-case words of a-z, 0-9 and _ joined by '.' or "
                                    f"'-' (e.g. 'no-refund-talk')")]
    return [SchemaProblem(path, f"{name}: {inst!r} does not match the pattern {e.validator_value!r}")]


_BOUND_WORDS = {"minimum": "at least", "exclusiveMinimum": "more than", "maximum": "at most",
                "exclusiveMaximum": "less than"}


def _out_of_bounds(e: Any, path: Path_, name: str, data: Any) -> list[SchemaProblem] | None:
    if e.validator not in _BOUND_WORDS:
        return None
    return [SchemaProblem(path, f"{name} must be {_BOUND_WORDS[e.validator]} {e.validator_value}, got {e.instance!r}")]


Path_ = tuple[Any, ...]
#: ``translate(error, path, field name, pack data) -> problems | None`` (``None``: not this keyword).
_TRANSLATIONS: tuple[Callable[[Any, Path_, str, Any], list[SchemaProblem] | None], ...] = (
    _missing_fields, _unknown_fields, _not_in_enum, _wrong_type, _too_short, _bad_pattern, _out_of_bounds)


def _alternatives(e: Any, data: Any) -> list[SchemaProblem]:
    """``oneOf``/``anyOf``: say which alternative was meant and what is wrong with it."""
    path, inst, branches = tuple(e.absolute_path), e.instance, e.validator_value
    subject = _subject(path, data)
    keys = [b.get("required") if isinstance(b, dict) else None for b in branches]
    by_branch: dict[int, list[Any]] = {}
    for sub in e.context or ():
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
    if isinstance(inst, dict) and all(isinstance(k, list) and len(k) == 1 for k in keys):
        # alternatives told apart by one key each (assert/check, messages/trace, checker/semantic)
        names = [k[0] for k in keys]
        have = [n for n in names if n in inst]
        opts = ", ".join(f"{n}:" for n in names[:-1]) + f" or {names[-1]}:"
        if not have:
            return [SchemaProblem(path, f"{subject}: give exactly one of {opts} (it has neither)",
                                  missing=frozenset(names))]
        if len(have) > 1:
            return [SchemaProblem(path + (("key", have[-1]),), f"{subject}: give exactly one of {opts}, not both")]
        chosen = by_branch.get(names.index(have[0]), [])
        return [p for sub in chosen for p in _translate(sub, data)] or [SchemaProblem(path, f"{subject}: "
                                                                                      f"{e.message[-80:]}")]
    def type_mismatch(i: int) -> bool:
        return any(s.validator == "type" and not s.relative_path for s in by_branch.get(i, []))
    fits = [i for i in range(len(branches)) if not type_mismatch(i)]
    if len(fits) == 1 and by_branch.get(fits[0]):
        return [p for sub in by_branch[fits[0]] for p in _translate(sub, data)]
    if not fits:
        want = list(dict.fromkeys(_TYPE_WORDS.get(b.get("type"), str(b.get("type"))) for b in branches
                                  if isinstance(b, dict)))
        return [SchemaProblem(path, f"{_field(path, data)} must be {' or '.join(want)}, got {_kind(inst)}")]
    return [SchemaProblem(path, f"{subject} matches none of its allowed forms (see docs/rules.md)")]


def _is_rule(path: tuple[Any, ...]) -> bool:
    return len(path) == 2 and path[0] == "rules" and isinstance(path[1], int)


def _get(data: Any, path: Sequence[Any]) -> Any:
    for p in path:
        try:
            data = data[p]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _subject(path: tuple[Any, ...], data: Any) -> str:
    """What a path designates, for a sentence: ``rule 'x'``, ``example 0 ('name')``, ``include[1]``."""
    if _is_rule(path):
        rid = _get(data, path + ("id",))
        return f"rule {rid!r}" if isinstance(rid, str) else f"rule {path[1]}"
    if len(path) >= 2 and path[-2] == "examples" and isinstance(path[-1], int):
        name = _get(data, path + ("name",))
        return f"example {path[-1]}" + (f" ({name!r})" if isinstance(name, str) else "")
    return _field(path, data) if path else "the pack"


def _field(path: tuple[Any, ...], data: Any) -> str:
    """A field's name: relative to its rule inside a rule (``targets``, ``examples[0].at``), else from the top."""
    rel = path[2:] if len(path) >= 2 and path[0] == "rules" and isinstance(path[1], int) else path
    if not rel:
        return _subject(path, data) if path else "the pack"
    s = ""
    for p in rel:
        s += f"[{p}]" if isinstance(p, int) else ("." if s else "") + str(p)
    return s


def _kind(v: Any) -> str:
    if v is None:
        return "null (nothing)"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return f"the number {v}"
    if isinstance(v, str):
        return f"the string {v!r}"
    return {dict: "a mapping", list: "a list"}.get(type(v), type(v).__name__)


# ---- parameter overrides -----------------------------------------------------------------------

_PARAM_REF = re.compile(r"params\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(['\"])(.*?)\2\s*\])")


def relocate_param_error(spec: Any, err: RulePackError) -> RulePackError:
    """If ``err`` (a compile error of rule ``spec``) points at ``params.NAME`` and NAME's value was set by
    an including pack (``spec.field_locs["params.NAME"]``), the same error located at that override.

    Args:
        spec: the :class:`~trajaudit.engine.packs.pack.RuleSpec` that failed to compile.
        err: its :class:`RulePackError` (with the expression line and caret in ``context``).

    Returns:
        A new error at the override (message names the value, the rule and where it uses it), or
        ``err`` unchanged when the error is not about an overridden parameter.
    """
    if not err.context or "\n" not in err.context:
        return err
    src, caret = err.context.split("\n", 2)[:2]
    col = caret.find("^")
    if col < 4:
        return err
    src, col = src[4:], col - 4
    for m in _PARAM_REF.finditer(src):
        if m.start() <= col < m.end():
            name = m.group(1) or m.group(3)
            loc = spec.field_locs.get(f"params.{name}")
            if loc is None:
                return err
            used = f"{Path(err.file).name if err.file else '<rules>'}:{err.line}:{err.column}"
            msg = (f"params.{name} = {spec.params.get(name)!r}, set here, does not suit rule {spec.id} "
                   f"(used at {used}): {err.message}")
            return RulePackError(msg, file=loc.file, line=loc.line, column=loc.column, rule_id=spec.id,
                                 context=_source_caret(loc))
    return err


def _source_caret(loc: Any) -> str | None:
    if loc.file is None or loc.line is None:
        return None
    try:
        lines = Path(loc.file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return caret(lines, loc.line, loc.column)
