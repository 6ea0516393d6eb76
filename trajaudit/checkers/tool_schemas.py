"""Tool-argument schemas: reading a run's OpenAI function-schema list and checking each tool's
``parameters`` against the JSON Schema metaschema. The per-call argument checks built on them are
the ``tool_args_schema`` checker (:mod:`trajaudit.checkers.builtin`) and the tool-schema rules
(:mod:`trajaudit.engine.packs.tool_rules`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trajaudit import regular_files, safe_json
from trajaudit.errors import TrajauditError

__all__ = ["ToolSchemaError", "check_tool_parameters", "load_tools", "read_tool_list", "tool_schemas"]


class ToolSchemaError(TrajauditError):
    """A tools file or list is not a list of OpenAI function schemas.

    Attributes:
        message: what is wrong. file: the tools file, or ``None``. index: the offending element.
    """

    def __init__(self, message: str, *, file: str | None = None, index: int | None = None) -> None:
        self.message = message
        self.file = file
        self.index = index
        where = ", ".join(x for x in (file, f"element {index}" if index is not None else None) if x)
        super().__init__(f"{where}: {message}" if where else message)


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """Read an OpenAI function-schema list (``[{"type": "function", "function": {...}}]`` or bare functions).

    Each function's ``parameters`` (when present) must be a JSON Schema for an object: it is checked
    against the JSON Schema metaschema (the draft its ``$schema`` names, else 2020-12) with
    jsonschema's ``check_schema``, and a ``type`` other than ``"object"`` is refused (OpenAI
    function parameters describe an arguments object). See :func:`check_tool_parameters`.

    Raises:
        TrajauditError: unreadable file, invalid JSON, or not a list of function schemas.
        ToolSchemaError: a tool's ``parameters`` is not a valid object JSON Schema (names the file,
            the element, the tool and the problem).
    """
    return tool_schemas(_tools_json(path), str(path))


def read_tool_list(path: str | Path) -> list[dict[str, Any]]:
    """The file's schema list as written (wrapped ``{"type": "function", …}`` or bare functions),
    after the checks of :func:`load_tools`; the file is read once.

    Raises:
        TrajauditError, ToolSchemaError: as :func:`load_tools`.
    """
    data = _tools_json(path)
    tool_schemas(data, str(path))
    return data


def _tools_json(path: str | Path) -> Any:
    try:
        return safe_json.loads(regular_files.read_text(path))
    except OSError as e:  # the reason alone: str(e) repeats the path after '[Errno 22]'
        raise TrajauditError(f"{path}: cannot read tool schemas: {e.strerror or e}") from None
    except ValueError as e:
        raise TrajauditError(f"{path}: cannot read tool schemas: {e}") from None


def tool_schemas(data: Any, origin: str = "tools") -> list[dict[str, Any]]:
    """The function objects of an in-memory OpenAI function-schema list, checked as :func:`load_tools`
    checks a file's (``origin`` names the source in messages).

    Raises:
        TrajauditError: not a list of function schemas. ToolSchemaError: a bad ``parameters``.
    """
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise TrajauditError(f"{origin}: tool schemas must be a JSON list of function objects")
    out = []
    for i, x in enumerate(data):
        fn = x.get("function", x)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise TrajauditError(f"{origin}: element {i} is not a function schema (no 'name')")
        check_tool_parameters(fn, file=origin, index=i)
        out.append(fn)
    return out


def check_tool_parameters(fn: dict[str, Any], *, file: str | None = None, index: int | None = None) -> None:
    """Check one function schema's ``parameters`` against the JSON Schema metaschema.

    Args:
        fn: a function object (``{"name", "parameters"?}``); a missing ``parameters`` is accepted
            (a tool without arguments).
        file, index: where it came from, for the message.

    Raises:
        ToolSchemaError: ``parameters`` is not an object, declares a ``type`` other than
            ``"object"``, or breaks the metaschema (the best-matching error, with its JSON path).
    """
    if "parameters" not in fn:
        return
    params = fn["parameters"]
    name = fn.get("name")
    if not isinstance(params, dict):
        raise ToolSchemaError(f"tool {name!r}: parameters must be a JSON Schema object, got "
                              f"{type(params).__name__} {json.dumps(params)[:80]}", file=file, index=index)
    if "type" in params and params["type"] != "object":
        raise ToolSchemaError(f"tool {name!r}: parameters must describe an object (\"type\": \"object\"), got "
                              f"\"type\": {json.dumps(params['type'])[:80]}", file=file, index=index)
    if _meta_fast_ok(params):
        return
    # jsonschema (~0.2 s of imports) only for a schema the fast path does not accept (issue 22, start-up)
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for

    try:
        validator_for(params, default=Draft202012Validator).check_schema(params)
    except SchemaError as e:
        where = e.json_path.replace("$", "parameters", 1)
        raise ToolSchemaError(f"tool {name!r}: invalid JSON Schema at {where}: {e.message}",
                              file=file, index=index) from None


#: keywords whose metaschema entry carries a ``format`` (regex, uri, uri-reference) that jsonschema
#: checks and jsonschema-rs does not, plus ``$schema`` (which picks another draft)
_FORMAT_KEYS = frozenset({"pattern", "patternProperties", "$id", "$schema", "$ref", "$dynamicRef", "$vocabulary",
                          "$anchor", "$dynamicAnchor"})


def _meta_fast_ok(params: dict[str, Any]) -> bool:
    """True when jsonschema-rs accepts ``params`` against the draft 2020-12 metaschema and the schema
    has none of :data:`_FORMAT_KEYS` (at any depth, as any key): then jsonschema's ``check_schema``
    accepts it too (the same metaschema; the formats it alone checks do not occur). False means "ask
    jsonschema", which decides and writes the message. ~40x cheaper on valid tool schemas."""
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - a core dependency; without it jsonschema decides
        return False
    stack: list[Any] = [params]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if not _FORMAT_KEYS.isdisjoint(v):
                return False
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    try:
        return bool(jsonschema_rs.meta.is_valid(params))
    except Exception:  # noqa: BLE001 - anything it cannot take: jsonschema decides
        return False
