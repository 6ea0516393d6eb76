"""Loading the package's JSON Schemas and validating documents against them (jsonschema).

Validators are built once per schema name and cached for the process.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012


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


def schema_errors(name: str, instance: Any, limit: int = 5) -> list[str]:
    """Validate ``instance`` against schema ``name``.

    Returns:
        Up to ``limit`` error strings ``"<json path>: <message>"``, the best match first; ``[]`` if valid.
    """
    v = validator(name)
    errors = list(v.iter_errors(instance))
    if not errors:
        return []
    first = best_match(errors)
    ordered = [first] + [e for e in errors if e is not first]
    return [f"{e.json_path}: {e.message}" for e in ordered[:limit]]
