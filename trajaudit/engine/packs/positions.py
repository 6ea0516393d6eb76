"""Rule-pack YAML with positions: every node's file, line and column (:class:`SourceLoc`), so that
errors point at the exact character and every expression knows where it starts.

Loading never executes anything: the safe loader (libyaml's for shipped packs, the pure-Python one,
whose messages the error paths are written for, for users' files). Aliases that would expand the
pack by more than ``safe_yaml.MAX_ALIAS_NODES`` nodes are refused before the position walk, which
visits every expanded node (``safe_yaml.check_aliases``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trajaudit
from trajaudit.errors import RulePackError

if TYPE_CHECKING:
    import yaml

    import trajaudit.safe_yaml  # noqa: F401 - the attribute's type for mypy (loaded on first use)


def _second_colon(src: str) -> bool:
    """Whether a YAML line is ``key: value`` whose plain value holds ``': '`` too (``assert: a: b``):
    the "mapping values are not allowed" error then comes from an unquoted expression, not indentation."""
    m = re.match(r"\s*(?:-\s+)?[\w.-]+:\s+(.*)", src)
    return m is not None and not m.group(1).startswith(("'", '"', "|", ">")) and ": " in m.group(1)


@dataclass(frozen=True)
class SourceLoc:
    """Where something is in a pack file (1-based line/column); ``indent`` for block scalars."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    indent: int | None = None

    def __str__(self) -> str:
        s = self.file or "<rules>"
        if self.line is not None:
            s += f":{self.line}"
            if self.column is not None:
                s += f":{self.column}"
        return s



def is_shipped_file(file: str | os.PathLike[str]) -> bool:
    """Whether ``file`` is one of the packs shipped in ``trajaudit/rules/`` (package data)."""
    try:
        return Path(file).resolve().is_relative_to(Path(str(resources.files("trajaudit.rules"))).resolve())
    except (OSError, ValueError):
        return False

def _fast_loader() -> Any:
    """The loader of shipped packs: libyaml's safe loader when PyYAML was built with it, else the
    pure-Python one (imports PyYAML)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlDoc:
    """Parsed YAML data plus ``marks[path] = SourceLoc`` for every node."""

    def __init__(self, text: str, file: str | None) -> None:
        self.file = file
        self.lines = text.splitlines()
        # shipped packs (valid, tested) are read with libyaml's parser when present: the same nodes,
        # marks and data (tests/test_schema_fast.py), ~10x faster; user files keep the pure-Python
        # parser, whose error messages the error paths are written for
        import yaml  # only where YAML is parsed: an audit from cached packs imports no PyYAML

        fast = file is not None and is_shipped_file(file)
        loader = _fast_loader() if fast else yaml.SafeLoader
        safe_yaml = trajaudit.safe_yaml
        # one loader composes the node tree (for the marks) and then constructs the data from that same
        # tree, as ``get_single_data`` would — the text is parsed once, not twice
        ld = None
        try:
            ld = loader(text)  # the reader may already reject the text (e.g. a control character)
            node = ld.get_single_node()
            safe_yaml.check_aliases(node)
        except safe_yaml.YAMLLimitError as e:  # aliases expanding too far, an integer or string beyond the limits
            if ld is not None:
                ld.dispose()
            raise RulePackError(str(e), file=file, line=e.line) from None
        except yaml.YAMLError as e:
            if ld is not None:
                ld.dispose()
            mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
            line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
            ctx = caret(self.lines, line, col)
            problem = getattr(e, "problem", None) or str(e)
            if "mapping values are not allowed" in problem and line and _second_colon(self.lines[line - 1]):
                problem += (" — an unquoted ': ' inside a value starts a new key: quote this expression "
                            "(assert: 'x == \"a: b\"') or write it as a block (assert: |)")
            raise RulePackError(f"YAML syntax error: {problem}", file=file, line=line, column=col, context=ctx) from None
        except RecursionError:
            if ld is not None:
                ld.dispose()
            raise RulePackError("YAML nested too deeply", file=file) from None
        try:
            if node is None:
                raise RulePackError("empty rule pack", file=file, line=1, column=1)
            self.marks: dict[tuple[Any, ...], SourceLoc] = {}
            self._walk(node, (), yaml)  # before constructing: merge keys (<<) rewrite the tree while constructing
            try:
                self.data = ld.construct_document(node)
            except yaml.YAMLError as e:  # e.g. a bad tag: composing worked, constructing did not
                raise RulePackError(f"YAML error: {e}", file=file) from None
        finally:
            ld.dispose()

    def _walk(self, node: yaml.Node, path: tuple[Any, ...], yaml: Any) -> None:
        """File the marks of ``node`` and its descendants under ``path`` (``yaml``: the PyYAML module,
        imported once by the caller, not per node)."""
        m = node.start_mark
        loc = SourceLoc(self.file, m.line + 1, m.column + 1)
        if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            first = m.line + 1
            while first < len(self.lines) and not self.lines[first].strip():
                first += 1
            if first < len(self.lines):
                indent = len(self.lines[first]) - len(self.lines[first].lstrip())
                loc = SourceLoc(self.file, first + 1, indent + 1, indent)
        elif isinstance(node, yaml.ScalarNode) and node.style in ("'", '"'):
            loc = SourceLoc(self.file, m.line + 1, m.column + 2, m.column + 1)
        elif isinstance(node, yaml.ScalarNode):
            loc = SourceLoc(self.file, m.line + 1, m.column + 1, m.column)
        self.marks[path] = loc
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark)
                self.marks[path + (("key", key),)] = SourceLoc(self.file, k.start_mark.line + 1, k.start_mark.column + 1)
                self._walk(v, path + (key,), yaml)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._walk(v, path + (i,), yaml)

    def loc(self, path: tuple[Any, ...]) -> SourceLoc:
        """The location of ``path`` or of its nearest ancestor."""
        while path and path not in self.marks:
            path = path[:-1]
        return self.marks.get(path, SourceLoc(self.file, 1, 1))

    def error(self, message: str, path: tuple[Any, ...], rule_id: str | None = None) -> RulePackError:
        """A :class:`RulePackError` at ``path`` with a caret."""
        loc = self.loc(path)
        return RulePackError(message, file=self.file, line=loc.line, column=loc.column, rule_id=rule_id,
                             context=caret(self.lines, loc.line, loc.column))


def caret(lines: list[str], line: int | None, col: int | None) -> str | None:
    """The source line ``line`` (1-based) and a ``^`` under column ``col``, indented; ``None`` when
    the line is outside ``lines``."""
    if line is None or not (1 <= line <= len(lines)):
        return None
    return f"    {lines[line - 1]}\n    {' ' * max((col or 1) - 1, 0)}^"
