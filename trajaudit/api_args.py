"""Argument checks shared by the public API's entry points (``trajaudit.audit``, ``load``,
``load_many``, ``load_path``, ``evaluate``, ``load_pack``).

Each check either returns the argument in the one form the internals use, or raises
:class:`~trajaudit.errors.ArgumentTypeError` naming the function, the argument, what was given and
what is accepted — instead of a ``TypeError``/``AttributeError`` from deep inside pathlib or the
engine. A bare ``str``/``os.PathLike`` where a list of paths or packs is accepted means ONE item
(never its characters). See docs/api.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from trajaudit.errors import ArgumentTypeError

PATH = "a path (str or os.PathLike)"
SOURCE = "a Trajectory, a trace path (str or os.PathLike), or a parsed trace document (dict or list)"
PATHS = "a path (str or os.PathLike) or an iterable of paths"
PACKS = ("a rule pack (a path, a shipped pack name, or a RulePack) or a list of them")
TOOLS_LIST = "a list of OpenAI function schemas (dicts)"


def is_path(value: Any) -> bool:
    """``True`` for a ``str`` or an ``os.PathLike`` (not ``bytes``)."""
    return isinstance(value, (str, os.PathLike))


def check_source(function: str, argument: str, value: Any) -> Any:
    """A run to load: a Trajectory, a path (returned as ``str``), or a parsed dict/list document.

    Raises:
        ArgumentTypeError: anything else (``None``, a number, ``bytes`` …).
    """
    from trajaudit.engine.trace.ir import Trajectory

    if isinstance(value, (Trajectory, dict, list, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ArgumentTypeError(function, argument, value, SOURCE)


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


def check_packs(function: str, value: Any) -> tuple[Any, ...]:
    """``rules``: pack references as a tuple of ``str`` (paths, shipped names) and ``RulePack``
    objects. A single ``str``/``os.PathLike``/``RulePack`` is ONE pack; ``None`` means none.

    Raises:
        ArgumentTypeError: not a pack nor an iterable of packs, or an element is not a pack.
    """
    from trajaudit.engine.packs.pack import RulePack

    def one(item: Any, where: str) -> Any:
        if isinstance(item, RulePack):
            return item
        if is_path(item):
            return os.fspath(item)
        raise ArgumentTypeError(function, where, item, "a rule pack (a path, a shipped pack name, or a RulePack)")

    if value is None:
        return ()
    if is_path(value) or isinstance(value, RulePack):
        return (one(value, "rules"),)
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ArgumentTypeError(function, "rules", value, PACKS)
    return tuple(one(item, f"rules[{i}]") for i, item in enumerate(value))


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


def check_llm(function: str, value: Any) -> Any:
    """``llm``: ``None`` or a :class:`trajaudit.llm.LLMConfig`.

    Raises:
        ArgumentTypeError: anything else (e.g. a URL string).
    """
    if value is None:
        return None
    from trajaudit.llm.config import LLMConfig

    if not isinstance(value, LLMConfig):
        raise ArgumentTypeError(function, "llm", value, "None or a trajaudit.llm.LLMConfig "
                                "(e.g. trajaudit.llm.build_config({'base_url': URL, 'model': NAME}))")
    return value


def check_mapping(function: str, argument: str, value: Any) -> Mapping[str, Any] | None:
    """``None`` or a mapping (e.g. ``load_pack(params=)``).

    Raises:
        ArgumentTypeError: anything else.
    """
    if value is None or isinstance(value, Mapping):
        return value
    raise ArgumentTypeError(function, argument, value, "None or a mapping of name -> value")
