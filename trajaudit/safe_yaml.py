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

The same walk applies the rest of the :class:`~trajaudit.safe_json.Limits` to scalars before
anything is constructed: an integer of more than ``int_digits`` digits (PyYAML's ``int()`` raised a
bare ``ValueError`` past Python's 4,300-digit limit) and a string of more than ``string_chars``
characters are :class:`YAMLLimitError` naming the line and the limit.
"""

from __future__ import annotations

from typing import Any

import yaml

from trajaudit.safe_json import LIMITS, MAX_ALIAS_NODES, MAX_DEPTH, Limits, too_deep


class YAMLLimitError(yaml.YAMLError):
    """A YAML document exceeds one of the :class:`~trajaudit.safe_json.Limits`.

    Attributes:
        limit_name: ``depth``, ``int_digits``, ``string_chars`` or ``alias_nodes``.
        limit: the limit's value. line: the 1-based line of the offending node, when known.
    """

    limit_name = "limit"
    line: int | None = None


class YAMLTooDeep(YAMLLimitError):
    """A YAML text nested more than :data:`~trajaudit.safe_json.MAX_DEPTH` levels of
    sequences/mappings (or too deep for the parser to compose)."""

    limit_name = "depth"

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"YAML nested too deeply (more than {limit} levels of lists/mappings)")
        self.limit = limit


class YAMLScalarTooLong(YAMLLimitError):
    """A YAML integer with more digits, or a string with more characters, than the limit."""

    def __init__(self, limit_name: str, limit: int, line: int | None, got: int) -> None:
        what = (f"integer too long ({got} digits): the limit is {limit} digits" if limit_name == "int_digits"
                else f"string too long ({got} characters): the limit is {limit} characters")
        super().__init__(f"YAML {what}" + (f" (line {line})" if line is not None else ""))
        self.limit_name, self.limit, self.line = limit_name, limit, line


class YAMLAliasBomb(YAMLLimitError):
    """A YAML document whose aliases expand it by more than :data:`MAX_ALIAS_NODES` nodes, or refer to
    an enclosing node (a recursive structure)."""

    def __init__(self, limit: int = MAX_ALIAS_NODES, recursive: bool = False) -> None:
        super().__init__("YAML aliases refer to an enclosing node (a recursive structure)" if recursive else
                         f"YAML anchors/aliases expand the document by more than {limit} nodes")
        self.limit = limit

    limit_name = "alias_nodes"


_INT_TAG = "tag:yaml.org,2002:int"


def _check_scalar(node: yaml.ScalarNode, limits: Limits) -> None:
    """Refuse a scalar beyond ``limits``: an integer of too many decimal digits (hex/octal/binary
    conversions are not limited by Python and stay allowed), a string of too many characters."""
    value = node.value
    line = node.start_mark.line + 1 if node.start_mark is not None else None
    if len(value) > limits.string_chars:
        raise YAMLScalarTooLong("string_chars", limits.string_chars, line, len(value))
    if node.tag == _INT_TAG and len(value) > limits.int_digits:
        digits = sum(ch.isdigit() for ch in value)
        if digits > limits.int_digits and not value.lstrip("+-").startswith(("0x", "0o", "0b")):
            raise YAMLScalarTooLong("int_digits", limits.int_digits, line, digits)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_aliases(root: yaml.Node | None, limit: int | None = None, limits: Limits = LIMITS) -> None:
    """Refuse a composed YAML node graph whose aliases expand it by more than ``limit`` nodes
    (default ``limits.alias_nodes``), or holding a scalar beyond ``limits`` (:func:`_check_scalar`).

    Time and memory linear in the number of distinct nodes (each expanded size is computed once, by an
    iterative depth-first walk: no recursion).

    Raises:
        YAMLAliasBomb: the expanded tree has more than ``distinct nodes + limit`` nodes, or an alias
            refers to one of its own ancestors.
        YAMLScalarTooLong: an integer or string beyond ``limits``.
    """
    if root is None:
        return
    limit = limits.alias_nodes if limit is None else limit
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
        if isinstance(node, yaml.ScalarNode):
            _check_scalar(node, limits)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))
    if size[id(root)] > len(size) + limit:
        raise YAMLAliasBomb(limit)


def load(text: str, loader: Any = yaml.SafeLoader, limits: Limits = LIMITS) -> Any:
    """Parse one YAML document with a safe loader; data only, nothing in it is executed.

    Args:
        text: the YAML text.
        loader: a safe loader class (``yaml.SafeLoader`` or ``yaml.CSafeLoader``).
        limits: the :class:`~trajaudit.safe_json.Limits` (default ``LIMITS``).

    Returns:
        The data (dicts, lists, scalars), ``None`` for an empty document.

    Raises:
        YAMLTooDeep: more than ``MAX_DEPTH`` (100) levels of lists/mappings.
        YAMLAliasBomb: aliases expanding the document by more than ``MAX_ALIAS_NODES`` nodes.
        YAMLScalarTooLong: an integer or string beyond ``limits`` (named with its line).
        yaml.YAMLError: any other syntax error (with its mark).
    """
    ld = loader(text)  # a safe loader (SafeLoader or CSafeLoader): data only
    try:
        node = ld.get_single_node()
        check_aliases(node, limits=limits)
        doc = ld.construct_document(node) if node is not None else None
    except RecursionError:
        raise YAMLTooDeep(limits.depth) from None
    finally:
        ld.dispose()
    if too_deep(doc, limits.depth):
        raise YAMLTooDeep(limits.depth)
    return doc


def describe(error: yaml.YAMLError) -> str:
    """``error`` in one line for a message that already names the file: a syntax error as ``not valid
    YAML at line 5, column 4: expected <block end>, but found '<block mapping start>'`` (PyYAML's own
    text spans several lines, each saying ``in "<unicode string>"``: the text was read before it was
    parsed, so the parser never knew the file); a limit (:class:`YAMLLimitError`) as its message."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None)
    if mark is None or not problem:
        return str(error)
    return f"not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
