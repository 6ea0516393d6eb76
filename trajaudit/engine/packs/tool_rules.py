"""Deterministic SCHEMA rules synthesized from OpenAI function schemas (``trajaudit rules from-tools``).

AgentRx §3.1 derives global constraints 𝒞ᴳ "from tool schemas and domain policy"; this module does
the tool-schema half without an LLM. From a list of function schemas (``[{"type": "function",
"function": {"name", "parameters"}}]`` or bare ``{"name", "parameters"}``) it builds a rule pack —
plain data in the rule language, so ``rules explain`` shows exactly what is checked — with one rule
per kind of invocation error, each targeting ``invalid_invocation``:

- ``known-tool``: the called tool is one of the schemas;
- ``arguments-json``: the arguments are valid JSON (an object);
- ``required-arguments``: every ``required`` argument is present;
- ``argument-types``: every argument has its declared JSON type (``integer`` included, and the item
  type of arrays of scalars);
- ``argument-enums``: every argument with an ``enum`` (or ``const``) takes one of its values;
- ``no-extra-arguments``: no argument outside ``properties`` (unless ``additionalProperties`` or
  ``patternProperties`` allow extras).

The per-tool facts live in the pack's ``params.schemas`` (``{tool: {required, properties, types,
integers, item_types, enums, open}}``) and the rules look them up by ``call.name``.

Recovery: a violation is an error only when the call failed and was not recovered. A call is
excused when its own output is not an error (the tool tolerated it) or a later call of the same tool
succeeded (a retry with corrected arguments); excused violations are reported by the warning rule
``schema-violation-tolerated`` instead.

Schema features the rules cannot express (``anyOf``/``oneOf``/``allOf``/``not`` on a property,
unresolvable ``$ref``, a non-object ``parameters``) are skipped for that property or tool and
listed in :attr:`ToolRules.skipped` — never a crash.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajaudit import regular_files, safe_json
from trajaudit.checkers.tool_schemas import ToolSchemaError, check_tool_parameters
from trajaudit.engine.packs.pack import RulePack, load_pack

log = logging.getLogger(__name__)

#: JSON Schema type -> jmespath ``type()`` name.
_JTYPE = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean",
          "array": "array", "object": "object", "null": "null"}
_COMBINATORS = ("anyOf", "oneOf", "allOf", "not", "if")
PACK_NAME = "tools"


@dataclass
class ToolRules:
    """The synthesized pack and what could not be expressed.

    Attributes:
        pack: the pack as a dict (dump it as YAML, or give it to :func:`load_pack`).
        tools: names of the tools covered, in input order.
        skipped: ``"tool.argument: reason"`` for every schema part the rules do not check.
    """

    pack: dict[str, Any]
    tools: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def read_tools_file(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSON tools file (a list of function schemas) and validate each tool's ``parameters``
    with :func:`trajaudit.checkers.tool_schemas.check_tool_parameters` (the check ``audit``/``check``/``eval``
    apply through ``load_tools``), so every command refuses the same files with the same message.

    Raises:
        ToolSchemaError: unreadable file, invalid JSON, not a list of objects, or a tool whose
            ``parameters`` is not a valid object JSON Schema (names file, element and tool).
    """
    try:
        data = safe_json.loads(regular_files.read_text(path))
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e  # not the path again
        raise ToolSchemaError(f"cannot read tool schemas: {why}", file=str(path)) from None
    except ValueError as e:
        raise ToolSchemaError(f"not valid JSON: {e}", file=str(path)) from None
    for i, fn in enumerate(functions(data, file=str(path))):
        check_tool_parameters(fn, file=str(path), index=i)
    return data


def functions(tools: Any, *, file: str | None = None) -> list[dict[str, Any]]:
    """The function objects of an OpenAI tool list (``{"type": "function", "function": {...}}`` or bare).

    Raises:
        ToolSchemaError: ``tools`` is not a non-empty list of objects with a string ``name``, or two
            schemas share a name.
    """
    if isinstance(tools, dict) and isinstance(tools.get("tools"), list):
        tools = tools["tools"]
    if not isinstance(tools, list):
        raise ToolSchemaError(f"tool schemas must be a JSON list of function schemas, got {type(tools).__name__}",
                              file=file)
    if not tools:
        raise ToolSchemaError("the tool list is empty", file=file)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, t in enumerate(tools):
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ToolSchemaError("not a function schema (an object with a string 'name', optionally inside "
                                  "'function')", file=file, index=i)
        if fn["name"] in seen:
            raise ToolSchemaError(f"duplicate tool name {fn['name']!r}", file=file, index=i)
        seen.add(fn["name"])
        out.append(fn)
    return out


def _resolve(node: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """Follow a local ``$ref`` (``#/...``); ``None`` when it cannot be resolved."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#") or depth > 16:
            return None
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            else:
                return None
        node = target
        depth += 1
    return node


def _types_of(prop: dict[str, Any]) -> list[str] | None:
    t = prop.get("type")
    if t is None:
        return None
    ts = t if isinstance(t, list) else [t]
    if not ts or not all(isinstance(x, str) and x in _JTYPE for x in ts):
        return None
    if prop.get("nullable") is True and "null" not in ts:
        ts = [*ts, "null"]
    return ts


def _describe_tool(fn: dict[str, Any], skipped: list[str]) -> dict[str, Any]:
    """The facts the tool-schema rules check for one function schema: required and declared
    arguments, their JSON types, integer-only ones, array item types, enums, and whether other
    arguments are allowed (``open``). What cannot be checked is said in ``skipped``."""
    name = fn["name"]
    params = fn.get("parameters")
    if params is None:
        params = {"type": "object", "properties": {}}
    root = params if isinstance(params, dict) else {}
    params = _resolve(params, root)
    entry: dict[str, Any] = {"required": [], "properties": [], "types": {}, "integers": [], "item_types": {},
                             "enums": {}, "open": False}
    if not isinstance(params, dict) or params.get("type", "object") != "object":
        skipped.append(f"{name}: parameters is not an object schema; only the tool name and JSON are checked")
        entry["open"] = True
        entry["unchecked"] = True
        return entry
    for kw in _COMBINATORS:
        if kw in params:
            skipped.append(f"{name}: '{kw}' on the parameters object is not checked")
    props = params.get("properties") or {}
    if not isinstance(props, dict):
        skipped.append(f"{name}: 'properties' is not an object; argument checks skipped")
        props = {}
    req = params.get("required") or []
    entry["required"] = [r for r in req if isinstance(r, str)] if isinstance(req, list) else []
    entry["properties"] = list(props)
    extra = params.get("additionalProperties", None)
    entry["open"] = bool(extra not in (None, False)) or bool(params.get("patternProperties"))
    for pname, raw in props.items():
        prop = _property_schema(raw, root, f"{name}.{pname}", skipped)
        if prop is not None:
            _describe_property(entry, pname, prop, root, f"{name}.{pname}", skipped)
    return entry


def _property_schema(raw: Any, root: dict[str, Any], where: str, skipped: list[str]) -> dict[str, Any] | None:
    """One argument's schema, ``$ref`` resolved and an ``anyOf``/``oneOf`` of bare types merged into
    one ``type`` list; ``None`` (noted in ``skipped``) when it cannot be used."""
    prop = _resolve(raw, root)
    if prop is None:
        ref = raw.get("$ref") if isinstance(raw, dict) else raw
        skipped.append(f"{where}: unresolvable $ref {ref}")
        return None
    if not isinstance(prop, dict):
        skipped.append(f"{where}: the property schema is not an object")
        return None
    combos = [kw for kw in _COMBINATORS if kw in prop]
    if combos:
        simple = [_resolve(s, root) for s in prop.get("anyOf", prop.get("oneOf", []))]
        if combos in (["anyOf"], ["oneOf"]) and simple and all(isinstance(s, dict) and set(s) <= {"type"}
                                                             and _types_of(s) for s in simple):
            prop = {**prop, "type": sorted({t for s in simple for t in (_types_of(s) or [])})}
        else:
            skipped.append(f"{where}: {', '.join(combos)} not checked")
    return prop


def _describe_property(entry: dict[str, Any], pname: str, prop: dict[str, Any], root: dict[str, Any], where: str,
                       skipped: list[str]) -> None:
    """Add argument ``pname``'s types, integer flag, array item types and enum to ``entry``."""
    ts = _types_of(prop)
    if ts is None and "type" in prop:
        skipped.append(f"{where}: unusual 'type' {prop['type']!r} not checked")
    if ts is not None:
        entry["types"][pname] = sorted({_JTYPE[t] for t in ts})
        if "integer" in ts and "number" not in ts:
            entry["integers"].append(pname)
        items = _resolve(prop.get("items"), root) if "array" in ts else None
        its = _types_of(items) if isinstance(items, dict) else None
        if its is not None and not ({"array", "object"} & set(its)):
            entry["item_types"][pname] = sorted({_JTYPE[t] for t in its})
    if "enum" in prop:
        if isinstance(prop["enum"], list) and prop["enum"]:
            entry["enums"][pname] = copy.deepcopy(prop["enum"])
        else:
            skipped.append(f"{where}: 'enum' is not a non-empty list")
    elif "const" in prop:
        entry["enums"][pname] = [copy.deepcopy(prop["const"])]


# ---- the rules (rule-language text; the per-tool facts are in params.schemas) ---------------------

_OBJ_GUARD = ('call.name in params.tool_names and call.error == null and '
              '(call.args == null or select(call.args, "type(@)") == "object")')
_EXCUSE_LETS = {
    "out": "call.output",
    "recovered": "exists c in calls(later) where c.output != null and not c.output.is_error and c.name == call.name",
    "excused": "(out != null and not out.is_error) or recovered",
}
_ISSUE_LETS = {
    "S": "params.schemas[call.name]",
    "args": 'select(call.args, "@ || `{}`")',  # null arguments = no arguments
    "missing": "[r for r in S.required where r not in keys(args)]",
    "wrong_type": 'unique([k for k in keys(args) where k in keys(S.types) and select(args[k], "type(@)") not in S.types[k]]'
                  ' + [k for k in S.integers where select(args[k], "type(@)") == "number" and args[k] != round(args[k])]'
                  ' + [k for k in keys(S.item_types) where select(args[k], "type(@)") == "array" and '
                  'len([x for x in args[k] where select(x, "type(@)") not in S.item_types[k]]) > 0])',
    "off_enum": "[k for k in keys(S.enums) where k in keys(args) and args[k] not in S.enums[k]]",
    "extra": "[k for k in keys(args) where not S.open and k not in S.properties]",
}
_SOURCE = "AgentRx §3.1 (constraints from tool schemas): synthesized by trajaudit rules from-tools"


def _rule(rid: str, title: str, guard: str | None, lets: dict[str, str], assertion: str, message: str,
          severity: str = "error") -> dict[str, Any]:
    r: dict[str, Any] = {"id": rid, "title": title, "type": "SCHEMA", "severity": severity,
                         "targets": ["invalid_invocation"]}
    if guard:
        r["guard"] = guard
    r["let"] = dict(lets)
    r["assert"] = assertion
    r["message"] = message
    r["metadata"] = {"source": _SOURCE}
    return r


def _pick(lets: dict[str, str], *names: str) -> dict[str, str]:
    return {k: lets[k] for k in names}


def _rules() -> list[dict[str, Any]]:
    issues = _ISSUE_LETS
    return [
        _rule("known-tool", "the called tool is one of the declared tools", None,
              {"out": "call.output", "nxt": "first c in calls(later)",
               "excused": "(out != null and not out.is_error) or (nxt != null and nxt.name in params.tool_names "
                          "and nxt.output != null and not nxt.output.is_error)"},
              "call.name in params.tool_names or excused",
              "unknown tool {call.name} (declared: {params.tool_names})"),
        _rule("arguments-json", "the arguments are a JSON object", "call.name in params.tool_names",
              dict(_EXCUSE_LETS),
              '(call.error == null and (call.args == null or select(call.args, "type(@)") == "object")) or excused',
              "{call.name}: arguments are not a JSON object ({default(call.error, str(call.raw))})"),
        _rule("required-arguments", "every required argument is present", _OBJ_GUARD,
              {**_pick(issues, "S", "args", "missing"), **_EXCUSE_LETS},
              "len(missing) == 0 or excused", "{call.name}: missing required argument(s) {missing}"),
        _rule("argument-types", "every argument has its declared JSON type", _OBJ_GUARD,
              {**_pick(issues, "S", "args", "wrong_type"), **_EXCUSE_LETS},
              "len(wrong_type) == 0 or excused",
              "{call.name}: argument(s) {wrong_type} do not have the declared JSON type (declared: {S.types})"),
        _rule("argument-enums", "every enumerated argument takes one of its allowed values", _OBJ_GUARD,
              {**_pick(issues, "S", "args", "off_enum"), **_EXCUSE_LETS},
              "len(off_enum) == 0 or excused",
              "{call.name}: value outside the allowed set for {off_enum} (allowed: {S.enums})"),
        _rule("no-extra-arguments", "no argument outside the declared properties", _OBJ_GUARD,
              {**_pick(issues, "S", "args", "extra"), **_EXCUSE_LETS},
              "len(extra) == 0 or excused",
              "{call.name}: undeclared argument(s) {extra} (declared: {S.properties})"),
        _rule("schema-violation-tolerated", "a schema violation the tool tolerated or a retry corrected", _OBJ_GUARD,
              {**issues, **_EXCUSE_LETS, "problems": "missing + wrong_type + off_enum + extra"},
              "len(problems) == 0 or not excused",
              "{call.name}: schema violation in {problems}, but the call succeeded or a later {call.name} call did",
              severity="warning"),
    ]


# ---- the same checks on one call, in Python (what ``guard`` applies before the call runs) ---------

def describe_tools(tools: Any) -> dict[str, dict[str, Any]]:
    """The per-tool facts the tool-schema rules check (``params.schemas`` of the synthesized pack:
    ``{tool: {required, properties, types, integers, item_types, enums, open}}``).

    Raises:
        ToolSchemaError: ``tools`` is not a list of function schemas (:func:`functions`).
    """
    skipped: list[str] = []
    return {fn["name"]: _describe_tool(fn, skipped) for fn in functions(tools)}


def _json_type(v: Any) -> str:
    """The JMESPath ``type()`` name of a JSON value (what the rules compare with ``S.types``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def argument_problems(entry: dict[str, Any], args: Any, error: str | None = None) -> list[str]:
    """What a call's arguments break in its tool's schema facts (:func:`describe_tools`), by the
    tool-schema rules' own tests (``arguments-json``, ``required-arguments``, ``argument-types``,
    ``argument-enums``, ``no-extra-arguments``) without their excuse — the call's output and later
    retries, which a check before the call runs cannot know. ``[]`` when the call keeps to it.

    Args:
        entry: one tool's facts. args: the parsed arguments (``None``: no arguments).
        error: why the arguments string could not be parsed, if it could not.
    """
    if error is not None or (args is not None and not isinstance(args, dict)):
        return [f"arguments-json: the arguments are not a JSON object ({error or _json_type(args)})"]
    if entry.get("unchecked"):
        return []
    args = args or {}
    out: list[str] = []
    missing = [r for r in entry["required"] if r not in args]
    if missing:
        out.append(f"required-arguments: missing {missing}")
    wrong = _wrong_types(entry, args)
    if wrong:
        out.append(f"argument-types: {wrong} do not have the declared JSON type "
                   f"({ {k: entry['types'].get(k) for k in wrong} })")
    off = [k for k, allowed in entry["enums"].items() if k in args and args[k] not in allowed]
    if off:
        out.append(f"argument-enums: {off} outside the allowed values ({ {k: entry['enums'][k] for k in off} })")
    extra = [k for k in args if not entry["open"] and k not in entry["properties"]]
    if extra:
        out.append(f"no-extra-arguments: undeclared {extra} (declared: {entry['properties']})")
    return out


def _wrong_types(entry: dict[str, Any], args: dict[str, Any]) -> list[str]:
    """The arguments whose JSON type is not declared (``argument-types``' ``wrong_type``), each once."""
    types, items = entry["types"], entry["item_types"]
    wrong = [k for k in args if k in types and _json_type(args[k]) not in types[k]]
    wrong += [k for k in entry["integers"] if k in args and isinstance(args[k], float) and not args[k].is_integer()]
    wrong += [k for k in items if k in args and isinstance(args[k], list)
              and any(_json_type(x) not in items[k] for x in args[k])]
    return list(dict.fromkeys(wrong))


# ---- examples (so that `rules test` checks the synthesized pack too) ------------------------------

def _sample(prop_types: list[str] | None, enum: list[Any] | None, item_types: list[str] | None) -> Any:
    if enum:
        return enum[0]
    t = (prop_types or ["string"])[0]
    if t == "array":
        return [_sample(item_types, None, None)] if item_types else []
    return {"string": "x", "number": 1, "boolean": True, "object": {}, "null": None}.get(t, "x")


def _valid_args(entry: dict[str, Any]) -> dict[str, Any]:
    return {r: _sample(entry["types"].get(r), entry["enums"].get(r), entry["item_types"].get(r))
            for r in entry["required"]}


def _chat(name: str, args: Any, output: str, raw: str | None = None) -> list[dict[str, Any]]:
    arguments = raw if raw is not None else json.dumps(args)
    return [{"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "name": name, "content": output}]


def _examples(rule_id: str, schemas: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A pass and (when the schemas allow one) a fail example for ``rule_id``."""
    checkable = {n: e for n, e in schemas.items() if not e.get("unchecked")}
    if not checkable:
        return []
    name, entry = next(iter(checkable.items()))
    ok = {"name": f"valid call of {name}", "expect": "pass", "messages": _chat(name, _valid_args(entry), "ok")}
    err = "Error: invalid arguments"
    bad: dict[str, Any] | None = None
    if rule_id == "known-tool":
        unknown = "no_such_tool"
        while unknown in schemas:
            unknown += "_"
        bad = {"name": "call of an undeclared tool", "messages": _chat(unknown, {}, "Error: unknown tool")}
    elif rule_id == "arguments-json":
        bad = {"name": "truncated JSON arguments", "messages": _chat(name, None, err, raw='{"a": ')}
    elif rule_id == "required-arguments":
        hit = next(((n, e) for n, e in checkable.items() if e["required"]), None)
        if hit:
            args = _valid_args(hit[1])
            args.pop(hit[1]["required"][0])
            bad = {"name": f"{hit[0]} without {hit[1]['required'][0]}", "messages": _chat(hit[0], args, err)}
    elif rule_id == "argument-types":
        hit = next(((n, e, p) for n, e in checkable.items() for p in e["types"] if "boolean" not in e["types"][p]), None)
        if hit:
            args = _valid_args(hit[1])
            args[hit[2]] = True
            bad = {"name": f"{hit[0]}.{hit[2]} given a boolean", "messages": _chat(hit[0], args, err)}
    elif rule_id == "argument-enums":
        hit = next(((n, e, p) for n, e in checkable.items() for p in e["enums"]), None)
        if hit:
            args = _valid_args(hit[1])
            value = "not-an-allowed-value"
            args[hit[2]] = value
            bad = {"name": f"{hit[0]}.{hit[2]} outside its enum", "messages": _chat(hit[0], args, err)}
    elif rule_id in ("no-extra-arguments", "schema-violation-tolerated"):
        hit = next(((n, e) for n, e in checkable.items() if not e["open"]), None)
        if hit:
            args = _valid_args(hit[1])
            extra = "unexpected_argument"
            while extra in hit[1]["properties"]:
                extra += "_"
            args[extra] = "x"
            output = "ok" if rule_id == "schema-violation-tolerated" else err
            bad = {"name": f"{hit[0]} with an undeclared argument", "messages": _chat(hit[0], args, output)}
    out = [ok]
    if bad is not None:
        out.insert(0, {**bad, "expect": "fail"})
    return out


def synthesize_tool_rules(tools: Any, *, name: str = PACK_NAME, file: str | None = None) -> ToolRules:
    """Build the SCHEMA rule pack for a list of OpenAI function schemas.

    Args:
        tools: ``[{"type": "function", "function": {...}}, ...]`` (or bare function objects, or
            ``{"tools": [...]}``).
        name: the pack name (rule ids are ``NAME.known-tool`` …).
        file: the tools file, for error messages.

    Returns:
        :class:`ToolRules` (the pack dict, covered tools, skipped schema parts).

    Raises:
        ToolSchemaError: ``tools`` is not a list of function schemas.
    """
    fns = functions(tools, file=file)
    skipped: list[str] = []
    schemas = {fn["name"]: _describe_tool(fn, skipped) for fn in fns}
    for s in skipped:
        log.info("from-tools: %s", s)
    rules = _rules()
    for r in rules:
        r["examples"] = _examples(r["id"], schemas)
    pack = {"pack": name, "version": 1, "taxonomy": "agentrx",
            "description": f"SCHEMA rules synthesized from {len(fns)} tool schema(s) by trajaudit rules from-tools"
                           + (f"; {len(skipped)} schema part(s) not checked" if skipped else ""),
            "params": {"tool_names": [fn["name"] for fn in fns],
                       "schemas": {n: {k: v for k, v in e.items() if k != "unchecked"} for n, e in schemas.items()}},
            "rules": rules}
    return ToolRules(pack, [fn["name"] for fn in fns], skipped)


def rules_from_tools(tools: Any, *, name: str = PACK_NAME) -> RulePack:
    """The SCHEMA rule pack for ``tools``, loaded (compile it with ``compile_rules``).

    This is what ``trajaudit check --tools`` and ``trajaudit audit --tools`` apply on the fly.

    Raises:
        ToolSchemaError: ``tools`` is not a list of function schemas.
    """
    return load_pack(synthesize_tool_rules(tools, name=name).pack)
