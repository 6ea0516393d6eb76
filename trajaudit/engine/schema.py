"""Loading the package's JSON Schemas and validating documents against them (jsonschema).

Validators are built once per schema name and cached for the process.

Fast path (docs/perf.md): :func:`schema_errors` first runs a validator compiled to Python by
``fastjsonschema`` (about 15× faster than jsonschema on the trajectory IR). A document it accepts is
valid; anything it rejects is re-validated by jsonschema, which stays the authority and writes every
error message. The fast path is built only for schemas whose keywords all mean the same in
fastjsonschema's draft 7 and in draft 2020-12 (:data:`FAST_KEYWORDS`); other schemas always go
through jsonschema. Its ``$ref`` resolution is confined to the shipped schemas (no network).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

log = logging.getLogger(__name__)

#: Keywords whose meaning is the same in draft 7 (fastjsonschema) and 2020-12 (the shipped schemas),
#: given that ``$ref`` has no sibling assertions and ``items`` is a single schema (both checked).
FAST_KEYWORDS = frozenset({
    "$schema", "$id", "$defs", "$ref", "title", "description", "type", "enum", "const", "required",
    "properties", "additionalProperties", "propertyNames", "items", "minItems", "maxItems", "minLength",
    "maxLength", "minimum", "maximum", "pattern", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
})
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description"})


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Return the schema ``trajaudit/schemas/<name>.schema.json`` as a dict.

    Raises:
        FileNotFoundError: no such schema ships with the package.
    """
    text = resources.files("trajaudit.schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _registry() -> Registry:
    """All shipped schemas, keyed by their ``$id``, so schemas can ``$ref`` each other."""
    reg: Registry = Registry()
    for entry in resources.files("trajaudit.schemas").iterdir():
        if entry.name.endswith(".schema.json"):
            schema = json.loads(entry.read_text(encoding="utf-8"))
            if "$id" in schema:
                reg = reg.with_resource(schema["$id"], Resource.from_contents(schema, default_specification=DRAFT202012))
    return reg


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    """A cached validator (the schema's own draft, 2020-12 by default) for the named schema."""
    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=_registry())


def _fast_compatible(node: Any, where: str = "") -> str | None:
    """``None`` when every keyword under ``node`` is in :data:`FAST_KEYWORDS` (used the same way in
    both drafts), else the path of the first one that is not."""
    if isinstance(node, bool):
        return None
    if not isinstance(node, dict):
        return where or "/"
    for k, v in node.items():
        if k not in FAST_KEYWORDS:
            return f"{where}/{k}"
        if k == "$ref" and set(node) - _ANNOTATIONS - {"$ref"}:
            return f"{where}/$ref (with sibling keywords)"
        if k == "items" and not isinstance(v, (dict, bool)):
            return f"{where}/items (array form)"
        if k in ("properties", "$defs"):
            subs = list(v.items()) if isinstance(v, dict) else [("?", v)]
        elif k in ("allOf", "anyOf", "oneOf"):
            subs = list(enumerate(v)) if isinstance(v, list) else [("?", v)]
        elif k in ("additionalProperties", "propertyNames", "items", "not", "if", "then", "else"):
            subs = [("", v)]
        else:
            continue
        for sk, sv in subs:
            bad = _fast_compatible(sv, f"{where}/{k}" + (f"/{sk}" if sk != "" else ""))
            if bad:
                return bad
    return None


@cache
def fast_validator(name: str) -> Callable[[Any], Any] | None:
    """A fastjsonschema validator for schema ``name`` (raises on invalid input), or ``None`` when the
    schema uses a keyword outside :data:`FAST_KEYWORDS` (then only jsonschema validates it)."""
    schema = load_schema(name)
    bad = _fast_compatible(schema)
    if bad is not None:
        log.debug("schema %s: no fast path (keyword %s)", name, bad)
        return None
    import fastjsonschema

    def local_only(uri: str) -> Any:
        """Resolve a ``$ref`` to another shipped schema; never fetch."""
        try:
            return _registry().contents(uri.split("#", 1)[0])
        except LookupError as e:  # referencing's NoSuchResource
            raise ValueError(f"$ref to a schema that does not ship with trajaudit: {uri}") from e

    return fastjsonschema.compile(schema, handlers={"https": local_only, "http": local_only},
                                  use_default=False, use_formats=False)


def is_valid(name: str, instance: Any) -> bool:
    """True when ``instance`` is valid against schema ``name`` (fast path first, jsonschema decides)."""
    fast = fast_validator(name)
    if fast is not None:
        try:
            fast(instance)
            return True
        except Exception:  # noqa: BLE001 - any rejection (or fast-path failure) defers to jsonschema
            pass
    return validator(name).is_valid(instance)


def schema_errors(name: str, instance: Any, limit: int = 5) -> list[str]:
    """Validate ``instance`` against schema ``name`` (a fast compiled check first, see the module
    docstring; jsonschema decides and reports whenever it rejects).

    Returns:
        Up to ``limit`` error strings ``"<json path>: <message>"``, the best match first; ``[]`` if valid.
    """
    fast = fast_validator(name)
    if fast is not None:
        try:
            fast(instance)
            return []
        except Exception:  # noqa: BLE001 - any rejection (or fast-path failure) defers to jsonschema
            pass
    v = validator(name)
    errors = list(v.iter_errors(instance))
    if not errors:
        return []
    first = best_match(errors)
    ordered = [first] + [e for e in errors if e is not first]
    return [f"{e.json_path}: {e.message}" for e in ordered[:limit]]
