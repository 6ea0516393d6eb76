"""Argument checks shared by the public API's entry points (``trajaudit.audit``, ``load``,
``load_many``, ``load_path``, ``evaluate``, ``load_pack``).

Each check either returns the argument in the one form the internals use, or raises
:class:`~trajaudit.errors.ArgumentTypeError` naming the function, the argument, what was given and
what is accepted — instead of a ``TypeError``/``AttributeError`` from deep inside pathlib or the
engine. A bare ``str``/``os.PathLike`` where a list of paths or packs is accepted means ONE item
(never its characters). See docs/api.md.

The checks of a value of one of the package's own types live with that type (``check_source`` in
``engine/trace/loader.py``, ``check_packs`` in ``engine/packs/pack.py``, ``check_llm`` in
``llm/config.py``), so that this module, used everywhere, imports none of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from trajaudit.errors import ArgumentTypeError

__all__ = ["check_mapping", "check_name", "check_path", "check_paths", "check_record", "check_tool_list",
           "check_tools", "is_path"]

PATH = "a path (str or os.PathLike)"
SOURCE = "a Trajectory, a trace path (str or os.PathLike), or a parsed trace document (dict or list)"
PATHS = "a path (str or os.PathLike) or an iterable of paths"
PACKS = ("a rule pack (a path, a shipped pack name, or a RulePack) or a list of them")
TOOLS_LIST = "a list of OpenAI function schemas (dicts)"


def is_path(value: Any) -> bool:
    """``True`` for a ``str`` or an ``os.PathLike`` (not ``bytes``)."""
    return isinstance(value, (str, os.PathLike))


def check_path(function: str, argument: str, value: Any) -> str | os.PathLike[str]:
    """One file path.

    Raises:
        ArgumentTypeError: not a ``str``/``os.PathLike``.
    """
    if not is_path(value):
        raise ArgumentTypeError(function, argument, value, PATH)
    return value


def check_paths(function: str, argument: str, value: Any) -> list[str | os.PathLike[str]]:
    """A list of paths; a single ``str``/``os.PathLike`` is ONE path (not its characters).

    Raises:
        ArgumentTypeError: not a path nor an iterable of paths, or an element is not a path.
    """
    if is_path(value):
        return [value]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ArgumentTypeError(function, argument, value, PATHS)
    items = list(value)
    for i, item in enumerate(items):
        if not is_path(item):
            raise ArgumentTypeError(function, f"{argument}[{i}]", item, PATH)
    return items


def check_record(function: str, value: Any) -> int | None:
    """``record``: ``None`` or a 0-based ``int`` (a ``bool`` is refused).

    Raises:
        ArgumentTypeError: anything else (e.g. the string ``"1"``).
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ArgumentTypeError(function, "record", value, "None or a 0-based int")


def check_name(function: str, argument: str, value: Any) -> str:
    """A name (strategy, taxonomy …): a ``str``.

    Raises:
        ArgumentTypeError: not a ``str``.
    """
    if not isinstance(value, str):
        raise ArgumentTypeError(function, argument, value, "a name (str)")
    return value


def check_tool_list(function: str, value: Any) -> list[dict[str, Any]] | None:
    """``tools`` given in memory: ``None`` or a list/tuple of dicts (OpenAI function schemas,
    ``{"type": "function", "function": {...}}`` or bare ``{"name", "parameters"}``).

    Raises:
        ArgumentTypeError: anything else.
    """
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise ArgumentTypeError(function, "tools", value, f"None or {TOOLS_LIST}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ArgumentTypeError(function, f"tools[{i}]", item, "an OpenAI function schema (a dict)")
    return list(value)


def check_tools(function: str, value: Any) -> str | tuple[dict[str, Any], ...] | None:
    """``audit(tools=)``: ``None``, a tools JSON file path (returned as ``str``), or the function
    schemas themselves (returned as a tuple of dicts).

    Raises:
        ArgumentTypeError: anything else.
    """
    if value is None:
        return None
    if is_path(value):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return tuple(check_tool_list(function, value) or ())
    raise ArgumentTypeError(function, "tools", value, f"None, a tools JSON file path, or {TOOLS_LIST}")


def check_mapping(function: str, argument: str, value: Any) -> Mapping[str, Any] | None:
    """``None`` or a mapping (e.g. ``load_pack(params=)``).

    Raises:
        ArgumentTypeError: anything else.
    """
    if value is None or isinstance(value, Mapping):
        return value
    raise ArgumentTypeError(function, argument, value, "None or a mapping of name -> value")
