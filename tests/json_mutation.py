"""Random edits of JSON documents for differential tests of schema fast paths (test_schema_fast,
test_pack_cache): replace a value, delete a key or item, or add a key somewhere in the document."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st


def json_values(words: list[str], keys: list[str]) -> st.SearchStrategy[Any]:
    """Small JSON values built from ``words`` (strings) and ``keys`` (object keys)."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
                        st.sampled_from(words))
    return st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=2),
                                                     st.dictionaries(st.sampled_from(keys), c, max_size=2)),
                        max_leaves=4)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into ``doc`` (the first four items of a list), the root first."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            out += paths(v, prefix + (i,))
    return out


def mutate(doc: Any, data: Any, values: st.SearchStrategy[Any], new_keys: list[Any]) -> None:
    """Apply 1–3 random edits to ``doc`` in place (``data``: hypothesis's ``st.data()``).

    Every inserted value is a deep copy: ``st.sampled_from`` hands out the same object each time, and
    inserting it as is let an "add" put a dict inside itself (a cycle) and let one example's edits
    leak into the next (hypothesis then reports the test as flaky)."""
    for _ in range(data.draw(st.integers(1, 3))):
        inner = paths(doc)[1:]
        if not inner:  # every key deleted
            return
        path = data.draw(st.sampled_from(inner))
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        op = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if op == "replace":
            parent[path[-1]] = copy.deepcopy(data.draw(values))
        elif op == "delete":
            del parent[path[-1]]
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][data.draw(st.sampled_from(new_keys))] = copy.deepcopy(data.draw(values))
