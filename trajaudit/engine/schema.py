"""Loading the package's JSON Schemas and validating documents against them (jsonschema).

Validators are built once per schema name and cached for the process.

Fast path (docs/perf.md): :func:`schema_errors` and :func:`is_valid` first ask ``jsonschema-rs`` (a
compiled 2020-12 validator, about 20× cheaper than jsonschema on the trajectory IR, the check every
loaded run goes through). A document it accepts is valid; anything it rejects — or cannot take, such
as a value that is not JSON — is validated again by jsonschema, which stays the authority and writes
every error message, so messages and verdicts are jsonschema's. ``$ref`` resolution of both is
confined to the shipped schemas: nothing is ever fetched.
"""

from __future__ import annotations

import json
import logging
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema
    from referencing import Registry

# jsonschema and referencing (~0.3 s of imports) are imported where a document is validated by them:
# the compiled fast path accepts valid documents without them, so a fresh audit of valid runs never
# loads them (issue 22, start-up)

log = logging.getLogger(__name__)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Return the schema ``trajaudit/schemas/<name>.schema.json`` as a dict.

    Raises:
        FileNotFoundError: no such schema ships with the package.
    """
    text = resources.files("trajaudit.schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _shipped() -> dict[str, dict[str, Any]]:
    """All shipped schemas that have an ``$id``, keyed by it."""
    out = {}
    for entry in resources.files("trajaudit.schemas").iterdir():
        if entry.name.endswith(".schema.json"):
            schema = json.loads(entry.read_text(encoding="utf-8"))
            if "$id" in schema:
                out[schema["$id"]] = schema
    return out


@cache
def _registry() -> Registry:
    """All shipped schemas, keyed by their ``$id``, so schemas can ``$ref`` each other."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    reg: Registry = Registry()
    for uri, schema in _shipped().items():
        reg = reg.with_resource(uri, Resource.from_contents(schema, default_specification=DRAFT202012))
    return reg


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    """A cached validator (the schema's own draft, 2020-12 by default) for the named schema."""
    schema = load_schema(name)
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=_registry())


def _no_fetch(uri: str) -> Any:
    raise ValueError(f"$ref to a schema that does not ship with trajaudit: {uri}")


@cache
def fast_validator(name: str) -> Any:
    """A ``jsonschema_rs`` validator for schema ``name`` (its own draft; formats not asserted, as in
    jsonschema; ``$ref`` only to shipped schemas), or ``None`` when it cannot be built (then only
    jsonschema validates)."""
    import jsonschema_rs

    try:
        registry = jsonschema_rs.Registry([(uri, contents) for uri, contents in _shipped().items()])
        return jsonschema_rs.validator_for(load_schema(name), registry=registry, retriever=_no_fetch,
                                           validate_formats=False)
    except Exception as e:  # noqa: BLE001 - the fast path is optional; jsonschema stays correct
        log.debug("schema %s: no fast path (%s)", name, e)
        return None


def _fast_ok(name: str, instance: Any) -> bool:
    fast = fast_validator(name)
    if fast is None:
        return False
    try:
        return bool(fast.is_valid(instance))
    except Exception:  # noqa: BLE001 - e.g. a value that is not JSON: let jsonschema decide
        return False


def fast_accepts(name: str, instance: Any) -> bool:
    """True when the compiled fast path accepts ``instance`` against schema ``name`` (then it is valid);
    False means "ask jsonschema" (:func:`validator`), which decides and writes the messages."""
    return _fast_ok(name, instance)


def is_valid(name: str, instance: Any) -> bool:
    """True when ``instance`` is valid against schema ``name`` (fast path first, jsonschema decides)."""
    return _fast_ok(name, instance) or validator(name).is_valid(instance)


def schema_errors(name: str, instance: Any, limit: int = 5) -> list[str]:
    """Validate ``instance`` against schema ``name`` (a compiled check first, see the module docstring;
    jsonschema decides and reports whenever it rejects).

    Returns:
        Up to ``limit`` error strings ``"<json path>: <message>"``, the best match first; ``[]`` if valid.
    """
    if _fast_ok(name, instance):
        return []
    v = validator(name)
    errors = list(v.iter_errors(instance))
    if not errors:
        return []
    from jsonschema.exceptions import best_match

    first = best_match(errors)
    ordered = [first] + [e for e in errors if e is not first]
    return [f"{e.json_path}: {e.message}" for e in ordered[:limit]]
