"""JSON parsing with a nesting limit, so a pathological document is refused instead of crashing.

Python's ``json`` parser and every recursive walk of its result (schema validation, adapters, evidence
rendering, the claim digests) recurse once or more per level: ``'[' * 5000`` raised ``RecursionError``
out of ``json.loads``, and a document nested a few hundred levels deep could still overflow a later
walk. Trace documents, tool-call arguments and tool outputs are therefore parsed with :func:`loads`,
which refuses more than :data:`MAX_DEPTH` levels of arrays/objects with :class:`NestedTooDeep` (a
``ValueError``, so the callers' "not JSON" handling applies; the loader turns it into a
``TraceFormatError`` naming the file). Real traces nest about 10 levels (tau-bench, Who&When).
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100  # levels of arrays/objects; the real traces nest ~10


class NestedTooDeep(ValueError):
    """A JSON text or value nested more than the limit (``ValueError``: "not usable JSON")."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"nested too deeply (more than {limit} levels of arrays/objects)")
        self.limit = limit


def too_deep(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON value ``doc`` (dicts, lists, scalars) nests more than ``limit`` levels of
    lists/dicts (a scalar is 0 levels, ``[]`` is 1). Iterative: never recurses."""
    stack = [(doc, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth = pop()
        if type(v) is dict:
            items: Any = v.values()
        elif type(v) is list:
            items = v
        else:
            continue
        if depth > limit:
            return True
        for ch in items:
            if type(ch) is dict or type(ch) is list:
                push((ch, depth + 1))
    return False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str | bytes, limit: int = MAX_DEPTH, *, allow_nan: bool = True) -> Any:
    """``json.loads(text)``, refusing documents nested more than ``limit`` levels.

    ``allow_nan=False`` also refuses ``NaN``, ``Infinity`` and ``-Infinity``, which Python's parser
    accepts but JSON does not (used for model answers).

    Raises:
        json.JSONDecodeError: not JSON (as ``json.loads``).
        NestedTooDeep: nested more than ``limit`` levels (also when the parser itself ran out of stack).
        ValueError: a ``NaN``/``Infinity`` constant when ``allow_nan`` is false.
    """
    try:
        doc = json.loads(text) if allow_nan else json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise NestedTooDeep(limit) from None
    if type(doc) is not dict and type(doc) is not list:
        return doc
    # a document cannot nest deeper than it has opening brackets: most texts (tool outputs, arguments)
    # are decided by two C-level counts, without walking the parsed value
    if isinstance(text, str) and text.count("[") + text.count("{") <= limit:
        return doc
    if too_deep(doc, limit):
        raise NestedTooDeep(limit)
    return doc
