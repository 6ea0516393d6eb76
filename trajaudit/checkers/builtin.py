"""The shipped programmatic checkers.

- ``tool_args_schema`` (per call): the call names a known tool and its arguments are valid JSON that
  validates against the tool's JSON schema (OpenAI function format) — AgentRx "Invalid Invocation".
- ``regex_search``: a regex is present in (or absent from) the step's content or call arguments.
- ``list_count_matches_claim``: the number an agent states (captured by a regex in its message)
  equals the number of items a jmespath query selects in the latest output of a tool — AgentRx
  Appendix G, ``tshirt_available_options_match_variants_count``, made generic.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import jmespath

from trajaudit import safe_json
from trajaudit.checkers.base import CheckContext, Checker, CheckResult, register_checker
from trajaudit.engine.dsl.builtins import to_number
from trajaudit.engine.dsl.regex.safety import refusal, regex_risk
from trajaudit.engine.validation_log import Evidence
from trajaudit.registry import Registry

_FLAGS = {"i": re.I, "m": re.M, "s": re.S, "x": re.X}


@lru_cache(maxsize=512)
def _rx(pattern: str, flags: str = "") -> re.Pattern[str]:
    f = 0
    for ch in flags:
        f |= _FLAGS[ch]
    return re.compile(pattern, f)


def _check_regex(args: dict[str, Any], key: str = "pattern") -> None:
    try:
        _rx(args[key], args.get("flags", ""))
    except re.error as e:
        raise ValueError(f"invalid regex {args[key]!r} in args.{key}: {e}") from None
    risk = regex_risk(args[key])
    if risk:
        raise ValueError(refusal(f"regex {args[key]!r} in args.{key}", risk))


def tool_args_schema(ctx: CheckContext, tools: list[dict[str, Any]] | None = None) -> CheckResult:
    """The call's tool exists and its arguments validate against the tool's JSON schema."""
    call = ctx.call
    if call is None:
        return CheckResult("skip")
    schemas = tools if tools is not None else ctx.tools
    if not schemas:
        return CheckResult("unknown", message="no tool schemas given (pass tools to evaluate / --tools)")
    by_name = {}
    for t in schemas:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            by_name[fn["name"]] = fn
    addr = ctx.call_address
    if call.name not in by_name:
        return CheckResult("fail", (Evidence(addr + ".name", call.name, "unknown tool"),),
                           f"unknown tool {call.name!r}")
    if call.arguments_error:
        return CheckResult("fail", (Evidence(addr + ".raw_arguments", call.raw_arguments, "malformed JSON"),),
                           f"arguments are not valid JSON: {call.arguments_error}")
    params = by_name[call.name].get("parameters") or {"type": "object"}
    import jsonschema  # where a call is checked (~0.2 s of imports a run without this checker skips)

    try:
        cls = jsonschema.validators.validator_for(params)
        errors = sorted(cls(params).iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
    except jsonschema.exceptions.SchemaError as e:
        return CheckResult("unknown", message=f"the schema of tool {call.name} is invalid: {e.message}")
    if not errors:
        return CheckResult("pass", (Evidence(addr + ".arguments", call.arguments, "valid arguments"),))
    ev = tuple(Evidence(addr + ".arguments" + "".join(f".{p}" for p in e.absolute_path), e.instance, e.message)
               for e in errors[:5])
    return CheckResult("fail", ev, f"{call.name} arguments: " + "; ".join(e.message for e in errors[:3]))


def regex_search(ctx: CheckContext, pattern: str, flags: str = "", field: str = "content",
                 expect: str = "absent") -> CheckResult:
    """Search a regex in the step's ``content`` (or its calls' ``arguments``); fail when the result
    differs from ``expect`` (``absent`` or ``present``)."""
    rx = _rx(pattern, flags)
    if field == "content":
        targets = [(ctx.step.address + ".content", ctx.step.content)]
    else:
        calls = [(j, c) for j, c in enumerate(ctx.step.tool_calls)]
        targets = [(f"{ctx.step.address}.tool_calls.{j}.arguments",
                    c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments, ensure_ascii=False))
                   for j, c in calls]
    hits = []
    for addr, text in targets:
        m = rx.search(text or "")
        if m:
            hits.append(Evidence(f"{addr}[{m.start()}:{m.end()}]", m.group(0), "match"))
    found = bool(hits)
    ok = found if expect == "present" else not found
    if ok:
        return CheckResult("pass", tuple(hits))
    what = "found" if found else "not found"
    return CheckResult("fail", tuple(hits) or tuple(Evidence(a, None, "no match") for a, _ in targets),
                       f"/{pattern}/ {what} in {field}")


def list_count_matches_claim(ctx: CheckContext, tool: str, list: str, claim: str, flags: str = "i") -> CheckResult:  # noqa: A002
    """The number captured by ``claim`` in the step's content equals the count of items ``list``
    (jmespath) selects in the latest ``tool`` output before the step."""

    m = _rx(claim, flags).search(ctx.step.content or "")
    if not m:
        return CheckResult("skip", message="no count claim in this message")
    raw = m.group(1) if m.re.groups else m.group(0)
    claimed = to_number(raw)
    span = Evidence(f"{ctx.step.address}.content[{m.start()}:{m.end()}]", m.group(0), "claim")
    out = ctx.latest_output(tool)
    if out is None:
        return CheckResult("unknown", (span,), f"no earlier output of {tool}")
    try:
        data = safe_json.loads(out.content)
    except ValueError:
        return CheckResult("unknown", (span, Evidence(out.address + ".content", out.content[:200], "not JSON")),
                           f"the output of {tool} is not JSON")
    selected = jmespath.search(list, data)
    count = len(selected) if isinstance(selected, (type([]), dict)) else None
    ev = (span, Evidence(f"{out.address}.content", count, f"count of {list} in latest {tool} output"))
    if claimed is None or count is None:
        return CheckResult("unknown", ev, "could not read the claimed number or the list")
    bindings = {"claimed": claimed, "actual": count, "output_step": out.index}
    if claimed == count:
        return CheckResult("pass", ev, bindings=bindings)
    return CheckResult("fail", ev, f"claims {claimed}, {out.address} has {count}", bindings)


def register_builtin_checkers(reg: Registry[Checker]) -> None:
    """Register the shipped checkers in ``reg``."""
    register_checker(reg, "tool_args_schema", tool_args_schema, per_call=True, args_schema={
        "type": "object", "additionalProperties": False,
        "properties": {"tools": {"type": "array", "items": {"type": "object"}}}})
    register_checker(reg, "regex_search", regex_search, validate=_check_regex, args_schema={
        "type": "object", "additionalProperties": False, "required": ["pattern"],
        "properties": {"pattern": {"type": "string"}, "flags": {"type": "string", "pattern": "^[imsx]*$"},
                       "field": {"enum": ["content", "arguments"]}, "expect": {"enum": ["absent", "present"]}}})

    def _check_count(args: dict[str, Any]) -> None:
        _check_regex(args, "claim")
        try:
            jmespath.compile(args["list"])
        except jmespath.exceptions.JMESPathError as e:
            raise ValueError(f"invalid jmespath in args.list: {e}") from None

    register_checker(reg, "list_count_matches_claim", list_count_matches_claim, validate=_check_count, args_schema={
        "type": "object", "additionalProperties": False, "required": ["tool", "list", "claim"],
        "properties": {"tool": {"type": "string"}, "list": {"type": "string"}, "claim": {"type": "string"},
                       "flags": {"type": "string", "pattern": "^[imsx]*$"}}})
