"""YAML data loading with a nesting limit, for every user-supplied YAML file that is not a rule pack.

PyYAML's composer and constructor recurse once or more per level of nesting: a mapping, citation
mapping, taxonomy or LLM config file of a few thousand ``[`` raised ``RecursionError`` out of
``yaml.safe_load`` (a traceback from ``show --mapping``), and a document of a few hundred levels could
still overflow a later recursive walk (schema validation). :func:`load` turns both into
:class:`YAMLTooDeep`, a ``yaml.YAMLError``, so every caller's existing "invalid YAML" handling reports
it with the file's name. Rule packs have their own loader with line marks (``pack_yaml.py``), which
reports the same condition as a ``RulePackError``.
"""

from __future__ import annotations

from typing import Any

import yaml

from trajaudit.engine.safe_json import MAX_DEPTH, too_deep


class YAMLTooDeep(yaml.YAMLError):
    """A YAML text nested more than :data:`~trajaudit.engine.safe_json.MAX_DEPTH` levels of
    sequences/mappings (or too deep for the parser to compose)."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"YAML nested too deeply (more than {limit} levels of lists/mappings)")
        self.limit = limit


def load(text: str, loader: Any = yaml.SafeLoader) -> Any:
    """Parse one YAML document with a safe loader; data only, nothing in it is executed.

    Args:
        text: the YAML text.
        loader: a safe loader class (``yaml.SafeLoader`` or ``yaml.CSafeLoader``).

    Returns:
        The data (dicts, lists, scalars), ``None`` for an empty document.

    Raises:
        YAMLTooDeep: more than ``MAX_DEPTH`` (100) levels of lists/mappings.
        yaml.YAMLError: any other syntax error (with its mark).
    """
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader (SafeLoader or CSafeLoader)
    except RecursionError:
        raise YAMLTooDeep() from None
    if too_deep(doc):
        raise YAMLTooDeep()
    return doc
