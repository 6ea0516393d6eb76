"""YAML data loading with a nesting limit, for every user-supplied YAML file that is not a rule pack.

PyYAML's composer and constructor recurse once or more per level of nesting: a mapping, citation
mapping, taxonomy or LLM config file of a few thousand ``[`` raised ``RecursionError`` out of
``yaml.safe_load`` (a traceback from ``show --mapping``), and a document of a few hundred levels could
still overflow a later recursive walk (schema validation). :func:`load` turns both into
:class:`YAMLTooDeep`, a ``yaml.YAMLError``, so every caller's existing "invalid YAML" handling reports
it with the file's name. Rule packs have their own loader with line marks (``pack_yaml.py``), which
reports the same condition as a ``RulePackError``.

Anchors and aliases are kept (a file may share a block), but their expansion is bounded: PyYAML
builds an alias as a second reference to the same object, so a "billion laughs" file of a few hundred
bytes (nine anchors, each a list of nine aliases of the previous one) loads instantly, and then every
walk of the data — the nesting check, schema validation, the rule-pack loader's position map — visits
its 9^9 expanded nodes (a six-level one took the rule-pack loader 5 s and 420 MB; nine levels, hours).
:func:`check_aliases` measures the expansion on the composed node graph (each distinct node once)
and refuses aliases that add more than :data:`MAX_ALIAS_NODES` nodes, or that refer to their own
ancestor (a recursive structure): :class:`YAMLAliasBomb`.
"""

from __future__ import annotations

from typing import Any

import yaml

from trajaudit.safe_json import MAX_DEPTH, too_deep


class YAMLTooDeep(yaml.YAMLError):
    """A YAML text nested more than :data:`~trajaudit.safe_json.MAX_DEPTH` levels of
    sequences/mappings (or too deep for the parser to compose)."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"YAML nested too deeply (more than {limit} levels of lists/mappings)")
        self.limit = limit


#: Nodes that aliases may add to a YAML document when expanded (a shared block used a few times adds
#: its size a few times; real mappings, taxonomies and packs add none or a few hundred).
MAX_ALIAS_NODES = 100_000


class YAMLAliasBomb(yaml.YAMLError):
    """A YAML document whose aliases expand it by more than :data:`MAX_ALIAS_NODES` nodes, or refer to
    an enclosing node (a recursive structure)."""

    def __init__(self, limit: int = MAX_ALIAS_NODES, recursive: bool = False) -> None:
        super().__init__("YAML aliases refer to an enclosing node (a recursive structure)" if recursive else
                         f"YAML anchors/aliases expand the document by more than {limit} nodes")
        self.limit = limit


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_aliases(root: yaml.Node | None, limit: int = MAX_ALIAS_NODES) -> None:
    """Refuse a composed YAML node graph whose aliases expand it by more than ``limit`` nodes.

    Time and memory linear in the number of distinct nodes (each expanded size is computed once, by an
    iterative depth-first walk: no recursion).

    Raises:
        YAMLAliasBomb: the expanded tree has more than ``distinct nodes + limit`` nodes, or an alias
            refers to one of its own ancestors.
    """
    if root is None:
        return
    size: dict[int, int] = {}
    open_: set[int] = set()  # the nodes on the current path (entered, not yet left)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        k = id(node)
        if leaving:
            open_.discard(k)
            size[k] = 1 + sum(size[id(c)] for c in _children(node))
            continue
        if k in size:
            continue
        if k in open_:
            raise YAMLAliasBomb(limit, recursive=True)
        open_.add(k)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))
    if size[id(root)] > len(size) + limit:
        raise YAMLAliasBomb(limit)


def load(text: str, loader: Any = yaml.SafeLoader) -> Any:
    """Parse one YAML document with a safe loader; data only, nothing in it is executed.

    Args:
        text: the YAML text.
        loader: a safe loader class (``yaml.SafeLoader`` or ``yaml.CSafeLoader``).

    Returns:
        The data (dicts, lists, scalars), ``None`` for an empty document.

    Raises:
        YAMLTooDeep: more than ``MAX_DEPTH`` (100) levels of lists/mappings.
        YAMLAliasBomb: aliases expanding the document by more than ``MAX_ALIAS_NODES`` nodes.
        yaml.YAMLError: any other syntax error (with its mark).
    """
    ld = loader(text)  # a safe loader (SafeLoader or CSafeLoader): data only
    try:
        node = ld.get_single_node()
        check_aliases(node)
        doc = ld.construct_document(node) if node is not None else None
    except RecursionError:
        raise YAMLTooDeep() from None
    finally:
        ld.dispose()
    if too_deep(doc):
        raise YAMLTooDeep()
    return doc
